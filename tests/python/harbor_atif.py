"""Reads an OpenClaw session JSONL file with Harbor's own parser and prints what it made of it.

Run under the interpreter that has Harbor installed (``target/harbor-venv/bin/python``, Python
3.12; the test venv's 3.11 cannot import it): ``harbor_atif.py TRANSCRIPT`` prints one JSON
object, ``{"harbor": VERSION, "steps": [ATIF step, ...] | null}``, the steps as Harbor's
pydantic models dump them (``null``: Harbor found no usable conversation in the file).
"""
from __future__ import annotations

import json
import sys
from importlib.metadata import version

from harbor.agents.installed.openclaw import openclaw_session_jsonl_to_atif_steps


def main() -> int:
    # An empty instruction: Harbor then keeps the first user message's own text, which is
    # what the transcript says (a non-empty one would replace it).
    steps = openclaw_session_jsonl_to_atif_steps(sys.argv[1], instruction="", model_name="envcraft-test")
    dumped = None if steps is None else [s.model_dump(mode="json", exclude_none=True) for s in steps]
    print(json.dumps({"harbor": version("harbor"), "steps": dumped}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
