"""The pure parts: error mapping from the server's bodies, the retry decision."""

import json

import pytest

import envcraft
from envcraft import _wire
from envcraft.errors import error_from_response, parse_retry_after


def body(category: str, message: str = "m") -> bytes:
    return json.dumps({"error": {"category": category, "message": message}}).encode()


@pytest.mark.parametrize(
    "status,category,cls",
    [
        (400, "bad_request", envcraft.BadRequest),
        (400, "missing_field", envcraft.MissingField),
        (401, "unauthorized", envcraft.Unauthorized),
        (404, "session_not_found", envcraft.SessionNotFound),
        (404, "task_not_found", envcraft.TaskNotFound),
        (409, "invalid_transition", envcraft.InvalidTransition),
        (413, "payload_too_large", envcraft.PayloadTooLarge),
        (429, "too_many_sessions", envcraft.TooManySessions),
        (503, "lock_timeout", envcraft.LockTimeout),
        (503, "draining", envcraft.Draining),
        (504, "timeout", envcraft.ServerTimeout),
        (500, "internal", envcraft.InternalError),
    ],
)
def test_every_contract_category_maps_to_its_class(status, category, cls):
    err = error_from_response(status, body(category, "why"), {"retry-after": "2"})
    assert type(err) is cls
    assert isinstance(err, envcraft.EnvcraftError)
    assert (err.category, err.message, err.status, err.retry_after) == (category, "why", status, 2.0)


def test_missing_field_is_a_bad_request_and_not_found_groups_both():
    assert issubclass(envcraft.MissingField, envcraft.BadRequest)
    assert issubclass(envcraft.SessionNotFound, envcraft.NotFound)
    assert issubclass(envcraft.TaskNotFound, envcraft.NotFound)


def test_unknown_category_keeps_its_name_and_falls_back_on_status():
    err = error_from_response(409, body("brand_new"), {})
    assert isinstance(err, envcraft.InvalidTransition) and err.category == "brand_new"


def test_body_that_is_not_json_is_mapped_by_status_with_its_text():
    err = error_from_response(502, b"<html>Bad Gateway</html>", {})
    assert isinstance(err, envcraft.ProtocolError)
    assert err.status == 502 and "Bad Gateway" in err.message
    err = error_from_response(401, b"", {})
    assert isinstance(err, envcraft.Unauthorized)


@pytest.mark.parametrize("value,seconds", [("3", 3.0), (" 0.5 ", 0.5), ("-1", None), ("Wed, 21 Oct 2015 07:28:00 GMT", None), (None, None), ("nan", None)])
def test_retry_after_is_delta_seconds_only(value, seconds):
    assert parse_retry_after(value) == seconds


def test_retry_policy_honours_retry_after_and_stops_after_max_retries():
    policy = envcraft.RetryPolicy(max_retries=2, backoff=0.1, max_wait=5.0)
    lock = envcraft.LockTimeout("lock_timeout", "busy", 503, retry_after=1.5)
    assert policy.delay(0, lock) == 1.5
    assert policy.delay(1, lock) == 1.5
    assert policy.delay(2, lock) is None
    full = envcraft.TooManySessions("too_many_sessions", "full", 429, retry_after=None)
    assert policy.delay(0, full) == pytest.approx(0.1)
    assert policy.delay(1, full) == pytest.approx(0.2)
    huge = envcraft.LockTimeout("lock_timeout", "busy", 503, retry_after=3600)
    assert policy.delay(0, huge) == 5.0


@pytest.mark.parametrize("err", [
    envcraft.Draining("draining", "bye", 503),
    envcraft.InternalError("internal", "x", 500),
    envcraft.ServerTimeout("timeout", "x", 504),
    envcraft.TransportError("transport", "refused"),
])
def test_errors_that_may_have_run_or_will_not_improve_are_never_retried(err):
    assert envcraft.RetryPolicy(max_retries=5).delay(0, err) is None


def test_session_ids_are_escaped_into_one_path_segment():
    assert _wire.call_tool("a/../b", "read", {}).path == "/v1/sessions/a%2F..%2Fb/call"
    assert _wire.close("x y").path == "/v1/sessions/x%20y"


def test_create_sends_base_time_only_when_given():
    assert _wire.create_session("e/t", None).body == {"task": "e/t"}
    assert _wire.create_session("e/t", "2026-01-05T09:00:00Z").body == {"task": "e/t", "base_time": "2026-01-05T09:00:00Z"}


def test_create_sends_seed_only_when_given_and_as_an_int():
    assert "seed" not in _wire.create_session("e/t", None, None).body
    assert _wire.create_session("e/t", None, 0).body == {"task": "e/t", "seed": 0}
    top = _wire.create_session("e/t", None, 2**64 - 1)
    assert json.loads(top.encoded_body()) == {"task": "e/t", "seed": 18446744073709551615}

    class Index:  # an integer type that is not int (numpy.uint64, say)
        def __index__(self):
            return 7

    body = _wire.create_session("e/t", None, Index()).body
    assert body["seed"] == 7 and type(body["seed"]) is int


@pytest.mark.parametrize("seed", [-1, 2**64, 2**70, True, False, 1.0, 7.5, "7", [7]])
def test_a_seed_outside_0_to_2_64_or_not_an_integer_is_a_value_error(seed):
    with pytest.raises(ValueError, match=r"seed must be an integer from 0 to 2\*\*64-1"):
        _wire.create_session("e/t", None, seed)


def test_an_inline_task_is_sent_as_given():
    from types import MappingProxyType

    task = {"env": "example", "prompt": "p", "verifier": {"kind": "manifest"}, "files": {"a.txt": "x"}}
    req = _wire.create_session(MappingProxyType(task), "2026-01-05T09:00:00Z", 3)
    assert json.loads(req.encoded_body()) == {"task": task, "base_time": "2026-01-05T09:00:00Z", "seed": 3}


@pytest.mark.parametrize("task", [7, None, ["example", "t"], b"example/t"])
def test_a_task_neither_a_name_nor_a_mapping_is_a_type_error(task):
    with pytest.raises(TypeError, match="task must be a task name"):
        _wire.create_session(task, None)


def test_the_created_answer_gives_the_seed_and_refuses_a_wrong_one():
    answer = {"session_id": "s", "task": "example/inline-0011", "seed": 2**64 - 1}
    assert _wire.SessionInfo.from_created(answer).seed == 2**64 - 1
    assert _wire.SessionInfo.from_created({**answer, "seed": None}).seed is None
    assert _wire.SessionInfo.from_created({"session_id": "s"}).seed is None
    with pytest.raises(envcraft.ProtocolError):
        _wire.SessionInfo.from_created({**answer, "seed": "7"})
