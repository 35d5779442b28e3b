"""HTTP/1.1 framing over persistent connections, as pure code shared by both clients.

What is decided here, without touching a socket (the clients only apply it):

- ``Endpoint``: the parts of the server's URL a request line and a connection need;
- ``request_bytes``: one request, ``Content-Length`` framed, keep-alive (HTTP/1.1's default);
- ``read_response``: a response reader written once as a generator that says what it needs
  next (a line, exactly N bytes, everything up to end of stream) and is fed those bytes by the
  sync or the asyncio client; it frames the body by ``Content-Length``, chunked or end of
  stream, and says whether the connection may carry another request;
- ``resend_decision``: whether a request that failed on the way may be sent again on a fresh
  connection (once), from where it failed, whether the connection was reused and the method;
- ``IdleConnections``: the bounded set of idle keep-alive connections a client keeps, which
  one the next request takes, which are too old, and which belong to another process or
  event loop (a fork's child, a second ``asyncio.run``) and must never be shared.

The server (axum over hyper) frames every answer, JSON and ``/metrics`` alike, by
``Content-Length`` and keeps idle connections open until it shuts down; chunked and
end-of-stream bodies are read anyway (a proxy in between may send them).
"""

from __future__ import annotations

import enum
import select
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, Generator, Generic, Hashable, List, Mapping, Optional, Tuple, TypeVar, Union
from urllib.parse import urlsplit

from .errors import ProtocolError

# An answer larger than this is not the server's (its biggest is a diff or a long tool result).
MAX_RESPONSE_BYTES = 256 * 1024 * 1024
MAX_HEADER_LINE = 64 * 1024
MAX_HEADERS = 256

# Methods whose second sending does what the first did (RFC 9110 9.2.2): a request of one of
# these that got no answer may be sent again. POST (a tool call, a new session, a turn, a
# fork, a verification) is never among them.
IDEMPOTENT_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})


@dataclass(frozen=True)
class Endpoint:
    """Where requests go: ``scheme``, ``host`` and ``port`` to connect to, ``host_header``
    to send, ``prefix`` (the URL's path) before every request path."""

    scheme: str
    host: str
    port: int
    host_header: str
    prefix: str

    @classmethod
    def parse(cls, url: str) -> "Endpoint":
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return cls(parts.scheme, parts.hostname, port, parts.netloc, parts.path.rstrip("/"))


def request_bytes(
    endpoint: Endpoint, method: str, path: str, headers: Mapping[str, str], body: Optional[bytes]
) -> bytes:
    """One request as sent: no ``Connection`` header (HTTP/1.1 keeps the connection open),
    ``Content-Length`` whenever there is a body or the method usually has one."""
    head = f"{method} {endpoint.prefix}{path} HTTP/1.1\r\nHost: {endpoint.host_header}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    if body is not None or method in ("POST", "PUT"):
        head += f"Content-Length: {len(body or b'')}\r\n"
    return (head + "\r\n").encode("latin-1") + (body or b"")


@dataclass(frozen=True)
class Response:
    """One answer: ``status``, lower-cased ``headers``, ``body``, and ``reusable``: whether the
    connection it came on may carry the next request (HTTP/1.1 without ``Connection: close``,
    the body framed by length or chunks)."""

    status: int
    headers: Dict[str, str]
    body: bytes
    reusable: bool


class Line:
    """Need: the next line, with its CRLF (the reader caps it at ``MAX_HEADER_LINE``)."""


@dataclass(frozen=True)
class Exactly:
    """Need: exactly ``n`` bytes."""

    n: int


@dataclass(frozen=True)
class UntilEof:
    """Need: every byte up to the end of the stream, at most ``limit`` (more is refused)."""

    limit: int


LINE = Line()
Need = Union[Line, Exactly, UntilEof]
ResponseReader = Generator[Need, bytes, Response]


def read_response(method: str) -> ResponseReader:
    """Reads one answer to a ``method`` request. Send it the bytes each need asks for; it
    returns the ``Response`` (``StopIteration.value``) or raises ``ProtocolError``."""
    while True:
        status_line = (yield LINE).decode("latin-1").rstrip("\r\n")
        parts = status_line.split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise ProtocolError("protocol", f"bad status line {status_line[:80]!r}")
        version, status = parts[0], int(parts[1])
        headers: Dict[str, str] = {}
        for _ in range(MAX_HEADERS + 1):
            line = (yield LINE).decode("latin-1").rstrip("\r\n")
            if not line:
                break
            name, sep, value = line.partition(":")
            if not sep:
                raise ProtocolError("protocol", f"bad header line {line[:80]!r}")
            headers[name.strip().lower()] = value.strip()
        else:
            raise ProtocolError("protocol", f"more than {MAX_HEADERS} header lines")
        if 100 <= status < 200:  # an interim answer (100 Continue): the real one follows
            continue
        break
    tokens = {t.strip().lower() for t in headers.get("connection", "").split(",")}
    if version == "HTTP/1.1":
        reusable = "close" not in tokens
    else:  # HTTP/1.0 closes unless it says otherwise
        reusable = "keep-alive" in tokens
    if method == "HEAD" or status in (204, 304):
        return Response(status, headers, b"", reusable)
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return Response(status, headers, (yield from _read_chunked()), reusable)
    if "content-length" in headers:
        try:
            length = int(headers["content-length"])
        except ValueError:
            raise ProtocolError("protocol", "bad Content-Length") from None
        if length < 0 or length > MAX_RESPONSE_BYTES:
            raise ProtocolError("protocol", f"answer of {length} bytes refused")
        return Response(status, headers, (yield Exactly(length)), reusable)
    # Delimited by the end of the stream: the connection is spent.
    body = yield UntilEof(MAX_RESPONSE_BYTES)
    return Response(status, headers, body, False)


