#!/usr/bin/env python3
"""Session benchmarks, side by side with the bare operations in the same run.

    python3 bench/sessions.py ENVCRAFT_BINARY [RESULTS_MD]

- per-call latency of `read` and `write` of a 4 KiB file in a live session (envcraft's own
  timing of each call, from `envcraft run --json`) vs a plain open/read/close and
  open/write/close of a 4 KiB file from this process (targets: median under 100 us, at most 3x
  the plain operation); and, as the floor of a recorded call, the plain read plus one append of
  as many bytes as the call's transcript record (its `toolCall` and `toolResult` lines: the
  file's content is in the result) to a file beside the session's;
- `exec true` in a live session vs a bare posix_spawn + wait of /bin/true (target: at most 2x);
- fork of a session holding 10 MB of changes (from `envcraft shell`'s `:fork`; target: under
  10 ms).

Prints a Markdown section and appends it to RESULTS_MD when given.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from report import publish, verdict

READS, WRITES, EXECS, FORKS = 300, 300, 60, 7
BLOCK = b"x" * 4096


def make_task(root):
    env = os.path.join(root, "bench")
    os.makedirs(os.path.join(env, "files"))
    os.makedirs(os.path.join(env, "tasks", "calls"))
    with open(os.path.join(env, "env.toml"), "w") as f:
        f.write('name = "bench"\ndescription = "benchmark"\nbase_time = "2026-03-02T09:00:00Z"\n')
    with open(os.path.join(env, "docs.md"), "w") as f:
        f.write("A workspace for benchmarks.\n")
    with open(os.path.join(env, "files", "data.txt"), "wb") as f:
        f.write(BLOCK)
    with open(os.path.join(env, "tasks", "calls", "task.toml"), "w") as f:
        f.write('prompt = "benchmark"\n[verifier]\nkind = "manifest"\n')
    return "bench/calls"


def state_root(root):
    """Where the sessions live: /dev/shm as envcraft's default, else under `root`."""
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else root
    return tempfile.mkdtemp(prefix="envcraft-bench-state-", dir=base)


def session_calls(binary, workspaces, task, state):
    calls = []
    calls += [{"tool": "read", "args": {"path": "data.txt"}}] * READS
    content = BLOCK.decode()
    calls += [{"tool": "write", "args": {"path": "out.txt", "content": content}}] * WRITES
    calls += [{"tool": "exec", "args": {"command": "/bin/true"}}] * EXECS
    traj = os.path.join(workspaces, "traj.jsonl")
    with open(traj, "w") as f:
        for c in calls:
            f.write(json.dumps(c) + "\n")
    keep = os.path.join(workspaces, "kept")
    out = subprocess.run(
        [binary, "run", task, "--actions", traj, "--json", "--workspaces", workspaces,
         "--state-dir", state, "--keep", keep],
        check=True, capture_output=True, text=True, timeout=600,
    ).stdout
    report = json.loads(out)
    by_tool = {}
    for a in report["actions"]:
        if "tool" in a:
            assert a["result"]["ok"], a
            by_tool.setdefault(a["tool"], []).append(a["duration_us"])
    # Drop the first calls of each kind (cold caches).
    medians = {k: statistics.median(v[10:]) for k, v in by_tool.items()}
    return medians, read_record_bytes(os.path.join(keep, "transcript.jsonl"))


def read_record_bytes(transcript):
    """The bytes the transcript holds for one `read` call: its two lines."""
    with open(transcript, "rb") as f:
        lines = f.read().splitlines(keepends=True)
    for call, result in zip(lines, lines[1:]):
        item = json.loads(call).get("message", {}).get("content", [{}])[0]
        if item.get("type") == "toolCall" and item.get("name") == "read":
            return len(call) + len(result)
    raise SystemExit("no read call in the kept transcript")


