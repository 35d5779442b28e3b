#!/usr/bin/env python3
"""Load benchmark of the rollout server, loopback only, bounded in count and time.

    python3 bench/server.py ENVCRAFT_BINARY [RESULTS_MD] [--sessions N[,N...]]

Starts `envcraft serve --listen 127.0.0.1:0` on a temporary state directory, then with the
asyncio client of clients/python (at most CONCURRENCY requests in flight):
1. opens N sessions (default 1,000) of the bundled `example/archive-read-mail` and keeps them
   open: the machine's memory per idle session (/proc/meminfo's MemTotal - MemAvailable, which
   counts the sandboxes' inits, namespaces, mounts, tmpfs and cgroups), and beside it the
   server's own RSS growth (see bench/session_memory.py for the parts);
2. makes 20 calls in each: 16 file calls (8 `write` of a file unique to the session, 8 `read`
   of it back, checked byte for byte: a mixed-up response is counted), then 4 `exec` calls
   (`cat` of the same file, checked too): file and exec calls per second, p50/p99 latency;
3. verifies every session, closes every session.
For the create, file and exec phases, where the machine's CPU went (in cores): envcraft's, read
from a cpuacct cgroup the server is started in (v1, as root; else its process tree in /proc),
the load client's, the machine's PID 1's, the kernel threads', interrupts and steal; and the
phase's calls per CPU-second of envcraft's, the figure that does not depend on what else runs.
The peers, in the same run: sequential `GET /healthz` round trips on one kept-alive
connection (the HTTP floor of the same server and client) and on a new connection each (the
floor before the clients kept connections). The client keeps up to CONCURRENCY idle
keep-alive connections (`max_connections`), so the load runs on 64 connections opened once.
Before the load, 40 creates one after another on the idle server (each kept open until the
load is over): the p50 of one create, beside the `GET /healthz` floor.
Each N runs on a server of its own, under a descriptor limit raised for N sessions (root).
Targets (issues 5 and 16): zero lost or mixed-up responses; at 10,000 sessions held, <= 1 MiB of
the machine's memory each, >= 500 creates/s, >= 5,000 file calls/s and >= 1,000 exec calls/s;
one idle create <= 2 ms at the p50. A call counts as lost only when its session exists.
"""

import asyncio
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from report import publish, verdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "clients", "python", "src"))

import envcraft  # noqa: E402

CONCURRENCY = 64
DEADLINE_S = 600
TASK = "example/archive-read-mail"


def used_kib():
    """The machine's used memory (MemTotal - MemAvailable) in KiB."""
    fields = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, rest = line.split(":", 1)
            fields[key] = int(rest.split()[0])
    return fields["MemTotal"] - fields["MemAvailable"]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def process_times():
    """Every process's (ppid, CPU seconds of its own and of its reaped children), by pid."""
    hz = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(pid)] = (int(fields[1]), sum(int(x) for x in fields[11:15]) / hz)
    return out


CPUACCT = "/sys/fs/cgroup/cpuacct"


