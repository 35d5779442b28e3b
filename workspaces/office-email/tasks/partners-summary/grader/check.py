#!/usr/bin/env python3
"""Grader for partners-summary: the summary note exists, has the three sections, every
decision of both meetings is mentioned, every action still open is listed with its owner and
due date, closed ones are not listed as open, and it stays under 250 words."""
import json, os, re, sys

W = sys.argv[1] if len(sys.argv) > 1 else "/workspace"
def read(p):
    try:
        with open(os.path.join(W, p), encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None

text = read("minutes/summary-2026-02-23-to-03-02.md")
s = {"exists": 0, "title": 0, "sections": 0, "decisions": 0, "open_actions": 0,
     "no_closed_items": 0, "length": 0, "minutes_unchanged": 0}
m1, m2 = read("minutes/2026-02-23-weekly.md"), read("minutes/2026-03-02-weekly.md")
s["minutes_unchanged"] = 1 if m1 and m2 and "T-101 closed." in m1 and "T-103 closed." in m2 and "— due 2026-03-09" in m2 else 0
if text:
    s["exists"] = 1
    low = text.lower()
    first = text.lstrip().split("\n", 1)[0]
    s["title"] = 1 if first.startswith("# ") else 0
    heads = [h.strip().lower() for h in re.findall(r"^##\s+(.+)$", text, re.M)]
    s["sections"] = round(sum(h in heads for h in ("decisions", "open actions", "closed")) / 3, 3)
    dec_keys = [("10,000", "sign-off"), ("meeting-free",), ("09:30",), ("riba",), ("easter",)]
    s["decisions"] = round(sum(all(k in low for k in ks) for ks in dec_keys) / len(dec_keys), 3)
    def section(name):
        m = re.search(r"^##\s+%s\s*$(.*?)(?=^##\s|\Z)" % re.escape(name), text, re.M | re.S | re.I)
        return m.group(1) if m else ""
    opened = section("Open actions")
    acts = [("AM", "2026-03-06"), ("JB", "2026-03-13"), ("TR", "2026-03-04"), ("MC", "2026-03-20"),
            ("HF", "2026-03-09"), ("HF", "2026-03-05"), ("MC", "2026-03-12"), ("AM", "2026-02-28")]
    ok = 0
    for ini, due in acts:
        if any(ini in line and due in line for line in opened.split("\n")):
            ok += 1
    s["open_actions"] = round(ok / len(acts), 3)
    s["no_closed_items"] = 1 if opened.strip() and not re.search(r"T-10[137]\b", opened) else 0
    words = len(text.split())
    s["length"] = 1 if 40 <= words <= 250 else 0
print(json.dumps(s))
