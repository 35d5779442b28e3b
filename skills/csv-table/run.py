#!/usr/bin/env python3
"""csv-table: render a CSV file of the workspace as a Markdown table.

Reads one JSON object on stdin (see SKILL.md); the working directory is the workspace. Prints
{"markdown": ..., "rows": n, "columns": [...]} and exits 0, or prints
{"error": {"category": "invalid_argument", "message": ...}} and exits 2. Never a traceback.
Python 3 standard library only.
"""

import csv
import io
import json
import os
import sys

KEYS = {"path", "columns", "sort_by", "descending", "limit", "align_numbers"}
MAX_BYTES = 16 << 20


def answer(obj, code):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.exit(code)


def bad(message):
    answer({"error": {"category": "invalid_argument", "message": message}}, 2)


def number(text):
    try:
        float(text.replace(",", ""))
        return text.strip() != ""
    except ValueError:
        return False


def main():
    try:
        args = json.loads(sys.stdin.read(1 << 20) or "null")
    except ValueError:
        bad("the arguments are not JSON: give one object, e.g. {\"path\": \"data.csv\"}")
    if not isinstance(args, dict):
        bad("the arguments must be a JSON object")
    unknown = sorted(set(args) - KEYS)
    if unknown:
        bad(f"unknown argument `{unknown[0]}`: expected {', '.join(sorted(KEYS))}")
    path = args.get("path")
    if not isinstance(path, str) or not path:
        bad("`path` is required: a CSV file relative to the workspace")
    if os.path.isabs(path) or ".." in path.split("/"):
        bad("`path` must be relative to the workspace, without `..`")
    real = os.path.realpath(path)
    if not (real == os.getcwd() or real.startswith(os.getcwd() + os.sep)):
        bad("`path` leads outside the workspace")
    if not os.path.isfile(real):
        bad(f"no file `{path}` in the workspace")
    if os.path.getsize(real) > MAX_BYTES:
        bad(f"`{path}` is larger than 16 MiB")
    try:
        with open(real, encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f))
    except (UnicodeDecodeError, csv.Error) as e:
        bad(f"`{path}` is not a UTF-8 CSV file ({e})")
    if not rows:
        bad(f"`{path}` is empty: a header row is needed")
    header, body = rows[0], [r + [""] * (len(rows[0]) - len(r)) for r in rows[1:] if r]
    columns = args.get("columns", header)
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns) or not columns:
        bad("`columns` must be a non-empty list of column names")
    for c in columns:
        if c not in header:
            bad(f"no column `{c}` in `{path}`: its columns are {', '.join(header)}")
    index = [header.index(c) for c in columns]
    sort_by = args.get("sort_by")
    if sort_by is not None:
        if not isinstance(sort_by, str) or sort_by not in header:
            bad(f"`sort_by` must be one of the columns: {', '.join(header)}")
        k = header.index(sort_by)
        numeric = all(number(r[k]) for r in body)
        key = (lambda r: float(r[k].replace(",", ""))) if numeric else (lambda r: r[k])
        desc = args.get("descending", False)
        if not isinstance(desc, bool):
            bad("`descending` must be true or false")
        body = sorted(body, key=key, reverse=desc)
    limit = args.get("limit")
    if limit is not None:
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 10000:
            bad("`limit` must be a whole number from 1 to 10000")
        body = body[:limit]
    align = args.get("align_numbers", True)
    if not isinstance(align, bool):
        bad("`align_numbers` must be true or false")
    cells = [[r[i].replace("|", "\\|") for i in index] for r in body]
    out = io.StringIO()
    out.write("| " + " | ".join(c.replace("|", "\\|") for c in columns) + " |\n")
    seps = []
    for j in range(len(columns)):
        right = align and cells and all(number(row[j]) for row in cells)
        seps.append("---:" if right else "---")
    out.write("| " + " | ".join(seps) + " |\n")
    for row in cells:
        out.write("| " + " | ".join(row) + " |\n")
    answer({"markdown": out.getvalue(), "rows": len(cells), "columns": columns}, 0)


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except Exception as e:  # never a traceback
        answer({"error": {"category": "internal", "message": f"csv-table failed: {type(e).__name__}"}}, 1)
