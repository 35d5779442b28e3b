//! What an agent can make the host hold outside its sandbox's limits: each bound, tested by
//! replaying an agent that pushes past it with `envcraft run` (through `contained`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs;
use std::process::Command;

use serde_json::{Value, json};

use common::sandbox_ready;

/// Replay `calls` in a session of the bundled `example/archive-read-mail`; the report.
fn run(calls: &[Value]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let traj = dir.path().join("agent.jsonl");
    let text: String = calls.iter().map(|c| format!("{c}\n")).collect();
    fs::write(&traj, text).unwrap();
    let out = Command::new("bash")
        .arg(common::contained().unwrap())
        .arg(common::envcraft())
        .args(["run", "example/archive-read-mail", "--json", "--actions"])
        .arg(&traj)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("ENVCRAFT_STATE_DIR", dir.path().join("state"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "envcraft run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn results(report: &Value) -> Vec<Value> {
    report["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a.get("result").cloned())
        .collect()
}

fn background(command: &str) -> Value {
    json!({"tool": "exec", "args": {"command": command, "background": true}})
}

#[test]
fn the_background_commands_a_session_keeps_are_bounded() {
    if !sandbox_ready() {
        return;
    }
    // 64 that keep running fill the table: the 65th is refused with a structured error, and a
    // kill makes room again.
    let mut calls: Vec<Value> = (0..64).map(|_| background("sleep 30")).collect();
    calls.push(background("sleep 30"));
    let first = |r: &[Value]| r[0]["id"].clone();
    let probe = results(&run(&[background("sleep 30")]));
    let first_id = first(&probe);
    calls.push(json!({"tool": "process", "args": {"action": "kill", "id": first_id}}));
    calls.push(background("echo again"));
    let r = results(&run(&calls));
    assert!(r[..64].iter().all(|x| x["ok"] == true), "{:?}", &r[..64]);
    assert_eq!(r[64]["ok"], false, "{}", r[64]);
    assert_eq!(
        r[64]["error"]["category"], "invalid_transition",
        "{}",
        r[64]
    );
    assert!(
        r[64]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("64 background commands"),
        "{}",
        r[64]
    );
    assert_eq!(r[65]["ok"], true, "{}", r[65]);
    assert_eq!(r[66]["ok"], true, "the kill made room: {}", r[66]);

    // Ones that ended are forgotten, oldest first, so an agent may start as many as it likes
    // over a session while the host keeps at most 64 outputs.
    let mut calls: Vec<Value> = (0..100).map(|i| background(&format!("echo {i}"))).collect();
    calls.push(json!({"tool": "exec", "args": {"command": "sleep 0.2"}}));
    calls.push(json!({"tool": "process", "args": {"action": "list"}}));
    let report = run(&calls);
    let r = results(&report);
    assert!(r[..100].iter().all(|x| x["ok"] == true), "{report}");
    let listed = r[101].to_string();
    assert!(r[101]["ok"] == true, "{listed}");
    let count = r[101]
        .as_object()
        .unwrap()
        .values()
        .find_map(|v| v.as_array())
        .map(Vec::len)
        .unwrap();
    assert!(count <= 64, "{count} kept: {listed}");
}
