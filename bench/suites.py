#!/usr/bin/env python3
"""Whole-suite benchmarks, side by side with their peers in the same run.

    python3 bench/suites.py ENVCRAFT_BINARY [RESULTS_MD]

- the bundled suite (`envcraft suite workspaces/...`, reference agent, the environments over
  the host's root: an image's environment needs its image built first) with `--jobs 1` and
  `--jobs 2`: tasks per second and the time per task split into session create, tool calls,
  verify and cleanup; the peer is the suite itself at one job (how well two jobs scale);
- the foreign fixture sets (`../shared/fixtures/clawgym`, `pinchbench`): `envcraft import`
  of both (peer: `cp -a` of the same sources) and their noop run as they are (`envcraft suite
  --agent noop`), with the ClawGym graders' sandboxed verify time against the same graders
  run directly with bash and python3 outside any sandbox.
"""

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from report import publish, timed

RUNS = 5
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "..", "shared", "fixtures")


def host_root_envs():
    """The bundled environments whose env.toml names no image (workspaces/office does)."""
    envs = []
    for name in sorted(os.listdir(os.path.join(ROOT, "workspaces"))):
        path = os.path.join(ROOT, "workspaces", name, "env.toml")
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                if not any(re.match(r"\s*image\s*=", line) for line in f):
                    envs.append(os.path.join("workspaces", name))
    return envs


def suite(binary, paths, jobs, agent):
    """One `envcraft suite --json` run: (wall seconds, report)."""
    t = time.perf_counter()
    out = subprocess.run(
        [binary, "suite", *paths, "--jobs", str(jobs), "--agent", agent, "--json"],
        capture_output=True, text=True, cwd=ROOT,
    )
    wall = time.perf_counter() - t
    if out.returncode != 0:
        raise SystemExit(f"suite {paths} --jobs {jobs} failed ({out.returncode}): {out.stderr[-2000:]}")
    return wall, json.loads(out.stdout)


def split_row(label, wall, report):
    t = report["totals"]
    n = len(report["tasks"])
    return (f"| {label} | {n} | {wall:.2f} | {n / wall:.1f} | {t['mean_create_ms']:.1f} | "
            f"{t['mean_calls_ms']:.1f} | {t['mean_verify_ms']:.1f} | {t['mean_cleanup_ms']:.1f} |")


def clawgym_direct(task_dir, scratch):
    """ClawGym's own grading, outside any sandbox: reward/ copied in, reward.sh run with
    the workspace path pointed at a plain copy. Seconds."""
    ws = os.path.join(scratch, "ws")
    shutil.rmtree(ws, ignore_errors=True)
    shutil.copytree(os.path.join(task_dir, "input_files"), ws, symlinks=True)
    shutil.copytree(os.path.join(task_dir, "reward"), os.path.join(ws, "reward"), symlinks=True)
    with open(os.path.join(task_dir, "reward", "reward.sh"), encoding="utf-8") as f:
        script = f.read().replace("/root/.openclaw/workspace", ws)
    t = time.perf_counter()
    subprocess.run(["bash", "-c", script], cwd=ws, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    binary = os.path.abspath(sys.argv[1])
    results = sys.argv[2] if len(sys.argv) == 3 else None
    out = ["### E. Suites (one run each)", ""]

    # The bundled suite, one job then two.
    w1, r1 = suite(binary, host_root_envs(), 1, "reference")
    w2, r2 = suite(binary, host_root_envs(), 2, "reference")
    out += [
        "The bundled suite, reference agent (per task: mean ms).",
        "",
        "| Run | Tasks | Wall (s) | Tasks/s | Session create | Tool calls | Verify | Cleanup |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        split_row("`--jobs 1`", w1, r1),
        split_row("`--jobs 2`", w2, r2),
        "",
        f"- `--jobs 2` / `--jobs 1` throughput: **{w1 / w2:.2f}x** on this machine's "
        f"{os.cpu_count()} cores.",
        "",
    ]

    clawgym = os.path.join(FIXTURES, "clawgym")
    pinchbench = os.path.join(FIXTURES, "pinchbench")
    if not (os.path.isdir(clawgym) and os.path.isdir(pinchbench)):
        out.append("- Foreign sets: not measured (../shared/fixtures is missing).")
    else:
        scratch = tempfile.mkdtemp(prefix="envcraft-bench-suites-")
        try:
            imp, cp = [], []
            for i in range(RUNS):
                dest = os.path.join(scratch, f"import-{i}")
                imp.append(timed([binary, "import", "clawgym", clawgym, dest]) +
                           timed([binary, "import", "pinchbench", pinchbench, dest]))
                copy = os.path.join(scratch, f"cp-{i}")
                os.makedirs(copy)
                cp.append(timed(["cp", "-a", clawgym, pinchbench, copy]))
            n_imported = len([d for d in os.listdir(os.path.join(scratch, "import-0"))])
            m_imp, m_cp = statistics.median(imp), statistics.median(cp)

            wall, noop = suite(binary, [clawgym, pinchbench], 2, "noop")
            cg_tasks = sorted(d for d in os.listdir(clawgym)
                              if os.path.isfile(os.path.join(clawgym, d, "data_entry.json")))
            direct = statistics.mean(
                statistics.median(clawgym_direct(os.path.join(clawgym, d), scratch) for _ in range(3))
                for d in cg_tasks)
            sandboxed = statistics.mean(
                t["verify_ms"] for t in noop["tasks"] if re.match(r"clawgym-", t["task"])) / 1000
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        out += [
            f"The foreign fixture sets ({len(cg_tasks)} ClawGym and "
            f"{n_imported - len(cg_tasks)} PinchBench tasks).",
            "",
            "| Operation | Time (ms) | Tasks/s | Peer | Peer (ms) | Ratio |",
            "| --- | ---: | ---: | --- | ---: | ---: |",
            f"| `envcraft import` both sets (median of {RUNS}) | {m_imp * 1000:.1f} | "
            f"{n_imported / m_imp:.0f} | `cp -a` of the sources | {m_cp * 1000:.1f} | {m_imp / m_cp:.2f}x |",
            f"| ClawGym grader, sandboxed verify (mean per task) | {sandboxed * 1000:.1f} | | "
            f"same grader run directly | {direct * 1000:.1f} | {sandboxed / direct:.2f}x |",
            "",
            "| Run | Tasks | Wall (s) | Tasks/s | Session create | Tool calls | Verify | Cleanup |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
            split_row("noop, both sets as they are, `--jobs 2`", wall, noop),
            "",
        ]
    out.append("Generated by `python3 bench/suites.py` (`make bench`).")
    publish(out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
