"""OpenEnv's harness API over envcraft's HTTP API: ``EnvcraftSessionFactory`` makes one
envcraft session per rollout (``create(task, seed, episode_id)``) and ``EnvcraftResourceSession``
offers its prompt, tools, calls and reward the way OpenEnv's harnesses (and TRL's harness
worker) expect. Needs ``openenv-core`` (``pip install openenv-core``); envcraft itself does
not.

The server also speaks OpenEnv's own protocol (``/ws``, ``/reset``, ``/step``, ``/mcp``): an
OpenEnv client (``GenericEnvClient``, ``MCPToolClient``) connects to ``envcraft serve``'s URL
with no code of ours. This module is for code written against the harness API instead.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

try:
    from openenv.core.env_server.mcp_types import Tool
    from openenv.core.harness import ResourceSession, ResourceSessionFactory, ToolResult, VerifyResult
except ImportError as e:  # pragma: no cover - the message is the point
    raise ImportError("envcraft.openenv needs openenv-core: pip install 'openenv-core>=0.3,<0.4'") from e

from .client import Client, Session

__all__ = ["EnvcraftResourceSession", "EnvcraftSessionFactory"]


class EnvcraftResourceSession(ResourceSession):
    """One envcraft session as an OpenEnv resource session. ``verify`` scores the workspace
    (the environment's own reward, forwarded as ``env_reward``); ``close`` closes the session."""

    def __init__(self, session: Session, episode_id: Optional[str] = None) -> None:
        self.session = session
        self.episode_id = episode_id or session.id

    def initial_messages(self) -> List[Dict[str, Any]]:
        return [{"role": "user", "content": self.session.prompt}]

    def list_tools(self) -> List[Tool]:
        return [
            Tool(
                name=t["function"]["name"],
                description=t["function"].get("description", ""),
                input_schema=t["function"].get("parameters", {}),
            )
            for t in self.session.tools
        ]

    def call_tool(self, name: str, arguments: Dict[str, Any]) -> ToolResult:
        result = self.session.call(name, **arguments)
        error = None
        if not result.get("ok"):
            error = json.dumps(result.get("error", {}), sort_keys=True)
        return ToolResult(data=result, done=False, metadata={"action_index": result.get("action_index")}, error=error)

    def verify(self, transcript: List[Dict[str, Any]], final_state: Any = None) -> VerifyResult:
        verdict = self.session.verify()
        return VerifyResult(
            env_reward=verdict.reward,
            done=True,
            metrics={"passed": verdict.passed, "failed_checks": len(verdict.failed_checks), "not_run": verdict.not_run},
            artifacts={"checks": verdict.checks},
        )

    def close(self) -> None:
        self.session.close()


class EnvcraftSessionFactory(ResourceSessionFactory):
    """Sessions of ``envcraft serve`` at ``url`` (a task: ``ENV/ID`` or an inline task dict)."""

    def __init__(self, url: str, token: Optional[str] = None, **client_options: Any) -> None:
        self.client = Client(url, token=token, **client_options)

    def create(self, task: Any, seed: Optional[int] = None, episode_id: Optional[str] = None) -> EnvcraftResourceSession:
        return EnvcraftResourceSession(self.client.create(task, seed=seed), episode_id)

    def close(self) -> None:
        self.client.close()
