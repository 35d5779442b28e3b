#!/usr/bin/env python3
"""`make fuzz`: run each fuzzer of fuzz/ (built by `cargo +nightly fuzz build`) for a bounded
time, one at a time on one core, and publish a dated table (target, executions, execs/s,
panics, hangs, corpus size) to bench/results.md.

    python3 bench/fuzz.py FUZZ_BIN_DIR [RESULTS]

Environment: FUZZ_SECONDS per target (default 20: the twelve targets take four minutes),
FUZZ_TARGETS (names, comma-separated; default all), FUZZ_RSS_MB (default 2048).

Each fuzzer starts from fuzz/corpus/<target>/ (its working corpus, kept between runs, not
committed), fuzz/seeds/<target>/ and fuzz/regressions/<target>/. A crash or hang stops that
target's run; libFuzzer saves the input under fuzz/artifacts/<target>/ (minimize it with
`cargo +nightly fuzz tmin`, fix the parser, then add it to fuzz/regressions/<target>/). The
exit status is 1 when any target panicked, hung or ran out of memory."""

import datetime
import os
import re
import subprocess
import sys

from report import publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FUZZ = os.path.join(ROOT, "fuzz")
# libFuzzer's per-input bound: an input that takes longer is a hang.
TIMEOUT_SECS = 10


def targets():
    """The targets, in the order of `fuzz/Cargo.toml`'s `[[bin]]` tables."""
    with open(os.path.join(FUZZ, "Cargo.toml")) as f:
        names = re.findall(r'^name = "([a-z_]+)"$', f.read(), re.M)
    names = [n for n in names if n != "envcraft-fuzz"]
    wanted = [t for t in os.environ.get("FUZZ_TARGETS", "").split(",") if t]
    unknown = [t for t in wanted if t not in names]
    if unknown:
        sys.exit(f"FUZZ_TARGETS names {unknown}: expected some of {names}")
    return wanted or names


def final_stat(output, name):
    """The last `stat::NAME: N` libFuzzer printed (`-print_final_stats=1`)."""
    found = re.findall(rf"^stat::{name}:\s+(\d+)", output, re.M)
    return int(found[-1]) if found else None


def last_execs(output):
    """The executions of the last progress line (`#N ...`), for a run cut by a crash."""
    found = re.findall(r"^#(\d+)\s", output, re.M)
    return int(found[-1]) if found else 0


def count(directory, prefix=""):
    if not os.path.isdir(directory):
        return 0
    return sum(1 for n in os.listdir(directory) if n.startswith(prefix))


def run(binary_dir, target, seconds, rss_mb):
    corpus = os.path.join(FUZZ, "corpus", target)
    artifacts = os.path.join(FUZZ, "artifacts", target)
    os.makedirs(corpus, exist_ok=True)
    os.makedirs(artifacts, exist_ok=True)
    before = {k: count(artifacts, k) for k in ("crash-", "timeout-", "oom-", "slow-unit-")}
    dirs = [corpus] + [
        d
        for d in (os.path.join(FUZZ, "seeds", target), os.path.join(FUZZ, "regressions", target))
        if os.path.isdir(d)
    ]
    cmd = [
        os.path.join(binary_dir, target),
        f"-max_total_time={seconds}",
        f"-timeout={TIMEOUT_SECS}",
        f"-rss_limit_mb={rss_mb}",
        "-print_final_stats=1",
        "-close_fd_mask=1",
        f"-artifact_prefix={artifacts}/",
        *dirs,
    ]
    print(f"fuzz: {target} for {seconds} s", flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
    output = proc.stderr
    execs = final_stat(output, "number_of_executed_units") or last_execs(output)
    rate = final_stat(output, "average_exec_per_sec")
    new = {k: count(artifacts, k) - v for k, v in before.items()}
    panics = new["crash-"] + (1 if "panicked at" in output and new["crash-"] == 0 else 0)
    row = {
        "target": target,
        "execs": execs,
        "rate": rate if rate is not None else 0,
        "panics": panics,
        "hangs": new["timeout-"],
        "ooms": new["oom-"],
        "corpus": count(corpus),
        "status": proc.returncode,
    }
    if proc.returncode != 0:
        tail = "\n".join(output.splitlines()[-30:])
        print(f"fuzz: {target} stopped (exit {proc.returncode}):\n{tail}", flush=True)
    return row


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    binary_dir = sys.argv[1]
    results = sys.argv[2] if len(sys.argv) == 3 else None
    seconds = int(os.environ.get("FUZZ_SECONDS", "20"))
    rss_mb = int(os.environ.get("FUZZ_RSS_MB", "2048"))
    started = datetime.datetime.now(datetime.timezone.utc)
    commit = subprocess.run(
        ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    rows = [run(binary_dir, t, seconds, rss_mb) for t in targets()]
    out = [
        f"### Fuzzing ({started:%Y-%m-%d %H:%M} UTC, {seconds} s per target, at {commit})",
        "",
        f"libFuzzer, one worker, `-timeout={TIMEOUT_SECS}` (an input past it is a hang), "
        f"`-rss_limit_mb={rss_mb}`, debug assertions on, no sanitizer "
        f"({os.cpu_count()} cores, shared).",
        "",
        "| target | executions | execs/s | panics | hangs | out of memory | corpus |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        out.append(
            f"| {r['target']} | {r['execs']:,} | {r['rate']:,} | {r['panics']} | {r['hangs']} "
            f"| {r['ooms']} | {r['corpus']:,} |"
        )
    total = sum(r["execs"] for r in rows)
    out += ["", f"{total:,} executions in all.", ""]
    publish(out, results)
    failed = [r["target"] for r in rows if r["status"] != 0]
    if failed:
        print(f"fuzz: {', '.join(failed)} found a crash, a hang or ran out of memory", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
