//! Host-side walks and copies of trees the agent made: `--keep-changes`, `run --keep`, the
//! grader's staging copy and `fork` read the session's upper layer on the host (or in an init
//! before `pivot_root`), while the agent's own background processes may still move things in
//! it. Each attack runs a tight `renameat2(RENAME_EXCHANGE)` loop (a directory swapped with a
//! symlink to a host directory, or a file with a FIFO) and asserts that the host directory is
//! untouched, that no setuid file appears on the host, that no host secret reaches a fork, and
//! that the run ends within its limits. Every run goes through `contained`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs;
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::{HostDir, sandbox_ready};

/// The swap loop of the agent: `d` (a directory of setuid files) exchanged with `l` (a symlink
/// to the host directory given as argv[1]) as fast as the kernel allows. It creates `started`
/// once it has swapped a thousand times.
const SWAP_DIR_WITH_LINK: &str = r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
os.makedirs("d/inner", exist_ok=True)
for i in range(48):
    for p in (f"d/f{i:02}", f"d/inner/g{i:02}"):
        with open(p, "w") as f:
            f.write("agent payload\n")
        os.chmod(p, 0o6755)
os.symlink(sys.argv[1], "l")
n = 0
while True:
    libc.renameat2(-100, b"d", -100, b"l", 2)
    n += 1
    if n == 1000:
        open("started", "w").close()
"#;

/// The other swap loop: each `data/fNN.txt` (a template file, same size and mode after the
/// swap) exchanged with a FIFO `data/pNN`.
const SWAP_FILE_WITH_FIFO: &str = r#"
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
names = sorted(n for n in os.listdir("data") if n.endswith(".txt"))
for n in names:
    os.mkfifo("data/p" + n[1:3], 0o644)
count = 0
while True:
    for n in names:
        libc.renameat2(-100, ("data/" + n).encode(), -100, ("data/p" + n[1:3]).encode(), 2)
    count += 1
    if count == 50:
        open("started", "w").close()
"#;

/// Forty directories, each swapped with a symlink to the host directory, round after round:
/// many windows per walk between the `stat` that saw a directory and its open.
const SWAP_DIRS_WITH_LINKS: &str = r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
for i in range(40):
    os.makedirs(f"s/d{i:02}")
    with open(f"s/d{i:02}/x", "w") as f:
        f.write("x")
    os.symlink(sys.argv[1], f"s/l{i:02}")
count = 0
while True:
    for i in range(40):
        libc.renameat2(-100, f"s/d{i:02}".encode(), -100, f"s/l{i:02}".encode(), 2)
    count += 1
    if count == 50:
        open("started", "w").close()
"#;

/// Waits (bounded) inside the sandbox for the swap loop to have started.
const WAIT_STARTED: &str = "for i in $(seq 400); do [ -e started ] && exit 0; sleep 0.025; done; echo never started; exit 1";

/// How many sessions each race test runs: each one's keep, verify or fork is one walk over a
/// tree moving thousands of times per second; on the old code nearly every one went wrong.
const ROUNDS: usize = 4;

/// A task set of one environment, `hc`: `files/` (with `data/f00.txt`.. for the FIFO swap)
/// and three tasks: `manifest` (the manifest verifier), `command` (a grader command) and
/// `utf8`.
struct Tasks {
    dir: tempfile::TempDir,
}

