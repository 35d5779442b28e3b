"""A grader's view of the final workspace is writable and thrown away (issue 23): graders that
run the agent's program let it write its outputs, as in the harnesses the tasks come from, and
nothing they write reaches the session or a later verify."""

from __future__ import annotations

import envcraft

# Scores 1 only if the workspace holds no `left.txt`, then leaves one behind.
GRADER = "if [ -e left.txt ]; then echo 0; else echo here > left.txt && echo 1; fi\n"
TASK = {
    "env": "example",
    "prompt": "Nothing to do.",
    "verifier": {"kind": "command", "command": "sh grader/g.sh", "timeout_secs": 20},
    "grader": {"g.sh": GRADER},
}


def test_what_a_grader_writes_is_its_own_and_gone_with_it(real_server):
    with envcraft.Client(real_server.url) as client, client.create(TASK) as s:
        first = s.verify()
        second = s.verify()
        assert (first.reward, second.reward) == (1.0, 1.0), (first, second)
        seen = s.call("exec", command="test -e left.txt && echo present || echo absent")
        assert seen["stdout"] == "absent\n", seen
        assert s.diff()["added"] == []
