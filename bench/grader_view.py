#!/usr/bin/env python3
"""The grader's writable view against a read-only one, in the same run.

    python3 bench/grader_view.py ENVCRAFT_BINARY [RESULTS_MD] [--runs N]

A ClawGym grader (fixture task_0001 of ../shared/fixtures/clawgym, its workspace after the correct
trajectory of tests/fixture_trajectories/task_0001.py) run by `envcraft exec -- bash
reward/reward.sh` under the bundled `verifier` policy (the workspace a writable copy-on-write
view, today's default for graders) and under the same policy with `workspace_writable = false`
(the workspace bound read-only, what graders had before), interleaved, N runs each (default 40):
medians and their ratio (target: writable at most 1.05x read-only). Both arms must give the
reward 1.0. `envcraft verify` of the imported task over the same workspace (the grader's whole
path: staging, sealing, the sandbox) is timed beside them for scale.
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from report import publish, verdict

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FIXTURE = os.path.join(ROOT, "..", "shared", "fixtures", "clawgym", "task_0001")
SOLUTION = os.path.join(ROOT, "tests", "fixture_trajectories", "task_0001.py")


def reward_of(cmd):
    """(seconds, reward) of a grader run whose last stdout line is the reward."""
    t = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    took = time.perf_counter() - t
    lines = out.stdout.strip().splitlines()
    return took, float(lines[-1]) if lines else None


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--runs")]
    runs = 40
    for a in sys.argv[1:]:
        if a.startswith("--runs="):
            runs = int(a.split("=", 1)[1])
    if len(args) not in (1, 2):
        print(__doc__, file=sys.stderr)
        return 2
    binary = os.path.abspath(args[0])
    results = args[1] if len(args) == 2 else None
    if not os.path.isdir(FIXTURE):
        print(f"skipping: {FIXTURE} (the ClawGym fixtures) is missing", file=sys.stderr)
        return 0
    root = tempfile.mkdtemp(prefix="envcraft-bench-grader-view-")
    try:
        # The final workspace: the input files, the solution run by hand, the grader copied in.
        ws = os.path.join(root, "ws")
        shutil.copytree(os.path.join(FIXTURE, "input_files"), ws)
        shutil.copy(SOLUTION, os.path.join(ws, "solve.py"))
        subprocess.run(["python3", "solve.py"], cwd=ws, check=True)
        shutil.copytree(os.path.join(FIXTURE, "reward"), os.path.join(ws, "reward"))
        for dirpath, dirnames, filenames in os.walk(ws):
            for name in dirnames + filenames:
                p = os.path.join(dirpath, name)
                os.chmod(p, os.stat(p).st_mode | 0o644)
        with open(os.path.join(ROOT, "policies", "verifier.toml")) as f:
            text = f.read()
        assert "workspace_writable = true" in text
        read_only = os.path.join(root, "read-only.toml")
        with open(read_only, "w") as f:
            f.write(text.replace("workspace_writable = true", "workspace_writable = false"))
        imported = os.path.join(root, "imported")
        subprocess.run([binary, "import", "clawgym", FIXTURE, imported], check=True,
                       stdout=subprocess.DEVNULL)
        task = os.path.join(imported, "clawgym-task_0001", "tasks", "task_0001")
        state = os.path.join(root, "state")
        os.environ["ENVCRAFT_STATE_DIR"] = state

        def grader(policy):
            return [binary, "exec", "--policy", policy, "--workspace", ws, "--",
                    "bash", "reward/reward.sh"]

        arms = {"writable": grader("verifier"), "read-only": grader(read_only)}
        verify = [binary, "verify", task, "--workspace", ws]
        times = {name: [] for name in list(arms) + ["verify"]}
        rewards = {name: set() for name in arms}
        for name, cmd in arms.items():  # warm-up, untimed
            reward_of(cmd)
        subprocess.run(verify, check=False, stdout=subprocess.DEVNULL)
        for i in range(runs):
            order = list(arms.items()) if i % 2 == 0 else list(reversed(arms.items()))
            for name, cmd in order:
                took, reward = reward_of(cmd)
                times[name].append(took)
                rewards[name].add(reward)
            t = time.perf_counter()
            subprocess.run(verify, check=False, stdout=subprocess.DEVNULL)
            times["verify"].append(time.perf_counter() - t)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    spread = {k: (min(v) * 1000, max(v) * 1000) for k, v in times.items()}
    ratio = med["writable"] / med["read-only"]
    same_reward = rewards["writable"] == rewards["read-only"] == {1.0}
    build = "release" if "/release/" in binary else "debug"
    out = [
        f"## Grader view: writable vs read-only ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())},"
        f" {build} build, {runs} interleaved runs each)",
        "",
        "ClawGym task_0001's grader (`bash reward/reward.sh`) over its solved workspace, by"
        " `envcraft exec` under the `verifier` policy and under it with a read-only workspace.",
        "",
        "| what | median | min-max | reward |",
        "| --- | ---: | ---: | --- |",
    ]
    for name in arms:
        out.append(f"| {name} view | {med[name]:.1f} ms | {spread[name][0]:.1f}-{spread[name][1]:.1f} ms"
                   f" | {sorted(rewards[name])} |")
    out.append(f"| `envcraft verify` (writable view, staging and sealing included) | {med['verify']:.1f} ms"
               f" | {spread['verify'][0]:.1f}-{spread['verify'][1]:.1f} ms | |")
    out += [
        "",
        f"Writable / read-only: {ratio:.3f}x (target <= 1.05x: {verdict(ratio <= 1.05)});"
        f" both arms reward 1.0: {verdict(same_reward)}.",
    ]
    publish(out, results)
    return 0 if same_reward else 1


if __name__ == "__main__":
    sys.exit(main())
