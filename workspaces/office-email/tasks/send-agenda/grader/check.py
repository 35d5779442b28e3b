#!/usr/bin/env python3
"""Grader for send-agenda: one new email in outbox/, sent to the whole team with the mailbox
skill, with the exact subject, listing every tracker item not done, grouped by owner."""
import json, os, re, sys

W = sys.argv[1] if len(sys.argv) > 1 else "/workspace"
TEAM = ["helen.fenwick@fenwickrowe.co.uk", "tom.rowe@fenwickrowe.co.uk",
        "aisha.malik@fenwickrowe.co.uk", "joe.brennan@fenwickrowe.co.uk",
        "meilin.chow@fenwickrowe.co.uk"]
SUBJECT = "Agenda: weekly studio meeting, Monday 9 March"
OPEN = {"T-102": "TR", "T-103": "MC", "T-104": "AM", "T-105": "HF", "T-106": "JB", "T-107": "AM",
        "T-108": "TR", "T-109": "MC", "T-110": "HF", "T-111": "MC", "T-112": "AM"}
DONE = ["T-101"]
NAMES = {"HF": "Helen Fenwick", "TR": "Tom Rowe", "AM": "Aisha Malik", "JB": "Joe Brennan", "MC": "Mei Lin Chow"}

def read(p):
    try:
        with open(os.path.join(W, p), encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None

scores = {"one_new_email": 0, "recipients": 0, "subject": 0, "dated_by_skill": 0,
          "lists_open_items": 0, "omits_done": 0, "grouped_by_owner": 0, "first_draft_kept": 0}
try:
    names = sorted(os.listdir(os.path.join(W, "outbox")))
except OSError:
    names = []
new = [n for n in names if n != "1.txt"]
scores["first_draft_kept"] = 1 if (read("outbox/1.txt") or "").startswith("To: studio@") else 0
if len(new) == 1 and new[0] == "2.txt":
    scores["one_new_email"] = 1
mail = read("outbox/2.txt") or ""
head, _, body = mail.partition("\n\n")
hdr = {}
for line in head.split("\n"):
    k, _, v = line.partition(":")
    hdr[k.strip().lower()] = v.strip()
to = [a.strip().lower() for a in hdr.get("to", "").split(",") if a.strip()]
scores["recipients"] = 1 if sorted(to) == sorted(TEAM) else 0
scores["subject"] = 1 if hdr.get("subject") == SUBJECT else 0
scores["dated_by_skill"] = 1 if re.match(r"^\w{3}, \d\d \w{3} 2026 \d\d:\d\d:\d\d [+-]\d{4}$", hdr.get("date", "")) else 0
found = [t for t in OPEN if re.search(r"\b%s\b" % t, body)]
scores["lists_open_items"] = round(len(found) / len(OPEN), 3)
scores["omits_done"] = 1 if body.strip() and not any(re.search(r"\b%s\b" % t, body) for t in DONE) else 0
# grouped: the items of each owner come after that owner's name and before the next owner's name
ok = 0
lines = body.split("\n")
owner_at = {}
for i, line in enumerate(lines):
    for ini, name in NAMES.items():
        if name in line and not re.search(r"\bT-\d+", line):
            owner_at.setdefault(ini, i)
if len(owner_at) == len(NAMES):
    bounds = sorted((i, ini) for ini, i in owner_at.items())
    good = 0
    for t, ini in OPEN.items():
        idx = next((i for i, l in enumerate(lines) if re.search(r"\b%s\b" % t, l)), None)
        if idx is None:
            continue
        section = None
        for start, who in bounds:
            if start < idx:
                section = who
        good += section == ini
    ok = good / len(OPEN)
scores["grouped_by_owner"] = round(ok, 3)
print(json.dumps(scores))
