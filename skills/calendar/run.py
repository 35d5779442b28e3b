#!/usr/bin/env python3
"""calendar skill: free-busy, find-slot and add-event over calendars/*.json.

Reads one JSON object on stdin; the working directory is the workspace. Prints one JSON
object. Bad input: {"error": {"category": "invalid_argument", ...}} and exit 2. Python 3
standard library only; never prints a traceback.
"""

import datetime as dt
import json
import os
import re
import sys

try:
    from zoneinfo import ZoneInfo
except ImportError:  # pragma: no cover
    ZoneInfo = None

MAX_INPUT = 1 << 20
ID_RE = re.compile(r"^[a-z][a-z0-9.\-]{0,63}$")
ROOM_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9\-]{0,63}$")
DAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
KEYS = {
    "free-busy": {"people", "date_from", "date_to"},
    "find-slot": {"people", "duration_minutes", "after"},
    "add-event": {"calendar", "title", "start", "end", "attendees", "room"},
}
REQUIRED = {
    "free-busy": ["people", "date_from", "date_to"],
    "find-slot": ["people", "duration_minutes", "after"],
    "add-event": ["calendar", "title", "start", "end"],
}


class Bad(Exception):
    pass


def out(obj, code=0):
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()
    sys.exit(code)


def safe_rel(path):
    if os.path.isabs(path) or ".." in path.split("/"):
        raise Bad("path `%s` must stay inside the workspace" % path)
    ws = os.path.realpath(os.getcwd())
    real = os.path.realpath(os.path.join(ws, path))
    if os.path.commonpath([ws, real]) != ws:
        raise Bad("path `%s` is outside the workspace" % path)
    return real


def load_json(path):
    real = safe_rel(path)
    if not os.path.isfile(real):
        raise Bad("no file `%s` in the workspace" % path)
    try:
        with open(real, encoding="utf-8") as f:
            return json.load(f)
    except (ValueError, UnicodeDecodeError):
        raise Bad("`%s` is not valid JSON" % path)


def save_json(path, data):
    real = safe_rel(path)
    tmp = real + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    os.replace(tmp, real)


def parse_time(value, name):
    if not isinstance(value, str):
        raise Bad("`%s` must be an ISO 8601 time string" % name)
    v = value.strip()
    if v.endswith("Z"):
        v = v[:-1] + "+00:00"
    try:
        t = dt.datetime.fromisoformat(v)
    except ValueError:
        raise Bad("`%s` is not an ISO 8601 time: %r" % (name, value))
    if t.tzinfo is None:
        raise Bad("`%s` needs a UTC offset, e.g. 2026-05-12T10:00:00+01:00" % name)
    return t


def parse_date(value, name):
    if not isinstance(value, str):
        raise Bad("`%s` must be a date YYYY-MM-DD" % name)
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise Bad("`%s` is not a date YYYY-MM-DD: %r" % (name, value))


def zone(name, who):
    try:
        return ZoneInfo(name)
    except Exception:
        raise Bad("calendar of `%s` has an unknown time zone %r" % (who, name))


def person_id(p, name="people"):
    if not isinstance(p, str) or not ID_RE.match(p):
        raise Bad("`%s` holds an invalid person id %r (ids look like amelia.hart)" % (name, p))
    return p


def load_person(p):
    path = "calendars/%s.json" % p
    if not os.path.isfile(safe_rel(path)):
        raise Bad("unknown person `%s`: there is no %s" % (p, path))
    cal = load_json(path)
    if not isinstance(cal, dict) or not isinstance(cal.get("events"), list):
        raise Bad("`%s` is not a calendar file" % path)
    cal["_tz"] = zone(cal.get("timezone", "UTC"), p)
    return cal


def iso(t):
    return t.isoformat()


def utc(t):
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def busy(cal):
    res = []
    for e in cal["events"]:
        if e.get("status") == "cancelled":
            continue
        res.append((parse_time(e["start"], "start"), parse_time(e["end"], "end"), e))
    res.sort(key=lambda x: (x[0], x[1]))
    return res


