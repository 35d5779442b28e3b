#!/usr/bin/env python3
"""Grader for dedupe-exact: the raw sheet must lose exactly its three byte-identical repeats and
nothing else; the note must say how many lines went, from which file, and whose deliveries they
were. Prints a JSON object of sub-scores in [0, 1]; a missing file scores 0, never a crash."""
import hashlib
import json
import os
import re
import sys

WS = sys.argv[1] if len(sys.argv) > 1 else "/workspace"
EXPECTED_SHA256 = "566b29374a6a3f286239b7af7dcf70c8203d725811e37722b5206dc66ef0f6f4"


def read_bytes(rel):
    try:
        with open(os.path.join(WS, rel), "rb") as f:
            return f.read()
    except OSError:
        return None


def main():
    scores = {}
    data = read_bytes("raw/deliveries_q1.csv")
    scores["sheet_deduplicated_exactly"] = 1.0 if data is not None and hashlib.sha256(data).hexdigest() == EXPECTED_SHA256 else 0.0
    raw = read_bytes("notes/dedupe-log.md")
    try:
        note = raw.decode("utf-8") if raw is not None else ""
    except UnicodeDecodeError:
        note = ""
    scores["note_gives_count"] = 1.0 if re.search(r"(?<![0-9.])3(?![0-9])|\bthree\b", note, re.I) else 0.0
    scores["note_names_file"] = 1.0 if "deliveries_q1.csv" in note else 0.0
    names = ["Bramble Caf", "Oak & Ember"]
    scores["note_names_deliveries"] = sum(1 for n in names if n.lower() in note.lower()) / len(names) if note else 0.0
    print(json.dumps(scores))


if __name__ == "__main__":
    try:
        main()
    except Exception:
        print(json.dumps({"grader_error": 0.0}))
