#!/usr/bin/env python3
"""Grader for atlas-summary: a new note kb/summaries/project-atlas.md with the required front
matter, linking (with working relative links) to every note tagged project-atlas, at most 300
words, and no other note changed. The prose itself is free."""
import hashlib, json, os, posixpath, re, sys

W = sys.argv[1] if len(sys.argv) > 1 else "/workspace"
ORIG = {
 "kb/README.md": "c21e1496fa7aeb9ff6d2a670fb844c851fe02c5f327c3d74485a8ac16a87f78a",
 "kb/inbox/atlas-interviews-extra.md": "0051e098e78c03d48e0ffa5abaf7af2ad9b35272f012ecb0044f70a57ab7cafd",
 "kb/inbox/thinking-in-systems-meadows.md": "89de21440373a259fbf3ebbeaa65d9d687be1a68885be9e832b8452320f527c6",
 "kb/meetings/2026-01-14-atlas-kickoff.md": "d96c3e51f91a476406c0060b632ef8683f5803c1838b1e34d4111917c34e3a6f",
 "kb/meetings/2026-02-04-atlas-review.md": "1e5aa8bb46ab4af774f0ac56a2a11fe811dba5127cf9984c536d59b3c617c24c",
 "kb/people/amara-okoye.md": "d4fd86c52e6901cb8e5c6174c60c9d9ab88f4d513cb615ece7168b269817faef",
 "kb/people/ben-kowalski.md": "3b1ef3e7d5286373779805d9fb8ea146ce6609dbd60b1031c6edc7c240096731",
 "kb/projects/atlas-metrics.md": "22e3318d55cde1a990d24759f5cd0859e6e6052056f59ed0b0abada1d6dbb65e",
 "kb/projects/atlas-overview.md": "c75579d1c54d46e820e3e66842a08b0087b6dbfd429324892f3fb22b1274975c",
 "kb/projects/atlas-risks.md": "40da60fce12f865bcd8c57a7572785c6d568231fe07a6f990255b6fb07ebe7df",
 "kb/projects/atlas-user-interviews.md": "5b4634b5cc55329f3d5c9783080495fb1bd23c00a09dd998502f50228585e511",
 "kb/projects/harbour-migration.md": "ffff4f0a4acd78058ef544e99fbc6efe0ca8561adc33a7d60e2066487c6c2b83",
 "kb/reading/designing-data-intensive-apps.md": "e90c121b23d0c08b85b8e94a74567f982af4f2ac595ab5bbd7a05bbaac730fb5",
 "kb/reading/interview-guide-notes.md": "5c3b9c490f273c3292a9d33ec66c824429620f3af0ef3a91bfa7d022071f13de",
 "kb/reading/ml-feature-stores.md": "f7bc0f40e199d3221741883cd6a2ec3cb1e651c59eaa83b9d207c518b21c1080",
 "kb/reading/ml-model-monitoring.md": "7f879a8c1270301f42ddf460b3ac9120cd3e0262d928af2248c0d96944775e22",
 "kb/reading/thinking-in-systems.md": "35e6acd39561290b67dae498129202ed0de1bef8d099f28de13bbcd67dda0561"
}
ATLAS = ["kb/projects/atlas-overview.md", "kb/projects/atlas-user-interviews.md",
         "kb/projects/atlas-metrics.md", "kb/projects/atlas-risks.md",
         "kb/meetings/2026-01-14-atlas-kickoff.md", "kb/meetings/2026-02-04-atlas-review.md"]
P = "kb/summaries/project-atlas.md"
s = {"exists": 0, "front_matter": 0, "tags": 0, "dates": 0, "links_all_atlas_notes": 0,
     "no_broken_links": 0, "length": 0, "mentions_pilot": 0, "others_unchanged": 0}
def sha(p):
    try:
        with open(os.path.join(W, p), "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None
s["others_unchanged"] = round(sum(sha(p) == h for p, h in ORIG.items()) / len(ORIG), 3)
try:
    with open(os.path.join(W, P), encoding="utf-8", errors="replace") as f:
        text = f.read()
except OSError:
    text = None
if text:
    s["exists"] = 1
    m = re.match(r"^---\n(.*?)\n---\n", text, re.S)
    if m:
        meta = dict(l.split(": ", 1) for l in m.group(1).split("\n") if ": " in l)
        s["front_matter"] = 1 if meta.get("title", "").strip() == "Project Atlas summary" else 0
        tags = [t.strip() for t in meta.get("tags", "").strip("[]").split(",") if t.strip()]
        s["tags"] = 1 if "summary" in tags and "project-atlas" in tags else 0
        s["dates"] = 1 if meta.get("created") == "2026-03-04" and meta.get("updated") == "2026-03-04" else 0
    targets = set()
    broken = 0
    for t in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z]+:", t) or t.startswith("#"):
            continue
        r = posixpath.normpath(posixpath.join("kb/summaries", t.split("#")[0]))
        if os.path.isfile(os.path.join(W, r)):
            targets.add(r)
        else:
            broken += 1
    s["links_all_atlas_notes"] = round(sum(a in targets for a in ATLAS) / len(ATLAS), 3)
    s["no_broken_links"] = 1 if broken == 0 and targets else 0
    s["length"] = 1 if 60 <= len(text.split()) <= 300 else 0
    s["mentions_pilot"] = 1 if re.search(r"gothenburg", text, re.I) and re.search(r"\bmay\b", text, re.I) else 0
print(json.dumps(s))
