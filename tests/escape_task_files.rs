//! Crafted task sources and a crafted state root, as an attacker would leave them: links and
//! special files in ClawGym and PinchBench sources (they must be refused, naming the task and
//! the file, with no host byte in DEST and nothing half-written), and a foreign or poisoned
//! manifest cache (it must be refused, and never flip a verdict). Every envcraft runs through
//! `contained`, bounded in time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::copy_dir;

use std::fs;
use std::os::unix::fs::symlink;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The most one envcraft call of these tests may take (an import that blocks on a FIFO never
/// ends: this is what catches it).
const DEADLINE: Duration = Duration::from_secs(20);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `../shared/fixtures/clawgym`, or a loud skip.
fn clawgym_fixtures() -> Option<PathBuf> {
    let dir = root().join("../shared/fixtures/clawgym");
    if dir.join("task_0000").is_dir() {
        Some(dir)
    } else {
        common::skip("../shared/fixtures/clawgym is missing");
        None
    }
}

struct Ran {
    code: i32,
    out: String,
    err: String,
}

/// `bash contained envcraft ARGS...` with `state` as its state directory (or none), killed
/// (its whole process group) past [`DEADLINE`].
fn envcraft(args: &[&str], state: Option<&Path>) -> Ran {
    let mut command = Command::new("bash");
    command
        .arg(common::contained().unwrap())
        .arg(common::envcraft())
        .args(args)
        .current_dir(root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(state) = state {
        command.env("ENVCRAFT_STATE_DIR", state);
    }
    let child = command.spawn().unwrap();
    let pgid = child.id() as i32;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(out) => {
            let out = out.unwrap();
            Ran {
                code: out.status.code().unwrap_or(-1),
                out: String::from_utf8_lossy(&out.stdout).into_owned(),
                err: String::from_utf8_lossy(&out.stderr).into_owned(),
            }
        }
        Err(_) => {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
            panic!("envcraft {args:?} did not finish within {DEADLINE:?}");
        }
    }
}

/// A host directory with a secret file in it, as a link target an attacker would choose.
struct HostSecret {
    dir: tempfile::TempDir,
    token: String,
}

impl HostSecret {
    fn new() -> HostSecret {
        let dir = tempfile::tempdir().unwrap();
        let token = format!("host-secret-{}", common::unique_token());
        fs::write(dir.path().join("secret.txt"), &token).unwrap();
        fs::write(dir.path().join("input"), &token).unwrap();
        HostSecret { dir, token }
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join("secret.txt")
    }

    /// Asserts no file under `dest` holds the secret, and nothing half-written is there.
    fn assert_absent_from(&self, dest: &Path) {
        for entry in walkdir::WalkDir::new(dest) {
            let entry = entry.unwrap();
            let name = entry.file_name().to_string_lossy().into_owned();
            assert!(
                !name.ends_with(".importing"),
                "a half-written environment was left: {}",
                entry.path().display()
            );
            if entry.file_type().is_file() {
                let bytes = fs::read(entry.path()).unwrap();
                assert!(
                    !String::from_utf8_lossy(&bytes).contains(&self.token),
                    "host content reached {}",
                    entry.path().display()
                );
            }
        }
    }
}

/// `envcraft import FORMAT SRC DEST/out` through `contained`; (the run, DEST/out).
fn import(format: &str, src: &Path, dest: &tempfile::TempDir) -> (Ran, PathBuf) {
    let out = dest.path().join("out");
    let ran = envcraft(
        &[
            "import",
            format,
            src.to_str().unwrap(),
            out.to_str().unwrap(),
        ],
        None,
    );
    (ran, out)
}

/// Asserts `ran` skipped `task` for a link or special file named by `file` (and `kind`).
fn assert_refused(ran: &Ran, task: &str, file: &str, kind: &str) {
    assert_eq!(ran.code, 1, "{}\n{}", ran.out, ran.err);
    let line = ran
        .out
        .lines()
        .find(|l| l.contains(&format!("skipped {task}:")))
        .unwrap_or_else(|| panic!("{task} was not refused:\n{}\n{}", ran.out, ran.err));
    assert!(
        line.contains("links and special files are refused"),
        "{line}"
    );
    assert!(line.contains(file), "{line}");
    assert!(line.contains(kind), "{line}");
}

#[test]
fn clawgym_input_files_linked_to_a_host_dir_is_refused_and_no_host_file_is_imported() {
    let Some(fx) = clawgym_fixtures() else { return };
    if !common::sandbox_ready() {
        return;
    }
    let host = HostSecret::new();
    let src = tempfile::tempdir().unwrap();
    let task = src.path().join("task_0000");
    copy_dir(&fx.join("task_0000"), &task);
    fs::remove_dir_all(task.join("input_files")).unwrap();
    symlink(host.dir.path(), task.join("input_files")).unwrap();
    // A second task, whose own input_files hides a link deeper down.
    let other = src.path().join("task_0001");
    copy_dir(&fx.join("task_0001"), &other);
    symlink(host.file(), other.join("input_files/notes.txt")).unwrap();
    // And a third whose task folder itself is a link to a task outside the set.
    let outside = tempfile::tempdir().unwrap();
    copy_dir(&fx.join("task_0002"), outside.path());
    symlink(outside.path(), src.path().join("task_0002")).unwrap();

    let dest = tempfile::tempdir().unwrap();
    let (ran, out) = import("clawgym", src.path(), &dest);
    assert_refused(
        &ran,
        "task_0000",
        "task_0000/input_files",
        "a symbolic link",
    );
    assert_refused(
        &ran,
        "task_0001",
        "task_0001/input_files/notes.txt",
        "a symbolic link",
    );
    assert_refused(&ran, "task_0002", "task_0002", "a symbolic link");
    assert!(!out.join("clawgym-task_0000").exists());
    assert!(!out.join("clawgym-task_0001").exists());
    host.assert_absent_from(dest.path());
}

#[test]
fn a_pinchbench_asset_that_is_a_link_is_refused_and_no_host_file_is_imported() {
    if !common::sandbox_ready() {
        return;
    }
    let host = HostSecret::new();
    let src = tempfile::tempdir().unwrap();
    fs::create_dir_all(src.path().join("tasks")).unwrap();
    fs::create_dir_all(src.path().join("assets/data")).unwrap();
    symlink(host.file(), src.path().join("assets/data/report.txt")).unwrap();
    fs::write(src.path().join("assets/plain.txt"), "plain\n").unwrap();
    let task = |id: &str, source: &str| {
        format!(
            "---\nid: {id}\nworkspace_files:\n  - source: {source}\n    dest: input.txt\n---\n\n\
             ## Prompt\n\nSummarize input.txt.\n\n## Automated Checks\n\n```python\n\
             def grade(transcript, workspace_path):\n    return {{\"ok\": 0.0}}\n```\n"
        )
    };
    fs::write(
        src.path().join("tasks/task_01_linked.md"),
        task("task_01_linked", "data/report.txt"),
    )
    .unwrap();
    fs::write(
        src.path().join("tasks/task_02_plain.md"),
        task("task_02_plain", "plain.txt"),
    )
    .unwrap();
    // A task file that is itself a link to a host file.
    symlink(host.file(), src.path().join("tasks/task_03_host.md")).unwrap();

    let dest = tempfile::tempdir().unwrap();
    let (ran, out) = import("pinchbench", src.path(), &dest);
    assert_refused(
        &ran,
        "task_01_linked",
        "assets/data/report.txt",
        "a symbolic link",
    );
    assert_refused(
        &ran,
        "task_03_host",
        "tasks/task_03_host.md",
        "a symbolic link",
    );
    assert!(!out.join("pinchbench-task_01_linked").exists());
    // The plain task is imported, with its asset.
    assert_eq!(
        fs::read_to_string(out.join("pinchbench-task_02_plain/files/input.txt")).unwrap(),
        "plain\n"
    );
    host.assert_absent_from(dest.path());
}

#[test]
fn a_license_that_is_a_link_is_refused_and_no_host_file_is_imported() {
    let Some(fx) = clawgym_fixtures() else { return };
    if !common::sandbox_ready() {
        return;
    }
    let host = HostSecret::new();
    let src = tempfile::tempdir().unwrap();
    copy_dir(&fx.join("task_0000"), &src.path().join("task_0000"));
    symlink(host.file(), src.path().join("LICENSE")).unwrap();
    let dest = tempfile::tempdir().unwrap();
    let (ran, out) = import("clawgym", src.path(), &dest);
    assert_refused(&ran, "task_0000", "LICENSE", "a symbolic link");
    assert!(!out.join("clawgym-task_0000").exists());
    host.assert_absent_from(dest.path());

    // The same through `envcraft run` of the one task: refused before any sandbox starts.
    let state = tempfile::tempdir().unwrap();
    let one = src.path().join("task_0000");
    let ran = envcraft(
        &["run", one.to_str().unwrap(), "--json"],
        Some(state.path()),
    );
    assert_ne!(ran.code, 0, "{}", ran.out);
    assert!(
        ran.err.contains("links and special files are refused") && ran.err.contains("LICENSE"),
        "{}",
        ran.err
    );
}

#[test]
fn a_fifo_in_a_task_source_is_refused_without_hanging_the_import() {
    let Some(fx) = clawgym_fixtures() else { return };
    if !common::sandbox_ready() {
        return;
    }
    let src = tempfile::tempdir().unwrap();
    // data_entry.json is a FIFO nobody writes: reading it would block forever.
    let blocked = src.path().join("task_0000");
    copy_dir(&fx.join("task_0000"), &blocked);
    fs::remove_file(blocked.join("data_entry.json")).unwrap();
    nix::unistd::mkfifo(
        &blocked.join("data_entry.json"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    // A FIFO among the input files.
    let piped = src.path().join("task_0001");
    copy_dir(&fx.join("task_0001"), &piped);
    nix::unistd::mkfifo(
        &piped.join("input_files/pipe"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    // And a task with nothing wrong.
    copy_dir(&fx.join("task_0002"), &src.path().join("task_0002"));
    let dest = tempfile::tempdir().unwrap();
    let (ran, out) = import("clawgym", src.path(), &dest);
    assert_refused(&ran, "task_0000", "task_0000/data_entry.json", "a FIFO");
    assert_refused(&ran, "task_0001", "task_0001/input_files/pipe", "a FIFO");
    assert!(!out.join("clawgym-task_0000").exists());
    assert!(!out.join("clawgym-task_0001").exists());
    assert!(out.join("clawgym-task_0002/files").is_dir(), "{}", ran.out);
    let leftovers: Vec<_> = fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

// ---------------------------------------------------------------------------
// The state root and the manifest cache.

/// An environment whose one task passes only when `a.txt` holds `new`; its `unchanged` rule
/// makes the verifier read the template's cached manifest. (the environment dir, the task dir,
/// an empty trajectory: one `ls`).
fn poisonable_task() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("poison");
    fs::create_dir_all(env.join("files/keep")).unwrap();
    fs::write(env.join("files/a.txt"), "old\n").unwrap();
    fs::write(env.join("files/keep/b.txt"), "kept\n").unwrap();
    fs::write(env.join("docs.md"), "# Poison\n\nOne file, a.txt.\n").unwrap();
    fs::write(
        env.join("env.toml"),
        "name = \"poison\"\ndescription = \"one file to change\"\npolicy = \"default\"\n\
         tools = [\"read\", \"write\", \"ls\"]\nbase_time = \"2026-03-02T09:00:00Z\"\n",
    )
    .unwrap();
    let task = env.join("tasks/t");
    fs::create_dir_all(&task).unwrap();
    fs::write(
        task.join("task.toml"),
        "prompt = \"Write new into a.txt.\"\n\n[verifier]\nkind = \"manifest\"\n",
    )
    .unwrap();
    let expected = serde_json::json!({
        "version": 1,
        "files": {"a.txt": {"sha256": envcraft::verify::sha256_hex(b"new\n")}},
        "unchanged": ["keep/**"],
    });
    fs::write(task.join("expected.json"), expected.to_string()).unwrap();
    common::make_world_readable(dir.path());
    let traj = dir.path().join("untouched.jsonl");
    fs::write(&traj, "{\"tool\": \"ls\", \"args\": {}}\n").unwrap();
    (dir, task, traj)
}

/// `envcraft run TASK --json --actions TRAJ` with `state`: (the run, its report when it gave one).
fn run_task(task: &Path, traj: &Path, state: &Path) -> (Ran, Option<serde_json::Value>) {
    let ran = envcraft(
        &[
            "run",
            task.to_str().unwrap(),
            "--json",
            "--actions",
            traj.to_str().unwrap(),
        ],
        Some(state),
    );
    let report = ran
        .out
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok());
    (ran, report)
}

#[test]
fn a_poisoned_manifest_cache_entry_does_not_flip_the_verdict_of_an_untouched_workspace() {
    if !common::sandbox_ready() {
        return;
    }
    let (dir, task, traj) = poisonable_task();
    let state = tempfile::tempdir().unwrap();
    let (ran, report) = run_task(&task, &traj, state.path());
    let report = report.unwrap_or_else(|| panic!("{}\n{}", ran.out, ran.err));
    assert_eq!(report["passed"], false, "{report}");
    // The attacker's entry: the manifest of the solved workspace, written over every entry
    // of the cache (as anyone who can write there would).
    let solved = dir.path().join("solved");
    copy_dir(&dir.path().join("poison/files"), &solved);
    fs::write(solved.join("a.txt"), "new\n").unwrap();
    let forged = envcraft::verify::Manifest::of_dir(&solved)
        .unwrap()
        .to_json();
    let mut planted = 0;
    for entry in fs::read_dir(state.path().join("manifests")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            fs::write(&path, &forged).unwrap();
            planted += 1;
        }
    }
    assert!(planted > 0, "the run cached no manifest");
    let (ran, report) = run_task(&task, &traj, state.path());
    let report = report.unwrap_or_else(|| panic!("{}\n{}", ran.out, ran.err));
    assert_eq!(
        report["passed"], false,
        "the poisoned entry flipped the verdict: {report}"
    );
    assert!(report["reward"].as_f64().unwrap() < 1.0, "{report}");
}

#[test]
fn a_manifests_dir_of_another_user_or_writable_by_all_is_refused() {
    if !common::sandbox_ready() {
        return;
    }
    let (_dir, task, traj) = poisonable_task();
    // Owned by nobody.
    let state = tempfile::tempdir().unwrap();
    let manifests = state.path().join("manifests");
    fs::create_dir(&manifests).unwrap();
    nix::unistd::chown(
        &manifests,
        Some(nix::unistd::Uid::from_raw(65534)),
        Some(nix::unistd::Gid::from_raw(65534)),
    )
    .unwrap();
    let (ran, report) = run_task(&task, &traj, state.path());
    let report = report.unwrap_or_else(|| panic!("{}\n{}", ran.out, ran.err));
    // No verdict at all: the verifier's error says which directory and why.
    assert_eq!(report["passed"], serde_json::Value::Null, "{report}");
    let error = report["verifier_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("manifests") && error.contains("owned by uid 65534"),
        "{report}"
    );
    assert_eq!(
        fs::read_dir(&manifests).unwrap().count(),
        0,
        "an entry was written"
    );
    // Ours, but anyone may write it.
    let state = tempfile::tempdir().unwrap();
    let manifests = state.path().join("manifests");
    fs::create_dir(&manifests).unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&manifests, fs::Permissions::from_mode(0o777)).unwrap();
    let (ran, report) = run_task(&task, &traj, state.path());
    let report = report.unwrap_or_else(|| panic!("{}\n{}", ran.out, ran.err));
    assert_eq!(report["passed"], serde_json::Value::Null, "{report}");
    let error = report["verifier_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("manifests") && error.contains("mode 0777"),
        "{report}"
    );
    assert_eq!(
        fs::read_dir(&manifests).unwrap().count(),
        0,
        "an entry was written"
    );
}

#[test]
fn a_state_root_of_another_user_is_refused_before_anything_is_written_there() {
    if !common::sandbox_ready() {
        return;
    }
    let (_dir, task, traj) = poisonable_task();
    let parent = tempfile::tempdir().unwrap();
    let state = parent.path().join("state");
    fs::create_dir(&state).unwrap();
    nix::unistd::chown(&state, Some(nix::unistd::Uid::from_raw(65534)), None).unwrap();
    let (ran, _) = run_task(&task, &traj, &state);
    assert_ne!(ran.code, 0, "{}", ran.out);
    assert!(
        ran.err.contains(&state.display().to_string()) && ran.err.contains("owned by uid 65534"),
        "{}",
        ran.err
    );
    assert_eq!(
        fs::read_dir(&state).unwrap().count(),
        0,
        "state was written there"
    );
}
