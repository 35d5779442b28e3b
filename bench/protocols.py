#!/usr/bin/env python3
"""The cost of OpenEnv and MCP over envcraft's own API, loopback only, bounded in count and time.

    python3 bench/protocols.py ENVCRAFT_BINARY [RESULTS_MD] [--sessions N]

Starts `envcraft serve --listen 127.0.0.1:0` on a temporary state directory, and in one run:
1. per-call latency of one `read` of a 4 KiB file (written once) in one session, sequential,
   interleaved in rounds over three transports, each on one connection kept open: `/v1`
   (`POST /v1/sessions/{id}/call`, HTTP/1.1 keep-alive), OpenEnv's WebSocket `/ws` (a
   `call_tool` step) and MCP over Streamable HTTP (`tools/call` to `/v1/sessions/{id}/mcp`,
   keep-alive); each answer is checked (the file's bytes). Target (issue 19): /ws and MCP at
   most 1.2x /v1's p50;
2. N WebSocket connections (default 1,000), one session each (`reset`), all open at once, then
   a `read` of the 4 KiB file in each, 64 in flight, several rounds: calls per second over
   /ws, every answer checked.
Clients are written here on the standard library (a minimal WebSocket client, `http.client`),
so each transport costs only its framing.
"""

import asyncio
import base64
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from report import publish, verdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASK = "example/archive-read-mail"
CONTENT = ("0123456789abcdef" * 256)[:4096]
ROUNDS = 300
IN_FLIGHT = 64
CALLS_PER_SESSION = 5
DEADLINE_S = 900


def frame(payload: bytes) -> bytes:
    """A masked text frame."""
    head = bytearray([0x81])
    n = len(payload)
    if n < 126:
        head.append(0x80 | n)
    elif n < 65536:
        head += bytes([0x80 | 126]) + n.to_bytes(2, "big")
    else:
        head += bytes([0x80 | 127]) + n.to_bytes(8, "big")
    mask = os.urandom(4)
    return bytes(head) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


HANDSHAKE = (
    "GET /ws HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
)