def cpuacct_group(pid):
    """The v1 `cpuacct` cgroup directory `pid` runs in, where it is one of its own (not the
    root): it counts every process envcraft starts, whatever reaps it, to the nanosecond."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if "cpuacct" in controllers.split(",") and path != "/":
                    return CPUACCT + path
    except OSError:
        pass
    return None


def own_cpuacct_group(name):
    """A fresh `cpuacct` cgroup for the server (root, cgroup v1), or None where there is none."""
    path = os.path.join(CPUACCT, name)
    try:
        os.mkdir(path)
        return path
    except OSError:
        return None


def cpu_sample(server_pid):
    """CPU seconds so far: the machine's busy time; of it, envcraft's (its `cpuacct` cgroup's
    where the server has one of its own, else the server and every process below it: the
    sandbox maker, the inits, the commands they reaped), this load
    client's, the machine's PID 1 (on these VMs a process API that is not envcraft's), the
    kernel's threads (kthreadd's children: workqueues, RCU, softirq threads), interrupts and
    softirqs not charged to any process, and time the hypervisor gave to another guest."""
    with open("/proc/stat") as f:
        cpu = [int(x) for x in f.readline().split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    user, nice, system, idle, iowait, irq, softirq, steal = cpu[:8]
    procs = process_times()
    children = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)

    def tree(root):
        total, todo = 0.0, [root]
        while todo:
            pid = todo.pop()
            total += procs.get(pid, (0, 0.0))[1]
            todo += children.get(pid, [])
        return total

    group = cpuacct_group(server_pid)
    if group:
        with open(os.path.join(group, "cpuacct.usage")) as f:
            envcraft_s = int(f.read()) / 1e9
        with open(os.path.join(group, "cpuacct.stat")) as f:
            envcraft_kernel = dict(line.split() for line in f).get("system")
        envcraft_kernel_s = int(envcraft_kernel) / hz if envcraft_kernel else float("nan")
    else:
        envcraft_s, envcraft_kernel_s = tree(server_pid), float("nan")
    me = os.times()
    return {"busy": (user + nice + system + irq + softirq + steal) / hz,
            "envcraft": envcraft_s, "envcraft_kernel": envcraft_kernel_s, "client": me.user + me.system,
            "pid1": procs.get(1, (0, 0.0))[1], "kthreads": tree(2),
            "irq": (irq + softirq) / hz, "steal": steal / hz}


def cpu_shares(before, after):
    """Where the machine's CPU went between two samples, in CPU seconds; `other` is what no
    part names (processes that ended unreaped by any of them, rounding)."""
    d = {k: after[k] - before[k] for k in before}
    d["other"] = d["busy"] - sum(d[k] for k in ("envcraft", "client", "pid1", "kthreads", "irq", "steal"))
    return d


def describe(e):
    """An error as `category: message` (the server's category, else the exception's type)."""
    return f"{getattr(e, 'category', None) or type(e).__name__}: {e}"


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000


async def bounded(n, make):
    """Run make(i) for i in range(n), CONCURRENCY at a time; returns the results in order."""
    sem = asyncio.Semaphore(CONCURRENCY)

    async def one(i):
        async with sem:
            return await make(i)

    return await asyncio.gather(*(one(i) for i in range(n)), return_exceptions=True)


async def load(url, pid, n):
    client = envcraft.AsyncClient(url, max_retries=10, max_connections=CONCURRENCY)
    try:
        return await load_with(client, url, pid, n)
    finally:
        await client.aclose()


async def load_with(client, url, pid, n):
    errors = []
    mixed = 0

    t = time.perf_counter()
    floor, floor_new = [], []
    async with envcraft.AsyncClient(url, max_connections=0) as one_shot:
        for _ in range(200):
            s = time.perf_counter()
            await client.health()
            floor.append(time.perf_counter() - s)
            s = time.perf_counter()
            await one_shot.health()
            floor_new.append(time.perf_counter() - s)
    idle = []
    idle_sessions = []
    for _ in range(40):
        s0 = time.perf_counter()
        idle_sessions.append(await client.create(TASK))
        idle.append(time.perf_counter() - s0)
        await asyncio.sleep(0.02)
    rss_before = rss_kib(pid)
    used_before = used_kib()
    cpu = {}
    cpu0 = cpu_sample(pid)
    t = time.perf_counter()
    # Creates are not retried: past what the machine holds each is answered 503 `capacity` at
    # once (counted below by category), and the calls then run in the sessions that exist.
    async with envcraft.AsyncClient(url, max_retries=0, max_connections=CONCURRENCY) as creator:
        created = await bounded(n, lambda i: creator.create(TASK))
    create_s = time.perf_counter() - t
    cpu["create"] = cpu_shares(cpu0, cpu_sample(pid))
    sessions = [s for s in created if not isinstance(s, BaseException)]
    errors += [describe(e) for e in created if isinstance(e, BaseException)]
    rss_after = rss_kib(pid)
    used_after = used_kib()

    file_lat, exec_lat = [], []

    async def file_calls(i):
        nonlocal mixed
        s = sessions[i]
        for k in range(8):
            content = f"session {s.id} write {k}\n" * 8
            t0 = time.perf_counter()
            r = await s.call("write", path=f"load/{k}.txt", content=content)
            file_lat.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            back = await s.call("read", path=f"load/{k}.txt")
            file_lat.append(time.perf_counter() - t0)
            if not (r.get("ok") and back.get("ok") and content in str(back.get("content", ""))):
                mixed += 1

    async def exec_calls(i):
        nonlocal mixed
        s = sessions[i]
        for k in range(4):
            t0 = time.perf_counter()
            r = await s.call("exec", command=f"cat load/{k}.txt")
            exec_lat.append(time.perf_counter() - t0)
            if not (r.get("ok") and f"session {s.id} write {k}" in str(r.get("stdout", ""))):
                mixed += 1

    cpu0 = cpu_sample(pid)
    t = time.perf_counter()
    errors += [describe(e) for e in await bounded(len(sessions), file_calls) if isinstance(e, BaseException)]
    file_s = time.perf_counter() - t
    cpu["file"] = cpu_shares(cpu0, cpu_sample(pid))
    cpu0 = cpu_sample(pid)
    t = time.perf_counter()
    errors += [describe(e) for e in await bounded(len(sessions), exec_calls) if isinstance(e, BaseException)]
    exec_s = time.perf_counter() - t
    cpu["exec"] = cpu_shares(cpu0, cpu_sample(pid))

    verify_lat = []

    async def verify(i):
        t0 = time.perf_counter()
        await sessions[i].verify()
        verify_lat.append(time.perf_counter() - t0)

    t = time.perf_counter()
    errors += [describe(e) for e in await bounded(len(sessions), verify) if isinstance(e, BaseException)]
    verify_s = time.perf_counter() - t
    await bounded(len(sessions), lambda i: sessions[i].close())
    for s in idle_sessions:
        await s.close()
    return {
        "idle": idle,
        "n": n, "opened": len(sessions), "create_s": create_s,
        "rss_per_session_kib": (rss_after - rss_before) / max(1, len(sessions)),
        "used_per_session_kib": (used_after - used_before) / max(1, len(sessions)),
        "file_calls": len(file_lat), "file_s": file_s, "file_lat": file_lat,
        "exec_calls": len(exec_lat), "exec_s": exec_s, "exec_lat": exec_lat,
        "verify_s": verify_s, "verify_lat": verify_lat, "floor": floor, "floor_new": floor_new,
        "errors": errors, "mixed": mixed, "cpu": cpu,
    }


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    counts = [1000]
    if "--sessions" in sys.argv:
        spec = sys.argv[sys.argv.index("--sessions") + 1]
        counts = [int(c) for c in spec.split(",")]
        args = [a for a in args if a != spec]
    if len(args) not in (1, 2):
        print(__doc__, file=sys.stderr)
        return 2
    binary = os.path.abspath(args[0])
    results = args[1] if len(args) == 2 else None
    for n in counts:
        publish(run_one(binary, n), results)
    return 0


def run_one(binary, n):
    """The load at `n` sessions on a server of its own; the section's lines."""
    state = tempfile.mkdtemp(prefix="envcraft-bench-server-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    argv = [binary, "serve", "--listen", "127.0.0.1:0", "--state-dir", state,
            "--max-sessions", str(n + 64), "--lock-wait-ms", "60000", "--warm-sandboxes", "8"]
    # One descriptor an idle session, four while a call runs on it, and the connections':
    # raised past the hard limit where root may (CAP_SYS_RESOURCE), else the server plans within it.
    nofile = max(20_000, 4 * n + 8192)
    if shutil.which("prlimit") and subprocess.run(
        ["prlimit", f"--nofile={nofile}:{nofile}", "true"], capture_output=True
    ).returncode == 0:
        argv = ["prlimit", f"--nofile={nofile}:{nofile}"] + argv
    else:
        print(f"bench/server.py: cannot raise the descriptor limit to {nofile} here "
              f"(hard limit {resource.getrlimit(resource.RLIMIT_NOFILE)[1]}): the server plans within it",
              file=sys.stderr)
    log_path = state + ".log"
    log = open(log_path, "a")
    # Its own cpuacct cgroup, so that where the machine's CPU went can be read whole.
    group = own_cpuacct_group(os.path.basename(state))

    def join_group():
        if group:
            with open(os.path.join(group, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))

    server = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True,
                              env={**os.environ, "ENVCRAFT_LOG": "info,envcraft=info"},
                              preexec_fn=join_group)
    try:
        line = server.stdout.readline().strip()
        if not line.startswith("listening on "):
            raise SystemExit(f"the server did not start: {line!r}")
        url = line.split(" ", 2)[2]
        # What the server says it can hold (logged before it listens): past that every create
        # is answered 503 `capacity`, so the load is held at that many sessions.
        with open(log_path) as f:
            held = re.search(r"can hold (\d+) sessions", re.sub(r"\x1b\[[0-9;]*m", "", f.read()))
        # Less the 40 idle creates, which stay open through the load.
        n_held = min(n, int(held.group(1)) - 40) if held else n
        r = asyncio.run(asyncio.wait_for(load(url, server.pid, n_held), DEADLINE_S + n * 0.1))
        r["asked"] = n
    finally:
        server.terminate()
        try:
            server.wait(timeout=120)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(state, ignore_errors=True)
        if group:
            try:
                os.rmdir(group)
            except OSError as e:
                print(f"bench/server.py: {group} not removed: {e}", file=sys.stderr)
        log.close()
        with open(log_path) as f:
            plain = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in f]
        os.unlink(log_path)
        plan = next((l[l.index("capacity: this machine"):].strip() for l in plain if "capacity: this machine" in l), None)

    file_rate = r["file_calls"] / r["file_s"]
    exec_rate = r["exec_calls"] / r["exec_s"]
    floor_p50 = statistics.median(r["floor"]) * 1000
    floor_new_p50 = statistics.median(r["floor_new"]) * 1000
    lost = r["opened"] * 20 - r["file_calls"] - r["exec_calls"]
    create_rate = r["opened"] / r["create_s"]
    idle_p50 = statistics.median(r["idle"]) * 1000
    big = r["asked"] >= 10_000
    out = [
        f"### F. Rollout server ({r['n']:,} sessions open at once"
        f"{'' if r['n'] == r['asked'] else ' of ' + format(r['asked'], ',') + ' asked for'} and 40 idle, 20 calls each, "
        f"{CONCURRENCY} requests in flight; one run)",
        "",
        "| What | Rate | p50 (ms) | p99 (ms) | Target |",
        "| --- | ---: | ---: | ---: | --- |",
        f"| open sessions (under load) | {create_rate:,.0f}/s | | | "
        f"{'>= 500/s: ' + verdict(create_rate >= 500) if big else ''} |",
        f"| one create, idle server (40 in a row) | | {idle_p50:.2f} | {pct(r['idle'], .99):.2f} | "
        f"<= 2 ms: {verdict(idle_p50 <= 2)} |",
        f"| file calls (`write`, `read`) | {file_rate:,.0f}/s | {pct(r['file_lat'], .5):.2f} | "
        f"{pct(r['file_lat'], .99):.2f} | >= {5000 if big else 2000:,}/s: "
        f"{verdict(file_rate >= (5000 if big else 2000))} |",
        f"| `exec` calls | {exec_rate:,.0f}/s | {pct(r['exec_lat'], .5):.2f} | "
        f"{pct(r['exec_lat'], .99):.2f} | >= {1000 if big else 300:,}/s: "
        f"{verdict(exec_rate >= (1000 if big else 300))} |",
        f"| verify | {len(r['verify_lat']) / r['verify_s']:.0f}/s | {pct(r['verify_lat'], .5):.2f} | "
        f"{pct(r['verify_lat'], .99):.2f} | |",
        f"| peer: `GET /healthz` (sequential, kept connection) | {1000 / floor_p50:,.0f}/s | "
        f"{floor_p50:.2f} | {pct(r['floor'], .99):.2f} | |",
        f"| peer: `GET /healthz` (sequential, new connection each) | {1000 / floor_new_p50:,.0f}/s | "
        f"{floor_new_p50:.2f} | {pct(r['floor_new'], .99):.2f} | |",
        "",
        f"- Machine memory per idle session: **{r['used_per_session_kib']:,.0f} KiB** (/proc/meminfo "
        f"MemTotal - MemAvailable, growth over {r['opened']:,} sessions); target < 1 MiB: "
        f"{verdict(r['used_per_session_kib'] < 1024)}. The server's own RSS: "
        f"{r['rss_per_session_kib']:,.0f} KiB per session.",
        f"- Errors: {len(r['errors'])}; lost calls: {lost}; mixed-up responses: {r['mixed']}; "
        f"target zero: {verdict(not r['errors'] and lost == 0 and r['mixed'] == 0)}.",
    ]
    cores = os.cpu_count() or 1
    out.append(f"- Where the machine's {cores} cores went, in cores over each phase: envcraft (the "
               "server, its sandbox maker, the inits and the commands they reaped), the load "
               "client, the machine's PID 1 (a process of the VM, not envcraft's), the kernel's "
               "threads, interrupts and softirqs charged to no process, the hypervisor's steal, "
               "and what none of these names; then the phase's calls per CPU-second of envcraft's:")
    for phase, key, calls, secs in (("creates", "create", r["opened"], r["create_s"]),
                                    ("file calls", "file", r["file_calls"], r["file_s"]),
                                    ("exec calls", "exec", r["exec_calls"], r["exec_s"])):
        c = r["cpu"][key]
        per = calls / c["envcraft"] if c["envcraft"] > 0 else float("nan")
        kernel = c["envcraft_kernel"] / c["envcraft"] if c["envcraft"] > 0 else float("nan")
        out.append(f"  - {phase}: busy {c['busy'] / secs:.2f}, envcraft {c['envcraft'] / secs:.2f} "
                   f"({kernel:.0%} of it in the kernel), "
                   f"client {c['client'] / secs:.2f}, PID 1 {c['pid1'] / secs:.2f}, "
                   f"kernel threads {c['kthreads'] / secs:.2f}, interrupts {c['irq'] / secs:.2f}, "
                   f"steal {c['steal'] / secs:.2f}, other {c['other'] / secs:.2f}; "
                   f"{per:,.0f} a CPU-second of envcraft's")
    if plan:
        out.append(f"- The server's plan at start: `{plan[:300]}`")
    if r["n"] < r["asked"]:
        out.append(f"- Sessions held: {r['n'] + 40:,} of the {r['asked']:,} asked for; target "
                   f"{r['asked']:,} held: {verdict(False)} (the plan above names the bound).")
    if r["errors"]:
        kinds = {}
        for e in r["errors"]:
            kinds[e.split(":", 1)[0]] = kinds.get(e.split(":", 1)[0], 0) + 1
        out.append("- Errors by category: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
        out.append(f"- First error: `{r['errors'][0][:200]}`")
    out += ["", "Generated by `python3 bench/server.py` (`make bench`)."]
    return out


if __name__ == "__main__":
    sys.exit(main())
