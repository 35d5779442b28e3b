#!/usr/bin/env python3
"""Required facts and the length limit of the budget review summary."""
import json
import os
import re
import sys

WS = sys.argv[1] if len(sys.argv) > 1 else "/workspace"


def main():
    keys = ["title", "length", "original", "revised", "log_decision", "owners", "due_dates", "risk"]
    s = {k: 0 for k in keys}
    try:
        text = open(os.path.join(WS, "summaries/2026-06-02_budget-review.md"), encoding="utf-8").read()
    except Exception:
        return s
    lines = text.splitlines()
    s["title"] = 1 if lines and lines[0].strip() == "# Q3 infrastructure budget review (2026-06-02)" else 0
    words = len(text.split())
    s["length"] = 1 if 20 <= words <= 150 else 0
    digits = re.sub(r"(?<=\d)[,\u202f\u00a0 ](?=\d{3}\b)", "", text)
    s["original"] = 1 if re.search(r"412000|412k|412 ?k|412\.0k", digits, re.I) else 0
    s["revised"] = 1 if re.search(r"396500|396\.5 ?k", digits, re.I) else 0
    s["log_decision"] = 1 if re.search(r"14[- ]day", text) and re.search(r"cold", text, re.I) else 0
    owners = ["Priya Raman", "Marcus Lindgren", "Samuel Okoro"]
    s["owners"] = sum(1 for o in owners if o in text) / 3
    s["due_dates"] = sum(1 for d in ["2026-06-05", "2026-06-12", "2026-06-19"] if d in text) / 3
    s["risk"] = 1 if re.search(r"reserved", text, re.I) and re.search(r"September|Q4", text) else 0
    return s


if __name__ == "__main__":
    try:
        res = main()
    except Exception:
        res = {"title": 0}
    print(json.dumps(res))
