#!/bin/sh
# Simulate an event (copy input/new/exhibitions_2021_q1.csv into input/inbox/), let the watcher
# process it, then recompute the aggregates independently and compare them with
# output/summary_by_country_year.csv; the mismatches go to output/validation_report.txt.
set -e
mkdir -p input/inbox output logs
cp input/new/exhibitions_2021_q1.csv input/inbox/
python scripts/watcher.py --once
python - <<'PY'
import csv, glob, sys
from collections import Counter, defaultdict
groups = defaultdict(list)
for path in sorted(glob.glob("input/archive/*.csv")):
    for r in csv.DictReader(open(path, newline="", encoding="utf-8")):
        groups[(r["country"], r["year"])].append(r)
expected = {}
for key, rows in groups.items():
    themes = Counter(r["theme"] for r in rows)
    top = max(themes.values())
    expected[key] = [str(len(rows)), str(len({r["artist"] for r in rows})),
                     sorted(t for t, c in themes.items() if c == top)[0],
                     "%.2f" % round(top / len(rows), 2)]
actual = {(r["country"], r["year"]): [r["exhibitions_count"], r["unique_artists"],
                                      r["dominant_theme"], r["dominant_theme_share"]]
          for r in csv.DictReader(open("output/summary_by_country_year.csv", newline=""))}
bad = sorted(k for k in set(expected) | set(actual) if expected.get(k) != actual.get(k))
with open("output/validation_report.txt", "w") as f:
    if bad:
        f.write("FAILED: %d mismatches\n" % len(bad))
        f.writelines("mismatch %s %s\n" % k for k in bad)
    else:
        f.write("PASSED: %d (country,year) groups checked, no mismatches\n" % len(expected))
sys.exit(1 if bad else 0)
PY
