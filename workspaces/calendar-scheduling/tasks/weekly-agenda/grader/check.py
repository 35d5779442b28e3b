#!/usr/bin/env python3
"""Grade agenda/amelia-next-week.md against calendars/amelia.hart.json and the session clock."""
import datetime as dt
import json
import os
import re
import sys
from zoneinfo import ZoneInfo

WS = sys.argv[1] if len(sys.argv) > 1 else "/workspace"
TZ = ZoneInfo("Europe/London")
NAMES = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
ZERO = {"file": 0, "days": 0, "events": 0, "order": 0, "no_cancelled": 0, "no_extra": 0}


def main():
    try:
        text = open(os.path.join(WS, "agenda/amelia-next-week.md"), encoding="utf-8").read()
        cal = json.load(open(os.path.join(WS, "calendars/amelia.hart.json"), encoding="utf-8"))
    except Exception:
        return ZERO
    today = dt.datetime.now(TZ).date()
    monday = today + dt.timedelta(days=7 - today.weekday())
    week = [monday + dt.timedelta(days=i) for i in range(5)]
    expected = {d: [] for d in week}
    cancelled = []
    for ev in cal.get("events", []):
        s = dt.datetime.fromisoformat(ev["start"]).astimezone(TZ)
        e = dt.datetime.fromisoformat(ev["end"]).astimezone(TZ)
        if s.date() not in expected:
            continue
        if ev.get("status") == "cancelled":
            cancelled.append(ev["title"])
            continue
        expected[s.date()].append((s, ev["id"], s.strftime("%H:%M"), e.strftime("%H:%M"), ev["title"], ev.get("room")))
    for d in expected:
        expected[d].sort()
    # split into sections
    sections, current = {}, None
    for line in text.splitlines():
        m = re.match(r"^##\s+(\w+)\s+(\d{1,2})\s+(\w+)\s+(\d{4})\s*$", line.strip())
        if m:
            try:
                d = dt.date(int(m.group(4)), MONTHS.index(m.group(3)) + 1, int(m.group(2)))
            except ValueError:
                current = None
                continue
            current = d if d.weekday() < 5 and m.group(1) == NAMES[d.weekday()] else None
            if current is not None:
                sections.setdefault(current, [])
            continue
        if current is not None and line.strip().startswith("- "):
            sections[current].append(line.strip())
    days = sum(1 for d in week if d in sections) / 5
    order_ok = [d for d in week if d in sections]
    heading_order = 1.0 if [d for d in sections if d in week] == order_ok else 0.0
    total = found = 0
    order_scores = []
    extra_ok = 0
    for d in week:
        lines = sections.get(d, [])
        exp = expected[d]
        if not exp:
            total += 1
            if any(re.match(r"^-\s+no meetings\s*$", l, re.I) for l in lines):
                found += 1
            extra_ok += 1 if len(lines) == 1 else 0
            continue
        positions = []
        for (_, _, hs, he, title, room) in exp:
            total += 1
            pat = re.compile(r"^-\s+%s\s*[-\u2013]\s*%s\s+%s%s\s*$" % (
                re.escape(hs), re.escape(he), re.escape(title),
                r"\s+\[%s\]" % re.escape(room) if room else ""))
            idx = next((i for i, l in enumerate(lines) if pat.match(l)), None)
            if idx is not None:
                found += 1
                positions.append(idx)
        order_scores.append(1.0 if positions == sorted(positions) else 0.0)
        extra_ok += 1 if len(lines) == len(exp) else 0
    order = (sum(order_scores) / len(order_scores) if order_scores else 1.0) * heading_order
    no_cancelled = 0 if any(t in text for t in cancelled) else 1
    return {"file": 1, "days": days, "events": found / total if total else 1,
            "order": order if found else 0, "no_cancelled": no_cancelled if found else 0,
            "no_extra": extra_ok / 5}


if __name__ == "__main__":
    try:
        res = main()
    except Exception:
        res = ZERO
    print(json.dumps(res))
