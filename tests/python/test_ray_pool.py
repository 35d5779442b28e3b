"""``envcraft.ray``: the pure parts always; the pool itself when ``ray`` is importable, with
the fake server standing in for the binary (so it runs before ``serve`` exists)."""

import importlib.util
import sys
from pathlib import Path

import pytest

import envcraft
from conftest import HERE, require
from envcraft.ray import ServerProcess, parse_listening_line, pick_server, reachable_url


def test_listening_line_is_parsed_and_wildcards_become_the_node_ip():
    assert parse_listening_line("listening on http://0.0.0.0:4242\n") == "http://0.0.0.0:4242"
    assert parse_listening_line("warming up") is None
    assert reachable_url("http://0.0.0.0:4242", "10.0.0.7") == "http://10.0.0.7:4242"
    assert reachable_url("http://[::]:4242", "fd00::1") == "http://[fd00::1]:4242"
    assert reachable_url("http://127.0.0.1:4242", "10.0.0.7") == "http://127.0.0.1:4242"


def test_least_loaded_server_first_full_last_silent_left_out():
    loads = [
        (0, {"sessions": 5, "max_sessions": 8}),
        (1, {"sessions": 2, "max_sessions": 8}),
        (2, None),
        (3, {"sessions": 8, "max_sessions": 8}),
        (4, {"sessions": 3, "max_sessions": 8}),
    ]
    assert pick_server(loads) == [1, 4, 0, 3]


def test_server_process_reads_the_listening_line_and_stops():
    server = ServerProcess([sys.executable, str(HERE / "fake_server.py")], listen="0.0.0.0:0", node_ip="127.0.0.1", startup_timeout=30)
    try:
        assert server.url.startswith("http://127.0.0.1:")
        assert envcraft.Client(server.url).health() == {"status": "ok"}
    finally:
        server.stop()
    assert not server.alive()


def test_server_process_that_never_listens_fails_with_its_output():
    with pytest.raises(RuntimeError, match="no 'listening on' line"):
        ServerProcess([sys.executable, "-c", "print('nope')"], startup_timeout=10)


def test_pool_spreads_sessions_over_one_server_per_node():
    require(importlib.util.find_spec("ray") is not None, "ray is not installed (pip install 'ray>=2.9')")
    import ray

    from envcraft.ray import EnvcraftPool

    # The workers import envcraft too: from where this test imported it.
    src = str(Path(envcraft.__file__).resolve().parent.parent)
    ray.init(
        num_cpus=1,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": src}},
    )
    try:
        with EnvcraftPool([sys.executable, str(HERE / "fake_server.py")], startup_timeout=60) as pool:
            assert len(pool.urls) == len([n for n in ray.nodes() if n["Alive"]]) == 1
            sessions = [pool.create("example/two-turns") for _ in range(3)]
            assert pool.loads()[0][1]["sessions"] == 3
            s = sessions[0]
            s.call("write", path="done.txt", content="yes")
            assert s.verify().reward == 1.0
            for s in sessions:
                s.close()
    finally:
        ray.shutdown()


def test_pool_of_real_servers_scores_the_reference_solution(tmp_path):
    require(importlib.util.find_spec("ray") is not None, "ray is not installed (pip install 'ray>=2.9')")
    from conftest import REPO, envcraft_binary, serve_available
    from test_integration import TASK, inline_task, replay, solution

    binary = envcraft_binary()
    why = serve_available(binary)
    require(why is None, why or "")
    import ray

    from envcraft.ray import EnvcraftPool

    src = str(Path(envcraft.__file__).resolve().parent.parent)
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": src}})
    args = ["--state-dir", str(tmp_path), "--workspaces", str(REPO / "workspaces"), "--skills", str(REPO / "skills")]
    try:
        with EnvcraftPool([str(binary)], args=args) as pool:
            with pool.create(TASK) as s:
                replay(s, solution(TASK))
                assert s.verify().reward == 1.0
            with pool.create(inline_task(), seed=5) as s:
                assert s.seed == 5 and s.task.startswith("example/inline-")
                assert s.call("exec", command="echo $ENVCRAFT_SEED")["stdout"] == "5\n"
                s.call("write", path="out.txt", content="hi\n")
                assert s.verify().reward == 1.0
    finally:
        ray.shutdown()


def test_pool_create_passes_over_a_full_server_without_waiting(fake):
    """The pool's choice and fallback, without Ray: two fake servers, the emptier one full."""
    from fake_server import FakeServer

    from envcraft.ray import EnvcraftPool

    other = FakeServer().start()
    try:
        pool = EnvcraftPool.__new__(EnvcraftPool)  # the servers are already running
        pool.urls = [fake.url, other.url]
        waits = []
        pool.clients = [envcraft.Client(u, sleep=waits.append) for u in pool.urls]
        pool._create_clients = [envcraft.Client(u, max_retries=0) for u in pool.urls]
        pool._actors = []
        busy = [pool.clients[0].create("example/two-turns") for _ in range(2)]
        first = pool.create("example/two-turns")
        assert first.client is pool.clients[1], "least sessions first"
        other.inject("/v1/sessions", 429, "too_many_sessions", retry_after="30")
        assert pick_server(pool.loads()) == [1, 0]
        second = pool.create("example/two-turns")
        assert second.client is pool.clients[0] and waits == [], "full server passed over at once"
        assert not other.injected["/v1/sessions"], "the emptier server was asked first"
        fake.inject("/call", 503, "lock_timeout", retry_after="0")
        assert second.call("write", path="a", content="b")["ok"], "calls keep the retrying client"
        for s in (*busy, first, second):
            s.close()
    finally:
        other.stop()
