//! What the session-level escape suites share (`escape_races`, `escape_special_files`): a task
//! set built on the fly, `envcraft run`/`shell`/`exec` through `contained` as root or as
//! `nobody`, the agent's swap loops, and the host-side checks. No helper waits without a bound.

#![allow(dead_code)]

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{self, HostDir, RunAs};

const NOBODY: u32 = 65534;

/// The swap loop of the agent: `d` (a directory of setuid files) exchanged with `l` (a symlink
/// to the host directory given as argv[1]) as fast as the kernel allows. It creates `started`
/// once it has swapped a thousand times.
pub const SWAP_DIR_WITH_LINK: &str = r#"
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

/// Waits (bounded) inside the sandbox for the swap loop to have started.
pub const WAIT_STARTED: &str = "for i in $(seq 400); do [ -e started ] && exit 0; sleep 0.025; done; echo never started; exit 1";

/// How many sessions each race test runs (each is one walk over a tree moving thousands of
/// times per second).
pub const ROUNDS: usize = 3;

/// A task set of one environment, `sf`, under a temp dir: `files/keep.txt`, and the tasks the
/// test adds.
pub struct Tasks {
    dir: tempfile::TempDir,
}

impl Tasks {
    /// An environment with the bundled `default` policy, or `policy` (a policy file's text).
    pub fn new(policy: Option<&str>) -> Tasks {
        let dir = tempfile::Builder::new()
            .prefix("ectest-tasks-")
            .tempdir()
            .unwrap();
        let env = dir.path().join("sf");
        fs::create_dir_all(env.join("files")).unwrap();
        fs::write(env.join("files/keep.txt"), "kept\n").unwrap();
        fs::write(env.join("docs.md"), "# sf\n\nA workspace to attack.\n").unwrap();
        let policy_name = match policy {
            Some(text) => {
                fs::write(env.join("policy.toml"), text).unwrap();
                "policy.toml"
            }
            None => "default",
        };
        fs::write(
            env.join("env.toml"),
            format!(
                "name = \"sf\"\ndescription = \"special files and races\"\npolicy = \"{policy_name}\"\n\
                 tools = [\"read\", \"write\", \"ls\", \"exec\", \"process\"]\n\
                 base_time = \"2026-03-02T09:00:00Z\"\ntime_step_secs = 60\n"
            ),
        )
        .unwrap();
        let tasks = Tasks { dir };
        tasks.manifest("manifest", &json!({}));
        tasks
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    fn task(&self, name: &str, verifier: &str) -> PathBuf {
        let t = self.path().join("sf/tasks").join(name);
        fs::create_dir_all(&t).unwrap();
        fs::write(
            t.join("task.toml"),
            format!("prompt = \"attack\"\n\n[verifier]\n{verifier}\n"),
        )
        .unwrap();
        common::make_world_readable(self.path());
        t
    }

    /// Task `name` verified by the manifest `files` (path -> {"sha256": ...}), extra allowed.
    pub fn manifest(&self, name: &str, files: &Value) {
        let t = self.task(name, "kind = \"manifest\"\nextra = \"allow\"");
        fs::write(
            t.join("expected.json"),
            json!({"version": 1, "files": files, "absent": [], "unchanged": [],
                   "ignore": [], "extra": "allow", "all_or_nothing": false})
            .to_string(),
        )
        .unwrap();
        common::make_world_readable(self.path());
    }

    /// Task `name` verified by the grader `command`, with `grader` files under `grader/`.
    pub fn graded(&self, name: &str, command: &str, grader: &[(&str, &str)]) {
        let command = toml::Value::String(command.to_string());
        let t = self.task(
            name,
            &format!("kind = \"command\"\ncommand = {command}\ntimeout_secs = 30"),
        );
        fs::create_dir_all(t.join("grader")).unwrap();
        for (file, text) in grader {
            fs::write(t.join("grader").join(file), text).unwrap();
        }
        common::make_world_readable(self.path());
    }
}

/// What one `envcraft` run gave.
pub struct Ran {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub wall: Duration,
}

impl Ran {
    pub fn describe(&self) -> String {
        format!(
            "exit {:?} after {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.code,
            self.wall,
            self.stdout.chars().take(4000).collect::<String>(),
            self.stderr.chars().take(4000).collect::<String>()
        )
    }

    pub fn report(&self) -> Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("not a JSON report ({e}):\n{}", self.describe()))
    }

    /// The results of the report's tool calls, in order.
    pub fn results(&self) -> Vec<Value> {
        self.report()["actions"]
            .as_array()
            .map(|a| a.iter().map(|c| c["result"].clone()).collect())
            .unwrap_or_default()
    }
}

