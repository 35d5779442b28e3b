"""Where an MCP client finds an envcraft session, for the ``mcp`` SDK or any MCP client.

- ``session_url(url, session_id)``: Streamable HTTP for a session made over ``/v1`` (the
  trainer keeps it: it verifies and closes it; the agent's client only calls tools).
- ``entry_url(url, task, seed)``: Streamable HTTP whose ``initialize`` makes a session of its
  own (named in ``Mcp-Session-Id``; closed when the client ends the MCP session).
- ``stdio_command(task, ...)``: the command line of ``envcraft mcp TASK`` (one session over
  stdio), and ``stdio_parameters`` the ``mcp`` SDK's ``StdioServerParameters`` for it.
- ``structured(result)``: a ``tools/call`` result's envcraft result (``ok``, its fields or
  ``error``).

No dependency beyond the standard library (``stdio_parameters`` imports ``mcp``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional
from urllib.parse import quote, urlencode

__all__ = ["entry_url", "session_url", "stdio_command", "stdio_parameters", "structured"]


def session_url(url: str, session_id: str) -> str:
    return f"{url.rstrip('/')}/v1/sessions/{quote(session_id, safe='')}/mcp"


def entry_url(url: str, task: str, seed: Optional[int] = None) -> str:
    query: Dict[str, Any] = {"task": task}
    if seed is not None:
        query["seed"] = int(seed)
    return f"{url.rstrip('/')}/v1/mcp?{urlencode(query)}"


def stdio_command(
    task: str,
    binary: str = "envcraft",
    workspaces: Optional[str] = None,
    skills: Optional[str] = None,
    state_dir: Optional[str] = None,
    seed: Optional[int] = None,
) -> List[str]:
    argv = [binary, "mcp", task]
    for flag, value in (("--workspaces", workspaces), ("--skills", skills), ("--state-dir", state_dir), ("--seed", seed)):
        if value is not None:
            argv += [flag, str(value)]
    return argv


def stdio_parameters(task: str, **options: Any) -> Any:
    from mcp import StdioServerParameters

    argv = stdio_command(task, **options)
    return StdioServerParameters(command=argv[0], args=argv[1:])


def structured(result: Any) -> Dict[str, Any]:
    """The envcraft result of a ``tools/call`` (an SDK ``CallToolResult`` or its JSON)."""
    if isinstance(result, dict):
        return result.get("structuredContent") or {}
    return getattr(result, "structured_content", None) or {}
