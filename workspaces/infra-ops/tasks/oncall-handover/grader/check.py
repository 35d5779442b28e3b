#!/usr/bin/env python3
"""Grader of infra-ops/oncall-handover: checks handover/2026-03-03.md; prints sub-scores."""
import json, os, re, sys

WS = sys.argv[1] if len(sys.argv) > 1 else "/workspace"
SECTIONS = ["open incidents", "changes", "queue", "next on-call"]

def main():
    s = {"sections_in_order": 0.0, "incidents": 0.0, "changes": 0.0, "queue": 0.0, "next_oncall": 0.0, "nothing_else_changed": 1.0}
    try:
        text = open(os.path.join(WS, "handover", "2026-03-03.md"), encoding="utf-8").read()
    except Exception:
        return s
    s["title"] = 1.0 if text.split("\n", 1)[0].strip() == "# Handover 2026-03-03" else 0.0
    heads = [(m.start(), m.group(1).strip().lower()) for m in re.finditer(r"(?m)^##\s+(.+?)\s*$", text)]
    found = [h for _, h in heads if h in SECTIONS]
    s["sections_in_order"] = 1.0 if found == SECTIONS else 0.0
    body = {}
    for i, (pos, h) in enumerate(heads):
        end = heads[i + 1][0] if i + 1 < len(heads) else len(text)
        body[h] = text[pos:end]
    inc = body.get("open incidents", "").lower()
    pts = 0
    pts += "payments-worker" in inc
    pts += "nginx-edge" in inc
    pts += "5433" in inc or "chg-2291" in inc
    pts += "8081" in inc or "chg-2297" in inc
    s["incidents"] = pts / 4
    ch = body.get("changes", "")
    got = set(re.findall(r"CHG-\d{4}", ch))
    want = {"CHG-2284", "CHG-2291", "CHG-2297"}
    s["changes"] = max(0.0, (len(got & want) - len(got - want)) / len(want))
    q = body.get("queue", "")
    got = set(re.findall(r"OPS-\d{4}", q))
    want = {"OPS-1182", "OPS-1185", "OPS-1170"}
    s["queue"] = max(0.0, (len(got & want) - len(got - want)) / len(want))
    nx = body.get("next on-call", "")
    others = ["Lukas Brandt", "Tomasz Wojcik", "Sofia Marin"]
    s["next_oncall"] = 1.0 if "Nadia Okonkwo" in nx and not any(o in nx for o in others) else 0.0
    return s

def unchanged(s):
    # the handover must not touch the live configs or logs
    expect = {
    "ops/changes.log": "22752a04c815c473e3f3f92fc02c21d4eb9f0c2c951459d91187ff328a34e884",
    "oncall/queue.md": "6734b14b0e6b6708be690f67e646e39544446f900421cb23b50b42e8de8a1831",
    "config/payments-worker.yaml": "5b0cb5a43294d9a9bdbd54a2c92f19146a61c93c7082b18419eab3bd43f7bd52",
    "config/nginx-edge.yaml": "58320543a6b6e786c12c8cb96c48b00fcd78378644d651096aa36058f6f29acd"
}
    import hashlib
    for p, h in expect.items():
        try:
            if hashlib.sha256(open(os.path.join(WS, p), "rb").read()).hexdigest() != h:
                s["nothing_else_changed"] = 0.0
        except Exception:
            s["nothing_else_changed"] = 0.0
    return s

try:
    print(json.dumps(unchanged(main())))
except Exception:
    print(json.dumps({"sections_in_order": 0, "incidents": 0, "changes": 0, "queue": 0, "next_oncall": 0}))
