#!/usr/bin/env python3
"""rebooking-rules: valid alternatives for a disrupted flight under fare-rules.md (R1-R6).

Reads one JSON object on stdin; the working directory is the workspace. Prints one JSON
object; bad input gets {"error": {"category": "invalid_argument", ...}} and exit 2.
Python 3 standard library only; never prints a traceback.
"""

import csv
import datetime as dt
import json
import os
import re
import sys

MAX_INPUT = 1 << 20
WINDOW_HOURS = 48
PARTNERS = {"Light": {"CB"}, "Standard": {"CB", "MR"}, "Flex": {"CB", "MR"}}
KEYS = {"schedule", "flight", "date", "cabin", "passengers", "fare_brand", "not_before"}
REQUIRED = ["schedule", "flight", "date", "cabin", "passengers", "fare_brand"]
COLUMNS = {"flight", "carrier", "date", "origin", "destination", "scheduled_departs",
           "scheduled_arrives", "status", "seats_economy", "seats_business"}


class Bad(Exception):
    pass


def out(obj, code=0):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()
    sys.exit(code)


def resolve(path):
    if not isinstance(path, str) or not path or "\0" in path:
        raise Bad("`schedule` must be a non-empty path such as schedule/flights.csv")
    if os.path.isabs(path) or ".." in path.replace("\\", "/").split("/"):
        raise Bad("`schedule` must be relative to the workspace, without `..`")
    ws = os.path.realpath(os.getcwd())
    real = os.path.realpath(os.path.join(ws, path))
    if os.path.commonpath([ws, real]) != ws:
        raise Bad("`%s` is outside the workspace" % path)
    if not os.path.isfile(real):
        raise Bad("no file `%s` in the workspace" % path)
    return real


def ptime(value, what):
    try:
        t = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        raise Bad("%s is not an ISO 8601 time: %r" % (what, value))
    if t.tzinfo is None:
        raise Bad("%s needs a UTC offset: %r" % (what, value))
    return t


def load(real, path):
    try:
        with open(real, encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
    except (UnicodeDecodeError, csv.Error, OSError):
        raise Bad("`%s` is not a readable CSV file" % path)
    if not rows or not COLUMNS <= set(rows[0].keys()):
        raise Bad("`%s` lacks the schedule columns %s" % (path, ", ".join(sorted(COLUMNS))))
    for r in rows:
        r["_dep"] = ptime(r["scheduled_departs"], "scheduled_departs of %s" % r["flight"])
        r["_arr"] = ptime(r["scheduled_arrives"], "scheduled_arrives of %s" % r["flight"])
    return rows


def seats(r, cabin):
    try:
        return int(r["seats_" + cabin])
    except (ValueError, TypeError):
        return 0


def main():
    try:
        raw = sys.stdin.buffer.read(MAX_INPUT + 1)
        if len(raw) > MAX_INPUT:
            raise Bad("the arguments are larger than 1 MiB")
        try:
            a = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise Bad("the arguments must be one JSON object")
        if not isinstance(a, dict):
            raise Bad("the arguments must be a JSON object")
        extra = sorted(set(a) - KEYS)
        if extra:
            raise Bad("unknown argument `%s`" % extra[0])
        for k in REQUIRED:
            if k not in a:
                raise Bad("missing `%s`" % k)
        flight = a["flight"]
        if not isinstance(flight, str) or not re.match(r"^[A-Z0-9]{2} ?\d{1,4}$", flight.strip().upper()):
            raise Bad("`flight` must look like CB417")
        flight = flight.strip().upper().replace(" ", "")
        try:
            date = dt.date.fromisoformat(a["date"]).isoformat()
        except (ValueError, TypeError):
            raise Bad("`date` must be YYYY-MM-DD")
        cabin = a["cabin"]
        if cabin not in ("economy", "business"):
            raise Bad("`cabin` must be economy or business")
        pax = a["passengers"]
        if not isinstance(pax, int) or isinstance(pax, bool) or not 1 <= pax <= 9:
            raise Bad("`passengers` must be an integer from 1 to 9")
        brand = a["fare_brand"]
        if brand not in PARTNERS:
            raise Bad("`fare_brand` must be Light, Standard or Flex")
        not_before = ptime(a["not_before"], "`not_before`") if a.get("not_before") is not None else None
        rows = load(resolve(a["schedule"]), a["schedule"])
        orig = [r for r in rows if r["flight"].replace(" ", "").upper() == flight and r["date"] == date]
        if not orig:
            raise Bad("no flight %s on %s in the schedule" % (flight, date))
        o = orig[0]
        start = o["_dep"] if not_before is None else max(o["_dep"], not_before)
        end = o["_dep"] + dt.timedelta(hours=WINDOW_HOURS)
        alts, rejected = [], []
        for r in rows:
            if r is o or r["origin"] != o["origin"] or r["destination"] != o["destination"]:
                continue
            if r["_dep"] < o["_dep"] - dt.timedelta(hours=24) or r["_dep"] > end + dt.timedelta(hours=24):
                continue
            reason = None
            if r["carrier"] not in PARTNERS[brand]:
                reason = ("R2", "%s fares may not be rebooked on carrier %s" % (brand, r["carrier"]))
            elif r["_dep"] < start:
                reason = ("R3", "departs before %s" % start.isoformat())
            elif r["_dep"] > end:
                reason = ("R3", "departs more than %d hours after the disrupted flight" % WINDOW_HOURS)
            elif r["status"] != "scheduled":
                reason = ("R4", "status is %s" % r["status"])
            elif seats(r, cabin) < pax:
                reason = ("R5", "%d %s seats left, %d needed" % (seats(r, cabin), cabin, pax))
            if reason:
                rejected.append({"flight": r["flight"], "date": r["date"], "departs": r["scheduled_departs"],
                                 "rule": reason[0], "reason": reason[1]})
            else:
                alts.append(r)
        alts.sort(key=lambda r: (r["_dep"].astimezone(dt.timezone.utc), r["_arr"].astimezone(dt.timezone.utc), r["flight"]))
        rejected.sort(key=lambda x: (ptime(x["departs"], "departs").astimezone(dt.timezone.utc), x["flight"]))
        out({"disrupted": {"flight": o["flight"], "date": o["date"], "origin": o["origin"], "destination": o["destination"],
                           "scheduled_departs": o["scheduled_departs"], "scheduled_arrives": o["scheduled_arrives"],
                           "status": o["status"]},
             "window": {"from": start.isoformat(), "to": end.isoformat()},
             "alternatives": [{"flight": r["flight"], "carrier": r["carrier"], "date": r["date"],
                               "departs": r["scheduled_departs"], "arrives": r["scheduled_arrives"],
                               "seats_available": seats(r, cabin)} for r in alts],
             "rejected": rejected})
    except Bad as e:
        out({"error": {"category": "invalid_argument", "message": str(e)}}, 2)
    except Exception as e:
        out({"error": {"category": "internal", "message": "rebooking-rules failed: %s" % type(e).__name__}}, 1)


if __name__ == "__main__":
    main()
