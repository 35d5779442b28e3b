"""The tool calls in a model's text, for trainers that hand an environment raw text (SkyRL).

Pure. ``parse_tool_calls(text)`` finds, in this order:

- Hermes/Qwen blocks, ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (as many as
  the text holds; Qwen's chat templates and vLLM's ``hermes`` parser use them);
- else OpenAI-style JSON, the whole text or a fenced ```json block being one of
  ``{"tool_calls": [{"type": "function", "function": {"name", "arguments"}}]}``, a list of such
  calls, one ``{"function": {...}}``, or one ``{"name", "arguments"}``.

``arguments`` may be an object or a JSON string of one (as OpenAI sends it). A call that is
found but malformed becomes a ``ToolCall`` with ``error`` set (what to tell the model), never an
exception; text without any call gives ``[]``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

HERMES = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
# An unclosed last block (the model stopped at </tool_call>, a common stop string).
HERMES_OPEN = re.compile(r"<tool_call>\s*(\{.*\})\s*$", re.DOTALL)
FENCED = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.DOTALL)


@dataclass
class ToolCall:
    """One call: ``name`` and ``arguments``, or ``error`` saying why it could not be read."""

    name: str
    arguments: Dict[str, Any] = field(default_factory=dict)
    error: Optional[str] = None


def parse_tool_calls(text: str) -> List[ToolCall]:
    blocks = HERMES.findall(text)
    if not blocks:
        tail = HERMES_OPEN.search(text)
        blocks = [tail.group(1)] if tail else []
    if blocks:
        return [_hermes(block) for block in blocks]
    for candidate in [text.strip()] + FENCED.findall(text):
        if not candidate.startswith(("{", "[")):
            continue
        try:
            obj = json.loads(candidate)
        except ValueError:
            continue
        calls = _openai(obj)
        if calls:
            return calls
    return []


def _hermes(block: str) -> ToolCall:
    try:
        obj = json.loads(block)
    except ValueError as e:
        return ToolCall("", error=f"the <tool_call> block is not JSON ({e})")
    if not isinstance(obj, dict):
        return ToolCall("", error="a <tool_call> block must hold a JSON object with name and arguments")
    return _call(obj.get("name"), obj.get("arguments", obj.get("parameters", {})))


def _openai(obj: Any) -> List[ToolCall]:
    if isinstance(obj, dict) and isinstance(obj.get("tool_calls"), list):
        items: List[Any] = obj["tool_calls"]
    elif isinstance(obj, list):
        items = obj
    elif isinstance(obj, dict):
        items = [obj]
    else:
        return []
    calls = []
    for item in items:
        if not isinstance(item, dict):
            return []
        inner = item.get("function") if isinstance(item.get("function"), dict) else item
        if "name" not in inner:
            return []  # JSON, but not a call: the model's answer
        calls.append(_call(inner.get("name"), inner.get("arguments", inner.get("parameters", {}))))
    return calls


def _call(name: Any, arguments: Any) -> ToolCall:
    if not isinstance(name, str) or not name:
        return ToolCall("", error="a tool call needs a \"name\" (a string)")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError as e:
            return ToolCall(name, error=f"arguments of {name} are not JSON ({e})")
    if not isinstance(arguments, dict):
        return ToolCall(name, error=f"arguments of {name} must be a JSON object")
    return ToolCall(name, arguments)
