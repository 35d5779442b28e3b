//! What the import tests share (`import`, `import_trajectories`): the fixtures folder, the
//! binary run directly or through `contained`, an import into a temp dir, a `run` of a
//! trajectory in the sandbox, and ClawGym's own way of grading, outside any sandbox.

#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common;
pub use crate::common::copy_dir;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `../shared/fixtures`, or a loud skip.
pub fn fixtures() -> Option<PathBuf> {
    let dir = root().join("../shared/fixtures");
    if dir.join("clawgym").is_dir() && dir.join("pinchbench").is_dir() {
        Some(dir)
    } else {
        common::skip("../shared/fixtures (ClawGym and PinchBench samples) is missing");
        None
    }
}

/// `envcraft ARGS...` run directly (importing needs no sandbox): (exit code, stdout, stderr).
pub fn envcraft(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(common::envcraft())
        .args(args)
        .current_dir(root())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `envcraft ARGS...` run directly with an empty PATH: no image builder (Podman, Buildah) to
/// hand a Dockerfile to.
pub fn envcraft_without_builders(args: &[&str]) -> (i32, String, String) {
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(common::envcraft())
        .args(args)
        .current_dir(root())
        .env("PATH", empty.path())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `bash contained envcraft ARGS...`, with its own state directory.
pub fn contained(args: &[&str]) -> (i32, String, String) {
    let state = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .arg(common::contained().unwrap())
        .arg(common::envcraft())
        .args(args)
        .current_dir(root())
        .env("ENVCRAFT_STATE_DIR", state.path())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Import `format` from `src` into a new temp dir; asserts it imported everything.
pub fn import(format: &str, src: &Path) -> tempfile::TempDir {
    let dest = tempfile::tempdir().unwrap();
    let d = dest.path().join("out");
    let (code, out, err) =
        envcraft(&["import", format, src.to_str().unwrap(), d.to_str().unwrap()]);
    assert_eq!(code, 0, "import {format} failed:\n{out}\n{err}");
    dest
}

/// The imported environments under `dest/out`, sorted: (env dir, task dir).
pub fn imported(dest: &Path) -> Vec<(PathBuf, PathBuf)> {
    let mut envs: Vec<PathBuf> = fs::read_dir(dest.join("out"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    envs.sort();
    envs.into_iter()
        .map(|env| {
            let tasks: Vec<PathBuf> = fs::read_dir(env.join("tasks"))
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            assert_eq!(tasks.len(), 1, "{}", env.display());
            (env, tasks[0].clone())
        })
        .collect()
}

pub fn last_line_score(stdout: &str) -> f64 {
    stdout
        .trim()
        .lines()
        .last()
        .and_then(|l| l.trim().parse::<f64>().ok())
        .unwrap_or(0.0)
}

/// ClawGym's own way, outside any sandbox: `reward/` copied into the final workspace `ws`,
/// `reward.sh` run with the workspace path it names pointing at `ws`; its last stdout line is
/// the reward (non-numeric: 0.0).
pub fn clawgym_direct(fixture_task: &Path, ws: &Path) -> f64 {
    copy_dir(&fixture_task.join("reward"), &ws.join("reward"));
    let script = fs::read_to_string(fixture_task.join("reward/reward.sh")).unwrap();
    let script = script.replace("/root/.openclaw/workspace", ws.to_str().unwrap());
    let out = Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(ws)
        .output()
        .unwrap();
    last_line_score(&String::from_utf8_lossy(&out.stdout))
}

/// `envcraft run TASK --actions (calls) --json --keep KEEP` in the sandbox: (report, keep dir).
pub fn run_in_sandbox(task: &Path, calls: &[Value]) -> (Value, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let traj = dir.path().join("traj.jsonl");
    fs::write(
        &traj,
        calls.iter().map(|c| format!("{c}\n")).collect::<String>(),
    )
    .unwrap();
    let keep = dir.path().join("keep");
    let (code, out, err) = contained(&[
        "run",
        task.to_str().unwrap(),
        "--json",
        "--actions",
        traj.to_str().unwrap(),
        "--keep",
        keep.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "run failed: {err}\n{out}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(report["failed_calls"], 0, "{report}");
    (report, dir)
}