class WebSocket:
    """Blocking: one request, one answer."""

    def __init__(self, host, port):
        self.sock = socket.create_connection((host, port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(HANDSHAKE.format(host=host, key=key).encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            self.buf += self.sock.recv(4096)
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head

    def _need(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("the server closed the WebSocket")
            self.buf += chunk

    def ask(self, message):
        self.sock.sendall(frame(json.dumps(message).encode()))
        while True:
            self._need(2)
            n = self.buf[1] & 0x7F
            at = 2
            if n == 126:
                self._need(4)
                n, at = int.from_bytes(self.buf[2:4], "big"), 4
            elif n == 127:
                self._need(10)
                n, at = int.from_bytes(self.buf[2:10], "big"), 10
            self._need(at + n)
            opcode, payload, self.buf = self.buf[0] & 0x0F, self.buf[at:at + n], self.buf[at + n:]
            if opcode == 1:
                return json.loads(payload)
            if opcode == 8:
                raise EOFError("the server closed the WebSocket")

    def close(self):
        self.sock.close()


class AsyncWebSocket:
    async def open(self, host, port):
        self.reader, self.writer = await asyncio.open_connection(host, port)
        key = base64.b64encode(os.urandom(16)).decode()
        self.writer.write(HANDSHAKE.format(host=host, key=key).encode())
        head = await self.reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 101"), head
        return self

    async def ask(self, message):
        self.writer.write(frame(json.dumps(message).encode()))
        while True:
            b0, b1 = await self.reader.readexactly(2)
            n = b1 & 0x7F
            if n == 126:
                n = int.from_bytes(await self.reader.readexactly(2), "big")
            elif n == 127:
                n = int.from_bytes(await self.reader.readexactly(8), "big")
            payload = await self.reader.readexactly(n)
            if b0 & 0x0F == 1:
                return json.loads(payload)
            if b0 & 0x0F == 8:
                raise EOFError("the server closed the WebSocket")

    def close(self):
        self.writer.close()


def post(conn, path, body, headers=None):
    conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **(headers or {})})
    answer = conn.getresponse()
    data = answer.read()
    assert answer.status in (200, 201), (answer.status, data[:200])
    return json.loads(data)


def pct(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def latency(host, port):
    """Interleaved rounds of one 4 KiB read over /v1, /ws and MCP HTTP; seconds per call each."""
    v1 = http.client.HTTPConnection(host, port, timeout=60)
    created = post(v1, "/v1/sessions", {"task": TASK})
    sid = created["session_id"]
    wrote = post(v1, f"/v1/sessions/{sid}/call", {"tool": "write", "args": {"path": "blob.txt", "content": CONTENT}})
    assert wrote["result"]["ok"], wrote
    mcp = http.client.HTTPConnection(host, port, timeout=60)
    post(mcp, f"/v1/sessions/{sid}/mcp", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
    ws = WebSocket(host, port)
    seen = ws.ask({"type": "reset", "data": {"task": TASK}})
    ws_sid = seen["data"]["observation"]["session_id"]
    assert ws.ask({"type": "step", "data": {"type": "call_tool", "tool_name": "write", "arguments": {"path": "blob.txt", "content": CONTENT}}})["data"]["observation"]["result"]["ok"]
    read = {"path": "blob.txt"}
    times = {"v1": [], "ws": [], "mcp": []}

    def over_v1(i):
        r = post(v1, f"/v1/sessions/{sid}/call", {"tool": "read", "args": read})
        return r["result"]

    def over_ws(i):
        r = ws.ask({"type": "step", "data": {"type": "call_tool", "tool_name": "read", "arguments": read}})
        return r["data"]["observation"]["result"]

    def over_mcp(i):
        r = post(mcp, f"/v1/sessions/{sid}/mcp", {"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": {"name": "read", "arguments": read}}, {"MCP-Protocol-Version": "2025-11-25"})
        return r["result"]["structuredContent"]

    ways = [("v1", over_v1), ("ws", over_ws), ("mcp", over_mcp)]
    for i in range(ROUNDS):
        for name, call in ways[i % 3:] + ways[:i % 3]:
            t = time.perf_counter()
            result = call(i)
            times[name].append(time.perf_counter() - t)
            assert result["ok"] and CONTENT in result["content"], (name, str(result)[:200])
    ws.close()
    v1.request("DELETE", f"/v1/sessions/{sid}")
    v1.getresponse().read()
    v1.request("DELETE", f"/v1/sessions/{ws_sid}")
    v1.getresponse().read()
    return times


async def many(host, port, n):
    """N WebSockets with a session each, then reads in all of them: (calls, seconds, errors)."""
    sockets = []
    errors = []
    semaphore = asyncio.Semaphore(IN_FLIGHT)

    async def open_one(i):
        async with semaphore:
            ws = await AsyncWebSocket().open(host, port)
            seen = await ws.ask({"type": "reset", "data": {"task": TASK}})
            assert seen["type"] == "observation", seen
            wrote = await ws.ask({"type": "step", "data": {"type": "call_tool", "tool_name": "write", "arguments": {"path": "blob.txt", "content": CONTENT}}})
            assert wrote["data"]["observation"]["result"]["ok"]
            return ws

    sockets = await asyncio.gather(*(open_one(i) for i in range(n)))

    async def read_in(ws):
        async with semaphore:
            r = await ws.ask({"type": "step", "data": {"type": "call_tool", "tool_name": "read", "arguments": {"path": "blob.txt"}}})
            result = r.get("data", {}).get("observation", {}).get("result", {})
            if not (result.get("ok") and CONTENT in result.get("content", "")):
                errors.append(str(r)[:200])

    t = time.perf_counter()
    for _ in range(CALLS_PER_SESSION):
        await asyncio.gather(*(read_in(ws) for ws in sockets))
    seconds = time.perf_counter() - t
    for ws in sockets:
        ws.close()
    return n * CALLS_PER_SESSION, seconds, errors


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = 1000
    if "--sessions" in sys.argv:
        n = int(sys.argv[sys.argv.index("--sessions") + 1])
        args = [a for a in args if a != str(n)]
    if len(args) not in (1, 2):
        print(__doc__, file=sys.stderr)
        return 2
    binary = os.path.abspath(args[0])
    results = args[1] if len(args) == 2 else None
    state = tempfile.mkdtemp(prefix="envcraft-bench-protocols-")
    server = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--state-dir", state,
         "--max-sessions", str(n + 16), "--max-connections-per-peer", str(n + 64),
         "--lock-wait-ms", "60000"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    try:
        line = server.stdout.readline().strip()
        if not line.startswith("listening on "):
            raise SystemExit(f"the server did not start: {line!r}")
        host, port = line.split("//", 1)[1].rsplit(":", 1)
        port = int(port)
        times = latency(host, port)
        calls, seconds, errors = asyncio.run(asyncio.wait_for(many(host, port, n), DEADLINE_S))
    finally:
        server.terminate()
        try:
            server.wait(timeout=120)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(state, ignore_errors=True)

    p50 = {k: statistics.median(v) * 1000 for k, v in times.items()}
    ratio = {k: p50[k] / p50["v1"] for k in p50}
    out = [
        f"### Protocols: one 4 KiB `read`, sequential, {ROUNDS} interleaved rounds on kept connections; "
        f"then {n:,} WebSocket sessions (one run)",
        "",
        "| Transport | p50 (ms) | p99 (ms) | vs /v1 | Target |",
        "| --- | ---: | ---: | ---: | --- |",
        f"| `/v1` call (HTTP/1.1 keep-alive) | {p50['v1']:.3f} | {pct(times['v1'], .99):.3f} | 1.00x | |",
        f"| OpenEnv `/ws` `call_tool` step | {p50['ws']:.3f} | {pct(times['ws'], .99):.3f} | {ratio['ws']:.2f}x | <= 1.2x: {verdict(ratio['ws'] <= 1.2)} |",
        f"| MCP `tools/call` (Streamable HTTP) | {p50['mcp']:.3f} | {pct(times['mcp'], .99):.3f} | {ratio['mcp']:.2f}x | <= 1.2x: {verdict(ratio['mcp'] <= 1.2)} |",
        "",
        f"- {n:,} WebSocket sessions open at once, {CALLS_PER_SESSION} reads each, {IN_FLIGHT} in flight: "
        f"**{calls / seconds:,.0f} calls/s** ({calls:,} calls in {seconds:.1f} s); errors: {len(errors)}.",
    ]
    if errors:
        out.append(f"- First error: `{errors[0]}`")
    out += ["", "Generated by `python3 bench/protocols.py` (`make bench`)."]
    publish(out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
