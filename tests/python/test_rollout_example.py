"""``clients/python/examples/rollout.py`` end to end: a scripted chat completions endpoint
drives the fake envcraft server to reward 1.0."""

import hashlib
import importlib.util
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from conftest import REPO


def load_example():
    path = REPO / "clients" / "python" / "examples" / "rollout.py"
    spec = importlib.util.spec_from_file_location("rollout_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT = [
    # a malformed call first: the rollout must report it to the model, not crash
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c0", "type": "function", "function": {"name": "write", "arguments": "{not json"}}]},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "write", "arguments": json.dumps({"path": "done.txt", "content": "yes"})}}]},
    {"role": "assistant", "content": "Done."},
    {"role": "assistant", "content": "Goodbye."},
]


def chat_server(seen):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body)
            data = json.dumps({"choices": [{"message": SCRIPT[len(seen) - 1]}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return httpd


def run_example(fake, args):
    """Run the example with `args` against the fake server and a scripted chat endpoint: its
    exit code and the chat requests it made."""
    seen = []
    httpd = chat_server(seen)
    try:
        code = load_example().main(args + [
            "--envcraft-url", fake.url,
            "--base-url", f"http://127.0.0.1:{httpd.server_address[1]}/v1",
            "--model", "test-model",
        ])
    finally:
        httpd.shutdown()
        httpd.server_close()
    return code, seen


def test_rollout_example_reaches_reward_one(fake, capsys):
    code, seen = run_example(fake, ["--task", "example/two-turns"])
    out = capsys.readouterr().out
    assert code == 0 and "reward 1.000 passed True" in out
    assert len(seen) == 4, "two tool rounds, then one answer per prompt"
    first = seen[0]
    assert first["model"] == "test-model" and [t["function"]["name"] for t in first["tools"]] == ["read", "write"]
    assert first["messages"][1] == {"role": "user", "content": "Write yes to done.txt."}
    bad = json.loads(seen[1]["messages"][-1]["content"])
    assert bad["ok"] is False and bad["error"]["category"] == "invalid_argument"
    assert seen[3]["messages"][-1] == {"role": "user", "content": "Now say goodbye."}
    assert fake.sessions == {}, "the session was closed"


def test_rollout_example_runs_an_inline_task_from_a_file_with_a_seed(fake, capsys, tmp_path):
    """``--task @FILE`` sends the file's object as an inline task, ``--seed`` its seed."""
    task = {"env": "example", "turns": [{"prompt": "Write yes to done.txt."}, {"prompt": "Now say goodbye."}],
            "verifier": {"kind": "manifest", "extra": "allow"},
            "expected": {"version": 1, "files": {"done.txt": {"sha256": hashlib.sha256(b"yes").hexdigest()}}}}
    path = tmp_path / "task.json"
    path.write_text(json.dumps(task))
    code, _ = run_example(fake, ["--task", f"@{path}", "--seed", "11"])
    out = capsys.readouterr().out
    assert code == 0 and "reward 1.000 passed True" in out
    assert "example/inline-" in out and "seed 11" in out
    created = [r.body for r in fake.requests if r.path == "/v1/sessions"]
    assert created == [{"task": task, "seed": 11}]
