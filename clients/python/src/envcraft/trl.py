"""TRL: envcraft sessions as the environments of ``GRPOTrainer(environment_factory=...)``.

``environment_factory(url=None, task=None, **client_options)`` returns a class; TRL makes a
pool of its instances (one per concurrent rollout, made with no arguments and reused) and:

- reads every public method of the class but ``reset`` and ``get_reward`` as a tool, its schema
  through ``transformers.utils.get_json_schema``: the class has one typed, docstringed method per
  tool the task offers, whose schema is ``envcraft tools``'s (less the keywords that function
  cannot write: ``envcraft._tool_methods.UNEXPRESSED``; the server still checks them);
- calls ``reset(**row)`` before each rollout with the dataset row: it closes the previous
  session, opens one of ``row["task"]`` (a name, an inline task as a mapping or as JSON text;
  the factory's ``task`` when the row has none) with ``row["seed"]`` if present, and returns the
  prompt (a task with several turns: every turn's prompt, in order, one paragraph each) that TRL
  appends to the row's last user message;
- calls a tool method with the model's arguments: it runs ``Session.call`` and returns the
  result's JSON (a failed call is an ``ok: false`` result the model reads, never an exception);
- calls ``get_reward()`` once per finished rollout: it verifies, closes the session and returns
  the reward.

Every instance of a class shares one ``Client`` (one set of kept-alive connections): of ``url``,
or of a private server (``Client.local(**client_options)``) with ``url=None``, stopped at exit.
The tools come from a probe session of ``task`` (else of the server's first task) when the
factory is called; a row whose task offers other tools is refused in ``reset`` (a
``ValueError`` naming them): give each tool set its own factory in TRL's multi-environment mode,
``environment_factory={"mail": environment_factory(task="example/extract-todos"), ...}``, or
``environment_factories()``: one class per environment of the server, rows naming their
``environment`` and ``task``.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Dict, List, Mapping, Optional, Type

from ._tool_methods import openai_function, result_text, tool_function
from ._wire import Task
from .client import Client, Session
from .errors import BadRequest

__all__ = ["environment_factory", "environment_factories", "EnvcraftEnvironment"]

# The methods TRL treats as the environment's own (everything else public is a tool).
RESERVED = ("reset", "get_reward")


class EnvcraftEnvironment:
    """The base of the classes ``environment_factory`` makes; see the module's docstring."""

    client: ClassVar[Client]
    tools: ClassVar[List[Dict[str, Any]]]
    default_task: ClassVar[Optional[Task]]
    with_docs: ClassVar[bool]

    def __init__(self) -> None:
        self._session: Optional[Session] = None
        self._reward: Optional[float] = None

    def reset(self, **row: Any) -> str:
        """Opens a session of ``row["task"]`` (``row["seed"]`` optional; other fields of the
        row are ignored), closing the previous one; returns the task's prompt."""
        self._close_session()
        task = _task_of(row.get("task", self.default_task))
        seed = row.get("seed")
        session = self.client.create(task, seed=None if seed is None else int(seed))
        mismatch = _tool_mismatch(self.tools, session.tools)
        if mismatch:
            session.close()
            raise ValueError(
                f"task {session.task} offers other tools than this environment class ({mismatch}); "
                "give each tool set its own environment_factory (TRL's multi-environment mode)"
            )
        self._session = session
        self._reward = None
        prompts = [session.prompt]
        while True:
            more = session.next_turn()
            if more is None:
                break
            prompts.append(more)
        text = "\n\n".join(p.strip() for p in prompts if p)
        if self.with_docs and session.docs:
            text = session.docs.strip() + "\n\n" + text
        return text

    def get_reward(self) -> float:
        """Verifies the session's workspace, closes the session and returns the reward (the
        same reward again if called twice; 0.0 when no session was opened)."""
        if self._reward is not None:
            return self._reward
        if self._session is None:
            return 0.0
        try:
            self._reward = self._session.verify().score()
        finally:
            self._close_session()
        return self._reward

    def _call_tool(self, tool: str, args: Dict[str, Any]) -> str:
        if self._session is None:
            return result_text({"ok": False, "error": {"category": "missing_binding", "message": "no session: reset() first"}})
        try:
            return result_text(self._session.call(tool, **args))
        except BadRequest as e:  # a malformed call: the model reads why
            return result_text({"ok": False, "error": {"category": e.category, "message": e.message}})

    def _close_session(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.close()

    def __del__(self) -> None:
        try:
            self._close_session()
        except Exception:
            pass


def environment_factory(
    url: Optional[str] = None,
    task: Optional[Task] = None,
    *,
    client: Optional[Client] = None,
    with_docs: bool = False,
    **client_options: Any,
) -> Type[EnvcraftEnvironment]:
    """A class for ``GRPOTrainer(environment_factory=...)`` over envcraft sessions.

    ``url`` names the server (``None``: a private one, ``Client.local(**client_options)``; with
    a ``url``, ``client_options`` are ``Client``'s), or ``client`` gives the client itself.
    ``task`` is the task of rows that name none, and the task whose tools the class offers
    (default: the first the server lists). ``with_docs`` puts the environment's documentation
    before the prompt ``reset`` returns."""
    client = _client_of(url, client, client_options)
    if task is not None:
        probe_task: Task = _task_of(task)
    else:
        listed = client.tasks()
        if not listed:
            raise ValueError(f"the server at {client.url} offers no task, and no task was given")
        probe_task = str(listed[0]["task"])
    return _environment_class(client, probe_task, task, with_docs)


def environment_factories(
    url: Optional[str] = None,
    envs: Optional[List[str]] = None,
    *,
    client: Optional[Client] = None,
    with_docs: bool = False,
    **client_options: Any,
) -> Dict[str, Type[EnvcraftEnvironment]]:
    """TRL's multi-environment mode: ``{environment name: class}`` for each environment of the
    server (or those of ``envs``), every class sharing one client, each offering its
    environment's tools (a probe session of its first task). A dataset row then names its
    ``environment`` and its ``task``: ``GRPOTrainer(environment_factory=environment_factories())``."""
    client = _client_of(url, client, client_options)
    first: Dict[str, str] = {}
    for listed in client.tasks():
        first.setdefault(str(listed["env"]), str(listed["task"]))
    wanted = list(first) if envs is None else list(envs)
    unknown = [e for e in wanted if e not in first]
    if unknown:
        raise ValueError(f"the server at {client.url} has no task of the environments {unknown} (it has {sorted(first)})")
    return {env: _environment_class(client, first[env], None, with_docs) for env in wanted}


def _client_of(url: Optional[str], client: Optional[Client], options: Dict[str, Any]) -> Client:
    if client is not None:
        return client
    return Client(url, **options) if url is not None else Client.local(**options)


def _environment_class(client: Client, probe_task: Task, default_task: Optional[Task], with_docs: bool) -> Type[EnvcraftEnvironment]:
    """The class offering ``probe_task``'s tools: one method per tool, from a probe session."""
    with client.create(probe_task) as probe:
        tools = list(probe.tools)
    namespace: Dict[str, Any] = {
        "client": client,
        "tools": tools,
        "default_task": default_task,
        "with_docs": with_docs,
        "__doc__": f"envcraft sessions of {probe.task} and tasks with its tools, for TRL's GRPOTrainer.",
        "__module__": __name__,
    }
    for tool in tools:
        name = str(openai_function(tool)["name"])
        if name in RESERVED or name.startswith("_") or hasattr(EnvcraftEnvironment, name):
            raise ValueError(f"tool {name!r} clashes with a method TRL reserves or the class's own")
        namespace[name] = tool_function(tool, _run_tool)
    class_name = "Envcraft_" + "".join(c if c.isalnum() else "_" for c in probe.task.split("/")[0])
    return type(class_name, (EnvcraftEnvironment,), namespace)


def _run_tool(env: EnvcraftEnvironment, tool: str, args: Dict[str, Any]) -> str:
    return env._call_tool(tool, args)


def _task_of(task: Any) -> Task:
    """A row's task: a name, a mapping (an inline task), or an inline task as JSON text."""
    if isinstance(task, str) and task.lstrip().startswith("{"):
        parsed = json.loads(task)
        if not isinstance(parsed, dict):
            raise ValueError("an inline task given as text must be a JSON object")
        return parsed
    if isinstance(task, (str, Mapping)):
        return task
    if task is None:
        raise ValueError("the row has no 'task' field and the environment factory was given no task")
    raise TypeError(f"a row's task must be a name, a mapping or JSON text, not {type(task).__name__}")


def _tool_mismatch(offered: List[Dict[str, Any]], session: List[Dict[str, Any]]) -> str:
    """What differs between two tool lists ('' when they are the same)."""
    a = {str(openai_function(t)["name"]): openai_function(t) for t in offered}
    b = {str(openai_function(t)["name"]): openai_function(t) for t in session}
    diffs: List[str] = []
    if set(a) - set(b):
        diffs.append(f"missing {sorted(set(a) - set(b))}")
    if set(b) - set(a):
        diffs.append(f"extra {sorted(set(b) - set(a))}")
    changed = sorted(n for n in set(a) & set(b) if a[n] != b[n])
    if changed:
        diffs.append(f"different schemas of {changed}")
    return "; ".join(diffs)


