#!/usr/bin/env python3
"""mailbox: search a mailbox folder, or send an email into outbox/.

Reads one JSON object on stdin; the working directory is the workspace.
  {"action": "search", "folder": "...", "query": "..."}
  {"action": "send", "to": "a@x.org, b@y.com", "subject": "...", "body": "..."}
Prints one JSON object. Bad input: {"error": {"category": "invalid_argument", ...}}, exit 2.
Never prints a traceback. Python 3 standard library only.
"""

import email.utils
import json
import os
import re
import sys
from datetime import datetime, timezone

MAX_INPUT_BYTES = 1 << 20
MAX_FILE_BYTES = 1 << 20
NAMED = re.compile(r"^[^<>\r\n,@]*<([^<>\s]+)>$")
ADDRESS = re.compile(r"^[A-Za-z0-9._%+'-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$")
FIELDS = {
    "search": ({"folder", "query"}, set()),
    "send": ({"to", "subject", "body"}, set()),
}


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
        raise BadInput('the arguments are not a JSON object such as {"action": "search", ...}')
    if not isinstance(args, dict):
        raise BadInput('the arguments must be a JSON object such as {"action": "search", ...}')
    action = args.get("action")
    if action not in FIELDS:
        raise BadInput("`action` must be \"search\" or \"send\"")
    required, optional = FIELDS[action]
    extra = sorted(set(args) - required - optional - {"action"})
    if extra:
        raise BadInput("`%s` is not an argument of action `%s` (it takes %s)"
                       % (extra[0], action, ", ".join(sorted(required))))
    for key in sorted(required):
        if key not in args:
            raise BadInput("missing `%s` for action `%s`" % (key, action))
        if not isinstance(args[key], str) or "\0" in args[key]:
            raise BadInput("`%s` must be a string" % key)
    return action, args


def safe_dir(path):
    if not path or os.path.isabs(path):
        raise BadInput("`folder` must be a path relative to the workspace, such as \"mail/inbox\"")
    if ".." in re.split(r"[/\\]", path):
        raise BadInput("`folder` must stay inside the workspace (no `..`)")
    workspace = os.path.realpath(os.getcwd())
    real = os.path.realpath(os.path.join(workspace, path))
    if os.path.commonpath([workspace, real]) != workspace:
        raise BadInput("`%s` is outside the workspace" % path)
    if not os.path.isdir(real):
        raise BadInput("no folder `%s` in the workspace" % path)
    return real


def natural_key(name):
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"(\d+)", name) if p]


def headers_of(text):
    head = {}
    for line in text.split("\n"):
        if not line.strip():
            break
        m = re.match(r"^([A-Za-z][A-Za-z0-9-]*):\s?(.*)$", line)
        if m and m.group(1).lower() not in head:
            head[m.group(1).lower()] = m.group(2).strip()
    return head


def search(args):
    folder = args["folder"].strip().rstrip("/")
    real = safe_dir(folder)
    query = args["query"].strip().lower()
    if not query:
        raise BadInput("`query` must not be blank")
    workspace = os.path.realpath(os.getcwd())
    matches = []
    for name in sorted(os.listdir(real), key=natural_key):
        full = os.path.join(real, name)
        if name.startswith(".") or not os.path.isfile(full):
            continue
        if os.path.commonpath([workspace, os.path.realpath(full)]) != workspace:
            continue
        try:
            with open(full, "rb") as f:
                data = f.read(MAX_FILE_BYTES)
            text = data.decode("utf-8", errors="replace").replace("\r\n", "\n")
        except OSError:
            continue
        if query in text.lower():
            head = headers_of(text)
            matches.append({"file": folder + "/" + name,
                            "from": head.get("from", ""),
                            "subject": head.get("subject", "")})
    return {"folder": folder, "query": args["query"], "count": len(matches), "matches": matches}


def send(args):
    addresses = [a.strip() for a in args["to"].split(",")]
    if not addresses or any(not a for a in addresses):
        raise BadInput("`to` must be one or more addresses separated by commas, with none empty")
    for a in addresses:
        # `Name <name@example.com>`, as a search's `from` gives it, names the same address.
        named = NAMED.match(a)
        if not ADDRESS.match(named.group(1) if named else a):
            raise BadInput("`%s` is not a valid email address (expected name@example.com or Name <name@example.com>)" % a[:100])
    subject = args["subject"]
    if "\n" in subject or "\r" in subject or not subject.strip():
        raise BadInput("`subject` must be one non-blank line")
    body = args["body"].replace("\r\n", "\n")
    if not body.endswith("\n"):
        body += "\n"
    workspace = os.path.realpath(os.getcwd())
    outbox = os.path.join(workspace, "outbox")
    if os.path.islink(outbox) or (os.path.exists(outbox) and not os.path.isdir(outbox)):
        raise BadInput("`outbox` in the workspace is not a folder")
    os.makedirs(outbox, exist_ok=True)
    numbers = [int(m.group(1)) for m in (re.match(r"^(\d+)\.txt$", n) for n in os.listdir(outbox)) if m]
    n = max(numbers, default=0) + 1
    date = email.utils.format_datetime(datetime.now(timezone.utc).replace(microsecond=0))
    text = "To: %s\nSubject: %s\nDate: %s\n\n%s" % (", ".join(addresses), subject.strip(), date, body)
    path = os.path.join(outbox, "%d.txt" % n)
    with open(path, "x", encoding="utf-8") as f:
        f.write(text)
    return {"sent": "outbox/%d.txt" % n, "to": addresses, "subject": subject.strip(), "date": date}


def main():
    try:
        action, args = read_args()
        answer(search(args) if action == "search" else send(args))
    except BadInput as e:
        answer({"error": {"category": "invalid_argument", "message": str(e)}}, 2)
    except Exception as e:
        answer({"error": {"category": "internal", "message": "mailbox failed: %s" % type(e).__name__}}, 1)


if __name__ == "__main__":
    main()
