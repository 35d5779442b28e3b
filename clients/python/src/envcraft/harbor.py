"""envcraft as a Harbor environment provider.

``harbor run -p TASK -a AGENT --env envcraft.harbor:EnvcraftEnvironment`` (or the older
``--environment-import-path``) runs each trial in an envcraft session: a sandbox with
a copy-on-write workspace at the task's working directory and Harbor's writable paths
(``/logs/agent``, ``/logs/verifier``, ``/logs/artifacts``, ``/tests``, ``/solution``) as the
policy's workspace mount points (``filesystem.workspace_mounts``: directories of the workspace
under ``.harbor/``, bound at those paths).

Where the session runs: on the server at ``--ek url=URL`` (``--ek token=T``; its workspaces
must hold an environment named ``--ek env=NAME``, ``harbor`` by default, whose policy gives
those mount points), or else on a private ``envcraft serve`` started for the trial on a free
loopback port (the binary from ``--ek envcraft_bin=PATH``, ``ENVCRAFT_BIN`` or ``PATH``),
which writes that environment itself and is stopped at ``stop``.

The root filesystem: by default the task's image. The provider runs ``envcraft import harbor
TASK DEST --state-dir STATE`` before start (at construction, where Harbor validates): task.toml's
``docker_image``, or a Dockerfile's ``FROM``, is pulled into STATE's image store when the store
lacks it, and a Dockerfile with builder steps (``RUN``, ...) is built by an installed Podman or
Buildah under a name holding a hash of ``environment/`` (built once while it is unchanged). The
private ``envcraft serve`` then runs over that same STATE, in an environment naming the image;
the files the import puts in the working directory (``COPY`` steps, a built image's files
there) start the workspace, and its ``ENV`` sets the sessions' variables. STATE is shared by
every trial, so that an unchanged environment is neither built nor pulled again:
``--ek state_dir=DIR``, else ``ENVCRAFT_HARBOR_STATE_DIR``, else ``envcraft/harbor`` under the
user's cache directory (``XDG_CACHE_HOME``, else ``~/.cache``). ``--ek base=host`` runs over the
host's read-only system paths instead (no image: said in the trial's log), with the Dockerfile
read as ``envcraft import harbor --base host`` reads it (one that needs a builder is refused).

What it refuses, before start: a task whose image cannot be had (no image named, no builder for
its Dockerfile, a failed step, an image the store lacks and cannot pull), naming the task, the
image and ``--ek base=host``; with ``--ek url=URL`` (a server elsewhere, whose own environment
decides the root filesystem and files), any task without ``--ek base=host``; a network mode it
cannot enforce (``allowlist``;
``public``, since a sandbox reaches no network, unless ``--ek offline=true`` accepts running it
without one, said in the log); GPUs, TPUs, Windows, docker-compose tasks (Harbor's own checks,
from ``capabilities``). The task's ``memory_mb`` and ``storage_mb`` become the policy's
``memory`` and ``workspace_size``; ``cpus`` has no envcraft limit and is said to be ignored.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import threading
from pathlib import Path, PurePosixPath
from typing import Any, Dict, List, Optional, Sequence

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.environments.options import EnvironmentOptions
from harbor.models.task.config import NetworkMode
from harbor.utils.path_filter import filter_paths_by_patterns
from harbor.utils.path_safety import validate_output_path

from .aio import AsyncClient, AsyncSession

# Harbor's writable paths and the workspace directories bound there.
MOUNTS = {"/logs": ".harbor/logs", "/tests": ".harbor/tests", "/solution": ".harbor/solution"}
# The longest a command runs in the foreground of one `exec` call before it is polled.
_YIELD_MS = 120_000
_POLL_MS = 30_000


class EnvcraftOptions(EnvironmentOptions):
    """The provider's ``--ek`` kwargs."""

    base: Optional[str] = None
    """``host``: run over the host's read-only system paths (no image); unset: the task's image."""
    state_dir: Optional[str] = None
    """The state directory whose image store the task's image is pulled or built into, shared by
    trials (default: :func:`default_state_dir`)."""
    url: Optional[str] = None
    """An ``envcraft serve`` to use instead of a private one."""
    token: Optional[str] = None
    env: str = "harbor"
    """The environment a session is made in (on ``url``'s server; the private one writes it)."""
    offline: bool = False
    """Run a task that asks for the public network without one."""
    envcraft_bin: Optional[str] = None


