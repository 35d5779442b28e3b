#!/usr/bin/env python3
"""jsonl-query: filter the records of a JSONL file and aggregate one field.

Reads one JSON object {"path", "where"?, "agg", "field"?} on stdin; the working directory is
the workspace. Prints one JSON object and exits 0, or prints
{"error": {"category": ..., "message": ...}} and exits 2 for bad input (1 for a failure of its
own). Never prints a traceback. Python 3 standard library only.
"""

import json
import math
import os
import sys

MAX_INPUT_BYTES = 1 << 20
MAX_FILE_BYTES = 64 << 20
KEYS = {"path", "where", "agg", "field"}
AGGS = ("count", "mean", "max", "min", "sum", "last")
CMP = ("<", "<=", ">", ">=")
OPS = ("==", "!=") + CMP + ("exists", "is_nan")


class BadInput(Exception):
    pass


def answer(obj, code):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
    sys.exit(code)


def is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def read_args():
    raw = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    if len(raw) > MAX_INPUT_BYTES:
        raise BadInput("the arguments are larger than 1 MiB")
    try:
        args = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise BadInput('the arguments are not a JSON object such as {"path": "m.jsonl", "agg": "count"}')
    if not isinstance(args, dict):
        raise BadInput('the arguments must be a JSON object such as {"path": "m.jsonl", "agg": "count"}')
    unknown = sorted(set(args) - KEYS)
    if unknown:
        raise BadInput("unknown argument `%s`; the arguments are path, where, agg, field" % unknown[0])
    path = args.get("path")
    if not isinstance(path, str) or not path or "\0" in path:
        raise BadInput("`path` must be a non-empty string, such as \"runs/a/metrics.jsonl\"")
    agg = args.get("agg")
    if agg not in AGGS:
        raise BadInput("`agg` must be one of %s" % ", ".join(AGGS))
    field = args.get("field")
    if agg != "count":
        if not isinstance(field, str) or not field:
            raise BadInput("`field` (a non-empty string) is required with agg `%s`" % agg)
    elif field is not None and (not isinstance(field, str) or not field):
        raise BadInput("`field` must be a non-empty string")
    where = args.get("where", [])
    if isinstance(where, dict):
        where = [where]
    if not isinstance(where, list):
        raise BadInput("`where` must be a list of {key, op, value} objects")
    conds = []
    for i, c in enumerate(where):
        if not isinstance(c, dict):
            raise BadInput("`where[%d]` must be an object {key, op, value}" % i)
        extra = sorted(set(c) - {"key", "op", "value"})
        if extra:
            raise BadInput("`where[%d]` has an unknown key `%s`" % (i, extra[0]))
        key, op = c.get("key"), c.get("op")
        if not isinstance(key, str) or not key:
            raise BadInput("`where[%d].key` must be a non-empty string" % i)
        if op not in OPS:
            raise BadInput("`where[%d].op` must be one of %s" % (i, " ".join(OPS)))
        if op in ("exists", "is_nan"):
            if "value" in c:
                raise BadInput("`where[%d]`: op `%s` takes no `value`" % (i, op))
        else:
            if "value" not in c:
                raise BadInput("`where[%d]`: op `%s` needs a `value`" % (i, op))
            if op in CMP and not (is_num(c["value"]) and math.isfinite(c["value"])):
                raise BadInput("`where[%d]`: op `%s` needs a finite number as `value`" % (i, op))
        conds.append((key, op, c.get("value")))
    return path, conds, agg, field


def resolve(path):
    workspace = os.path.realpath(os.getcwd())
    if os.path.isabs(path):
        raise BadInput("`path` must be relative to the workspace, not absolute")
    if ".." in path.replace("\\", "/").split("/"):
        raise BadInput("`path` must not contain `..`")
    real = os.path.realpath(os.path.join(workspace, path))
    if os.path.commonpath([workspace, real]) != workspace:
        raise BadInput("`%s` is outside the workspace" % path)
    if not os.path.exists(real):
        raise BadInput("no file `%s` in the workspace" % path)
    if not os.path.isfile(real):
        raise BadInput("`%s` is not a regular file" % path)
    if os.path.getsize(real) > MAX_FILE_BYTES:
        raise BadInput("`%s` is larger than 64 MiB" % path)
    return real


def equal(a, b):
    if is_num(a) and is_num(b):
        return a == b
    if type(a) is not type(b):
        return False
    return a == b


def matches(rec, conds):
    for key, op, value in conds:
        present = key in rec
        x = rec.get(key)
        if op == "exists":
            ok = present
        elif op == "is_nan":
            ok = present and isinstance(x, float) and math.isnan(x)
        elif op == "==":
            ok = present and equal(x, value)
        elif op == "!=":
            ok = not (present and equal(x, value))
        else:
            if not present or not is_num(x) or math.isnan(x):
                ok = False
            elif op == "<":
                ok = x < value
            elif op == "<=":
                ok = x <= value
            elif op == ">":
                ok = x > value
            else:
                ok = x >= value
        if not ok:
            return False
    return True


def main():
    try:
        path, conds, agg, field = read_args()
        real = resolve(path)
        records = []
        try:
            with open(real, "r", encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        rec = json.loads(line)
                    except (ValueError, RecursionError):
                        raise BadInput("line %d of `%s` is not valid JSON" % (n, path))
                    if not isinstance(rec, dict):
                        raise BadInput("line %d of `%s` is not a JSON object" % (n, path))
                    records.append((n, rec))
        except UnicodeDecodeError:
            raise BadInput("`%s` is not UTF-8 text" % path)
        sel = [(n, r) for n, r in records if matches(r, conds)]
        out = {"path": path, "records": len(records), "matched": len(sel), "agg": agg}
        if agg == "count":
            out["value"] = len(sel)
            answer(out, 0)
        out["field"] = field
        vals = [(n, r[field]) for n, r in sel if is_num(r.get(field)) and math.isfinite(r[field])]
        out["ignored"] = len(sel) - len(vals)
        value, line = None, None
        if vals:
            xs = [v for _, v in vals]
            if agg == "mean":
                value = math.fsum(xs) / len(xs)
            elif agg == "sum":
                value = math.fsum(xs)
            elif agg == "max":
                value = max(xs)
                line = next(n for n, v in vals if v == value)
            elif agg == "min":
                value = min(xs)
                line = next(n for n, v in vals if v == value)
            else:
                line, value = vals[-1]
        out["value"] = value
        if agg in ("max", "min", "last"):
            out["line"] = line
        answer(out, 0)
    except BadInput as e:
        answer({"error": {"category": "invalid_argument", "message": str(e)}}, 2)
    except Exception as e:
        answer({"error": {"category": "internal", "message": "jsonl-query failed: %s" % type(e).__name__}}, 1)


if __name__ == "__main__":
    main()
