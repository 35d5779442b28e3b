"""A private ``envcraft serve`` on a free loopback port, for ``Client.local()``.

``LocalServer.start`` finds the binary (``ENVCRAFT_BIN``, else the one this package's wheel
installed beside the interpreter, else ``envcraft`` on ``PATH``), starts it on
``127.0.0.1:0`` with a state directory of its own (a fresh temporary one unless one is given),
waits (bounded) for its ``listening on URL`` line, and ``stop`` ends it: ``SIGTERM`` (the
server closes its sessions and their sandboxes), ``SIGKILL`` past a bound, and the temporary
state directory removed. A server still running when the interpreter exits is stopped then.
Imports nothing of the package but its errors: both clients build on it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import weakref
from pathlib import Path
from typing import IO, List, Optional, Sequence, Tuple, Union

from .errors import LocalServerError

PathLike = Union[str, "os.PathLike[str]"]

# How long a server may take to print its "listening on" line (it checks the machine and
# loads the workspaces first), and how long it may take to stop on SIGTERM before SIGKILL.
DEFAULT_START_TIMEOUT = 60.0
STOP_TIMEOUT = 15.0


def find_binary() -> str:
    """``ENVCRAFT_BIN``, else the ``envcraft`` of this interpreter's scripts directory (where
    ``pip install envcraft`` puts it), else ``envcraft`` on ``PATH``; ``LocalServerError``
    naming each place looked when none is there."""
    looked: List[str] = []
    explicit = os.environ.get("ENVCRAFT_BIN")
    if explicit:
        if os.access(explicit, os.X_OK):
            return explicit
        raise LocalServerError("local_server", f"ENVCRAFT_BIN={explicit} is not an executable file")
    for scripts in _scripts_dirs():
        candidate = Path(scripts) / "envcraft"
        looked.append(str(candidate))
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    on_path = shutil.which("envcraft")
    if on_path:
        return on_path
    raise LocalServerError(
        "local_server",
        "no envcraft binary: set ENVCRAFT_BIN, install the envcraft wheel (it carries the binary), "
        f"or put envcraft on PATH (looked in {', '.join(looked)} and PATH)",
    )


def _scripts_dirs() -> List[str]:
    dirs = [sysconfig.get_path("scripts"), os.path.dirname(sys.executable)]
    user = sysconfig.get_path("scripts", f"{os.name}_user") if os.name == "posix" else None
    if user:
        dirs.append(user)
    return list(dict.fromkeys(d for d in dirs if d))


class LocalServer:
    """One ``envcraft serve`` this process started: ``url`` is where it listens, ``binary``
    the executable, ``state_dir`` its state directory, ``pid`` its process."""

    def __init__(self, proc: "subprocess.Popen[str]", url: str, binary: str, state_dir: str, owns_state_dir: bool, stderr: IO[bytes]) -> None:
        self.proc = proc
        self.binary = binary
        self.url = url
        self.state_dir = state_dir
        self.owns_state_dir = owns_state_dir
        self._stderr = stderr
        self._lock = threading.Lock()
        # At interpreter exit (or when collected) a server not stopped yet is stopped.
        self._finalizer = weakref.finalize(self, _stop, proc, state_dir if owns_state_dir else None, stderr)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @classmethod
    def start(
        cls,
        binary: Optional[PathLike] = None,
        workspaces: Optional[PathLike] = None,
        skills: Optional[PathLike] = None,
        state_dir: Optional[PathLike] = None,
        args: Sequence[str] = (),
        start_timeout: float = DEFAULT_START_TIMEOUT,
    ) -> "LocalServer":
        """Starts ``binary serve --listen 127.0.0.1:0``; ``workspaces``/``skills`` as the
        server's flags (else its own defaults: ``ENVCRAFT_WORKSPACES``, ``./workspaces``),
        ``state_dir`` kept after stop when given (else a temporary one, removed), ``args``
        more ``serve`` flags (``--max-sessions 64``)."""
        exe = str(binary) if binary is not None else find_binary()
        owns = state_dir is None
        state = tempfile.mkdtemp(prefix="envcraft-local-") if state_dir is None else os.fspath(state_dir)
        argv = [exe, "serve", "--listen", "127.0.0.1:0", "--state-dir", state]
        if workspaces is not None:
            argv += ["--workspaces", os.fspath(workspaces)]
        if skills is not None:
            argv += ["--skills", os.fspath(skills)]
        argv += list(args)
        stderr = tempfile.TemporaryFile()
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, text=True)
        except OSError as e:
            stderr.close()
            if owns:
                shutil.rmtree(state, ignore_errors=True)
            raise LocalServerError("local_server", f"cannot run {exe}: {e}") from None
        url, ended = _wait_listening(proc, start_timeout)
        if url is None:
            status = proc.poll()
            if status is None and ended:  # its standard output closed: it is exiting
                try:
                    status = proc.wait(STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    pass
            why = f"exited with status {status}" if status is not None else f"printed no 'listening on' line within {start_timeout}s"
            _stop(proc, state if owns else None, None)
            stderr.seek(0)
            tail = stderr.read()[-2000:].decode(errors="replace").strip()
            stderr.close()
            raise LocalServerError("local_server", f"{' '.join(argv)} {why}" + (f": {tail}" if tail else ""))
        return cls(proc, url, exe, state, owns, stderr)

    def running(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        """Ends the server and everything it started; idempotent."""
        with self._lock:
            self._finalizer()


def _wait_listening(proc: "subprocess.Popen[str]", bound: float) -> Tuple[Optional[str], bool]:
    """The URL of the server's ``listening on URL`` line (``None`` when it said none within
    ``bound`` seconds), and whether its standard output ended before. That output is drained
    after the line, so a server that prints more never blocks on a full pipe."""
    found: List[str] = []
    ended = threading.Event()
    done = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("listening on ") and not found:
                found.append(line[len("listening on ") :].strip())
                done.set()
        ended.set()
        done.set()

    threading.Thread(target=read, name="envcraft-local-stdout", daemon=True).start()
    done.wait(bound)
    return (found[0] if found else None), ended.is_set()


def _stop(proc: "subprocess.Popen[str]", state_dir: Optional[str], stderr: Optional[IO[bytes]]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()
    if stderr is not None:
        stderr.close()
    if state_dir is not None:
        shutil.rmtree(state_dir, ignore_errors=True)