impl Tasks {
    fn new() -> Tasks {
        let dir = tempfile::Builder::new()
            .prefix("ectest-tasks-")
            .tempdir()
            .unwrap();
        let env = dir.path().join("hc");
        fs::create_dir_all(env.join("files/data")).unwrap();
        fs::write(env.join("files/keep.txt"), "kept\n").unwrap();
        fs::write(env.join("docs.md"), "# hc\n\nA workspace to attack.\n").unwrap();
        for i in 0..40 {
            fs::write(env.join(format!("files/data/f{i:02}.txt")), "x\n").unwrap();
        }
        fs::write(
            env.join("env.toml"),
            r#"name = "hc"
description = "host-copy attacks"
policy = "default"
tools = ["read", "write", "ls", "exec", "process"]
base_time = "2026-03-02T09:00:00Z"
time_step_secs = 60
"#,
        )
        .unwrap();
        let task = |name: &str, verifier: &str| {
            let t = env.join("tasks").join(name);
            fs::create_dir_all(&t).unwrap();
            fs::write(
                t.join("task.toml"),
                format!("prompt = \"attack\"\n\n[verifier]\n{verifier}\n"),
            )
            .unwrap();
            t
        };
        let manifest = task("manifest", "kind = \"manifest\"\nextra = \"allow\"");
        fs::write(
            manifest.join("expected.json"),
            json!({"version": 1, "files": {}, "absent": ["never-made"], "unchanged": [],
                   "ignore": [], "extra": "allow", "all_or_nothing": false})
            .to_string(),
        )
        .unwrap();
        let command = task(
            "command",
            "kind = \"command\"\ncommand = \"python3 grader/check.py /workspace\"\ntimeout_secs = 30",
        );
        fs::create_dir_all(command.join("grader")).unwrap();
        fs::write(command.join("grader/check.py"), "print(1.0)\n").unwrap();
        // Root runs sandboxes as the template's owner: make everything reachable by them.
        common::make_world_readable(dir.path());
        Tasks { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// What one `envcraft` run gave.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    wall: Duration,
}

impl Ran {
    fn describe(&self) -> String {
        format!(
            "exit {:?} after {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.code,
            self.wall,
            self.stdout.chars().take(4000).collect::<String>(),
            self.stderr.chars().take(4000).collect::<String>()
        )
    }

    fn report(&self) -> Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("not a JSON report ({e}):\n{}", self.describe()))
    }
}

/// `bash contained envcraft ARGS` with `stdin`, killed (its whole session) after `deadline`.
/// `envcraft shell hc/manifest` over `tasks` with `input` on its standard input, in a state
/// root of its own.
fn shell_over(tasks: &Tasks, input: &str, deadline: Duration) -> Ran {
    let state = tempfile::tempdir().unwrap();
    let workspaces = tasks.path().to_str().unwrap();
    envcraft(
        &["shell", "hc/manifest", "--workspaces", workspaces],
        input,
        state.path(),
        deadline,
    )
}

fn envcraft(args: &[&str], stdin: &str, state: &Path, deadline: Duration) -> Ran {
    let mut command = Command::new("bash");
    command
        .arg(common::contained().unwrap())
        .arg(common::envcraft())
        .args(args)
        .env("ENVCRAFT_STATE_DIR", state)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: setsid is async-signal-safe; the closure runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let started = Instant::now();
    let mut child = command.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    std::thread::spawn(move || {
        let (mut o, mut e) = (String::new(), String::new());
        let _ = out.read_to_string(&mut o);
        let _ = err.read_to_string(&mut e);
        let _ = tx.send((o, e));
    });
    let (stdout, stderr, code) = match rx.recv_timeout(deadline) {
        Ok((o, e)) => (o, e, child.wait().unwrap().code()),
        Err(_) => {
            for p in common::descendants(pid) {
                // SAFETY: kill has no memory-safety preconditions.
                unsafe { libc::kill(p as libc::pid_t, libc::SIGKILL) };
            }
            // SAFETY: as above; the child leads its own session and group.
            unsafe { libc::killpg(pid as libc::pid_t, libc::SIGKILL) };
            let _ = child.wait();
            (
                String::new(),
                format!("killed by the test after {deadline:?}"),
                None,
            )
        }
    };
    Ran {
        code,
        stdout,
        stderr,
        wall: started.elapsed(),
    }
}

fn call(tool: &str, args: Value) -> Value {
    json!({"tool": tool, "args": args})
}

/// The calls that start a swap loop in the background and wait until it runs.
fn start_swapper(script: &str, arg: &str) -> Vec<Value> {
    vec![
        call("write", json!({"path": "swap.py", "content": script})),
        call(
            "exec",
            json!({"command": format!("python3 swap.py {arg}"), "background": true}),
        ),
        call("exec", json!({"command": WAIT_STARTED})),
    ]
}

/// `envcraft run hc/TASK --json --actions ... EXTRA` over `tasks`.
fn run_task(tasks: &Tasks, task: &str, calls: &[Value], extra: &[&str], deadline: Duration) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    let traj = dir.path().join("traj.jsonl");
    let text: String = calls.iter().map(|c| format!("{c}\n")).collect();
    fs::write(&traj, text).unwrap();
    let state = tempfile::tempdir().unwrap();
    let workspaces = tasks.path().to_str().unwrap();
    let mut args = vec![
        "run",
        task,
        "--workspaces",
        workspaces,
        "--json",
        "--actions",
        traj.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    envcraft(&args, "", state.path(), deadline)
}

