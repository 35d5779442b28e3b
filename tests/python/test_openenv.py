"""OpenEnv's own clients and validator against the real ``envcraft serve``: ``openenv validate``,
``MCPToolClient`` and ``GenericEnvClient`` over ``/ws``, the HTTP ``/reset``, ``/step``,
``/state``, capacity, a vanished WebSocket client, the harness factory of ``envcraft.openenv``,
and one trajectory through ``/v1``, OpenEnv and MCP giving the same transcript and reward.

Needs ``openenv-core`` and ``mcp`` (the Makefile installs them); skipped loudly without.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import envcraft
from conftest import REPO, RealServer, envcraft_binary, require, serve_available

TASK = "example/archive-read-mail"


def need_openenv() -> None:
    require(importlib.util.find_spec("openenv") is not None, "openenv-core is not installed (pip install 'openenv-core>=0.3,<0.4')")


def solution(task: str):
    env, task_id = task.split("/")
    path = REPO / "workspaces" / env / "tasks" / task_id / "solution.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def actions(steps):
    """A solution as OpenEnv actions: a ``next_turn`` where its turn moves on, then each call."""
    turn = 0
    for step in steps:
        while step.get("turn", turn) > turn:
            turn += 1
            yield {"type": "next_turn"}
        yield {"type": "call_tool", "tool_name": step["tool"], "arguments": step["args"]}


def server(extra):
    binary = envcraft_binary()
    why = serve_available(binary)
    require(why is None, why or "")
    assert binary is not None
    return RealServer(binary, extra)


@pytest.fixture(scope="module")
def openenv_server():
    need_openenv()
    s = server([])
    yield s
    s.stop()


def sessions_open(url: str) -> int:
    return envcraft.Client(url).ready()["sessions"]


def wait_sessions(url: str, count: int, bound: float = 20.0) -> int:
    """Waits (at most ``bound`` s) until the server holds ``count`` sessions; the last count."""
    deadline = time.monotonic() + bound
    seen = sessions_open(url)
    while seen != count and time.monotonic() < deadline:
        time.sleep(0.05)
        seen = sessions_open(url)
    return seen


def transcript_messages(state_dir: str, session_id: str):
    """The calls and results of a session's transcript (the lines every protocol must agree on)."""
    path = Path(state_dir) / "sessions" / session_id / "transcript.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [line for line in lines if line.get("type") == "message"]


def openenv_cli() -> str:
    return str(Path(sys.executable).parent / "openenv")


@pytest.mark.parametrize("mode", ["simulation", "production"])
def test_openenv_validate_passes_every_check(mode):
    need_openenv()
    s = server(["--openenv-mode", mode])
    try:
        run = subprocess.run([openenv_cli(), "validate", "--url", s.url], capture_output=True, text=True, timeout=120)
        report = json.loads(run.stdout)
        assert run.returncode == 0 and report["passed"], run.stdout + run.stderr
        assert report["mode"] == mode
        assert report["summary"]["passed_count"] == report["summary"]["total_count"] >= 6
    finally:
        s.stop()


def test_mcp_tool_client_resets_lists_calls_verifies_and_closes(openenv_server):
    from openenv.core.mcp_client import MCPToolClient

    url = openenv_server.url
    before = sessions_open(url)

    async def episode():
        async with MCPToolClient(base_url=url) as env:
            await env.reset(task=TASK, seed=7, episode_id="episode-7")
            tools = await env.list_tools()
            names = {t.name for t in tools}
            assert {"read", "write", "ls", "exec"} <= names and "verify" not in names
            assert all(isinstance(t.input_schema, dict) and t.input_schema.get("type") == "object" for t in tools)
            listing = await env.call_tool("ls", path="inbox")
            assert listing["ok"] and {e["name"] for e in listing["entries"]} >= {"1.txt"}
            missing = await env.call_tool("read", path="no/such/file")
            assert missing["ok"] is False and missing["error"]["category"] == "not_found"
            state = await env.state()
            assert state.episode_id == "episode-7" and state.step_count == 2
            assert sessions_open(url) == before + 1
            from openenv.core.env_server.types import Action

            class Verify(Action):
                type: str = "verify"

            verdict = await env.step(Verify())
            assert verdict.done is True and 0.0 <= verdict.reward < 1.0

    asyncio.run(episode())
    assert wait_sessions(url, before) == before


