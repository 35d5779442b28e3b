#!/usr/bin/env python3
"""The trainer adapters' cost per tool call over a direct `Session.call`, and TRL episodes per
second on the bundled suite's reference solutions; loopback only, bounded in count and time.

    bench/trainers.py ENVCRAFT_BINARY [RESULTS_MD] [--calls N] [--rounds R] [--passes P] [--per-call-only]

Run with the trainers' venv (`target/trainers-venv/bin/python`: trl, skyrl-gym, verl). Starts a
private `envcraft serve` (`Client.local()`) over the bundled workspaces, and in one run:

1. per-call time of one `ls inbox` in one session of example/extract-todos, sequential, on one
   kept-alive connection, interleaved in R rounds of N calls each: a direct `Session.call`; the
   TRL adapter's tool method (`envcraft.trl`, what GRPOTrainer calls); SkyRL's `step` with the
   call in a `<tool_call>` block (parse, call, observation); verl's `EnvcraftTool`
   `create`/`execute`/`release` as ToolAgentLoop makes them (on its event loop, the call in a
   thread only to open the session). Every answer is checked (`ok`, in the text the adapters
   give). The ways run in a rotated order in R rounds of N calls; ratio: the median over the
   rounds of the way's per-call time over its peer's in the same round (the machine's load moves
   between rounds, and weighs on both sides of each ratio): a direct `Session.call`, and for
   verl (whose tools are awaited on its event loop) a direct `AsyncSession.call` awaited on a
   loop, measured too. Target (issue 22): at most 1.1x. Then the same ways with the client's
   transport replaced by the answer it gave (no socket, no server): the microseconds each
   adapter itself adds to its peer, whatever the machine's load.
2. episodes per second of every bundled task's reference solution (all environments but
   office, whose image may be absent) through the TRL adapter with 16 instances at once
   (`environment_factories()`, 16 threads: reset, the solution's tool calls, get_reward), P
   passes, beside the same episodes through `Client`/`Session` directly (16 threads); every
   reward must be 1.0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import queue
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import envcraft  # noqa: E402
from report import publish, verdict  # noqa: E402

TASK = "example/extract-todos"
CALL = {"tool": "ls", "args": {"path": "inbox"}}
OK = '"ok": true'  # in the JSON text of a result that succeeded (the adapters' answers)
CONCURRENCY = 16
STUB_CALLS, STUB_ROUNDS = 2000, 15


def solution(task: str) -> List[Dict[str, Any]]:
    env, tid = task.split("/")
    path = ROOT / "workspaces" / env / "tasks" / tid / "solution.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def per_call(client: envcraft.Client, calls: int, rounds: int) -> Tuple[Dict[str, List[float]], Dict[str, List[float]]]:
    """Per-call seconds of each way in each round: against the server, and with the transport stubbed."""
    from envcraft import skyrl as envcraft_skyrl  # noqa: F401  (registers "envcraft")
    from envcraft import trl as envcraft_trl
    from envcraft import verl as envcraft_verl
    import skyrl_gym

    direct = client.create(TASK)
    trl_env = envcraft_trl.environment_factory(task=TASK, client=client)()
    trl_env.reset(task=TASK)
    sky = skyrl_gym.make("envcraft", env_config={"url": client.url}, extras={"task": TASK, "max_turns": 10**9})
    sky.init([])
    text = "<tool_call>\n" + json.dumps({"name": CALL["tool"], "arguments": CALL["args"]}) + "\n</tool_call>"
    verl_tool = envcraft_verl.EnvcraftTool({"type": "native", "tool": "ls", "task": TASK, "url": client.url})
    loop = asyncio.new_event_loop()

    class AgentData:
        request_id = "bench-verl"

    async def verl_call() -> str:
        instance, _ = await verl_tool.create(create_kwargs={"task": TASK})
        response, _, _ = await verl_tool.execute(instance, CALL["args"], agent_data=AgentData())
        await verl_tool.release(instance)
        return str(response.text)

    async_client = envcraft.AsyncClient(client.url)
    async_session = loop.run_until_complete(async_client.create(TASK))

    async def async_direct() -> bool:
        return bool((await async_session.call(CALL["tool"], **CALL["args"]))["ok"])

    # Every way checks its answer the same cheap way (the adapters hand the model text, the
    # direct calls a dict): the check is not what is measured.
    ways: Dict[str, Callable[[], bool]] = {
        "direct AsyncSession.call": lambda: loop.run_until_complete(async_direct()),
        "direct Session.call": lambda: bool(direct.call(CALL["tool"], **CALL["args"])["ok"]),
        "TRL tool method": lambda: OK in trl_env.ls(path="inbox"),
        "SkyRL step": lambda: OK in sky.step(text)["observations"][0]["content"],
        "verl EnvcraftTool": lambda: OK in loop.run_until_complete(verl_call()),
    }
    for fn in ways.values():  # warm up: connections, the verl session
        for _ in range(20):
            assert fn()
    times = interleaved(ways, calls, rounds)
    # The same ways with the transport replaced by the answer it gave (no socket, no server):
    # what each adapter itself adds to its peer, apart from the server's and the machine's noise.
    canned = client._send(envcraft._wire.call_tool(direct.id, CALL["tool"], CALL["args"]))
    real_send, real_async_send = envcraft.Client._send, envcraft.AsyncClient._send

    async def async_canned(self: Any, req: Any) -> Dict[str, Any]:
        return dict(canned)

    envcraft.Client._send = lambda self, req: dict(canned)  # type: ignore[assignment]
    envcraft.AsyncClient._send = async_canned  # type: ignore[assignment]
    try:
        stubbed = interleaved(ways, STUB_CALLS, STUB_ROUNDS)
    finally:
        envcraft.Client._send, envcraft.AsyncClient._send = real_send, real_async_send  # type: ignore[assignment]
    direct.close()
    trl_env.get_reward()
    sky.close()
    envcraft_verl.finish_trajectory("bench-verl")
    loop.run_until_complete(async_session.close())
    loop.run_until_complete(async_client.aclose())
    for cached_loop, cached in list(envcraft_verl._async_clients.values()):
        if cached_loop is loop:
            loop.run_until_complete(cached.aclose())
    loop.close()
    return times, stubbed


def interleaved(ways: Dict[str, Callable[[], bool]], calls: int, rounds: int) -> Dict[str, List[float]]:
    """Per-call seconds of each way in each of ``rounds`` rounds of ``calls`` calls, the ways in a
    rotated order from one round to the next (none always runs first, or after the same one)."""
    names = list(ways)
    times: Dict[str, List[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            fn = ways[name]
            t = time.perf_counter()
            for _ in range(calls):
                if not fn():
                    raise SystemExit(f"{name}: a call failed")
            times[name].append((time.perf_counter() - t) / calls)
    return times


def paired_ratio(way: List[float], peer: List[float]) -> float:
    """The median over rounds of the way's time over its peer's in the same round: the machine's
    load, which moves from round to round, weighs on both sides of each ratio alike."""
    return statistics.median(w / p for w, p in zip(way, peer))


def suite_tasks(client: envcraft.Client) -> List[Tuple[str, str]]:
    return [(str(t["env"]), str(t["task"])) for t in client.tasks() if t["env"] != "office"]


def episodes(run_one: Callable[[str, str], float], tasks: List[Tuple[str, str]], passes: int) -> Tuple[float, List[float]]:
    work: "queue.Queue[Tuple[str, str]]" = queue.Queue()
    for _ in range(passes):
        for item in tasks:
            work.put(item)
    rewards: List[float] = []
    lock = threading.Lock()

    def worker() -> None:
        while True:
            try:
                env, task = work.get_nowait()
            except queue.Empty:
                return
            reward = run_one(env, task)
            with lock:
                rewards.append(reward)

    threads = [threading.Thread(target=worker) for _ in range(CONCURRENCY)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return time.perf_counter() - t, rewards


def episode_runs(client: envcraft.Client, passes: int) -> Tuple[List[Tuple[str, str]], Dict[str, List[Tuple[float, List[float]]]]]:
    """The suite's reference solutions through the TRL adapter and through the client, twice each."""
    from envcraft import trl as envcraft_trl

    tasks = suite_tasks(client)
    classes = envcraft_trl.environment_factories(client=client, envs=sorted({e for e, _ in tasks}))
    pools: Dict[str, "queue.Queue[Any]"] = {env: queue.Queue() for env in classes}
    for env, cls in classes.items():
        for _ in range(CONCURRENCY):
            pools[env].put(cls())

    def through_trl(env: str, task: str) -> float:
        instance = pools[env].get()
        try:
            instance.reset(task=task)
            for step in solution(task):
                getattr(instance, step["tool"])(**step["args"])
            return float(instance.get_reward())
        finally:
            pools[env].put(instance)

    def direct(env: str, task: str) -> float:
        with client.create(task) as s:
            while True:  # every turn's prompt, as the adapter's reset walks them
                if s.next_turn() is None:
                    break
            for step in solution(task):
                s.call(step["tool"], **step["args"])
            return float(s.verify().reward)

    runs = {"direct Client/Session": [], "TRL adapter": []}  # type: Dict[str, List[Tuple[float, List[float]]]]
    for _ in range(2):  # interleaved, twice each
        runs["direct Client/Session"].append(episodes(direct, tasks, passes))
        runs["TRL adapter"].append(episodes(through_trl, tasks, passes))
    return tasks, runs


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("binary")
    p.add_argument("results", nargs="?")
    p.add_argument("--calls", type=int, default=50)
    p.add_argument("--rounds", type=int, default=60)
    p.add_argument("--passes", type=int, default=2)
    p.add_argument("--per-call-only", action="store_true", help="measure the per-call overhead only, not the episodes")
    args = p.parse_args()
    with envcraft.Client.local(args.binary, workspaces=ROOT / "workspaces", skills=ROOT / "skills",
                               serve_args=["--max-sessions", "256"]) as client:
        times, stubbed = per_call(client, args.calls, args.rounds)
        runs: Dict[str, List[Tuple[float, List[float]]]] = {}
        tasks: List[Tuple[str, str]] = []
        if not args.per_call_only:
            tasks, runs = episode_runs(client, args.passes)

    base = times["direct Session.call"]
    # verl awaits its tools on its event loop: its peer is the asyncio client on a loop.
    peer_of = {"verl EnvcraftTool": "direct AsyncSession.call"}
    lines = [
        f"## Trainer adapters ({time.strftime('%Y-%m-%d')}, {os.uname().machine}, {os.cpu_count()} cores, binary {args.binary})",
        "",
        f"Per tool call (`ls inbox`, one session, sequential, one kept-alive connection), {args.rounds} rounds of {args.calls} calls,",
        "the ways in a rotated order; ratio: the median of the rounds' ratios (way over peer, same round);",
        f"adapter's own: the same calls with the transport replaced by its answer (min of {STUB_ROUNDS} rounds of {STUB_CALLS}), over its peer's:",
        "",
        "| way | p50 per call | min..max of the rounds | ratio to Session.call | ratio to its peer | target <= 1.1x | adapter's own per call |",
        "| --- | ---: | ---: | ---: | ---: | --- | ---: |",
    ]
    for name, ts in times.items():
        med = statistics.median(ts)
        peer_name = peer_of.get(name, "direct Session.call")
        ratio = paired_ratio(ts, times[peer_name])
        own = (min(stubbed[name]) - min(stubbed[peer_name])) * 1e6
        direct_way = name.startswith("direct")
        ok = "" if direct_way else verdict(ratio <= 1.1)
        shown = "" if direct_way else f"{ratio:.3f}x ({peer_name})"
        own_shown = f"{min(stubbed[name]) * 1e6:.1f} µs (client only)" if direct_way else f"+{own:.1f} µs"
        lines.append(f"| {name} | {med * 1e6:.0f} µs | {min(ts) * 1e6:.0f}..{max(ts) * 1e6:.0f} µs | {paired_ratio(ts, base):.3f}x | {shown} | {ok} | {own_shown} |")
    n_eps = len(tasks) * args.passes
    if not runs:
        publish(lines, args.results)
        return 0
    lines += [
        "",
        f"Episodes of the bundled suite's reference solutions ({len(tasks)} tasks, office left out, x{args.passes}), {CONCURRENCY} at once:",
        "",
        "| way | episodes/s (each run) | rewards 1.0 |",
        "| --- | --- | --- |",
    ]
    for name, results in runs.items():
        rates = ", ".join(f"{n_eps / secs:.1f}" for secs, _ in results)
        ones = sum(1 for _, rs in results for r in rs if r == 1.0)
        lines.append(f"| {name} | {rates} | {ones}/{n_eps * len(results)} |")
    publish(lines, args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
