#!/usr/bin/env python3
"""Grader for sweep-report: results/REPORT.md must be short, open with a title and state the
facts of the sweep (best run and its accuracy, mean +- std per configuration, the diverged
runs, a recommendation). The runs must be left as they were. Prints a JSON object of
sub-scores in [0, 1]; a missing file scores 0, never a crash. Python 3 standard library only."""
import json
import os
import re
import sys

WS = sys.argv[1] if len(sys.argv) > 1 else "/workspace"
CONFIG_STATS = {"r34-sgd-lr0.4": ("92.45", "0.24"), "r18-adamw-lr3e-4": ("92.19", "0.49"),
                "r18-sgd-lr0.1": ("91.29", "0.36"), "r18-adamw-lr3e-3": ("90.01", "0.11")}
DIVERGED = ["r18-adamw-lr3e-3-s2", "r34-sgd-lr0.4-s1"]
BEST = "r18-adamw-lr3e-4-s0"
CONFIGS = sorted(CONFIG_STATS)


def read(rel):
    try:
        with open(os.path.join(WS, rel), "r", encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def runs_intact():
    # every run folder still there with a metrics file that parses and has 20 epochs
    for cfg in CONFIGS:
        for seed in (0, 1, 2):
            text = read("runs/%s-s%d/metrics.jsonl" % (cfg, seed))
            if text is None or len([l for l in text.splitlines() if l.strip()]) != 20:
                return 0.0
            if read("runs/%s-s%d/config.yaml" % (cfg, seed)) is None:
                return 0.0
    return 1.0


def main():
    report = read("results/REPORT.md")
    s = {}
    if report is None:
        for k in ("has_title", "short", "best_run", "best_accuracy", "config_stats", "diverged_runs",
                  "recommendation"):
            s[k] = 0.0
        s["runs_untouched"] = runs_intact()
        print(json.dumps(s))
        return
    lines = report.splitlines()
    first = next((l for l in lines if l.strip()), "")
    s["has_title"] = 1.0 if first.startswith("# ") else 0.0
    words = len(re.findall(r"\S+", report))
    s["short"] = 1.0 if 0 < words <= 300 else 0.0
    s["best_run"] = 1.0 if BEST in report else 0.0
    s["best_accuracy"] = 1.0 if "92.62" in report else 0.0
    hits = 0
    for cfg, (mean, std) in CONFIG_STATS.items():
        # the config named on a line (or a table row) together with its mean and std
        if any(cfg in l and mean in l and std in l for l in lines):
            hits += 1
    s["config_stats"] = hits / len(CONFIG_STATS)
    s["diverged_runs"] = sum(1 for r in DIVERGED if r in report) / len(DIVERGED)
    rec = re.search(r"recommend|suggest|propose|go with|next stage|we should", report, re.I)
    s["recommendation"] = 1.0 if rec and any(c in report[rec.start():] for c in CONFIGS) else 0.0
    s["runs_untouched"] = runs_intact()
    print(json.dumps(s))


if __name__ == "__main__":
    try:
        main()
    except Exception:
        print(json.dumps({"grader_error": 0.0}))
