"""envcraft as a Harbor environment provider.

``harbor run -p TASK -a AGENT --env envcraft.harbor:EnvcraftEnvironment --ek base=host`` (or
the older ``--environment-import-path``) runs each trial in an envcraft session: a sandbox with
a copy-on-write workspace at the task's working directory and Harbor's writable paths
(``/logs/agent``, ``/logs/verifier``, ``/logs/artifacts``, ``/tests``, ``/solution``) as the
policy's workspace mount points (``filesystem.workspace_mounts``: directories of the workspace
under ``.harbor/``, bound at those paths).

Where the session runs: on the server at ``--ek url=URL`` (``--ek token=T``; its workspaces
must hold an environment named ``--ek env=NAME``, ``harbor`` by default, whose policy gives
those mount points), or else on a private ``envcraft serve`` started for the trial on a free
loopback port (the binary from ``--ek envcraft_bin=PATH``, ``ENVCRAFT_BIN`` or ``PATH``),
which writes that environment itself and is stopped at ``stop``.

With a private server, the task's ``environment/Dockerfile`` is read by ``envcraft import harbor
--base host``: the files its ``COPY`` steps put in the working directory start the workspace,
its ``ENV`` sets the sessions' variables, and a Dockerfile that needs a builder (``RUN``, ...)
is refused before start with envcraft's reason.

What it refuses, before start: a task with no image envcraft holds, unless ``--ek base=host``
says that the host's read-only system paths may stand in for it (said in the trial's log; image
tasks are not run by this provider yet); a network mode it cannot enforce (``allowlist``;
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
    """``host``: run over the host's read-only system paths (no image)."""
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


def write_environment(root: Path, name: str, policy: str) -> None:
    """An envcraft environment ``name`` under ``root`` for Harbor trials: empty files, the
    tools a harness needs, ``policy``."""
    env = root / name
    (env / "files").mkdir(parents=True, exist_ok=True)
    (env / "docs.md").write_text(f"# {name}\n\nA Harbor trial's sandbox.\n")
    (env / "policy.toml").write_text(policy)
    (env / "env.toml").write_text(
        f'name = "{name}"\ndescription = "Harbor trials"\npolicy = "policy.toml"\n'
        'tools = ["read", "write", "ls", "exec", "process"]\n'
        'base_time = "2026-01-01T00:00:00Z"\ntime_step_secs = 1\n'
    )


class ImportedTask:
    """What ``envcraft import harbor --base host`` makes of a task's ``environment/``: the files
    its Dockerfile's ``COPY`` steps put in the working directory, its ``ENV``. A Dockerfile that
    needs a builder (``RUN``, say) is refused here, before start, with envcraft's reason."""

    def __init__(self, tmp: tempfile.TemporaryDirectory, env_dir: Path) -> None:
        self._tmp = tmp
        self.env_dir = env_dir

    def copy_files(self, target: Path) -> None:
        shutil.copytree(self.env_dir / "files", target, dirs_exist_ok=True, symlinks=True)

    def with_variables(self, policy: str) -> str:
        """``policy`` with the imported policy's ``PATH`` and fixed variables."""
        import tomllib

        imported = tomllib.loads((self.env_dir / "policy.toml").read_text())["environment"]
        sets = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in imported.get("set", {}).items())
        policy = re.sub(r'(?m)^path = ".*"$', "path = " + json.dumps(imported["path"]), policy)
        return policy.replace("pass = []\n", f"pass = []\nset = {{ {sets} }}\n", 1)


def import_task(binary: str, task_dir: Path) -> ImportedTask:
    tmp = tempfile.TemporaryDirectory(prefix="envcraft-harbor-import-")
    dest = Path(tmp.name) / "out"
    done = subprocess.run(
        [binary, "import", "harbor", str(task_dir), str(dest), "--base", "host"],
        capture_output=True, text=True, timeout=300,
    )
    made = [p for p in dest.glob("*") if (p / "env.toml").is_file()] if dest.is_dir() else []
    if done.returncode != 0 or len(made) != 1:
        tmp.cleanup()
        said = "\n".join(line for line in (done.stdout + done.stderr).splitlines() if not line.startswith("  note"))
        raise ValueError(f"envcraft cannot run this task's environment/: {said.strip()}")
    return ImportedTask(tmp, made[0])


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
    """``envcraft serve`` on a free loopback port, over a workspaces directory of its own."""

    def __init__(self, binary: str, workspaces: Path, state: Path) -> None:
        argv = [
            binary, "serve", "--listen", "127.0.0.1:0", "--state-dir", str(state),
            "--workspaces", str(workspaces), "--max-body", str(256 << 20),
        ]
        self.log = (state.parent / "serve.log").open("wb")
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
        return (
            self.task_env_config.workdir
            or _dockerfile_workdir(self.environment_dir)
            or "/workspace"
        )

    def _validate_definition(self) -> None:
        if self.options.base not in (None, "host"):
            raise ValueError(f"--ek base={self.options.base}: the only base envcraft takes is `host`")
        if self.options.base is None:
            image = self.task_env_config.docker_image or (
                "environment/Dockerfile" if (self.environment_dir / "Dockerfile").exists() else None
            )
            raise ValueError(
                f"envcraft cannot run this task over its image ({image or 'none named'}): this "
                "provider does not build or pull images yet. Pass --ek base=host to run it over "
                "the host's read-only system paths instead."
            )
        if (self.environment_dir / "docker-compose.yaml").exists():
            raise ValueError("envcraft does not run docker-compose services")

        if self.options.url is None and (self.environment_dir / "Dockerfile").exists():
            self._imported = import_task(
                find_binary(self.options.envcraft_bin), self.environment_dir.parent
            )

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
        self.logger.warning(
            "envcraft: base=host: the task runs over this host's read-only system paths "
            "(/usr, /bin, /lib, /etc), not over its image; workspace at %s",
            self.workdir,
        )
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
            write_environment(root / "workspaces", self.options.env, policy)
            if self._imported is not None:
                self._imported.copy_files(root / "workspaces" / self.options.env / "files")
            binary = find_binary(self.options.envcraft_bin)
            self._server = await asyncio.to_thread(
                PrivateServer, binary, root / "workspaces", root / "state"
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
