"""Harbor through envcraft (issue 21): what a trial costs, beside a container per trial.

    target/harbor-venv/bin/python bench/harbor.py ENVCRAFT_BIN [RESULTS.md] [--rounds N] [--oracle-runs K]

Run with the interpreter that has Harbor (target/harbor-venv, Python 3.12). Two measurements:

- Per-trial overhead: `start` + `exec("true")` + `stop` of `envcraft.harbor:EnvcraftEnvironment`
  (constructed each trial, as Harbor does), median of N rounds, in two setups: a private
  `envcraft serve` started and stopped by the provider for the trial (the default, what
  `harbor run --env envcraft.harbor:EnvcraftEnvironment --ek base=host` does), and a shared
  server given by `--ek url=` (started once here). Beside it in the same rounds, interleaved:
  `podman run --rm --network none IMAGE true` of a Debian bookworm minbase image (mmdebstrap,
  cached under target/podman-harbor/, `podman import`ed into a store of its own on /dev/shm;
  bench/podman.py), skipped with the reason when podman cannot run here.
- Oracle runs per second: `envcraft export harbor workspaces/example` into a temporary
  directory, then `harbor run -a oracle -n 2` of it through the provider (every reward must be
  1.0), K times; beside it, in the same run, `envcraft suite --base host --jobs 2` of the same
  exported directory (the same tasks' reference solutions natively, no Harbor).
"""

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
# This file's name is Harbor's package's: bench/ goes last on the path, so that `harbor` is
# Harbor and `podman`, `report` are the neighbours here.
sys.path = [p for p in sys.path if Path(p or ".").resolve() != HERE] + [str(HERE)]
sys.path.insert(0, str(REPO / "clients" / "python" / "src"))

from podman import Podman, pick_user  # noqa: E402
from report import publish  # noqa: E402

IMAGE_DIR = REPO / "target" / "podman-harbor"
IMAGE_TAR = IMAGE_DIR / "bookworm-minbase.tar"
IMAGE_NAME = "localhost/envcraft-harbor-bench:bookworm-minbase"
IMAGE_EPOCH = "1700000000"
HARBOR = Path(sys.executable).with_name("harbor")


def make_env(root: Path, i: int, **kwargs):
    from harbor.models.task.config import EnvironmentConfig, NetworkMode, NetworkPolicy
    from harbor.models.trial.paths import TrialPaths

    from envcraft.harbor import EnvcraftEnvironment

    trial_dir = root / f"trial-{i}"
    (trial_dir / "environment").mkdir(parents=True)
    paths = TrialPaths(trial_dir / "trial")
    paths.mkdir()
    return EnvcraftEnvironment(
        environment_dir=trial_dir / "environment", environment_name="bench",
        session_id=f"bench__{i}__env", trial_paths=paths,
        task_env_config=EnvironmentConfig(network_mode=NetworkMode.NO_NETWORK, workdir="/app"),
        network_policy=NetworkPolicy(network_mode=NetworkMode.NO_NETWORK), base="host", **kwargs,
    )


async def one_trial(root: Path, i: int, **kwargs) -> dict:
    """Construct, start, exec `true`, stop: the seconds of each step and of the whole."""
    t0 = time.perf_counter()
    env = make_env(root, i, **kwargs)
    t1 = time.perf_counter()
    await env.start(force_build=False)
    t2 = time.perf_counter()
    r = await env.exec("true")
    t3 = time.perf_counter()
    await env.stop(delete=True)
    t4 = time.perf_counter()
    if r.return_code != 0:
        raise RuntimeError(f"exec true: {r}")
    return {"whole": t4 - t0, "construct": t1 - t0, "start": t2 - t1, "exec": t3 - t2, "stop": t4 - t3}


def build_image():
    if IMAGE_TAR.is_file():
        return
    IMAGE_DIR.mkdir(parents=True, exist_ok=True)
    partial = IMAGE_TAR.with_suffix(".partial.tar")
    print(f"building {IMAGE_TAR} (mmdebstrap --variant=minbase bookworm)", file=sys.stderr)
    subprocess.run(["mmdebstrap", "--variant=minbase", "--quiet", "bookworm", str(partial)],
                   check=True, env=dict(os.environ, SOURCE_DATE_EPOCH=IMAGE_EPOCH))
    partial.rename(IMAGE_TAR)


