#!/usr/bin/env python3
"""Where an idle session's memory goes, measured system-wide and part by part.

    python3 bench/session_memory.py ENVCRAFT_BINARY [RESULTS_MD] [--sessions 200,1000]
                                    [--namespaces K]

Starts `envcraft serve --listen 127.0.0.1:0` on a state root under /dev/shm (a tmpfs, as
envcraft's default), and for each N given:
1. opens N idle sessions of the bundled `example/archive-read-mail` (plain HTTP/1.1 on a few
   kept-alive connections) and, before and after, reads
   - /proc/meminfo: the machine's used memory (MemTotal - MemAvailable) and its kernel parts
     (Shmem, Slab, SUnreclaim, KernelStack, PageTables);
   - the server's RSS and PSS (/proc/PID/smaps_rollup);
   - every process under the server (the sessions' sandbox inits and what they run): RSS,
     PSS and page tables (VmPTE) summed;
   - the memory charged to the sessions' cgroups (memory.usage_in_bytes, and its kmem part,
     of each distinct memory cgroup those processes are in, under /sys/fs/cgroup/memory);
   - the pages in each sandbox's own tmpfs mounts (statvfs through /proc/PID/root, one count
     per superblock) and in the state root (du), and the mounts a sandbox holds;
   then closes them;
2. the same N sessions of the same task under a copy of the default policy whose network mode
   is "host" (no network namespace): the difference is what the session's network namespace
   costs in place.
Then, apart from envcraft, K processes (default 500) forked from this one, each holding
   nothing more, a network namespace (loopback up), or a mount namespace with a 256 MiB tmpfs
   holding one 4 KiB file: the meminfo delta of each kind minus that of the plain processes is
   what one such namespace costs.

The machine is shared: a phase's meminfo delta includes whatever else ran during it (seconds),
so the kernel figures (Slab, PageTables, KernelStack) are the steadier ones.
Prints a Markdown section and appends it to RESULTS_MD when given.
"""

import ctypes
import fcntl
import http.client
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from report import publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASK = "archive-read-mail"
ENV = "example"
HOSTNET_ENV = "example-hostnet"
CONNECTIONS = 4
MEMINFO_KEYS = ["Shmem", "Slab", "SUnreclaim", "Percpu", "KernelStack", "PageTables"]
CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_NOSUID, MS_NODEV = 2, 4


def meminfo():
    """/proc/meminfo in KiB, with `used` = MemTotal - MemAvailable."""
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, rest = line.split(":", 1)
            out[key] = int(rest.split()[0])
    out["used"] = out["MemTotal"] - out["MemAvailable"]
    return out


def rollup(pid):
    """(RSS, PSS, USS: its private pages) in KiB from /proc/PID/smaps_rollup; zeros once the
    process is gone."""
    rss = pss = uss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1])
                elif line.startswith(("Private_Clean:", "Private_Dirty:")):
                    uss += int(line.split()[1])
    except OSError:
        pass
    return rss, pss, uss


def start_time(pid):
    """When `pid` started (clock ticks since boot; 0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return 0


def private_by_mapping(pid, top=6):
    """The mappings holding most of `pid`'s private pages: [(name, KiB)], largest first."""
    sizes, name = {}, "?"
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                head = line.split()
                if not head[0].endswith(":") or "-" in head[0]:
                    name = head[5] if len(head) > 5 else "[anonymous]"
                    name = os.path.basename(name) if name.startswith("/") else name
                elif head[0] in ("Private_Clean:", "Private_Dirty:"):
                    sizes[name] = sizes.get(name, 0) + int(head[1])
    except OSError:
        return []
    return sorted(sizes.items(), key=lambda kv: -kv[1])[:top]


