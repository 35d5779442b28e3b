"""``EnvcraftPool``: one ``envcraft serve`` per Ray node, sessions spread over them.

Each server runs as the subprocess of a Ray actor pinned to its node
(``NodeAffinitySchedulingStrategy``); the actor reads the server's ``listening on
http://ADDR`` line and reports a URL other nodes can reach (the node's IP when the server
listens on ``0.0.0.0``). ``pool.create(task)`` asks every server's ``/readyz`` and opens the
session on the one holding the fewest sessions. ``ray`` is imported only when a pool starts,
so ``envcraft`` works without it.
"""

from __future__ import annotations

import os
import queue
import subprocess
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import _wire
from ._wire import Task
from .client import DEFAULT_TIMEOUT, Client, Session
from .errors import CapacityExceeded, Draining, EnvcraftError, TooManySessions, TransportError

LISTENING_PREFIX = "listening on "

__all__ = ["EnvcraftPool", "ServerProcess", "parse_listening_line", "reachable_url", "pick_server"]


def parse_listening_line(line: str) -> Optional[str]:
    """The URL of a ``listening on http://ADDR`` line, or ``None`` for any other line."""
    line = line.strip()
    if not line.startswith(LISTENING_PREFIX):
        return None
    url = line[len(LISTENING_PREFIX):].strip()
    return url if url.startswith(("http://", "https://")) else None


def reachable_url(url: str, node_ip: str) -> str:
    """``url`` with a wildcard listen address (``0.0.0.0``, ``[::]``) replaced by ``node_ip``."""
    for wildcard in ("0.0.0.0", "[::]"):
        prefix = f"http://{wildcard}:"
        if url.startswith(prefix):
            host = f"[{node_ip}]" if ":" in node_ip else node_ip
            return f"http://{host}:" + url[len(prefix):]
    return url


def pick_server(loads: Sequence[Tuple[int, Optional[Dict[str, Any]]]]) -> List[int]:
    """The servers to try, best first: ``loads`` is ``(index, readyz answer or None)``;
    servers that did not answer are left out, full ones (sessions >= max_sessions) go last."""
    ranked = []
    for index, ready in loads:
        if ready is None:
            continue
        sessions = int(ready.get("sessions", 0))
        max_sessions = ready.get("max_sessions")
        full = max_sessions is not None and sessions >= int(max_sessions)
        ranked.append((full, sessions, index))
    return [index for _, _, index in sorted(ranked)]


