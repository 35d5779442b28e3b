"""Persistent connections, both clients, against the fake server: reuse, idle connections the
server closed, hang-ups after a request was sent, many asyncio tasks at once, cancellation."""

import asyncio
import pickle
import threading

import pytest

import envcraft
from envcraft import aio, client as sync_client

pytestmark = pytest.mark.usefixtures("no_unclosed_connections")

BOUND = 10.0  # seconds any wait of these tests may take at most


def run(coro):
    return asyncio.run(coro)


# -- reuse -----------------------------------------------------------------------------------


def test_sync_requests_reuse_one_connection(fake):
    with envcraft.Client(fake.url) as client:
        for _ in range(5):
            client.health()
        with client.create("example/two-turns") as s:
            for i in range(5):
                s.call("write", path="a.txt", content=str(i))
            s.verify()
    assert len(set(fake.peers())) == 1 and fake.accepted == 1, fake.peers()


def test_sync_max_connections_zero_opens_one_connection_per_request(fake):
    with envcraft.Client(fake.url, max_connections=0) as client:
        for _ in range(4):
            client.health()
    assert len(set(fake.peers())) == 4 and fake.accepted == 4


def test_async_requests_reuse_one_connection(fake):
    async def main():
        async with envcraft.AsyncClient(fake.url) as client:
            for _ in range(5):
                await client.health()
            async with await client.create("example/two-turns") as s:
                for i in range(5):
                    await s.call("write", path="a.txt", content=str(i))

    run(main())
    assert len(set(fake.peers())) == 1 and fake.accepted == 1, fake.peers()


def test_a_connection_close_answer_is_not_reused(fake):
    """An answer saying ``Connection: close`` spends its connection: the next request opens
    a new one (and succeeds)."""
    original = fake.handle

    def closing(*args, **kwargs):
        status, extra, obj = original(*args, **kwargs)
        return status, {**extra, "Connection": "close"}, obj

    fake.handle = closing
    with envcraft.Client(fake.url) as client:
        assert client.health() == {"status": "ok"} and client.health() == {"status": "ok"}
    assert len(set(fake.peers())) == 2


# -- the server closes an idle connection ----------------------------------------------------


def test_sync_survives_the_server_closing_idle_connections(fake):
    with envcraft.Client(fake.url) as client:
        with client.create("example/two-turns") as s:
            s.call("write", path="done.txt", content="yes")
            assert fake.close_idle() == 1
            assert s.call("read", path="done.txt")["content"] == "yes"
            assert s.action_index == 2
    calls = [r for r in fake.requests if r.path.endswith("/call")]
    assert len(calls) == 2, "each call reached the server once"
    assert calls[0].peer != calls[1].peer


def test_async_survives_the_server_closing_idle_connections(fake):
    async def main():
        async with envcraft.AsyncClient(fake.url) as client:
            async with await client.create("example/two-turns") as s:
                await s.call("write", path="done.txt", content="yes")
                assert fake.close_idle() == 1
                assert (await s.call("read", path="done.txt"))["content"] == "yes"
                return s.action_index

    assert run(main()) == 2
    assert len([r for r in fake.requests if r.path.endswith("/call")]) == 2


@pytest.fixture
def no_liveness_check(monkeypatch):
    """The race the liveness check cannot close: the server's close arrives after the client
    looked at the idle connection and before its request went out."""
    monkeypatch.setattr(sync_client._Connection, "alive", lambda self: True)
    monkeypatch.setattr(aio._Connection, "alive", lambda self: True)


def test_sync_stale_connection_get_is_sent_again_once(fake, no_liveness_check):
    with envcraft.Client(fake.url) as client:
        client.health()
        fake.close_idle()
        assert client.tasks()
    assert [r.path for r in fake.requests] == ["/healthz", "/v1/tasks"]


