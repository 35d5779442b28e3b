#!/usr/bin/env python3
"""GRPO on envcraft tasks with TRL (``envcraft.trl.environment_factory``).

On a GPU box, the real trainer (``pip install envcraft[trl]``)::

    python trl_grpo.py --train Qwen/Qwen3-0.6B --task example/extract-todos --task example/archive-read-mail

On a CPU, the same environment class driven the way GRPOTrainer drives it (``reset(**row)``,
one method call per tool call, ``get_reward()``), with an OpenAI-compatible chat endpoint as the
policy (a local vLLM, or the scripted model of the tests)::

    python trl_grpo.py --base-url http://127.0.0.1:8000/v1 --model scripted --task example/extract-todos

Without ``--envcraft-url`` a private ``envcraft serve`` is started (``Client.local()``; it looks
for ``./workspaces`` unless ``--workspaces`` says where).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, List, Optional

from envcraft import trl as envcraft_trl
from rollout import ChatEndpoint


def cpu_rollouts(env_class: Any, rows: List[Dict[str, Any]], chat: ChatEndpoint, max_steps: int) -> List[float]:
    """What GRPOTrainer does with each row, the model being ``chat``."""
    rewards = []
    env = env_class()
    for row in rows:
        messages: List[Dict[str, Any]] = [{"role": "user", "content": env.reset(**row)}]
        for _ in range(max_steps):
            message = chat.complete(messages, env_class.tools)
            calls = message.get("tool_calls") or []
            messages.append({"role": "assistant", "content": message.get("content") or "", **({"tool_calls": calls} if calls else {})})
            if not calls:
                break
            for call in calls:
                fn = call.get("function") or {}
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                    result = getattr(env, fn.get("name", ""))(**args)
                except Exception as e:  # GRPOTrainer too turns a failing tool into {"error": ...}
                    result = str({"error": str(e)})
                messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "name": fn.get("name"), "content": result})
        rewards.append(env.get_reward())
        print(f"{row['task']}: reward {rewards[-1]:.3f}")
    return rewards


def train(env_class: Any, rows: List[Dict[str, Any]], model: str, output_dir: str) -> None:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    dataset = Dataset.from_list([{**row, "prompt": [{"role": "user", "content": ""}]} for row in rows])
    config = GRPOConfig(output_dir=output_dir, num_generations=4, per_device_train_batch_size=4,
                        max_completion_length=1024, max_steps=len(rows), logging_steps=1)
    trainer = GRPOTrainer(model=model, args=config, train_dataset=dataset, environment_factory=env_class)
    trainer.train()


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", action="append", required=True, help="ENV/ID (repeatable): one row each")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--envcraft-url", default=None, help="a running envcraft serve (default: a private one)")
    p.add_argument("--workspaces", default=None)
    p.add_argument("--skills", default=None)
    p.add_argument("--train", metavar="MODEL", help="run GRPOTrainer on this model (needs a GPU)")
    p.add_argument("--output-dir", default="grpo-envcraft")
    p.add_argument("--base-url", help="CPU mode: the OpenAI-compatible endpoint of the policy")
    p.add_argument("--model", default="scripted")
    p.add_argument("--max-steps", type=int, default=30)
    args = p.parse_args(argv)
    local = {} if args.envcraft_url else {k: v for k, v in (("workspaces", args.workspaces), ("skills", args.skills)) if v}
    env_class = envcraft_trl.environment_factory(args.envcraft_url, task=args.task[0], **local)
    rows = [{"task": t, **({"seed": args.seed} if args.seed is not None else {})} for t in args.task]
    try:
        if args.train:
            train(env_class, rows, args.train, args.output_dir)
            return 0
        if not args.base_url:
            p.error("give --train MODEL (GPU) or --base-url URL (an OpenAI-compatible policy)")
        rewards = cpu_rollouts(env_class, rows, ChatEndpoint(args.base_url, args.model, None, 0.0), args.max_steps)
        print(f"mean reward {sum(rewards) / len(rewards):.3f}")
        return 0
    finally:
        env_class.client.close()  # a private server stops here


if __name__ == "__main__":
    sys.exit(main())