/// A directory `who` owns (state dirs, homes, outputs of a run as nobody).
pub fn dir_for(who: RunAs) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("ectest-own-")
        .tempdir_in("/tmp")
        .unwrap();
    if who == RunAs::Nobody {
        std::os::unix::fs::chown(dir.path(), Some(NOBODY), Some(NOBODY)).unwrap();
    }
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// `bash contained [setpriv as nobody] envcraft ARGS` with `stdin`, killed (its whole session)
/// after `deadline`.
pub fn envcraft(args: &[&str], stdin: &str, who: RunAs, deadline: Duration) -> Ran {
    let state = dir_for(who);
    let home = dir_for(who);
    let mut command = Command::new("bash");
    command.arg(common::contained().unwrap());
    if who == RunAs::Nobody {
        command.args([
            "/usr/bin/setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--",
        ]);
        command.env("USER", "nobody").env("LOGNAME", "nobody");
    }
    command
        .arg(common::envcraft())
        .args(args)
        .env("ENVCRAFT_STATE_DIR", state.path())
        .env("HOME", home.path())
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
    let left: Vec<_> = fs::read_dir(state.path().join("sessions"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(
        code.is_none() || left.is_empty(),
        "a session directory was left behind: {left:?}"
    );
    Ran {
        code,
        stdout,
        stderr,
        wall: started.elapsed(),
    }
}

pub fn call(tool: &str, args: Value) -> Value {
    json!({"tool": tool, "args": args})
}

pub fn exec(command: &str) -> Value {
    call("exec", json!({"command": command}))
}

/// The calls that start a swap loop in the background and wait until it runs.
pub fn start_swapper(script: &str, arg: &str) -> Vec<Value> {
    vec![
        call("write", json!({"path": "swap.py", "content": script})),
        call(
            "exec",
            json!({"command": format!("python3 swap.py {arg}"), "background": true}),
        ),
        exec(WAIT_STARTED),
    ]
}

/// `envcraft run sf/TASK --json --actions ... EXTRA` over `tasks`, as `who`.
pub fn run_task(
    tasks: &Tasks,
    task: &str,
    calls: &[Value],
    extra: &[&str],
    who: RunAs,
    deadline: Duration,
) -> Ran {
    let dir = dir_for(who);
    let traj = dir.path().join("traj.jsonl");
    let text: String = calls.iter().map(|c| format!("{c}\n")).collect();
    fs::write(&traj, text).unwrap();
    fs::set_permissions(&traj, fs::Permissions::from_mode(0o644)).unwrap();
    let task = format!("sf/{task}");
    let mut args = vec![
        "run",
        task.as_str(),
        "--workspaces",
        tasks.path().to_str().unwrap(),
        "--json",
        "--actions",
        traj.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    envcraft(&args, "", who, deadline)
}

/// `envcraft shell sf/manifest` fed `input` (tool calls and `:fork`, `:use N`, `:quit`).
pub fn shell(tasks: &Tasks, input: &str, who: RunAs, deadline: Duration) -> Ran {
    let workspaces = tasks.path().to_str().unwrap();
    envcraft(
        &["shell", "sf/manifest", "--workspaces", workspaces],
        input,
        who,
        deadline,
    )
}

/// Every setuid or setgid file below `root` (not following links).
pub fn setid_files(root: &Path) -> Vec<PathBuf> {
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
pub fn host_dir() -> HostDir {
    HostDir::build(|root| {
        fs::write(root.join("root-only.txt"), "ROOT-ONLY-SECRET\n").unwrap();
        fs::set_permissions(
            root.join("root-only.txt"),
            fs::Permissions::from_mode(0o600),
        )
        .unwrap();
    })
}

pub fn assert_host_clean(host: &HostDir, ran: &Ran) {
    let planted = setid_files(host.path());
    assert!(
        planted.is_empty(),
        "setuid files were planted in the host directory: {planted:?}\n{}",
        ran.describe()
    );
    host.assert_unchanged();
}

/// The hex SHA-256 of `bytes` (through `sha256sum`, so the test does not trust envcraft's).
pub fn sha256(bytes: &[u8]) -> String {
    let mut child = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// Whether attacks can run as `who`.
pub fn ready(who: RunAs) -> bool {
    match who {
        RunAs::Caller => common::sandbox_ready(),
        RunAs::Nobody => common::nobody_ready(),
    }
}
