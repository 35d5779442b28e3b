"""Harbor's CLI (``target/harbor-venv``) through ``envcraft.harbor:EnvcraftEnvironment`` over a
task's own image, without ``--ek base=host``: a task whose Dockerfile is ``FROM`` a busybox
image (made here without network, as ``tests/harbor_build.rs`` makes it: a root filesystem of
Debian's static busybox, ``podman import``ed into a Podman storage of the test's own) plus a
``RUN`` step, built by the installed Podman into a state directory given by ``--ek
state_dir`` (built once: the second trial uses it again); a task whose ``docker_image`` is
pushed with skopeo to a real ``docker-registry`` on 127.0.0.1 and pulled on the fly. The oracle
scores 1.0 and ``nop`` 0.0 on each; a failing ``RUN``, an unpullable image and no builder on
PATH are refused before any session, naming the task, the image and ``--ek base=host``.

Skipped loudly without Podman, busybox-static, docker-registry or skopeo (``apt-get install
runc podman buildah busybox-static docker-registry skopeo``), Harbor's venv or the envcraft
binary; failing under ``ENVCRAFT_TEST_REQUIRE=all``."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Dict, Iterator

import pytest

from conftest import require
from test_harbor_provider import harbor_run, trials

PODMAN = Path("/usr/bin/podman")
BUSYBOX = Path("/bin/busybox")
REGISTRY = Path("/usr/bin/docker-registry")
SKOPEO = Path("/usr/bin/skopeo")
BASE = "localhost/envcraft-test-busybox:1"

# The test wants the file the RUN step made and the agent's answer in the working directory
# (and, for the built task, the file COPY put there, which only the built image has).
TEST_SH = """\
#!/bin/sh
ok=1
[ "$(cat /opt/x)" = built ] || ok=0
[ "$(cat /app/answer 2>/dev/null)" = done ] || ok=0
[ ! -e /app/expect-seed ] || [ "$(cat /app/seed.txt)" = seed ] || ok=0
echo $ok > /logs/verifier/reward.txt
"""
SOLVE_SH = "#!/bin/sh\necho done > /app/answer\n"
DOCKERFILE = f"FROM {BASE}\nWORKDIR /app\nCOPY seed.txt expect-seed ./\nRUN echo built > /opt/x\n"


class World:
    """A Podman storage of the test's own holding the busybox base image, and the variables
    that point Podman (and so envcraft's builds) at it."""

    def __init__(self, root: Path) -> None:
        for tool in (PODMAN, BUSYBOX):
            require(tool.is_file(), f"{tool} is missing (apt-get install runc podman busybox-static)")
        self.root = root
        root.mkdir(parents=True)
        (root / "storage.conf").write_text(
            f'[storage]\ndriver = "overlay"\ngraphroot = "{root}/graph"\nrunroot = "{root}/run"\n'
            f'rootless_storage_path = "{root}/graph"\n'
        )
        self.env: Dict[str, str] = {"CONTAINERS_STORAGE_CONF": str(root / "storage.conf")}
        rootfs = root / "rootfs"
        for sub in ("bin", "tmp", "etc", "opt"):
            (rootfs / sub).mkdir(parents=True)
        shutil.copy(BUSYBOX, rootfs / "bin" / "busybox")
        applets = subprocess.run([str(BUSYBOX), "--list"], capture_output=True, text=True, check=True)
        for applet in applets.stdout.split():
            link = rootfs / "bin" / applet
            if not link.exists():
                link.symlink_to("busybox")
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(root / "rootfs.tar"), "."], check=True)
        self.podman("import", str(root / "rootfs.tar"), BASE)

    def podman(self, *args: str) -> str:
        done = subprocess.run(
            [str(PODMAN), *args], env={**os.environ, **self.env}, capture_output=True, text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"podman {' '.join(args)}: {done.stderr}"
        return done.stdout


def write_task(dir: Path, env_lines: str = "", dockerfile: str | None = DOCKERFILE) -> Path:
    for d in ("tests", "solution", "environment"):
        (dir / d).mkdir(parents=True, exist_ok=True)
    (dir / "task.toml").write_text(
        'schema_version = "1.4"\n\n[verifier]\ntimeout_sec = 60.0\n\n[agent]\ntimeout_sec = 60.0\n\n'
        f'[environment]\nnetwork_mode = "no-network"\n{env_lines}'
    )
    (dir / "instruction.md").write_text("Write done to /app/answer.\n")
    if dockerfile is not None:
        (dir / "environment" / "Dockerfile").write_text(dockerfile)
        (dir / "environment" / "seed.txt").write_text("seed\n")
        (dir / "environment" / "expect-seed").write_text("")
    for path, text in (("tests/test.sh", TEST_SH), ("solution/solve.sh", SOLVE_SH)):
        (dir / path).write_text(text)
        (dir / path).chmod(0o755)
    return dir


def said(done: subprocess.CompletedProcess) -> str:
    """Harbor's output with its table's borders and the line breaks squeezed out."""
    return "".join(c for c in done.stdout + done.stderr if not c.isspace() and c != "│")


def squeeze(words: str) -> str:
    return "".join(words.split())


def oracle_one_nop_zero(tmp: Path, task: Path, env: Dict[str, str], *ek: str) -> list[str]:
    """``harbor run`` of ``task`` with the oracle (1.0) then ``nop`` (0.0); the trials' logs."""
    logs = []
    for agent, reward in (("oracle", 1.0), ("nop", 0.0)):
        jobdir, done = harbor_run(tmp, task, agent, f"{task.name}-{agent}", *ek, extra_env=env)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        [trial] = trials(jobdir)
        assert trial.get("exception_info") is None, trial["exception_info"]
        assert trial["verifier_result"]["rewards"]["reward"] == reward, trial
        logs.append(next(jobdir.glob("*/trial.log")).read_text())
    return logs


def test_a_dockerfile_with_a_run_step_is_built_once_oracle_one_nop_zero(tmp_path):
    world = World(tmp_path / "world")
    state = tmp_path / "state"
    task = write_task(tmp_path / "built")
    oracle, nop = oracle_one_nop_zero(tmp_path, task, world.env, f"state_dir={state}")
    assert "built by podman into the image `harbor-built:" in oracle, oracle
    assert "runs over the image harbor-built:" in oracle, oracle
    assert "base=host" not in oracle, oracle
    # The second trial used the image the first built.
    assert "is unchanged since it was built" in nop and "built by podman into" not in nop, nop
    assert "envcraft-build" not in world.podman("images", "--format", "{{.Repository}}")

    # A failing RUN step: refused before any session, with the builder's words.
    (task / "environment" / "Dockerfile").write_text(f"FROM {BASE}\nRUN nosuchcmd --now\n")
    jobdir, done = harbor_run(tmp_path, task, "oracle", "failed-run", f"state_dir={state}", extra_env=world.env)
    assert done.returncode != 0, done.stdout[-3000:]
    for words in ("task built", f"FROM {BASE}", "could not be built", "nosuchcmd: not found", "--ek base=host"):
        assert squeeze(words) in said(done), f"{words!r} not in {done.stdout[-3000:]}"
    assert not any(t.get("verifier_result") for t in trials(jobdir))

    # No builder on PATH: the builders looked for, before any session.
    (task / "environment" / "Dockerfile").write_text(DOCKERFILE)
    empty = tmp_path / "empty-path"
    empty.mkdir()
    env = {**world.env, "PATH": str(empty)}
    jobdir, done = harbor_run(tmp_path, task, "oracle", "no-builder", f"state_dir={state}", extra_env=env)
    assert done.returncode != 0, done.stdout[-3000:]
    for words in ("task built", "needs a builder", "looked for podman and buildah", "--ek base=host"):
        assert squeeze(words) in said(done), f"{words!r} not in {done.stdout[-3000:]}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def registry(tmp_path) -> Iterator[int]:
    """A docker-registry on 127.0.0.1: its port."""
    for tool in (REGISTRY, SKOPEO):
        require(tool.is_file(), f"{tool} is missing (apt-get install docker-registry skopeo)")
    port = free_port()
    config = tmp_path / "registry.yml"
    config.write_text(
        "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n"
        f"  filesystem:\n    rootdirectory: {tmp_path / 'registry'}\nhttp:\n  addr: 127.0.0.1:{port}\n"
    )
    proc = subprocess.Popen([str(REGISTRY), "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, "docker-registry exited"
                assert time.monotonic() < deadline, "docker-registry never listened"
                time.sleep(0.05)
        yield port
    finally:
        proc.kill()
        proc.wait()


def test_a_docker_image_is_pulled_from_a_registry_oracle_one_nop_zero(tmp_path, registry):
    world = World(tmp_path / "world")
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "Dockerfile").write_text(f"FROM {BASE}\nRUN echo built > /opt/x\n")
    world.podman("build", "-t", "localhost/pushed", str(ctx))
    archive = tmp_path / "pushed.tar"
    world.podman("save", "--format", "oci-archive", "-o", str(archive), "localhost/pushed")
    reference = f"127.0.0.1:{registry}/harbor/app:1"
    subprocess.run(
        [str(SKOPEO), "copy", "--quiet", "--dest-tls-verify=false", f"oci-archive:{archive}", f"docker://{reference}"],
        check=True, capture_output=True, timeout=300,
    )
    state = tmp_path / "state"
    task = write_task(tmp_path / "pulled", f'docker_image = "{reference}"\nworkdir = "/app"\n', None)
    # Pulled without a builder: PATH has none.
    env = {**world.env, "PATH": "/nonexistent"}
    oracle, nop = oracle_one_nop_zero(tmp_path, task, env, f"state_dir={state}")
    pinned = f"127.0.0.1:{registry}/harbor/app@sha256:"
    assert f"the environment names it pinned: {pinned}" in oracle, oracle
    assert f"runs over the image {pinned}" in oracle, oracle
    assert "pulled into" not in nop, nop

    # A tag the registry lacks: refused before any session, naming the image and base=host.
    missing = write_task(tmp_path / "missing", f'docker_image = "127.0.0.1:{registry}/harbor/app:nosuch"\n', None)
    jobdir, done = harbor_run(tmp_path, missing, "oracle", "missing", f"state_dir={state}", extra_env=env)
    assert done.returncode != 0, done.stdout[-3000:]
    for words in ("task missing", f"127.0.0.1:{registry}/harbor/app:nosuch", "could not be pulled", "--ek base=host"):
        assert squeeze(words) in said(done), f"{words!r} not in {done.stdout[-3000:]}"
    assert not any(t.get("verifier_result") for t in trials(jobdir))
