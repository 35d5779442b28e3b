"""The asyncio twin of ``client``: ``AsyncClient`` and ``AsyncSession``, same methods, awaited.

HTTP/1.1 over ``asyncio.open_connection`` (standard library only) on persistent connections:
a bounded set of idle ones per client (``max_connections``), each carrying one request at a
time however many tasks send at once; the framing, the answer reader and the decision to
resend come from ``_http1``. A request whose connection breaks is sent again only where
``_http1.resend_decision`` allows (a stale idle connection, an idempotent request without
answer): a tool call is never sent twice unless the server said it did not run it
(``lock_timeout``). An ``AsyncClient`` belongs to the event loop it is used in: ``aclose()``
(or ``async with``) before that loop ends.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from types import TracebackType
from typing import Any, Awaitable, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Type

from . import _http1, _wire
from ._http1 import MAX_HEADER_LINE, MAX_RESPONSE_BYTES, Endpoint, FailedAt, IdleConnections
from ._local_server import DEFAULT_START_TIMEOUT, LocalServer, PathLike
from ._session_state import SessionState
from ._wire import RetryPolicy, SessionInfo, Task, Verdict
from .client import DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS, DEFAULT_TIMEOUT
from .errors import AnswerLost, EnvcraftError, InvalidTransition, ProtocolError, SessionNotFound, TransportError, error_from_response

__all__ = ["AsyncClient", "AsyncSession", "MAX_HEADER_LINE", "MAX_RESPONSE_BYTES"]


class AsyncClient:
    """A connection to one ``envcraft serve``, for asyncio code; see ``envcraft.Client``
    (same arguments; ``timeout`` bounds a whole request here)."""

    def __init__(
        self,
        url: str,
        token: Optional[str] = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = 3,
        retry: Optional[RetryPolicy] = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    ) -> None:
        self.url = url.rstrip("/")
        self._endpoint = Endpoint.parse(self.url)
        self.token = token
        self.timeout = timeout
        self.retry = retry if retry is not None else RetryPolicy(max_retries=max_retries)
        self._sleep = sleep
        self._pool: IdleConnections[_Connection] = IdleConnections(max_connections, idle_timeout)
        self.server: Optional[LocalServer] = None  # set by AsyncClient.local(): stopped by aclose()

    def __repr__(self) -> str:
        return f"AsyncClient({self.url!r})"

    @classmethod
    async def local(
        cls,
        binary: Optional[PathLike] = None,
        workspaces: Optional[PathLike] = None,
        skills: Optional[PathLike] = None,
        state_dir: Optional[PathLike] = None,
        serve_args: Sequence[str] = (),
        start_timeout: float = DEFAULT_START_TIMEOUT,
        **client_options: Any,
    ) -> "AsyncClient":
        """A client of a private ``envcraft serve``, started (off the event loop) as
        ``envcraft.Client.local`` says; ``aclose()`` (or ``async with``) stops it."""
        loop = asyncio.get_running_loop()
        server = await loop.run_in_executor(
            None, LocalServer.start, binary, workspaces, skills, state_dir, serve_args, start_timeout
        )
        try:
            client = cls(server.url, **client_options)
            client.server = server
            await client.health()
        except BaseException:
            server.stop()
            raise
        return client

    async def aclose(self) -> None:
        """Closes the idle connections (those at a request close when it ends); the client
        stays usable, unless it is a client of ``AsyncClient.local()``: then its server stops."""
        conns = self._pool.close()
        for conn in conns:
            conn.discard()
        if conns:
            await asyncio.sleep(0)  # the transports finish closing on the next loop turn
        if self.server is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.server.stop)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self.aclose()

    async def health(self) -> Dict[str, Any]:
        return await self._send(_wire.healthz())

    async def ready(self) -> Dict[str, Any]:
        return await self._send(_wire.readyz())

    async def tasks(self) -> List[Dict[str, Any]]:
        return list(_wire.field_of(await self._send(_wire.list_tasks()), "tasks"))

    async def create(
        self,
        task: Task,
        base_time: Optional[str] = None,
        seed: Optional[int] = None,
        agent: Optional[Mapping[str, Any]] = None,
    ) -> "AsyncSession":
        """A new session of ``task``, ``"ENV/ID"`` or an inline task (a mapping), with an
        optional ``agent``; see ``envcraft.Client.create``. A bad ``seed`` raises
        ``ValueError`` before any request."""
        obj = await self._send(_wire.create_session(task, base_time, seed, agent))
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
        data = _http1.request_bytes(
            self._endpoint, req.method, req.path, _wire.headers_for(req, self.token), req.encoded_body()
        )
        try:
            response = await asyncio.wait_for(self._exchange(req, data, where), self.timeout)
        except asyncio.TimeoutError:
            raise TransportError("transport", f"{where}: no answer within {self.timeout}s") from None
        except (OSError, asyncio.LimitOverrunError) as e:
            raise TransportError("transport", f"{where}: {e}") from None
        if not 200 <= response.status < 300:
            raise error_from_response(response.status, response.body, response.headers)
        return _wire.answer_of(req, response.status, response.headers, response.body)

    async def _exchange(self, req: _wire.Request, data: bytes, where: str) -> _http1.Response:
        """Sends ``data`` on an idle connection (or a new one) and reads the answer; when the
        connection breaks where ``resend_decision`` allows, once more on a new connection.
        A connection leaves this function either back in the idle set after a whole answer,
        or closed: a cancelled or failed exchange never leaves one half-read for the next."""
        fresh = False
        while True:
            owner = (os.getpid(), asyncio.get_running_loop())
            conn = None if fresh else self._idle_connection(owner)
            reused = conn is not None
            if conn is None:
                conn = await self._connect()
            try:
                response = await conn.exchange(data, req.method)
            except _Broken as e:
                conn.abort()
                again, why = _http1.resend_decision(req.method, reused, e.failed_at)
                if again and not fresh:
                    fresh = True
                    continue
                if again:
                    why = f"it failed again on a new connection ({why})"
                cls = TransportError if req.method in _http1.IDEMPOTENT_METHODS else AnswerLost
                raise cls("transport", f"{where}: {e.cause}; {why}") from None
            except BaseException:  # cancelled (timeout), a protocol error: the stream is unknown
                conn.abort()
                raise
            if not (response.reusable and self._pool.give_back(conn, owner, conn.generation)):
                conn.close()
            return response

    def _idle_connection(self, owner: Tuple[int, asyncio.AbstractEventLoop]) -> Optional["_Connection"]:
        # No await here: taking a connection is atomic for the event loop.
        while True:
            conn, expired, foreign = self._pool.take(owner)
            for old in expired:
                old.abort()
            for other in foreign:  # another process's or loop's: dropped, never used here
                other.discard()
            if conn is None or conn.alive():
                return conn
            conn.abort()

    async def _connect(self) -> "_Connection":
        generation = self._pool.generation
        ssl_ctx = ssl.create_default_context() if self._endpoint.scheme == "https" else None
        reader, writer = await asyncio.open_connection(
            self._endpoint.host, self._endpoint.port, ssl=ssl_ctx, limit=MAX_HEADER_LINE
        )
        return _Connection(reader, writer, generation)


class _Broken(Exception):
    """The connection failed at ``failed_at`` (``cause`` says how)."""

    def __init__(self, failed_at: FailedAt, cause: str) -> None:
        super().__init__(cause)
        self.failed_at = failed_at
        self.cause = cause


class _Connection:
    """One stream pair, used by one request at a time."""

    __slots__ = ("reader", "writer", "generation", "loop")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, generation: int) -> None:
        self.reader = reader
        self.writer = writer
        self.generation = generation
        self.loop = asyncio.get_running_loop()

    def alive(self) -> bool:
        """The idle connection was not closed by the server, and nothing waits to be read."""
        if self.writer.transport.is_closing() or self.reader.at_eof() or self.reader.exception():
            return False
        sock = self.writer.get_extra_info("socket")
        return sock is not None and not _http1.readable_now(sock.fileno())

    async def exchange(self, data: bytes, method: str) -> _http1.Response:
        try:
            self.writer.write(data)
            await self.writer.drain()
        except (OSError, RuntimeError) as e:  # reset, or a transport already closed
            raise _Broken(FailedAt.WRITING, f"sending failed ({e})") from None
        reader = _http1.read_response(method)
        need = next(reader)
        received = False
        while True:
            try:
                chunk = await self._read(need)
            except asyncio.IncompleteReadError as e:
                at = FailedAt.ANSWERING if received or e.partial else FailedAt.NO_ANSWER
                raise _Broken(at, "the server closed the connection") from None
            except OSError as e:
                at = FailedAt.ANSWERING if received else FailedAt.NO_ANSWER
                raise _Broken(at, str(e) or type(e).__name__) from None
            received = True
            try:
                need = reader.send(chunk)
            except StopIteration as done:
                response: _http1.Response = done.value
                return response

    async def _read(self, need: _http1.Need) -> bytes:
        if isinstance(need, _http1.Line):
            return await self.reader.readuntil(b"\r\n")
        if isinstance(need, _http1.Exactly):
            return await self.reader.readexactly(need.n)
        body = await self.reader.read(need.limit + 1)
        rest = body
        while rest and len(body) <= need.limit:
            rest = await self.reader.read(need.limit + 1 - len(body))
            body += rest
        if len(body) > need.limit:
            raise ProtocolError("protocol", "answer too large")
        return body

    def close(self) -> None:
        self.writer.close()

    def abort(self) -> None:
        """Closes at once, dropping anything unsent or unread."""
        try:
            self.writer.transport.abort()
        except RuntimeError:  # its event loop is closed: the transport closes when collected
            pass

    def discard(self) -> None:
        """Closes the connection from any event loop or thread: aborted by its own loop while
        that one is open, else left to be collected."""
        if self.loop.is_closed():
            return
        if self.loop is asyncio.get_running_loop():
            self.abort()
            return
        try:
            self.loop.call_soon_threadsafe(self.abort)
        except RuntimeError:  # closed meanwhile
            pass


class AsyncSession(SessionState):
    """One live session, for asyncio code; see ``envcraft.Session``. ``async with`` closes it."""

    def __init__(self, client: AsyncClient, info: SessionInfo) -> None:
        self.client = client
        self._start(info)

    def __repr__(self) -> str:
        return f"AsyncSession({self.id!r}, task={self.task!r}, action_index={self.action_index})"

    async def call(self, tool: str, /, **args: Any) -> Dict[str, Any]:
        obj = await self.client._send(_wire.call_tool(self.id, tool, args))
        return self._called(obj)

    async def add_message(self, text: Optional[str] = None, **fields: Any) -> str:
        """Records the model's own assistant message (``text``, ``thinking``, ``content``
        blocks, ``usage`` token counts, ``model``, ``stop_reason``) in the session's transcript,
        beside its tool calls, as OpenClaw's transcript holds it; returns the entry's id. A bad
        message raises ``BadRequest`` naming the field."""
        obj = await self.client._send(_wire.add_message(self.id, text, **fields))
        return str(obj["id"])

    async def upload(self, source: Any, path: str = ".") -> Dict[str, Any]:
        """Puts files into the workspace; see ``Session.upload``."""
        return await self.client._send(_wire.upload(self.id, path, _wire.tar_of(source)))

    async def download(self, path: str = ".") -> Dict[str, Any]:
        """A tar of the workspace's ``path``; see ``Session.download``."""
        return await self.client._send(_wire.download(self.id, path))

    async def agent_turn(self) -> Dict[str, Any]:
        """Runs the current turn through the session's agent; see ``Session.agent_turn``."""
        return await self.client._send(_wire.agent_turn(self.id))

    async def next_turn(self) -> Optional[str]:
        try:
            obj = await self.client._send(_wire.next_turn(self.id))
        except InvalidTransition:
            # 409 past the last prompt: the task has no more prompts.
            return None
        return self._moved_on(obj)

    async def fork(self) -> "AsyncSession":
        obj = await self.client._send(_wire.fork(self.id))
        info = self._fork_info(obj)
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
