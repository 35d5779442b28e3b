"""The HTTP contract of ``envcraft serve`` as pure functions, shared by both clients.

Each endpoint is a function returning a ``Request`` (method, path, JSON body); the sync and
async clients only send it and hand the answer back here. ``RetryPolicy.delay`` decides
whether and how long to wait before sending again: the one place that knows which errors are
worth a retry (``lock_timeout``: the call never ran; ``too_many_sessions`` and ``capacity``:
the session was never made), so both clients retry alike.
"""

from __future__ import annotations

import json
import operator
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Union
from urllib.parse import quote

from .errors import CapacityExceeded, EnvcraftError, LockTimeout, NotScored, ProtocolError, TooManySessions

USER_AGENT = "envcraft-python/0.1"

# What ``create`` runs: a task's name, ``"ENV/ID"``, or an inline task, the whole task as a
# JSON object (``{"env", "prompt" or "turns", "verifier", "files"?, "expected"?, "grader"?}``).
Task = Union[str, Mapping[str, Any]]

# ``seed`` is a u64 on the server: 0 to 2**64 - 1.
SEED_LIMIT = 2**64


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: Optional[Dict[str, Any]] = None
    # A tar sent as it is (an upload), instead of a JSON body.
    tar: Optional[bytes] = None
    # The answer is a tar (a download), not JSON.
    tar_answer: bool = False

    def encoded_body(self) -> Optional[bytes]:
        if self.tar is not None:
            return self.tar
        if self.body is None:
            return None
        return json.dumps(self.body).encode("utf-8")


def headers_for(req: Request, token: Optional[str]) -> Dict[str, str]:
    headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
    if req.tar is not None:
        headers["Content-Type"] = "application/x-tar"
    elif req.body is not None:
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def _session_path(session_id: str, rest: str = "") -> str:
    return f"/v1/sessions/{quote(session_id, safe='')}{rest}"


def healthz() -> Request:
    return Request("GET", "/healthz")


def readyz() -> Request:
    return Request("GET", "/readyz")


def list_tasks() -> Request:
    return Request("GET", "/v1/tasks")


def checked_task(task: Task) -> Union[str, Dict[str, Any]]:
    """``task`` as the request's ``task`` field: a name as it is, an inline task as a ``dict``
    of the same keys and values (the server checks its content). ``TypeError`` for anything
    else, before a request is made."""
    if isinstance(task, str):
        return task
    if isinstance(task, Mapping):
        return dict(task)
    raise TypeError(
        "task must be a task name 'ENV/ID' (str) or an inline task (a mapping), "
        f"not {type(task).__name__}"
    )


def checked_seed(seed: Optional[int]) -> Optional[int]:
    """``seed`` as the request's ``seed`` field: ``None`` (no seed) or an ``int`` from 0 to
    2**64 - 1 (any integer type with ``__index__``, such as ``numpy.uint64``, is taken as
    its value; a ``bool`` is not a seed). ``ValueError`` otherwise, before a request is made."""
    if seed is None:
        return None
    if isinstance(seed, bool):
        raise ValueError(f"seed must be an integer from 0 to 2**64-1, not a bool ({seed!r})")
    try:
        value = operator.index(seed)
    except TypeError:
        raise ValueError(
            f"seed must be an integer from 0 to 2**64-1, not a {type(seed).__name__} ({seed!r})"
        ) from None
    if not 0 <= value < SEED_LIMIT:
        raise ValueError(f"seed must be an integer from 0 to 2**64-1, got {value}")
    return value


def create_session(
    task: Task, base_time: Optional[str], seed: Optional[int] = None, agent: Optional[Mapping[str, Any]] = None
) -> Request:
    """``POST /v1/sessions``: ``base_time``, ``seed`` and ``agent`` are sent only when given."""
    body: Dict[str, Any] = {"task": checked_task(task)}
    if agent is not None:
        if not isinstance(agent, Mapping):
            raise TypeError(f"agent must be a mapping such as {{'name': 'openclaw', 'model_url': ...}}, not {type(agent).__name__}")
        body["agent"] = dict(agent)
    if base_time is not None:
        body["base_time"] = base_time
    checked = checked_seed(seed)
    if checked is not None:
        body["seed"] = checked
    return Request("POST", "/v1/sessions", body)