/// Every setuid or setgid file below `root` (not following links).
fn setid_files(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
            let meta = entry.path().symlink_metadata().unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
            } else if meta.mode() & 0o6000 != 0 {
                out.push(entry.path());
            }
        }
    }
    out
}

/// The host directory the swap points at, with a root-only secret in it.
fn host_dir() -> HostDir {
    HostDir::build(|root| {
        fs::write(root.join("root-only.txt"), "ROOT-ONLY-SECRET\n").unwrap();
        fs::set_permissions(
            root.join("root-only.txt"),
            fs::Permissions::from_mode(0o600),
        )
        .unwrap();
    })
}

fn assert_host_clean(host: &HostDir, ran: &Ran) {
    let planted = setid_files(host.path());
    assert!(
        planted.is_empty(),
        "setuid files were planted in the host directory: {planted:?}\n{}",
        ran.describe()
    );
    host.assert_unchanged();
}

#[test]
fn run_keep_never_writes_through_a_directory_swapped_with_a_host_link() {
    if !sandbox_ready() {
        return;
    }
    let tasks = Tasks::new();
    let host = host_dir();
    for round in 0..ROUNDS {
        let out = tempfile::tempdir().unwrap();
        let keep = out.path().join("kept");
        let calls = start_swapper(SWAP_DIR_WITH_LINK, &host.p());
        let ran = run_task(
            &tasks,
            "hc/manifest",
            &calls,
            &["--keep", keep.to_str().unwrap()],
            Duration::from_secs(60),
        );
        assert_host_clean(&host, &ran);
        assert_eq!(ran.code, Some(0), "round {round}: {}", ran.describe());
        let setid = setid_files(&keep);
        assert!(setid.is_empty(), "kept set-id files: {setid:?}");
        let report = ran.report();
        assert!(report["reward"].is_number(), "no reward: {report}");
        let listed = fs::read_to_string(keep.join("changes.json")).unwrap();
        assert!(!listed.contains("ROOT-ONLY-SECRET"));
    }
}

#[test]
fn the_graders_staging_copy_never_writes_through_a_directory_swapped_with_a_host_link() {
    if !sandbox_ready() {
        return;
    }
    let tasks = Tasks::new();
    let host = host_dir();
    for round in 0..ROUNDS {
        let calls = start_swapper(SWAP_DIR_WITH_LINK, &host.p());
        let ran = run_task(&tasks, "hc/command", &calls, &[], Duration::from_secs(60));
        assert_host_clean(&host, &ran);
        assert_eq!(ran.code, Some(0), "round {round}: {}", ran.describe());
        let report = ran.report();
        assert_eq!(report["reward"], json!(1.0), "round {round}: {report}");
    }
}

/// `exec --keep-changes` of names that differ only in an invalid byte: both are listed and
/// both kept (they collapsed into one entry, and one file was lost); none keeps its setuid bit.
#[test]
fn exec_keep_changes_keeps_names_that_differ_only_in_invalid_bytes() {
    if !sandbox_ready() {
        return;
    }
    let template = tempfile::tempdir().unwrap();
    fs::write(template.path().join("keep.txt"), "kept\n").unwrap();
    common::make_world_readable(template.path());
    let out = tempfile::tempdir().unwrap();
    let keep = out.path().join("kept");
    let script = "printf one > \"$(printf 'n\\376')\" && printf two > \"$(printf 'n\\377')\" \
                  && chmod 4755 \"$(printf 'n\\377')\" && echo MADE";
    let state = tempfile::tempdir().unwrap();
    let ran = envcraft(
        &[
            "exec",
            "--workspace",
            template.path().to_str().unwrap(),
            "--json",
            "--timeout",
            "20",
            "--keep-changes",
            keep.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            script,
        ],
        "",
        state.path(),
        Duration::from_secs(60),
    );
    assert_eq!(ran.code, Some(0), "{}", ran.describe());
    let report = ran.report();
    assert_eq!(
        report["changes"]["added"],
        json!(["n\\xfe", "n\\xff"]),
        "{}",
        ran.describe()
    );
    let files = keep.join("files");
    for (name, text) in [(&b"n\xfe"[..], "one"), (b"n\xff", "two")] {
        let path = files.join(std::ffi::OsStr::from_bytes(name));
        assert_eq!(
            fs::read_to_string(&path).ok().as_deref(),
            Some(text),
            "{}",
            path.display()
        );
    }
    let setid = setid_files(&keep);
    assert!(setid.is_empty(), "kept set-id files: {setid:?}");
}

