#!/usr/bin/env python3
"""Grader for late-shipments: the CSV must be exact; the email must name every late shipment
(tracking number and carrier), ask about the undelivered ones, and name no on-time shipment.
Prints a JSON object of sub-scores in [0, 1]. Python 3 standard library only; a missing or
unreadable file scores 0, never a crash."""
import json
import os
import re
import sys

WS = sys.argv[1] if len(sys.argv) > 1 else "/workspace"

EXPECTED_CSV = (
    "order_id,tracking,carrier,promised_by,delivered_on,days_late\n"
    "FH-10233,H000043462,Evri,2026-04-02,,11\n"
    "FH-10214,RM00040859,Royal Mail,2026-03-22,2026-03-24,2\n"
    "FH-10250,RM00045791,Royal Mail,2026-04-11,,2\n"
    "FH-10232,RM00043325,Royal Mail,2026-04-01,2026-04-02,1\n"
    "FH-10241,RM00044558,Royal Mail,2026-04-06,2026-04-07,1\n"
)
LATE = {"H000043462": "Evri", "RM00040859": "Royal Mail", "RM00045791": "Royal Mail",
        "RM00043325": "Royal Mail", "RM00044558": "Royal Mail"}
UNDELIVERED = ["H000043462", "RM00045791"]


def read(rel):
    try:
        with open(os.path.join(WS, rel), "r", encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def all_trackings():
    text = read("shipments.json")
    try:
        return [s["tracking"] for s in json.loads(text)["shipments"]]
    except Exception:
        return []


def main():
    scores = {}
    csv_text = read("reports/late_shipments.csv")
    scores["csv_exact"] = 1.0 if csv_text is not None and csv_text.replace("\r\n", "\n") == EXPECTED_CSV else 0.0
    email = read("reports/late-shipments-email.md") or ""
    found = [t for t in LATE if t in email]
    scores["email_lists_late"] = len(found) / len(LATE) if email else 0.0
    carriers = set(LATE.values())
    scores["email_names_carriers"] = (sum(1 for c in carriers if c.lower() in email.lower()) / len(carriers)) if email else 0.0
    others = [t for t in all_trackings() if t not in LATE]
    scores["email_no_on_time"] = 1.0 if email and not any(t in email for t in others) else 0.0
    asks = bool(re.search(r"\b(update|status|where|locate|trace|investigat|chase|news)", email, re.I))
    scores["email_asks_update"] = 1.0 if email and asks and all(t in email for t in UNDELIVERED) else 0.0
    print(json.dumps(scores))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # never crash: a broken workspace scores 0
        print(json.dumps({"grader_error": 0.0, "reason": 0.0}))
