#!/usr/bin/env python3
"""log-query: filter a log file of the workspace by level, time range and pattern.

Reads one JSON object on stdin; the working directory is the workspace. A log line is
`TIMESTAMP LEVEL REST` where TIMESTAMP is RFC 3339 (`2026-03-03T06:58:12Z` or with an offset,
fractions allowed) and LEVEL one of DEBUG, INFO, WARN, ERROR, FATAL. Prints
{"count", "first", "last", "by_level", "matches", "truncated", "skipped"}; bad input gets
{"error": {"category": "invalid_argument", "message": ...}} and exit 2. Never a traceback.
"""

import datetime
import json
import os
import re
import sys

MAX_INPUT_BYTES = 1 << 20
LEVELS = ["DEBUG", "INFO", "WARN", "ERROR", "FATAL"]
KEYS = {"path", "level", "min_level", "since", "until", "pattern", "ignore_case", "limit"}
LINE_RE = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2}))\s+([A-Z]+)\s?(.*)$")


class BadInput(Exception):
    pass


def answer(obj, code):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
    sys.exit(code)


def parse_time(text, key):
    t = text.strip()
    if t.endswith("Z") or t.endswith("z"):
        t = t[:-1] + "+00:00"
    try:
        d = datetime.datetime.fromisoformat(t)
    except ValueError:
        raise BadInput("`%s` %r is not an RFC 3339 time such as 2026-03-03T07:00:00Z" % (key, text))
    if d.tzinfo is None:
        raise BadInput("`%s` %r needs a time zone (Z or +HH:MM)" % (key, text))
    return d


def read_args():
    raw = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    if len(raw) > MAX_INPUT_BYTES:
        raise BadInput("the arguments are larger than 1 MiB")
    try:
        args = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise BadInput('the arguments are not a JSON object such as {"path": "logs/app.log"}')
    if not isinstance(args, dict):
        raise BadInput('the arguments must be a JSON object such as {"path": "logs/app.log"}')
    unknown = sorted(set(args) - KEYS)
    if unknown:
        raise BadInput("unknown argument `%s`; the arguments are %s" % (unknown[0], ", ".join(sorted(KEYS))))
    path = args.get("path")
    if path is None:
        raise BadInput("missing `path`: the log file, relative to the workspace")
    if not isinstance(path, str) or not path or "\0" in path:
        raise BadInput("`path` must be a non-empty string such as \"logs/app.log\"")
    q = {"path": path}
    for key in ("level", "min_level"):
        v = args.get(key)
        if v is not None:
            if not isinstance(v, str) or v.upper() not in LEVELS:
                raise BadInput("`%s` must be one of %s" % (key, ", ".join(LEVELS)))
            q[key] = v.upper()
    for key in ("since", "until"):
        v = args.get(key)
        if v is not None:
            if not isinstance(v, str):
                raise BadInput("`%s` must be a string" % key)
            q[key] = parse_time(v, key)
    if "since" in q and "until" in q and q["since"] > q["until"]:
        raise BadInput("`since` is after `until`")
    ic = args.get("ignore_case", False)
    if not isinstance(ic, bool):
        raise BadInput("`ignore_case` must be true or false")
    pat = args.get("pattern")
    if pat is not None:
        if not isinstance(pat, str) or not pat:
            raise BadInput("`pattern` must be a non-empty regular expression")
        try:
            q["pattern"] = re.compile(pat, re.IGNORECASE if ic else 0)
        except re.error as e:
            raise BadInput("`pattern` is not a valid regular expression: %s" % e)
    limit = args.get("limit", 20)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= 500:
        raise BadInput("`limit` must be an integer from 0 to 500")
    q["limit"] = limit
    return q


def resolve(path):
    if os.path.isabs(path):
        raise BadInput("`path` must be relative to the workspace, not absolute")
    if ".." in path.replace("\\", "/").split("/"):
        raise BadInput("`path` must not contain `..`")
    workspace = os.path.realpath(os.getcwd())
    real = os.path.realpath(os.path.join(workspace, path))
    if os.path.commonpath([workspace, real]) != workspace:
        raise BadInput("`%s` is outside the workspace" % path)
    if not os.path.exists(real):
        raise BadInput("no file `%s` in the workspace" % path)
    if not os.path.isfile(real):
        raise BadInput("`%s` is not a regular file" % path)
    return real


def run(q):
    real = resolve(q["path"])
    count = 0
    skipped = 0
    by_level = {}
    matches = []
    first = last = None
    try:
        f = open(real, "r", encoding="utf-8", errors="replace")
    except OSError as e:
        raise BadInput("cannot read `%s`: %s" % (q["path"], e.strerror or "error"))
    with f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n").rstrip("\r")
            m = LINE_RE.match(line)
            if not m or m.group(2) not in LEVELS:
                if line.strip():
                    skipped += 1
                continue
            ts, level = m.group(1), m.group(2)
            if "level" in q and level != q["level"]:
                continue
            if "min_level" in q and LEVELS.index(level) < LEVELS.index(q["min_level"]):
                continue
            if "since" in q or "until" in q:
                try:
                    t = parse_time(ts, "timestamp")
                except BadInput:
                    skipped += 1
                    continue
                if "since" in q and t < q["since"]:
                    continue
                if "until" in q and t >= q["until"]:
                    continue
            if "pattern" in q and not q["pattern"].search(line):
                continue
            count += 1
            by_level[level] = by_level.get(level, 0) + 1
            hit = {"line": n, "time": ts, "level": level, "text": line}
            if first is None:
                first = hit
            last = hit
            if len(matches) < q["limit"]:
                matches.append(hit)
    return {"path": q["path"], "count": count, "first": first, "last": last,
            "by_level": {k: by_level[k] for k in LEVELS if k in by_level},
            "matches": matches, "truncated": count > len(matches), "skipped": skipped}


def main():
    try:
        answer(run(read_args()), 0)
    except BadInput as e:
        answer({"error": {"category": "invalid_argument", "message": str(e)}}, 2)
    except Exception as e:  # never a traceback
        answer({"error": {"category": "internal", "message": "log-query failed: %s" % type(e).__name__}}, 1)


if __name__ == "__main__":
    main()
