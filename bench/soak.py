#!/usr/bin/env python3
"""A soak of the rollout server with faults, loopback only, bounded in time.

    python3 bench/soak.py ENVCRAFT_BINARY [RESULTS_MD] [--duration SECS] [--seed N]
                          [--json OUT] [--tamper template]

Needs root (it mounts the state root). Mounts a small tmpfs (STATE_MIB) as the state root of
`envcraft serve --listen 127.0.0.1:0`, over copies of the bundled `example` environment and a
`soak` environment whose policy caps memory at 64 MiB; holds load with the asyncio client of
clients/python (WORKERS workers, each keeping a few sessions: `write` of a file unique to the
call, `read` and `exec cat` of it back, forks, verifies, closes); and meanwhile, at random
moments (`--seed`), one fault at a time, round-robin over the kinds in random order:

- `kill`: SIGKILL the server, check that its sandboxes died with it, restart it over the same
  state root (it resumes its sessions before it announces its address);
- `fill`: fill the state root's tmpfs to the last byte for a few seconds of load, then free it;
- `oom`: a session of `soak/oom` writes 200 MiB into its 64 MiB workspace: the command must be
  answered as killed by the OOM killer, and the session run commands again once the file is
  emptied with a file tool;
- `drop`: clients that vanish mid-request (a head sent without its body; a call sent and the
  connection closed before the answer), then a call on that session.

After each fault and at the end it checks: the templates untouched (hashes of every file);
every session it tracks either answers (resumed) or is cleanly `session_not_found`, and every
write the server acknowledged (answered 200, `ok`) reads back with the same content; no mount
on the host below the soak's directory but the state root's own; and at the end, once every
session is closed and the server stopped: no process left in a cgroup or state directory of
the server's sandboxes, no such cgroup left, no sandbox or session directory left. It prints
and appends to RESULTS_MD a dated summary (faults by kind, calls, checks passed and failed)
and writes the same as JSON to OUT. Exit status 0 only when every check passed and every fault
kind ran at least once. `--tamper template` changes a template file mid-run (to see a broken
invariant caught: the exit status must then be 1).
"""

import asyncio
import datetime
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from report import publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "clients", "python", "src"))

import envcraft  # noqa: E402
from envcraft.errors import EnvcraftError, SessionNotFound, TooManySessions  # noqa: E402

WORKERS = 6
SESSIONS_PER_WORKER = 3
STATE_MIB = 96
KINDS = ("kill", "fill", "oom", "drop")
FAULT_GAP_S = (5.0, 12.0)
START_TIMEOUT_S = 180
LOAD_TASK = "example/archive-read-mail"
OOM_TASK = "soak/oom"
OOM_POLICY_LIMITS = {"memory": '"64MiB"', "workspace_size": '"400MiB"', "tmp_size": '"400MiB"'}
CGROUP_ROOTS = (
    "/sys/fs/cgroup/pids/envcraft",
    "/sys/fs/cgroup/memory/envcraft",
    "/sys/fs/cgroup/unified/envcraft",
    "/sys/fs/cgroup/envcraft",
)


# -- the world around the server ------------------------------------------------------------


def tree_hashes(root):
    """{relative path: sha256 (or the link's target)} of every entry below root."""
    out = {}
    for top, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            path = os.path.join(top, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                out[rel] = "link:" + os.readlink(path)
            else:
                with open(path, "rb") as f:
                    out[rel] = hashlib.sha256(f.read()).hexdigest()
        for d in dirs:
            out[os.path.relpath(os.path.join(top, d), root) + "/"] = "dir"
    return out


def make_workspaces(base):
    """Copies of the bundled `example` environment and a `soak` one (memory 64 MiB)."""
    ws = os.path.join(base, "workspaces")
    os.makedirs(ws)
    shutil.copytree(os.path.join(ROOT, "workspaces", "example"), os.path.join(ws, "example"), symlinks=True)
    soak = os.path.join(ws, "soak")
    os.makedirs(os.path.join(soak, "files"))
    os.makedirs(os.path.join(soak, "tasks", "oom"))
    with open(os.path.join(soak, "files", "keep.txt"), "w") as f:
        f.write("kept\n")
    with open(os.path.join(soak, "docs.md"), "w") as f:
        f.write("# soak\n\nA workspace filled past its memory limit.\n")
    with open(os.path.join(ROOT, "policies", "default.toml")) as f:
        policy = f.read().splitlines()
    for i, line in enumerate(policy):
        key = line.split("=", 1)[0].strip()
        if key in OOM_POLICY_LIMITS:
            policy[i] = f"{key} = {OOM_POLICY_LIMITS[key]}"
    with open(os.path.join(soak, "policy.toml"), "w") as f:
        f.write("\n".join(policy) + "\n")
    with open(os.path.join(soak, "env.toml"), "w") as f:
        f.write(
            'name = "soak"\ndescription = "a 64 MiB sandbox"\npolicy = "policy.toml"\n'
            'tools = ["read", "write", "ls", "exec"]\nbase_time = "2026-03-02T09:00:00Z"\n'
            "time_step_secs = 60\n"
        )
    with open(os.path.join(soak, "tasks", "oom", "task.toml"), "w") as f:
        f.write('prompt = "fill"\n\n[verifier]\nkind = "manifest"\nextra = "allow"\n')
    with open(os.path.join(soak, "tasks", "oom", "expected.json"), "w") as f:
        json.dump({"version": 1, "files": {}, "absent": [], "unchanged": [], "ignore": [],
                   "extra": "allow", "all_or_nothing": False}, f)
    for top, dirs, files in os.walk(base):
        for name in dirs + files:
            path = os.path.join(top, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | 0o444 | (0o111 if os.path.isdir(path) else 0))
    return ws


def mounts_below(base):
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f if line.split()[4].startswith(base + "/")]


