#!/usr/bin/env python3
"""Compare summaries/decisions-actions.json with the decisions and actions of the transcripts."""
import json
import os
import sys

WS = sys.argv[1] if len(sys.argv) > 1 else "/workspace"
D = [
    ("2026-06-01", "10:05:30", "Priya covers on-call 15-17 June and Tunde covers 18-19 June"),
    ("2026-06-01", "10:10:20", "upgrade the production Postgres primary to version 16 on 9 June at 06:00 UTC"),
    ("2026-06-01", "10:11:30", "the billing queue cutover happens on 10 June, after the Postgres upgrade"),
    ("2026-06-02", "14:03:05", "move logs older than 14 days to the cold storage tier from July"),
    ("2026-06-02", "14:05:20", "submit a Q3 infrastructure budget of 396,500 euros to the CFO"),
    ("2026-06-03", "15:32:48", "every launch checklist states the canary percentage explicitly, default 2 percent"),
]
A = [
    ("2026-06-01", "Samuel Okoro", "2026-06-05"), ("2026-06-01", "Marcus Lindgren", "2026-06-03"),
    ("2026-06-01", "Priya Raman", "2026-06-04"), ("2026-06-01", "Elena Petrova", "2026-06-08"),
    ("2026-06-02", "Marcus Lindgren", "2026-06-12"), ("2026-06-02", "Priya Raman", "2026-06-05"),
    ("2026-06-02", "Samuel Okoro", "2026-06-19"), ("2026-06-03", "Tunde Bakare", "2026-06-10"),
    ("2026-06-03", "Priya Raman", "2026-06-09"),
]


def norm(t):
    return " ".join(str(t).split()).rstrip(".").lower()


def main():
    s = {"file": 0, "decisions_found": 0, "decisions_exact": 0, "actions_found": 0, "actions_exact": 0, "order": 0}
    try:
        data = json.load(open(os.path.join(WS, "summaries/decisions-actions.json"), encoding="utf-8"))
        dec, act = data["decisions"], data["actions"]
        assert isinstance(dec, list) and isinstance(act, list)
    except Exception:
        return s
    s["file"] = 1
    got_d = [(d.get("date"), d.get("time"), norm(d.get("text", ""))) for d in dec if isinstance(d, dict)]
    want_d = [(a, b, norm(c)) for a, b, c in D]
    s["decisions_found"] = sum(1 for w in want_d if w in got_d) / len(want_d)
    s["decisions_exact"] = 1 if sorted(got_d) == sorted(want_d) else 0
    got_a = [(a.get("date"), a.get("owner"), a.get("due")) for a in act if isinstance(a, dict)]
    s["actions_found"] = sum(1 for w in A if w in got_a) / len(A)
    s["actions_exact"] = 1 if sorted(got_a) == sorted(A) else 0
    key = lambda x: (x.get("date", ""), x.get("time", "")) if isinstance(x, dict) else ("", "")
    s["order"] = 1 if [key(x) for x in dec] == sorted(key(x) for x in dec) and [key(x) for x in act] == sorted(key(x) for x in act) and dec and act else 0
    return s


if __name__ == "__main__":
    try:
        res = main()
    except Exception:
        res = {"file": 0}
    print(json.dumps(res))