def policy_toml(workdir: str, memory_mb: Optional[int], storage_mb: Optional[int]) -> str:
    """The policy of a Harbor trial: the ``default`` policy's sandbox, the workspace at the
    task's working directory, Harbor's mount points, and the task's limits."""
    mounts = ", ".join(f'"{at}" = "{d}"' for at, d in MOUNTS.items())
    memory = f"{memory_mb}MiB" if memory_mb else "4GiB"
    storage = f"{storage_mb}MiB" if storage_mb else "4GiB"
    return f"""description = "A Harbor trial: no network; workspace and Harbor's paths read-write"

[filesystem]
read_only = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc"]
hidden = ["/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/sudoers.d", "/etc/ssh", "/etc/ssl/private", "/etc/security/opasswd"]
workspace = {json.dumps(workdir)}
workspace_mounts = {{ {mounts} }}
workspace_writable = true
tmp_size = "1GiB"

[network]
mode = "none"
allow_tcp_bind = []
allow_tcp_connect = []
allow_netlink = false

[limits]
wall_time_secs = 86400
cpu_secs = 86400
memory = "{memory}"
processes = 1024
file_size = "{storage}"
open_files = 4096
output_bytes = "8MiB"
workspace_size = "{storage}"
transcript_bytes = "256MiB"

[environment]
path = "/usr/local/bin:/usr/bin:/bin:/.envcraft/bin"
home = "/root"
tz = "UTC"
lang = "C.UTF-8"
hostname = "envcraft"
pass = []

[protections]
required = ["user_namespace", "mount_namespace", "pid_namespace", "network_namespace", "ipc_namespace", "uts_namespace", "landlock_filesystem", "seccomp", "no_new_privs", "capabilities_dropped", "rlimits", "workspace_size_limit"]
best_effort = ["cgroup_namespace", "overlay_workspace", "landlock_network", "landlock_scope", "cgroup_limits"]
"""


def default_state_dir() -> Path:
    """Where trials' images are kept when ``--ek state_dir`` is not given:
    ``ENVCRAFT_HARBOR_STATE_DIR``, else ``envcraft/harbor`` under ``XDG_CACHE_HOME`` (else
    ``~/.cache``): on disk (images are large) and shared by every trial of the user."""
    if os.environ.get("ENVCRAFT_HARBOR_STATE_DIR"):
        return Path(os.environ["ENVCRAFT_HARBOR_STATE_DIR"])
    cache = os.environ.get("XDG_CACHE_HOME")
    base = Path(cache) if cache and Path(cache).is_absolute() else Path.home() / ".cache"
    return base / "envcraft" / "harbor"


def write_environment(root: Path, name: str, policy: str, image: Optional[str] = None) -> None:
    """An envcraft environment ``name`` under ``root`` for Harbor trials: empty files, the
    tools a harness needs, ``policy``, over ``image`` (a name of the server's image store) when
    given."""
    env = root / name
    (env / "files").mkdir(parents=True, exist_ok=True)
    (env / "docs.md").write_text(f"# {name}\n\nA Harbor trial's sandbox.\n")
    (env / "policy.toml").write_text(policy)
    (env / "env.toml").write_text(
        f'name = "{name}"\ndescription = "Harbor trials"\npolicy = "policy.toml"\n'
        'tools = ["read", "write", "ls", "exec", "process"]\n'
        'base_time = "2026-01-01T00:00:00Z"\ntime_step_secs = 1\n'
        + (f"image = {json.dumps(image)}\n" if image else "")
    )


class ImportedTask:
    """What ``envcraft import harbor`` makes of a task's ``environment/``: the image the
    environment runs over (``None`` with ``--base host``), the files the working directory
    starts with (its Dockerfile's ``COPY`` steps, a built image's files there), its ``ENV``, and
    the import's notes (what was pulled or built, or used again)."""

    def __init__(self, tmp: tempfile.TemporaryDirectory, env_dir: Path, notes: List[str]) -> None:
        import tomllib

        self._tmp = tmp
        self.env_dir = env_dir
        self.notes = notes
        self.image: Optional[str] = tomllib.loads((env_dir / "env.toml").read_text()).get("image")
        self.workdir: Optional[str] = json.loads(
            next(env_dir.glob("tasks/*/source.json")).read_text()
        ).get("workdir")

    def cleanup(self) -> None:
        self._tmp.cleanup()

    def copy_files(self, target: Path) -> None:
        shutil.copytree(self.env_dir / "files", target, dirs_exist_ok=True, symlinks=True)

    def with_variables(self, policy: str) -> str:
        """``policy`` with the imported policy's ``PATH`` and fixed variables."""
        import tomllib

        imported = tomllib.loads((self.env_dir / "policy.toml").read_text())["environment"]
        sets = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in imported.get("set", {}).items())
        policy = re.sub(r'(?m)^path = ".*"$', "path = " + json.dumps(imported["path"]), policy)
        return policy.replace("pass = []\n", f"pass = []\nset = {{ {sets} }}\n", 1)