def _read_chunked() -> Generator[Need, bytes, bytes]:
    body = bytearray()
    while True:
        size_line = (yield LINE).decode("latin-1").strip()
        try:
            size = int(size_line.split(";", 1)[0], 16)
        except ValueError:
            raise ProtocolError("protocol", f"bad chunk size {size_line[:40]!r}") from None
        if size == 0:
            for _ in range(MAX_HEADERS + 1):  # trailers, up to the empty line
                if (yield LINE) == b"\r\n":
                    return bytes(body)
            raise ProtocolError("protocol", f"more than {MAX_HEADERS} trailer lines")
        if size < 0 or len(body) + size > MAX_RESPONSE_BYTES:
            raise ProtocolError("protocol", "answer too large")
        body += yield Exactly(size)
        if (yield Exactly(2)) != b"\r\n":
            raise ProtocolError("protocol", "chunk not followed by CRLF")


class FailedAt(enum.Enum):
    """Where a request's exchange broke off."""

    WRITING = "writing"  # sending the request: the server cannot have a whole request
    NO_ANSWER = "no answer"  # sent, then the connection ended before any byte came back
    ANSWERING = "answering"  # part of the answer came, then the connection ended


def resend_decision(method: str, reused: bool, failed_at: FailedAt) -> Tuple[bool, str]:
    """Whether a request that broke off at ``failed_at`` may go once more on a fresh connection,
    and why (said in the error when it may not).

    - Writing on a reused idle connection failed: the server had closed it before our request
      (the classic stale keep-alive); nothing ran, any method goes again.
    - No byte came back (or the write failed on a fresh connection): only an idempotent method
      goes again; a POST may have run (a tool call executed, a session made) and is never
      resent blindly.
    - Part of the answer came: the request ran; nothing goes again.
    """
    if failed_at is FailedAt.WRITING and reused:
        return True, "the idle connection was closed by the server before the request"
    if failed_at is FailedAt.ANSWERING:
        return False, "the connection ended in the middle of the answer"
    if method in IDEMPOTENT_METHODS:
        return True, f"{method} is idempotent and got no answer"
    return False, (
        f"the connection ended {'while sending' if failed_at is FailedAt.WRITING else 'after sending'} "
        f"the request and before any answer; the server may have run this {method}, "
        "so it was not sent again"
    )


def readable_now(fd: int) -> bool:
    """Whether the socket ``fd`` has something to read (bytes, end of stream, an error) right
    now, without waiting: on an idle keep-alive connection, a sign the server closed it. One
    ``poll`` (``select`` cannot watch descriptors above 1023); ``True`` when it cannot tell."""
    try:
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            return bool(poller.poll(0))
        readable, _, _ = select.select([fd], [], [], 0)
        return bool(readable)
    except (OSError, ValueError):
        return True


C = TypeVar("C")


class IdleConnections(Generic[C]):
    """The idle keep-alive connections of one client: at most ``max_idle``, none idle for
    longer than ``idle_timeout`` seconds, each handed to one request at a time.

    A connection is taken (most recently used first: the likeliest to be alive) and given
    back after a complete answer; only then can another request take it, so two requests
    never share one. Connections belong to an ``owner`` (the process id, and for asyncio the
    event loop): taking from another owner's set returns those as ``foreign``, to be dropped,
    never used. ``close()`` empties the set and makes connections taken before it be closed
    when given back. Thread-safe; the I/O (closing, checking a socket) is the caller's.
    """

    def __init__(
        self, max_idle: int, idle_timeout: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if max_idle < 0:
            raise ValueError(f"max_connections must be >= 0, not {max_idle}")
        self.max_idle = max_idle
        self.idle_timeout = idle_timeout
        self._clock = clock
        self._lock = threading.Lock()
        self._idle: List[Tuple[C, float]] = []
        self._owner: Optional[Hashable] = None
        self.generation = 0

    def take(self, owner: Hashable) -> Tuple[Optional[C], List[C], List[C]]:
        """``(connection or None, expired, foreign)``: the caller closes ``expired`` and drops
        ``foreign`` (another process's or loop's) without touching them beyond that."""
        now = self._clock()
        with self._lock:
            foreign: List[C] = []
            if owner != self._owner:
                foreign = [c for c, _ in self._idle]
                self._idle = []
                self._owner = owner
            expired = [c for c, since in self._idle if now - since > self.idle_timeout]
            if expired:
                self._idle = [(c, s) for c, s in self._idle if now - s <= self.idle_timeout]
            conn = self._idle.pop()[0] if self._idle else None
            return conn, expired, foreign

    def give_back(self, conn: C, owner: Hashable, generation: int) -> bool:
        """Keeps ``conn`` for the next request; ``False``: the caller closes it (the set is
        full, was closed since ``generation``, or belongs to another owner now)."""
        with self._lock:
            if (
                generation != self.generation
                or owner != self._owner
                or len(self._idle) >= self.max_idle
            ):
                return False
            self._idle.append((conn, self._clock()))
            return True

    def close(self) -> List[C]:
        """Every idle connection, for the caller to close; connections out at a request are
        closed when given back."""
        with self._lock:
            idle = [c for c, _ in self._idle]
            self._idle = []
            self.generation += 1
            return idle

    def __len__(self) -> int:
        return len(self._idle)
