"""The LLM judge (issue 23) against a local stub of the OpenAI chat-completions API: PinchBench's
prompt and answer shapes, temperature 0 and the seed, retries on 429/5xx/timeouts and unreadable
answers, the cache keyed by the request, and the rule that a judge that did not run gives no
reward (``null``, with why), never a 0.

The task is a PinchBench ``hybrid`` task file run by ``envcraft run`` as it is (imported on the
fly): PinchBench's weights (0.4 automated, 0.6 judge) combine the automated ``grade()`` and the
judge's total, as its ``_combine_grades`` does.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, List

import pytest

import envcraft
from conftest import RealServer, envcraft_binary as find_binary, require, serve_available

TASK_MD = """---
id: task_90_judged_note
name: Judged note
category: writing
grading_type: hybrid
timeout_seconds: 60
grading_weights:
  automated: 0.4
  llm_judge: 0.6
workspace_files: []
---

## Prompt

Write a short thank-you note to the team in note.txt.

## Expected Behavior

The agent writes note.txt with a friendly, specific thank-you.

## Grading Criteria

- [ ] note.txt exists
- [ ] The note is friendly

## Automated Checks

```python
def grade(transcript, workspace_path):
    from pathlib import Path
    return {"note_exists": 1.0 if (Path(workspace_path) / "note.txt").exists() else 0.0}
```

## LLM Judge Rubric

### Criterion 1: Warmth (Weight: 100%)

