"""A server out of capacity (503 ``capacity`` with Retry-After): both clients raise
``CapacityExceeded`` after the same bounded retries as ``too_many_sessions``."""

import asyncio

import pytest

import envcraft

pytestmark = pytest.mark.usefixtures("no_unclosed_connections")

MESSAGE = "no descriptors left for another session (120 open of a limit of 200): close sessions or raise the limit"


def test_capacity_is_retried_then_raised_when_retries_run_out(fake):
    waits = []
    client = envcraft.Client(fake.url, max_retries=2, sleep=waits.append)
    fake.inject("/v1/sessions", 503, "capacity", retry_after="5", times=3)
    with pytest.raises(envcraft.CapacityExceeded) as e:
        client.create("example/two-turns")
    assert waits == [5.0, 5.0]
    assert e.value.status == 503 and e.value.retry_after == 5.0 and e.value.category == "capacity"
    assert len([r for r in fake.requests if r.path == "/v1/sessions"]) == 3
    client.close()


def test_capacity_once_then_the_session_is_made(fake):
    waits = []
    client = envcraft.Client(fake.url, max_retries=2, sleep=waits.append)
    fake.inject("/v1/sessions", 503, "capacity", retry_after="1")
    with client.create("example/two-turns") as s:
        assert s.prompt == "Write yes to done.txt."
    assert waits == [1.0]
    client.close()


def test_async_client_retries_capacity_then_raises(fake):
    waits = []

    async def sleep(seconds):
        waits.append(seconds)

    async def main():
        async with envcraft.AsyncClient(fake.url, max_retries=3, sleep=sleep) as client:
            fake.inject("/v1/sessions", 503, "capacity", retry_after="2", times=4)
            with pytest.raises(envcraft.CapacityExceeded) as e:
                await client.create("example/two-turns")
            assert e.value.retry_after == 2.0

    asyncio.run(main())
    assert waits == [2.0, 2.0, 2.0]


def test_capacity_maps_to_its_class_from_the_body():
    body = ('{"error": {"category": "capacity", "message": "%s"}}' % MESSAGE).encode()
    err = envcraft.errors.error_from_response(503, body, {"retry-after": "5"})
    assert type(err) is envcraft.CapacityExceeded and err.message == MESSAGE
    assert envcraft.RetryPolicy(max_retries=1).delay(0, err) == 5.0
    assert envcraft.RetryPolicy(max_retries=1).delay(1, err) is None
