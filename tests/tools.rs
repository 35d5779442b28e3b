//! envcraft's built-in `exec` and `process` with OpenClaw's arguments and actions, and the
//! transcript in OpenClaw's v3 shape, as a user drives them: `envcraft run` replaying
//! trajectories over the bundled example environment. Every run goes through `contained`.
//!
//! Waits are bounded and on events: a `process poll` with a `timeout` returns as soon as the
//! command prints or ends.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use common::sandbox_ready;

const TASK: &str = "example/extract-todos";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Replay `calls` in a fresh session of the example task (`--keep keep` when given); the
/// report.
fn run_keeping(calls: &[Value], keep: Option<&Path>) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let traj = dir.path().join("traj.jsonl");
    let text: String = calls.iter().map(|c| format!("{c}\n")).collect();
    fs::write(&traj, text).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("bash");
    cmd.arg(common::contained().unwrap())
        .arg(common::envcraft())
        .args(["run", TASK, "--json", "--actions", traj.to_str().unwrap()]);
    if let Some(keep) = keep {
        cmd.args(["--keep", keep.to_str().unwrap()]);
    }
    let out = cmd
        .current_dir(root())
        .env("ENVCRAFT_STATE_DIR", state.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "envcraft run failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn run(calls: &[Value]) -> Vec<Value> {
    common::action_results(&run_keeping(calls, None))
}

fn exec(args: Value) -> Value {
    json!({"tool": "exec", "args": args})
}

fn process(args: Value) -> Value {
    json!({"tool": "process", "args": args})
}

fn category(r: &Value) -> &str {
    r["error"]["category"].as_str().unwrap_or("")
}

#[test]
fn exec_runs_in_the_workdir_it_is_given_and_refuses_one_outside_the_workspace() {
    if !sandbox_ready() {
        return;
    }
    let r = run(&[
        json!({"tool": "write", "args": {"path": "sub/dir/x.txt", "content": "here"}}),
        exec(json!({"command": "pwd; cat x.txt", "workdir": "sub/dir"})),
        exec(json!({"command": "pwd", "workdir": "/workspace/sub"})),
        exec(json!({"command": "pwd", "workdir": "/root/.openclaw/workspace/sub/dir/.."})),
        exec(json!({"command": "pwd", "workdir": "."})),
        exec(json!({"command": "pwd", "workdir": ".."})),
        exec(json!({"command": "pwd", "workdir": "sub/../.."})),
        exec(json!({"command": "pwd", "workdir": "/etc"})),
        exec(json!({"command": "pwd", "workdir": "/tmp"})),
        exec(json!({"command": "pwd", "workdir": "missing"})),
        exec(json!({"command": "pwd", "workdir": "sub/dir/x.txt"})),
        exec(json!({"command": "pwd", "workdir": 3})),
        exec(json!({"command": "pwd", "background": true, "workdir": "sub"})),
        exec(json!({"command": "sleep 0.2"})),
        process(json!({"action": "list"})),
    ]);
    assert_eq!(r[1]["stdout"], "/workspace/sub/dir\nhere", "{r:?}");
    assert_eq!(r[2]["stdout"], "/workspace/sub\n", "{r:?}");
    assert_eq!(r[3]["stdout"], "/workspace/sub\n", "{r:?}");
    assert_eq!(r[4]["stdout"], "/workspace\n", "{r:?}");
    for (i, refused) in r.iter().enumerate().take(9).skip(5) {
        assert_eq!(category(refused), "permission", "{i}: {refused:?}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("outside the workspace"),
            "{refused:?}"
        );
    }
    assert_eq!(category(&r[9]), "not_found", "{:?}", r[9]);
    assert_eq!(category(&r[10]), "invalid_argument", "{:?}", r[10]);
    assert_eq!(category(&r[11]), "invalid_argument", "{:?}", r[11]);
    let listed = &r[14]["sessions"][0];
    assert_eq!(listed["cwd"], "sub", "{:?}", r[14]);
    assert_eq!(listed["sessionId"], r[12]["sessionId"]);
}

