"""Round trip of bundled environments through Harbor: ``envcraft export harbor`` of
``workspaces/example`` and ``workspaces/email-triage`` (the tasks whose reference solutions
translate to shell; the one that calls a skill is refused, counted), then the exported tasks run
by Harbor's CLI (``target/harbor-venv``) through ``envcraft.harbor:EnvcraftEnvironment`` with
``-a oracle`` and ``-a nop``, and natively by ``envcraft suite`` (reference and noop) and
``envcraft audit`` of the exported directory: the same rewards, and the same as the original
tasks' under envcraft (reference 1.0, noop the original verifier's own partial score).

Skipped loudly without Harbor's venv or the envcraft binary; failing under
``ENVCRAFT_TEST_REQUIRE=all``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from conftest import REPO, envcraft_binary, require

HARBOR = REPO / "target" / "harbor-venv" / "bin" / "harbor"
ENVS = ("example", "email-triage")


def envcraft(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(envcraft_binary()), *args], cwd=REPO, capture_output=True, text=True, timeout=600
    )
    if check:
        assert done.returncode == 0, f"envcraft {' '.join(args)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def suite_rewards(*args: str) -> dict[str, float]:
    """``envcraft suite ARGS --json``: task name (``ENV-ID`` for exported, ``ENV/ID`` natively
    made the same) to reward."""
    report = json.loads(envcraft("suite", *args, "--json").stdout)
    out = {}
    for t in report["tasks"]:
        env, task = t["task"].split("/")
        name = env.removeprefix("harbor-") if env.startswith("harbor-") else f"{env}-{task}"
        out[name] = t["reward"]
    return out


def harbor_rewards(tmp: Path, dataset: Path, agent: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(REPO / "clients" / "python" / "src"), ENVCRAFT_BIN=str(envcraft_binary()))
    argv = [
        str(HARBOR), "run", "-p", str(dataset), "-a", agent, "-n", "2",
        "--environment-import-path", "envcraft.harbor:EnvcraftEnvironment", "--ek", "base=host",
        "-o", str(tmp / "jobs"), "--job-name", agent, "-y", "-q",
    ]
    done = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = {}
    for path in sorted((tmp / "jobs" / agent).glob("*/result.json")):
        trial = json.loads(path.read_text())
        assert trial.get("exception_info") is None, trial["exception_info"]
        out[trial["task_name"]] = trial["verifier_result"]["rewards"]["reward"]
    return out


def test_exported_bundled_tasks_score_the_same_on_harbor_and_natively(tmp_path):
    require(envcraft_binary() is not None, "no envcraft binary (cargo build, or set ENVCRAFT_BIN)")
    require(HARBOR.exists(), f"no Harbor CLI at {HARBOR} (make target/harbor-venv/.ready)")
    dataset = tmp_path / "exported"
    refused = 0
    for name in ENVS:
        done = envcraft("export", "harbor", f"workspaces/{name}", str(dataset), check=False)
        assert done.returncode in (0, 1), done.stderr
        refused += done.stdout.count("\nrefused ") + done.stdout.startswith("refused ")
    exported = sorted(p.name for p in dataset.iterdir())
    assert len(exported) == 6 and refused == 1, (exported, refused)
    for task in exported:
        for part in ("task.toml", "instruction.md", "environment/Dockerfile", "tests/test.sh", "solution/solve.sh"):
            assert (dataset / task / part).is_file(), f"{task}/{part}"

    originals = [f"workspaces/{name}" for name in ENVS]
    native_reference = suite_rewards(*originals)
    native_noop = suite_rewards(*originals, "--agent", "noop")
    exported_reference = suite_rewards(str(dataset), "--base", "host")
    exported_noop = suite_rewards(str(dataset), "--base", "host", "--agent", "noop")
    harbor_oracle = harbor_rewards(tmp_path, dataset, "oracle")
    harbor_nop = harbor_rewards(tmp_path, dataset, "nop")

    assert set(harbor_oracle) == set(exported) == set(harbor_nop) == set(exported_reference)
    for task in exported:
        assert harbor_oracle[task] == exported_reference[task] == native_reference[task] == 1.0, task
        assert harbor_nop[task] == exported_noop[task] == native_noop[task], (
            task, harbor_nop[task], exported_noop[task], native_noop[task]
        )
        assert harbor_nop[task] < 1.0, task
    # A noop's partial credit survives the trip (a grader's sub-scores, not only 0 and 1).
    assert any(0.0 < r < 1.0 for r in harbor_nop.values()), harbor_nop

    audit = json.loads(envcraft("audit", str(dataset), "--base", "host", "--json").stdout)
    assert audit["summary"]["passed"] == len(exported), audit["summary"]
