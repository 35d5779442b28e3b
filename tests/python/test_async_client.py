"""The asyncio client against the in-process fake server (no pytest-asyncio needed)."""

import asyncio
import socket

import pytest

import envcraft

pytestmark = pytest.mark.usefixtures("no_unclosed_connections")


def run(coro):
    return asyncio.run(coro)


def test_async_round_trip_reaches_reward_one(fake):
    async def main():
        async with envcraft.AsyncClient(fake.url) as client:  # closes its connections
            assert await client.health() == {"status": "ok"}
            assert [t["task"] for t in await client.tasks()] == ["example/two-turns"]
            async with await client.create("example/two-turns") as s:
                assert s.prompt == "Write yes to done.txt." and len(s.tools) == 2
                assert (await s.call("write", path="done.txt", content="yes"))["ok"]
                assert s.action_index == 1
                assert await s.next_turn() == "Now say goodbye."
                assert await s.next_turn() is None
                async with await s.fork() as child:
                    assert child.action_index == 1 and child.turn == 1
                    await child.call("write", path="done.txt", content="no")
                    assert (await child.verify()).reward == 0.0
                verdict = await s.verify()
                assert verdict.reward == 1.0 and verdict.passed
                assert (await s.diff())["added"] == ["done.txt"]
                return s.id

    sid = run(main())
    assert sid not in fake.sessions and fake.sessions == {}


def test_async_sessions_run_concurrently(fake):
    async def one(client, i):
        async with await client.create("example/two-turns") as s:
            await s.call("write", path="done.txt", content="yes" if i % 2 else "no")
            return (await s.verify()).reward

    async def main():
        async with envcraft.AsyncClient(fake.url) as client:
            return await asyncio.gather(*(one(client, i) for i in range(16)))

    assert run(main()) == [0.0, 1.0] * 8


def test_async_errors_auth_and_retries(fake_with_token):
    waits = []

    async def sleep(seconds):
        waits.append(seconds)

    async def main():
        bad = envcraft.AsyncClient(fake_with_token.url, token="wrong")
        with pytest.raises(envcraft.Unauthorized):
            await bad.tasks()
        await bad.aclose()
        client = envcraft.AsyncClient(fake_with_token.url, token="s3cret", max_retries=2, sleep=sleep)
        with pytest.raises(envcraft.TaskNotFound):
            await client.create("no/such")
        s = await client.create("example/two-turns")
        fake_with_token.inject("/call", 503, "lock_timeout", retry_after="0.5")
        assert (await s.call("write", path="a", content="b"))["ok"]
        fake_with_token.inject("/call", 503, "lock_timeout", retry_after="0.5", times=3)
        with pytest.raises(envcraft.LockTimeout) as e:
            await s.call("write", path="a", content="b")
        assert e.value.retry_after == 0.5
        await s.close()
        await s.close()
        with pytest.raises(envcraft.SessionNotFound):
            await s.verify()
        await client.aclose()

    run(main())
    assert waits == [0.5, 0.5, 0.5]
    assert fake_with_token.requests[-1].headers["authorization"] == "Bearer s3cret"


def test_async_transport_error_when_nobody_listens():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(envcraft.TransportError):
        run(envcraft.AsyncClient(f"http://127.0.0.1:{port}", timeout=5).health())


def test_async_client_rejects_a_non_http_url():
    with pytest.raises(ValueError):
        envcraft.AsyncClient("ftp://x")


