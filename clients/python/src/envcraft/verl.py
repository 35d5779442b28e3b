"""verl: envcraft tools for ``ToolAgentLoop`` and an agent loop that scores with the verifier.

- ``EnvcraftTool``: a verl ``BaseTool``, one per envcraft tool, as a tool config YAML lists them
  (``tool_config(task)`` writes one; ``initialize_tools_from_config`` loads it). verl calls
  ``create`` and ``release`` around every single tool call, so the session is not the tool
  instance's: it is the trajectory's, keyed by the request id verl gives the trajectory
  (``agent_data.request_id``), opened at its first call (of ``create_kwargs["task"]``, else the
  config's ``task``; ``create_kwargs["seed"]`` optional) and kept for its later calls.
  ``calc_reward`` verifies it; ``finish_trajectory(request_id)`` verifies and closes it; a
  trajectory's session unused for ``trajectory_idle_seconds`` (config, default 900) is closed.
- ``EnvcraftAgentLoop``, registered as agent loop ``envcraft_agent``: verl's ``ToolAgentLoop``
  (its generation, tool-call parsing, observation tokens and masks) around one envcraft session
  per trajectory, opened from the row's ``extra_info`` (``task``, ``seed``) with the session's
  own tools when no tool config is given, verified at the end into ``reward_score``, closed.

Schemas keep all of envcraft's keywords: verl's own schema models drop ``items``,
``additionalProperties``, ``minimum``, ... (pydantic ignores unknown fields), so the tools give
subclasses of them that keep every field (``lossless_schema``).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple
from uuid import uuid4

from pydantic import ConfigDict
from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, register
from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
from verl.tools.base_tool import BaseTool
from verl.tools.schemas import (
    OpenAIFunctionParametersSchema,
    OpenAIFunctionPropertySchema,
    OpenAIFunctionSchema,
    OpenAIFunctionToolSchema,
    ToolResponse,
)

from . import _wire
from ._shared_clients import shared_client
from ._tool_methods import openai_function, result_text
from ._wire import Task
from .aio import AsyncClient
from .client import Client, Session
from .errors import BadRequest

__all__ = ["EnvcraftTool", "EnvcraftAgentLoop", "tool_config", "finish_trajectory", "lossless_schema", "AGENT_NAME"]

AGENT_NAME = "envcraft_agent"
DEFAULT_TRAJECTORY_IDLE = 900.0
# How often (seconds, at most) a tool's create looks for idle trajectories to close: not at
# every call (a scan of every trajectory under the lock), and well within the idle time.
IDLE_SWEEP_INTERVAL = 1.0

# Instance ids of creates that name none (ToolAgentLoop's): unique in the process and across
# processes (a random prefix), without a uuid4 (an os.urandom) per tool call.
_instance_ids = itertools.count()
_INSTANCE_PREFIX = uuid4().hex[:16]


class _Property(OpenAIFunctionPropertySchema):  # type: ignore[misc]
    model_config = ConfigDict(extra="allow")


class _Parameters(OpenAIFunctionParametersSchema):  # type: ignore[misc]
    model_config = ConfigDict(extra="allow")
    properties: Dict[str, _Property]


class _Function(OpenAIFunctionSchema):  # type: ignore[misc]
    model_config = ConfigDict(extra="allow")
    parameters: _Parameters


class _Tool(OpenAIFunctionToolSchema):  # type: ignore[misc]
    function: _Function


def lossless_schema(tool: Mapping[str, Any]) -> OpenAIFunctionToolSchema:
    """``tool`` (OpenAI's shape, as ``envcraft tools`` prints it) as verl's schema model, every
    keyword kept in its ``model_dump``."""
    return _Tool.model_validate({"type": "function", "function": dict(openai_function(tool))})


class _Trajectories:
    """The sessions of this process's trajectories, by request id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: Dict[str, Tuple[Session, float]] = {}
        self._next_sweep = 0.0

    def sweep_due(self, now: float) -> bool:
        """Whether ``idle`` is due (at most once per ``IDLE_SWEEP_INTERVAL``); claims it."""
        if now < self._next_sweep:
            return False
        self._next_sweep = now + IDLE_SWEEP_INTERVAL
        return True

    def get(self, key: str) -> Optional[Session]:
        with self._lock:
            found = self._sessions.get(key)
            if found is None:
                return None
            self._sessions[key] = (found[0], time.monotonic())
            return found[0]

    def put(self, key: str, session: Session) -> None:
        with self._lock:
            self._sessions[key] = (session, time.monotonic())

    def pop(self, key: str) -> Optional[Session]:
        with self._lock:
            found = self._sessions.pop(key, None)
        return None if found is None else found[0]

    def idle(self, older_than: float) -> List[Session]:
        """Takes out the sessions unused for ``older_than`` seconds."""
        now = time.monotonic()
        with self._lock:
            old = [k for k, (_, used) in self._sessions.items() if now - used > older_than]
            return [self._sessions.pop(k)[0] for k in old]


TRAJECTORIES = _Trajectories()


def open_trajectory(client: Client, request_id: str, task: Task, seed: Optional[int]) -> Session:
    """The session of trajectory ``request_id``, opened now if it has none."""
    session = TRAJECTORIES.get(request_id)
    if session is None:
        session = client.create(task, seed=seed)
        TRAJECTORIES.put(request_id, session)
    return session


def finish_trajectory(request_id: str) -> float:
    """Verifies the session of trajectory ``request_id`` and closes it; its reward (0.0 when
    the trajectory opened none: it made no tool call)."""
    session = TRAJECTORIES.pop(request_id)
    if session is None:
        return 0.0
    try:
        return session.verify().score()
    finally:
        session.close()


class EnvcraftTool(BaseTool):  # type: ignore[misc]  # verl is untyped
    """One envcraft tool (``config["tool"]``) for verl's ``ToolAgentLoop``; see the module.

    ``config``: ``type: native`` (verl's), ``tool`` (its name), ``task`` (for trajectories whose
    ``create_kwargs`` name none, and whose tools give the schema when the YAML has no
    ``tool_schema``), ``url`` (absent: a private server per process; ``workspaces``, ``skills``,
    ``binary`` then), ``token``, ``trajectory_idle_seconds``."""

    def __init__(self, config: Dict[str, Any], tool_schema: Optional[OpenAIFunctionToolSchema] = None) -> None:
        self.config = dict(config or {})
        self.client = shared_client(self.config)
        self._idle_seconds = float(self.config.get("trajectory_idle_seconds", DEFAULT_TRAJECTORY_IDLE))
        self._pending: Dict[str, Dict[str, Any]] = {}
        if tool_schema is None:
            tool_schema = self._schema_from_server()
        super().__init__(self.config, tool_schema)

    def _schema_from_server(self) -> OpenAIFunctionToolSchema:
        name, task = self.config.get("tool"), self.config.get("task")
        if not name or not task:
            raise ValueError("an EnvcraftTool without tool_schema needs config.tool and config.task to look its schema up")
        for tool in _tools_of(self.client, task):
            if openai_function(tool).get("name") == name:
                return lossless_schema(tool)
        raise ValueError(f"task {task} offers no tool {name!r}")

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema:
        return self.tool_schema

    async def create(self, instance_id: Optional[str] = None, **kwargs: Any) -> Tuple[str, ToolResponse]:
        instance = instance_id or f"{_INSTANCE_PREFIX}{next(_instance_ids):x}"
        self._pending[instance] = dict(kwargs.get("create_kwargs") or {})
        if TRAJECTORIES.sweep_due(time.monotonic()):
            for session in TRAJECTORIES.idle(self._idle_seconds):
                await asyncio.to_thread(session.close)
        return instance, ToolResponse()

    async def execute(self, instance_id: str, parameters: Dict[str, Any], **kwargs: Any) -> Tuple[ToolResponse, float, Dict[str, Any]]:
        key = self._trajectory_of(instance_id, kwargs.get("agent_data"))
        session = TRAJECTORIES.get(key)  # opened by an earlier call, or by EnvcraftAgentLoop
        create = self._pending.get(instance_id, {})
        task = create.get("task", self.config.get("task"))
        if session is None and task is not None:
            seed = create.get("seed")
            session = await asyncio.to_thread(open_trajectory, self.client, key, task, None if seed is None else int(seed))
        if session is None:
            result: Dict[str, Any] = {"ok": False, "error": {"category": "missing_field", "message": "no task: create_kwargs.task or config.task"}}
        else:
            result = await _call_async(self.client, session, self.name, parameters or {})
        return ToolResponse(text=result_text(result)), 0.0, {"ok": bool(result.get("ok"))}

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        session = TRAJECTORIES.get(self._trajectory_of(instance_id, kwargs.get("agent_data")))
        if session is None:
            return 0.0
        verdict = await asyncio.to_thread(session.verify)
        return verdict.score()

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        self._pending.pop(instance_id, None)

    def _trajectory_of(self, instance_id: str, agent_data: Any) -> str:
        request_id = getattr(agent_data, "request_id", None)
        if request_id:
            self._pending.setdefault(instance_id, {})["request_id"] = str(request_id)
            return str(request_id)
        return str(self._pending.get(instance_id, {}).get("request_id", instance_id))


def _call(session: Session, tool: str, args: Dict[str, Any]) -> Dict[str, Any]:
    try:
        return session.call(tool, **args)
    except BadRequest as e:
        return {"ok": False, "error": {"category": e.category, "message": e.message}}


# An AsyncClient per (server, event loop): tool calls go out on verl's own event loop, as verl's
# tools are awaited there, without a thread handoff per call (a third of a call's time here).
_async_clients: Dict[Tuple[str, int], Tuple[asyncio.AbstractEventLoop, AsyncClient]] = {}


async def _call_async(client: Client, session: Session, tool: str, args: Dict[str, Any]) -> Dict[str, Any]:
    loop = asyncio.get_running_loop()
    key = (client.url, id(loop))
    found = _async_clients.get(key)
    if found is None or found[0] is not loop:
        for stale in [k for k, (other, _) in _async_clients.items() if other.is_closed()]:
            del _async_clients[stale]  # its loop ended (asyncio.run): its connections went with it
        found = (loop, AsyncClient(client.url, token=client.token, timeout=client.timeout, retry=client.retry))
        _async_clients[key] = found
    try:
        obj = await found[1]._send(_wire.call_tool(session.id, tool, args))
    except BadRequest as e:
        return {"ok": False, "error": {"category": e.category, "message": e.message}}
    return session._called(obj)


_tool_lists: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
_tool_lists_lock = threading.Lock()


def _tools_of(client: Client, task: Task) -> List[Dict[str, Any]]:
    """The tools of ``task`` (a probe session), once per process, client and task."""
    key = (client.url, task if isinstance(task, str) else repr(sorted(task.items())))
    with _tool_lists_lock:
        if key not in _tool_lists:
            with client.create(task) as probe:
                _tool_lists[key] = list(probe.tools)
        return _tool_lists[key]


def tool_config(task: Task, url: Optional[str] = None, client: Optional[Client] = None, **config: Any) -> Dict[str, Any]:
    """verl's tool config (write it out as YAML) with one ``EnvcraftTool`` per tool of
    ``task``, each naming its tool and the task (its schema is looked up when verl loads it)."""
    conn = client if client is not None else shared_client({"url": url, **config})
    entries = []
    for tool in _tools_of(conn, task):
        name = openai_function(tool)["name"]
        entry_config: Dict[str, Any] = {"type": "native", "tool": name, "task": task, **config}
        if url is not None:
            entry_config["url"] = url
        entries.append({"class_name": f"{__name__}.EnvcraftTool", "config": entry_config})
    return {"tools": entries}


@register(AGENT_NAME)
class EnvcraftAgentLoop(ToolAgentLoop):  # type: ignore[misc]
    """verl's ``ToolAgentLoop`` over one envcraft session per trajectory (see the module).

    The row's ``extra_info`` names the ``task`` (and ``seed``); the server is the tool config's
    (``url`` of its first EnvcraftTool) or, with no tool config,
    ``actor_rollout_ref.rollout.multi_turn.envcraft`` (``url``, ``workspaces``, ...; absent: a
    private server per process)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._request_id = uuid4().hex
        first = next((t for t in self.tools.values() if isinstance(t, EnvcraftTool)), None)
        if first is not None:
            self._client = first.client
        else:
            multi_turn = self.rollout_config.multi_turn
            envcraft_config = multi_turn.get("envcraft", None) if hasattr(multi_turn, "get") else None
            self._client = shared_client(dict(envcraft_config or {}))

    def _make_request_id(self, priority: int = 0, full_determinism: bool = False) -> str:
        return self._request_id

    async def run(self, sampling_params: Dict[str, Any], priority: int = 0, **kwargs: Any) -> AgentLoopOutput:
        extra = kwargs.get("extra_info") or {}
        task = extra.get("task")
        if task is None:
            raise ValueError("the row's extra_info has no 'task': the envcraft task of the trajectory")
        seed = extra.get("seed")
        session = await asyncio.to_thread(open_trajectory, self._client, self._request_id, task, None if seed is None else int(seed))
        try:
            if not self.tools:
                self.tools = {
                    str(openai_function(t)["name"]): EnvcraftTool({"type": "native", "url": self._client.url, "tool": openai_function(t)["name"]}, lossless_schema(t))
                    for t in session.tools
                }
                self.tool_schemas = [lossless_schema(t).model_dump(exclude_unset=True, exclude_none=True) for t in session.tools]
            messages = list(kwargs.get("raw_prompt") or [])
            if not any(m.get("role") == "user" and str(m.get("content") or "").strip() for m in messages):
                messages = [m for m in messages if m.get("role") != "user"] + [{"role": "user", "content": session.prompt}]
            output: AgentLoopOutput = await super().run(sampling_params, priority, **{**kwargs, "raw_prompt": messages})
        except BaseException:
            await asyncio.to_thread(_close_quietly, self._request_id)
            raise
        output.reward_score = await asyncio.to_thread(finish_trajectory, self._request_id)
        return output


def _close_quietly(request_id: str) -> None:
    session = TRAJECTORIES.pop(request_id)
    if session is not None:
        session.close()
