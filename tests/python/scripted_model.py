"""A scripted OpenAI-compatible model server for tests: no weights, a predetermined trajectory.

`ScriptedModel(script, stream=...)` serves `POST /v1/chat/completions` (and `GET /v1/models`) on
127.0.0.1. The script is a list of replies; the reply given to a request is chosen by how many
assistant messages the request's conversation already holds, so a retried request gets the same
answer and one conversation runs through the script in order across turns. A reply is
`{"tool_calls": [{"name": ..., "arguments": {...}}, ...]}` or `{"content": "text"}`; past the end
of the script the model answers `done`.

Every request is recorded (`requests`), and each tool message must name the id of a tool call
the server made earlier in that conversation: a request that does not is answered 400 and
recorded in `bad_requests`, so a test sees whether the client speaks the protocol.

`Listener()` is a bare TCP listener that records whether anybody connected (for the tests of
what the sandbox may reach).
"""

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ScriptedModel:
    def __init__(self, script, stream=None, model="scripted"):
        self.script = list(script)
        self.stream = stream  # None: as the request asks; True/False: require that mode
        self.model = model
        self.requests = []
        self.bad_requests = []
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    owner._send_json(self, 200, {"object": "list", "data": [
                        {"id": owner.model, "object": "model", "owned_by": "envcraft-tests"}]})
                else:
                    owner._send_json(self, 404, {"error": {"message": "not found"}})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    owner._send_json(self, 404, {"error": {"message": "not found"}})
                    return
                try:
                    request = json.loads(body)
                except ValueError:
                    owner._send_json(self, 400, {"error": {"message": "body is not JSON"}})
                    return
                owner._answer(self, request)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @staticmethod
    def _send_json(handler, status, value):
        data = json.dumps(value).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _problem(self, request):
        """Why `request` is not a well-formed continuation of its conversation, or None."""
        messages = request.get("messages")
        if not isinstance(messages, list) or not messages:
            return "messages must be a non-empty list"
        issued = set()
        for m in messages:
            if m.get("role") == "assistant":
                for call in m.get("tool_calls") or []:
                    issued.add(call.get("id"))
            if m.get("role") == "tool" and m.get("tool_call_id") not in issued:
                return f"tool message names an unknown tool_call_id {m.get('tool_call_id')!r}"
        if self.stream is not None and bool(request.get("stream")) != self.stream:
            return f"stream must be {self.stream}"
        return None

    def _answer(self, handler, request):
        with self.lock:
            self.requests.append(request)
            problem = self._problem(request)
            if problem:
                self.bad_requests.append((problem, request))
        if problem:
            self._send_json(handler, 400, {"error": {"message": problem}})
            return
        step = sum(1 for m in request["messages"] if m.get("role") == "assistant")
        reply = self.script[step] if step < len(self.script) else {"content": "done"}
        message = {"role": "assistant", "content": reply.get("content")}
        finish = "stop"
        if reply.get("tool_calls"):
            message["tool_calls"] = [
                {"id": f"call_{step}_{i}", "type": "function",
                 "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
                for i, c in enumerate(reply["tool_calls"])]
            finish = "tool_calls"
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        created = int(time.time())
        ident = f"chatcmpl-{len(self.requests)}"
        if not request.get("stream"):
            self._send_json(handler, 200, {
                "id": ident, "object": "chat.completion", "created": created,
                "model": self.model, "usage": usage,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}]})
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Connection", "close")
        handler.end_headers()

        def chunk(delta, finish_reason=None, with_usage=False):
            value = {"id": ident, "object": "chat.completion.chunk", "created": created,
                     "model": self.model,
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
            if with_usage:
                value["usage"] = usage
            handler.wfile.write(f"data: {json.dumps(value)}\n\n".encode())
            handler.wfile.flush()

        chunk({"role": "assistant", "content": ""})
        if message.get("content"):
            text = message["content"]
            half = len(text) // 2
            for part in (text[:half], text[half:]):
                if part:
                    chunk({"content": part})
        for i, call in enumerate(message.get("tool_calls") or []):
            args = call["function"]["arguments"]
            half = len(args) // 2
            chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                   "function": {"name": call["function"]["name"],
                                                "arguments": args[:half]}}]})
            chunk({"tool_calls": [{"index": i, "function": {"arguments": args[half:]}}]})
        chunk({}, finish, with_usage=True)
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()
        handler.close_connection = True


class Listener:
    """A TCP listener on 127.0.0.1 that records every connection made to it."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stopping = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.stopping:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self):
        self.stopping = True
        self.thread.join(timeout=5)
        self.sock.close()
