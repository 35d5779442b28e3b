"""The synchronous client: ``Client`` talks to one server, ``Session`` is one live session.

Standard library only (``urllib.request``); every request is sent as the plan from
``_wire`` says and retried under ``RetryPolicy``.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from types import TracebackType
from typing import Any, Callable, Dict, List, Optional, Type

from . import _wire
from ._wire import RetryPolicy, SessionInfo, Verdict
from .errors import EnvcraftError, InvalidTransition, ProtocolError, SessionNotFound, TransportError, error_from_response

# Above the server's own request deadline (`--request-timeout`, 300 s by default), so its 504
# arrives before the client gives up.
DEFAULT_TIMEOUT = 330.0


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A redirect would resend a POST (a tool call) somewhere else; the server never sends one.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class Client:
    """A connection to one ``envcraft serve``.

    ``url`` is the server's base URL (``http://127.0.0.1:8080``), ``token`` the bearer token
    when the server requires one, ``timeout`` the seconds one request may take (a tool call
    runs a command: keep it above the policy's wall-clock limit), ``max_retries`` how often a
    ``lock_timeout`` or ``too_many_sessions`` answer is retried (honouring ``Retry-After``).
    """

    def __init__(
        self,
        url: str,
        token: Optional[str] = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = 3,
        retry: Optional[RetryPolicy] = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.retry = retry if retry is not None else RetryPolicy(max_retries=max_retries)
        self._sleep = sleep
        # No proxies from the environment: the server is on this host or this cluster's
        # network, and the async client (which knows no proxies) must reach the same place.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect())

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

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

    def create(self, task: str, base_time: Optional[str] = None) -> "Session":
        """A new session of ``task`` (``"ENV/ID"``); ``base_time`` (RFC 3339) overrides the
        task's clock."""
        info = SessionInfo.from_created(self._send(_wire.create_session(task, base_time)))
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
        http_req = urllib.request.Request(
            self.url + req.path,
            data=req.encoded_body(),
            headers=_wire.headers_for(req, self.token),
            method=req.method,
        )
        try:
            with self._opener.open(http_req, timeout=self.timeout) as resp:
                status = resp.status
                body = resp.read()
        except urllib.error.HTTPError as e:
            body = e.read() if e.fp is not None else b""
            headers = {k.lower(): v for k, v in e.headers.items()} if e.headers else {}
            raise error_from_response(e.code, body, headers) from None
        except urllib.error.URLError as e:
            raise TransportError("transport", f"{req.method} {self.url}{req.path}: {e.reason}") from None
        except (OSError, ValueError) as e:  # timeouts, resets mid-body, http.client errors
            raise TransportError("transport", f"{req.method} {self.url}{req.path}: {e}") from None
        if not 200 <= status < 300:
            raise ProtocolError("protocol", f"unexpected HTTP {status}", status)
        return _wire.decode_json(status, body)


class Session:
    """One live session on the server. Use it as a context manager to close it for sure.

    ``prompt`` is the current turn's prompt (``next_turn`` moves it on), ``tools`` the
    OpenAI function-calling tools as the server gives them, ``action_index`` the server's
    counter after the last call.
    """

    def __init__(self, client: Client, info: SessionInfo) -> None:
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
        return f"Session({self.id!r}, task={self.task!r}, action_index={self.action_index})"

    def call(self, tool: str, /, **args: Any) -> Dict[str, Any]:
        """Calls ``tool`` with ``args``; returns its result (``{"ok": bool, ...}``). A tool
        that fails answers ``ok: false`` with an error, it does not raise."""
        obj = self.client._send(_wire.call_tool(self.id, tool, args))
        result = _wire.field_of(obj, "result")
        if "action_index" in obj:
            self.action_index = int(obj["action_index"])
        return dict(result)

    def next_turn(self) -> Optional[str]:
        """Moves to the next prompt of the task and returns it, or ``None`` after the last."""
        try:
            obj = self.client._send(_wire.next_turn(self.id))
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

    def fork(self) -> "Session":
        """A new session starting from this one's workspace, action index and turn."""
        obj = self.client._send(_wire.fork(self.id))
        child = Session(self.client, self._info(str(_wire.field_of(obj, "session_id", 201))))
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

    def _info(self, session_id: str) -> SessionInfo:
        return SessionInfo(
            session_id, self.task, self.prompt, self.docs, self.tools, self.action_index
        )

    def __enter__(self) -> "Session":
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.close()
