#!/usr/bin/env python3
"""Check the rebooked itinerary K7QX2M and the notice to the traveller."""
import json
import os
import re
import sys

WS = sys.argv[1] if len(sys.argv) > 1 else "/workspace"


def main():
    s = {"itinerary_flight": 0, "itinerary_times": 0, "itinerary_status": 0, "itinerary_unchanged": 0,
         "notice_exists": 0, "notice_reference": 0, "notice_flights": 0, "notice_times": 0, "notice_refund": 0}
    try:
        it = json.load(open(os.path.join(WS, "itineraries/K7QX2M.json"), encoding="utf-8"))
        seg = it["segments"][0]
        s["itinerary_flight"] = 1 if seg.get("flight") == "CB421" and seg.get("original_flight") == "CB417" else 0
        s["itinerary_times"] = 1 if (seg.get("departs"), seg.get("arrives")) == ("2026-04-14T12:15:00+01:00", "2026-04-14T14:30:00+02:00") else 0
        s["itinerary_status"] = 1 if seg.get("status") == "rebooked" else 0
        s["itinerary_unchanged"] = 1 if (len(it["segments"]) == 1 and seg.get("fare") == 58.0 and seg.get("origin") == "LHR"
                                         and seg.get("destination") == "AMS" and it.get("fare_brand") == "Light"
                                         and [p.get("name") for p in it.get("passengers", [])] == ["Hannah Lindqvist"]) else 0
    except Exception:
        pass
    try:
        text = open(os.path.join(WS, "outbox/K7QX2M-notice.txt"), encoding="utf-8").read()
    except Exception:
        return s
    if not text.strip():
        return s
    s["notice_exists"] = 1
    s["notice_reference"] = 1 if "K7QX2M" in text else 0
    flat = re.sub(r"\s+", "", text.upper())
    s["notice_flights"] = 1 if "CB417" in flat and "CB421" in flat else 0
    s["notice_times"] = 1 if "12:15" in text and "14:30" in text else 0
    s["notice_refund"] = 1 if re.search(r"refund", text, re.I) else 0
    return s


if __name__ == "__main__":
    try:
        res = main()
    except Exception:
        res = {"error": 0}
    print(json.dumps(res))
