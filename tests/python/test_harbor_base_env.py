"""Harbor's ``BaseEnvironment`` contract, checked against ``envcraft.harbor:EnvcraftEnvironment``:
the checks Harbor's own base-environment unit tests make of a provider, where they apply to one
that runs no images (our own tests of the same contract, not Harbor's code).

- what is refused at construction, before any session: allowlist and public network (unless
  ``offline``), GPUs, TPUs, Windows, docker-compose, host auto-mounts, stream mode, no base;
- ``type()`` and ``capabilities`` as declared;
- ``start``/``stop``: ``stop`` before ``start`` and twice is a no-op, a second ``start`` keeps the
  live session, calls after ``stop`` are refused, a stopped environment starts again afresh;
- ``exec``: an ``ExecResult`` with stdout and stderr apart and the exit code, the task's working
  directory by default, ``cwd``, ``env`` over the trial's persistent variables, a timeout as a
  nonzero code (not an exception), large output whole;
- transfers: ``upload_file`` to a new name (bytes and mode kept, overwrite), ``upload_dir`` puts
  the directory's contents *in* the target (nested and empty directories kept, merged with what
  is there), ``download_file`` (parents made, a missing path or a directory refused),
  ``download_dir`` (contents into the target, overwriting), and Harbor's own helpers built on
  ``exec`` (``ensure_dirs``, ``reset_dirs``, ``download_dir_with_exclusions``,
  ``download_dir_filtered``);
- ``is_dir``/``is_file`` for a directory, a file, a missing path and a name with a space and a
  quote.

The checks need Harbor, which lives in its own venv (``target/harbor-venv``, Python 3.12): this
module, collected by the test venv's pytest, runs itself once under that interpreter, which runs
every check and prints one JSON line of results; each check is then a test here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
HARBOR_PY = REPO / "target" / "harbor-venv" / "bin" / "python"

CHECKS = [
    "refusals_before_start",
    "type_and_capabilities",
    "lifecycle",
    "exec_shape",
    "upload_file",
    "upload_dir",
    "download_file",
    "download_dir",
    "harbor_helpers",
    "is_dir_is_file",
]


# ----------------------------------------------------------------------------------------------
# The checks, run under Harbor's interpreter (`python test_harbor_base_env.py`).


def _make(root: Path, name: str, *, network: str = "no-network", **kwargs):
    from harbor.models.task.config import EnvironmentConfig, NetworkMode, NetworkPolicy
    from harbor.models.trial.paths import TrialPaths

    from envcraft.harbor import EnvcraftEnvironment

    env_dir = root / name / "environment"
    env_dir.mkdir(parents=True, exist_ok=True)
    for path, text in kwargs.pop("files", {}).items():
        (env_dir / path).write_text(text)
    trial = TrialPaths(root / name / "trial")
    trial.mkdir()
    config_kwargs = kwargs.pop("config", {})
    config = EnvironmentConfig(network_mode=NetworkMode(network), workdir="/app", **config_kwargs)
    kwargs.setdefault("base", "host")
    return EnvcraftEnvironment(
        environment_dir=env_dir, environment_name=name, session_id=f"{name}__x__env",
        trial_paths=trial, task_env_config=config,
        network_policy=NetworkPolicy(network_mode=NetworkMode(network)), **kwargs,
    )


def _refused(root: Path, name: str, words: str, **kwargs) -> None:
    try:
        env = _make(root, name, **kwargs)
    except (ValueError, RuntimeError) as e:
        assert words.lower() in str(e).lower(), f"{name}: refused, but not for {words!r}: {e}"
        return
    raise AssertionError(f"{name}: constructed ({env!r}), should have been refused ({words})")


async def check_refusals_before_start(root: Path) -> None:
    from harbor.models.task.config import TpuSpec

    # Construction is where Harbor validates; a refused task never reaches `start`, so no
    # server or session can exist (none is made before `start`).
    _refused(root, "allowlist", "allowlist", network="allowlist")
    _refused(root, "public", "public", network="public")
    _refused(root, "gpu", "GPU", config={"gpus": 1})
    _refused(root, "gpu-override", "GPU", override_gpus=2)
    _refused(root, "tpu", "TPU", config={"tpu": TpuSpec(type="v5e", topology="2x2")})
    _refused(root, "windows", "windows", config={"os": "windows"})
    _refused(root, "compose", "docker-compose", files={"docker-compose.yaml": "services: {}\n"})
    _refused(root, "automount", "mount", auto_mounting=True)
    _refused(root, "stream", "stream", stream=True)
    _refused(root, "no-base", "--ek base=host", base=None)
    _refused(root, "other-base", "host", base="ubuntu")
    # What is allowed is constructed without starting anything.
    offline = _make(root, "offline", network="public", offline=True)
    plain = _make(root, "plain")
    for env in (offline, plain):
        assert env._server is None and env._session is None, env


async def check_type_and_capabilities(root: Path) -> None:
    from harbor.environments.capabilities import EnvironmentCapabilities

    from envcraft.harbor import EnvcraftEnvironment

    assert EnvcraftEnvironment.type() == "envcraft"
    caps = _make(root, "caps").capabilities
    assert isinstance(caps, EnvironmentCapabilities), caps
    assert caps.disable_internet is True, caps
    for flag in ("network_allowlist", "gpus", "tpus", "windows", "mounted", "docker_compose",
                 "stream", "dynamic_network_policy"):
        assert getattr(caps, flag) is False, (flag, caps)


async def check_lifecycle(root: Path) -> None:
    env = _make(root, "life")
    await env.stop(delete=True)  # never started: nothing to do
    try:
        await env.exec("true")
    except RuntimeError as e:
        assert "not started" in str(e), e
    else:
        raise AssertionError("exec before start ran")
    await env.start(force_build=False)
    try:
        server, session = env._server, env._session
        assert (await env.exec("echo one > /app/mark")).return_code == 0
        await env.start(force_build=False)  # already started: the same session, nothing leaked
        assert env._server is server and env._session is session
        assert (await env.exec("cat /app/mark")).stdout == "one\n"
        for d in ("/logs/agent", "/logs/verifier", "/logs/artifacts"):
            assert await env.is_dir(d), d
    finally:
        await env.stop(delete=True)
    await env.stop(delete=True)  # twice: a no-op
    assert env._server is None and env._session is None
    assert server.proc.poll() is not None, "the private server outlived stop"
    try:
        await env.is_file("/app/mark")
    except RuntimeError:
        pass
    else:
        raise AssertionError("a call after stop ran")
    await env.start(force_build=False)  # a stopped environment starts again, afresh
    try:
        assert not await env.is_file("/app/mark")
        assert (await env.exec("true")).return_code == 0
    finally:
        await env.stop(delete=True)


async def check_exec_shape(root: Path) -> None:
    from harbor.environments.base import ExecResult

    env = _make(root, "exec", persistent_env={"TRIAL": "t", "BOTH": "persistent"},
                config={"env": {"FROM_TASK": "task"}})
    await env.start(force_build=False)
    try:
        r = await env.exec("echo out; echo err >&2; exit 7")
        assert isinstance(r, ExecResult), r
        assert (r.stdout, r.stderr, r.return_code) == ("out\n", "err\n", 7), r
        assert isinstance(r.return_code, int)
        r = await env.exec("pwd")
        assert r.stdout == "/app\n", r
        r = await env.exec("mkdir -p sub/deeper && cd sub && pwd")
        assert r.stdout == "/app/sub\n", r
        r = await env.exec("pwd", cwd="/app/sub/deeper")
        assert (r.return_code, r.stdout) == (0, "/app/sub/deeper\n"), r
        r = await env.exec('echo "$TRIAL $BOTH $FROM_TASK $ONLY"', env={"BOTH": "call", "ONLY": "x"})
        assert r.stdout == "t call task x\n", r
        r = await env.exec("echo $ONLY.")
        assert r.stdout == ".\n", f"a call's env leaked into the next call: {r}"
        r = await env.exec("sleep 30", timeout_sec=1)
        assert r.return_code != 0, r
        r = await env.exec("head -c 300000 /dev/zero | tr '\\0' a")
        assert (r.return_code, len(r.stdout), set(r.stdout)) == (0, 300000, {"a"}), (r.return_code, len(r.stdout))
    finally:
        await env.stop(delete=True)


async def check_upload_file(root: Path) -> None:
    env = _make(root, "upfile")
    src = root / "upfile-src"
    src.mkdir()
    blob = bytes(range(256)) * 64
    (src / "blob.bin").write_bytes(blob)
    (src / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (src / "run.sh").chmod(0o755)
    await env.start(force_build=False)
    try:
        await env.upload_file(src / "blob.bin", "/app/renamed.bin")
        r = await env.exec("sha256sum /app/renamed.bin | cut -d' ' -f1; stat -c %s /app/renamed.bin")
        import hashlib
        assert r.stdout.split() == [hashlib.sha256(blob).hexdigest(), str(len(blob))], r
        await env.upload_file(src / "run.sh", "/tests/run.sh")
        r = await env.exec("/tests/run.sh")
        assert (r.return_code, r.stdout) == (0, "ran\n"), f"the mode was not kept: {r}"
        (src / "run.sh").write_text("#!/bin/sh\necho again\n")
        await env.upload_file(src / "run.sh", "/tests/run.sh")  # over an existing file
        assert (await env.exec("/tests/run.sh")).stdout == "again\n"
        await env.upload_file(str(src / "blob.bin"), "/solution/as-str.bin")  # str paths too
        assert await env.is_file("/solution/as-str.bin")
    finally:
        await env.stop(delete=True)


async def check_upload_dir(root: Path) -> None:
    env = _make(root, "updir")
    src = root / "updir-src"
    (src / "a" / "b").mkdir(parents=True)
    (src / "empty").mkdir()
    (src / "top.txt").write_text("top\n")
    (src / "a" / "b" / "deep.txt").write_text("deep\n")
    (src / "a" / "x.sh").write_text("#!/bin/sh\necho x\n")
    (src / "a" / "x.sh").chmod(0o755)
    await env.start(force_build=False)
    try:
        await env.exec("mkdir -p /tests && echo kept > /tests/old.txt")
        await env.upload_dir(src, "/tests")
        r = await env.exec("cd /tests && find . | sort")
        assert r.stdout.split() == [".", "./a", "./a/b", "./a/b/deep.txt", "./a/x.sh", "./empty",
                                    "./old.txt", "./top.txt"], r
        assert (await env.exec("/tests/a/x.sh")).stdout == "x\n"
        await env.upload_dir(str(src / "a"), "/app/new/place")  # a target that does not exist yet
        assert (await env.exec("cat /app/new/place/b/deep.txt")).stdout == "deep\n"
        assert not await env.is_dir("/app/new/place/a"), "the directory itself was put in the target"
    finally:
        await env.stop(delete=True)


async def check_download_file(root: Path) -> None:
    env = _make(root, "downfile")
    await env.start(force_build=False)
    try:
        await env.exec("printf 'x\\000y\\377' > /app/bin.dat && mkdir -p /app/d")
        await env.download_file("/app/bin.dat", root / "downfile-out" / "new" / "bin.dat")
        assert (root / "downfile-out" / "new" / "bin.dat").read_bytes() == b"x\x00y\xff"
        await env.download_file("/app/bin.dat", str(root / "downfile-out" / "as-str.dat"))
        assert (root / "downfile-out" / "as-str.dat").read_bytes() == b"x\x00y\xff"
        for bad in ("/app/missing.txt", "/app/d"):
            try:
                await env.download_file(bad, root / "downfile-out" / "bad")
            except Exception as e:  # the client's error or IsADirectoryError: said, not empty
                assert str(e), (bad, e)
            else:
                raise AssertionError(f"download_file({bad}) did not fail")
            assert not (root / "downfile-out" / "bad").exists(), bad
    finally:
        await env.stop(delete=True)


async def check_download_dir(root: Path) -> None:
    env = _make(root, "downdir")
    out = root / "downdir-out"
    (out / "sub").mkdir(parents=True)
    (out / "sub" / "f.txt").write_text("stale\n")
    (out / "local-only.txt").write_text("mine\n")
    await env.start(force_build=False)
    try:
        await env.exec("mkdir -p /logs/verifier/sub/e && echo new > /logs/verifier/sub/f.txt "
                       "&& echo 1 > /logs/verifier/reward.txt")
        await env.download_dir("/logs/verifier", out)
        assert (out / "reward.txt").read_text() == "1\n", "contents are not in the target"
        assert (out / "sub" / "f.txt").read_text() == "new\n", "an existing file was not overwritten"
        assert (out / "sub" / "e").is_dir()
        assert (out / "local-only.txt").read_text() == "mine\n"
        assert not (out / "verifier").exists()
        await env.download_dir("/logs/agent", str(root / "downdir-empty"))  # empty, str path
        assert (root / "downdir-empty").is_dir() and not any((root / "downdir-empty").iterdir())
    finally:
        await env.stop(delete=True)


async def check_harbor_helpers(root: Path) -> None:
    env = _make(root, "helpers")
    await env.start(force_build=False)
    try:
        r = await env.ensure_dirs(["/logs/artifacts/one", "/logs/agent/two"])
        assert r is not None and r.return_code == 0, r
        assert await env.is_dir("/logs/artifacts/one") and await env.is_dir("/logs/agent/two")
        await env.exec("echo x > /logs/verifier/old.txt")
        r = await env.reset_dirs(remove_dirs=["/logs/verifier"], create_dirs=["/logs/verifier"])
        assert r.return_code == 0, r
        assert await env.is_dir("/logs/verifier") and not await env.is_file("/logs/verifier/old.txt")
        await env.exec("mkdir -p /app/w/skip && echo a > /app/w/a.txt && echo s > /app/w/skip/s.txt")
        out = root / "helpers-out"
        await env.download_dir_with_exclusions(source_dir="/app/w", target_dir=out, exclude=["./skip"])
        assert (out / "a.txt").read_text() == "a\n" and not (out / "skip").exists(), list(out.iterdir())
        # What Harbor's trial and verifier call when a task filters its logs (include_logs,
        # exclude_logs; the reward files protected).
        await env.exec("mkdir -p /logs/verifier/big && echo 1 > /logs/verifier/reward.txt && "
                       "echo l > /logs/verifier/keep.log && echo b > /logs/verifier/big/blob.bin")
        out = root / "helpers-filtered"
        await env.download_dir_filtered(source_dir="/logs/verifier", target_dir=out,
                                        include=["*.log"], exclude=["big/*"], protect=["reward.txt"])
        got = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
        assert got == ["keep.log", "reward.txt"], got
    finally:
        await env.stop(delete=True)


async def check_is_dir_is_file(root: Path) -> None:
    env = _make(root, "kinds")
    await env.start(force_build=False)
    try:
        await env.exec("mkdir -p \"/app/it's a dir\" && echo f > \"/app/it's a file\"")
        assert await env.is_dir("/app") and await env.is_dir("/app/it's a dir")
        assert not await env.is_dir("/app/it's a file") and not await env.is_dir("/app/none")
        assert await env.is_file("/app/it's a file")
        assert not await env.is_file("/app/it's a dir") and not await env.is_file("/app/none")
        assert await env.is_dir("/tests") and await env.is_dir("/solution")
        assert await env.is_file("/etc/passwd") and not await env.is_dir("/etc/passwd")
    finally:
        await env.stop(delete=True)


def _run_all() -> dict:
    import asyncio
    import tempfile
    import traceback

    results = {}
    for name in CHECKS:
        with tempfile.TemporaryDirectory(prefix=f"harbor-base-{name}-") as tmp:
            try:
                asyncio.run(globals()[f"check_{name}"](Path(tmp)))
                results[name] = "ok"
            except BaseException:  # noqa: BLE001 - every failure is reported with its trace
                results[name] = traceback.format_exc()
    return results


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "clients" / "python" / "src"))
    print("RESULTS " + json.dumps(_run_all()))
    sys.exit(0)


# ----------------------------------------------------------------------------------------------
# The tests, collected by the test venv's pytest.

import pytest  # noqa: E402

from conftest import envcraft_binary, require  # noqa: E402


@pytest.fixture(scope="module")
def results() -> dict:
    binary = envcraft_binary()
    require(HARBOR_PY.exists(), f"no Harbor venv at {HARBOR_PY} (make target/harbor-venv/.ready)")
    require(binary is not None, "no envcraft binary (cargo build, or set ENVCRAFT_BIN)")
    env = dict(os.environ, ENVCRAFT_BIN=str(binary), PYTHONPATH=str(REPO / "clients" / "python" / "src"))
    done = subprocess.run([str(HARBOR_PY), __file__], capture_output=True, text=True, env=env, timeout=120)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULTS ")]
    assert done.returncode == 0 and lines, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return json.loads(lines[-1][len("RESULTS "):])


@pytest.mark.parametrize("check", CHECKS)
def test_base_environment_contract(results: dict, check: str) -> None:
    assert results[check] == "ok", results[check]