#[test]
fn exec_env_is_merged_over_the_policys_and_checked() {
    if !sandbox_ready() {
        return;
    }
    let r = run(&[
        exec(
            json!({"command": "echo $GREETING $LANG $HOME", "env": {"GREETING": "hi", "LANG": "fr_FR.UTF-8"}}),
        ),
        exec(json!({"command": "echo $LANG"})),
        exec(json!({"command": "true", "env": {"1X": "a"}})),
        exec(json!({"command": "true", "env": {"A-B": "a"}})),
        exec(json!({"command": "true", "env": {"X": 1}})),
        exec(json!({"command": "true", "env": {"X": "a\u{0}b"}})),
        exec(json!({"command": "true", "env": {"ENVCRAFT_NOW": "0"}})),
        exec(json!({"command": "true", "env": ["X=1"]})),
        exec(json!({"command": "true", "env": {}})),
    ]);
    assert_eq!(r[0]["stdout"], "hi fr_FR.UTF-8 /root\n", "{r:?}");
    assert_eq!(
        r[1]["stdout"], "C.UTF-8\n",
        "the env of one call is its own"
    );
    for i in [2, 3, 4, 5, 7] {
        assert_eq!(category(&r[i]), "invalid_argument", "{i}: {:?}", r[i]);
    }
    assert_eq!(category(&r[6]), "permission", "{:?}", r[6]);
    assert!(
        r[6]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ENVCRAFT_NOW")
    );
    assert_eq!(r[8]["exit_code"], 0);
}

#[test]
fn a_command_past_its_yield_goes_on_in_the_background_and_ends_there() {
    if !sandbox_ready() {
        return;
    }
    let reader = "echo started; read line; echo got $line";
    let r = run(&[
        // Prints, then waits for a line on stdin, then prints what it read.
        exec(json!({"command": reader, "yieldMs": 200})),
        exec(json!({"command": "echo quick", "yieldMs": 5000})),
        exec(json!({"command": "sleep 30", "yieldMs": 100, "timeout": 1})),
        exec(json!({"command": "sleep 5", "timeoutSeconds": 1})),
        exec(json!({"command": "true", "yieldMs": -5})),
        exec(json!({"command": "true", "pty": true})),
    ]);
    assert_eq!(r[0]["status"], "running", "{r:?}");
    assert_eq!(r[0]["sessionId"], "1", "{r:?}");
    assert!(r[0]["tail"].as_str().unwrap().contains("started"), "{r:?}");
    assert_eq!(r[0]["stdout"], "started\n");
    assert_eq!(r[1]["stdout"], "quick\n", "a quick command answers in full");
    assert!(r[1].get("status").is_none());
    assert_eq!(r[2]["status"], "running", "{r:?}");
    assert_eq!(category(&r[3]), "timeout", "{:?}", r[3]);
    assert_eq!(category(&r[4]), "invalid_argument", "{:?}", r[4]);
    assert_eq!(category(&r[5]), "invalid_argument", "{:?}", r[5]);

    // The same, then fed and waited for through `process` (ids count the sandbox's commands, from 1).
    let r = run(&[
        exec(json!({"command": reader, "yieldMs": 200})),
        process(json!({"action": "write", "sessionId": "1", "data": "x"})),
        process(json!({"action": "submit", "sessionId": "1"})),
        process(json!({"action": "poll", "sessionId": "1", "timeout": 10000})),
        process(json!({"action": "poll", "sessionId": "1", "timeout": 10000})),
        exec(json!({"command": "sleep 30", "yieldMs": 100, "timeout": 1})),
        process(json!({"action": "poll", "sessionId": "2", "timeout": 10000})),
    ]);
    assert_eq!(r[0]["sessionId"], "1", "{r:?}");
    assert_eq!(r[1]["bytes_written"], 1, "{r:?}");
    assert_eq!(r[2]["bytes_written"], 1, "{r:?}");
    // The first poll returns at the new output; the second at the end.
    assert_eq!(r[3]["stdout"], "got x\n", "{r:?}");
    assert_eq!(r[4]["status"], "completed", "{r:?}");
    assert_eq!(r[4]["exit_code"], 0);
    assert_eq!(r[4]["stdout"], "", "a second poll returns only what is new");
    assert_eq!(r[5]["sessionId"], "2", "{r:?}");
    assert_eq!(r[6]["status"], "failed", "{r:?}");
    assert_eq!(r[6]["timed_out"], true, "{r:?}");
    assert_eq!(r[6]["signal"], 9, "{r:?}");
}