def hm(s):
    h, m = s.split(":")
    return dt.time(int(h), int(m))


def in_hours(cal, start, end):
    """Is [start, end) inside one working day's hours in the person's zone?"""
    tz = cal["_tz"]
    wh = cal.get("working_hours", {})
    ls, le = start.astimezone(tz), end.astimezone(tz)
    if ls.date() != le.date() and not (le.time() == dt.time(0, 0) and le.date() == ls.date() + dt.timedelta(days=1)):
        return False
    if DAYS[ls.weekday()] not in wh.get("days", DAYS[:5]):
        return False
    day_start = dt.datetime.combine(ls.date(), hm(wh.get("start", "09:00")), tz)
    day_end = dt.datetime.combine(ls.date(), hm(wh.get("end", "17:00")), tz)
    return day_start <= ls and le <= day_end


def overlaps(cal, start, end, ignore_id=None):
    for s, e, ev in busy(cal):
        if ev.get("id") == ignore_id:
            continue
        if s < end and start < e:
            return ev
    return None


def list_of_people(args, key, required=True):
    v = args.get(key)
    if v is None:
        if required:
            raise Bad("missing `%s`" % key)
        return []
    if not isinstance(v, list) or (required and not v):
        raise Bad("`%s` must be a non-empty list of person ids" % key)
    seen = []
    for p in v:
        p = person_id(p, key)
        if p not in seen:
            seen.append(p)
    return seen


def op_free_busy(args):
    people = list_of_people(args, "people")
    d0 = parse_date(args.get("date_from"), "date_from")
    d1 = parse_date(args.get("date_to"), "date_to")
    if d1 < d0:
        raise Bad("`date_to` is before `date_from`")
    if (d1 - d0).days > 62:
        raise Bad("ask for at most 62 days at a time")
    res = {}
    for p in people:
        cal = load_person(p)
        tz = cal["_tz"]
        items = []
        for s, e, ev in busy(cal):
            if s.astimezone(tz).date() <= d1 and e.astimezone(tz).date() >= d0:
                items.append({"id": ev.get("id"), "title": ev.get("title"),
                              "start": iso(s.astimezone(tz)), "end": iso(e.astimezone(tz))})
        res[p] = {"timezone": cal.get("timezone"), "working_hours": cal.get("working_hours"), "busy": items}
    return {"people": res}


def op_find_slot(args):
    people = list_of_people(args, "people")
    dur = args.get("duration_minutes")
    if not isinstance(dur, int) or isinstance(dur, bool) or not 5 <= dur <= 480:
        raise Bad("`duration_minutes` must be an integer from 5 to 480")
    after = parse_time(args.get("after"), "after").astimezone(dt.timezone.utc)
    cals = {p: load_person(p) for p in people}
    t = after.replace(second=0, microsecond=0)
    if t < after:
        t += dt.timedelta(minutes=1)
    while t.minute % 15:
        t += dt.timedelta(minutes=1)
    length = dt.timedelta(minutes=dur)
    limit = after + dt.timedelta(days=14)
    while t <= limit:
        end = t + length
        if all(in_hours(c, t, end) and overlaps(c, t, end) is None for c in cals.values()):
            return {"start": utc(t), "end": utc(end),
                    "local": {p: {"start": iso(t.astimezone(c["_tz"])), "end": iso(end.astimezone(c["_tz"]))}
                              for p, c in cals.items()}}
        t += dt.timedelta(minutes=15)
    return {"start": None, "end": None, "local": {}}


def next_id():
    top = 0
    cdir = safe_rel("calendars")
    for name in sorted(os.listdir(cdir)):
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(cdir, name), encoding="utf-8") as f:
                cal = json.load(f)
            for e in cal.get("events", []):
                m = re.match(r"^evt-(\d+)$", str(e.get("id", "")))
                if m:
                    top = max(top, int(m.group(1)))
        except (OSError, ValueError, AttributeError):
            continue
    return "evt-%d" % (top + 1)


