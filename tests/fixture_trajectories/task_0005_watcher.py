"""Watch input/inbox/ for exhibitions_*.csv; validate, archive, recompute the summary.

python scripts/watcher.py          poll forever (every 0.5 s)
python scripts/watcher.py --once   process what is in the inbox now, then exit
"""
import csv
import glob
import os
import shutil
import sys
import time
from collections import Counter, defaultdict
from datetime import datetime, timezone

COLUMNS = ["id", "title", "artist", "country", "city", "year", "theme"]
INBOX, ARCHIVE = "input/inbox", "input/archive"


def log(path, line):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(datetime.now(timezone.utc).isoformat() + " " + line + "\n")


def read(path):
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        return reader.fieldnames, list(reader)


def summarize():
    groups = defaultdict(list)
    for path in sorted(glob.glob(os.path.join(ARCHIVE, "*.csv"))):
        for r in read(path)[1]:
            groups[(r["country"].strip(), int(r["year"]))].append(r)
    os.makedirs("output", exist_ok=True)
    with open("output/summary_by_country_year.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["country", "year", "exhibitions_count", "unique_artists", "dominant_theme",
                    "dominant_theme_share"])
        for (country, year), rows in sorted(groups.items()):
            themes = Counter(r["theme"].strip() for r in rows)
            top = max(themes.values())
            theme = sorted(t for t, c in themes.items() if c == top)[0]
            w.writerow([country, year, len(rows), len({r["artist"].strip() for r in rows}), theme,
                        "%.2f" % round(top / len(rows), 2)])


def process(path):
    name = os.path.basename(path)
    header, rows = read(path)
    if header != COLUMNS:
        log("logs/validation.log", "%s: rejected, columns %s" % (name, header))
        log("logs/events.log", "%s rejected rows_skipped=%d" % (name, len(rows)))
        return
    seen = {r["id"] for p in glob.glob(os.path.join(ARCHIVE, "*.csv")) for r in read(p)[1]}
    skipped = [r["id"] for r in rows if r["id"] in seen]
    for rid in skipped:
        log("logs/validation.log", "%s: duplicate id %s skipped" % (name, rid))
    if skipped:
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS)
            w.writeheader()
            w.writerows(r for r in rows if r["id"] not in seen)
    shutil.move(path, os.path.join(ARCHIVE, name))
    summarize()
    log("logs/events.log", "%s processed, moved to archive, rows_skipped=%d" % (name, len(skipped)))


def main():
    os.makedirs(INBOX, exist_ok=True)
    while True:
        for path in sorted(glob.glob(os.path.join(INBOX, "exhibitions_*.csv"))):
            process(path)
        if "--once" in sys.argv:
            return
        time.sleep(0.5)


if __name__ == "__main__":
    main()
