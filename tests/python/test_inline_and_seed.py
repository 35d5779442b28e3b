"""``create`` with an inline task and a seed, sync, async and through the pool, against the
fake server: what goes on the wire, what the session reports, what is refused before sending."""

import asyncio
import hashlib

import pytest

import envcraft

pytestmark = pytest.mark.usefixtures("no_unclosed_connections")

HI = hashlib.sha256(b"hi\n").hexdigest()
INLINE = {
    "env": "example",
    "prompt": "Write hi to out.txt",
    "verifier": {"kind": "manifest", "extra": "allow"},
    "files": {"notes/todo.txt": "do it\n"},
    "expected": {"version": 1, "files": {"out.txt": {"sha256": HI}}},
}
BAD_SEEDS = [-1, 2**64, True, 1.5, "7"]


def creations(fake):
    return [r for r in fake.requests if r.path == "/v1/sessions"]


def test_an_inline_task_is_sent_whole_and_runs_to_reward_one(fake):
    with envcraft.Client(fake.url) as client, client.create(INLINE) as s:
        assert creations(fake)[-1].body == {"task": INLINE}, "the object as given, no seed"
        assert s.task.startswith("example/inline-") and s.prompt == "Write hi to out.txt"
        assert s.seed is None
        assert s.call("read", path="notes/todo.txt")["content"] == "do it\n"
        assert s.verify().reward == 0.0
        s.call("write", path="out.txt", content="hi\n")
        verdict = s.verify()
        assert verdict.reward == 1.0 and verdict.passed
        assert client.create(dict(INLINE)).task == s.task, "the same object is the same task"


def test_a_seed_is_sent_echoed_and_kept_by_a_fork(fake):
    with envcraft.Client(fake.url) as client:
        for seed in (0, 1234, 2**64 - 1):
            with client.create("example/two-turns", seed=seed) as s:
                assert creations(fake)[-1].body == {"task": "example/two-turns", "seed": seed}
                assert s.seed == seed
                with s.fork() as child:
                    assert child.seed == seed and fake.sessions[child.id].seed == seed
        with client.create(INLINE, base_time="2026-01-05T09:00:00Z", seed=7) as s:
            assert creations(fake)[-1].body == {"task": INLINE, "base_time": "2026-01-05T09:00:00Z", "seed": 7}
            assert s.seed == 7


@pytest.mark.parametrize("seed", BAD_SEEDS)
def test_a_bad_seed_raises_value_error_without_a_request(fake, seed):
    with envcraft.Client(fake.url) as client:
        with pytest.raises(ValueError, match="seed must be an integer"):
            client.create("example/two-turns", seed=seed)
        with pytest.raises(TypeError, match="task must be a task name"):
            client.create(7)  # type: ignore[arg-type]
    assert fake.requests == [] and fake.sessions == {}


@pytest.mark.parametrize(
    "change,cls,field",
    [
        ({"env": None}, envcraft.MissingField, "task.env"),
        ({"env": "nope"}, envcraft.BadRequest, "task.env"),
        ({"files": {"../x": "a"}}, envcraft.BadRequest, "task.files"),
        ({"expected": {"filez": {}}}, envcraft.BadRequest, "task.expected"),
    ],
)
def test_a_bad_inline_task_raises_the_servers_error_naming_the_field(fake, change, cls, field):
    task = {k: v for k, v in {**INLINE, **change}.items() if v is not None}
    with envcraft.Client(fake.url) as client:
        with pytest.raises(cls) as e:
            client.create(task)
    assert e.value.status == 400 and field in e.value.message
    assert fake.sessions == {}


def test_async_create_sends_inline_tasks_and_seeds_and_refuses_bad_seeds(fake):
    async def main():
        async with envcraft.AsyncClient(fake.url) as client:
            for seed in BAD_SEEDS:
                with pytest.raises(ValueError, match="seed must be an integer"):
                    await client.create(INLINE, seed=seed)
            assert fake.requests == []
            async with await client.create(INLINE, seed=42) as s:
                assert creations(fake)[-1].body == {"task": INLINE, "seed": 42}
                assert s.seed == 42 and s.task.startswith("example/inline-")
                assert (await s.call("read", path="notes/todo.txt"))["content"] == "do it\n"
                assert (await s.verify()).reward == 0.0
                await s.call("write", path="out.txt", content="hi\n")
                assert (await s.verify()).reward == 1.0
                async with await s.fork() as child:
                    assert child.seed == 42
            with pytest.raises(envcraft.MissingField, match="task.env"):
                await client.create({"prompt": "x"})

    asyncio.run(main())


def test_the_pool_passes_inline_tasks_and_seeds_and_checks_seeds_before_asking(fake):
    """The pool's ``create`` without Ray: the fake servers are already running."""
    from envcraft.ray import EnvcraftPool

    pool = EnvcraftPool.__new__(EnvcraftPool)
    pool.urls = [fake.url]
    pool.clients = [envcraft.Client(fake.url)]
    pool._create_clients = [envcraft.Client(fake.url, max_retries=0)]
    pool._actors = []
    try:
        for seed in BAD_SEEDS:
            with pytest.raises(ValueError, match="seed must be an integer"):
                pool.create(INLINE, seed=seed)
        assert fake.requests == [], "not even /readyz"
        with pool.create(INLINE, seed=9) as s:
            assert creations(fake)[-1].body == {"task": INLINE, "seed": 9}
            assert s.seed == 9 and s.task.startswith("example/inline-") and s.client is pool.clients[0]
    finally:
        for client in pool.clients + pool._create_clients:
            client.close()
