#!/usr/bin/env python3
"""Grader of repro-archive/verify-checksums: checks reports/verify-ST-2025-019.txt."""
import hashlib, json, os, sys

WS = sys.argv[1] if len(sys.argv) > 1 else "/workspace"
WANT = {("MISMATCH", "results/noise_summary.csv"), ("MISSING", "results/psd_plots.svg"),
        ("UNLISTED", "notebooks/psd-scratch.ipynb")}
MANIFEST_SHA = "c39d9e17cabb1569ab6cc942f9506e1e1a6170da44068fdc8da2dc12e42d845b"

def main():
    s = {"report": 0.0, "findings": 0.0, "sorted": 0.0, "ok_count": 0.0, "manifest_untouched": 0.0}
    try:
        p = os.path.join(WS, "studies/ST-2025-019-sensor-noise/MANIFEST.sha256")
        s["manifest_untouched"] = 1.0 if hashlib.sha256(open(p, "rb").read()).hexdigest() == MANIFEST_SHA else 0.0
    except Exception:
        pass
    try:
        lines = [l.strip() for l in open(os.path.join(WS, "reports/verify-ST-2025-019.txt"), encoding="utf-8") if l.strip()]
    except Exception:
        return s
    s["report"] = 1.0
    found = []
    ok = None
    for l in lines:
        parts = l.split(None, 1)
        if len(parts) == 2 and parts[0] in ("MISMATCH", "MISSING", "UNLISTED"):
            found.append((parts[0], parts[1].strip()))
        elif len(parts) == 2 and parts[0] == "OK":
            ok = parts[1].strip()
    got = set(found)
    s["findings"] = max(0.0, (len(got & WANT) - len(got - WANT)) / len(WANT))
    paths = [f[1] for f in found]
    s["sorted"] = 1.0 if got == WANT and paths == sorted(paths) else 0.0
    s["ok_count"] = 1.0 if ok == "6" else 0.0
    return s

try:
    print(json.dumps(main()))
except Exception:
    print(json.dumps({"report": 0, "findings": 0, "sorted": 0, "ok_count": 0, "manifest_untouched": 0}))