# The longest an import (a pull, a build) may take before the trial is refused.
_IMPORT_TIMEOUT_SECS = 3600


def import_task(binary: str, task_dir: Path, state_dir: Optional[Path], image: str) -> ImportedTask:
    """``envcraft import harbor TASK DEST``: with ``state_dir``, over the task's image (pulled or
    built into its store, then checked to be there); without, ``--base host``. Refuses (a
    ``ValueError`` naming the task, ``image`` and what to do) when it cannot be done."""
    tmp = tempfile.TemporaryDirectory(prefix="envcraft-harbor-import-")
    dest = Path(tmp.name) / "out"
    base = ["--state-dir", str(state_dir)] if state_dir is not None else ["--base", "host"]
    instead = (
        "Pass --ek base=host to run it over the host's read-only system paths instead"
        if state_dir is not None
        else "With --ek base=host the Dockerfile must run without a builder; drop base=host to have an installed podman or buildah build it"
    )
    try:
        done = subprocess.run(
            [binary, "import", "harbor", str(task_dir), str(dest), *base],
            capture_output=True, text=True, timeout=_IMPORT_TIMEOUT_SECS,
        )
    except subprocess.TimeoutExpired:
        tmp.cleanup()
        raise RuntimeError(
            f"task {task_dir.name}: envcraft import harbor did not bring in its image ({image}) "
            f"within {_IMPORT_TIMEOUT_SECS} s. {instead}."
        ) from None
    made = [p for p in dest.glob("*") if (p / "env.toml").is_file()] if dest.is_dir() else []
    lines = (done.stdout + done.stderr).splitlines()
    if done.returncode != 0 or len(made) != 1:
        tmp.cleanup()
        said = "\n".join(line for line in lines if not line.startswith("  note"))
        raise ValueError(
            f"task {task_dir.name}: envcraft cannot run it over its image ({image}): "
            f"{said.strip()}\n{instead}."
        )
    notes = [line[len("  note: "):] for line in lines if line.startswith("  note: ")]
    imported = ImportedTask(tmp, made[0], notes)
    if state_dir is not None and imported.image is not None:
        held = subprocess.run(
            [binary, "image", "inspect", imported.image, "--state-dir", str(state_dir)],
            capture_output=True, text=True, timeout=60,
        )
        if held.returncode != 0:
            imported.cleanup()
            raise ValueError(
                f"task {task_dir.name}: its image `{imported.image}` is not in envcraft's image "
                f"store at {state_dir} and could not be brought in ({held.stderr.strip()}). "
                f"{instead}, or import it there (envcraft image import FILE --name "
                f"{imported.image} --state-dir {state_dir})."
            )
    return imported


def find_binary(given: Optional[str]) -> str:
    """The ``envcraft`` binary: ``given``, ``ENVCRAFT_BIN``, or ``envcraft`` on ``PATH``."""
    for candidate in (given, os.environ.get("ENVCRAFT_BIN"), shutil.which("envcraft")):
        if candidate and Path(candidate).is_file():
            return candidate
    raise RuntimeError(
        "no envcraft binary: give --ek envcraft_bin=PATH, set ENVCRAFT_BIN, or put envcraft "
        "on PATH (or give --ek url=URL of a running envcraft serve)"
    )


