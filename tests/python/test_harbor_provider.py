"""Harbor's own conformance check of ``envcraft.harbor:EnvcraftEnvironment``: Harbor's CLI
(``target/harbor-venv``, harbor 0.26 under Python 3.12) runs a tiny task written here with the
``oracle`` agent (reward 1.0) and the ``nop`` agent (reward 0.0) on a private ``envcraft
serve`` the provider starts, over the host's system paths (``--ek base=host``); and refuses,
before any session, a task whose network mode envcraft cannot enforce, whose image can be
neither found nor pulled, or (with ``--ek url``) that asks for its image. Tasks over their own
images are in ``test_harbor_images.py``.

Skipped loudly without Harbor's venv or the envcraft binary; failing under
``ENVCRAFT_TEST_REQUIRE=all``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, envcraft_binary, require

HARBOR = REPO / "target" / "harbor-venv" / "bin" / "harbor"

TASK_TOML = """\
schema_version = "1.4"

[verifier]
timeout_sec = 60.0

[agent]
timeout_sec = 60.0

[environment]
network_mode = "{network}"
"""

TEST_SH = """\
#!/bin/bash
# The agent's file in the task's working directory, the solution uploaded by the oracle, the
# reward where Harbor reads it.
if [ "$(cat /app/hello.txt 2>/dev/null)" = "hello" ] && [ "$(pwd)" != / ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""

SOLVE_SH = """\
#!/bin/bash
echo hello > /app/hello.txt
"""


def write_task(root: Path, network: str = "no-network") -> Path:
    task = root / "hello"
    for d in ("tests", "solution", "environment"):
        (task / d).mkdir(parents=True)
    (task / "task.toml").write_text(TASK_TOML.format(network=network))
    (task / "instruction.md").write_text('Write "hello" to /app/hello.txt.\n')
    (task / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\nWORKDIR /app\n")
    for path, text in (("tests/test.sh", TEST_SH), ("solution/solve.sh", SOLVE_SH)):
        (task / path).write_text(text)
        (task / path).chmod(0o755)
    return task


def harbor_run(tmp: Path, task: Path, agent: str, job: str, *ek: str, extra_env=None):
    """``harbor run`` of ``task`` with ``agent`` through the provider (``extra_env`` added to
    its environment): the job's directory and the finished process."""
    binary = envcraft_binary()
    require(HARBOR.exists(), f"no Harbor CLI at {HARBOR} (make target/harbor-venv/.ready)")
    require(binary is not None, "no envcraft binary (cargo build, or set ENVCRAFT_BIN)")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "clients" / "python" / "src")
    env["ENVCRAFT_BIN"] = str(binary)
    # Offline: LiteLLM (imported by Harbor) would fetch its model cost map at exit.
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    env.update(extra_env or {})
    argv = [
        str(HARBOR), "run", "-p", str(task), "-a", agent,
        "--environment-import-path", "envcraft.harbor:EnvcraftEnvironment",
        *[a for kv in ek for a in ("--ek", kv)],
        "-o", str(tmp / "jobs"), "--job-name", job, "-y", "-q",
    ]
    done = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
    jobdir = tmp / "jobs" / job
    assert jobdir.is_dir(), f"{' '.join(argv)}: no job written\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return jobdir, done


def trials(jobdir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(jobdir.glob("*/result.json"))]


def test_oracle_scores_1_and_nop_scores_0(tmp_path):
    task = write_task(tmp_path)
    for agent, reward in (("oracle", 1.0), ("nop", 0.0)):
        jobdir, done = harbor_run(tmp_path, task, agent, agent, "base=host")
        assert done.returncode == 0, done.stdout[-3000:]
        [trial] = trials(jobdir)
        assert trial.get("exception_info") is None, trial["exception_info"]
        assert trial["verifier_result"]["rewards"]["reward"] == reward, trial
        log = next(jobdir.glob("*/trial.log")).read_text()
        assert "base=host" in log and "read-only system paths" in log, log
    # The oracle's own log came back through the transfer routes.
    assert list((tmp_path / "jobs" / "oracle").glob("*/agent/oracle.txt"))


@pytest.mark.parametrize(
    "network, ek, says",
    [
        ("public", ["base=host"], "network_mode='public' cannot be given by envcraft"),
        ("allowlist", ["base=host"], "network_mode='allowlist' is not supported by envcraft"),
        ("unpullable", ["state_dir={state}"], "is not in envcraft's image store"),
        ("unpullable", ["state_dir={state}"], "--ek base=host"),
        ("no-network", ["url=http://127.0.0.1:9"], "only for the private envcraft serve"),
    ],
)
def test_what_cannot_be_enforced_is_refused_before_start(tmp_path, network, ek, says):
    ek = [kv.format(state=tmp_path / "state") for kv in ek]
    task = write_task(tmp_path, "no-network" if network == "unpullable" else network)
    if network == "unpullable":
        # An image that no store holds and no registry serves (nothing listens on port 9).
        (task / "environment" / "Dockerfile").write_text("FROM 127.0.0.1:9/nosuch:1\nWORKDIR /app\n")
    if network == "allowlist":
        text = (task / "task.toml").read_text() + 'allowed_hosts = ["example.com"]\n'
        (task / "task.toml").write_text(text)
    jobdir, done = harbor_run(tmp_path, task, "oracle", "refused", *ek)
    # Harbor stops the job when the environment is constructed: before start, no trial run.
    said = done.stdout + done.stderr
    squeezed = "".join(c for c in said if not c.isspace() and c != "│")
    assert done.returncode != 0, said[-3000:]
    assert "".join(says.split()) in squeezed, said[-3000:]
    assert not any(t.get("verifier_result") for t in trials(jobdir))
    for log in jobdir.glob("*/trial.log"):
        assert "envcraft: session" not in log.read_text(), "a session was made for a refused task"


def test_each_method_against_a_real_session():
    binary = envcraft_binary()
    python = HARBOR.parent / "python"
    require(python.exists(), f"no Harbor venv at {HARBOR.parent.parent}")
    require(binary is not None, "no envcraft binary (cargo build, or set ENVCRAFT_BIN)")
    env = dict(os.environ, PYTHONPATH=str(REPO / "clients" / "python" / "src"), ENVCRAFT_BIN=str(binary))
    script = Path(__file__).with_name("harbor_provider_methods.py")
    done = subprocess.run([str(python), str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout[-3000:] + done.stderr[-3000:]


def test_a_dockerfile_that_needs_a_builder_is_refused_before_start(tmp_path):
    task = write_task(tmp_path)
    (task / "environment" / "Dockerfile").write_text(
        "FROM ubuntu:24.04\nWORKDIR /app\nRUN apt-get install -y curl\n"
    )
    jobdir, done = harbor_run(tmp_path, task, "oracle", "builder", "base=host")
    said = done.stdout + done.stderr
    squeezed = "".join(c for c in said if not c.isspace() and c != "│")
    assert done.returncode != 0, said[-3000:]
    for words in ("RUN apt-get install -y curl", "needs a builder"):
        assert "".join(words.split()) in squeezed, said[-3000:]
    assert not any(t.get("verifier_result") for t in trials(jobdir))
