"""The ``envcraft`` wheel (issue 22): built here with maturin (``bindings = "bin"``, the root
pyproject.toml), installed into a fresh virtual environment with no Rust toolchain on PATH,
where ``envcraft doctor`` runs and ``Client.local()`` serves a session with the binary the wheel
installed; its metadata is what PyPI shows.

The build is the dev profile into target/wheel-build (its own cargo target directory, so the
tests' build is not thrown away; incremental after the first run); ``make dist`` builds the
release one. Needs maturin (``make test`` installs it into target/build-venv): a loud skip
without it, a failure under ``ENVCRAFT_TEST_REQUIRE=all``.
"""

from __future__ import annotations

import email
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, Iterator

import pytest

from conftest import REPO, require

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = None

MATURIN = REPO / "target" / "build-venv" / "bin" / "maturin"
WHEEL_TARGET = REPO / "target" / "wheel-build"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require(MATURIN.is_file(), f"maturin is not installed at {MATURIN} (make test installs it)")
    out = tmp_path_factory.mktemp("wheels")
    env = dict(os.environ, CARGO_TARGET_DIR=str(WHEEL_TARGET))
    proc = subprocess.run(
        [str(MATURIN), "build", "--profile", "dev", "--out", str(out), "--quiet"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    [built] = list(out.glob("envcraft-*.whl"))
    return built


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=300)
    subprocess.run([str(root / "bin" / "python"), "-m", "pip", "install", "-q", "--no-index", str(wheel)], check=True, timeout=600)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def bare_env(venv: Path) -> Dict[str, str]:
    """The venv's bin and the system's, nothing else: no cargo, no ENVCRAFT_BIN."""
    path = f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ENVCRAFT_", "CARGO", "RUSTUP", "PYTHON"))}
    env.update(PATH=path, HOME=os.environ.get("HOME", "/root"))
    assert shutil.which("cargo", path=path) is None and shutil.which("rustc", path=path) is None, f"a Rust toolchain on {path}"
    return env


def test_wheel_holds_the_client_and_the_binary(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.endswith(".data/scripts/envcraft") for n in names), names
    for module in ("__init__", "client", "aio", "trl", "skyrl", "verl", "_local_server"):
        assert f"envcraft/{module}.py" in names
    assert "envcraft/py.typed" in names
    assert re.search(r"-py3-none-manylinux_2_\d+_(x86_64|aarch64)\.whl$|manylinux2014_(x86_64|aarch64)", wheel.name), wheel.name


def test_wheel_metadata_is_right_for_pypi(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        [meta_name] = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        meta = email.message_from_bytes(z.read(meta_name))
    cargo_version = re.search(r'^version = "([^"]+)"', (REPO / "Cargo.toml").read_text(), re.M)
    assert cargo_version is not None
    assert meta["Name"] == "envcraft"
    assert meta["Version"] == cargo_version.group(1)
    assert meta["License-Expression"] == "Apache-2.0"
    # The license's text itself (PEP 639: license-files), in the dist-info as pip installs it.
    assert meta.get_all("License-File") == ["LICENSE"]
    with zipfile.ZipFile(wheel) as z:
        [license_name] = [n for n in z.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        assert z.read(license_name) == (REPO / "LICENSE").read_bytes()
    assert b"Apache License\n                           Version 2.0, January 2004" in (REPO / "LICENSE").read_bytes()
    assert meta["Requires-Python"] == ">=3.9"
    assert meta["Description-Content-Type"].startswith("text/markdown")
    assert "pip install envcraft" in meta.get_payload()  # the README, with the one-line install
    classifiers = meta.get_all("Classifier") or []
    assert "Operating System :: POSIX :: Linux" in classifiers and "Typing :: Typed" in classifiers
    assert {"trl", "skyrl", "verl", "ray"} <= set(meta.get_all("Provides-Extra") or [])
    init = (REPO / "clients" / "python" / "src" / "envcraft" / "__init__.py").read_text()
    assert f'__version__ = "{cargo_version.group(1)}"' in init


@pytest.mark.skipif(tomllib is None, reason="tomllib needs Python 3.11")
def test_the_two_pyprojects_describe_the_same_package() -> None:
    assert tomllib is not None
    wheel_project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    client_project = tomllib.loads((REPO / "clients" / "python" / "pyproject.toml").read_text())["project"]
    for key in ("name", "requires-python", "dependencies", "optional-dependencies"):
        assert wheel_project[key] == client_project[key], key


def test_installed_wheel_runs_doctor_without_rust(venv: Path) -> None:
    env = bare_env(venv)
    which = subprocess.run(["sh", "-c", "command -v envcraft"], env=env, capture_output=True, text=True)
    assert which.stdout.strip() == str(venv / "bin" / "envcraft")
    doctor = subprocess.run(["envcraft", "doctor"], env=env, capture_output=True, text=True, timeout=120)
    assert doctor.returncode == 0, doctor.stderr[-2000:]
    assert "landlock" in doctor.stdout.lower()
    version = subprocess.run(["envcraft", "--version"], env=env, capture_output=True, text=True, timeout=30)
    assert version.stdout.startswith("envcraft ")


def test_installed_wheel_serves_a_session_through_client_local(venv: Path, tmp_path: Path) -> None:
    script = f"""
import json, envcraft
with envcraft.Client.local(workspaces={str(REPO / "workspaces")!r}, skills={str(REPO / "skills")!r}) as client:
    with client.create("example/extract-todos") as s:
        ls = s.call("ls", path="inbox")
        reward = s.verify().reward
    print(json.dumps({{"binary": client.server.binary, "module": envcraft.__file__, "ls": ls, "reward": reward}}))
"""
    proc = subprocess.run([str(venv / "bin" / "python"), "-c", script], env=bare_env(venv), cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["binary"] == str(venv / "bin" / "envcraft")
    assert out["module"].startswith(str(venv))  # the installed client, not the source tree's
    assert out["ls"]["ok"] and [e["name"] for e in out["ls"]["entries"]] == ["1.txt", "2.txt", "3.txt"]
    assert out["reward"] == 0.0