Score 1.0 for a warm, specific note.
"""

GOOD = {"scores": {"warmth": 0.5}, "total": 0.5, "notes": "friendly but generic"}


class StubJudge:
    """``POST /v1/chat/completions`` answering from a script of steps, each one of
    ``("answer", text)``, ``("status", code, retry_after)``, ``("sleep", seconds, text)``; the
    last step repeats. Every request body is recorded."""

    def __init__(self, script: List[tuple]) -> None:
        self.script = list(script)
        self.requests: List[Dict[str, Any]] = []
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with owner.lock:
                    owner.requests.append({"path": self.path, "body": json.loads(body), "auth": self.headers.get("Authorization")})
                    step = owner.script[min(len(owner.requests), len(owner.script)) - 1]
                if step[0] == "sleep":
                    time.sleep(step[1])
                    step = ("answer", step[2])
                if step[0] == "status":
                    payload = b'{"error": {"message": "slow down"}}'
                    self.send_response(step[1])
                    if step[2] is not None:
                        self.send_header("Retry-After", str(step[2]))
                else:
                    payload = json.dumps({"id": "x", "object": "chat.completion", "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": step[1]}, "finish_reason": "stop"}]}).encode()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except OSError:
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def envcraft_binary() -> Path:
    binary = find_binary()
    require(binary is not None and binary.exists(), "no envcraft binary (set ENVCRAFT_BIN or build)")
    return binary


@pytest.fixture
def task_file(tmp_path: Path) -> Path:
    path = tmp_path / "task_90_judged_note.md"
    path.write_text(TASK_MD)
    return path


@pytest.fixture
def actions(tmp_path: Path) -> Path:
    path = tmp_path / "write-note.jsonl"
    path.write_text(json.dumps({"tool": "write", "args": {"path": "note.txt", "content": "Thank you all for the launch!\n"}}) + "\n")
    return path


def run(binary: Path, task: Path, actions: Path, state: Path, *judge: str) -> Dict[str, Any]:
    argv = [str(binary), "run", str(task), "--actions", str(actions), "--json", "--state-dir", str(state), *judge]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def judge_check(report: Dict[str, Any]) -> Dict[str, Any]:
    return next(c for c in report["checks"] if c["kind"] == "judge" and c["path"] == "rubric.md")


def flags(stub: StubJudge, *more: str) -> List[str]:
    return ["--judge-url", stub.url, "--judge-model", "judge-m", *more]


def test_a_hybrid_task_is_judged_as_pinchbench_judges_it_and_cached(envcraft_binary, task_file, actions, tmp_path):
    stub = StubJudge([("answer", json.dumps(GOOD))])
    try:
        report = run(envcraft_binary, task_file, actions, tmp_path / "state", *flags(stub))
        assert report["reward"] == pytest.approx(0.4 * 1.0 + 0.6 * 0.5), report
        assert report.get("not_run") in (None, []), report
        check = judge_check(report)
        assert check["actual"].startswith("0.500: friendly but generic"), check
        assert any(c["name"] == "judge warmth" and c["actual"] == "0.500" for c in report["checks"])
        # What was asked: PinchBench's prompt, at temperature 0 with the seed.
        assert len(stub.requests) == 1
        request = stub.requests[0]
        assert request["path"] == "/v1/chat/completions"
        body = request["body"]
        assert (body["model"], body["temperature"], body["seed"]) == ("judge-m", 0, 0)
        prompt = body["messages"][0]["content"]
        assert body["messages"][0]["role"] == "user"
        assert prompt.startswith("You are a grading function.")
        assert "## Task\nWrite a short thank-you note to the team in note.txt.\n\n## Expected Behavior\nThe agent writes note.txt" in prompt
        assert 'Tool: write({"content": "Thank you all for the launch!\\n", "path": "note.txt"})' in prompt
        assert "## Grading Rubric\n### Criterion 1: Warmth (Weight: 100%)" in prompt
        # Verifying the same run again asks nothing: the cached answer, the same reward.
        again = run(envcraft_binary, task_file, actions, tmp_path / "state", *flags(stub))
        assert again["reward"] == report["reward"]
        assert len(stub.requests) == 1
        assert judge_check(again)["actual"].endswith("(cached answer)")
        # Unless asked not to; and a key file becomes the bearer token.
        key = tmp_path / "key"
        key.write_text("sk-test\n")
        run(envcraft_binary, task_file, actions, tmp_path / "state", *flags(stub, "--judge-no-cache", "--judge-key-file", str(key)))
        assert len(stub.requests) == 2
        assert stub.requests[1]["auth"] == "Bearer sk-test"
    finally:
        stub.close()


def test_429s_and_5xx_are_retried_honouring_retry_after(envcraft_binary, task_file, actions, tmp_path):
    stub = StubJudge([("status", 429, 0), ("status", 503, None), ("answer", json.dumps(GOOD))])
    try:
        report = run(envcraft_binary, task_file, actions, tmp_path / "state", *flags(stub))
        assert report["reward"] == pytest.approx(0.7), report
        assert len(stub.requests) == 3
    finally:
        stub.close()


@pytest.mark.parametrize(
    "script, attempts, says",
    [
        ([("answer", "What a lovely note!")], 2, "could not be read as a score"),
        ([("answer", '{"total": 7}')], 2, "outside [0, 1]"),
        ([("status", 500, 0)], 2, "could not be reached after 2 attempt(s): HTTP 500"),
        ([("status", 400, None)], 1, "refused the request with HTTP 400"),
        ([("sleep", 4, json.dumps(GOOD))], 2, "could not be reached after 2 attempt(s)"),
    ],
    ids=["prose", "out-of-range", "server-error", "refused", "timeout"],
)
def test_a_judge_that_gives_no_score_leaves_no_reward_never_a_zero(envcraft_binary, task_file, actions, tmp_path, script, attempts, says):
    stub = StubJudge(script)
    try:
        report = run(envcraft_binary, task_file, actions, tmp_path / "state", *flags(stub, "--judge-attempts", "2", "--judge-timeout", "1"))
        assert report["reward"] is None, report
        assert report["not_run"] == ["judge"]
        assert report["partial_reward"] == pytest.approx(1.0), report
        assert report["passed"] is False
        check = judge_check(report)
        assert check["actual"].startswith("not run: ") and says in check["actual"], check
        assert len(stub.requests) == attempts
        # Nothing unreadable is cached: the next verify asks again.
        run(envcraft_binary, task_file, actions, tmp_path / "state", *flags(stub, "--judge-attempts", "1", "--judge-timeout", "1"))
        assert len(stub.requests) == attempts + 1
    finally:
        stub.close()


def test_without_an_endpoint_the_judge_is_not_run_and_suite_leaves_it_out_of_the_mean(envcraft_binary, task_file, actions, tmp_path):
    report = run(envcraft_binary, task_file, actions, tmp_path / "state")
    assert report["reward"] is None and report["not_run"] == ["judge"], report
    assert "no judge endpoint is configured" in judge_check(report)["actual"]
    done = subprocess.run([str(envcraft_binary), "run", str(task_file), "--actions", str(actions), "--state-dir", str(tmp_path / "state")],
                          capture_output=True, text=True, timeout=180)
    assert "not scored (judge not run" in done.stdout, done.stdout
    # A model without a URL is a usage error naming both.
    bad = subprocess.run([str(envcraft_binary), "run", str(task_file), "--actions", str(actions), "--judge-model", "m"], capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "--judge-url" in bad.stderr, bad.stderr


def test_a_server_session_is_judged_with_the_servers_endpoint(envcraft_binary):
    why = serve_available(envcraft_binary)
    require(why is None, why or "")
    stub = StubJudge([("answer", '```json\n{"score": 0.8, "justification": "clear"}\n```')])
    server = RealServer(envcraft_binary, ["--judge-url", stub.url, "--judge-model", "judge-m"])
    task = {
        "env": "example",
        "prompt": "Summarize the inbox in summary.md.",
        "verifier": {"kind": "judge", "judge": {"rubric": "rubric.md", "files": ["summary.md"]}},
        "judge": {"rubric.md": "- The summary names every sender"},
    }
    try:
        with envcraft.Client(server.url) as client, client.create(task) as s:
            s.call("write", path="summary.md", content="Mail from Ada and Bob.\n")
            verdict = s.verify()
            assert verdict.scored and verdict.reward == pytest.approx(0.8), verdict
            prompt = stub.requests[0]["body"]["messages"][0]["content"]
            assert "## Workspace Files (final state)\n### summary.md\nMail from Ada and Bob.\n" in prompt
            assert "Tool: write(" in prompt
    finally:
        server.stop()
        stub.close()


@pytest.mark.parametrize("scores, kept", [((3, 3, 2), True), ((3, 2, 3), False)], ids=["kept", "not-kept"])
def test_audit_adds_envcrafts_rubric_inspection_with_the_scores(envcraft_binary, tmp_path, scores, kept):
    answer = dict(zip(["task_solvability", "validation_integrity", "data_consistency"], scores), notes="checked")
    stub = StubJudge([("answer", json.dumps(answer))])
    task = Path(__file__).resolve().parents[2] / "workspaces" / "example" / "tasks" / "extract-todos"
    try:
        done = subprocess.run([str(envcraft_binary), "audit", str(task), "--json", "--state-dir", str(tmp_path / "state"),
                               "--skills", str(task.parents[3] / "skills"), *flags(stub)],
                              capture_output=True, text=True, timeout=300)
        report = json.loads(done.stdout)
        audited = report["tasks"][0]
        rubric = next(c for c in audited["checks"] if c["name"] == "rubric")
        assert rubric["passed"] is kept, rubric
        assert rubric["scores"] == {**dict(zip(["task_solvability", "validation_integrity", "data_consistency"], scores)), "kept": kept, "notes": "checked"}
        others = [c for c in audited["checks"] if c["name"] != "rubric"]
        assert len(others) == 6 and all(c["passed"] for c in others), others
        assert audited["passed"] is kept and (done.returncode == 0) is kept, done.stderr
        assert "rubric" in report["summary"]["check_pass_rates"], report["summary"]
        prompt = stub.requests[0]["body"]["messages"][0]["content"]
        assert "## Prompt (turn 1)" in prompt and "## Verifier" in prompt and "## Reference solution" in prompt, prompt
    finally:
        stub.close()


def test_a_servers_judge_ends_before_the_requests_deadline(envcraft_binary):
    why = serve_available(envcraft_binary)
    require(why is None, why or "")
    # --request-timeout 36 leaves the judge 6 s: the first attempt (4 s), a pause, a second
    # cut short; not the 5 x 4 s the flags would allow.
    stub = StubJudge([("sleep", 5, json.dumps(GOOD))])
    server = RealServer(envcraft_binary, ["--judge-url", stub.url, "--judge-model", "m", "--judge-timeout", "4",
                                          "--judge-attempts", "5", "--request-timeout", "36"])
    task = {"env": "example", "prompt": "p", "verifier": {"kind": "judge", "judge": {"rubric": "rubric.md"}},
            "judge": {"rubric.md": "- anything"}}
    try:
        with envcraft.Client(server.url) as client, client.create(task) as s:
            started = time.monotonic()
            verdict = s.verify()
            took = time.monotonic() - started
            assert verdict.reward is None and verdict.not_run == ["judge"], verdict
            assert took < 12, took
            assert len(stub.requests) == 2, stub.requests
    finally:
        server.stop()
        stub.close()


def test_a_verdict_without_a_score_refuses_to_be_a_number():
    verdict = envcraft.Verdict.from_json({"reward": None, "passed": False, "not_run": ["judge"], "partial_reward": 1.0,
                                          "checks": [{"kind": "judge", "actual": "not run: no judge endpoint"}]})
    assert not verdict.scored and verdict.partial_reward == 1.0
    with pytest.raises(envcraft.NotScored, match="judge not run .*no judge endpoint"):
        verdict.score()
    with pytest.raises(envcraft.ProtocolError):
        envcraft.Verdict.from_json({"reward": None, "passed": False})
    assert envcraft.Verdict.from_json({"reward": 0.5, "passed": False}).score() == 0.5