def test_sync_stale_connection_post_fails_in_writing_and_is_sent_again(fake, no_liveness_check):
    """A request too big for the socket buffers meets the reset while being written: the
    server cannot have it, so even a tool call goes again, once, on a new connection."""
    big = "x" * (16 << 20)
    with envcraft.Client(fake.url) as client:
        with client.create("example/two-turns") as s:
            fake.close_idle()
            assert s.call("write", path="big.txt", content=big)["ok"]
            assert s.action_index == 1
    assert len([r for r in fake.requests if r.path.endswith("/call")]) == 1


def test_sync_stale_connection_post_without_answer_is_not_sent_again(fake, no_liveness_check):
    with envcraft.Client(fake.url) as client:
        with client.create("example/two-turns") as s:
            fake.close_idle()
            with pytest.raises(envcraft.AnswerLost) as e:
                s.call("write", path="a.txt", content="1")
            assert "may have run" in str(e.value) and "not sent again" in str(e.value)
    assert not [r for r in fake.requests if r.path.endswith("/call")]


# -- the server hangs up after it got the request ---------------------------------------------


def test_sync_post_the_server_hangs_up_on_is_not_resent(fake):
    with envcraft.Client(fake.url) as client:
        with client.create("example/two-turns") as s:
            fake.hang_up_after("/call")
            with pytest.raises(envcraft.AnswerLost) as e:
                s.call("write", path="done.txt", content="yes")
            assert isinstance(e.value, envcraft.TransportError) and "POST" in str(e.value)
            assert "may have run" in e.value.message
            # It ran once, exactly: the next call sees its effect and counts on from it.
            assert s.call("read", path="done.txt")["content"] == "yes"
            assert s.action_index == 2
    assert len([r for r in fake.requests if r.path.endswith("/call")]) == 2


def test_async_post_the_server_hangs_up_on_is_not_resent(fake):
    async def main():
        async with envcraft.AsyncClient(fake.url) as client:
            s = await client.create("example/two-turns")
            fake.hang_up_after("/call")
            with pytest.raises(envcraft.AnswerLost):
                await s.call("write", path="done.txt", content="yes")
            assert (await s.call("read", path="done.txt"))["content"] == "yes"
            await s.close()

    run(main())
    assert len([r for r in fake.requests if r.path.endswith("/call")]) == 2


def test_get_the_server_hangs_up_on_is_sent_again_once(fake):
    fake.hang_up_after("/v1/tasks")
    with envcraft.Client(fake.url) as client:
        assert client.tasks()
    fake.hang_up_after("/v1/tasks", times=2)
    with envcraft.Client(fake.url) as client:
        with pytest.raises(envcraft.TransportError) as e:
            client.tasks()
        assert not isinstance(e.value, envcraft.AnswerLost)
        assert "failed again on a new connection" in e.value.message

    async def main():
        fake.hang_up_after("/v1/tasks")
        async with envcraft.AsyncClient(fake.url) as client:
            return await client.tasks()

    assert run(main())
    assert len([r for r in fake.requests if r.path == "/v1/tasks"]) == 2 + 2 + 2


# -- asyncio: many tasks, one request per connection at a time --------------------------------


def test_async_concurrent_requests_never_share_a_connection(fake):
    """Eight requests held at the server until all eight are there: they can only meet on
    eight connections (the server reads one request at a time per connection), and each task
    gets its own session's answer."""
    n = 8
    barrier = threading.Barrier(n, timeout=BOUND)
    fake.hold("/call", lambda: barrier.wait())

    async def one(client, i):
        async with await client.create("example/two-turns") as s:
            r = await s.call("write", path="me.txt", content=f"task {i}")
            return s.id, r["action_index"]

    async def main():
        async with envcraft.AsyncClient(fake.url, max_connections=2) as client:
            first = await asyncio.gather(*(one(client, i) for i in range(n)))
            fake.holds.clear()
            # Then one task after another: the connections kept are reused.
            for _ in range(6):
                await client.health()
            assert len(client._pool) <= 2
            return first

    results = run(main())
    assert [a for _, a in results] == [1] * n
    calls = [r for r in fake.requests if r.path.endswith("/call")]
    assert len({r.peer for r in calls}) == n
    by_session = {r.path.split("/")[3]: r.body["args"]["content"] for r in calls}
    assert sorted(by_session.values()) == sorted(f"task {i}" for i in range(n))
    assert len(set(fake.peers("/healthz"))) == 1


