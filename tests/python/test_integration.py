"""The client against the real ``envcraft serve`` over the bundled workspaces.

Skipped (loudly) while the binary has no ``serve`` subcommand; with
``ENVCRAFT_TEST_REQUIRE=all`` they fail instead.
"""

import asyncio
import json
import time

import pytest

import envcraft
from conftest import REPO

TASK = "example/archive-read-mail"


def solution(task: str):
    env, task_id = task.split("/")
    path = REPO / "workspaces" / env / "tasks" / task_id / "solution.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def replay(session, steps):
    """Replays a trajectory: moves to each step's ``turn`` first, then calls its tool."""
    for step in steps:
        if step.get("next_turn"):
            session.next_turn()
            continue
        while step.get("turn", session.turn) > session.turn:
            assert session.next_turn() is not None
        result = session.call(step["tool"], **step["args"])
        assert result["ok"], (step, result)


def test_health_ready_and_bundled_tasks_are_listed(real_server):
    client = envcraft.Client(real_server.url)
    assert client.health()["status"] == "ok"
    ready = client.ready()
    assert ready["status"] == "ready" and "max_sessions" in ready
    tasks = {t["task"]: t for t in client.tasks()}
    assert TASK in tasks and tasks[TASK]["env"] == "example" and tasks[TASK]["id"] == "archive-read-mail"


def test_reference_solution_replayed_over_http_scores_one(real_server):
    client = envcraft.Client(real_server.url)
    with client.create(TASK) as s:
        assert s.task == TASK and s.prompt and s.action_index == 0
        names = {t["function"]["name"] for t in s.tools}
        assert {"read", "ls", "exec"} <= names
        steps = solution(TASK)
        replay(s, steps)
        assert s.action_index == len(steps)
        verdict = s.verify()
        assert verdict.reward == 1.0 and verdict.passed, verdict.failed_checks
        changes = s.diff()
        assert "archive/1.txt" in changes["added"] and "inbox/1.txt" in changes["deleted"]
        sid = s.id
    # The office environment runs over an image this server's fresh store does not hold.
    with pytest.raises(envcraft.ImageNotFound) as e:
        client.create("office/branch-revenue")
    assert e.value.status == 503 and "office" in str(e.value), e.value
    with pytest.raises(envcraft.SessionNotFound):
        envcraft.Session(client, envcraft.client.SessionInfo(sid, TASK, None, None, [], 0)).verify()


def test_untouched_workspace_does_not_pass(real_server):
    with envcraft.Client(real_server.url).create(TASK) as s:
        verdict = s.verify()
        assert verdict.reward < 1.0 and not verdict.passed


def test_fork_is_isolated_from_its_parent(real_server):
    client = envcraft.Client(real_server.url)
    steps = solution(TASK)
    with client.create(TASK) as parent:
        replay(parent, steps[:2])
        with parent.fork() as child:
            assert child.id != parent.id
            replay(child, steps[2:])
            assert child.verify().reward == 1.0
            changes = parent.diff()
            assert (changes["added"], changes["modified"], changes["deleted"]) == ([], [], [])
            assert parent.verify().reward < 1.0
            listing = parent.call("ls", path="inbox")
            assert listing["ok"] and "1.txt" in {e["name"] for e in listing["entries"]}


def test_errors_from_the_real_server(real_server):
    client = envcraft.Client(real_server.url)
    with pytest.raises(envcraft.TaskNotFound) as e:
        client.create("example/no-such-task")
    assert e.value.status == 404
    with pytest.raises(envcraft.SessionNotFound):
        envcraft.Session(client, envcraft.client.SessionInfo("no-such-session", TASK, None, None, [], 0)).call("ls")
    with client.create(TASK) as s:
        bad = s.call("read", path="../../etc/passwd")
        assert bad["ok"] is False and bad["error"]["category"] == "permission"
        missing = s.call("read")
        assert missing["ok"] is False and missing["error"]["category"] == "missing_field"


def test_async_client_against_the_real_server(real_server):
    async def main():
        client = envcraft.AsyncClient(real_server.url)
        async with await client.create(TASK) as s:
            for step in solution(TASK):
                while step["turn"] > s.turn:
                    assert await s.next_turn() is not None
                assert (await s.call(step["tool"], **step["args"]))["ok"]
            return (await s.verify()).reward

    assert asyncio.run(main()) == 1.0


@pytest.fixture(scope="module")
def strict_server(tmp_path_factory):
    """A server with a bearer token, room for two sessions and a short lock wait."""
    from conftest import RealServer, envcraft_binary, require, serve_available

    binary = envcraft_binary()
    why = serve_available(binary)
    require(why is None, why or "")
    token_file = tmp_path_factory.mktemp("token") / "token"
    token_file.write_text("py-s3cret\n")
    server = RealServer(binary, ["--token-file", str(token_file), "--max-sessions", "2", "--lock-wait-ms", "100"])
    yield server
    server.stop()


def test_bearer_token_is_required_by_the_real_server(strict_server):
    with pytest.raises(envcraft.Unauthorized) as e:
        envcraft.Client(strict_server.url).tasks()
    assert e.value.status == 401
    with pytest.raises(envcraft.Unauthorized):
        envcraft.Client(strict_server.url, token="wrong").tasks()
    assert envcraft.Client(strict_server.url, token="py-s3cret").tasks()


