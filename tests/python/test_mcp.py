"""The ``mcp`` Python SDK's client against ``envcraft mcp TASK`` (stdio) and against
``envcraft serve``'s Streamable HTTP endpoints: initialize, tools with their schemas, calls
(results and tool failures), protocol errors, resources, ping, a long ``exec`` the client gives
up on (cancellation), and the grade kept from the agent.

Needs ``mcp`` (the Makefile installs it); skipped loudly without.
"""

from __future__ import annotations

import asyncio
import importlib.util
import tempfile
import time

import pytest

import envcraft
from conftest import REPO, RealServer, envcraft_binary, require, serve_available
from envcraft.mcp import entry_url, session_url, stdio_parameters, structured

TASK = "example/archive-read-mail"
HANDSHAKE_VERSIONS = {"2025-06-18", "2025-11-25"}


@pytest.fixture(scope="module")
def binary():
    require(importlib.util.find_spec("mcp") is not None, "the mcp SDK is not installed (pip install 'mcp>=2.3,<3')")
    found = envcraft_binary()
    why = serve_available(found)
    require(why is None, why or "")
    return str(found)


@pytest.fixture(scope="module")
def mcp_server(binary):
    from pathlib import Path

    s = RealServer(Path(binary), [])
    yield s
    s.stop()


@pytest.fixture
def stdio(binary, tmp_path):
    return stdio_parameters(TASK, binary=binary, workspaces=str(REPO / "workspaces"), skills=str(REPO / "skills"), state_dir=str(tmp_path), seed=5)


async def exercise(target) -> None:
    """What an agent does: handshake, tools, calls, errors, resources, ping."""
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    async with Client(target) as agent:
        assert agent.protocol_version in HANDSHAKE_VERSIONS
        assert agent.server_info is not None and agent.server_info.name == "envcraft"
        assert agent.instructions  # the prompt
        tools = {t.name: t for t in (await agent.list_tools()).tools}
        assert {"read", "write", "ls", "exec"} <= set(tools)
        assert "verify" not in tools  # the agent never sees its grade
        assert tools["read"].input_schema["type"] == "object" and "path" in tools["read"].input_schema["properties"]
        listing = await agent.call_tool("ls", {"path": "inbox"})
        assert listing.is_error is False and structured(listing)["ok"] and listing.content[0].type == "text"
        failed = await agent.call_tool("read", {"path": "no/such"})
        assert failed.is_error is True and structured(failed)["error"]["category"] == "not_found"
        bad_args = await agent.call_tool("read", {"path": 7})
        assert bad_args.is_error is True and structured(bad_args)["error"]["category"] == "invalid_argument"
        with pytest.raises(MCPError, match="unknown tool `verify`"):
            await agent.call_tool("verify", {})
        resources = {str(r.uri): r for r in (await agent.list_resources()).resources}
        assert {"envcraft://task/prompt", "envcraft://environment/docs"} <= set(resources)
        prompt = await agent.read_resource("envcraft://task/prompt")
        assert prompt.contents[0].text == agent.instructions
        with pytest.raises(MCPError, match="unknown resource"):
            await agent.read_resource("envcraft://nothing")
        await agent.session.send_ping()


def test_the_sdk_client_drives_envcraft_mcp_over_stdio(stdio):
    asyncio.run(exercise(stdio))


def test_the_sdk_client_drives_a_session_of_its_own_over_streamable_http(mcp_server):
    before = envcraft.Client(mcp_server.url).ready()["sessions"]
    asyncio.run(exercise(entry_url(mcp_server.url, TASK, seed=5)))
    # The client ended its MCP session (DELETE): the server closed the envcraft session.
    assert envcraft.Client(mcp_server.url).ready()["sessions"] == before


def test_the_sdk_client_drives_a_trainer_s_session_and_leaves_it_open(mcp_server):
    with envcraft.Client(mcp_server.url).create(TASK) as trained:
        asyncio.run(exercise(session_url(mcp_server.url, trained.id)))
        # Still the trainer's: it verifies (the agent's calls are in its transcript) and closes.
        assert trained.verify().reward < 1.0


async def cancel_a_long_exec(target) -> None:
    from mcp import Client

    async with Client(target) as agent:
        started = time.monotonic()
        with pytest.raises(Exception):
            await agent.call_tool("exec", {"command": "sleep 4; touch late.txt"}, read_timeout_seconds=0.5)
        assert time.monotonic() - started < 2.5  # the client stopped waiting at once
        # The SDK sent notifications/cancelled: the command was killed with its process group,
        # so the next call is answered at once, not after the sleep, and nothing was touched.
        after = await agent.call_tool("exec", {"command": "echo next"}, read_timeout_seconds=30)
        assert time.monotonic() - started < 3.0, "the cancelled command ran on"
        assert after.is_error is False and "next" in structured(after).get("stdout", ""), structured(after)
        await asyncio.sleep(4.5 - (time.monotonic() - started))
        late = await agent.call_tool("exec", {"command": "test -e late.txt; echo $?"}, read_timeout_seconds=30)
        assert structured(late).get("stdout", "").strip() == "1", structured(late)


def test_a_long_exec_the_client_cancels_is_killed_by_the_stdio_server(stdio):
    asyncio.run(cancel_a_long_exec(stdio))


def test_a_long_exec_the_client_cancels_is_killed_by_the_http_server(mcp_server):
    asyncio.run(cancel_a_long_exec(entry_url(mcp_server.url, TASK)))
