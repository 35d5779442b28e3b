"""The asyncio client against the in-process fake server (no pytest-asyncio needed)."""

import asyncio
import socket

import pytest

import envcraft
from envcraft.aio import _read_response


def run(coro):
    return asyncio.run(coro)


def test_async_round_trip_reaches_reward_one(fake):
    async def main():
        client = envcraft.AsyncClient(fake.url)
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
        client = envcraft.AsyncClient(fake.url)
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


def read(raw: bytes):
    async def main():
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        reader.feed_eof()
        return await _read_response(reader)

    return run(main())


def test_response_reader_handles_chunked_interim_and_eof_delimited_answers():
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3;x=y\r\n:1}\r\n0\r\nT: v\r\n\r\n"
    assert read(chunked) == (200, {"transfer-encoding": "chunked"}, b'{"a":1}')
    interim = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\nRetry-After: 3\r\n\r\n{}"
    status, headers, body = read(interim)
    assert (status, headers["retry-after"], body) == (201, "3", b"{}")
    assert read(b"HTTP/1.0 200 OK\r\n\r\n{\"x\": 1}")[2] == b'{"x": 1}'
    with pytest.raises(envcraft.ProtocolError):
        read(b"garbage\r\n\r\n")
    with pytest.raises(asyncio.IncompleteReadError):
        read(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}")