def bare_file_ops(root, state, record):
    path = os.path.join(root, "plain.txt")
    with open(path, "wb") as f:
        f.write(BLOCK)
    reads, recorded, writes = [], [], []
    for _ in range(READS):
        t = time.perf_counter_ns()
        fd = os.open(path, os.O_RDONLY)
        os.read(fd, 8192)
        os.close(fd)
        reads.append((time.perf_counter_ns() - t) / 1000)
    log = os.open(os.path.join(state, "record.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    line = b"x" * record
    try:
        for _ in range(READS):
            t = time.perf_counter_ns()
            fd = os.open(path, os.O_RDONLY)
            os.read(fd, 8192)
            os.close(fd)
            os.write(log, line)
            recorded.append((time.perf_counter_ns() - t) / 1000)
    finally:
        os.close(log)
    for _ in range(WRITES):
        t = time.perf_counter_ns()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, BLOCK)
        os.close(fd)
        writes.append((time.perf_counter_ns() - t) / 1000)
    return (statistics.median(reads[10:]), statistics.median(recorded[10:]),
            statistics.median(writes[10:]))


def bare_spawn():
    times = []
    for _ in range(EXECS):
        t = time.perf_counter_ns()
        pid = os.posix_spawn("/bin/true", ["/bin/true"], {})
        os.waitpid(pid, 0)
        times.append((time.perf_counter_ns() - t) / 1000)
    return statistics.median(times[5:])


def fork_times(binary, workspaces, task):
    lines = ['exec {"command": "mkdir big && for i in $(seq 100); do head -c 104858 /dev/urandom > big/$i; done; du -sk big"}']
    lines += [":fork", ":use 0"] * FORKS
    lines += [":quit"]
    out = subprocess.run(
        [binary, "shell", task, "--workspaces", workspaces],
        input="\n".join(lines) + "\n", check=True, capture_output=True, text=True, timeout=600,
    ).stdout
    times = [float(line.split("made in ")[1].split(" ms")[0]) for line in out.split("envcraft> ") if "made in" in line]
    assert len(times) == FORKS, out
    return statistics.median(times)


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    binary = os.path.abspath(sys.argv[1])
    results = sys.argv[2] if len(sys.argv) == 3 else None
    root = tempfile.mkdtemp(prefix="envcraft-bench-sessions-")
    state = state_root(root)
    try:
        task = make_task(root)
        per, record = session_calls(binary, root, task, state)
        bare_read, bare_recorded, bare_write = bare_file_ops(root, state, record)
        spawn = bare_spawn()
        fork = fork_times(binary, root, task)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(state, ignore_errors=True)

    rows = [
        ("`read` 4 KiB in a session", per["read"], bare_read, "plain open/read/close",
         f"< 100 us: {verdict(per['read'] < 100)}; <= 3x: {verdict(per['read'] <= 3 * bare_read)}"),
        ("`read` 4 KiB in a session", per["read"], bare_recorded,
         f"the same + append of {record:,} bytes (the call's transcript record)", "(the floor of a recorded call)"),
        ("`write` 4 KiB in a session", per["write"], bare_write, "plain open/write/close",
         f"< 100 us: {verdict(per['write'] < 100)}; <= 3x: {verdict(per['write'] <= 3 * bare_write)}"),
        ("`exec true` in a session", per["exec"], spawn, "posix_spawn + wait of /bin/true",
         f"<= 2x: {verdict(per['exec'] <= 2 * spawn)}"),
    ]
    out = ["### C. Sessions (medians, one run)", "",
           "| Operation | envcraft (us) | Peer | Peer (us) | Ratio | Target |",
           "| --- | ---: | --- | ---: | ---: | --- |"]
    for name, ours, peer, peer_name, target in rows:
        out.append(f"| {name} | {ours:.0f} | {peer_name} | {peer:.1f} | {ours / peer:.1f}x | {target} |")
    out.append(f"| fork of a session with 10 MB of changes | {fork * 1000:.0f} | - | - | - | < 10 ms: {verdict(fork < 10)} |")
    out.append("")
    out.append(f"Calls: {READS} reads, {WRITES} writes, {EXECS} execs (the first of each left out); {FORKS} forks.")
    publish(out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
