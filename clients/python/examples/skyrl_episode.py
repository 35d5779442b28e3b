#!/usr/bin/env python3
"""An envcraft episode through SkyRL's environment API (``skyrl_gym.make("envcraft", ...)``).

On a CPU, with an OpenAI-compatible chat endpoint as the policy (a local vLLM, or the scripted
model of the tests); its tool calls are given to the environment as the text a Qwen model
writes (``<tool_call>{...}</tool_call>``), since SkyRL hands environments the raw text::

    python skyrl_episode.py --base-url http://127.0.0.1:8000/v1 --model scripted --task example/extract-todos

On a GPU box, SkyRL's trainer makes the same environment from each dataset row: import
``envcraft.skyrl`` in the entry point (it registers ``envcraft``) and give the rows
``env_class: envcraft`` with ``task`` (and ``seed``, ``max_turns``) among their fields; see the
client's README. Without ``--envcraft-url`` a private ``envcraft serve`` is started per process.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, List, Optional

import skyrl_gym

import envcraft.skyrl  # noqa: F401  (registers "envcraft")
from rollout import ChatEndpoint


def as_text(message: Dict[str, Any]) -> str:
    """The assistant message as a Qwen model's raw text: its content and one block per call."""
    parts = [message.get("content") or ""]
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        args = fn.get("arguments") or "{}"
        try:
            parsed: Any = json.loads(args)
        except ValueError:
            parsed = args
        parts.append("<tool_call>\n" + json.dumps({"name": fn.get("name"), "arguments": parsed}) + "\n</tool_call>")
    return "\n".join(p for p in parts if p)


def episode(env: Any, chat: ChatEndpoint) -> float:
    conversation, _ = env.init([])
    while True:
        text = as_text(chat.complete(conversation, []))  # the tools are in the system prompt
        conversation.append({"role": "assistant", "content": text})
        out = env.step(text)
        conversation.extend(out["observations"])
        if out["done"]:
            return float(out["reward"])


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", required=True)
    p.add_argument("--seed", type=int)
    p.add_argument("--max-turns", type=int, default=16)
    p.add_argument("--envcraft-url", default=None)
    p.add_argument("--workspaces")
    p.add_argument("--skills")
    p.add_argument("--base-url", required=True)
    p.add_argument("--model", default="scripted")
    args = p.parse_args(argv)
    env_config = {"url": args.envcraft_url, "workspaces": args.workspaces, "skills": args.skills}
    extras = {"task": args.task, "seed": args.seed, "max_turns": args.max_turns}
    env = skyrl_gym.make("envcraft", env_config=env_config, extras=extras)
    try:
        reward = episode(env, ChatEndpoint(args.base_url, args.model, None, 0.0))
    finally:
        env.close()
    print(f"{args.task}: reward {reward:.3f} ({env.get_metrics()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
