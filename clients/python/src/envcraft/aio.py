"""The asyncio twin of ``client``: ``AsyncClient`` and ``AsyncSession``, same methods, awaited.

The HTTP/1.1 exchange is done here over ``asyncio.open_connection`` (standard library only):
one connection per request, ``Connection: close``, the answer read by ``Content-Length``,
chunked, or to end of stream. A fresh connection per request means a request is never resent
on a connection the server may have dropped: a tool call is sent at most once unless the
server said it did not run it (``lock_timeout``).
"""

from __future__ import annotations

import asyncio
import ssl
from types import TracebackType
from typing import Any, Awaitable, Callable, Dict, List, Optional, Tuple, Type
from urllib.parse import urlsplit

from . import _wire
from ._wire import RetryPolicy, SessionInfo, Verdict
from .client import DEFAULT_TIMEOUT
from .errors import EnvcraftError, InvalidTransition, ProtocolError, SessionNotFound, TransportError, error_from_response

# An answer larger than this is not the server's (its biggest is a diff or a long tool result).
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
MAX_HEADER_LINE = 64 * 1024


class AsyncClient:
    """A connection to one ``envcraft serve``, for asyncio code; see ``envcraft.Client``."""

    def __init__(
        self,
        url: str,
        token: Optional[str] = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = 3,
        retry: Optional[RetryPolicy] = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.url = url.rstrip("/")
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._prefix = parts.path.rstrip("/")
        self._host_header = parts.netloc
        self.token = token
        self.timeout = timeout
        self.retry = retry if retry is not None else RetryPolicy(max_retries=max_retries)
        self._sleep = sleep

    def __repr__(self) -> str:
        return f"AsyncClient({self.url!r})"

    async def health(self) -> Dict[str, Any]:
        return await self._send(_wire.healthz())

    async def ready(self) -> Dict[str, Any]:
        return await self._send(_wire.readyz())

    async def tasks(self) -> List[Dict[str, Any]]:
        return list(_wire.field_of(await self._send(_wire.list_tasks()), "tasks"))

    async def create(self, task: str, base_time: Optional[str] = None) -> "AsyncSession":
        obj = await self._send(_wire.create_session(task, base_time))
        return AsyncSession(self, SessionInfo.from_created(obj))

    # -- transport ----------------------------------------------------------------------

    async def _send(self, req: _wire.Request) -> Dict[str, Any]:
        attempt = 0
        while True:
            try:
                return await self._send_once(req)
            except EnvcraftError as e:
                wait = self.retry.delay(attempt, e)
                if wait is None:
                    raise
            await self._sleep(wait)
            attempt += 1

    async def _send_once(self, req: _wire.Request) -> Dict[str, Any]:
        where = f"{req.method} {self.url}{req.path}"
        try:
            status, headers, body = await asyncio.wait_for(self._exchange(req), self.timeout)
        except asyncio.TimeoutError:
            raise TransportError("transport", f"{where}: no answer within {self.timeout}s") from None
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as e:
            raise TransportError("transport", f"{where}: {e}") from None
        if not 200 <= status < 300:
            raise error_from_response(status, body, headers)
        return _wire.decode_json(status, body)

    async def _exchange(self, req: _wire.Request) -> Tuple[int, Dict[str, str], bytes]:
        ssl_ctx = ssl.create_default_context() if self._scheme == "https" else None
        reader, writer = await asyncio.open_connection(
            self._host, self._port, ssl=ssl_ctx, limit=MAX_HEADER_LINE
        )
        try:
            writer.write(self._request_bytes(req))
            await writer.drain()
            return await _read_response(reader)
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except (OSError, ssl.SSLError):
                pass

    def _request_bytes(self, req: _wire.Request) -> bytes:
        body = req.encoded_body()
        headers = _wire.headers_for(req, self.token)
        headers["Host"] = self._host_header
        headers["Connection"] = "close"
        if body is not None or req.method in ("POST", "PUT"):
            headers["Content-Length"] = str(len(body or b""))
        head = f"{req.method} {self._prefix}{req.path} HTTP/1.1\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        return (head + "\r\n").encode("latin-1") + (body or b"")


async def _read_response(reader: asyncio.StreamReader) -> Tuple[int, Dict[str, str], bytes]:
    """Reads one HTTP/1.1 answer: (status, lower-cased headers, body)."""
    while True:
        status_line = (await reader.readuntil(b"\r\n")).decode("latin-1").rstrip("\r\n")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise ProtocolError("protocol", f"bad status line {status_line[:80]!r}")
        status = int(parts[1])
        headers: Dict[str, str] = {}
        while True:
            line = (await reader.readuntil(b"\r\n")).decode("latin-1").rstrip("\r\n")
            if not line:
                break
            name, sep, value = line.partition(":")
            if not sep:
                raise ProtocolError("protocol", f"bad header line {line[:80]!r}")
            headers[name.strip().lower()] = value.strip()
        if 100 <= status < 200:  # an interim answer (100 Continue): the real one follows
            continue
        break
    if status in (204, 304):
        return status, headers, b""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return status, headers, await _read_chunked(reader)
    if "content-length" in headers:
        try:
            length = int(headers["content-length"])
        except ValueError:
            raise ProtocolError("protocol", "bad Content-Length") from None
        if length < 0 or length > MAX_RESPONSE_BYTES:
            raise ProtocolError("protocol", f"answer of {length} bytes refused")
        return status, headers, await reader.readexactly(length)
    body = await reader.read(MAX_RESPONSE_BYTES + 1)
    rest = body
    while rest and len(body) <= MAX_RESPONSE_BYTES:
        rest = await reader.read(MAX_RESPONSE_BYTES + 1 - len(body))
        body += rest
    if len(body) > MAX_RESPONSE_BYTES:
        raise ProtocolError("protocol", "answer too large")
    return status, headers, body


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        size_line = (await reader.readuntil(b"\r\n")).decode("latin-1").strip()
        try:
            size = int(size_line.split(";", 1)[0], 16)
        except ValueError:
            raise ProtocolError("protocol", f"bad chunk size {size_line[:40]!r}") from None
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers
                pass
            return bytes(body)
        if len(body) + size > MAX_RESPONSE_BYTES:
            raise ProtocolError("protocol", "answer too large")
        body += await reader.readexactly(size)
        if await reader.readexactly(2) != b"\r\n":
            raise ProtocolError("protocol", "chunk not followed by CRLF")


class AsyncSession:
    """One live session, for asyncio code; see ``envcraft.Session``. ``async with`` closes it."""

    def __init__(self, client: AsyncClient, info: SessionInfo) -> None:
        self.client = client
        self.id = info.id
        self.task = info.task
        self.prompt = info.prompt
        self.docs = info.docs
        self.tools = info.tools
        self.action_index = info.action_index
        self.turn = 0
        self.closed = False

    def __repr__(self) -> str:
        return f"AsyncSession({self.id!r}, task={self.task!r}, action_index={self.action_index})"

    async def call(self, tool: str, /, **args: Any) -> Dict[str, Any]:
        obj = await self.client._send(_wire.call_tool(self.id, tool, args))
        result = _wire.field_of(obj, "result")
        if "action_index" in obj:
            self.action_index = int(obj["action_index"])
        return dict(result)

    async def next_turn(self) -> Optional[str]:
        try:
            obj = await self.client._send(_wire.next_turn(self.id))
        except InvalidTransition:
            # The server answers 409 at the last turn ("there is no next prompt"), or
            # {"prompt": null}: both mean the task has no more prompts.
            return None
        prompt = obj.get("prompt")
        if "turn" in obj:
            self.turn = int(obj["turn"])
        if prompt is not None:
            self.prompt = prompt
        return prompt

    async def fork(self) -> "AsyncSession":
        obj = await self.client._send(_wire.fork(self.id))
        info = SessionInfo(
            str(_wire.field_of(obj, "session_id", 201)),
            self.task,
            self.prompt,
            self.docs,
            self.tools,
            self.action_index,
        )
        child = AsyncSession(self.client, info)
        child.turn = self.turn
        return child

    async def verify(self) -> Verdict:
        return Verdict.from_json(await self.client._send(_wire.verify(self.id)))

    async def diff(self) -> Dict[str, Any]:
        return await self.client._send(_wire.diff(self.id))

    async def close(self) -> None:
        if self.closed:
            return
        try:
            await self.client._send(_wire.close(self.id))
        except SessionNotFound:
            pass
        self.closed = True

    async def __aenter__(self) -> "AsyncSession":
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.close()
