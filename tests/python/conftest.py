"""Fixtures of the Python client's tests: the fake server, and the real ``envcraft serve``.

The package is imported from ``clients/python/src`` unless an installed ``envcraft`` is
asked for (``ENVCRAFT_PY_INSTALLED=1``, after ``pip install ./clients/python``).

Skip loudly: a test that needs something missing (the ``serve`` subcommand, ``ray``) calls
``require`` which skips naming why, or fails when ``ENVCRAFT_TEST_REQUIRE=all``.
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Iterator, List, Optional

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))
if os.environ.get("ENVCRAFT_PY_INSTALLED") != "1":
    sys.path.insert(0, str(REPO / "clients" / "python" / "src"))

from fake_server import FakeServer  # noqa: E402


def require(ok: bool, why: str) -> None:
    """Skips the test (printing why) unless ``ENVCRAFT_TEST_REQUIRE=all``, then fails."""
    if ok:
        return
    if os.environ.get("ENVCRAFT_TEST_REQUIRE") == "all":
        pytest.fail(f"required but missing (ENVCRAFT_TEST_REQUIRE=all): {why}")
    print(f"skipping: {why}", file=sys.stderr)
    pytest.skip(why)


@pytest.fixture
def no_unclosed_connections() -> Iterator[None]:
    """Fails the test when a socket or transport it opened was left for the garbage collector
    (a client not closed, a connection leaked by the pool), whenever during the test or at
    its end it was collected."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        yield
        gc.collect()
    unclosed = [
        str(w.message)
        for w in caught
        if issubclass(w.category, ResourceWarning) and ("socket" in str(w.message) or "transport" in str(w.message))
    ]
    assert not unclosed, f"left open: {unclosed}"


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    server = FakeServer().start()
    yield server
    server.stop()


@pytest.fixture
def fake_with_token() -> Iterator[FakeServer]:
    server = FakeServer(token="s3cret").start()
    yield server
    server.stop()


def envcraft_binary() -> Optional[Path]:
    """``ENVCRAFT_BIN``, else a release build, else a debug build.

    Cargo builds for the host's target tuple (``.cargo/config.toml``), so the binaries are at
    ``target/<host tuple>/release/envcraft``; ``target/release/envcraft`` (a build without that
    configuration) is looked for too.
    """
    if os.environ.get("ENVCRAFT_BIN"):
        # Absolute: `make test` gives a path relative to the checkout, and some tests run the
        # binary from elsewhere (Harbor's trials, from their own working directory).
        return Path(os.environ["ENVCRAFT_BIN"]).resolve()
    for profile in ("release", "debug"):
        candidates = sorted((REPO / "target").glob(f"*/{profile}/envcraft"))
        for path in candidates + [REPO / "target" / profile / "envcraft"]:
            if path.exists():
                return path
    return None


def serve_available(binary: Optional[Path]) -> Optional[str]:
    """``None`` when ``binary serve`` exists, else why not."""
    if binary is None or not binary.exists():
        return "no envcraft binary (build with `cargo build --release`, or set ENVCRAFT_BIN)"
    probe = subprocess.run([str(binary), "serve", "--help"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return f"{binary} has no `serve` subcommand yet ({probe.stderr.strip().splitlines()[0] if probe.stderr.strip() else 'exit ' + str(probe.returncode)})"
    return None


class RealServer:
    """``envcraft serve --listen 127.0.0.1:0`` over the bundled workspaces and skills."""

    def __init__(self, binary: Path, extra: List[str]) -> None:
        self.state_dir = tempfile.mkdtemp(prefix="envcraft-py-state-")
        argv = [
            str(binary), "serve", "--listen", "127.0.0.1:0",
            "--state-dir", self.state_dir,
            "--workspaces", str(REPO / "workspaces"),
            "--skills", str(REPO / "skills"),
            *extra,
        ]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.url = self._wait_listening(argv, bound=60.0)

    def _wait_listening(self, argv: List[str], bound: float) -> str:
        found: List[str] = []
        done = threading.Event()

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                if line.startswith("listening on ") and not found:
                    found.append(line[len("listening on "):].strip())
                    done.set()
            done.set()

        threading.Thread(target=read, daemon=True).start()
        if not done.wait(bound) or not found:
            self.stop()
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise RuntimeError(f"{' '.join(argv)} printed no 'listening on' line within {bound}s: {err[-2000:]}")
        return found[0]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.state_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def real_server() -> Iterator[RealServer]:
    binary = envcraft_binary()
    why = serve_available(binary)
    require(why is None, why or "")
    assert binary is not None
    server = RealServer(binary, [])
    yield server
    server.stop()
