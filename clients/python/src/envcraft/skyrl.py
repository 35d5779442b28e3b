"""SkyRL: an envcraft session as a ``skyrl_gym`` text environment, registered as ``envcraft``.

``skyrl_gym.make("envcraft", env_config=..., extras=...)`` (importing this module registers it;
SkyRL's workers import it through the entry point ``envcraft.skyrl:EnvcraftTextEnv``) makes an
``EnvcraftTextEnv``:

- ``env_config``: ``url`` of the server (absent or ``None``: a private ``Client.local()`` per
  process, with ``binary``/``workspaces``/``skills`` from the config), ``token``, ``timeout``;
  ``max_turns`` (default 16) for rows that give none;
- ``extras`` (the dataset row's): ``task`` (a name or an inline task), optional ``seed`` and
  ``max_turns``.

``init(prompt)`` opens the session and returns the conversation to start from: a system message
describing the session's tools in the Hermes/Qwen format, then the row's prompt (its user
message, or the task's prompt when the row's has no text). ``step(text)`` reads the tool calls
in the model's text (``envcraft._tool_calls``: ``<tool_call>`` blocks or OpenAI-style JSON),
runs them in order and returns one observation message (role ``user``, one
``<tool_response>`` block per call with the result's JSON); an answer without a call moves to
the task's next prompt, if it has one, else ends the episode. The episode ends with the
verifier's reward when the model stops calling tools after the last prompt or when ``max_turns``
steps were taken (the reward of the workspace as it is then); every other step's reward is 0.
``close()`` closes the session.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Tuple

from skyrl_gym import register, registry
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput, ConversationType

from ._shared_clients import shared_client
from ._tool_calls import parse_tool_calls
from ._tool_methods import result_text
from .client import Session
from .errors import BadRequest

__all__ = ["EnvcraftTextEnv", "tools_system_prompt", "ENV_ID"]

ENV_ID = "envcraft"
DEFAULT_MAX_TURNS = 16


def tools_system_prompt(tools: List[Dict[str, Any]]) -> str:
    """The tools as Qwen's (Hermes-style) chat templates describe them in the system prompt."""
    lines = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    return (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n"
        f"<tools>\n{lines}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )


class EnvcraftTextEnv(BaseTextEnv):  # type: ignore[misc]  # skyrl_gym is untyped
    """One envcraft session per episode; see the module's docstring."""

    def __init__(self, env_config: Optional[Mapping[str, Any]] = None, extras: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__()
        config: Mapping[str, Any] = env_config if env_config is not None else {}
        row: Mapping[str, Any] = extras if extras is not None else {}
        if row.get("task") is None:
            raise ValueError("extras['task'] is required: the envcraft task of the row (ENV/ID or an inline task)")
        self.task = row["task"]
        self.seed = None if row.get("seed") is None else int(row["seed"])
        self.max_turns = int(row.get("max_turns") or config.get("max_turns") or DEFAULT_MAX_TURNS)
        self.client = shared_client(config)
        self.session: Optional[Session] = None
        self.tool_calls = 0
        self.failed_calls = 0
        self.reward: Optional[float] = None

    def init(self, prompt: ConversationType) -> Tuple[ConversationType, Dict[str, Any]]:
        self.session = self.client.create(self.task, seed=self.seed)
        given = [dict(m) for m in (prompt or [])]
        if not any(m.get("role") == "user" and str(m.get("content") or "").strip() for m in given):
            given = [m for m in given if m.get("role") != "user"] + [{"role": "user", "content": self.session.prompt}]
        system = {"role": "system", "content": tools_system_prompt(self.session.tools)}
        if given and given[0].get("role") == "system":
            system["content"] = str(given[0].get("content") or "") + "\n\n" + system["content"]
            given = given[1:]
        metadata = {"session_id": self.session.id, "task": self.session.task}
        return [system] + given, metadata

    def step(self, action: str) -> BaseTextEnvStepOutput:
        self.turns += 1
        session = self._session()
        calls = parse_tool_calls(action)
        observations: ConversationType = []
        done = False
        if calls:
            blocks = []
            for call in calls:
                self.tool_calls += 1
                result = self._run(session, call.name, call.arguments, call.error)
                if not result.get("ok", False):
                    self.failed_calls += 1
                blocks.append(f"<tool_response>\n{result_text(result)}\n</tool_response>")
            observations = [{"role": "user", "content": "\n".join(blocks)}]
        else:
            following = session.next_turn()
            if following is None:
                done = True
            else:
                observations = [{"role": "user", "content": following}]
        if self.turns >= self.max_turns:
            done = True
        reward = self._finish() if done else 0.0
        metadata = {"tool_calls": len(calls), "turn": session.turn}
        return BaseTextEnvStepOutput(observations=[] if done else observations, reward=reward, done=done, metadata=metadata)

    def close(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            session.close()

    def get_metrics(self) -> Dict[str, Any]:
        return {"tool_calls": self.tool_calls, "failed_tool_calls": self.failed_calls, "turns": self.turns}

    def _session(self) -> Session:
        if self.session is None:
            raise RuntimeError("EnvcraftTextEnv.step before init (or after close)")
        return self.session

    def _run(self, session: Session, tool: str, args: Dict[str, Any], error: Optional[str]) -> Dict[str, Any]:
        if error is not None:
            return {"ok": False, "error": {"category": "invalid_argument", "message": error}}
        try:
            return session.call(tool, **args)
        except BadRequest as e:  # an unknown tool, a malformed call: the model reads why
            return {"ok": False, "error": {"category": e.category, "message": e.message}}

    def _finish(self) -> float:
        if self.reward is None:
            self.reward = self._session().verify().score()
        return self.reward


if ENV_ID not in registry:
    register(id=ENV_ID, entry_point="envcraft.skyrl:EnvcraftTextEnv")