def podman_peer():
    """(Podman ready to run the image, None) or (None, why it is skipped)."""
    missing = [tool for tool in ("podman", "mmdebstrap") if not shutil.which(tool)]
    if missing:
        return None, f"skipped: {' and '.join(missing)} missing"
    user, why = pick_user()
    if why:
        return None, f"skipped: {why}"
    try:
        build_image()
    except subprocess.CalledProcessError as e:
        return None, f"skipped: mmdebstrap failed (exit {e.returncode})"
    peer = Podman(user)
    imported = subprocess.run(peer.cmd("import", "-q", str(IMAGE_TAR), IMAGE_NAME), capture_output=True, text=True)
    why = (f"podman import failed: {imported.stderr.strip()[-300:]}" if imported.returncode
           else peer.find_runtime("--network", "none", IMAGE_NAME, "/bin/true"))
    if why:
        peer.close()
        return None, f"skipped: podman cannot start the image here ({why})"
    return peer, None


def podman_true(peer) -> float:
    argv = peer.run_cmd("--network", "none", IMAGE_NAME, "/bin/true")
    t = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True)
    took = time.perf_counter() - t
    if done.returncode != 0:
        raise RuntimeError(f"podman run: exit {done.returncode}: {done.stderr[-500:]}")
    return took


def shared_server(binary: str, root: Path):
    from envcraft.harbor import PrivateServer, policy_toml, write_environment

    write_environment(root / "workspaces", "harbor", policy_toml("/app", None, None))
    return PrivateServer(binary, root / "workspaces", root / "state")


def overhead(binary: str, rounds: int) -> dict:
    peer, skipped = podman_peer()
    times = {"private": [], "shared": [], "podman": []}
    with tempfile.TemporaryDirectory(prefix="envcraft-bench-harbor-", dir="/dev/shm") as tmp:
        root = Path(tmp)
        server = shared_server(binary, root / "shared")
        try:
            async def rounds_of_trials():
                for i in range(rounds):
                    times["private"].append(await one_trial(root / "p", i, envcraft_bin=binary))
                    times["shared"].append(await one_trial(root / "s", i, url=server.url))
                    if peer:
                        times["podman"].append(podman_true(peer))
            # One warm-up of each, not counted (the first trial imports the client's modules).
            asyncio.run(one_trial(root / "w", 0, envcraft_bin=binary))
            if peer:
                podman_true(peer)
            asyncio.run(rounds_of_trials())
        finally:
            server.stop()
            if peer:
                said = peer.describe()
                peer.close()
    out = {}
    for mode in ("private", "shared"):
        out[mode] = {k: statistics.median(t[k] for t in times[mode]) for k in times[mode][0]}
        out[mode]["min"] = min(t["whole"] for t in times[mode])
        out[mode]["max"] = max(t["whole"] for t in times[mode])
    out["podman"] = ({"whole": statistics.median(times["podman"]), "min": min(times["podman"]),
                      "max": max(times["podman"]), "said": said} if peer else {"said": skipped})
    return out


