"""The provider's methods one by one, run under the interpreter that has Harbor
(``target/harbor-venv/bin/python``; the test venv cannot import Harbor): ``exec`` with ``cwd``,
``env`` and ``timeout_sec``, a command outliving one ``exec`` call (polled), uploads and
downloads of files and directories, ``is_dir``/``is_file``. Prints ``ok`` or raises."""

import asyncio
import sys
import tempfile
from pathlib import Path

from harbor.models.task.config import EnvironmentConfig, NetworkMode, NetworkPolicy
from harbor.models.trial.paths import TrialPaths

import envcraft.harbor as provider


async def main(root: Path) -> None:
    (root / "environment").mkdir()
    trial = TrialPaths(root / "trial")
    trial.mkdir()
    config = EnvironmentConfig(network_mode=NetworkMode.NO_NETWORK, workdir="/app")
    env = provider.EnvcraftEnvironment(
        environment_dir=root / "environment", environment_name="methods",
        session_id="methods__x__env", trial_paths=trial, task_env_config=config, base="host",
        network_policy=NetworkPolicy(network_mode=NetworkMode.NO_NETWORK),
    )
    # Short enough that the sleep below outlives the first call and is polled.
    provider._YIELD_MS = 200
    await env.start(force_build=False)
    try:
        r = await env.exec("pwd; echo $GREETING", cwd="/tests", env={"GREETING": "hi"})
        assert r.return_code == 0 and r.stdout.splitlines()[1] == "hi", r
        r = await env.exec("sleep 1; echo slept; exit 3")
        assert (r.return_code, r.stdout) == (3, "slept\n"), r
        r = await env.exec("sleep 30", timeout_sec=1)
        assert r.return_code != 0, r
        src = root / "src"
        (src / "sub").mkdir(parents=True)
        (src / "sub" / "a.txt").write_text("a\n")
        (root / "one.txt").write_text("one\n")
        await env.upload_dir(src, "/tests/up")
        await env.upload_file(root / "one.txt", "/solution/renamed.txt")
        assert await env.is_dir("/tests/up/sub") and not await env.is_dir("/tests/up/sub/a.txt")
        assert await env.is_file("/solution/renamed.txt") and not await env.is_file("/nope")
        r = await env.exec("cat /tests/up/sub/a.txt /solution/renamed.txt")
        assert r.stdout == "a\none\n", r
        await env.download_file("/solution/renamed.txt", root / "back" / "r.txt")
        assert (root / "back" / "r.txt").read_text() == "one\n"
        await env.download_dir("/tests/up", root / "back" / "up")
        assert (root / "back" / "up" / "sub" / "a.txt").read_text() == "a\n"
    finally:
        await env.stop(delete=True)
    assert env._server is None and env._session is None


with tempfile.TemporaryDirectory() as tmp:
    asyncio.run(main(Path(tmp)))
print("ok")
sys.exit(0)
