"""The errors the envcraft server answers with, as one exception hierarchy.

The server's error body is ``{"error": {"category": C, "message": M}}``; the category picks
the class (``CATEGORY_ERRORS``), the HTTP status is kept, and ``Retry-After`` (429, 503)
becomes ``retry_after`` in seconds. Failures that never reached the server, or answers that
are not the server's JSON, are ``TransportError`` and ``ProtocolError``.
"""

from __future__ import annotations

import json
from typing import Dict, Mapping, Optional, Type

__all__ = [
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
    "CATEGORY_ERRORS",
    "error_from_response",
    "parse_retry_after",
]


class EnvcraftError(Exception):
    """An error answered by the server (or met on the way to it).

    ``category`` is the server's stable category (``"session_not_found"``, ...),
    ``message`` its agent-safe message, ``status`` the HTTP status (``None`` when no answer
    came), ``retry_after`` the seconds the server asked to wait (``None`` when it did not).
    """

    def __init__(
        self,
        category: str,
        message: str,
        status: Optional[int] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        super().__init__(f"{category}: {message}" + (f" (HTTP {status})" if status else ""))
        self.category = category
        self.message = message
        self.status = status
        self.retry_after = retry_after


class BadRequest(EnvcraftError):
    """400: the request was malformed (``bad_request``)."""


class MissingField(BadRequest):
    """400: a required field was missing (``missing_field``)."""


class Unauthorized(EnvcraftError):
    """401: no or a wrong bearer token."""


class NotFound(EnvcraftError):
    """404: the session or task does not exist."""


class SessionNotFound(NotFound):
    """404: no such session (never created, or closed)."""


class TaskNotFound(NotFound):
    """404: no such task under the server's workspaces."""


class ForbiddenHost(EnvcraftError):
    """403: the request's ``Host`` or ``Origin`` does not name the server (its guard against
    DNS rebinding); reach it by a loopback name or its listen address, or start it with
    ``--allow-host NAME``."""


class PermissionDenied(EnvcraftError):
    """403 ``permission``: a file transfer reaches outside the workspace (``..``, a link
    leading out, an absolute path elsewhere) or carries what is refused (a device node)."""


class ImageNotFound(EnvcraftError):
    """503: the task's environment runs over an image the server's store does not hold."""


class AgentNotInstalled(EnvcraftError):
    """503: the session asks for an agent (OpenClaw) the server has no install of (``make
    openclaw``, or the server's ``--openclaw-dir``)."""


class InvalidTransition(EnvcraftError):
    """409: the session cannot do that now (e.g. ``next_turn`` after the last turn)."""


class PayloadTooLarge(EnvcraftError):
    """413: the request body is over the server's limit."""


class TooManySessions(EnvcraftError):
    """429: the server holds its maximum of sessions; retry after ``retry_after``."""


class CapacityExceeded(EnvcraftError):
    """503: the server's machine has no room for another session (descriptors, processes or
    memory: the message names which); no session was made. Retried after ``retry_after``, as
    ``TooManySessions`` is; close sessions or use another server."""


class LockTimeout(EnvcraftError):
    """503: the session's lock was busy for the whole bounded wait; retry after ``retry_after``."""


class Draining(EnvcraftError):
    """503: the server is shutting down and takes no new work."""


class ServerTimeout(EnvcraftError):
    """504: the server gave up on the request within its own deadline."""


class InternalError(EnvcraftError):
    """500: the server failed; the details are in its log, never in the answer."""


class TransportError(EnvcraftError):
    """The request did not get an answer: connection refused or reset, client timeout."""


class AnswerLost(TransportError):
    """The connection ended after a non-idempotent request (a POST: a tool call, a new
    session, a turn, a fork) was sent and before its answer: the server may have run it, so
    the client did not send it again. Whether it ran is for the caller to find out (a tool
    call shows in the session's ``action_index`` and ``diff``)."""


class ProtocolError(EnvcraftError):
    """An answer that is not the server's JSON (a proxy's page, a truncated body)."""


class LocalServerError(EnvcraftError):
    """``Client.local()`` could not find or start its private ``envcraft serve``
    (category ``local_server``; ``message`` says why, with the end of its standard error)."""


class NotScored(EnvcraftError):
    """A verdict has no reward because a part of the task's verifier did not run (category
    ``not_scored``: an LLM judge the server has no ``--judge-url`` for, or one that gave no
    score); ``message`` names the parts and why. Raised by ``Verdict.score()`` and the trainer
    adapters, which need a number: a missing score is never passed on as 0."""



CATEGORY_ERRORS: Dict[str, Type[EnvcraftError]] = {
    "bad_request": BadRequest,
    "missing_field": MissingField,
    "unauthorized": Unauthorized,
    "session_not_found": SessionNotFound,
    "task_not_found": TaskNotFound,
    "invalid_transition": InvalidTransition,
    "forbidden_host": ForbiddenHost,
    "image_not_found": ImageNotFound,
    "permission": PermissionDenied,
    "not_found": NotFound,
    "too_large": PayloadTooLarge,
    "invalid_argument": BadRequest,
    "agent_not_installed": AgentNotInstalled,
    "payload_too_large": PayloadTooLarge,
    "too_many_sessions": TooManySessions,
    "capacity": CapacityExceeded,
    "lock_timeout": LockTimeout,
    "draining": Draining,
    "timeout": ServerTimeout,
    "internal": InternalError,
}

# When the body names no known category (a proxy answered, or a newer server), the status
# still says what kind of failure it was.
_STATUS_ERRORS: Dict[int, Type[EnvcraftError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: ForbiddenHost,
    404: NotFound,
    409: InvalidTransition,
    413: PayloadTooLarge,
    429: TooManySessions,
    500: InternalError,
    504: ServerTimeout,
}


def parse_retry_after(value: Optional[str]) -> Optional[float]:
    """Seconds from a ``Retry-After`` header: delta-seconds only (the server sends those);
    an HTTP date or garbage gives ``None`` (the caller's own backoff applies)."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    if seconds != seconds or seconds < 0:  # NaN or negative
        return None
    return seconds


def error_from_response(
    status: int, body: bytes, headers: Mapping[str, str]
) -> EnvcraftError:
    """The exception for a non-2xx answer. ``headers`` keys must be lower-case."""
    retry_after = parse_retry_after(headers.get("retry-after"))
    category: Optional[str] = None
    message = ""
    try:
        parsed = json.loads(body.decode("utf-8"))
        err = parsed.get("error") if isinstance(parsed, dict) else None
        if isinstance(err, dict):
            if isinstance(err.get("category"), str):
                category = err["category"]
            if isinstance(err.get("message"), str):
                message = err["message"]
    except (UnicodeDecodeError, ValueError):
        pass
    if category is None:
        text = body[:200].decode("utf-8", "replace").strip()
        cls = _STATUS_ERRORS.get(status, ProtocolError)
        return cls(
            f"http_{status}",
            message or text or "answer without an error body",
            status,
            retry_after,
        )
    cls = CATEGORY_ERRORS.get(category) or _STATUS_ERRORS.get(status, EnvcraftError)
    return cls(category, message, status, retry_after)