#[test]
fn a_fork_never_reads_a_host_file_through_a_directory_swapped_with_a_host_link() {
    if !sandbox_ready() {
        return;
    }
    let tasks = Tasks::new();
    let host = host_dir();
    let mut input = String::new();
    for line in start_swapper(SWAP_DIR_WITH_LINK, &host.p()) {
        input.push_str(&format!("{line}\n"));
    }
    for _ in 0..ROUNDS {
        input.push_str(":fork\n");
        // In the fork: everything below the workspace, printed, with nothing moving in it.
        let look = "cat d/* d/inner/* l/* l/inner/* 2>/dev/null; grep -r ROOT-ONLY . ; \
                    ls -la d l; echo LOOKED";
        input.push_str(&format!("{}\n", call("exec", json!({"command": look}))));
        input.push_str(":use 0\n");
    }
    input.push_str(":quit\n");
    let ran = shell_over(&tasks, &input, Duration::from_secs(90));
    assert_host_clean(&host, &ran);
    assert_eq!(ran.code, Some(0), "{}", ran.describe());
    assert_eq!(
        ran.stdout.matches("LOOKED").count(),
        ROUNDS,
        "not every fork answered:\n{}",
        ran.describe()
    );
    assert!(
        !ran.stdout.contains("ROOT-ONLY-SECRET") && !ran.stdout.contains(host.secret()),
        "a host file reached the fork:\n{}",
        ran.describe()
    );
}

#[test]
fn a_fifo_swapped_in_for_a_file_never_blocks_the_run() {
    if !sandbox_ready() {
        return;
    }
    let tasks = Tasks::new();
    for round in 0..ROUNDS {
        let calls = start_swapper(SWAP_FILE_WITH_FIFO, "");
        // The run's own limit is the policy's 60 s per command; the whole run must end well
        // within the deadline (the walk used to block on the FIFO forever).
        let ran = run_task(&tasks, "hc/manifest", &calls, &[], Duration::from_secs(45));
        assert_eq!(ran.code, Some(0), "round {round}: {}", ran.describe());
        assert!(ran.report()["reward"].is_number(), "{}", ran.describe());
    }
}

/// `:diff` (the change list, as `/diff` serves it) read again and again while the directory
/// and the link swap: nothing is frozen for it, and no read may fail.
#[test]
fn a_directory_swapped_with_a_link_during_the_change_list_never_fails_the_run() {
    if !sandbox_ready() {
        return;
    }
    let tasks = Tasks::new();
    let host = host_dir();
    let mut input = String::new();
    for line in start_swapper(SWAP_DIRS_WITH_LINKS, &host.p()) {
        input.push_str(&format!("{line}\n"));
    }
    const DIFFS: usize = 300;
    input.push_str(&":diff\n".repeat(DIFFS));
    input.push_str(":quit\n");
    let ran = shell_over(&tasks, &input, Duration::from_secs(60));
    assert_eq!(ran.code, Some(0), "{}", ran.describe());
    assert_eq!(
        ran.stdout
            .lines()
            .filter(|l| l.trim().trim_end_matches(',') == "\"swap.py\"")
            .count(),
        DIFFS,
        "not every change list was read whole:\n{}",
        ran.describe()
    );
    host.assert_unchanged();
}

