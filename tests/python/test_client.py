"""The synchronous client against the in-process fake server."""

import pytest

import envcraft

pytestmark = pytest.mark.usefixtures("no_unclosed_connections")


def no_sleep(waits):
    return waits.append


def test_health_ready_and_tasks(fake):
    client = envcraft.Client(fake.url)
    assert client.health() == {"status": "ok"}
    assert client.ready()["status"] == "ready"
    tasks = client.tasks()
    assert [t["task"] for t in tasks] == ["example/two-turns"]


def test_session_round_trip_reaches_reward_one(fake):
    client = envcraft.Client(fake.url)
    with client.create("example/two-turns") as s:
        assert s.task == "example/two-turns" and s.prompt == "Write yes to done.txt."
        assert s.docs == "# docs\n" and [t["function"]["name"] for t in s.tools] == ["read", "write"]
        assert s.action_index == 0
        result = s.call("write", path="done.txt", content="yes")
        assert result["ok"] is True and s.action_index == 1
        assert s.call("read", path="done.txt")["content"] == "yes"
        assert s.action_index == 2
        assert s.next_turn() == "Now say goodbye." and s.prompt == "Now say goodbye." and s.turn == 1
        assert s.next_turn() is None
        verdict = s.verify()
        assert isinstance(verdict, envcraft.Verdict)
        assert verdict.reward == 1.0 and verdict.passed and verdict.failed_checks == []
        assert s.diff() == {"added": ["done.txt"], "modified": [], "deleted": []}
        sid = s.id
    assert sid not in fake.sessions, "leaving the with block closes the session"
    assert s.closed


def test_a_failing_tool_answers_ok_false_and_does_not_raise(fake):
    with envcraft.Client(fake.url).create("example/two-turns") as s:
        result = s.call("read", path="nope.txt")
        assert result["ok"] is False and result["error"]["category"] == "not_found"


def test_tool_arguments_named_tool_or_args_reach_the_server(fake):
    with envcraft.Client(fake.url).create("example/two-turns") as s:
        s.call("skill", name="word-count", args={"path": "a"}, tool="x")
        assert fake.requests[-1].body == {"tool": "skill", "args": {"name": "word-count", "args": {"path": "a"}, "tool": "x"}}


def test_fork_is_isolated_and_starts_at_the_parents_state(fake):
    client = envcraft.Client(fake.url)
    with client.create("example/two-turns") as parent:
        parent.call("write", path="a.txt", content="1")
        with parent.fork() as child:
            assert child.id != parent.id
            assert child.action_index == parent.action_index == 1
            assert child.tools == parent.tools and child.task == parent.task
            child.call("write", path="done.txt", content="yes")
            assert child.verify().reward == 1.0
            assert parent.verify().reward == 0.0
            assert parent.call("read", path="done.txt")["ok"] is False


def test_close_is_idempotent_and_a_closed_session_is_not_found(fake):
    client = envcraft.Client(fake.url)
    s = client.create("example/two-turns")
    s.close()
    s.close()
    with pytest.raises(envcraft.SessionNotFound) as e:
        s.call("read", path="x")
    assert e.value.status == 404 and e.value.category == "session_not_found"


def test_errors_come_from_the_servers_body(fake):
    client = envcraft.Client(fake.url)
    with pytest.raises(envcraft.TaskNotFound) as e:
        client.create("nope/nope")
    assert e.value.status == 404 and "nope/nope" in e.value.message
    fake.inject("/v1/sessions", 400, "missing_field")
    with pytest.raises(envcraft.MissingField):
        client.create("example/two-turns")


def test_bearer_token_is_sent_and_a_wrong_one_is_unauthorized(fake_with_token):
    good = envcraft.Client(fake_with_token.url, token="s3cret")
    assert good.tasks()
    assert fake_with_token.requests[-1].headers["authorization"] == "Bearer s3cret"
    with pytest.raises(envcraft.Unauthorized) as e:
        envcraft.Client(fake_with_token.url, token="wrong").tasks()
    assert e.value.status == 401
    with pytest.raises(envcraft.Unauthorized):
        envcraft.Client(fake_with_token.url).tasks()


def test_lock_timeout_is_retried_after_the_servers_retry_after(fake):
    waits = []
    client = envcraft.Client(fake.url, max_retries=3, sleep=waits.append)
    with client.create("example/two-turns") as s:
        fake.inject("/call", 503, "lock_timeout", retry_after="2", times=2)
        assert s.call("write", path="done.txt", content="yes")["ok"]
        assert waits == [2.0, 2.0]
        assert s.action_index == 1, "the refused attempts did not run"


def test_too_many_sessions_is_retried_then_raised_when_retries_run_out(fake):
    waits = []
    client = envcraft.Client(fake.url, max_retries=2, sleep=waits.append)
    fake.inject("/v1/sessions", 429, "too_many_sessions", retry_after="1", times=3)
    with pytest.raises(envcraft.TooManySessions) as e:
        client.create("example/two-turns")
    assert waits == [1.0, 1.0] and e.value.retry_after == 1.0
    assert len([r for r in fake.requests if r.path == "/v1/sessions"]) == 3


def test_draining_and_internal_are_not_retried(fake):
    waits = []
    client = envcraft.Client(fake.url, sleep=waits.append)
    fake.inject("/v1/tasks", 503, "draining")
    with pytest.raises(envcraft.Draining):
        client.tasks()
    fake.inject("/v1/tasks", 500, "internal")
    with pytest.raises(envcraft.InternalError):
        client.tasks()
    assert waits == []


def test_a_server_that_is_not_there_is_a_transport_error():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(envcraft.TransportError):
        envcraft.Client(f"http://127.0.0.1:{port}", timeout=5).health()


def test_next_turn_after_the_last_is_none_and_a_null_prompt_breaks_the_contract():
    from fake_server import FakeServer

    # The contract: 409 invalid_transition past the last prompt, which the client reads as
    # None; a 200 without a prompt is the server's fault and said so.
    for null in (False, True):
        server = FakeServer(last_turn_null=null).start()
        try:
            with envcraft.Client(server.url).create("example/two-turns") as s:
                assert s.next_turn() == "Now say goodbye."
                if null:
                    with pytest.raises(envcraft.ProtocolError):
                        s.next_turn()
                else:
                    assert s.next_turn() is None
                assert s.turn == 1 and s.prompt == "Now say goodbye."
        finally:
            server.stop()