#[test]
fn background_starts_at_once_and_every_process_action_works() {
    if !sandbox_ready() {
        return;
    }
    let hex = "python3 -c \"import sys; print(sys.stdin.buffer.read().hex())\"";
    let r = run(&[
        exec(json!({"command": hex, "background": true})), // 0
        process(
            json!({"action": "send-keys", "sessionId": "1", "literal": "ab", "hex": ["0x41"], "keys": ["Tab", "C-c", "Enter"]}),
        ),
        process(json!({"action": "paste", "sessionId": "1", "text": "p"})),
        process(json!({"action": "paste", "sessionId": "1", "text": "q", "bracketed": false})),
        process(json!({"action": "write", "sessionId": "1", "data": "", "eof": true})),
        process(json!({"action": "poll", "sessionId": "1", "timeout": 10000})), // 5
        process(json!({"action": "poll", "sessionId": "1", "timeout": 10000})),
        process(json!({"action": "write", "sessionId": "1", "data": "late"})),
        exec(json!({"command": "sleep 600", "background": true})), // 8
        process(json!({"action": "clear", "sessionId": "2"})),
        process(json!({"action": "kill", "sessionId": "2"})), // 10
        process(json!({"action": "poll", "sessionId": "2", "timeout": 10000})),
        process(json!({"action": "kill", "sessionId": "2"})),
        process(json!({"action": "clear", "sessionId": "2"})),
        process(json!({"action": "poll", "sessionId": "2"})),
        exec(
            json!({"command": "printf 'line 1\\nline 2\\nline 3\\nline 4\\nline 5\\n'; sleep 600", "background": true}),
        ), // 15
        process(json!({"action": "poll", "id": 3, "timeout": 10000})),
        process(json!({"action": "log", "sessionId": "3", "offset": 1, "limit": 2})),
        process(json!({"action": "log", "sessionId": 3})),
        process(json!({"action": "list"})),
        process(json!({"action": "remove", "sessionId": "3"})), // 20
        process(json!({"action": "list"})),
        process(json!({"action": "poll", "sessionId": "nope"})),
        process(json!({"action": "poll"})),
        process(json!({"action": "dance", "sessionId": "1"})),
        process(json!({"action": "send-keys", "sessionId": "1", "keys": ["Hyper"]})), // 25
        process(json!({"action": "send-keys", "sessionId": "1"})),
        process(json!({"action": "paste", "sessionId": "1"})),
    ]);
    let id = |i: usize| r[i]["sessionId"].as_str().unwrap().to_string();
    assert_eq!(r[0]["status"], "running", "{r:?}");
    assert_eq!(r[0]["background"], true);
    assert_eq!(id(0), "1", "{r:?}");
    assert_eq!(r[1]["bytes_written"], 6, "{r:?}"); // a b A \t ^C \n
    assert_eq!(r[2]["bytes_written"], 13, "{r:?}"); // ESC[200~ p ESC[201~
    assert_eq!(r[4]["stdin_open"], false);
    let mut out = r[5]["stdout"].as_str().unwrap().to_string();
    out += r[6]["stdout"].as_str().unwrap();
    let expected: Vec<u8> = b"abA\t\x03\n\x1b[200~p\x1b[201~q".to_vec();
    let expected_hex: String = expected.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(out, format!("{expected_hex}\n"), "{r:?}");
    assert_eq!(r[6]["status"], "completed", "{r:?}");
    assert_eq!(category(&r[7]), "invalid_transition", "{:?}", r[7]);

    assert_eq!(id(8), "2", "{r:?}");
    assert_eq!(
        category(&r[9]),
        "invalid_transition",
        "clear refuses a running one"
    );
    assert_eq!(r[10]["killed"], true, "{r:?}");
    assert_eq!(r[11]["status"], "failed", "{r:?}");
    assert_eq!(r[11]["signal"], 9);
    assert_eq!(
        category(&r[12]),
        "invalid_transition",
        "kill refuses an ended one"
    );
    assert_eq!(r[13]["cleared"], true, "{r:?}");
    assert_eq!(category(&r[14]), "not_found", "a cleared command is gone");

    // One write of five lines: the poll returns with all of them.
    assert_eq!(
        r[16]["stdout"].as_str().unwrap().lines().count(),
        5,
        "{r:?}"
    );
    assert_eq!(r[17]["stdout"], "line 2\nline 3\n", "{r:?}");
    assert_eq!(r[17]["stdout_lines"], 5);
    assert_eq!(r[18]["stdout"].as_str().unwrap().lines().count(), 5);
    let listed: Vec<&str> = r[19]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["1", "3"], "{r:?}");
    assert_eq!(
        r[19]["sessions"][1]["command"],
        "printf 'line 1\\nline 2\\nline 3\\nline 4\\nline 5\\n'; sleep 600"
    );
    assert_eq!(r[19]["sessions"][1]["status"], "running");
    assert_eq!(r[20]["removed"], true, "{r:?}");
    assert_eq!(r[20]["killed"], true);
    assert_eq!(r[21]["sessions"].as_array().unwrap().len(), 1, "{r:?}");
    assert_eq!(category(&r[22]), "not_found");
    assert_eq!(category(&r[23]), "missing_field");
    assert_eq!(category(&r[24]), "invalid_argument");
    assert_eq!(category(&r[25]), "invalid_argument");
    assert_eq!(category(&r[26]), "missing_field");
    assert_eq!(category(&r[27]), "missing_field");
}

