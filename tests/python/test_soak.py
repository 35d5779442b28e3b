"""The soak with faults (bench/soak.py), two minutes of it: the server SIGKILLed and restarted,
its state root filled, sandboxes OOM-killed and clients dropped, under load; every invariant
must hold. And a short run with a template changed mid-run must report that invariant broken
(the soak's checks can fail).

Needs root (the soak mounts its state root); skipped loudly otherwise, failed under
``ENVCRAFT_TEST_REQUIRE=all``.
"""

import json
import os
import subprocess
import sys

from conftest import REPO, envcraft_binary, require, serve_available

SOAK = REPO / "bench" / "soak.py"


def soak(tmp_path, *extra):
    binary = envcraft_binary()
    why = serve_available(binary)
    require(why is None, why or "")
    require(os.geteuid() == 0, "the soak mounts a tmpfs as its state root: it needs root")
    out = tmp_path / "soak.json"
    ran = subprocess.run(
        [sys.executable, str(SOAK), str(binary), "--seed", "17", "--json", str(out), *extra],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )
    assert out.exists(), f"no result (exit {ran.returncode}):\n{ran.stdout}\n{ran.stderr[-4000:]}"
    return ran, json.loads(out.read_text())


def test_two_minutes_of_faults_break_no_invariant(tmp_path):
    ran, result = soak(tmp_path, "--duration", "120")
    assert ran.returncode == 0 and result["ok"], f"{result}\n{ran.stderr[-4000:]}"
    assert result["checks_failed"] == 0, result["failures"]
    for kind, n in result["faults"].items():
        assert n >= 1, f"no {kind} fault was injected: {result['faults']}"
    checks = result["checks"]
    for name in ("acknowledged_write_kept", "resumed_or_not_found", "no_process_after_kill",
                 "oom_reported", "session_after_oom", "session_after_drop", "templates_untouched",
                 "no_process_at_end", "no_cgroup_at_end", "no_state_directory_at_end"):
        assert checks.get(name, {}).get("passed", 0) >= 1, f"{name} never checked: {checks}"
    assert result["calls"]["ok"] >= 500, result["calls"]


def test_a_template_changed_mid_run_is_reported_as_a_broken_invariant(tmp_path):
    ran, result = soak(tmp_path, "--duration", "15", "--tamper", "template")
    assert ran.returncode == 1 and not result["ok"], result
    assert result["checks"]["templates_untouched"]["failed"] >= 1, result