def test_async_many_tasks_get_their_own_answers(fake):
    async def one(client, i):
        async with await client.create("example/two-turns") as s:
            for k in range(5):
                content = f"task {i} write {k}"
                await s.call("write", path="f.txt", content=content)
                assert (await s.call("read", path="f.txt"))["content"] == content
            return s.action_index

    async def main():
        async with envcraft.AsyncClient(fake.url, max_connections=4) as client:
            return await asyncio.gather(*(one(client, i) for i in range(32)))

    assert run(main()) == [10] * 32
    assert fake.accepted < len(fake.requests), "connections were reused"


def test_async_cancelled_request_leaves_no_half_read_connection(fake):
    """A request cancelled while its answer is pending closes its connection: the answer,
    when it comes, can never be read as the next request's."""
    arrived, release = threading.Event(), threading.Event()

    def hold():
        arrived.set()
        release.wait(BOUND)

    async def main():
        async with envcraft.AsyncClient(fake.url) as client:
            await client.health()
            fake.hold("/v1/tasks", hold)
            task = asyncio.create_task(client.tasks())
            assert await asyncio.get_running_loop().run_in_executor(None, arrived.wait, BOUND)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            fake.holds.clear()
            release.set()
            return await client.ready()

    assert run(main())["status"] == "ready"


# -- closing, pickling -----------------------------------------------------------------------


def test_close_releases_the_idle_connections_and_the_client_stays_usable(fake):
    client = envcraft.Client(fake.url)
    client.health()
    assert len(client._pool) == 1
    client.close()
    assert len(client._pool) == 0
    assert client.health() == {"status": "ok"}
    client.close()
    assert len(set(fake.peers())) == 2

    async def main():
        aclient = envcraft.AsyncClient(fake.url)
        await aclient.health()
        assert len(aclient._pool) == 1
        await aclient.aclose()
        assert len(aclient._pool) == 0

    run(main())


def test_a_pickled_client_opens_its_own_connections(fake):
    with envcraft.Client(fake.url, token="t", max_connections=3) as client:
        client.health()
        copy = pickle.loads(pickle.dumps(client))
        assert (copy.url, copy.token, copy._pool.max_idle, len(copy._pool)) == (fake.url, "t", 3, 0)
        assert copy.health() == {"status": "ok"}
        copy.close()


def test_sync_client_shared_by_threads_gives_each_its_own_connection_and_answer(fake):
    from concurrent.futures import ThreadPoolExecutor

    n = 4
    barrier = threading.Barrier(n, timeout=BOUND)
    fake.hold("/call", lambda: barrier.wait())

    with envcraft.Client(fake.url, max_connections=n) as client:
        sessions = [client.create("example/two-turns") for _ in range(n)]

        def one(i):
            return sessions[i].call("write", path="me.txt", content=f"thread {i}")["action_index"]

        with ThreadPoolExecutor(n) as pool:
            assert list(pool.map(one, range(n))) == [1] * n
        fake.holds.clear()
        for i, s in enumerate(sessions):
            assert s.call("read", path="me.txt")["content"] == f"thread {i}"
            s.close()
    calls = [r for r in fake.requests if r.path.endswith("/call")]
    assert len({r.peer for r in calls[:n]}) == n
    assert fake.accepted == n, "the later requests reused the connections kept"


def test_a_forked_child_opens_its_own_connection(fake):
    import os

    with envcraft.Client(fake.url) as client:
        client.health()
        pid = os.fork()
        if pid == 0:  # the child: exit code 0 when its request succeeded
            code = 1
            try:
                code = 0 if client.health() == {"status": "ok"} else 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        client.health()
    parent_port, child_port, parent_again = fake.peers()
    assert child_port != parent_port and parent_again == parent_port