def op_add_event(args):
    organiser = person_id(args.get("calendar"), "calendar")
    title = args.get("title")
    if not isinstance(title, str) or not title.strip() or len(title) > 200:
        raise Bad("`title` must be a non-empty string of at most 200 characters")
    start = parse_time(args.get("start"), "start")
    end = parse_time(args.get("end"), "end")
    if end <= start:
        raise Bad("`end` must be after `start`")
    if end - start > dt.timedelta(hours=10):
        raise Bad("an event may last at most 10 hours")
    people = [organiser] + [p for p in list_of_people(args, "attendees", required=False) if p != organiser]
    cals = {p: load_person(p) for p in people}
    for p, c in cals.items():
        if not in_hours(c, start, end):
            raise Bad("%s–%s is outside the working hours of `%s`" % (iso(start), iso(end), p))
        clash = overlaps(c, start, end)
        if clash is not None:
            raise Bad("`%s` is busy then: %s (%s) %s–%s" % (p, clash.get("title"), clash.get("id"), clash.get("start"), clash.get("end")))
    room = args.get("room")
    rooms = bookings = None
    if room is not None:
        if not isinstance(room, str) or not ROOM_RE.match(room):
            raise Bad("`room` must be a room id from rooms/rooms.json")
        rooms = load_json("rooms/rooms.json")
        match = [r for r in rooms if isinstance(r, dict) and r.get("id") == room]
        if not match:
            raise Bad("unknown room `%s`" % room)
        if match[0].get("capacity", 0) < len(people):
            raise Bad("room `%s` seats %s, the event has %d people" % (room, match[0].get("capacity"), len(people)))
        bookings = load_json("rooms/bookings.json")
        for b in bookings:
            if b.get("room") == room and parse_time(b["start"], "start") < end and start < parse_time(b["end"], "end"):
                raise Bad("room `%s` is already booked %s–%s" % (room, b["start"], b["end"]))
    eid = next_id()
    written = []
    for p, c in cals.items():
        tz = c["_tz"]
        ev = {"id": eid, "title": title.strip(), "start": iso(start.astimezone(tz)), "end": iso(end.astimezone(tz)),
              "organiser": organiser, "attendees": people, "room": room}
        c["events"].append(ev)
        c["events"].sort(key=lambda e: (parse_time(e["start"], "start"), str(e.get("id"))))
        del c["_tz"]
        save_json("calendars/%s.json" % p, c)
        written.append("calendars/%s.json" % p)
    if room is not None:
        bookings.append({"room": room, "start": iso(start), "end": iso(end), "event_id": eid, "booked_by": organiser})
        bookings.sort(key=lambda b: (b["room"], parse_time(b["start"], "start")))
        save_json("rooms/bookings.json", bookings)
    return {"id": eid, "written": written, "room_booked": room}


def main():
    try:
        raw = sys.stdin.buffer.read(MAX_INPUT + 1)
        if len(raw) > MAX_INPUT:
            raise Bad("the arguments are larger than 1 MiB")
        try:
            args = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            raise Bad('the arguments must be one JSON object such as {"op": "find-slot", ...}')
        if not isinstance(args, dict):
            raise Bad("the arguments must be a JSON object")
        op = args.get("op")
        if op not in KEYS:
            raise Bad("`op` must be one of free-busy, find-slot, add-event")
        extra = sorted(set(args) - KEYS[op] - {"op"})
        if extra:
            raise Bad("`%s` is not an argument of %s" % (extra[0], op))
        for k in REQUIRED[op]:
            if k not in args:
                raise Bad("missing `%s` for %s" % (k, op))
        fn = {"free-busy": op_free_busy, "find-slot": op_find_slot, "add-event": op_add_event}[op]
        out(fn(args))
    except Bad as e:
        out({"error": {"category": "invalid_argument", "message": str(e)}}, 2)
    except Exception as e:
        out({"error": {"category": "internal", "message": "calendar failed: %s" % type(e).__name__}}, 1)


if __name__ == "__main__":
    main()