/// Names that are not UTF-8, two of them differing only in an invalid byte, and a literal
/// `\x41` in a name: the change list keeps them apart (as docs/cli.md's encoding says),
/// `--keep-changes` keeps every one, and the manifest verifier gives a reward.
#[test]
fn names_that_are_not_utf8_are_listed_kept_and_scored() {
    if !sandbox_ready() {
        return;
    }
    let tasks = Tasks::new();
    let script = r#"
import os
for name, text in ((b"bad\xfe", b"one"), (b"bad\xff", b"two"), (b"lit\\x41", b"three")):
    with open(name, "wb") as f:
        f.write(text)
print("MADE")
"#;
    let calls = [
        call("write", json!({"path": "mk.py", "content": script})),
        call("exec", json!({"command": "python3 mk.py"})),
    ];
    let out = tempfile::tempdir().unwrap();
    let keep = out.path().join("kept");
    let ran = run_task(
        &tasks,
        "hc/manifest",
        &calls,
        &["--keep", keep.to_str().unwrap()],
        Duration::from_secs(60),
    );
    assert_eq!(ran.code, Some(0), "{}", ran.describe());
    let report = ran.report();
    assert!(ran.stdout.contains("MADE"), "{}", ran.describe());
    let added: Vec<&str> = report["changes"]["added"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for name in ["bad\\xfe", "bad\\xff", "lit\\\\x41"] {
        assert!(added.contains(&name), "{name} not listed in {added:?}");
    }
    assert_eq!(report["reward"], json!(1.0), "{report}");
    assert!(report["verifier_error"].is_null(), "{report}");
    let files = keep.join("files");
    for (name, text) in [
        (&b"bad\xfe"[..], "one"),
        (b"bad\xff", "two"),
        (b"lit\\x41", "three"),
    ] {
        let path = files.join(std::ffi::OsStr::from_bytes(name));
        assert_eq!(
            fs::read_to_string(&path).ok().as_deref(),
            Some(text),
            "{} not kept",
            path.display()
        );
    }
}

/// The freeze around a fork is undone: the parent's background command runs on afterwards
/// (a missed thaw would leave the agent's processes stopped for the rest of the episode).
#[test]
fn the_parents_background_commands_run_again_after_a_fork() {
    if !sandbox_ready() {
        return;
    }
    let tasks = Tasks::new();
    let counter = "i=0; while :; do i=$((i+1)); echo $i > count.tmp && mv count.tmp count; done";
    let check = "a=$(cat count); for i in $(seq 400); do b=$(cat count); \
                 [ \"$a\" != \"$b\" ] && echo RUNNING && exit 0; sleep 0.01; done; echo STOPPED";
    let lines = [
        call("exec", json!({"command": counter, "background": true})),
        call(
            "exec",
            json!({"command": "for i in $(seq 400); do [ -e count ] && exit 0; sleep 0.01; done"}),
        ),
    ];
    let mut input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    input.push_str(":fork\n:use 0\n");
    input.push_str(&format!(
        "{}\n:quit\n",
        call("exec", json!({"command": check}))
    ));
    let ran = shell_over(&tasks, &input, Duration::from_secs(60));
    assert_eq!(ran.code, Some(0), "{}", ran.describe());
    assert!(
        ran.stdout.contains("RUNNING") && !ran.stdout.contains("STOPPED"),
        "the background command did not run again after the fork:\n{}",
        ran.describe()
    );
}

/// The freeze around a fork stops a tree that keeps forking: the init signals what its
/// namespace's `/proc` lists, round after round, and a child forked as the signals went out is
/// caught by the next round (envcraft warns when not every process stopped in time). The
/// counter's `mv` is started by `vfork` (dash's way): its parent, waiting for a child stopped
/// before its exec, cannot stop, and once made every such freeze wait its full 2 s.
#[test]
fn a_fork_freezes_a_tree_that_keeps_forking() {
    if !sandbox_ready() {
        return;
    }
    let tasks = Tasks::new();
    let storm = "while :; do ( sh -c 'exit 0' & ) ; sh -c 'exit 0' & wait; done";
    let counter = "i=0; while :; do i=$((i+1)); echo $i > count.tmp && mv count.tmp count; done";
    let lines = [
        call("exec", json!({"command": storm, "background": true})),
        call("exec", json!({"command": counter, "background": true})),
        call(
            "exec",
            json!({"command": "for i in $(seq 400); do [ -e count ] && exit 0; sleep 0.01; done"}),
        ),
    ];
    let mut input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    // Each fork from the first session, the one whose processes run.
    input.push_str(":fork\n:use 0\n:fork\n:use 0\n:fork\n:quit\n");
    let ran = shell_over(&tasks, &input, Duration::from_secs(60));
    assert_eq!(ran.code, Some(0), "{}", ran.describe());
    assert!(
        !ran.stderr
            .contains("not every process of the sandbox stopped"),
        "a fork went ahead with processes running:\n{}",
        ran.describe()
    );
}
