#!/usr/bin/env python3
"""Verifier benchmarks, side by side with their peers in the same run.

    python3 bench/verify.py ENVCRAFT_BINARY [RESULTS_MD]

- full hashing of a 100 MB, 10,000-file workspace: `envcraft manifest DIR` (both cores) vs
  `openssl dgst -sha256` over the same files in one process (one core) and `sha256sum`
  (targets: at least 0.9x openssl's throughput on one core, and use both cores);
- verifying a session that changed 1 file of that workspace (the template's manifest cached):
  `verify_us` of `envcraft run --json` (target: at most 5% of the full-hash time).
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from report import publish, timed, verdict

FILES, SIZE, RUNS = 10_000, 10_000, 5


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    binary = os.path.abspath(sys.argv[1])
    results = sys.argv[2] if len(sys.argv) == 3 else None
    root = tempfile.mkdtemp(prefix="envcraft-bench-verify-")
    try:
        env = os.path.join(root, "big")
        files = os.path.join(env, "files")
        block = os.urandom(SIZE)
        for i in range(FILES):
            d = os.path.join(files, f"d{i // 100:03d}")
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, f"f{i:05d}"), "wb") as f:
                f.write(block[i % 97:] + block[: i % 97])
        with open(os.path.join(env, "env.toml"), "w") as f:
            f.write('name = "big"\ndescription = "benchmark"\nbase_time = "2026-03-02T09:00:00Z"\n')
        with open(os.path.join(env, "docs.md"), "w") as f:
            f.write("benchmark\n")
        task = os.path.join(env, "tasks", "one")
        os.makedirs(task)
        with open(os.path.join(task, "task.toml"), "w") as f:
            f.write('prompt = "change one file"\n[verifier]\nkind = "manifest"\n')
        with open(os.path.join(task, "solution.jsonl"), "w") as f:
            f.write(json.dumps({"tool": "write", "args": {"path": "d000/f00000", "content": "changed"}}) + "\n")
        paths = sorted(os.path.join(dp, n) for dp, _, ns in os.walk(files) for n in ns)
        list_file = os.path.join(root, "list")
        with open(list_file, "w") as f:
            f.write("\n".join(paths))
        total = sum(os.path.getsize(p) for p in paths)

        ours = [timed([binary, "manifest", files]) for _ in range(RUNS)]
        ssl = [timed(["sh", "-c", f"xargs -a {list_file} -d '\\n' openssl dgst -sha256 > /dev/null"]) for _ in range(RUNS)]
        coreutils = [timed(["sh", "-c", f"xargs -a {list_file} -d '\\n' sha256sum > /dev/null"]) for _ in range(RUNS)]
        env_vars = dict(os.environ, ENVCRAFT_STATE_DIR=os.path.join(root, "state"))
        os.makedirs(env_vars["ENVCRAFT_STATE_DIR"])
        subprocess.run([binary, "record", task], check=True, stdout=subprocess.DEVNULL, env=env_vars)
        verify = []
        for _ in range(RUNS + 1):
            out = subprocess.run([binary, "run", task, "--json"], check=True, capture_output=True, text=True, env=env_vars).stdout
            report = json.loads(out)
            assert report["reward"] == 1.0, report
            verify.append(report["verify_us"] / 1e6)
        verify = verify[1:]  # the first fills the template's manifest cache
    finally:
        shutil.rmtree(root, ignore_errors=True)

    m_ours, m_ssl, m_cu, m_verify = (statistics.median(x) for x in (ours, ssl, coreutils, verify))
    mb = total / 1e6

    out = [
        "### D. Verifier (medians, one run)",
        "",
        f"A workspace of {FILES:,} files, {mb:.0f} MB.",
        "",
        "| Operation | Time (ms) | Throughput (MB/s) | vs openssl | Target |",
        "| --- | ---: | ---: | ---: | --- |",
        f"| `envcraft manifest` (both cores) | {m_ours * 1000:.0f} | {mb / m_ours:.0f} | {m_ssl / m_ours:.2f}x | >= 0.9x: {verdict(m_ssl / m_ours >= 0.9)} |",
        f"| `openssl dgst -sha256` (one process) | {m_ssl * 1000:.0f} | {mb / m_ssl:.0f} | 1.00x | |",
        f"| `sha256sum` (one process) | {m_cu * 1000:.0f} | {mb / m_cu:.0f} | {m_ssl / m_cu:.2f}x | |",
        f"| verify a session that changed 1 file | {m_verify * 1000:.1f} | | {100 * m_verify / m_ours:.1f}% of a full hash | <= 5%: {verdict(m_verify <= 0.05 * m_ours)} |",
        "",
    ]
    publish(out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
