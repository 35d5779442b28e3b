#!/usr/bin/env python3
"""One rollout of an envcraft task driven by an OpenAI-compatible chat completions endpoint.

    python rollout.py --task example/archive-read-mail \
        --envcraft-url http://127.0.0.1:8080 \
        --base-url http://localhost:8000/v1 --model Qwen/Qwen3-8B

Creates a session, gives the model the environment's docs, the task's prompt and the
session's tools, runs every tool call the model makes through ``session.call`` and sends the
results back, moves to the task's next prompt when the model answers without a tool call,
stops after the last prompt or ``--max-steps`` model calls, verifies and prints the reward.
Standard library only (``urllib``): no ``openai`` package needed. Environment defaults:
``ENVCRAFT_URL``, ``ENVCRAFT_TOKEN``, ``OPENAI_BASE_URL``, ``OPENAI_MODEL``, ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from typing import Any, Callable, Dict, List, Optional

import envcraft

SYSTEM = (
    "You are an agent working in a workspace through the tools you are given. "
    "Use them to do what the user asks; when you are done, answer without calling a tool."
)


class ChatEndpoint:
    """``POST {base_url}/chat/completions`` with ``tools``; returns the first choice's message."""

    def __init__(self, base_url: str, model: str, api_key: Optional[str], temperature: float, timeout: float = 600.0) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key
        self.temperature = temperature
        self.timeout = timeout

    def complete(self, messages: List[Dict[str, Any]], tools: List[Dict[str, Any]]) -> Dict[str, Any]:
        body = {"model": self.model, "messages": messages, "temperature": self.temperature}
        if tools:
            body["tools"] = tools
            body["tool_choice"] = "auto"
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                answer = json.loads(resp.read())
        except urllib.error.HTTPError as e:
            raise SystemExit(f"chat endpoint {self.url}: HTTP {e.code}: {e.read()[:500]!r}") from None
        except urllib.error.URLError as e:
            raise SystemExit(f"chat endpoint {self.url}: {e.reason}") from None
        message: Dict[str, Any] = answer["choices"][0]["message"]
        return message


def run_tool_call(session: envcraft.Session, call: Dict[str, Any]) -> Dict[str, Any]:
    """Runs one of the model's tool calls; a call the model got wrong becomes an error result
    the model reads, never an exception that ends the rollout."""
    fn = call.get("function") or {}
    name = fn.get("name") or ""
    try:
        args = json.loads(fn.get("arguments") or "{}")
    except ValueError as e:
        return {"ok": False, "error": {"category": "invalid_argument", "message": f"arguments are not JSON: {e}"}}
    if not isinstance(args, dict):
        return {"ok": False, "error": {"category": "invalid_argument", "message": "arguments must be a JSON object"}}
    try:
        return session.call(name, **args)
    except envcraft.BadRequest as e:  # unknown tool, malformed call
        return {"ok": False, "error": {"category": e.category, "message": e.message}}


def rollout(
    session: envcraft.Session,
    chat: ChatEndpoint,
    max_steps: int,
    log: Callable[[str], None] = print,
) -> envcraft.Verdict:
    system = SYSTEM + ("\n\n" + session.docs if session.docs else "")
    messages: List[Dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": session.prompt or ""},
    ]
    for step in range(max_steps):
        message = chat.complete(messages, session.tools)
        calls = message.get("tool_calls") or []
        messages.append({"role": "assistant", "content": message.get("content") or "", **({"tool_calls": calls} if calls else {})})
        for call in calls:
            result = run_tool_call(session, call)
            log(f"[{step}] {call.get('function', {}).get('name')} -> ok={result.get('ok')}")
            messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": json.dumps(result)})
        if calls:
            continue
        log(f"[{step}] answer: {(message.get('content') or '')[:200]}")
        prompt = session.next_turn()
        if prompt is None:
            break
        messages.append({"role": "user", "content": prompt})
    else:
        log(f"stopped after {max_steps} model calls")
    return session.verify()


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--task",
        required=True,
        help="ENV/ID, as `GET /v1/tasks` lists them, or @FILE: an inline task, its JSON object in FILE",
    )
    p.add_argument("--envcraft-url", default=os.environ.get("ENVCRAFT_URL", "http://127.0.0.1:8080"))
    p.add_argument("--envcraft-token", default=os.environ.get("ENVCRAFT_TOKEN"))
    p.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL", "http://localhost:8000/v1"))
    p.add_argument("--model", default=os.environ.get("OPENAI_MODEL"), required="OPENAI_MODEL" not in os.environ)
    p.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY"))
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--max-steps", type=int, default=30, help="model calls at most")
    p.add_argument("--base-time", help="RFC 3339 clock override")
    p.add_argument("--seed", type=int, help="exported to the task's commands as ENVCRAFT_SEED (0 to 2**64-1)")
    args = p.parse_args(argv)
    task: envcraft.Task = args.task
    if args.task.startswith("@"):
        with open(args.task[1:], encoding="utf-8") as f:
            task = json.load(f)

    chat = ChatEndpoint(args.base_url, args.model, args.api_key, args.temperature)
    # One kept-alive connection carries every call of the rollout; leaving the block closes it.
    with envcraft.Client(args.envcraft_url, token=args.envcraft_token) as client:
        with client.create(task, base_time=args.base_time, seed=args.seed) as session:
            seed = "" if session.seed is None else f", seed {session.seed}"
            print(f"session {session.id}: {session.task} ({len(session.tools)} tools{seed})")
            verdict = rollout(session, chat, args.max_steps)
            for check in verdict.failed_checks:
                print(f"failed check: {json.dumps(check)}")
    print(f"reward {verdict.reward:.3f} passed {verdict.passed}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
