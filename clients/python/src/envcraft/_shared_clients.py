"""One ``Client`` per server per process, for adapters whose trainer makes environments by
name with a config (SkyRL's ``skyrl_gym.make``, verl's tool config): every environment or tool
of a process that names the same ``url`` shares one client and its kept-alive connections; with
no ``url``, they share one private server (``Client.local``), stopped at the process's exit.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Dict, Mapping, Optional, Tuple

from .client import Client

# The keys of an adapter's config that reach the client (url given) or the private server.
CLIENT_KEYS = ("token", "timeout", "max_retries", "max_connections", "idle_timeout")
LOCAL_KEYS = ("binary", "workspaces", "skills", "state_dir", "serve_args", "start_timeout")

_lock = threading.Lock()
_clients: Dict[Tuple[Optional[str], int], Client] = {}


def shared_client(config: Mapping[str, Any]) -> Client:
    """The process's client of ``config["url"]`` (``None`` or absent: of its private server,
    started with ``config``'s ``binary``, ``workspaces``, ``skills``, ... the first time)."""
    url = config.get("url")
    key = (str(url) if url else None, os.getpid())
    with _lock:
        client = _clients.get(key)
        if client is None:
            options = {k: config[k] for k in CLIENT_KEYS if config.get(k) is not None}
            if url:
                client = Client(str(url), **options)
            else:
                local = {k: config[k] for k in LOCAL_KEYS if config.get(k) is not None}
                if "serve_args" in local:
                    local["serve_args"] = [str(a) for a in local["serve_args"]]
                client = Client.local(**local, **options)
            _clients[key] = client
        return client