def parent_of(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        return int(stat[stat.rfind(")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def descendants(root):
    pairs = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            ppid = parent_of(int(name))
            if ppid is not None:
                pairs.append((int(name), ppid))
    out, frontier = set(), [root]
    while frontier:
        p = frontier.pop()
        for pid, ppid in pairs:
            if ppid == p and pid not in out:
                out.add(pid)
                frontier.append(pid)
    return out


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def sandbox_names(state):
    """Names of the sandbox state directories (`envcraft-*`) now below the state root; each
    sandbox's cgroups bear the same name."""
    names = set()
    for top, dirs, _files in os.walk(state):
        depth = os.path.relpath(top, state).count(os.sep)
        for d in dirs:
            if d.startswith("envcraft-"):
                names.add(d)
        if depth >= 2:
            dirs[:] = []
    return names


def cgroups_named(names):
    """The cgroup directories of those sandboxes that still exist, with their processes."""
    out = {}
    for root in CGROUP_ROOTS:
        for name in names:
            path = os.path.join(root, name)
            if os.path.isdir(path):
                try:
                    with open(os.path.join(path, "cgroup.procs")) as f:
                        out[path] = [int(p) for p in f.read().split()]
                except OSError:
                    out[path] = []
    return out


# -- the server -------------------------------------------------------------------------------


class Server:
    def __init__(self, binary, state, workspaces):
        self.binary, self.state, self.workspaces = binary, state, workspaces
        self.proc = None
        self.url = None
        self.log = open(os.path.join(os.path.dirname(state), "server.log"), "ab")

    def start(self):
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--listen", "127.0.0.1:0", "--state-dir", self.state,
             "--workspaces", self.workspaces, "--max-sessions", "256", "--lock-wait-ms", "30000",
             "--request-timeout", "120"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=self.log, stdin=subprocess.DEVNULL,
        )
        line = []
        reader = threading.Thread(target=lambda: line.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        text = line[0].decode().strip() if line else ""
        if not text.startswith("listening on "):
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"the server did not start within {START_TIMEOUT_S}s: {text!r}")
        self.url = text.split(" ", 2)[2]
        return self.url

    def kill(self):
        """SIGKILL; the pids of its tree at that moment."""
        tree = descendants(self.proc.pid)
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        return tree

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# -- the soak ---------------------------------------------------------------------------------


class Soak:
    def __init__(self, server, workspaces, state, base, duration, rng, tamper):
        self.server, self.workspaces, self.state, self.base = server, workspaces, state, base
        self.duration, self.rng, self.tamper = duration, rng, tamper
        self.templates = tree_hashes(workspaces)
        self.client = None
        self.up = asyncio.Event()
        self.quiet = asyncio.Lock()  # held by a fault and its checks; load waits meanwhile
        self.sessions = {}  # id -> {"session": AsyncSession, "acked": {path: content}}
        self.faults = {k: 0 for k in KINDS}
        self.calls = {"ok": 0, "failed": 0}
        self.checks = {}  # name -> [passed, failed]
        self.failures = []
        self.names = set()
        self.seq = 0
        self.epoch = 0  # restarts so far
        self.outcomes = {"answered": 0, "not_found": 0}  # sessions met by the after-fault checks

    def check(self, name, ok, detail=""):
        slot = self.checks.setdefault(name, [0, 0])
        slot[0 if ok else 1] += 1
        if not ok:
            self.failures.append(f"{name}: {detail}"[:500])
            print(f"soak: FAILED {name}: {detail}"[:500], file=sys.stderr)

    async def connect(self, url):
        if self.client is not None:
            await self.client.aclose()
        self.client = envcraft.AsyncClient(url, max_retries=2, timeout=120, max_connections=32)
        for entry in self.sessions.values():
            entry["session"].client = self.client
        self.up.set()

    # -- load --

    async def worker(self, w, deadline):
        mine = []
        while time.monotonic() < deadline:
            await self.up.wait()
            async with self.quiet:
                pass
            try:
                await self.step(w, mine)
            except EnvcraftError:
                self.calls["failed"] += 1
            await asyncio.sleep(self.rng.uniform(0.02, 0.1))

    async def step(self, w, mine):
        mine[:] = [s for s in mine if s in self.sessions]
        if len(mine) < SESSIONS_PER_WORKER:
            s = await self.client.create(LOAD_TASK)
            self.calls["ok"] += 1
            self.sessions[s.id] = {"session": s, "acked": {}}
            mine.append(s.id)
            return
        sid = self.rng.choice(mine)
        epoch = self.epoch
        try:
            await self.operate(w, mine, sid)
        except SessionNotFound:
            self.calls["failed"] += 1
            # Only a restart may drop a session (one whose replay differed); between two, a
            # session the server forgot is lost.
            self.check("no_session_lost_between_restarts", self.epoch != epoch or sid not in self.sessions,
                       f"{sid} answered session_not_found")
            self.sessions.pop(sid, None)
            if sid in mine:
                mine.remove(sid)

    async def operate(self, w, mine, sid):
        entry = self.sessions.get(sid)
        if entry is None:  # dropped by an after-fault check meanwhile
            mine.remove(sid)
            return
        s = entry["session"]
        roll = self.rng.random()
        self.seq += 1
        if roll < 0.45:
            path = f"soak/{w}-{self.seq}.txt"
            content = f"{sid} {self.seq} {self.rng.random()}\n"
            r = await s.call("write", path=path, content=content)
            self.calls["ok"] += 1
            if r.get("ok"):
                entry["acked"][path] = content
        elif roll < 0.7 and entry["acked"]:
            path, content = self.rng.choice(sorted(entry["acked"].items()))
            r = await s.call("read", path=path)
            self.calls["ok"] += 1
            self.check("read_back", r.get("ok") and r.get("content") == content, f"{sid} {path}: {r}")
        elif roll < 0.85 and entry["acked"]:
            path, content = self.rng.choice(sorted(entry["acked"].items()))
            r = await s.call("exec", command=f"cat {path}")
            self.calls["ok"] += 1
            self.check("exec_back", r.get("ok") and r.get("stdout") == content, f"{sid} {path}: {r}")
        elif roll < 0.9:
            child = await s.fork()
            self.calls["ok"] += 1
            self.sessions[child.id] = {"session": child, "acked": dict(entry["acked"])}
            mine.append(child.id)
        elif roll < 0.95:
            await s.verify()
            self.calls["ok"] += 1
        else:
            await s.close()
            self.calls["ok"] += 1
            self.sessions.pop(sid, None)
            if sid in mine:
                mine.remove(sid)

    # -- faults --

    async def faults_loop(self, deadline):
        order = []
        while True:
            await asyncio.sleep(self.rng.uniform(*FAULT_GAP_S))
            if time.monotonic() >= deadline:
                return
            if not order:
                order = list(KINDS)
                self.rng.shuffle(order)
            kind = order.pop()
            if self.tamper == "template" and sum(self.faults.values()) == 0:
                with open(os.path.join(self.workspaces, "example", "files", "notes", "todo.md"), "a") as f:
                    f.write("tampered\n")
            async with self.quiet:
                self.names |= sandbox_names(self.state)
                await getattr(self, "fault_" + kind)()
                self.faults[kind] += 1
                await self.after_fault(kind)

    async def fault_kill(self):
        self.up.clear()
        self.epoch += 1
        tree = await asyncio.to_thread(self.server.kill)
        left = set()
        for _ in range(100):  # up to 10 s for the kernel to end the sandboxes
            left = {p for p in tree if alive(p)}
            if not left:
                break
            await asyncio.sleep(0.1)
        self.check("no_process_after_kill", not left, f"still alive: {sorted(left)}")
        url = await asyncio.to_thread(self.server.start)
        await self.connect(url)

    async def fault_fill(self):
        filler = os.path.join(self.state, "soak-fill")
        try:
            with open(filler, "wb") as f:
                chunk = b"\0" * (1 << 20)
                while True:
                    f.write(chunk)
                    f.flush()
        except OSError:
            pass
        # Load runs against the full disk for a while: calls may fail, none may be lost.
        self.quiet.release()
        try:
            await asyncio.sleep(3)
        finally:
            await self.quiet.acquire()
            os.unlink(filler)
        health = await self.client.health()
        self.check("healthy_after_fill", health.get("status") == "ok", str(health))

    async def fault_oom(self):
        try:
            s = await self.client.create(OOM_TASK)
        except TooManySessions as e:
            # The server is full: that is an answer, not a crash, as long as the sessions it holds
            # are the ones this soak holds (in-flight creates and forks aside); more is a leak.
            held = (await self.client.health()).get("sessions", 0)
            self.check("no_session_leaked", held <= len(self.sessions) + 2 * WORKERS,
                       f"{e!r}: the server holds {held} sessions, the soak {len(self.sessions)}")
            return
        try:
            r = await s.call("exec", command="exec head -c 200M /dev/zero > fill.bin")
            self.check("oom_reported", r.get("ok") and r.get("killed_by") == "oom", str(r)[:300])
            r = await s.call("write", path="fill.bin", content="")
            r = await s.call("exec", command="echo alive")
            self.check("session_after_oom", r.get("ok") and r.get("stdout") == "alive\n", str(r)[:300])
            self.calls["ok"] += 4
        finally:
            await s.close()

    async def fault_drop(self):
        if not self.sessions:
            return
        sid = self.rng.choice(sorted(self.sessions))
        host, port = self.server.url.split("//", 1)[1].rsplit(":", 1)
        body = json.dumps({"tool": "exec", "args": {"command": "true"}}).encode()
        head = (f"POST /v1/sessions/{sid}/call HTTP/1.1\r\nHost: {host}\r\n"
                f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode()
        for cut in (head, head + body[: len(body) // 2], head + body):
            with socket.create_connection((host, int(port)), timeout=10) as conn:
                conn.sendall(cut)
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        try:
            r = await self.sessions[sid]["session"].call("exec", command="echo after-drop")
            self.check("session_after_drop", r.get("ok") and r.get("stdout") == "after-drop\n", str(r)[:300])
        except SessionNotFound:
            self.check("session_after_drop", False, f"{sid} lost after a dropped client")

    async def after_fault(self, kind):
        self.check("templates_untouched", tree_hashes(self.workspaces) == self.templates, f"after {kind}")
        extra = [m for m in mounts_below(self.base) if m != self.state]
        self.check("no_host_mount", not extra, f"after {kind}: {extra}")
        for sid in sorted(self.sessions):
            entry = self.sessions[sid]
            try:
                await entry["session"].diff()
            except SessionNotFound:
                self.check("resumed_or_not_found", True)
                self.outcomes["not_found"] += 1
                self.sessions.pop(sid, None)
                continue
            except EnvcraftError as e:
                self.check("resumed_or_not_found", False, f"after {kind}: {sid}: {e!r}")
                continue
            self.check("resumed_or_not_found", True)
            self.outcomes["answered"] += 1
            for path, content in sorted(entry["acked"].items()):
                try:
                    r = await entry["session"].call("read", path=path)
                except EnvcraftError as e:
                    r = {"error": repr(e)}
                self.check("acknowledged_write_kept", r.get("ok") and r.get("content") == content,
                           f"after {kind}: {sid} {path}: {str(r)[:200]}")

    # -- the end --

    async def finish(self):
        for entry in list(self.sessions.values()):
            try:
                await entry["session"].close()
            except EnvcraftError:
                pass
        self.sessions.clear()
        await self.client.aclose()

    def final_checks(self):
        self.names |= sandbox_names(self.state)
        server_pid = self.server.proc.pid
        tree = descendants(server_pid)
        self.server.stop()
        left = {p for p in tree if alive(p)}
        self.check("no_process_at_end", not left, f"{sorted(left)}")
        cgroups = cgroups_named(self.names)
        self.check("no_cgroup_at_end", not cgroups, f"{cgroups}")
        extra = [m for m in mounts_below(self.base) if m != self.state]
        self.check("no_host_mount", not extra, f"at the end: {extra}")
        leftover = sorted(sandbox_names(self.state))
        sessions_dir = os.path.join(self.state, "sessions")
        sessions = sorted(os.listdir(sessions_dir)) if os.path.isdir(sessions_dir) else []
        self.check("no_state_directory_at_end", not leftover and not sessions,
                   f"sandboxes {leftover}, sessions {sessions}")
        self.check("templates_untouched", tree_hashes(self.workspaces) == self.templates, "at the end")

    async def run(self):
        await self.connect(self.server.url)
        deadline = time.monotonic() + self.duration
        workers = [asyncio.create_task(self.worker(w, deadline)) for w in range(WORKERS)]
        try:
            await self.faults_loop(deadline)
            await asyncio.gather(*workers)
            async with self.quiet:
                await self.after_fault("the end")
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            await self.finish()


def summary(soak, duration, seed, ok, binary):
    passed = sum(p for p, _ in soak.checks.values())
    failed = sum(f for _, f in soak.checks.values())
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "duration_s": duration, "seed": seed, "binary": os.path.relpath(binary, ROOT), "faults": soak.faults, "calls": soak.calls,
        "sessions_checked": soak.outcomes,
        "checks": {k: {"passed": p, "failed": f} for k, (p, f) in sorted(soak.checks.items())},
        "checks_passed": passed, "checks_failed": failed, "failures": soak.failures[:20], "ok": ok,
    }


def main():
    argv = sys.argv[1:]
    opts = {}
    for flag in ("--duration", "--seed", "--json", "--tamper"):
        if flag in argv:
            i = argv.index(flag)
            opts[flag] = argv[i + 1]
            del argv[i:i + 2]
    if len(argv) not in (1, 2) or os.geteuid() != 0:
        print(__doc__, file=sys.stderr)
        return 2
    binary = os.path.abspath(argv[0])
    results = argv[1] if len(argv) == 2 else None
    duration = float(opts.get("--duration", 1800))
    seed = int(opts.get("--seed", int(time.time())))
    rng = random.Random(seed)
    base = tempfile.mkdtemp(prefix="envcraft-soak-")
    state = os.path.join(base, "state")
    os.makedirs(state)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={STATE_MIB}m,mode=0755", "soak-state", state],
                   check=True)
    server = None
    try:
        workspaces = make_workspaces(base)
        server = Server(binary, state, workspaces)
        server.start()
        soak = Soak(server, workspaces, state, base, duration, rng, opts.get("--tamper"))
        try:
            asyncio.run(asyncio.wait_for(soak.run(), duration + 900))
        except Exception as e:  # noqa: BLE001 - any crash of the soak itself is a failed check
            soak.check("soak_ran_to_its_end", False, repr(e))
        soak.final_checks()
        ok = not soak.failures and all(n > 0 for n in soak.faults.values())
        result = summary(soak, duration, seed, ok, binary)
    finally:
        if server is not None:
            server.stop()
        subprocess.run(["umount", "-l", state], check=False)
        shutil.rmtree(base, ignore_errors=True)
    if "--json" in opts:
        with open(opts["--json"], "w") as f:
            json.dump(result, f, indent=1)
    lines = [
        f"## Soak with faults ({result['date']}, {duration:.0f} s, seed {seed}, `{result['binary']}`)",
        "",
        "`python3 bench/soak.py` (`make soak`): load on `envcraft serve` over a "
        f"{STATE_MIB} MiB tmpfs state root, {WORKERS} workers, while the server is killed and "
        "restarted, its state root filled, sandboxes OOM-killed and clients dropped mid-request.",
        "",
        "| faults | " + " | ".join(KINDS) + " |",
        "| --- | " + " | ".join("---:" for _ in KINDS) + " |",
        "| injected | " + " | ".join(str(soak.faults[k]) for k in KINDS) + " |",
        "",
        f"Calls answered: {soak.calls['ok']:,}; failed (refused or cut by a fault, none "
        f"acknowledged): {soak.calls['failed']:,}. Sessions met by the after-fault checks: "
        f"{soak.outcomes['answered']:,} answered, {soak.outcomes['not_found']:,} "
        "`session_not_found` (dropped at a resume).",
        "",
        "| invariant check | passed | failed |",
        "| --- | ---: | ---: |",
    ]
    lines += [f"| {k} | {v['passed']:,} | {v['failed']:,} |" for k, v in result["checks"].items()]
    lines += ["", f"Verdict: {'every invariant held' if ok else '**an invariant broke**'}."]
    lines += [f"- {f}" for f in result["failures"][:10]]
    publish(lines, results if opts.get("--tamper") is None else None)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