def page_tables(pid):
    """VmPTE in KiB (the process's page tables), 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmPTE:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(root_pid):
    """Every live process under `root_pid` (any depth), from /proc/*/stat's ppid."""
    children = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [root_pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def memory_cgroup(pid):
    """The v1 memory cgroup directory `pid` is in, or None (gone, or the root cgroup)."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if "memory" in controllers.split(",") and path != "/":
                    return "/sys/fs/cgroup/memory" + path
    except OSError:
        pass
    return None


def read_int(path):
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def sandbox_tmpfs(pid):
    """(KiB used in the tmpfs mounts of `pid`'s mount namespace, one count per superblock,
    mounts in it); (0, 0) once it is gone."""
    used, devs, mounts = 0, set(), 0
    try:
        with open(f"/proc/{pid}/mountinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return 0, 0
    for line in lines:
        mounts += 1
        left, right = line.split(" - ", 1)
        fields = left.split()
        if right.split()[0] != "tmpfs" or fields[2] in devs:
            continue
        devs.add(fields[2])
        target = fields[4].encode().decode("unicode_escape")
        try:
            st = os.statvfs(f"/proc/{pid}/root{target}")
        except OSError:
            continue
        used += (st.f_blocks - st.f_bfree) * st.f_frsize // 1024
    return used, mounts


def du_kib(path):
    out = subprocess.run(["du", "-sk", path], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


class Api:
    """POST/DELETE of sessions on one kept-alive connection per thread."""

    def __init__(self, host, port):
        self.host, self.port = host, port
        self.local = threading.local()

    def request(self, method, path, body=None):
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPConnection(self.host, self.port, timeout=120)
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if data else {}
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        text = resp.read()
        if resp.status >= 300:
            raise RuntimeError(f"{method} {path}: HTTP {resp.status}: {text[:300]!r}")
        return json.loads(text) if text else {}

    def create(self, task):
        return self.request("POST", "/v1/sessions", {"task": task})["session_id"]

    def close(self, session_id):
        self.request("DELETE", f"/v1/sessions/{session_id}")


def hostnet_env(workspaces):
    """A copy of the example environment whose policy is the default with network mode "host"."""
    src = os.path.join(ROOT, "workspaces", ENV)
    shutil.copytree(src, os.path.join(workspaces, ENV), symlinks=True)
    dst = os.path.join(workspaces, HOSTNET_ENV)
    shutil.copytree(src, dst, symlinks=True)
    with open(os.path.join(ROOT, "policies", "default.toml")) as f:
        policy = f.read()
    policy = policy.replace('mode = "none"', 'mode = "host"')
    policy = policy.replace('"network_namespace", ', "")
    policy = policy.replace('best_effort = [', 'best_effort = ["network_namespace", ')
    with open(os.path.join(dst, "hostnet.toml"), "w") as f:
        f.write(policy)
    env_toml = os.path.join(dst, "env.toml")
    with open(env_toml) as f:
        text = f.read()
    text = text.replace(f'name = "{ENV}"', f'name = "{HOSTNET_ENV}"')
    text = text.replace('policy = "default"', 'policy = "hostnet.toml"')
    with open(env_toml, "w") as f:
        f.write(text)


def others(server_pid):
    """KiB of PSS + page tables of every process but the server, what it started and this
    benchmark: what the rest of the machine did during a phase, to take out of its delta."""
    mine = set(descendants(server_pid)) | {server_pid, os.getpid()}
    total = 0
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in mine:
            total += rollup(int(name))[1] + page_tables(int(name))
    return total


def phase(api, server_pid, state, env, n):
    """Open n idle sessions of env's task, measure every part, close them."""
    others_before = others(server_pid)
    before = meminfo()
    srv_before = rollup(server_pid)
    with ThreadPoolExecutor(CONNECTIONS) as pool:
        ids = list(pool.map(lambda _: api.create(f"{env}/{TASK}"), range(n)))
    after = meminfo()
    srv_after = rollup(server_pid)
    others_after = others(server_pid)
    procs = descendants(server_pid)
    rss = pss = uss = pte = tmpfs = mounts = 0
    cgroups = set()
    namespaces = set()
    private = []
    for pid in procs:
        r, p, u = rollup(pid)
        private.append(u)
        rss, pss, uss, pte = rss + r, pss + p, uss + u, pte + page_tables(pid)
        cg = memory_cgroup(pid)
        if cg:
            cgroups.add(cg)
        try:
            ns = os.readlink(f"/proc/{pid}/ns/mnt")
        except OSError:
            continue
        if ns not in namespaces:
            namespaces.add(ns)
            used, count = sandbox_tmpfs(pid)
            tmpfs, mounts = tmpfs + used, mounts + count
    charged = sum(read_int(os.path.join(c, "memory.usage_in_bytes")) for c in cgroups) // 1024
    kmem = sum(read_int(os.path.join(c, "memory.kmem.usage_in_bytes")) for c in cgroups) // 1024
    state_kib = du_kib(state)
    by_age = sorted(procs, key=start_time)
    oldest = private_by_mapping(by_age[0]) if by_age else []
    newest = private_by_mapping(by_age[-1]) if by_age else []
    with ThreadPoolExecutor(CONNECTIONS) as pool:
        list(pool.map(api.close, ids))
    per = {k: (after[k] - before[k]) / n for k in ["used"] + MEMINFO_KEYS}
    per.update({
        "others": (others_after - others_before) / n,
        "server_rss": (srv_after[0] - srv_before[0]) / n,
        "server_pss": (srv_after[1] - srv_before[1]) / n,
        "server_uss": (srv_after[2] - srv_before[2]) / n,
        "procs": len(procs) / n, "rss": rss / n, "pss": pss / n, "uss": uss / n, "pte": pte / n,
        "oldest": oldest, "newest": newest,
        "private_spread": spread(private),
        "tree_pss": (srv_after[1] - srv_before[1] + pss) / n,
        "cgroups": len(cgroups), "charged": charged / n, "kmem": kmem / n,
        "tmpfs": tmpfs / n, "mounts": mounts / max(1, len(namespaces)),
        "state": state_kib / n,
    })
    return per


def spread(values):
    """(min, median, max) of `values`, zeros when there are none."""
    if not values:
        return 0, 0, 0
    ordered = sorted(values)
    return ordered[0], ordered[len(ordered) // 2], ordered[-1]


def libc():
    lib = ctypes.CDLL(None, use_errno=True)
    lib.unshare.argtypes = [ctypes.c_int]
    lib.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
    return lib


def loopback_up():
    """Set `lo` up in this process's network namespace (as a sandbox's is)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, 0x8913, req))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", flags | 1))  # SIOCSIFFLAGS, IFF_UP


def hold(kind, lib, target):
    """In a forked child: make what `kind` names (a tmpfs on `target`); raises on failure."""
    if kind == "netns":
        if lib.unshare(CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET)")
        loopback_up()
    elif kind == "mntns":
        if lib.unshare(CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS)")
        if lib.mount(b"none", b"/", None, 0x40000 | 0x4000, None) != 0:  # MS_PRIVATE|MS_REC
            raise OSError(ctypes.get_errno(), "mount --make-rprivate /")
        if lib.mount(b"tmpfs", target, b"tmpfs", MS_NOSUID | MS_NODEV,
                     b"size=256m,mode=700") != 0:
            raise OSError(ctypes.get_errno(), "mount tmpfs")
        with open(os.path.join(target, b"f"), "wb") as f:
            f.write(b"x" * 4096)


def namespace_cost(kind, k):
    """Per process of k forked processes each holding `kind` (KiB): the meminfo delta, and
    what their own memory cgroup was charged (`charged`, `kmem`; noise-free)."""
    lib = libc()
    cgroup = f"/sys/fs/cgroup/memory/envcraft-bench-memory-{kind}-{os.getpid()}"
    os.mkdir(cgroup)
    try:
        return held(kind, k, lib, cgroup)
    finally:
        os.rmdir(cgroup)


def held(kind, k, lib, cgroup):
    scratch = tempfile.mkdtemp(prefix="envcraft-bench-memory-mnt-")
    targets = [os.path.join(scratch, str(i)) for i in range(k)]
    for target in targets:
        os.mkdir(target)
    try:
        return held_in(kind, k, lib, cgroup, targets)
    finally:
        shutil.rmtree(scratch)


def held_in(kind, k, lib, cgroup, targets):
    ready_r, ready_w = os.pipe()
    release_r, release_w = os.pipe()
    before = meminfo()
    pids = []
    for i in range(k):
        pid = os.fork()
        if pid == 0:
            os.close(ready_r)
            os.close(release_w)
            code = 0
            try:
                with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
                hold(kind, lib, targets[i].encode())
                os.write(ready_w, b"y")
            except BaseException as e:  # noqa: BLE001: told to the parent by a "n"
                print(f"{kind}: {e}", file=sys.stderr)
                os.write(ready_w, b"n")
                code = 1
            os.read(release_r, 1)
            os._exit(code)
        pids.append(pid)
    ok = 0
    for _ in range(k):
        ok += os.read(ready_r, 1) == b"y"
    after = meminfo()
    after["charged"] = read_int(os.path.join(cgroup, "memory.usage_in_bytes")) // 1024
    after["kmem"] = read_int(os.path.join(cgroup, "memory.kmem.usage_in_bytes")) // 1024
    before["charged"] = before["kmem"] = 0
    os.close(release_w)
    for pid in pids:
        os.waitpid(pid, 0)
    for fd in (ready_r, ready_w, release_r):
        os.close(fd)
    if ok != k:
        raise SystemExit(f"{k - ok} of {k} processes could not make a {kind}")
    keys = ["used", "charged", "kmem"] + MEMINFO_KEYS
    return {key: (after[key] - before[key]) / k for key in keys}


def cgroup_cost(k):
    """meminfo delta per pair of empty v1 cgroups (one memory, one pids), k pairs made (KiB)."""
    made = []
    before = meminfo()
    try:
        for i in range(k):
            for hierarchy in ("memory", "pids"):
                path = f"/sys/fs/cgroup/{hierarchy}/envcraft-bench-memory-cg-{os.getpid()}-{i}"
                os.mkdir(path)
                made.append(path)
        after = meminfo()
    finally:
        for path in made:
            os.rmdir(path)
    return {key: (after[key] - before[key]) / k for key in ["used"] + MEMINFO_KEYS}


def start_server(binary, workspaces, state, n, log):
    server = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--state-dir", state,
         "--workspaces", workspaces, "--max-sessions", str(n + 16)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True,
    )
    line = server.stdout.readline().strip()
    if not line.startswith("listening on "):
        server.kill()
        server.wait()
        raise SystemExit(f"the server did not start: {line!r}")
    host, port = line.split(" ", 2)[2].split("//", 1)[-1].rstrip("/").rsplit(":", 1)
    return server, Api(host, int(port))


def stop(server):
    server.terminate()
    try:
        server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def row(what, value, method):
    return f"| {what} | {value} | {method} |"


def table(n, d, h):
    k = lambda v: f"{v:,.0f}"  # noqa: E731
    kernel = ("PageTables", "Slab", "Percpu", "KernelStack", "Shmem")
    parts = d["tree_pss"] + sum(d[key] for key in kernel)
    host_used = h["used"] - h["others"]
    rows = [
        ("**machine: used memory**", f"**{k(d['used'])}**",
         "/proc/meminfo MemTotal - MemAvailable, after - before"),
        ("machine: used memory, less what other processes did meanwhile",
         f"**{k(d['used'] - d['others'])}**",
         f"the same, minus the change of every other process's PSS + page tables "
         f"({k(d['others'])})"),
        ("of which Shmem (tmpfs)", k(d["Shmem"]), "/proc/meminfo Shmem"),
        ("of which Slab (SUnreclaim)", f"{k(d['Slab'])} ({k(d['SUnreclaim'])})",
         "/proc/meminfo Slab, SUnreclaim"),
        ("of which Percpu", k(d["Percpu"]), "/proc/meminfo Percpu"),
        ("of which KernelStack", k(d["KernelStack"]), "/proc/meminfo KernelStack"),
        ("of which PageTables", k(d["PageTables"]), "/proc/meminfo PageTables"),
        ("server RSS / PSS / private growth",
         f"{k(d['server_rss'])} / {k(d['server_pss'])} / {k(d['server_uss'])}",
         "/proc/SERVER/smaps_rollup (private: Private_Clean + Private_Dirty)"),
        (f"sandbox processes ({d['procs']:.1f} a session): RSS / PSS / private",
         f"{k(d['rss'])} / {k(d['pss'])} / **{k(d['uss'])}**",
         "smaps_rollup of every process under the server, summed"),
        ("their page tables", k(d["pte"]), "VmPTE of those, summed"),
        ("**user pages: server + sandboxes, PSS growth**", f"**{k(d['tree_pss'])}**",
         "server's PSS after - before, plus the sandboxes' PSS (pages shared only among "
         "sandboxes, as the server rewrote its copy, counted once)"),
        ("*sum of the parts*", f"*{k(parts)}*",
         "that PSS growth + " + " + ".join(kernel) + ", against the used memory above"),
        (f"cgroup memory charged ({d['cgroups']:,} memory cgroups), of which kmem",
         f"{k(d['charged'])}, {k(d['kmem'])}",
         "memory.usage_in_bytes, memory.kmem.usage_in_bytes"),
        (f"sandbox tmpfs pages ({d['mounts']:.0f} mounts a sandbox)", k(d["tmpfs"]),
         "statvfs of each tmpfs in /proc/PID/mountinfo, via /proc/PID/root"),
        ("state root (/dev/shm)", k(d["state"]), "du -sk"),
        ("**network namespace, in place: Slab, Percpu**",
         f"**{k(d['Slab'] - h['Slab'])}, {k(d['Percpu'] - h['Percpu'])}**",
         f"these sessions' minus those of {n:,} sessions under the default policy with "
         f"network mode \"host\", opened next"),
        ("(the same by used memory: not usable)",
         k(d["used"] - d["others"] - host_used),
         f"used memory less other processes, minus the \"host\" sessions' ({k(host_used)}): "
         "those are clones of a server that has done more, and cost more"),
    ]
    return [
        f"#### {n:,} idle sessions of `{ENV}/{TASK}` (per session, KiB)",
        "",
        "| What | Per session | Method |",
        "| --- | ---: | --- |",
        *(row(*r) for r in rows),
        "",
        "Private pages of one sandbox process (min / median / max, KiB): "
        + " / ".join(f"{v:,}" for v in d["private_spread"]) + ". "
        "The oldest sandbox process's private pages by mapping (KiB, /proc/PID/smaps): "
        + ", ".join(f"`{name}` {kib:,}" for name, kib in d["oldest"]) + "; the newest's: "
        + ", ".join(f"`{name}` {kib:,}" for name, kib in d["newest"]) + ".",
        "",
    ]


def main():
    argv = sys.argv[1:]
    opts = {}
    for name in ("--sessions", "--namespaces"):
        if name in argv:
            i = argv.index(name)
            opts[name] = argv[i + 1]
            del argv[i:i + 2]
    if len(argv) not in (1, 2) or any(a.startswith("--") for a in argv):
        print(__doc__, file=sys.stderr)
        return 2
    binary = os.path.abspath(argv[0])
    results = argv[1] if len(argv) == 2 else None
    counts = [int(x) for x in opts.get("--sessions", "200,1000").split(",")]
    k = int(opts.get("--namespaces", "500"))

    workspaces = tempfile.mkdtemp(prefix="envcraft-bench-memory-ws-")
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    state = tempfile.mkdtemp(prefix="envcraft-bench-memory-state-", dir=base)
    measured = []
    try:
        hostnet_env(workspaces)
        log_path = os.path.join(workspaces, "server.log")
        with open(log_path, "w") as log:
            server, api = start_server(binary, workspaces, state, max(counts), log)
        try:
            for n in counts:
                default = phase(api, server.pid, state, ENV, n)
                host = phase(api, server.pid, state, HOSTNET_ENV, n)
                measured.append((n, default, host))
        except RuntimeError as e:
            with open(log_path) as log:
                tail = log.read()[-2000:]
            raise SystemExit(f"{e}\nthe server's log ends:\n{tail}") from None
        finally:
            stop(server)
    finally:
        shutil.rmtree(workspaces, ignore_errors=True)
        shutil.rmtree(state, ignore_errors=True)

    plain = namespace_cost("plain", k)
    netns = namespace_cost("netns", k)
    mntns = namespace_cost("mntns", k)
    cgroups = cgroup_cost(k)

    out = [
        f"### G. Where an idle session's memory goes ({', '.join(f'{n:,}' for n, _, _ in measured)}"
        " sessions; one run)",
        "",
    ]
    for n, d, h in measured:
        out += table(n, d, h)
    f = lambda a, b, key: f"{a[key] - b[key]:,.1f}"  # noqa: E731
    out += [
        f"#### Namespaces alone ({k:,} processes forked from the benchmark, each holding one "
        "and in one memory cgroup per kind; KiB each, minus a plain process)",
        "",
        "| What | charged to its cgroup (kmem) | Slab | Percpu | PageTables | used (noisy) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, d in (("network namespace, `lo` up", netns),
                     ("mount namespace + a 256 MiB tmpfs holding 4 KiB", mntns)):
        out.append(
            f"| {label} | {f(d, plain, 'charged')} ({f(d, plain, 'kmem')}) | "
            f"{f(d, plain, 'Slab')} | "
            f"{f(d, plain, 'Percpu')} | {f(d, plain, 'PageTables')} | {f(d, plain, 'used')} |")
    out.append(
        f"| a memory and a pids cgroup, empty (no process; absolute) | | {cgroups['Slab']:,.1f} | "
        f"{cgroups['Percpu']:,.1f} | {cgroups['PageTables']:,.1f} | {cgroups['used']:,.1f} |")
    out += [
        f"| (the plain forked process itself, absolute) | {plain['charged']:,.1f} "
        f"({plain['kmem']:,.1f}) | {plain['Slab']:,.1f} | {plain['Percpu']:,.1f} | "
        f"{plain['PageTables']:,.1f} | {plain['used']:,.1f} |",
        "",
        "Generated by `python3 bench/session_memory.py` (`make bench`).",
    ]
    publish(out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
