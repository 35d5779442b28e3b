"""envcraft: a client for ``envcraft serve``, the rollout server of sandboxed Claw-style tasks.

# Layout

- ``client``: ``Client`` and ``Session``, synchronous (HTTP/1.1 over ``socket``).
- ``aio``: ``AsyncClient`` and ``AsyncSession``, the asyncio twins (HTTP/1.1 over
  ``asyncio.open_connection``).
- ``errors``: ``EnvcraftError`` and one subclass per server error category.
- ``_wire``: the HTTP contract as pure functions (request plans, answer decoding, the retry
  policy), shared by both clients.
- ``_local_server``: a private ``envcraft serve`` on a free loopback port, for
  ``Client.local()`` and ``AsyncClient.local()``: found, started, waited for, stopped.
- ``_http1``: HTTP/1.1 on persistent connections as pure code (request bytes, the answer
  reader, when a request may be sent again, the bounded set of idle connections), shared by
  both clients, which only do the I/O.
- ``ray``: ``EnvcraftPool``, one server per Ray node (imports ``ray`` only when used).
- ``openenv``: ``EnvcraftSessionFactory``, OpenEnv's harness API over the same HTTP API (needs
  ``openenv-core``; imported only when used).
- ``mcp``: where an MCP client finds a session (URLs, the stdio command line).

No runtime dependencies beyond the standard library.
"""

from ._wire import RetryPolicy, Task, Verdict
from .aio import AsyncClient, AsyncSession
from .client import Client, Session
from .errors import (
    AnswerLost,
    BadRequest,
    CapacityExceeded,
    Draining,
    EnvcraftError,
    InternalError,
    InvalidTransition,
    LocalServerError,
    LockTimeout,
    NotScored,
    MissingField,
    NotFound,
    PayloadTooLarge,
    ProtocolError,
    ServerTimeout,
    SessionNotFound,
    TaskNotFound,
    ForbiddenHost,
    ImageNotFound,
    PermissionDenied,
    AgentNotInstalled,
    TooManySessions,
    TransportError,
    Unauthorized,
)

__version__ = "0.1.0"

__all__ = [
    "Client",
    "Session",
    "AsyncClient",
    "AsyncSession",
    "Verdict",
    "RetryPolicy",
    "Task",
    "EnvcraftError",
    "BadRequest",
    "MissingField",
    "Unauthorized",
    "NotFound",
    "SessionNotFound",
    "TaskNotFound",
    "ForbiddenHost",
    "ImageNotFound",
    "PermissionDenied",
    "AgentNotInstalled",
    "InvalidTransition",
    "PayloadTooLarge",
    "TooManySessions",
    "CapacityExceeded",
    "LockTimeout",
    "Draining",
    "ServerTimeout",
    "InternalError",
    "TransportError",
    "AnswerLost",
    "ProtocolError",
    "LocalServerError",
    "NotScored",
]