class PrivateServer:
    """``envcraft serve`` on a free loopback port, over a workspaces directory of its own and
    the state directory ``state`` (its image store; sessions' state), its log at ``log``."""

    def __init__(self, binary: str, workspaces: Path, state: Path, log: Path) -> None:
        argv = [
            binary, "serve", "--listen", "127.0.0.1:0", "--state-dir", str(state),
            "--workspaces", str(workspaces), "--max-body", str(256 << 20),
        ]
        self.log = log.open("wb")
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.log
        )
        found: List[str] = []
        done = threading.Event()

        def read() -> None:
            assert self.proc.stdout is not None
            for raw in self.proc.stdout:
                line = raw.decode(errors="replace")
                if line.startswith("listening on ") and not found:
                    found.append(line[len("listening on "):].strip())
                    done.set()
            done.set()

        threading.Thread(target=read, daemon=True).start()
        if not done.wait(60) or not found:
            self.stop()
            raise RuntimeError(f"{' '.join(argv)} did not start listening within 60 s")
        self.url = found[0]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def _dockerfile_workdir(environment_dir: Path) -> Optional[str]:
    """The last ``WORKDIR`` of the task's Dockerfile, if it names an absolute path."""
    dockerfile = environment_dir / "Dockerfile"
    if not dockerfile.is_file():
        return None
    found = None
    for line in dockerfile.read_text(errors="replace").splitlines():
        m = re.match(r"\s*WORKDIR\s+(\S+)\s*$", line, re.IGNORECASE)
        if m and m.group(1).startswith("/"):
            found = m.group(1)
    return found