class ServerProcess:
    """An ``envcraft serve`` subprocess and its URL: the body of the Ray actor, usable alone.

    ``command`` is the argv prefix (``["envcraft"]`` or ``["/path/envcraft"]``); ``serve
    --listen LISTEN`` and ``args`` follow. Startup waits for the listening line at most
    ``startup_timeout`` seconds; the server's later output is drained so it never blocks.
    """

    def __init__(
        self,
        command: Sequence[str] = ("envcraft",),
        args: Sequence[str] = (),
        listen: str = "0.0.0.0:0",
        node_ip: Optional[str] = None,
        startup_timeout: float = 60.0,
        env: Optional[Dict[str, str]] = None,
    ) -> None:
        argv = [*command, "serve", "--listen", listen, *args]
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=None,  # the server's logs go where the actor's go
            text=True,
            env={**os.environ, **(env or {})},
        )
        lines: "queue.Queue[Optional[str]]" = queue.Queue()
        threading.Thread(target=self._drain, args=(lines,), daemon=True).start()
        deadline = time.monotonic() + startup_timeout
        url = None
        seen: List[str] = []
        while url is None:
            left = deadline - time.monotonic()
            try:
                line = lines.get(timeout=max(0.0, left)) if left > 0 else None
            except queue.Empty:
                line = None
            if line is None:
                self.stop()
                raise RuntimeError(
                    f"{' '.join(argv)}: no 'listening on' line within {startup_timeout}s "
                    f"(exit code {self.proc.poll()}, stdout: {seen[-5:]})"
                )
            seen.append(line.rstrip())
            url = parse_listening_line(line)
        self.url = reachable_url(url, node_ip or _local_ip())

    def _drain(self, lines: "queue.Queue[Optional[str]]") -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            lines.put(line)
        lines.put(None)

    def get_url(self) -> str:
        return self.url

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, grace: float = 10.0) -> Optional[int]:
        """Stops the server (SIGTERM: it drains; SIGKILL after ``grace`` seconds)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def _local_ip() -> str:
    try:
        import ray

        return str(ray.util.get_node_ip_address())
    except Exception:  # not in Ray: a standalone ServerProcess
        return "127.0.0.1"


class EnvcraftPool:
    """One ``envcraft serve`` per alive Ray node (or per node id in ``node_ids``).

    ``command`` is the server binary as argv (it must exist on every node), ``args`` the
    extra ``serve`` arguments (``--workspaces``, ``--skills``, ``--token``...), ``token`` the
    bearer token the clients send. ``ray.init()`` must have been called. ``close()`` (or
    ``with``) stops the servers.
    """

    def __init__(
        self,
        command: Union[str, Sequence[str]] = "envcraft",
        args: Sequence[str] = (),
        token: Optional[str] = None,
        node_ids: Optional[Sequence[str]] = None,
        listen: str = "0.0.0.0:0",
        startup_timeout: float = 60.0,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = 3,
        actor_options: Optional[Dict[str, Any]] = None,
    ) -> None:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        argv = [command] if isinstance(command, str) else list(command)
        if node_ids is None:
            node_ids = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
        if not node_ids:
            raise RuntimeError("no alive Ray node to start an envcraft server on")
        actor_cls: Any = ray.remote(ServerProcess)
        options: Dict[str, Any] = {"num_cpus": 0, **(actor_options or {})}
        self._actors: List[Any] = [
            actor_cls.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
                **options,
            ).remote(argv, list(args), listen, None, startup_timeout)
            for node_id in node_ids
        ]
        try:
            self.urls: List[str] = ray.get([a.get_url.remote() for a in self._actors])
        except Exception:
            self.close()
            raise
        self.node_ids = list(node_ids)
        self.clients = [
            Client(url, token=token, timeout=timeout, max_retries=max_retries) for url in self.urls
        ]
        # Creation goes to the next server at once rather than waiting for a full one.
        self._create_clients = [
            Client(url, token=token, timeout=timeout, max_retries=0) for url in self.urls
        ]

    def loads(self) -> List[Tuple[int, Optional[Dict[str, Any]]]]:
        """Each server's ``/readyz`` answer (``None`` for one that did not answer)."""
        out: List[Tuple[int, Optional[Dict[str, Any]]]] = []
        for i, client in enumerate(self.clients):
            try:
                out.append((i, client.ready()))
            except EnvcraftError:
                out.append((i, None))
        return out

    def create(self, task: Task, base_time: Optional[str] = None, seed: Optional[int] = None) -> Session:
        """A session of ``task`` (``"ENV/ID"`` or an inline task: see ``Client.create``) on the
        server with the fewest sessions; a server that is full (or out of capacity), draining or
        unreachable is passed over for the next. When every one is, the last error is raised
        (``TooManySessions``: try again later). A bad ``seed`` or ``task`` raises before any
        server is asked."""
        _wire.checked_task(task)
        _wire.checked_seed(seed)
        order = pick_server(self.loads())
        if not order:
            raise TransportError("transport", "no envcraft server of the pool answers /readyz")
        last: Optional[EnvcraftError] = None
        for i in order:
            try:
                session = self._create_clients[i].create(task, base_time, seed)
            except (TooManySessions, CapacityExceeded, Draining, TransportError) as e:
                last = e
                continue
            session.client = self.clients[i]  # its calls retry lock_timeout as configured
            return session
        assert last is not None
        raise last

    def close(self) -> None:
        """Closes the clients' idle connections and stops the servers."""
        import ray

        for client in getattr(self, "clients", []) + getattr(self, "_create_clients", []):
            client.close()
        for actor in getattr(self, "_actors", []):
            try:
                ray.get(actor.stop.remote())
                ray.kill(actor)
            except Exception:  # already dead with its node
                pass
        self._actors = []

    def __enter__(self) -> "EnvcraftPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
