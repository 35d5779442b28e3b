"""Other projects' own readers of OpenClaw transcripts accept envcraft's, against the real
``envcraft serve`` over PinchBench fixture tasks (``envcraft import pinchbench``):

- Harbor's ``openclaw_session_jsonl_to_atif_steps`` (``harbor.agents.installed.openclaw``),
  run in its own interpreter (``target/harbor-venv``, Python 3.12, through ``harbor_atif.py``),
  turns a session's transcript into ATIF steps carrying the prompt, the model's messages
  (``add_message``), each tool call with its arguments and each result, in order.
- PinchBench's own ``grade(transcript, workspace_path)``, exec'd here from the task's ``.md``
  on the session's transcript and workspace, gives the reward the session's verify gave; a
  session that does nothing scores as the grader scores an empty transcript.

Skip loudly: without the fixtures (``../shared/fixtures/pinchbench``) or the Harbor venv, the
tests skip naming why, or fail when ``ENVCRAFT_TEST_REQUIRE=all``.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest

import envcraft
from conftest import HERE, REPO, RealServer, envcraft_binary, require, serve_available

FIXTURES = REPO.parent / "shared" / "fixtures" / "pinchbench"
HARBOR_PYTHON = REPO / "target" / "harbor-venv" / "bin" / "python"
HARBOR_SCRIPT = HERE / "harbor_atif.py"
MEMORY = "task_08_memory"
SANITY = "task_00_sanity"
ANSWER = "The beta release deadline is June 1, 2024.\n"


def task_name(task_id: str) -> str:
    """The server's name of an imported PinchBench task: ``pinchbench-ID/ID``."""
    return f"pinchbench-{task_id}/{task_id}"


class ImportedServer(RealServer):
    """``envcraft serve`` over the PinchBench fixtures, imported first with ``envcraft import
    pinchbench`` into a temporary directory (``envs``: one environment per task)."""

    def __init__(self, binary: Path) -> None:
        self.imported = tempfile.mkdtemp(prefix="envcraft-py-pinchbench-")
        self.envs = Path(self.imported) / "out"
        done = subprocess.run(
            [str(binary), "import", "pinchbench", str(FIXTURES), str(self.envs)],
            capture_output=True, text=True, timeout=60,
        )
        assert done.returncode == 0, f"envcraft import pinchbench failed:\n{done.stdout}\n{done.stderr}"
        self.state_dir = tempfile.mkdtemp(prefix="envcraft-py-state-")
        argv = [
            str(binary), "serve", "--listen", "127.0.0.1:0",
            "--state-dir", self.state_dir,
            "--workspaces", str(self.envs),
            "--skills", str(REPO / "skills"),
        ]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.url = self._wait_listening(argv, bound=60.0)

    def stop(self) -> None:
        super().stop()
        shutil.rmtree(self.imported, ignore_errors=True)

    def transcript_text(self, session_id: str) -> str:
        """The session's transcript as it is now (the session's directory goes when it closes)."""
        return (Path(self.state_dir) / "sessions" / session_id / "transcript.jsonl").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def server():
    require(FIXTURES.is_dir(), f"{FIXTURES} (the PinchBench fixture tasks) is missing")
    binary = envcraft_binary()
    why = serve_available(binary)
    require(why is None, why or "")
    assert binary is not None
    s = ImportedServer(binary)
    yield s
    s.stop()


def parse_jsonl(text: str) -> List[Dict[str, Any]]:
    """A transcript as PinchBench's harness hands it to ``grade()``: a list of its lines' JSON."""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def prompt_of(client: envcraft.Client, task: str) -> str:
    [found] = [t["prompt"] for t in client.tasks() if t["task"] == task]
    return found


# -- Harbor -----------------------------------------------------------------------------------


def require_harbor() -> None:
    require(
        HARBOR_PYTHON.exists(),
        f"no Harbor venv at {HARBOR_PYTHON.parent.parent}: Harbor's OpenClaw transcript parser is NOT "
        "being checked (make it: `make target/harbor-venv/.ready`, or python3.12 -m venv "
        "target/harbor-venv && target/harbor-venv/bin/pip install 'harbor>=0.26,<0.27')",
    )


