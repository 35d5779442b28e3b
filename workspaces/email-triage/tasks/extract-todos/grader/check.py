#!/usr/bin/env python3
"""Grader for extract-todos: todo.json holds one to-do per request, with the right source, deadline
and priority, and a task text that names what is asked. The wording is free: a to-do's text is
matched by keywords."""
import json, os, sys

W = sys.argv[1] if len(sys.argv) > 1 else "/workspace"
EXPECTED = {
    "01.eml": ("2026-03-11", "P1", ["sales"]),
    "03.eml": ("2026-03-13", "P2", ["wheelset"]),
    "04.eml": ("2026-03-09", "P1", ["quote"]),
    "07.eml": ("2026-03-10", "P1", ["48213|refund"]),
    "09.eml": ("2026-03-20", "P1", ["invoice"]),
    "11.eml": ("2026-03-12", "P2", ["split|rr-2291"]),
    "15.eml": ("2026-03-18", "P2", ["stocktake|staff"]),
    "16.eml": ("2026-03-31", "P2", ["vpi-2026-0311|invoice"]),
    "18.eml": ("2026-03-11", "P1", ["e-bike|warranty"]),
    "20.eml": (None, "P1", ["consignment"]),
}
s = {"valid_json": 0, "sources": 0, "no_extra_items": 0, "due_dates": 0, "priorities": 0,
     "task_text": 0, "ordered_by_source": 0, "mailbox_untouched": 0}
try:
    names = sorted(os.listdir(os.path.join(W, "mailbox", "inbox")))
    s["mailbox_untouched"] = 1 if len(names) == 20 and not os.path.exists(os.path.join(W, "mailbox", "spam")) else 0
except OSError:
    pass
items = None
try:
    with open(os.path.join(W, "todo.json"), encoding="utf-8") as f:
        items = json.load(f)
except (OSError, ValueError):
    items = None
if isinstance(items, list) and all(isinstance(i, dict) and {"source", "task", "due", "priority"} <= set(i) for i in items):
    s["valid_json"] = 1
    by = {}
    for i in items:
        by.setdefault(i.get("source"), []).append(i)
    s["sources"] = round(sum(1 for k in EXPECTED if k in by) / len(EXPECTED), 3)
    s["no_extra_items"] = 1 if items and set(by) <= set(EXPECTED) and all(len(v) == 1 for v in by.values()) else 0
    due = pri = txt = 0
    for k, (d, p, words) in EXPECTED.items():
        got = by.get(k, [{}])[0]
        due += got.get("due") == d
        pri += got.get("priority") == p
        t = str(got.get("task", "")).lower()
        txt += bool(t) and all(any(w in t for w in alt.split("|")) for alt in words)
    s["due_dates"] = round(due / len(EXPECTED), 3)
    s["priorities"] = round(pri / len(EXPECTED), 3)
    s["task_text"] = round(txt / len(EXPECTED), 3)
    srcs = [str(i.get("source")) for i in items]
    s["ordered_by_source"] = 1 if items and srcs == sorted(srcs) else 0
print(json.dumps(s))
