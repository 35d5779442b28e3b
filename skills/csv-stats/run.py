#!/usr/bin/env python3
"""csv-stats: describe a numeric column of a CSV file in the workspace, optionally grouped.

Reads one JSON object {"path", "column", "group_by"?, "ndigits"?} on stdin; the working
directory is the workspace. Prints one JSON object and exits 0, or prints
{"error": {"category": ..., "message": ...}} and exits 2 for bad input (1 for a failure of its
own). Never prints a traceback. Python 3 standard library only.
"""

import csv
import json
import math
import os
import sys
from decimal import Decimal, ROUND_HALF_UP

MAX_INPUT_BYTES = 1 << 20
MAX_FILE_BYTES = 64 << 20
KEYS = {"path", "column", "group_by", "ndigits"}


class BadInput(Exception):
    pass


def answer(obj, code):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
    sys.exit(code)


def read_args():
    raw = sys.stdin.buffer.read(MAX_INPUT_BYTES + 1)
    if len(raw) > MAX_INPUT_BYTES:
        raise BadInput("the arguments are larger than 1 MiB")
    try:
        args = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise BadInput('the arguments are not a JSON object such as {"path": "data.csv", "column": "amount"}')
    if not isinstance(args, dict):
        raise BadInput('the arguments must be a JSON object such as {"path": "data.csv", "column": "amount"}')
    unknown = sorted(set(args) - KEYS)
    if unknown:
        raise BadInput("unknown argument `%s`; the arguments are path, column, group_by, ndigits" % unknown[0])
    for key in ("path", "column"):
        if key not in args:
            raise BadInput("missing `%s`" % key)
    for key in ("path", "column", "group_by"):
        if key in args and (not isinstance(args[key], str) or not args[key].strip() or "\0" in args[key]):
            raise BadInput("`%s` must be a non-empty string" % key)
    nd = args.get("ndigits", 2)
    if isinstance(nd, bool) or not isinstance(nd, int) or not 0 <= nd <= 10:
        raise BadInput("`ndigits` must be an integer from 0 to 10")
    return args["path"], args["column"].strip(), (args.get("group_by") or "").strip() or None, nd


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


def number(cell):
    try:
        x = float(cell)
    except ValueError:
        return None
    if math.isnan(x) or math.isinf(x):
        return None
    return x


def rnd(x, nd):
    if x is None:
        return None
    q = Decimal(1).scaleb(-nd)
    return float(Decimal(repr(x)).quantize(q, rounding=ROUND_HALF_UP))


def describe(values, nd):
    n = len(values)
    if n == 0:
        return {"count": 0, "sum": None, "mean": None, "median": None, "min": None, "max": None, "stdev": None}
    s = math.fsum(values)
    mean = s / n
    v = sorted(values)
    median = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
    stdev = None
    if n >= 2:
        stdev = math.sqrt(math.fsum((x - mean) ** 2 for x in values) / (n - 1))
    return {"count": n, "sum": rnd(s, nd), "mean": rnd(mean, nd), "median": rnd(median, nd),
            "min": rnd(v[0], nd), "max": rnd(v[-1], nd), "stdev": rnd(stdev, nd)}


def main():
    try:
        path, column, group_by, nd = read_args()
        real = resolve(path)
        try:
            with open(real, "r", encoding="utf-8-sig", newline="") as f:
                rows = list(csv.reader(f))
        except UnicodeDecodeError:
            raise BadInput("`%s` is not UTF-8 text" % path)
        except csv.Error as e:
            raise BadInput("`%s` is not valid CSV: %s" % (path, e))
        if not rows:
            raise BadInput("`%s` is empty: no header row" % path)
        header = [h.strip() for h in rows[0]]
        if column not in header:
            raise BadInput("no column `%s` in `%s`; the columns are: %s" % (column, path, ", ".join(header)))
        ci = header.index(column)
        gi = None
        if group_by is not None:
            if group_by not in header:
                raise BadInput("no column `%s` in `%s`; the columns are: %s" % (group_by, path, ", ".join(header)))
            gi = header.index(group_by)
        data = [r for r in rows[1:] if any(c.strip() for c in r)]
        groups, skipped = {}, {}
        total_skipped = 0
        for r in data:
            key = (r[gi].strip() if gi is not None and gi < len(r) else "") if gi is not None else None
            cell = r[ci].strip() if ci < len(r) else ""
            x = number(cell) if cell else None
            groups.setdefault(key, [])
            skipped.setdefault(key, 0)
            if x is None:
                skipped[key] += 1
                total_skipped += 1
            else:
                groups[key].append(x)
        out = {"path": path, "column": column, "ndigits": nd, "rows": len(data), "skipped": total_skipped}
        if gi is None:
            out["stats"] = describe(groups.get(None, []), nd)
        else:
            out["group_by"] = group_by
            res = {}
            for k in sorted(groups):
                d = describe(groups[k], nd)
                d["skipped"] = skipped[k]
                res[k] = d
            out["groups"] = res
        answer(out, 0)
    except BadInput as e:
        answer({"error": {"category": "invalid_argument", "message": str(e)}}, 2)
    except Exception as e:
        answer({"error": {"category": "internal", "message": "csv-stats failed: %s" % type(e).__name__}}, 1)


if __name__ == "__main__":
    main()