def call_tool(session_id: str, tool: str, args: Mapping[str, Any]) -> Request:
    return Request("POST", _session_path(session_id, "/call"), {"tool": tool, "args": dict(args)})


def add_message(
    session_id: str,
    text: Optional[str] = None,
    *,
    thinking: Optional[str] = None,
    content: Optional[List[Any]] = None,
    usage: Optional[Mapping[str, Any]] = None,
    model: Optional[str] = None,
    stop_reason: Optional[str] = None,
) -> Request:
    """``POST /v1/sessions/{id}/messages``: the model's own assistant message; only the fields
    given are sent (the server checks them)."""
    body: Dict[str, Any] = {}
    for key, value in (
        ("text", text),
        ("thinking", thinking),
        ("content", content),
        ("usage", dict(usage) if usage is not None else None),
        ("model", model),
        ("stopReason", stop_reason),
    ):
        if value is not None:
            body[key] = value
    return Request("POST", _session_path(session_id, "/messages"), body)


def upload(session_id: str, path: str, tar: bytes) -> Request:
    """``PUT /v1/sessions/{id}/files?path=DIR`` with the tar as the body."""
    return Request("PUT", _session_path(session_id, "/files?path=" + quote(path, safe="")), tar=tar)


def download(session_id: str, path: str) -> Request:
    """``GET /v1/sessions/{id}/files?path=P``: a tar answers."""
    return Request("GET", _session_path(session_id, "/files?path=" + quote(path, safe="")), tar_answer=True)


def answer_of(req: Request, status: int, headers: Mapping[str, str], body: bytes) -> Dict[str, Any]:
    """A 2xx answer: its JSON, or for a download ``{"tar", "kind", "entries", "skipped"}``."""
    if req.tar_answer:
        return {"tar": body, "kind": headers.get("x-envcraft-kind", ""),
                "entries": int(headers.get("x-envcraft-entries", "0") or 0),
                "skipped": int(headers.get("x-envcraft-skipped", "0") or 0)}
    return decode_json(status, body)


def tar_of(source: Any) -> bytes:
    """What ``upload`` sends: ``bytes`` as they are (a tar, plain or compressed), or a local
    file or directory (a path) made a tar: a directory's contents relative to it, a file under
    its own name. Links are kept as links; anything else is refused."""
    import io
    import os
    import tarfile

    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    path = os.fspath(source)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        if os.path.isdir(path) and not os.path.islink(path):
            for name in sorted(os.listdir(path)):
                tar.add(os.path.join(path, name), arcname=name)
        elif os.path.isfile(path):
            tar.add(path, arcname=os.path.basename(path))
        else:
            raise ValueError(f"{path}: neither a file nor a directory")
    return buf.getvalue()


def agent_turn(session_id: str) -> Request:
    return Request("POST", _session_path(session_id, "/agent/turn"), {})


def next_turn(session_id: str) -> Request:
    return Request("POST", _session_path(session_id, "/next_turn"), {})


def fork(session_id: str) -> Request:
    return Request("POST", _session_path(session_id, "/fork"), {})


def verify(session_id: str) -> Request:
    return Request("POST", _session_path(session_id, "/verify"), {})


def diff(session_id: str) -> Request:
    return Request("GET", _session_path(session_id, "/diff"))


def close(session_id: str) -> Request:
    return Request("DELETE", _session_path(session_id))


def decode_json(status: int, body: bytes) -> Dict[str, Any]:
    """The JSON object of a 2xx answer."""
    try:
        value = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise ProtocolError("protocol", f"answer is not JSON: {e}", status) from None
    if not isinstance(value, dict):
        raise ProtocolError("protocol", "answer is not a JSON object", status)
    return value


def field_of(obj: Mapping[str, Any], name: str, status: int = 200) -> Any:
    """A field the contract promises; its absence is the server's fault, said as such."""
    if name not in obj:
        raise ProtocolError("protocol", f"answer lacks field {name!r}", status)
    return obj[name]