def test_generic_client_replays_the_reference_solution_to_reward_one(openenv_server):
    from openenv.core.generic_client import GenericEnvClient

    async def episode():
        async with GenericEnvClient(base_url=openenv_server.url) as env:
            reset = await env.reset(task=TASK)
            seen = reset.observation
            assert seen["task"] == TASK and seen["prompt"] and seen["session_id"] and reset.done is False
            assert {t["name"] for t in seen["tools"]} >= {"read", "write"}
            for action in actions(solution(TASK)):
                result = await env.step(action)
                if action["type"] == "next_turn":
                    assert result.observation["turn"] == 1 and result.observation["prompt"]
                else:
                    assert result.observation["result"]["ok"], (action, result.observation)
            verdict = await env.step({"type": "verify"})
            assert verdict.reward == 1.0 and verdict.done and verdict.observation["passed"]
            with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
                await env.step({"type": "submit_everything"})

    asyncio.run(episode())


def test_several_concurrent_sessions_are_isolated(openenv_server):
    from openenv.core.generic_client import GenericEnvClient

    async def one(n: int):
        async with GenericEnvClient(base_url=openenv_server.url) as env:
            await env.reset(task=TASK)
            wrote = await env.step({"type": "call_tool", "tool_name": "write", "arguments": {"path": f"mine-{n}.txt", "content": str(n)}})
            assert wrote.observation["result"]["ok"]
            listing = await env.step({"type": "call_tool", "tool_name": "glob", "arguments": {"pattern": "mine-*.txt"}})
            return listing.observation["result"]

    async def all_of_them():
        return await asyncio.wait_for(asyncio.gather(*(one(n) for n in range(4))), 120)

    results = asyncio.run(all_of_them())
    for n, result in enumerate(results):
        assert result["ok"] and result["matches"] == [f"mine-{n}.txt"], result


def test_capacity_reached_is_openenv_s_error_code_and_room_comes_back():
    need_openenv()
    from openenv.core.generic_client import GenericEnvClient

    s = server(["--max-sessions", "1"])
    try:
        async def run():
            async with GenericEnvClient(base_url=s.url) as first:
                await first.reset(task=TASK)
                async with GenericEnvClient(base_url=s.url) as second:
                    with pytest.raises(RuntimeError, match="CAPACITY_REACHED"):
                        await second.reset(task=TASK)
            assert wait_sessions(s.url, 0) == 0
            async with GenericEnvClient(base_url=s.url) as third:
                assert (await third.reset(task=TASK)).observation["session_id"]

        asyncio.run(run())
    finally:
        s.stop()


def test_http_reset_step_state_keep_one_session(openenv_server):
    import requests

    url = openenv_server.url
    reset = requests.post(f"{url}/reset", json={"task": TASK, "episode_id": "e1"}, timeout=60).json()
    sid = reset["observation"]["session_id"]
    assert reset["done"] is False and reset["reward"] is None
    step = requests.post(f"{url}/step", json={"session_id": sid, "action": {"type": "call_tool", "tool_name": "ls", "arguments": {}}}, timeout=60)
    assert step.status_code == 200 and step.json()["observation"]["result"]["ok"]
    state = requests.get(f"{url}/state", params={"session_id": sid}, timeout=60).json()
    assert state["step_count"] == 1 and state["task"] == TASK and state["episode_id"] == "e1"
    bad = requests.post(f"{url}/step", json={"action": {"type": "list_tools"}}, timeout=60)
    assert bad.status_code == 400 and bad.json()["error"]["category"] == "missing_field"
    # The session is an ordinary one: /v1 closes it.
    assert requests.delete(f"{url}/v1/sessions/{sid}", timeout=60).status_code == 200


def test_a_step_past_its_timeout_s_is_a_timeout_and_its_command_is_killed(openenv_server):
    import requests

    url = openenv_server.url
    sid = requests.post(f"{url}/reset", json={"task": TASK}, timeout=60).json()["observation"]["session_id"]
    try:
        slow = {"type": "call_tool", "tool_name": "exec", "arguments": {"command": "sleep 5; touch late.txt"}}
        started = time.monotonic()
        step = requests.post(f"{url}/step", json={"session_id": sid, "action": slow, "timeout_s": 0.5}, timeout=60)
        assert step.status_code == 200, step.text
        assert time.monotonic() - started < 3.0, "the step outlived its timeout_s"
        seen = step.json()["observation"]
        assert seen["error"]["error_type"] == "timeout" and seen["result"] is None, seen
        assert "exec" in seen["error"]["message"]
        # Killed, not left running: nothing is touched once the sleep would have ended.
        time.sleep(5.5 - (time.monotonic() - started))
        check = {"type": "call_tool", "tool_name": "exec", "arguments": {"command": "test -e late.txt; echo $?"}}
        after = requests.post(f"{url}/step", json={"session_id": sid, "action": check, "timeout_s": 30}, timeout=60).json()
        assert after["observation"]["result"]["stdout"].strip() == "1", after
        for bad in (0, -1, "soon", 1e9):
            r = requests.post(f"{url}/step", json={"session_id": sid, "action": check, "timeout_s": bad}, timeout=60)
            assert r.status_code == 400 and "timeout_s" in r.text, (bad, r.text)
    finally:
        requests.delete(f"{url}/v1/sessions/{sid}", timeout=60)


