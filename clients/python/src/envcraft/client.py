"""The synchronous client: ``Client`` talks to one server, ``Session`` is one live session.

Standard library only: HTTP/1.1 over ``socket`` on persistent connections, a bounded set of
idle ones per client (``max_connections``) reused across requests and threads; the framing,
the answer reader and the decision to resend come from ``_http1``, the requests from
``_wire``, and every request is retried under ``RetryPolicy``.
"""

from __future__ import annotations

import os
import socket
import ssl
import time
from types import TracebackType
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Type

from . import _http1, _wire
from ._http1 import Endpoint, FailedAt, IdleConnections
from ._local_server import DEFAULT_START_TIMEOUT, LocalServer, PathLike
from ._session_state import SessionState
from ._wire import RetryPolicy, SessionInfo, Task, Verdict
from .errors import AnswerLost, EnvcraftError, InvalidTransition, ProtocolError, SessionNotFound, TransportError, error_from_response

# Above the server's own request deadline (`--request-timeout`, 300 s by default), so its 504
# arrives before the client gives up.
DEFAULT_TIMEOUT = 330.0
# Idle keep-alive connections a client keeps for its next requests (more concurrent requests
# still go, on connections closed after their answer).
DEFAULT_MAX_CONNECTIONS = 64
# A connection idle for longer is closed rather than reused: the server keeps idle
# connections open, but a NAT or firewall on the way may forget them silently, and a request
# written into such a connection would wait for its whole timeout.
DEFAULT_IDLE_TIMEOUT = 30.0


