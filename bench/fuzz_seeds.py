#!/usr/bin/env python3
"""Write fuzz/seeds/<target>/ from the repository's real files (workspaces/, policies/,
skills/, ../shared/fixtures/), each at most 64 KiB, named by the SHA-1 of its bytes.

Run from the repository root: `python3 bench/fuzz_seeds.py`. Seeds already there are kept
(libFuzzer adds to the corpus directory it is given; these are the starting points)."""

import glob
import hashlib
import json
import os
import sys

CAP = 64 * 1024
PER_TARGET = 48
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(os.path.dirname(ROOT), "shared", "fixtures")

PATCHES = [
    "*** Begin Patch\n*** Add File: a.txt\n+hello\n*** End Patch\n",
    "*** Begin Patch\n*** Update File: a.txt\n@@ def f():\n-    return 1\n+    return 2\n*** End of File\n*** End Patch\n",
    "*** Begin Patch\n*** Update File: a.txt\n*** Move to: b/c.txt\n@@\n a\n-b\n+B\n c\n*** Delete File: gone.txt\n*** End Patch\n",
    "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n 1\n-2\n+two\n 3\n"
    "--- /dev/null\n+++ b/new/dir/n.txt\n@@ -0,0 +1,2 @@\n+x\n+y\n--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n",
    "--- a/x\n+++ b/x\n@@ -5,0 +6 @@\n+inserted\n@@ -9 +10 @@\n-old\n\\ No newline at end of file\n+new\n",
]

HTTP_CREATE = [
    {"task": "example/archive-read-mail"},
    {"task": "example/extract-todos", "base_time": "2026-03-01T09:00:00Z", "seed": 7},
    {"task": {"env": "example", "prompt": "Write hi to out.txt",
              "verifier": {"kind": "manifest", "extra": "allow"},
              "files": {"notes/todo.txt": "do it\n"},
              "expected": {"version": 1, "files": {"out.txt": {"sha256": "98ea6e4f216f2fb4b69fff9b3a44842c38686ca685f3f55dc48c5d3fb1107be4"}}}}},
    {"task": {"env": "example", "turns": [{"prompt": "one"}, {"prompt": "two"}],
              "verifier": {"kind": "command", "command": "python3 grader/check.py", "timeout_secs": 30},
              "grader": {"check.py": "print(1)\n"}}},
    {"task": None},
    {},
]


def put(target, data):
    if len(data) > CAP or not data:
        return
    d = os.path.join(ROOT, "fuzz", "seeds", target)
    os.makedirs(d, exist_ok=True)
    if len(os.listdir(d)) >= PER_TARGET:
        return
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def files(*patterns):
    out = []
    for pattern in patterns:
        out.extend(sorted(glob.glob(pattern, recursive=True)))
    return out


def read(path):
    with open(path, "rb") as f:
        return f.read(CAP + 1)


def main():
    os.chdir(ROOT)
    for path in files("policies/*.toml", "workspaces/**/*policy*.toml"):
        put("policy_toml", read(path))
    for path in files("workspaces/*/env.toml"):
        put("env_toml", read(path))
    for path in files("workspaces/*/tasks/*/task.toml"):
        put("task_toml", read(path))
    for path in files("skills/*/skill.toml"):
        put("skill_toml", read(path))
    for path in files("skills/*/SKILL.md"):
        put("skill_md", read(path))
    for path in files("workspaces/*/tasks/*/expected.json"):
        put("expected_json", read(path))
    calls = []
    for path in files("workspaces/*/tasks/*/solution.jsonl"):
        data = read(path)
        put("trajectory", data)
        for line in data.decode("utf-8", "replace").splitlines():
            try:
                step = json.loads(line)
            except ValueError:
                continue
            if isinstance(step, dict) and "tool" in step:
                calls.append(json.dumps({"tool": step["tool"], "args": step.get("args", {})}))
    for body in sorted(set(calls), key=lambda b: hashlib.sha1(b.encode()).hexdigest()):
        put("http_call", body.encode())
    put("http_call", b'{"tool": "read"}')
    put("http_call", b"")
    for path in files(os.path.join(FIXTURES, "pinchbench", "*.md"),
                      os.path.join(FIXTURES, "pinchbench-format", "*.md")):
        put("pinchbench_task", read(path))
    for path in files(os.path.join(FIXTURES, "clawgym", "*", "data_entry.json")):
        put("clawgym_entry", read(path))
    for patch in PATCHES:
        put("patch", patch.encode())
    for body in HTTP_CREATE:
        put("http_create", json.dumps(body).encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
