"""What a session knows of itself, kept the same way by ``Session`` and ``AsyncSession``: both
send the same requests and update their state from the answers with these methods, so the two
cannot drift apart."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from . import _wire
from ._wire import SessionInfo
from .errors import ProtocolError


class SessionState:
    """A session's id, task, current prompt and turn, tools, action index and seed."""

    id: str
    task: str
    prompt: str
    docs: Optional[str]
    tools: List[Dict[str, Any]]
    action_index: int
    seed: Optional[int]
    turn: int
    closed: bool

    def _start(self, info: SessionInfo) -> None:
        self.id = info.id
        self.task = info.task
        self.prompt = info.prompt
        self.docs = info.docs
        self.tools = info.tools
        self.action_index = info.action_index
        self.seed = info.seed
        # The session's agent (name, version, model, turn_timeout), when it has one.
        self.agent = info.agent
        self.turn = 0
        self.closed = False

    def _called(self, obj: Dict[str, Any]) -> Dict[str, Any]:
        """The result of a tool call's answer; the action index moves on."""
        result = _wire.field_of(obj, "result")
        if "action_index" in obj:
            self.action_index = int(obj["action_index"])
        return dict(result)

    def _moved_on(self, obj: Dict[str, Any]) -> str:
        """The prompt of a ``next_turn`` answer (200 ``{"prompt", "turn"}``; past the last
        prompt the server answers 409 ``invalid_transition``, which the sessions turn into
        ``None``)."""
        prompt = _wire.field_of(obj, "prompt")
        if not isinstance(prompt, str):
            raise ProtocolError("protocol", f"next_turn answered prompt {prompt!r}, not a string", 200)
        self.turn = int(_wire.field_of(obj, "turn"))
        self.prompt = prompt
        return prompt

    def _fork_info(self, obj: Dict[str, Any]) -> SessionInfo:
        """The new session of a fork's answer: this one's task, prompt, tools, counter, seed."""
        return SessionInfo(
            str(_wire.field_of(obj, "session_id", 201)),
            self.task,
            self.prompt,
            self.docs,
            self.tools,
            self.action_index,
            self.seed,
        )
