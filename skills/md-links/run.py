#!/usr/bin/env python3
"""md-links: list the Markdown links of a file or folder and report broken local targets.

Reads {"path": "...", "broken_only": false} on stdin; the working directory is the workspace.
Prints one JSON object. Bad input: {"error": {"category": "invalid_argument", ...}}, exit 2.
Never prints a traceback. Python 3 standard library only.
"""

import json
import os
import posixpath
import re
import sys
from urllib.parse import unquote

MAX_INPUT_BYTES = 1 << 20
MAX_FILES = 5000
MAX_FILE_BYTES = 4 << 20
LINK = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


class BadInput(Exception):
    pass


def answer(obj, code=0):
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()
    sys.exit(code)


def read_args():
    raw = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    if len(raw) > MAX_INPUT_BYTES:
        raise BadInput("the arguments are larger than 1 MiB")
    try:
        args = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise BadInput('the arguments are not a JSON object such as {"path": "kb"}')
    if not isinstance(args, dict):
        raise BadInput('the arguments must be a JSON object such as {"path": "kb"}')
    extra = sorted(set(args) - {"path", "broken_only"})
    if extra:
        raise BadInput("unknown argument `%s`; the arguments are `path` and `broken_only`" % extra[0])
    path = args.get("path")
    if path is None:
        raise BadInput("missing `path`: a Markdown file or a folder, relative to the workspace")
    if not isinstance(path, str) or not path.strip() or "\0" in path:
        raise BadInput("`path` must be a non-empty string, such as \"kb\"")
    broken_only = args.get("broken_only", False)
    if not isinstance(broken_only, bool):
        raise BadInput("`broken_only` must be true or false")
    return path.strip(), broken_only


def rel(workspace, real):
    r = os.path.relpath(real, workspace)
    return "." if r == "." else r.replace(os.sep, "/")


def collect(path):
    if os.path.isabs(path):
        raise BadInput("`path` must be relative to the workspace, not absolute")
    if ".." in re.split(r"[/\\]", path):
        raise BadInput("`path` must stay inside the workspace (no `..`)")
    workspace = os.path.realpath(os.getcwd())
    real = os.path.realpath(os.path.join(workspace, path))
    if os.path.commonpath([workspace, real]) != workspace:
        raise BadInput("`%s` is outside the workspace" % path)
    if not os.path.exists(real):
        raise BadInput("no file or folder `%s` in the workspace" % path)
    if os.path.isfile(real):
        if not real.lower().endswith(".md"):
            raise BadInput("`%s` is not a Markdown (.md) file" % path)
        return workspace, [real]
    files = []
    for root, dirs, names in os.walk(real):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for n in names:
            full = os.path.join(root, n)
            if n.lower().endswith(".md") and os.path.isfile(full) and not os.path.islink(full):
                files.append(full)
                if len(files) > MAX_FILES:
                    raise BadInput("more than %d Markdown files under `%s`" % (MAX_FILES, path))
    return workspace, sorted(files, key=lambda f: rel(workspace, f))


def links_of(workspace, real):
    try:
        with open(real, "rb") as f:
            text = f.read(MAX_FILE_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return []
    name = rel(workspace, real)
    base = posixpath.dirname(name)
    out = []
    fenced = False
    for lineno, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```") or line.lstrip().startswith("~~~"):
            fenced = not fenced
            continue
        if fenced:
            continue
        # inline code spans are not links
        scan = re.sub(r"`[^`]*`", lambda m: " " * len(m.group(0)), line)
        for m in LINK.finditer(scan):
            target = m.group(3)
            if target.startswith("<") and target.endswith(">"):
                target = target[1:-1]
            item = {"file": name, "line": lineno, "text": m.group(2), "target": target}
            if SCHEME.match(target):
                item.update(kind="external", resolved=None, exists=True)
            elif target.startswith("#"):
                item.update(kind="anchor", resolved=None, exists=True)
            else:
                local = unquote(target.split("#", 1)[0].split("?", 1)[0])
                if local.startswith("/"):
                    joined = posixpath.normpath(local.lstrip("/"))
                else:
                    joined = posixpath.normpath(posixpath.join(base, local))
                full = os.path.realpath(os.path.join(workspace, joined))
                inside = os.path.commonpath([workspace, full]) == workspace and not joined.startswith("..")
                item.update(kind="local", resolved=joined,
                            exists=bool(inside and os.path.exists(full)))
            out.append(item)
    return out


def main():
    try:
        path, broken_only = read_args()
        workspace, files = collect(path)
        links = []
        for f in files:
            links.extend(links_of(workspace, f))
        broken = [{k: l[k] for k in ("file", "line", "text", "target", "resolved")}
                  for l in links if not l["exists"]]
        result = {"files_scanned": len(files), "links_found": len(links),
                  "broken_count": len(broken)}
        if not broken_only:
            result["links"] = links
        result["broken"] = broken
        answer(result)
    except BadInput as e:
        answer({"error": {"category": "invalid_argument", "message": str(e)}}, 2)
    except Exception as e:
        answer({"error": {"category": "internal", "message": "md-links failed: %s" % type(e).__name__}}, 1)


if __name__ == "__main__":
    main()