def _tar_of_file(source: Path, name: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(str(source), arcname=name, recursive=False)
    return buf.getvalue()


class EnvcraftEnvironment(BaseEnvironment):
    """One Harbor trial's environment: one envcraft session (see the module's text)."""

    options_model = EnvcraftOptions
    options: EnvcraftOptions

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._server: Optional[PrivateServer] = None
        self._tmp: Optional[tempfile.TemporaryDirectory] = None
        self._client: Optional[AsyncClient] = None
        self._session: Optional[AsyncSession] = None
        self._imported: Optional[ImportedTask] = None
        super().__init__(*args, **kwargs)

    @staticmethod
    def type() -> str:
        return "envcraft"

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        # A sandbox has its own network namespace with loopback only: no-network is enforced;
        # an allowlist cannot be; nothing is mounted from the host.
        return EnvironmentCapabilities(disable_internet=True)

    @property
    def workdir(self) -> str:
        imported = getattr(self, "_imported", None)
        return (
            (imported.workdir if imported is not None else None)
            or self.task_env_config.workdir
            or _dockerfile_workdir(self.environment_dir)
            or "/workspace"
        )

    def _image_said(self) -> Optional[str]:
        """The task's image as people know it: its ``docker_image``, or its Dockerfile's FROM."""
        if self.task_env_config.docker_image:
            return self.task_env_config.docker_image
        dockerfile = self.environment_dir / "Dockerfile"
        if not dockerfile.is_file():
            return None
        found = re.findall(r"(?im)^\s*FROM\s+(?:--\S+\s+)*(\S+)", dockerfile.read_text(errors="replace"))
        return f"environment/Dockerfile, FROM {found[-1]}" if found else "environment/Dockerfile"

    def _validate_definition(self) -> None:
        if self.options.base not in (None, "host"):
            raise ValueError(
                f"--ek base={self.options.base}: envcraft takes `host` (the host's read-only "
                "system paths), or no base (the task's own image, pulled or built)"
            )
        if (self.environment_dir / "docker-compose.yaml").exists():
            raise ValueError("envcraft does not run docker-compose services")
        task = self.environment_dir.parent.name
        image = self._image_said()
        if self.options.url is not None:
            if self.options.base is None:
                raise ValueError(
                    f"task {task}: with --ek url={self.options.url} the session runs in that "
                    f"server's environment `{self.options.env}`, whose image and files that server "
                    f"decides: this provider pulls or builds a task's image ({image or 'none named'}) "
                    "only for the private envcraft serve it starts. Pass --ek base=host to run in "
                    "the server's environment as it is, or drop --ek url to run over the task's image."
                )
            return
        if self.options.base is None and image is None:
            raise ValueError(
                f"task {task}: envcraft cannot run it over its image: it names none (neither "
                "environment/Dockerfile nor [environment].docker_image). Pass --ek base=host to "
                "run it over the host's read-only system paths instead."
            )
        if self.options.base is None or (self.environment_dir / "Dockerfile").exists():
            state = self.state_dir if self.options.base is None else None
            self._imported = import_task(
                find_binary(self.options.envcraft_bin), self.environment_dir.parent, state,
                image or "none named",
            )

    @property
    def state_dir(self) -> Path:
        """Where the task's image is kept: ``--ek state_dir``, else :func:`default_state_dir`."""
        given = self.options.state_dir
        return Path(given).expanduser().absolute() if given else default_state_dir()

    def _validate_network_policy_support(self) -> None:
        super()._validate_network_policy_support()
        for policy in [self._network_policy, *self._phase_network_policies]:
            if policy.network_mode == NetworkMode.PUBLIC and not self.options.offline:
                raise ValueError(
                    "network_mode='public' cannot be given by envcraft (its sandboxes reach no "
                    "network): set network_mode = \"no-network\" in the task, or pass "
                    "--ek offline=true to run it without a network"
                )

    async def start(self, force_build: bool) -> None:
        if self._session is not None:
            return  # already started: the live session stays (nothing is made twice)
        image = self._imported.image if self._imported is not None else None
        if image is not None:
            self.logger.info(
                "envcraft: the task runs over the image %s (envcraft's image store at %s); "
                "workspace at %s", image, self.state_dir, self.workdir,
            )
        elif self.options.url and self.options.base == "host":
            self.logger.warning(
                "envcraft: base=host: the task runs in the environment %s of %s as it is "
                "(its image or the host's system paths), not over the task's image",
                self.options.env, self.options.url,
            )
        else:
            self.logger.warning(
                "envcraft: base=host: the task runs over this host's read-only system paths "
                "(/usr, /bin, /lib, /etc), not over its image; workspace at %s",
                self.workdir,
            )
        for note in self._imported.notes if self._imported is not None else ():
            self.logger.info("envcraft: import: %s", note)
        if self._network_policy.network_mode == NetworkMode.PUBLIC:
            self.logger.warning("envcraft: offline=true: the task asked for the public network and runs without one")
        if self.task_env_config.cpus:
            self.logger.warning("envcraft: cpus=%s is ignored (no CPU-share limit)", self.task_env_config.cpus)
        if self.options.url:
            url = self.options.url
        else:
            self._tmp = tempfile.TemporaryDirectory(prefix="envcraft-harbor-")
            root = Path(self._tmp.name)
            policy = policy_toml(self.workdir, self._effective_memory_mb, self._effective_storage_mb)
            if self._imported is not None:
                policy = self._imported.with_variables(policy)
            write_environment(root / "workspaces", self.options.env, policy, image)
            if self._imported is not None:
                self._imported.copy_files(root / "workspaces" / self.options.env / "files")
            binary = find_binary(self.options.envcraft_bin)
            # Over an image: the state directory the import brought it into (the sessions'
            # state beside it: a state root is shared by envcraft processes safely).
            state = self.state_dir if image is not None else root / "state"
            self._server = await asyncio.to_thread(
                PrivateServer, binary, root / "workspaces", state, root / "serve.log"
            )
            url = self._server.url
        self._client = AsyncClient(url, token=self.options.token, timeout=float(_YIELD_MS // 1000 + 120))
        task = {
            "env": self.options.env,
            "prompt": f"Harbor trial {self.session_id}",
            "verifier": {"kind": "manifest", "extra": "allow"},
            "expected": {"version": 1, "files": {}},
        }
        self._session = await self._client.create(task)
        self.logger.info("envcraft: session %s on %s", self._session.id, url)
        # Harbor's output directories, as its images have them.
        made = await self.exec("mkdir -p /logs/agent /logs/verifier /logs/artifacts")
        if made.return_code != 0:
            raise RuntimeError(f"envcraft: cannot make Harbor's /logs directories: {made.stderr}")

    async def stop(self, delete: bool) -> None:
        try:
            if self._session is not None:
                await self._session.close()
        finally:
            self._session = None
            if self._client is not None:
                await self._client.aclose()
                self._client = None
            if self._server is not None:
                await asyncio.to_thread(self._server.stop)
                self._server = None
            if self._tmp is not None:
                self._tmp.cleanup()
                self._tmp = None

    def _live(self) -> AsyncSession:
        if self._session is None:
            raise RuntimeError("the envcraft environment is not started")
        return self._session

    async def exec(
        self,
        command: str,
        cwd: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        timeout_sec: Optional[int] = None,
        user: Any = None,
    ) -> ExecResult:
        session = self._live()
        user = self._resolve_user(user)
        if user not in (None, "root", 0, "0"):
            self.logger.debug("envcraft: commands run as the sandbox's root, not as %s", user)
        args: Dict[str, Any] = {"command": command, "yieldMs": _YIELD_MS}
        if cwd:
            args["workdir"] = cwd
        merged = self._merge_env(env)
        if merged:
            args["env"] = merged
        if timeout_sec:
            args["timeout"] = int(timeout_sec)
        result = await session.call("exec", **args)
        if not result.get("ok", False):
            error = result.get("error", {})
            return ExecResult(stdout="", stderr=f"envcraft: {error.get('category')}: {error.get('message')}", return_code=126)
        if result.get("status") == "running":
            sid = result["sessionId"]
            while True:
                polled = await session.call("process", action="poll", sessionId=sid, timeout=_POLL_MS)
                if not polled.get("running", False):
                    break
            result = await session.call("process", action="log", sessionId=sid)
        code = result.get("exit_code")
        if code is None:
            code = 124 if result.get("timed_out") else 128 + int(result.get("signal") or 9)
        return ExecResult(stdout=result.get("stdout", ""), stderr=result.get("stderr", ""), return_code=int(code))

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        target = PurePosixPath(target_path)
        tar = _tar_of_file(Path(source_path), target.name)
        await self._live().upload(tar, str(target.parent))

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        await self._live().upload(Path(source_dir), target_dir)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        got = await self._live().download(source_path)
        if got["kind"] != "file":
            raise IsADirectoryError(f"{source_path} is a directory in the environment")
        with tarfile.open(fileobj=io.BytesIO(got["tar"])) as tar:
            member = tar.getmembers()[0]
            data = tar.extractfile(member)
            if data is None:
                raise FileNotFoundError(source_path)
            target = Path(target_path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data.read())

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        got = await self._live().download(source_dir)
        target = Path(target_dir)
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(got["tar"])) as tar:
            tar.extractall(target, filter="data")

    # Harbor's own filtered downloads pack a tar under the sandbox's /tmp and download it, which
    # envcraft's transfers refuse (they reach the workspace and its mount points only): here the
    # directory is downloaded whole and filtered on the host, with Harbor's pattern matcher for
    # include/exclude and GNU tar's --exclude (what Harbor's version runs) for exclusions.
    async def download_dir_filtered(
        self,
        *,
        source_dir: str,
        target_dir: Path | str,
        include: Optional[Sequence[str]] = None,
        exclude: Optional[Sequence[str]] = None,
        protect: Optional[Sequence[str]] = None,
    ) -> None:
        target = Path(target_dir)
        target.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="envcraft-harbor-dl-") as tmp:
            staged = Path(tmp)
            await self.download_dir(source_dir, staged)
            paths = sorted(
                p.relative_to(staged).as_posix()
                for p in staged.rglob("*")
                if p.is_file() and not p.is_symlink()
            )
            selected = filter_paths_by_patterns(paths, include=include, exclude=exclude)
            selected += [p for p in paths if p in (protect or ()) and p not in selected]
            if not selected:
                self.logger.warning(
                    "No files in %r matched include=%s exclude=%s; downloading nothing",
                    source_dir, include, exclude,
                )
            for name in selected:
                source, destination = staged / name, target / name
                validate_output_path(source, staged)
                validate_output_path(destination, target)
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, destination)

    async def _download_dir_with_exclusions_impl(
        self, *, source_dir: str, target_dir: Path | str, exclude: List[str], service: Optional[str]
    ) -> None:
        if not self.is_main_service(service):
            raise ValueError(f"envcraft runs one service, not {service!r}")
        target = Path(target_dir)
        target.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="envcraft-harbor-dl-") as tmp:
            staged = Path(tmp) / "dir"
            await self.download_dir(source_dir, staged)
            excludes = [f"--exclude={pattern}" for pattern in exclude]
            pack = subprocess.Popen(
                ["tar", "cf", "-", *excludes, "-C", str(staged), "."], stdout=subprocess.PIPE
            )
            done = subprocess.run(
                ["tar", "xf", "-", "-C", str(target)], stdin=pack.stdout, capture_output=True
            )
            assert pack.stdout is not None
            pack.stdout.close()
            if pack.wait() != 0 or done.returncode != 0:
                raise RuntimeError(
                    f"envcraft: filtering {source_dir!r} (exclude {exclude}) failed: "
                    f"{done.stderr.decode(errors='replace').strip()}"
                )

    async def is_dir(self, path: str, user: Any = None) -> bool:
        result = await self.exec(f"test -d {_quote(path)}", timeout_sec=10)
        return result.return_code == 0

    async def is_file(self, path: str, user: Any = None) -> bool:
        result = await self.exec(f"test -f {_quote(path)}", timeout_sec=10)
        return result.return_code == 0


def _quote(path: str) -> str:
    return "'" + path.replace("'", "'\\''") + "'"
