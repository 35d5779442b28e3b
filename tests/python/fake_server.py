"""A small in-memory stand-in for ``envcraft serve`` speaking the same HTTP contract.

Used by the unit tests of the Python client (no sandbox, no Rust build needed) and, run as a
script (``python fake_server.py serve --listen HOST:PORT``), by the Ray pool test as the
server binary. Its one task ``example/two-turns`` passes when ``done.txt`` holds ``yes``.

Tests steer it through ``FakeServer``: ``token`` (require a bearer token), ``inject`` (answer
the next requests to a path with given errors), ``requests`` (every request seen, with the
client's port: one port per connection), ``accepted`` (connections accepted),
``hang_up_after`` (handle the next requests to a path, then close the connection without an
answer), ``hold`` (hold the answers to a path at a barrier or event), ``close_idle`` (close
every connection waiting for its next request, as a server ending idle keep-alives does).
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Tuple

TASKS = {
    "example/two-turns": ["Write yes to done.txt.", "Now say goodbye."],
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{name} a file",
            "parameters": {"type": "object", "properties": props, "required": list(props)},
        },
    }
    for name, props in (
        ("read", {"path": {"type": "string"}}),
        ("write", {"path": {"type": "string"}, "content": {"type": "string"}}),
    )
]


# The keys of an inline task: task.toml's and the request's own.
INLINE_KEYS = ("env", "prompt", "turns", "base_time", "verifier", "files", "expected", "grader")


@dataclass
class FakeSession:
    task: str
    prompts: List[str]
    files: Dict[str, str] = field(default_factory=dict)
    action_index: int = 0
    turn: int = 0
    seed: Optional[int] = None
    # path -> sha256 the file must have to pass; None: the built-in task's done.txt rule
    expected: Optional[Dict[str, str]] = None


@dataclass
class Seen:
    method: str
    path: str
    headers: Dict[str, str]
    body: Any
    peer: int = 0


class FakeServer:
    def __init__(self, token: Optional[str] = None, max_sessions: int = 64, host: str = "127.0.0.1", last_turn_null: bool = False) -> None:
        # At the last turn the real server answers 409 invalid_transition, as the contract says;
        # ``last_turn_null`` answers {"prompt": null} instead, which breaks it.
        self.last_turn_null = last_turn_null
        self.token = token
        self.max_sessions = max_sessions
        self.sessions: Dict[str, FakeSession] = {}
        self.requests: List[Seen] = []
        # path suffix -> errors to answer, in order: (status, category, retry_after or None)
        self.injected: Dict[str, List[Tuple[int, str, Optional[str]]]] = {}
        # path suffix -> requests to handle and then answer by closing the connection
        self.hang_ups: Dict[str, int] = {}
        # path suffix -> called (in the handler's thread) before the request is handled
        self.holds: Dict[str, Any] = {}
        self.accepted = 0
        self.open_connections: Dict[int, Any] = {}  # peer port -> socket, while open
        self.idle_connections: set = set()  # peer ports waiting for their next request
        self.changed = threading.Condition()
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer((host, 0), _handler_for(self))
        self.httpd.daemon_threads = True
        host, port = self.httpd.server_address[:2]
        self.url = f"http://{host}:{port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def start(self) -> "FakeServer":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def hang_up_after(self, suffix: str, times: int = 1) -> None:
        with self.lock:
            self.hang_ups[suffix] = self.hang_ups.get(suffix, 0) + times

    def hold(self, suffix: str, wait: Any) -> None:
        """``wait()`` runs before each request to ``suffix`` is handled (a barrier's or an
        event's ``wait``, bounded by the caller)."""
        self.holds[suffix] = wait

    def peers(self, path: Optional[str] = None) -> List[int]:
        """The client port of every request (to ``path``), in order."""
        return [r.peer for r in self.requests if path is None or r.path == path]

    def close_idle(self, bound: float = 10.0) -> int:
        """Closes every connection waiting for its next request and waits (at most ``bound``
        seconds) until their handlers are gone; returns how many it closed."""
        import socket

        with self.changed:
            # A handler marks its connection idle just after writing an answer, maybe after
            # the client read it: wait for every open connection to be idle.
            if not self.changed.wait_for(lambda: set(self.open_connections) <= self.idle_connections, bound):
                raise TimeoutError("connections still busy")
            idle = [self.open_connections[p] for p in self.idle_connections if p in self.open_connections]
            ports = set(self.idle_connections)
            for sock in idle:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            if not self.changed.wait_for(lambda: not (ports & set(self.open_connections)), bound):
                raise TimeoutError("idle connections still open")
        return len(idle)

    def inject(self, suffix: str, status: int, category: str, retry_after: Optional[str] = None, times: int = 1) -> None:
        with self.lock:
            self.injected.setdefault(suffix, []).extend([(status, category, retry_after)] * times)

    # -- the contract ---------------------------------------------------------------------

    def handle(self, method: str, path: str, headers: Dict[str, str], raw: bytes, peer: int = 0) -> Tuple[int, Dict[str, str], Any]:
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                return _err(400, "bad_request", "body is not JSON")
        for suffix, wait in list(self.holds.items()):
            if path.endswith(suffix):
                wait()
        with self.lock:
            self.requests.append(Seen(method, path, headers, body, peer))
            for suffix, queue in self.injected.items():
                if path.endswith(suffix) and queue:
                    status, category, retry_after = queue.pop(0)
                    extra = {"Retry-After": retry_after} if retry_after is not None else {}
                    return status, extra, {"error": {"category": category, "message": f"injected {category}"}}
            if path == "/healthz" and method == "GET":
                return 200, {}, {"status": "ok"}
            if self.token is not None and headers.get("authorization") != f"Bearer {self.token}":
                return _err(401, "unauthorized", "missing or wrong bearer token")
            return self._route(method, path, body)

    def _route(self, method: str, path: str, body: Any) -> Tuple[int, Dict[str, str], Any]:
        if path == "/readyz" and method == "GET":
            return 200, {}, {"status": "ready", "sessions": len(self.sessions), "max_sessions": self.max_sessions}
        if path == "/v1/tasks" and method == "GET":
            return 200, {}, {"tasks": [{"task": t, "env": t.split("/")[0], "id": t.split("/")[1], "prompt": p[0]} for t, p in TASKS.items()]}
        if path == "/v1/sessions" and method == "POST":
            if not isinstance(body, dict) or body.get("task") is None:
                return _err(400, "missing_field", "missing field `task`")
            unknown = [k for k in body if k not in ("task", "base_time", "seed")]
            if unknown:
                return _err(400, "bad_request", f"unknown field `{unknown[0]}`: expected `task`, `base_time`, `seed`")
            seed = body.get("seed")
            if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64):
                return _err(400, "bad_request", "field `seed` must be an integer from 0 to 2^64-1")
            task = body["task"]
            if isinstance(task, dict):
                made = _inline(task)
                if not isinstance(made, FakeSession):
                    return made
                session = made
            elif isinstance(task, str):
                if task not in TASKS:
                    return _err(404, "task_not_found", f"no task {task}")
                session = FakeSession(task, TASKS[task])
            else:
                return _err(400, "bad_request", "field `task` must be a task name, ENV/ID (GET /v1/tasks lists them), or an inline task object")
            if len(self.sessions) >= self.max_sessions:
                return 429, {"Retry-After": "1"}, {"error": {"category": "too_many_sessions", "message": "full"}}
            session.seed = seed
            sid = uuid.uuid4().hex[:12]
            self.sessions[sid] = session
            return 201, {}, {"session_id": sid, "task": session.task, "seed": seed, "prompt": session.prompts[0], "docs": "# docs\n", "tools": TOOLS, "action_index": 0}
        parts = path.split("/")
        if len(parts) < 4 or parts[1:3] != ["v1", "sessions"]:
            return _err(404, "bad_request", f"no route {path}")
        sid, action = parts[3], "/".join(parts[4:])
        session = self.sessions.get(sid)
        if session is None:
            return _err(404, "session_not_found", f"no session {sid}")
        if method == "DELETE" and action == "":
            del self.sessions[sid]
            return 200, {}, {"closed": sid}
        if method == "POST" and action == "call":
            if not isinstance(body, dict) or "tool" not in body:
                return _err(400, "missing_field", "missing field `tool`")
            session.action_index += 1
            args = body.get("args") or {}
            if body["tool"] == "write":
                session.files[args["path"]] = args["content"]
                result: Dict[str, Any] = {"ok": True, "bytes": len(args["content"]), "created": True}
            elif body["tool"] == "read" and args.get("path") in session.files:
                result = {"ok": True, "content": session.files[args["path"]]}
            else:
                result = {"ok": False, "error": {"category": "not_found", "message": "no such file"}}
            result["action_index"] = session.action_index
            return 200, {}, {"action_index": session.action_index, "result": result}
        if method == "POST" and action == "next_turn":
            prompts = session.prompts
            if session.turn + 1 >= len(prompts):
                if self.last_turn_null:
                    return 200, {}, {"prompt": None, "turn": session.turn}
                return _err(409, "invalid_transition", "the session is at its last turn")
            session.turn += 1
            return 200, {}, {"prompt": prompts[session.turn], "turn": session.turn}
        if method == "POST" and action == "fork":
            child = uuid.uuid4().hex[:12]
            self.sessions[child] = FakeSession(
                session.task, session.prompts, dict(session.files), session.action_index, session.turn, session.seed, session.expected
            )
            return 201, {}, {"session_id": child}
        if method == "POST" and action == "verify":
            if session.expected is None:
                ok = session.files.get("done.txt") == "yes"
                checks = [{"rule": "files", "path": "done.txt", "passed": ok}]
            else:
                checks = [
                    {"rule": "files", "path": p, "passed": p in session.files and hashlib.sha256(session.files[p].encode()).hexdigest() == sha}
                    for p, sha in sorted(session.expected.items())
                ]
                ok = all(c["passed"] for c in checks)
            return 200, {}, {"reward": 1.0 if ok else 0.0, "passed": ok, "checks": checks}
        if method == "GET" and action == "diff":
            return 200, {}, {"added": sorted(session.files), "modified": [], "deleted": []}
        return _err(404, "bad_request", f"no route {method} {path}")


