"""``Client.local()`` and ``AsyncClient.local()``: a private ``envcraft serve`` started for the
caller on a free loopback port, and nothing left of it after close or exit (no process of its
tree, no state directory unless one was asked for)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Set

import pytest

import envcraft
from conftest import REPO, envcraft_binary, require, serve_available

WORKSPACES = REPO / "workspaces"
SKILLS = REPO / "skills"


@pytest.fixture
def binary() -> Path:
    found = envcraft_binary()
    why = serve_available(found)
    require(why is None, why or "")
    assert found is not None
    return found


def parents() -> Dict[int, int]:
    out: Dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # The command name (field 2) may hold spaces and parentheses: fields start after the last ")".
        out[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    return out


def tree_of(pid: int) -> Set[int]:
    """``pid`` and every process descended from it, now."""
    ppid = parents()
    found, grew = {pid}, True
    while grew:
        more = {p for p, parent in ppid.items() if parent in found} - found
        grew = bool(more)
        found |= more
    return found


def alive(pids: Set[int]) -> List[int]:
    still = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            still.append(pid)
    return still


def test_local_serves_a_session_and_leaves_nothing(binary: Path) -> None:
    with envcraft.Client.local(binary, workspaces=WORKSPACES, skills=SKILLS) as client:
        server = client.server
        assert server is not None and server.running()
        assert client.url.startswith("http://127.0.0.1:")
        state_dir = Path(server.state_dir)
        session = client.create("example/extract-todos")
        session.call("exec", command="sleep 300", background=True)  # a process in the sandbox
        session.call("write", path="notes/greeting.txt", content="hello\n")
        tree = tree_of(server.pid)
        assert len(tree) > 1, "the session's sandbox should be a descendant of the server"
        assert state_dir.is_dir() and any(state_dir.iterdir())
    assert not server.running()
    assert alive(tree) == [], f"left running after close: {alive(tree)}"
    assert not state_dir.exists(), f"the temporary state directory {state_dir} was left"
    client.close()  # a second close is not an error


def test_local_keeps_a_state_dir_it_was_given(binary: Path, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    with envcraft.Client.local(binary, workspaces=WORKSPACES, skills=SKILLS, state_dir=state, timeout=60) as client:
        assert client.timeout == 60  # the Client options pass through
        with client.create("example/extract-todos") as s:
            assert s.verify().reward == 0.0
    assert client.server is not None and not client.server.running()
    assert state.is_dir()


def test_two_local_servers_get_their_own_ports(binary: Path) -> None:
    with envcraft.Client.local(binary, workspaces=WORKSPACES) as a, envcraft.Client.local(binary, workspaces=WORKSPACES) as b:
        assert a.url != b.url
        assert a.health() == b.health() == {"status": "ok"}


def test_a_missing_binary_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ENVCRAFT_BIN", str(tmp_path / "nope"))
    with pytest.raises(envcraft.LocalServerError) as e:
        envcraft.Client.local()
    assert e.value.category == "local_server"
    assert "ENVCRAFT_BIN" in e.value.message and "nope" in e.value.message


def test_a_server_that_cannot_start_says_why_and_leaves_nothing(binary: Path) -> None:
    before = set(os.listdir(tempfile.gettempdir()))
    with pytest.raises(envcraft.LocalServerError) as e:
        envcraft.Client.local(binary, serve_args=["--max-sessions", "many"])
    assert "exited with status" in e.value.message
    assert "many" in e.value.message, e.value.message  # the server's own complaint is quoted
    left = {n for n in set(os.listdir(tempfile.gettempdir())) - before if n.startswith("envcraft-local-")}
    assert not left, f"state directories left: {left}"


def test_async_local(binary: Path) -> None:
    async def main() -> Set[int]:
        async with await envcraft.AsyncClient.local(binary, workspaces=WORKSPACES, skills=SKILLS) as client:
            assert client.server is not None
            async with await client.create("example/extract-todos") as s:
                result = await s.call("write", path="notes/greeting.txt", content="hi\n")
                assert result["ok"], result
                tree = tree_of(client.server.pid)
        assert not client.server.running()
        return tree

    tree = asyncio.run(main())
    assert alive(tree) == []


def test_a_server_not_closed_is_stopped_at_interpreter_exit(binary: Path) -> None:
    script = f"""
import json, sys
sys.path.insert(0, {str(REPO / "clients" / "python" / "src")!r})
import envcraft
client = envcraft.Client.local({str(binary)!r}, workspaces={str(WORKSPACES)!r}, skills={str(SKILLS)!r})
s = client.create("example/extract-todos")
s.call("exec", command="sleep 300", background=True)
print(json.dumps({{"pid": client.server.pid, "state": client.server.state_dir}}), flush=True)
"""
    # The child's own tree is read by the child's parent (us) only after it exits, so the
    # sandbox's processes are found by what the server started: read them while it runs.
    proc = subprocess.Popen([sys.executable, "-c", script + "import time; time.sleep(1.5)\n"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = json.loads(proc.stdout.readline())
    tree = tree_of(first["pid"])
    assert len(tree) > 1
    assert proc.wait(60) == 0
    assert alive(tree) == [], f"left running after the interpreter exited: {alive(tree)}"
    assert not Path(first["state"]).exists()