#[test]
fn the_transcript_is_openclaws_v3_session_jsonl_and_the_same_run_gives_the_same_one() {
    if !sandbox_ready() {
        return;
    }
    let calls = [
        exec(json!({"command": "echo hi"})),
        json!({"tool": "read", "args": {"path": "notes/todo.md"}}),
    ];
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (ka, kb) = (a.path().join("keep"), b.path().join("keep"));
    run_keeping(&calls, Some(&ka));
    run_keeping(&calls, Some(&kb));
    let text = fs::read_to_string(ka.join("transcript.jsonl")).unwrap();
    assert_eq!(
        text,
        fs::read_to_string(kb.join("transcript.jsonl")).unwrap()
    );
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let header = &lines[0];
    assert_eq!(header["type"], "session");
    assert_eq!(header["version"], 3);
    assert_eq!(header["cwd"], "/workspace");
    assert_eq!(header["timestamp"], "2026-03-02T09:00:00Z");
    assert_eq!(header["id"].as_str().unwrap().len(), 36);
    // A prompt, then two calls with their results: five entries, each the child of the last.
    assert_eq!(lines.len(), 6, "{text}");
    let mut parent = Value::Null;
    for (n, entry) in lines[1..].iter().enumerate() {
        assert_eq!(entry["type"], "message");
        assert_eq!(entry["id"], format!("{:08x}", n + 1));
        assert_eq!(entry["parentId"], parent, "{entry}");
        parent = entry["id"].clone();
    }
    // Timestamps are the session clock's: a minute per action.
    assert_eq!(lines[2]["timestamp"], "2026-03-02T09:00:00Z");
    assert_eq!(lines[4]["timestamp"], "2026-03-02T09:01:00Z");
    assert_eq!(lines[2]["message"]["content"][0]["type"], "toolCall");
    assert_eq!(
        lines[3]["message"]["toolCallId"],
        lines[2]["message"]["content"][0]["id"]
    );
}