def _inline(task: Dict[str, Any]) -> Any:
    """The session of inline ``task``, or the error answer the real server gives for it (its
    categories and the field it names; the messages shortened)."""
    env = task.get("env")
    if env is None:
        return _err(400, "missing_field", "missing field `task.env`: the environment the inline task runs in")
    if not isinstance(env, str) or env not in {t.split("/")[0] for t in TASKS}:
        return _err(400, "bad_request", f"field `task.env`: no environment `{env}` here")
    unknown = [k for k in task if k not in INLINE_KEYS]
    if unknown:
        return _err(400, "bad_request", f"field `task.{unknown[0]}`: unknown field")
    if ("prompt" in task) == ("turns" in task):
        return _err(400, "bad_request", "field `task.prompt`: expected `prompt` or `turns`, one of them")
    turns = task.get("turns")
    if "turns" in task and not (isinstance(turns, list) and all(isinstance(t, dict) for t in turns)):
        return _err(400, "bad_request", "field `task.turns` must be an array of tables, each with a `prompt`")
    prompts = [task["prompt"]] if "prompt" in task else [t.get("prompt") for t in turns]
    if not prompts or not all(isinstance(p, str) and p for p in prompts):
        return _err(400, "bad_request", "field `task.turns.prompt` must be a non-empty string")
    files = task.get("files", {})
    if not isinstance(files, dict):
        return _err(400, "bad_request", "field `task.files` must be an object of relative path → file content")
    for name, text in files.items():
        if not name or name.startswith("/") or ".." in name.split("/"):
            return _err(400, "bad_request", f"field `task.files`: `{name}` is not a relative path inside the workspace")
        if not isinstance(text, str):
            return _err(400, "bad_request", f"field `task.files`: the content of `{name}` must be a string")
    expected: Optional[Dict[str, str]] = None
    if "expected" in task:
        exp = task["expected"]
        if not isinstance(exp, dict) or not isinstance(exp.get("files", {}), dict) or set(exp) - {"version", "files", "absent", "unchanged", "ignore", "extra", "all_or_nothing"}:
            return _err(400, "bad_request", "field `task.expected` is not an expected.json")
        expected = {p: f.get("sha256", "") for p, f in exp.get("files", {}).items()}
    digest = hashlib.sha256(json.dumps(task, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return FakeSession(f"{env}/inline-{digest[:16]}", prompts, dict(files), expected=expected)


def _err(status: int, category: str, message: str) -> Tuple[int, Dict[str, str], Any]:
    return status, {}, {"error": {"category": category, "message": message}}


def _handler_for(server: FakeServer) -> type:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            with server.changed:
                server.accepted += 1
                server.open_connections[self.client_address[1]] = self.connection
                server.idle_connections.add(self.client_address[1])
                server.changed.notify_all()

        def finish(self) -> None:
            try:
                super().finish()
            finally:
                with server.changed:
                    server.open_connections.pop(self.client_address[1], None)
                    server.idle_connections.discard(self.client_address[1])
                    server.changed.notify_all()

        def handle_one_request(self) -> None:
            with server.changed:
                server.idle_connections.add(self.client_address[1])
                server.changed.notify_all()
            super().handle_one_request()

        def parse_request(self) -> bool:
            with server.changed:
                server.idle_connections.discard(self.client_address[1])
            return super().parse_request()

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, extra, obj = server.handle(self.command, self.path, headers, raw, self.client_address[1])
            with server.lock:
                for suffix, left in server.hang_ups.items():
                    if self.path.endswith(suffix) and left:
                        server.hang_ups[suffix] = left - 1
                        self.close_connection = True
                        return
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in extra.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = _any

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def main(argv: List[str]) -> int:
    # `fake_server.py serve --listen HOST:PORT [...]`: the shape of `envcraft serve`; the
    # listen address is ignored beyond its host (the port is always picked by the kernel).
    listen = argv[argv.index("--listen") + 1] if "--listen" in argv else "127.0.0.1:0"
    server = FakeServer(host=listen.rsplit(":", 1)[0]).start()
    print(f"listening on {server.url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