def test_too_many_sessions_then_room_again_after_close(strict_server):
    client = envcraft.Client(strict_server.url, token="py-s3cret", max_retries=0)
    a, b = client.create(TASK), client.create(TASK)
    try:
        with pytest.raises(envcraft.TooManySessions) as e:
            client.create(TASK)
        assert e.value.status == 429 and e.value.retry_after is not None
    finally:
        a.close()
    client.create(TASK).close()
    b.close()


def test_busy_session_answers_lock_timeout_and_the_client_retries(strict_server):
    import threading

    client = envcraft.Client(strict_server.url, token="py-s3cret", max_retries=0)
    with client.create(TASK) as s:
        started = threading.Event()
        slow_result = {}

        def slow():
            started.set()
            slow_result.update(s.call("exec", command="sleep 2"))

        worker = threading.Thread(target=slow)
        worker.start()
        started.wait(5)
        # the slow call holds the session's lock; a second call waits 100 ms and is refused
        refused = None
        deadline = time.monotonic() + 1.5  # well inside the 2 s the slow call holds the lock
        while refused is None and time.monotonic() < deadline:
            try:
                s.call("ls")
            except envcraft.LockTimeout as e:
                refused = e
        assert refused is not None and refused.status == 503 and refused.retry_after is not None
        patient = envcraft.Client(strict_server.url, token="py-s3cret", max_retries=10)
        again = envcraft.Session(patient, envcraft.client.SessionInfo(s.id, TASK, None, None, [], 0))
        assert again.call("ls")["ok"], "retried until the slow call let go"
        worker.join(10)
        assert slow_result["ok"]


HI_SHA256 = "98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4"  # "hi\n"


def inline_task(**extra):
    """An inline task of the bundled ``example`` environment: write ``hi`` to out.txt."""
    return {
        "env": "example",
        "prompt": "Write hi to out.txt",
        "verifier": {"kind": "manifest", "extra": "allow"},
        "files": {"notes/todo.txt": "do it\n"},
        "expected": {"version": 1, "files": {"out.txt": {"sha256": HI_SHA256}}},
        **extra,
    }


def test_an_inline_task_is_created_read_and_verified_zero_then_one(real_server):
    client = envcraft.Client(real_server.url)
    with client.create(inline_task()) as s:
        assert s.task.startswith("example/inline-") and s.prompt == "Write hi to out.txt"
        assert s.seed is None
        assert s.call("read", path="notes/todo.txt")["content"] == "do it\n"
        assert s.call("ls", path="inbox")["ok"], "the environment's own files are there too"
        before = s.verify()
        assert before.reward == 0.0 and not before.passed
        assert s.call("write", path="out.txt", content="hi\n")["ok"]
        after = s.verify()
        assert after.reward == 1.0 and after.passed, after.failed_checks
        with client.create(inline_task()) as again:
            assert again.task == s.task, "the same object is the same task"


def test_a_seed_is_echoed_and_exported_as_envcraft_seed(real_server):
    client = envcraft.Client(real_server.url)
    for seed in (1234, 0, 2**64 - 1):
        with client.create(TASK, seed=seed) as s:
            assert s.seed == seed
            out = s.call("exec", command="echo $ENVCRAFT_SEED")
            assert out["ok"] and out["stdout"] == f"{seed}\n", out
    with client.create(inline_task(), seed=7) as s:
        assert s.seed == 7 and s.task.startswith("example/inline-")
        with s.fork() as child:
            assert child.seed == 7
            assert child.call("exec", command="echo $ENVCRAFT_SEED")["stdout"] == "7\n", "a fork keeps the seed"
    with client.create(TASK) as s:
        assert s.seed is None
        assert s.call("exec", command='echo "[$ENVCRAFT_SEED]"')["stdout"] == "[]\n"


@pytest.mark.parametrize(
    "task,cls,field",
    [
        ({"prompt": "x"}, envcraft.MissingField, "task.env"),
        (inline_task(env="nope"), envcraft.BadRequest, "task.env"),
        (inline_task(verifier={"kind": "manifest", "bogus": 1}), envcraft.BadRequest, "task.verifier.bogus"),
        (inline_task(files={"../x": "a"}), envcraft.BadRequest, "task.files"),
        (inline_task(expected={"filez": {}}), envcraft.BadRequest, "task.expected"),
    ],
)
def test_a_bad_inline_task_raises_bad_request_naming_the_field(real_server, task, cls, field):
    client = envcraft.Client(real_server.url)
    sessions = client.ready()["sessions"]
    with pytest.raises(cls) as e:
        client.create(task)
    assert e.value.status == 400 and field in e.value.message, e.value.message
    assert client.ready()["sessions"] == sessions


@pytest.mark.parametrize("seed", [-1, 2**64, True, 1.5, "7"])
def test_a_bad_seed_is_a_value_error_and_makes_no_session(real_server, seed):
    client = envcraft.Client(real_server.url)
    sessions = client.ready()["sessions"]
    with pytest.raises(ValueError, match="seed must be an integer"):
        client.create(TASK, seed=seed)
    assert client.ready()["sessions"] == sessions


def test_async_client_runs_an_inline_task_with_a_seed(real_server):
    async def main():
        async with envcraft.AsyncClient(real_server.url) as client:
            async with await client.create(inline_task(), seed=99) as s:
                assert s.seed == 99 and s.task.startswith("example/inline-")
                assert (await s.call("exec", command="echo $ENVCRAFT_SEED"))["stdout"] == "99\n"
                assert (await s.verify()).reward == 0.0
                await s.call("write", path="out.txt", content="hi\n")
                return (await s.verify()).reward

    assert asyncio.run(main()) == 1.0
