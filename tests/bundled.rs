//! The bundled environments as a whole: every task passes the audit (the reference scores 1.0,
//! the untouched workspace does not pass, replays are deterministic, a corrupted output fails,
//! the template is intact), and the noop agent passes no task.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

fn envcraft_json(args: &[&str]) -> (i32, Value, String) {
    let state = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .arg(common::contained().unwrap())
        .arg(common::envcraft())
        .args(args)
        .current_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .env("ENVCRAFT_STATE_DIR", state.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    (
        out.status.code().unwrap_or(-1),
        value,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn every_bundled_task_passes_the_audit() {
    if !common::sandbox_ready() {
        return;
    }
    let (code, report, err) = envcraft_json(&["audit", "workspaces", "--json", "--jobs", "2"]);
    let failed: Vec<String> = report["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["passed"] == false)
        .map(|t| {
            let checks: Vec<String> = t["checks"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| c["passed"] == false)
                .map(|c| format!("{}: {}", c["name"], c["detail"]))
                .collect();
            format!("{}: {}", t["task"], checks.join("; "))
        })
        .collect();
    assert!(
        failed.is_empty(),
        "tasks failing the audit:\n{}\n{err}",
        failed.join("\n")
    );
    assert_eq!(code, 0);
    assert!(report["summary"]["tasks"].as_u64().unwrap() >= 2);
}

#[test]
fn the_noop_agent_passes_no_bundled_task() {
    if !common::sandbox_ready() {
        return;
    }
    let (code, report, err) = envcraft_json(&[
        "suite",
        "workspaces",
        "--agent",
        "noop",
        "--json",
        "--jobs",
        "2",
    ]);
    let passed: Vec<&Value> = report["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["passed"] == true)
        .map(|t| &t["task"])
        .collect();
    assert!(passed.is_empty(), "the noop agent passed: {passed:?}");
    assert_eq!(code, 0, "{err}");
    assert!(
        report["totals"]["mean_reward"].as_f64().unwrap() < 0.5,
        "{}",
        report["totals"]
    );
}
