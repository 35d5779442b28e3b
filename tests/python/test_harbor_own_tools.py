"""Harbor's own tools as judges of envcraft's Harbor side (``target/harbor-venv``):

- ``harbor lint``, Harbor's static checker of task directories, over every bundled
  environment's tasks as ``envcraft export harbor`` writes them: no finding but the one rule
  the export breaks on purpose (``shared-verifier``: the exported ``test.sh`` runs envcraft's
  verifier in the agent's environment, as a Harbor task of the default shared mode does);
- a task made by ``harbor init`` (Harbor's own template: ``FROM ubuntu:24.04``, ``WORKDIR
  /app``, ``network_mode = "public"``), with its instruction, solution and test filled in, run
  by ``harbor run`` through ``envcraft.harbor:EnvcraftEnvironment``: refused before start while
  it asks for the public network, then, with ``--ek offline=true --ek base=host`` (this machine
  cannot pull ubuntu), ``-a oracle`` gives 1.0 and ``-a nop`` 0.0.

Skipped loudly without Harbor's venv or the envcraft binary; failing under
``ENVCRAFT_TEST_REQUIRE=all``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from conftest import REPO, envcraft_binary, require

HARBOR = REPO / "target" / "harbor-venv" / "bin" / "harbor"


def ready() -> None:
    require(envcraft_binary() is not None, "no envcraft binary (cargo build, or set ENVCRAFT_BIN)")
    require(HARBOR.exists(), f"no Harbor CLI at {HARBOR} (make target/harbor-venv/.ready)")


def harbor(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO / "clients" / "python" / "src"), ENVCRAFT_BIN=str(envcraft_binary()))
    return subprocess.run([str(HARBOR), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def test_harbor_lint_finds_only_the_shared_verifier_in_every_exported_bundled_task(tmp_path):
    ready()
    envs = sorted(p.parent for p in (REPO / "workspaces").glob("*/env.toml"))
    assert len(envs) >= 10, envs
    for env in envs:
        done = subprocess.run(
            [str(envcraft_binary()), "export", "harbor", str(env), str(tmp_path / env.name)],
            cwd=REPO, capture_output=True, text=True, timeout=600,
        )
        # 1: some of its tasks were refused (a solution that calls a skill), each said.
        assert done.returncode in (0, 1), f"{env.name}: {done.stderr}"
    tasks = sorted(p.parent for p in tmp_path.glob("*/*/task.toml"))
    assert len(tasks) >= 30, tasks
    done = harbor("lint", "--json", *map(str, tasks), cwd=tmp_path)
    findings = json.loads(done.stdout)
    others = [f for f in findings if f["rule"] != "shared-verifier"]
    assert others == [], json.dumps(others, indent=1)
    flagged = {Path(f["path"]).parent for f in findings}
    assert flagged == set(tasks), sorted(set(tasks) - flagged)


SOLVE = "#!/bin/bash\nset -e\nprintf 'hello from the oracle\\n' > /app/greeting.txt\n"
TEST = """#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/greeting.txt 2>/dev/null)" = "hello from the oracle" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


def run_trials(task: Path, tmp: Path, agent: str, *kwargs: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    tmp.mkdir(parents=True, exist_ok=True)
    jobs = tmp / "jobs"
    done = harbor(
        "run", "-p", str(task), "-a", agent,
        "--environment-import-path", "envcraft.harbor:EnvcraftEnvironment",
        *[a for kw in kwargs for a in ("--ek", kw)],
        "-o", str(jobs), "--job-name", agent, "-y", "-q",
        cwd=tmp,
    )
    trials = [json.loads(p.read_text()) for p in sorted((jobs / agent).glob("*/result.json"))]
    return done, trials


def test_a_task_made_by_harbor_init_runs_on_envcraft_oracle_one_nop_zero(tmp_path):
    ready()
    made = harbor(
        "init", "--task", "envcraft/made-by-harbor", "-o", str(tmp_path / "tasks"),
        "--verifier-mode", "shared", "--no-pytest", cwd=tmp_path,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    task = tmp_path / "tasks" / "made-by-harbor"
    # Harbor's template, as it made it: only the three files a task author fills in change.
    assert "FROM ubuntu:24.04" in (task / "environment" / "Dockerfile").read_text()
    assert 'network_mode = "public"' in (task / "task.toml").read_text()
    (task / "instruction.md").write_text("Write `hello from the oracle` to /app/greeting.txt.\n")
    (task / "solution" / "solve.sh").write_text(SOLVE)
    (task / "tests" / "test.sh").write_text(TEST)

    # The public network cannot be given: refused before start, saying how to go on.
    done, trials = run_trials(task, tmp_path / "public", "oracle", "base=host")
    text = done.stdout + done.stderr + json.dumps(trials)
    assert "network_mode='public' cannot be given by envcraft" in text, text[-3000:]
    assert all(t.get("verifier_result") is None for t in trials), trials

    for agent, reward in (("oracle", 1.0), ("nop", 0.0)):
        done, trials = run_trials(task, tmp_path / agent, agent, "base=host", "offline=true")
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert len(trials) == 1, trials
        assert trials[0].get("exception_info") is None, trials[0]["exception_info"]
        assert trials[0]["verifier_result"]["rewards"]["reward"] == reward, trials[0]
