#!/usr/bin/env python3
"""word-count: count the lines, words and characters of a text file in the workspace.

Reads one JSON object {"path": "..."} on stdin; the working directory is the workspace.
Prints {"lines": n, "words": n, "chars": n} and exits 0, or prints
{"error": {"category": ..., "message": ...}} and exits 2 for bad input (1 for a failure of
its own). Never prints a traceback. Python 3 standard library only.
"""

import json
import os
import sys

MAX_INPUT_BYTES = 1 << 20
CHUNK_CHARS = 1 << 16


class BadInput(Exception):
    """The arguments, or the file they name, cannot be counted."""


def answer(obj, code):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
    sys.exit(code)


def fail(category, message, code=2):
    answer({"error": {"category": category, "message": message}}, code)


def read_args():
    raw = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    if len(raw) > MAX_INPUT_BYTES:
        raise BadInput("the arguments are larger than 1 MiB")
    try:
        args = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise BadInput('the arguments are not a JSON object such as {"path": "notes/todo.md"}')
    if not isinstance(args, dict):
        raise BadInput('the arguments must be a JSON object such as {"path": "notes/todo.md"}')
    unknown = sorted(set(args) - {"path"})
    if unknown:
        raise BadInput("unknown argument `%s`; the only argument is `path`" % unknown[0])
    path = args.get("path")
    if path is None:
        raise BadInput("missing `path`: the file to count, relative to the workspace")
    if not isinstance(path, str) or not path or "\0" in path:
        raise BadInput("`path` must be a non-empty string, such as \"notes/todo.md\"")
    return path


def resolve(path):
    """The file's real path, refusing anything outside the working directory."""
    workspace = os.path.realpath(os.getcwd())
    if os.path.isabs(path):
        raise BadInput("`path` must be relative to the workspace, not absolute")
    real = os.path.realpath(os.path.join(workspace, path))
    if os.path.commonpath([workspace, real]) != workspace:
        raise BadInput("`%s` is outside the workspace" % path)
    if not os.path.exists(real):
        raise BadInput("no file `%s` in the workspace" % path)
    if not os.path.isfile(real):
        raise BadInput("`%s` is not a regular file" % path)
    return real


def count(real, path):
    lines = words = chars = 0
    last = "\n"
    in_word = False
    try:
        with open(real, "r", encoding="utf-8", newline="") as f:
            while True:
                chunk = f.read(CHUNK_CHARS)
                if not chunk:
                    break
                chars += len(chunk)
                lines += chunk.count("\n")
                words += len(chunk.split())
                # A word cut in two by the chunk boundary was counted twice.
                if in_word and not chunk[0].isspace():
                    words -= 1
                in_word = not chunk[-1].isspace()
                last = chunk[-1]
    except UnicodeDecodeError:
        raise BadInput("`%s` is not UTF-8 text" % path)
    except OSError as e:
        raise BadInput("cannot read `%s`: %s" % (path, e.strerror or "error"))
    if last != "\n":
        lines += 1
    return {"lines": lines, "words": words, "chars": chars}


def main():
    try:
        path = read_args()
        answer(count(resolve(path), path), 0)
    except BadInput as e:
        fail("invalid_argument", str(e))
    except Exception as e:  # never a traceback: report what kind of failure it was
        fail("internal", "word-count failed: %s" % type(e).__name__, code=1)


if __name__ == "__main__":
    main()