def harbor_steps(transcript: Path) -> List[Dict[str, Any]]:
    """Harbor's ATIF steps of ``transcript``, from Harbor's own parser in its own interpreter."""
    done = subprocess.run(
        [str(HARBOR_PYTHON), str(HARBOR_SCRIPT), str(transcript)],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, f"Harbor's parser failed on envcraft's transcript:\n{done.stderr[-4000:]}"
    parsed = json.loads(done.stdout)
    assert parsed["steps"] is not None, f"Harbor {parsed['harbor']} found no conversation in:\n{transcript.read_text()}"
    return parsed["steps"]


def test_harbors_openclaw_parser_reads_the_calls_their_results_and_the_models_messages(server, tmp_path):
    require_harbor()
    client = envcraft.Client(server.url)
    task = task_name(MEMORY)
    with client.create(task) as session:
        session.add_message(
            "I will read the notes first.",
            thinking="The deadline must be in notes.md.",
            usage={"prompt_tokens": 120, "completion_tokens": 14},
        )
        read = session.call("read", path="notes.md")
        missing = session.call("read", path="no-such-notes.md")
        wrote = session.call("write", path="answer.txt", content=ANSWER)
        final = "The beta release deadline is June 1, 2024; I saved it to answer.txt."
        session.add_message(final, stop_reason="stop")
        text = server.transcript_text(session.id)
    assert read["ok"] is True and "June 1, 2024" in read["content"], read
    assert missing["ok"] is False, missing
    assert wrote["ok"] is True, wrote
    path = tmp_path / "openclaw.session.jsonl"
    path.write_text(text, encoding="utf-8")
    entries = parse_jsonl(text)[1:]

    steps = harbor_steps(path)

    assert [s["step_id"] for s in steps] == list(range(1, 7)), steps
    # The prompt, the model's first message, one step per tool call (envcraft records each call
    # as an assistant message of its own, holding no text), then the model's final reply.
    no_text = "(no assistant text)"  # Harbor's stand-in for an assistant message without text
    assert [(s["source"], s["message"]) for s in steps] == [
        ("user", prompt_of(client, task)),
        ("agent", "I will read the notes first."),
        ("agent", no_text),
        ("agent", no_text),
        ("agent", no_text),
        ("agent", final),
    ], steps
    calls = [
        [(c["tool_call_id"], c["function_name"], c["arguments"]) for c in s.get("tool_calls", [])]
        for s in steps
    ]
    assert calls == [
        [],
        [],
        [("call_0", "read", {"path": "notes.md"})],
        [("call_1", "read", {"path": "no-such-notes.md"})],
        [("call_2", "write", {"path": "answer.txt", "content": ANSWER})],
        [],
    ], calls
    # Each call's observation is its result, whole (the failed call's error too).
    observed = [
        [(r["source_call_id"], json.loads(r["content"])) for r in s.get("observation", {}).get("results", [])]
        for s in steps
    ]
    assert observed == [[], [], [("call_0", read)], [("call_1", missing)], [("call_2", wrote)], []], observed
    assert steps[1]["metrics"] == {"prompt_tokens": 120, "completion_tokens": 14}, steps[1]
    # The thinking is in envcraft's transcript, but Harbor's parser maps only text blocks: no
    # step carries reasoning_content (Harbor's loss, not envcraft's).
    assert entries[1]["message"]["content"][0] == {"type": "thinking", "thinking": "The deadline must be in notes.md."}
    assert all("reasoning_content" not in s for s in steps), steps
    # The timestamps are the transcript's (the session clock's), valid ISO 8601 for ATIF.
    assert [s["timestamp"] for s in steps] == [e["timestamp"] for e in entries if e["message"]["role"] != "toolResult"]
    assert {s.get("model_name") for s in steps[1:]} == {"envcraft-test"}


# -- PinchBench -------------------------------------------------------------------------------


def pinchbench_grade(task_id: str) -> Callable[[list, str], Dict[str, Any]]:
    """The task's own ``grade()``: its ``.md``'s first python block under ``## Automated Checks``,
    exec'd in this process as PinchBench's harness does."""
    md = (FIXTURES / f"{task_id}.md").read_text(encoding="utf-8")
    section = md.split("## Automated Checks", 1)[1]
    found = re.search(r"```python\s*(.*?)\s*```", section, re.DOTALL)
    assert found, f"{task_id}.md has no python block under ## Automated Checks"
    namespace: Dict[str, Any] = {}
    exec(found.group(1), namespace)
    return namespace["grade"]


def pinchbench_score(scores: Dict[str, Any]) -> float:
    """The task score PinchBench gives a ``grade()`` dict: the mean of its numbers."""
    values = [float(v) for v in scores.values() if isinstance(v, (int, float))]
    return sum(values) / len(values) if values else 0.0


def session_workspace(server: ImportedServer, session: envcraft.Session, task_id: str, dest: Path) -> Path:
    """The session's workspace as it is now, in ``dest``: the task's files, with what the
    session added or modified read back through the session and what it deleted removed."""
    shutil.copytree(server.envs / f"pinchbench-{task_id}" / "files", dest)
    changes = session.diff()
    assert not changes.get("incomplete"), changes
    for rel in changes["added"] + changes["modified"]:
        got = session.call("read", path=rel)
        assert got["ok"] is True and got["truncated"] is False and got["lines"] == got["total_lines"], got
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        (dest / rel).write_text(got["content"], encoding="utf-8")
    for rel in changes["deleted"]:
        (dest / rel).unlink()
    return dest


# (task, the calls a correct agent makes, its final reply, grade()'s dict for that work, the
# score before the reply).
SOLVED = [
    # Only the reply can earn this one: the session scores 0 until add_message gives it.
    (SANITY, [], "Hello, I'm ready!", {"agent_responded": 1.0}, 0.0),
    (
        MEMORY,
        [("read", {"path": "notes.md"}), ("write", {"path": "answer.txt", "content": ANSWER})],
        "The beta release deadline is June 1, 2024; I saved the answer to answer.txt.",
        # read_notes: PinchBench's grader looks for a tool named read_file/readFile with
        # `params.files`; OpenClaw's (and envcraft's) read tool is `read` with `arguments.path`,
        # so no transcript earns it. Directly and in the sandbox alike.
        {"file_created": 1.0, "correct_date": 1.0, "clear_answer": 1.0, "read_notes": 0.0, "no_hallucination": 1.0},
        0.8,
    ),
]


@pytest.mark.parametrize("task_id,calls,reply,expected,unreplied", SOLVED, ids=[c[0] for c in SOLVED])
def test_a_solved_session_scores_what_pinchbenchs_own_grader_gives_its_transcript(
    server, tmp_path, task_id, calls, reply, expected, unreplied
):
    client = envcraft.Client(server.url)
    with client.create(task_name(task_id)) as session:
        for tool, args in calls:
            assert session.call(tool, **args)["ok"] is True, (tool, args)
        before_reply = session.verify()
        unreplied_transcript = parse_jsonl(server.transcript_text(session.id))
        session.add_message(reply, thinking="Answering as asked.", stop_reason="stop")
        before = server.transcript_text(session.id)
        verdict = session.verify()
        text = server.transcript_text(session.id)
        assert text == before, "verify changed the transcript the grader was given"
        workspace = session_workspace(server, session, task_id, tmp_path / "workspace")
    transcript = parse_jsonl(text)
    replies = [
        block["text"]
        for e in transcript[1:]
        if e["message"]["role"] == "assistant"
        for block in e["message"]["content"]
        if block["type"] == "text"
    ]
    assert replies == [reply], transcript

    grade = pinchbench_grade(task_id)

    scores = grade(transcript, str(workspace))

    assert scores == expected, scores
    assert verdict.reward == pinchbench_score(scores), (verdict, scores)
    # The same before the reply: the sandbox's grader read the transcript of that moment.
    assert before_reply.reward == pinchbench_score(grade(unreplied_transcript, str(workspace))) == unreplied


@pytest.mark.parametrize("task_id", [SANITY, MEMORY])
def test_a_session_that_does_nothing_scores_as_the_grader_scores_an_empty_transcript(server, tmp_path, task_id):
    client = envcraft.Client(server.url)
    with client.create(task_name(task_id)) as session:
        verdict = session.verify()
        transcript = parse_jsonl(server.transcript_text(session.id))
        workspace = session_workspace(server, session, task_id, tmp_path / "workspace")
    assert [e["type"] for e in transcript] == ["session", "message"], transcript
    assert transcript[1]["message"]["role"] == "user"
    grade = pinchbench_grade(task_id)

    empty = pinchbench_score(grade([], str(workspace)))

    assert empty == 0.0
    assert verdict.reward == empty, verdict
    # The prompt alone earns nothing either.
    assert pinchbench_score(grade(transcript, str(workspace))) == empty
