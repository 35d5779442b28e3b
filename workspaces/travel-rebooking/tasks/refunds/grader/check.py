#!/usr/bin/env python3
"""Check refunds/refunds.json against the amounts the fare rules give."""
import json
import os
import sys

WS = sys.argv[1] if len(sys.argv) > 1 else "/workspace"
EXPECTED = {
    "R4TN8B": ("involuntary", {"Olivia Mercer": 358.22, "Daniel Mercer": 410.22}, 768.44),
    "P2WD5H": ("voluntary", {"Tomasz Wojcik": 37.17}, 37.17),
    "J9LM4E": ("voluntary", {"Sara Kowalczyk": 72.67}, 72.67),
}


def close(a, b):
    return isinstance(a, (int, float)) and not isinstance(a, bool) and abs(a - b) < 0.005


def main():
    scores = {"file": 0}
    for loc in EXPECTED:
        scores[loc + "_type"] = 0
        scores[loc + "_passengers"] = 0
        scores[loc + "_total"] = 0
    try:
        data = json.load(open(os.path.join(WS, "refunds/refunds.json"), encoding="utf-8"))
    except Exception:
        return scores
    if not isinstance(data, dict):
        return scores
    scores["file"] = 1
    for loc, (kind, pax, total) in EXPECTED.items():
        got = data.get(loc)
        if not isinstance(got, dict):
            continue
        scores[loc + "_type"] = 1 if got.get("type") == kind else 0
        gp = got.get("passengers")
        if isinstance(gp, dict):
            ok = sum(1 for n, v in pax.items() if close(gp.get(n), v))
            scores[loc + "_passengers"] = ok / len(pax) if len(gp) == len(pax) else ok / (len(pax) + 1)
        scores[loc + "_total"] = 1 if close(got.get("total"), total) else 0
    return scores


if __name__ == "__main__":
    try:
        res = main()
    except Exception:
        res = {"file": 0}
    print(json.dumps(res))
