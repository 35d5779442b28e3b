//! The bundled environments as a whole: every task passes the audit (the reference scores 1.0,
//! the untouched workspace does not pass, replays are deterministic, a corrupted output fails,
//! the template is intact), and the noop agent passes no task.
//!
//! Environments over the host's root run in a fresh state root. The office environment runs
//! over its image, `office`, which `make test` builds (mmdebstrap) and imports once into
//! `ENVCRAFT_OFFICE_STATE` (default `target/office-state`): its tests run there, and skip
//! loudly where the image is not built.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The bundled environments whose env.toml names no image, as `workspaces/NAME` arguments.
fn host_root_envs() -> Vec<String> {
    let mut envs: Vec<String> = std::fs::read_dir(root().join("workspaces"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("env.toml").is_file())
        .filter(|p| {
            let text = std::fs::read_to_string(p.join("env.toml")).unwrap();
            let env: toml::Table = text.parse().unwrap();
            !env.contains_key("image")
        })
        .map(|p| format!("workspaces/{}", p.file_name().unwrap().to_string_lossy()))
        .collect();
    envs.sort();
    envs
}

/// The state root whose store holds the `office` image, or a loud skip saying how to make it.
fn office_state() -> Option<PathBuf> {
    let state = std::env::var_os("ENVCRAFT_OFFICE_STATE")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/office-state"));
    let found = Command::new(common::envcraft())
        .args(["image", "inspect", "office", "--state-dir"])
        .arg(&state)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        common::skip(&format!(
            "the office image is not in {}: `make office-image` builds it (needs mmdebstrap)",
            state.display()
        ));
        return None;
    }
    Some(state)
}

fn envcraft_json(args: &[&str]) -> (i32, Value, String) {
    let state = tempfile::tempdir().unwrap();
    envcraft_json_in(state.path(), args)
}

fn envcraft_json_in(state: &std::path::Path, args: &[&str]) -> (i32, Value, String) {
    let out = Command::new("bash")
        .arg(common::contained().unwrap())
        .arg(common::envcraft())
        .args(args)
        .current_dir(root())
        .env("ENVCRAFT_STATE_DIR", state)
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
    let envs = host_root_envs();
    assert!(envs.len() >= 13, "{envs:?}");
    let mut args = vec!["audit", "--json", "--jobs", "2"];
    args.extend(envs.iter().map(String::as_str));
    let (code, report, err) = envcraft_json(&args);
    assert_audit_clean(code, &report, &err, 2);
}

#[test]
fn the_office_environment_passes_the_audit_over_its_image() {
    if !common::sandbox_ready() {
        return;
    }
    let Some(state) = office_state() else {
        return;
    };
    let (code, report, err) = envcraft_json_in(
        &state,
        &["audit", "workspaces/office", "--json", "--jobs", "2"],
    );
    assert_audit_clean(code, &report, &err, 8);
    let tasks = report["tasks"].as_array().unwrap();
    assert!(tasks.iter().all(|t| t["env"] == "office"), "{report}");
}

fn assert_audit_clean(code: i32, report: &Value, err: &str, at_least: u64) {
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
    assert!(report["summary"]["tasks"].as_u64().unwrap() >= at_least);
}

#[test]
fn the_noop_agent_passes_no_bundled_task() {
    if !common::sandbox_ready() {
        return;
    }
    let mut args = vec!["suite", "--agent", "noop", "--json", "--jobs", "2"];
    let envs = host_root_envs();
    args.extend(envs.iter().map(String::as_str));
    let (code, report, err) = envcraft_json(&args);
    assert_noop_passes_nothing(code, &report, &err);
}

#[test]
fn the_noop_agent_scores_zero_on_every_office_task() {
    if !common::sandbox_ready() {
        return;
    }
    let Some(state) = office_state() else {
        return;
    };
    let (code, report, err) = envcraft_json_in(
        &state,
        &[
            "suite",
            "workspaces/office",
            "--agent",
            "noop",
            "--json",
            "--jobs",
            "2",
        ],
    );
    assert_noop_passes_nothing(code, &report, &err);
    let tasks = report["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 8, "{report}");
    for t in tasks {
        assert_eq!(t["reward"].as_f64(), Some(0.0), "{t}");
    }
}

fn assert_noop_passes_nothing(code: i32, report: &Value, err: &str) {
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
