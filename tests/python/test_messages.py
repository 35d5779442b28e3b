"""The model's own assistant messages handed to a session, against the real ``envcraft serve``:
``Session.add_message`` (``POST /v1/sessions/{id}/messages``, sync and async) and OpenEnv's
``assistant_message`` on a ``/step`` action land in the transcript, which is OpenClaw's v3
session JSONL (a header, then entries chained by ``id``/``parentId``); bad messages are
structured 400s naming the field.
"""
from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import requests

import envcraft
from envcraft.errors import BadRequest, MissingField

TASK = "example/extract-todos"


def transcript(state_dir: str, session_id: str):
    path = Path(state_dir) / "sessions" / session_id / "transcript.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def assert_v3_chain(lines):
    header, entries = lines[0], lines[1:]
    assert header["type"] == "session" and header["version"] == 3, header
    assert header["cwd"] == "/workspace"
    assert len(header["id"].split("-")) == 5, header
    parent = None
    for entry in entries:
        assert entry["parentId"] == parent, entries
        parent = entry["id"]
    assert len({e["id"] for e in entries}) == len(entries)


def test_messages_land_beside_the_tool_calls(real_server):
    client = envcraft.Client(real_server.url)
    with client.create(TASK) as session:
        first = session.add_message(
            "I will list the inbox.",
            thinking="The task is about the to-do list.",
            usage={"prompt_tokens": 120, "completion_tokens": 14},
            model="scripted",
        )
        assert session.call("ls", path="inbox")["ok"] is True
        last = session.add_message(
            content=[{"type": "text", "text": "Done: three emails."}], stop_reason="stop"
        )
        assert first != last
        lines = transcript(real_server.state_dir, session.id)
    assert_v3_chain(lines)
    roles = [(e["message"]["role"], e["message"]["content"][0]["type"]) for e in lines[1:]]
    assert roles == [
        ("user", "text"),
        ("assistant", "thinking"),
        ("assistant", "toolCall"),
        ("toolResult", "text"),
        ("assistant", "text"),
    ], roles
    said = lines[2]
    assert said["id"] == first
    assert said["message"]["content"][1] == {"type": "text", "text": "I will list the inbox."}
    assert said["message"]["usage"] == {"input": 120, "output": 14, "totalTokens": 134}
    assert said["message"]["model"] == "scripted"
    assert lines[5]["message"]["stopReason"] == "stop"
    # The model's messages do not move the clock: the call after the first is still action 0.
    assert lines[3]["timestamp"] == said["timestamp"]


def test_bad_messages_are_structured_400s_naming_the_field(real_server):
    client = envcraft.Client(real_server.url)
    with client.create(TASK) as session:
        with pytest.raises(MissingField):
            session.add_message()
        for fields, named in [
            ({"text": 5}, "text"),
            ({"text": "a", "usage": {"input": -1}}, "usage.input"),
            ({"content": [{"type": "toolCall", "name": "ls"}]}, "content[0]"),
            ({"text": "a", "stop_reason": "finished"}, "stopReason"),
        ]:
            with pytest.raises(BadRequest) as raised:
                session.add_message(**fields)
            assert named in str(raised.value), (fields, raised.value)
        raw = requests.post(
            f"{real_server.url}/v1/sessions/{session.id}/messages",
            json={"text": "a", "colour": "red"},
            timeout=30,
        )
        assert raw.status_code == 400
        assert raw.json()["error"]["category"] == "bad_request"
        assert "colour" in raw.json()["error"]["message"]
        # Nothing of the refused messages was recorded.
        lines = transcript(real_server.state_dir, session.id)
        assert [e["message"]["role"] for e in lines[1:]] == ["user"]
    gone = requests.post(f"{real_server.url}/v1/sessions/{'0' * 16}/messages", json={"text": "x"}, timeout=30)
    assert gone.status_code == 404 and gone.json()["error"]["category"] == "session_not_found"


def test_the_async_client_adds_messages_too(real_server):
    async def run():
        async with envcraft.AsyncClient(real_server.url) as client:
            session = await client.create(TASK)
            try:
                entry = await session.add_message("hello", thinking="hm")
                return session.id, entry
            finally:
                await session.close()

    sid, entry = asyncio.run(run())
    assert entry == "00000002"  # after the prompt


def test_openenv_steps_carry_the_assistant_message(real_server):
    url = real_server.url
    reset = requests.post(f"{url}/reset", json={"task": TASK}, timeout=60).json()
    sid = reset["observation"]["session_id"]
    try:
        said = {"text": "Reading the list.", "usage": {"input": 5, "output": 2}}
        action = {"type": "call_tool", "tool_name": "read", "arguments": {"path": "notes/todo.md"},
                  "assistant_message": said}
        step = requests.post(f"{url}/step", json={"session_id": sid, "action": action}, timeout=60)
        assert step.status_code == 200, step.text
        assert step.json()["observation"]["result"]["ok"] is True
        final = {"type": "verify", "assistant_message": {"text": "All done."}}
        assert requests.post(f"{url}/step", json={"session_id": sid, "action": final}, timeout=60).status_code == 200
        bad = dict(action, assistant_message={"text": ["not", "a", "string"]})
        refused = requests.post(f"{url}/step", json={"session_id": sid, "action": bad}, timeout=60)
        assert refused.status_code == 400
        assert "text" in refused.json()["error"]["message"]
        lines = transcript(real_server.state_dir, sid)
        assert_v3_chain(lines)
        kinds = [(e["message"]["role"], e["message"]["content"][0].get("text", e["message"]["content"][0]["type"]))
                 for e in lines[1:]]
        assert kinds[1] == ("assistant", "Reading the list."), kinds
        assert kinds[2][0] == "assistant" and lines[3]["message"]["content"][0]["type"] == "toolCall"
        assert kinds[4] == ("assistant", "All done."), kinds
        assert len(kinds) == 5, kinds  # the refused step recorded nothing and called nothing
        assert lines[2]["message"]["usage"]["totalTokens"] == 7
    finally:
        requests.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "openenv/session/close",
                                          "params": {"session_id": sid}}, timeout=30)