def oracle_rate(binary: str, runs: int) -> dict:
    # LiteLLM, which Harbor imports, fetches a model cost map from GitHub at exit, three tries
    # on an offline machine: its bundled copy is used instead.
    env = dict(os.environ, PYTHONPATH=str(REPO / "clients" / "python" / "src"), ENVCRAFT_BIN=binary,
               LITELLM_LOCAL_MODEL_COST_MAP="True")
    harbor, window, native = [], [], []
    with tempfile.TemporaryDirectory(prefix="envcraft-bench-harbor-oracle-") as tmp:
        tmp = Path(tmp)
        dataset = tmp / "exported"
        done = subprocess.run([binary, "export", "harbor", "workspaces/example", str(dataset)],
                              cwd=REPO, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"envcraft export harbor: {done.stdout[-2000:]}{done.stderr[-2000:]}")
        tasks = sorted(p.name for p in dataset.iterdir())
        for k in range(runs):
            job = f"oracle-{k}"
            argv = [str(HARBOR), "run", "-p", str(dataset), "-a", "oracle", "-n", "2",
                    "--env", "envcraft.harbor:EnvcraftEnvironment", "--ek", "base=host",
                    "-o", str(tmp / "jobs"), "--job-name", job, "-y", "-q"]
            t = time.perf_counter()
            done = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True, timeout=1800)
            took = time.perf_counter() - t
            trials = [json.loads(p.read_text()) for p in sorted((tmp / "jobs" / job).glob("*/result.json"))]
            rewards = [((t.get("verifier_result") or {}).get("rewards") or {}).get("reward") for t in trials]
            if done.returncode != 0 or len(trials) != len(tasks) or any(r != 1.0 for r in rewards):
                raise RuntimeError(f"harbor run -a oracle: exit {done.returncode}, rewards {rewards}: "
                                   f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
            harbor.append(took)
            # The job's own span in Harbor's result.json: its trials, not the CLI's start and exit.
            job_result = json.loads((tmp / "jobs" / job / "result.json").read_text())
            window.append((datetime.fromisoformat(job_result["finished_at"])
                           - datetime.fromisoformat(job_result["started_at"])).total_seconds())
            argv = [binary, "suite", str(dataset), "--base", "host", "--jobs", "2", "--json"]
            t = time.perf_counter()
            done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=1800)
            took = time.perf_counter() - t
            report = json.loads(done.stdout or "{}")
            got = [t["reward"] for t in report.get("tasks", [])]
            if len(got) != len(tasks) or any(r != 1.0 for r in got):
                raise RuntimeError(f"envcraft suite: exit {done.returncode}, rewards {got}: {done.stderr[-2000:]}")
            native.append(took)
    return {"tasks": len(tasks), "harbor": statistics.median(harbor), "window": statistics.median(window),
            "native": statistics.median(native),
            "harbor_all": harbor, "native_all": native}


def git_rev() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                          text=True).stdout.strip()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("results", nargs="?")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--oracle-runs", type=int, default=3)
    args = parser.parse_args()
    binary = str(Path(args.binary).resolve())
    o = overhead(binary, args.rounds)
    rate = oracle_rate(binary, args.oracle_runs)
    pod = o["podman"]
    ms = lambda s: f"{s * 1e3:.0f}"  # noqa: E731
    lines = [
        f"## Harbor (issue 21): bench/harbor.py at {git_rev()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "",
        f"Per-trial overhead, start + exec `true` + stop, median of {args.rounds} interleaved rounds "
        f"(min-max), ms; peer: {pod['said']}.",
        "",
        "| what | median | min-max | start | exec | stop | / podman run --rm |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for mode, what in (("private", "provider, private `envcraft serve` per trial (default)"),
                       ("shared", "provider, shared server (`--ek url=`)")):
        m = o[mode]
        ratio = f"{m['whole'] / pod['whole']:.2f}x" if "whole" in pod else ""
        lines.append(f"| {what} | {ms(m['whole'])} | {ms(m['min'])}-{ms(m['max'])} | {ms(m['start'])} "
                     f"| {ms(m['exec'])} | {ms(m['stop'])} | {ratio} |")
    if "whole" in pod:
        lines.append(f"| `podman run --rm --network none IMAGE true` | {ms(pod['whole'])} "
                     f"| {ms(pod['min'])}-{ms(pod['max'])} | | | | 1.00x |")
    lines += [
        "",
        f"Oracle runs of workspaces/example exported ({rate['tasks']} tasks, every reward 1.0), -n 2 / "
        f"--jobs 2, median of {len(rate['harbor_all'])} runs:",
        "",
        "| what | wall (s) | tasks/s | speed / native |",
        "| --- | ---: | ---: | ---: |",
        f"| `harbor run -a oracle -n 2` through the provider | {rate['harbor']:.2f} "
        f"| {rate['tasks'] / rate['harbor']:.2f} | {rate['native'] / rate['harbor']:.2f}x |",
        f"| the same, the job's span in Harbor's result.json (no CLI start-up or exit) | {rate['window']:.2f} "
        f"| {rate['tasks'] / rate['window']:.2f} | {rate['native'] / rate['window']:.2f}x |",
        f"| `envcraft suite --base host --jobs 2` of the same directory | {rate['native']:.2f} "
        f"| {rate['tasks'] / rate['native']:.2f} | 1.00x |",
    ]
    publish(lines, args.results)


if __name__ == "__main__":
    main()
