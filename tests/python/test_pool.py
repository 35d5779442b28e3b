"""Sandboxes built ahead (``envcraft serve --warm-sandboxes N``): a session that takes one is
indistinguishable from a session opened on a fresh sandbox (what was enforced, the environment,
the clock, the identity, the workspace and its files, /tmp, the limits), and nothing of an
earlier session shows in a later one."""

import json
import re
import time
from pathlib import Path

import pytest

import envcraft
from conftest import RealServer, envcraft_binary, require, serve_available

pytestmark = pytest.mark.usefixtures("no_unclosed_connections")

TASK = "example/archive-read-mail"
BASE_TIME = "2026-03-04T05:06:07Z"

# What a command in the session sees of its sandbox. Times are the session clock's (the clock
# shim); /tmp and the workspace are listed by name, mode and owner (the real mtime of a
# directory made when the sandbox was built is the host's, for a fresh sandbox too).
PROBE = r"""
env | grep -v '^ENVCRAFT_ACTION_INDEX=' | sort; echo ---
date +%s; echo ---
ulimit -a; echo ---
id; hostname; cat /etc/machine-id; echo ---
grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status; echo ---
cd /workspace && find . /tmp -printf '%p %m %u %g %s\n' | sort; echo ---
find . -type f -exec sha256sum {} + | sort; echo ---
ls -A /tmp /dev/shm 2>&1; echo ---
cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes /sys/fs/cgroup/pids/pids.max 2>/dev/null; echo ---
ps -eo pid,comm --no-headers | wc -l
"""


def _binary():
    binary = envcraft_binary()
    why = serve_available(binary)
    require(why is None, why or "")
    return binary


def _metrics(url, kind):
    import urllib.request

    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    m = re.search(r'envcraft_sandboxes_ready\{kind="%s"\} (\d+)' % kind, text)
    assert m, text
    return int(m.group(1))


def _wait_for_pooled(url, bound=60.0):
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if _metrics(url, "plan") > 0:
            return
        time.sleep(0.05)
    raise AssertionError(f"no sandbox was built ahead within {bound}s")


def _uptime():
    return float(Path("/proc/uptime").read_text().split()[0])


def _init_started(session):
    """When the session's sandbox init started, in seconds since boot (/proc/1/stat inside)."""
    out = session.call("exec", command="cut -d' ' -f22 /proc/1/stat; getconf CLK_TCK")
    ticks, hz = out["stdout"].split()
    return int(ticks) / int(hz)


def _seen(server, session):
    out = session.call("exec", command=PROBE)
    assert out["exit_code"] == 0, out
    state = json.loads((Path(server.state_dir) / "sessions" / session.id / "state.json").read_text())
    return out["stdout"], state["enforced"]


def test_a_pooled_sandbox_is_indistinguishable_from_a_fresh_one():
    binary = _binary()
    pooled_server = RealServer(binary, ["--warm-sandboxes", "2"])
    fresh_server = RealServer(binary, ["--warm-sandboxes", "0"])
    try:
        with envcraft.Client(pooled_server.url) as pooled, envcraft.Client(fresh_server.url) as fresh:
            assert _metrics(fresh_server.url, "plan") == 0 and _metrics(fresh_server.url, "init") == 0
            # Asked for twice, the plan is built ahead; the third session takes a built one.
            for _ in range(2):
                pooled.create(TASK, base_time=BASE_TIME).close()
            _wait_for_pooled(pooled_server.url)
            time.sleep(0.2)  # a gap the start times below can show (not a wait for an event)
            asked = _uptime()
            with pooled.create(TASK, base_time=BASE_TIME) as a, fresh.create(TASK, base_time=BASE_TIME) as b:
                # The pooled one was built before it was asked for; the fresh one after.
                assert _init_started(a) < asked - 0.1
                assert _init_started(b) >= asked - 0.02
                seen_a, enforced_a = _seen(pooled_server, a)
                seen_b, enforced_b = _seen(fresh_server, b)
                assert seen_a == seen_b
                assert enforced_a == enforced_b
                assert a.verify().reward == b.verify().reward
    finally:
        pooled_server.stop()
        fresh_server.stop()


def test_nothing_of_an_earlier_session_shows_in_a_pooled_one():
    binary = _binary()
    server = RealServer(binary, ["--warm-sandboxes", "2"])
    try:
        with envcraft.Client(server.url) as client:
            for i in range(6):
                with client.create(TASK) as s:
                    listing = s.call("exec", command="ls -A /tmp /dev/shm; ls /workspace; ps -eo comm --no-headers")
                    assert "left-by" not in listing["stdout"], (i, listing)
                    s.call("write", path="/workspace/left-by-%d.txt" % i, content="x")
                    w = s.call("exec", command="echo x > /tmp/left-by-%d; echo y > /dev/shm/left-by-%d; (sleep 300 &) ; true" % (i, i))
                    assert w["exit_code"] == 0, w
                if i == 1:
                    _wait_for_pooled(server.url)
    finally:
        server.stop()