class Client:
    """A connection to one ``envcraft serve``.

    ``url`` is the server's base URL (``http://127.0.0.1:8080``), ``token`` the bearer token
    when the server requires one, ``timeout`` the seconds one connect or read may take (a tool
    call runs a command: keep it above the policy's wall-clock limit), ``max_retries`` how
    often a ``lock_timeout``, ``too_many_sessions`` or ``capacity`` answer is retried (honouring
    ``Retry-After``), ``max_connections`` how many idle keep-alive connections are kept for
    reuse (0: a new connection per request), ``idle_timeout`` the seconds after which an idle
    one is closed instead. ``close()`` (or ``with``) closes the idle connections; the client
    stays usable. Safe to share between threads; a forked child opens its own connections.
    """

    def __init__(
        self,
        url: str,
        token: Optional[str] = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = 3,
        retry: Optional[RetryPolicy] = None,
        sleep: Callable[[float], None] = time.sleep,
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
        self._ssl = ssl.create_default_context() if self._endpoint.scheme == "https" else None
        self.server: Optional[LocalServer] = None  # set by Client.local(): stopped by close()
        # No proxies from the environment, no redirects: the server is on this host or this
        # cluster's network, and a redirect would resend a tool call somewhere else.

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    @classmethod
    def local(
        cls,
        binary: Optional[PathLike] = None,
        workspaces: Optional[PathLike] = None,
        skills: Optional[PathLike] = None,
        state_dir: Optional[PathLike] = None,
        serve_args: Sequence[str] = (),
        start_timeout: float = DEFAULT_START_TIMEOUT,
        **client_options: Any,
    ) -> "Client":
        """A client of a private ``envcraft serve`` started for it on a free loopback port.

        The binary is ``binary``, else ``ENVCRAFT_BIN``, else the one the ``envcraft`` wheel
        installed, else ``envcraft`` on ``PATH``; ``workspaces`` and ``skills`` are the server's
        ``--workspaces``/``--skills`` (default: its own, ``ENVCRAFT_WORKSPACES`` or
        ``./workspaces``); its state goes to a temporary directory removed at the end unless
        ``state_dir`` names one to keep; ``serve_args`` are more ``serve`` flags. Returns once
        the server answers ``/healthz`` (``LocalServerError`` with its standard error when it
        does not within ``start_timeout`` seconds). ``close()`` (or leaving ``with``) stops the
        server, its sessions and their sandboxes; so does the interpreter's exit. The other
        keyword arguments are ``Client``'s (``timeout``, ``max_connections``, ...)."""
        server = LocalServer.start(binary, workspaces, skills, state_dir, serve_args, start_timeout)
        try:
            client = cls(server.url, **client_options)
            client.server = server
            client.health()
        except BaseException:
            server.stop()
            raise
        return client

    def close(self) -> None:
        """Closes the idle connections (those at a request close when it ends); a client of
        ``Client.local()`` also stops its server (then it is not usable any more)."""
        for conn in self._pool.close():
            conn.close()
        if self.server is not None:
            self.server.stop()

    def __enter__(self) -> "Client":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()

    def __del__(self) -> None:
        # Idle sockets go with the client, without an "unclosed socket" warning.
        try:
            self.close()
        except Exception:
            pass

    def __getstate__(self) -> Dict[str, Any]:
        # Pickled (to a Ray task, say) without its connections: the copy opens its own.
        state = dict(self.__dict__)
        del state["_pool"], state["_ssl"]
        state["server"] = None  # a copy talks to a local server; only the original stops it
        state["_pool_config"] = (self._pool.max_idle, self._pool.idle_timeout)
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        max_idle, idle_timeout = state.pop("_pool_config")
        self.__dict__.update(state)
        self._pool = IdleConnections(max_idle, idle_timeout)
        self._ssl = ssl.create_default_context() if self._endpoint.scheme == "https" else None

    # -- the endpoints ------------------------------------------------------------------

    def health(self) -> Dict[str, Any]:
        """``GET /healthz``: ``{"status": "ok"}`` while the server is up."""
        return self._send(_wire.healthz())

    def ready(self) -> Dict[str, Any]:
        """``GET /readyz``: ``{"status": "ready", "sessions": N, "max_sessions": M}``."""
        return self._send(_wire.readyz())

    def tasks(self) -> List[Dict[str, Any]]:
        """Every task the server offers: ``{"task": "ENV/ID", "env", "id", "prompt"}`` each."""
        return list(_wire.field_of(self._send(_wire.list_tasks()), "tasks"))

    def create(
        self,
        task: Task,
        base_time: Optional[str] = None,
        seed: Optional[int] = None,
        agent: Optional[Mapping[str, Any]] = None,
    ) -> "Session":
        """A new session of ``task``: a task's name (``"ENV/ID"``, as ``tasks()`` lists them)
        or an inline task, the whole task as a mapping sent as given::

            {"env": "example", "prompt": "Write hi to out.txt",      # or "turns": [{"prompt"}]
             "verifier": {"kind": "manifest", "extra": "allow"},
             "files": {"notes/todo.txt": "do it\\n"},                 # optional: path -> text
             "expected": {"version": 1, "files": {...}},              # optional: expected.json
             "grader": {"check.py": "..."}}                           # optional: grader/ files

        The server checks an inline task as a task on disk (``BadRequest``/``MissingField``
        naming the field, ``task.verifier.bogus``) and names it ``ENV/inline-HASH``
        (``Session.task``). ``base_time`` (RFC 3339) overrides the task's clock. ``seed`` (an
        int from 0 to 2**64-1) is exported to the session's commands, skills and grader as
        ``ENVCRAFT_SEED`` (``Session.seed``); any other seed raises ``ValueError`` and a
        ``task`` neither ``str`` nor mapping ``TypeError``, before a request is made.

        ``agent={"name": "openclaw", "model_url": URL, "model"?: NAME, "turn_timeout"?: SECS}``
        makes OpenClaw itself the session's agent (the server needs its install: ``make
        openclaw``); ``Session.agent_turn()`` then runs each turn."""
        info = SessionInfo.from_created(self._send(_wire.create_session(task, base_time, seed, agent)))
        return Session(self, info)

    # -- transport ----------------------------------------------------------------------

    def _send(self, req: _wire.Request) -> Dict[str, Any]:
        attempt = 0
        while True:
            try:
                return self._send_once(req)
            except EnvcraftError as e:
                wait = self.retry.delay(attempt, e)
                if wait is None:
                    raise
            self._sleep(wait)
            attempt += 1

    def _send_once(self, req: _wire.Request) -> Dict[str, Any]:
        data = _http1.request_bytes(
            self._endpoint, req.method, req.path, _wire.headers_for(req, self.token), req.encoded_body()
        )
        response = self._exchange(req, data)
        if not 200 <= response.status < 300:
            raise error_from_response(response.status, response.body, response.headers)
        return _wire.answer_of(req, response.status, response.headers, response.body)

    def _exchange(self, req: _wire.Request, data: bytes) -> _http1.Response:
        """Sends ``data`` on an idle connection (or a new one) and reads the answer; when the
        connection breaks where ``resend_decision`` allows, once more on a new connection."""
        where = f"{req.method} {self.url}{req.path}"
        fresh = False
        while True:
            owner = os.getpid()
            conn = None if fresh else self._idle_connection(owner)
            reused = conn is not None
            if conn is None:
                conn = self._connect(where)
            try:
                response = conn.exchange(data, req.method)
            except _Broken as e:
                conn.close()
                again, why = _http1.resend_decision(req.method, reused, e.failed_at)
                if again and not fresh:
                    fresh = True
                    continue
                if again:
                    why = f"it failed again on a new connection ({why})"
                cls = TransportError if req.method in _http1.IDEMPOTENT_METHODS else AnswerLost
                raise cls("transport", f"{where}: {e.cause}; {why}") from None
            except socket.timeout:
                conn.close()
                raise TransportError("transport", f"{where}: no answer within {self.timeout}s") from None
            except BaseException:
                conn.close()
                raise
            if not (response.reusable and self._pool.give_back(conn, owner, conn.generation)):
                conn.close()
            return response

    def _idle_connection(self, owner: int) -> Optional["_Connection"]:
        while True:
            conn, expired, foreign = self._pool.take(owner)
            for old in expired:
                old.close()
            for other in foreign:  # a fork's parent's: closing our copy leaves its own open
                other.close()
            if conn is None or conn.alive():
                return conn
            conn.close()  # closed by the server while idle (or it sent what nobody asked for)

    def _connect(self, where: str) -> "_Connection":
        generation = self._pool.generation
        try:
            sock = socket.create_connection((self._endpoint.host, self._endpoint.port), self.timeout)
        except OSError as e:
            raise TransportError("transport", f"{where}: {e}") from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._ssl is not None:
                sock = self._ssl.wrap_socket(sock, server_hostname=self._endpoint.host)
        except OSError as e:
            sock.close()
            raise TransportError("transport", f"{where}: {e}") from None
        return _Connection(sock, generation)


class _Broken(Exception):
    """The connection failed at ``failed_at`` (``cause`` says how)."""

    def __init__(self, failed_at: FailedAt, cause: str) -> None:
        super().__init__(cause)
        self.failed_at = failed_at
        self.cause = cause


class _Connection:
    """One socket with its read buffer, used by one request at a time."""

    __slots__ = ("sock", "buf", "generation")

    def __init__(self, sock: socket.socket, generation: int) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.generation = generation

    def alive(self) -> bool:
        """Nothing waits to be read on the idle connection: no end of stream, no stray bytes."""
        return not self.buf and not _http1.readable_now(self.sock.fileno())

    def exchange(self, data: bytes, method: str) -> _http1.Response:
        try:
            self.sock.sendall(data)
        except socket.timeout:
            raise
        except OSError as e:
            raise _Broken(FailedAt.WRITING, f"sending failed ({e})") from None
        reader = _http1.read_response(method)
        need = next(reader)
        received = False
        while True:
            try:
                chunk = self._read(need)
            except socket.timeout:
                raise
            except (OSError, _EndOfStream) as e:
                at = FailedAt.ANSWERING if received or self.buf else FailedAt.NO_ANSWER
                cause = "the server closed the connection" if isinstance(e, _EndOfStream) else str(e)
                raise _Broken(at, cause) from None
            received = True
            try:
                need = reader.send(chunk)
            except StopIteration as done:
                response: _http1.Response = done.value
                return response

    def _read(self, need: _http1.Need) -> bytes:
        buf = self.buf
        if isinstance(need, _http1.Line):
            start = 0
            while True:
                end = buf.find(b"\n", start)
                if end >= 0:
                    line = bytes(buf[: end + 1])
                    del buf[: end + 1]
                    return line
                if len(buf) > _http1.MAX_HEADER_LINE:
                    raise ProtocolError("protocol", "header line too long")
                start = len(buf)
                self._fill()
        if isinstance(need, _http1.Exactly):
            while len(buf) < need.n:
                self._fill()
            out = bytes(buf[: need.n])
            del buf[: need.n]
            return out
        while True:  # UntilEof
            if len(buf) > need.limit:
                raise ProtocolError("protocol", "answer too large")
            try:
                self._fill()
            except _EndOfStream:
                out = bytes(buf)
                buf.clear()
                return out

    def _fill(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise _EndOfStream()
        self.buf += data

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class _EndOfStream(Exception):
    """The server closed the connection."""


class Session(SessionState):
    """One live session on the server. Use it as a context manager to close it for sure.

    ``task`` is ``ENV/ID`` (``ENV/inline-HASH`` for an inline task), ``seed`` the seed it was
    created with (``None`` without one; a fork keeps it), ``prompt`` the current turn's prompt
    (``next_turn`` moves it on), ``tools`` the OpenAI function-calling tools as the server
    gives them, ``action_index`` the server's counter after the last call.
    """

    def __init__(self, client: Client, info: SessionInfo) -> None:
        self.client = client
        self._start(info)

    def __repr__(self) -> str:
        return f"Session({self.id!r}, task={self.task!r}, action_index={self.action_index})"

    def call(self, tool: str, /, **args: Any) -> Dict[str, Any]:
        """Calls ``tool`` with ``args``; returns its result (``{"ok": bool, ...}``). A tool
        that fails answers ``ok: false`` with an error, it does not raise."""
        obj = self.client._send(_wire.call_tool(self.id, tool, args))
        return self._called(obj)

    def add_message(self, text: Optional[str] = None, **fields: Any) -> str:
        """Records the model's own assistant message (``text``, ``thinking``, ``content``
        blocks, ``usage`` token counts, ``model``, ``stop_reason``) in the session's transcript,
        beside its tool calls, as OpenClaw's transcript holds it; returns the entry's id. A bad
        message raises ``BadRequest`` naming the field."""
        obj = self.client._send(_wire.add_message(self.id, text, **fields))
        return str(obj["id"])

    def upload(self, source: Any, path: str = ".") -> Dict[str, Any]:
        """Puts files into the workspace: ``source`` a local file or directory (sent as a tar:
        a directory's contents, a file under its name) or the bytes of a tar (plain, gzip or
        zstd), unpacked beneath the workspace directory ``path`` (made where missing).
        Returns ``{"path", "entries", "bytes"}``. Not an action of the agent: the clock does
        not move and the transcript does not record it. Refused whole (``PermissionDenied``,
        ``BadRequest``, ``PayloadTooLarge``) for ``..``, absolute names, links leading out,
        device nodes, FIFOs, a ``path`` through a link, or past the server's bounds."""
        return self.client._send(_wire.upload(self.id, path, _wire.tar_of(source)))

    def download(self, path: str = ".", dest: Any = None) -> Dict[str, Any]:
        """A tar of the workspace's ``path`` (a directory's contents, or the one file), as
        ``{"tar", "kind", "entries", "skipped"}``; with ``dest`` (a local directory), also
        unpacked there with ``tarfile``'s ``data`` filter. Links are kept as links; sockets,
        FIFOs and devices are left out (``skipped``)."""
        got = self.client._send(_wire.download(self.id, path))
        if dest is not None:
            import io
            import tarfile

            with tarfile.open(fileobj=io.BytesIO(got["tar"])) as tar:
                tar.extractall(dest, filter="data")
        return got

    def agent_turn(self) -> Dict[str, Any]:
        """Runs the current turn's prompt through the session's agent (OpenClaw, pointed at the
        model URL given at creation), which may take minutes; returns the turn's report and the
        run so far (``turns``, ``tool_calls``, ``transcript_events``, ...). The transcript is then
        OpenClaw's own. ``InvalidTransition`` when the session has no agent or already ran this
        turn (``next_turn()`` first)."""
        return self.client._send(_wire.agent_turn(self.id))

    def next_turn(self) -> Optional[str]:
        """Moves to the next prompt of the task and returns it, or ``None`` after the last."""
        try:
            obj = self.client._send(_wire.next_turn(self.id))
        except InvalidTransition:
            # 409 past the last prompt: the task has no more prompts.
            return None
        return self._moved_on(obj)

    def fork(self) -> "Session":
        """A new session starting from this one's workspace, action index and turn."""
        obj = self.client._send(_wire.fork(self.id))
        child = Session(self.client, self._fork_info(obj))
        child.turn = self.turn
        return child

    def verify(self) -> Verdict:
        """Scores the workspace as it is now (the session stays open)."""
        return Verdict.from_json(self.client._send(_wire.verify(self.id)))

    def diff(self) -> Dict[str, Any]:
        """What changed so far: ``{"added": [...], "modified": [...], "deleted": [...]}``."""
        return self.client._send(_wire.diff(self.id))

    def close(self) -> None:
        """Ends the session; closing a session that is already gone is not an error."""
        if self.closed:
            return
        try:
            self.client._send(_wire.close(self.id))
        except SessionNotFound:
            pass
        self.closed = True

    def __enter__(self) -> "Session":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()