def test_a_websocket_client_that_vanishes_mid_step_leaves_no_session(openenv_server):
    url = openenv_server.url
    before = sessions_open(url)
    host, port = url.removeprefix("http://").split(":")
    raw = socket.create_connection((host, int(port)), timeout=30)
    key = "dGhlIHNhbXBsZSBub25jZQ=="
    raw.sendall(f"GET /ws HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += raw.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head

    def frame(obj) -> bytes:
        payload = json.dumps(obj).encode()
        mask = b"\x01\x02\x03\x04"
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        assert len(payload) < 65536
        header = b"\x81" + (bytes([0x80 | len(payload)]) if len(payload) < 126 else b"\xfe" + len(payload).to_bytes(2, "big"))
        return header + mask + masked

    raw.sendall(frame({"type": "reset", "data": {"task": TASK}}))
    assert wait_sessions(url, before + 1) == before + 1
    raw.sendall(frame({"type": "step", "data": {"type": "call_tool", "tool_name": "exec", "arguments": {"command": "sleep 2"}}}))
    raw.close()  # gone mid-step, without a close frame
    assert wait_sessions(url, before) == before


def test_the_harness_factory_of_envcraft_openenv_scores_a_rollout(openenv_server):
    from envcraft.openenv import EnvcraftSessionFactory

    factory = EnvcraftSessionFactory(openenv_server.url)
    session = factory.create(TASK, seed=3, episode_id="harness-1")
    try:
        assert session.initial_messages()[0]["content"]
        assert {"read", "write"} <= {t.name for t in session.list_tools()}
        for action in actions(solution(TASK)):
            if action["type"] == "next_turn":
                assert session.session.next_turn()
            else:
                assert session.call_tool(action["tool_name"], action["arguments"]).error is None
        failed = session.call_tool("read", {"path": "no/such"})
        assert failed.error and "not_found" in failed.error
        verdict = session.verify([])
        assert verdict.env_reward == 1.0 and verdict.done
    finally:
        session.close()
        factory.close()


def test_one_trajectory_through_v1_openenv_and_mcp_gives_the_same_transcript_and_reward(openenv_server):
    from mcp import Client as McpClient
    from openenv.core.generic_client import GenericEnvClient

    from envcraft.mcp import session_url, structured

    url, state_dir = openenv_server.url, openenv_server.state_dir
    steps = solution(TASK) + [{"turn": 1, "tool": "read", "args": {"path": "no/such"}}]
    client = envcraft.Client(url)

    with client.create(TASK) as v1:
        for action in actions(steps):
            if action["type"] == "next_turn":
                v1.next_turn()
            else:
                v1.call(action["tool_name"], **action["arguments"])
        v1_transcript = transcript_messages(state_dir, v1.id)
        v1_reward = v1.verify().reward

    async def over_openenv():
        async with GenericEnvClient(base_url=url) as env:
            sid = (await env.reset(task=TASK)).observation["session_id"]
            for action in actions(steps):
                await env.step(action)
            transcript = transcript_messages(state_dir, sid)
            return transcript, (await env.step({"type": "verify"})).reward

    openenv_transcript, openenv_reward = asyncio.run(over_openenv())

    with client.create(TASK) as trained:
        async def over_mcp():
            async with McpClient(session_url(url, trained.id)) as agent:
                for action in actions(steps):
                    if action["type"] == "next_turn":
                        trained.next_turn()  # the trainer moves the turn on; the agent calls tools
                    else:
                        structured(await agent.call_tool(action["tool_name"], action["arguments"]))

        asyncio.run(over_mcp())
        mcp_transcript = transcript_messages(state_dir, trained.id)
        mcp_reward = trained.verify().reward

    assert v1_reward == openenv_reward == mcp_reward == 1.0
    assert sum(1 for m in v1_transcript if m["message"]["role"] == "toolResult") == len(steps)
    assert v1_transcript == openenv_transcript == mcp_transcript
