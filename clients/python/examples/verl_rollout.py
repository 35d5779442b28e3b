#!/usr/bin/env python3
"""An envcraft trajectory through verl's tools (``envcraft.verl``, ``verl_tools.yaml``).

On a CPU, verl's ``initialize_tools_from_config`` loads the tool YAML and one trajectory runs
the way ``ToolAgentLoop`` runs its tools (``create``, ``execute``, ``release`` for every call,
the session keyed by the trajectory's request id), an OpenAI-compatible chat endpoint being the
policy (a local vLLM, or the scripted model of the tests); the reward is the verifier's::

    python verl_rollout.py --base-url http://127.0.0.1:8000/v1 --model scripted --task example/extract-todos

On a GPU box, verl's trainer does this itself: ``actor_rollout_ref.rollout.multi_turn.enable=True``,
``...multi_turn.tool_config_path=verl_tools.yaml``, ``actor_rollout_ref.rollout.agent.default_agent_loop=envcraft_agent``
(or ``agent_name: envcraft_agent`` per row) with ``...agent.agent_loop_config_path=verl_agent_loop.yaml``,
and rows with ``extra_info: {task: ENV/ID}``; see the client's README.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

import yaml
from verl.tools.tool_registry import initialize_tools_from_config

from envcraft import verl as envcraft_verl
from rollout import ChatEndpoint

HERE = Path(__file__).resolve().parent


async def trajectory(tools: Dict[str, Any], task: str, prompt: str, chat: ChatEndpoint, max_steps: int) -> float:
    request_id = uuid.uuid4().hex

    class AgentData:  # what execute reads of verl's AgentData
        def __init__(self) -> None:
            self.request_id = request_id

    schemas = [t.tool_schema.model_dump(exclude_unset=True, exclude_none=True) for t in tools.values()]
    messages: List[Dict[str, Any]] = [{"role": "user", "content": prompt}]
    for _ in range(max_steps):
        message = chat.complete(messages, schemas)
        calls = message.get("tool_calls") or []
        messages.append({"role": "assistant", "content": message.get("content") or "", **({"tool_calls": calls} if calls else {})})
        if not calls:
            break
        for call in calls:
            fn = call.get("function") or {}
            tool = tools.get(fn.get("name", ""))
            if tool is None:
                text = f"Unknown function {fn.get('name')!r}"
            else:
                instance, _ = await tool.create(create_kwargs={"task": task})
                response, _, _ = await tool.execute(instance, json.loads(fn.get("arguments") or "{}"), agent_data=AgentData())
                await tool.release(instance)
                text = response.text
            messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": text})
    return await asyncio.to_thread(envcraft_verl.finish_trajectory, request_id)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", required=True)
    p.add_argument("--tools", default=str(HERE / "verl_tools.yaml"), help="verl tool config")
    p.add_argument("--envcraft-url", default=None, help="overrides the YAML's url")
    p.add_argument("--workspaces")
    p.add_argument("--skills")
    p.add_argument("--base-url", required=True)
    p.add_argument("--model", default="scripted")
    p.add_argument("--max-steps", type=int, default=30)
    args = p.parse_args(argv)
    config = yaml.safe_load(Path(args.tools).read_text())
    for entry in config["tools"]:
        overrides = {"url": args.envcraft_url, "workspaces": args.workspaces, "skills": args.skills}
        entry["config"].update({k: v for k, v in overrides.items() if v})
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        yaml.safe_dump(config, f)
        f.flush()
        tools = {t.name: t for t in initialize_tools_from_config(f.name)}
    client = next(iter(tools.values())).client
    with client.create(args.task) as probe:  # the prompt, as a dataset row would carry it
        prompt = probe.prompt
    reward = asyncio.run(trajectory(tools, args.task, prompt, ChatEndpoint(args.base_url, args.model, None, 0.0), args.max_steps))
    print(f"{args.task}: reward {reward:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