@dataclass(frozen=True)
class SessionInfo:
    """What ``POST /v1/sessions`` answers. ``task`` is ``ENV/ID`` (``ENV/inline-HASH`` for an
    inline task), ``seed`` the seed as given at creation (``None`` without one)."""

    id: str
    task: str
    prompt: Optional[str]
    docs: Optional[str]
    tools: List[Dict[str, Any]]
    action_index: int
    seed: Optional[int] = None
    # The session's agent (name, version, model, turn_timeout) when it was created with one.
    agent: Optional[Dict[str, Any]] = None

    @classmethod
    def from_created(cls, obj: Mapping[str, Any]) -> "SessionInfo":
        return cls(
            id=str(field_of(obj, "session_id", 201)),
            task=str(obj.get("task", "")),
            prompt=obj.get("prompt"),
            docs=obj.get("docs"),
            tools=list(obj.get("tools") or []),
            action_index=int(obj.get("action_index", 0)),
            seed=_seed_of(obj),
            agent=obj.get("agent"),
        )


def _seed_of(obj: Mapping[str, Any]) -> Optional[int]:
    seed = obj.get("seed")
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ProtocolError("protocol", f"answer's seed is not an integer: {seed!r}", 201)
    return seed


@dataclass(frozen=True)
class Verdict:
    """The score of a session's workspace: ``reward`` in [0, 1], ``passed`` when every check
    passed, and the checks themselves.

    ``reward`` is ``None`` when a part of the task's verifier did not run (an LLM judge with no
    endpoint, or one that gave no score): ``not_run`` names those parts, their checks say why,
    and ``partial_reward`` is the weighted score of the parts that ran. It is never a 0 then."""

    reward: Optional[float]
    passed: bool
    checks: List[Dict[str, Any]] = field(default_factory=list)
    not_run: List[str] = field(default_factory=list)
    partial_reward: Optional[float] = None

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "Verdict":
        reward = field_of(obj, "reward")
        not_run = list(obj.get("not_run") or [])
        partial = obj.get("partial_reward")
        if reward is None and not not_run:
            raise ProtocolError("protocol", "answer's verdict has no reward and names no part not run", 200)
        return cls(
            reward=float(reward) if reward is not None else None,
            passed=bool(obj.get("passed", False)),
            checks=list(obj.get("checks") or []),
            not_run=not_run,
            partial_reward=float(partial) if partial is not None else None,
        )

    @property
    def scored(self) -> bool:
        """Whether every part of the verifier ran, so that ``reward`` is a score."""
        return self.reward is not None

    def score(self) -> float:
        """The reward; ``NotScored`` (naming the parts not run and why) when there is none."""
        if self.reward is not None:
            return self.reward
        why = [str(c.get("actual", "")) for c in self.checks if c.get("kind") in self.not_run]
        raise NotScored("not_scored", f"the verdict has no reward: {', '.join(self.not_run)} not run ({'; '.join(why)})")

    @property
    def failed_checks(self) -> List[Dict[str, Any]]:
        return [c for c in self.checks if not (c.get("passed", c.get("ok", False)))]


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to wait on ``lock_timeout`` (503), ``too_many_sessions`` (429) and
    ``capacity`` (503).

    The wait is the server's ``Retry-After`` when it sent one, else ``backoff * 2**attempt``,
    never more than ``max_wait`` seconds; after ``max_retries`` retries the error is raised.
    """

    max_retries: int = 3
    backoff: float = 0.25
    max_wait: float = 30.0

    def delay(self, attempt: int, error: EnvcraftError) -> Optional[float]:
        """Seconds to wait before retry number ``attempt + 1``, or ``None``: raise ``error``."""
        if not isinstance(error, (LockTimeout, TooManySessions, CapacityExceeded)):
            return None
        if attempt >= self.max_retries:
            return None
        wait = error.retry_after if error.retry_after is not None else self.backoff * (2**attempt)
        return max(0.0, min(wait, self.max_wait))
