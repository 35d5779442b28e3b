//! Special files, odd trees and grader shadowing met by the host side of a session: FIFOs and
//! sockets met by the manifest verifier and a fork, hard links met by `--keep-changes`, deep
//! trees with long names and non-UTF-8 names met by the verifier and a fork; a tmpfs or the
//! workspace filled past the memory limit (the OOM killer must take the command, not the
//! session); and the files an agent leaves to take over a Python grader (`sitecustomize`,
//! `usercustomize`, `.pth`, startup files, a `json.py`/`os.py`/script of the grader's name in
//! the working directory, a `python3` of its own on a path). Every run goes through
//! `contained`, as root and, where the host side differs, as `nobody`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod escape_support;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use serde_json::{Value, json};

use common::{Exec, RunAs, Template};
use escape_support::*;

// ---------------------------------------------------------------------------
// Memory: a tmpfs or the workspace filled past the memory limit.

/// The default policy with a 96 MiB memory limit under tmpfs sizes four times that: writing
/// 200 MiB to either reaches the memory limit first.
fn small_memory_policy() -> String {
    let text = fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/policies/default.toml"
    ))
    .unwrap();
    text.replace("memory = \"2GiB\"", "memory = \"96MiB\"")
        .replace("tmp_size = \"256MiB\"", "tmp_size = \"400MiB\"")
        .replace("workspace_size = \"1GiB\"", "workspace_size = \"400MiB\"")
}

/// Whether a memory cgroup backs the limit (root with the memory controller); else skip.
fn memory_cgroup_ready() -> bool {
    if !ready(RunAs::Caller) {
        return false;
    }
    if !std::path::Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists()
        && !fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
            .map(|c| c.contains("memory"))
            .unwrap_or(false)
    {
        common::skip("no memory cgroup controller: the OOM killer is not the limit here");
        return false;
    }
    true
}

/// `fill` (a command that writes past the memory limit, its own process the writer) in a
/// session, then the file tools and more commands: each answer must be the tool's own (the
/// session lost to an OOM-killed init answered every later exec with an internal error), and
/// the filling command is reported as the OOM killer's.
fn fill_then_work(fill: &str, free: Value) -> Vec<Value> {
    let calls = [
        exec("echo ready"),
        exec(fill),
        call(
            "write",
            json!({"path": "after.txt", "content": "still here\n"}),
        ),
        call("read", json!({"path": "after.txt"})),
        free,
        exec("echo alive; cat after.txt"),
    ];
    let (ran, results) = run_small_memory(&calls);
    assert_eq!(results[1]["signal"], json!(9), "{}", results[1]);
    assert_eq!(results[1]["killed_by"], json!("oom"), "{}", results[1]);
    assert_eq!(results[3]["content"], json!("still here\n"));
    assert!(ran.report()["reward"].is_number(), "{}", ran.describe());
    results
}

/// `calls` in one session under [`small_memory_policy`]: the run, and its results, each of
/// which must be a tool's own answer (`ok`), one per call.
fn run_small_memory(calls: &[Value]) -> (Ran, Vec<Value>) {
    let tasks = Tasks::new(Some(&small_memory_policy()));
    let ran = run_task(
        &tasks,
        "manifest",
        calls,
        &[],
        RunAs::Caller,
        Duration::from_secs(90),
    );
    assert_eq!(ran.code, Some(0), "{}", ran.describe());
    let results = ran.results();
    assert_eq!(results.len(), calls.len(), "{}", ran.describe());
    for (i, r) in results.iter().enumerate() {
        assert_eq!(
            r["ok"],
            json!(true),
            "call {i} failed: {r}\n{}",
            ran.describe()
        );
    }
    (ran, results)
}

#[test]
fn a_tmpfs_filled_past_the_memory_limit_kills_the_command_not_the_session() {
    let _heavy = common::heavy_test_lock();
    if !memory_cgroup_ready() {
        return;
    }
    // /tmp's pages belong to no process: the OOM killer used to pick the process with the most
    // resident memory, the sandbox's init, and every later call failed.
    let results = fill_then_work(
        "exec head -c 200M /dev/zero > /tmp/fill",
        call("ls", json!({"path": "."})),
    );
    // /tmp is still full: the last command is answered (run, or killed as the OOM killer's).
    let last = &results[5];
    assert!(
        last["exit_code"] == json!(0) || last["killed_by"] == json!("oom"),
        "{last}"
    );
}

#[test]
fn the_init_keeps_room_of_its_own_for_every_command_after_a_tmpfs_is_filled() {
    let _heavy = common::heavy_test_lock();
    if !memory_cgroup_ready() {
        return;
    }
    // The pages of /tmp stay charged after the writer dies; with one cgroup for the init and
    // its commands, each later command's clone could take the init with it (about one run in
    // 30). Ten in a row, each answered, and the session's init alive to the end.
    let mut calls = vec![
        exec("grep -E ':memory:' /proc/self/cgroup || echo no memory line"),
        exec("exec head -c 200M /dev/zero > /tmp/fill"),
    ];
    calls.extend((0..10).map(|i| exec(&format!("echo {i}"))));
    let (_, results) = run_small_memory(&calls);
    // Each command is answered: it ran, was the OOM killer's, or could not be executed for
    // want of memory (`execve` then fails: E2BIG, the kernel's word for arguments it could not
    // copy). What must not happen is the init's death: every later call would fail.
    for (i, r) in results.iter().enumerate() {
        assert!(
            r["exit_code"].is_i64() || r["killed_by"] == json!("oom"),
            "call {i}: {r}"
        );
    }
    assert_eq!(results[1]["killed_by"], json!("oom"), "{}", results[1]);
    // On cgroup v1 the commands run in the run's memory cgroup, which the init does not join.
    let cgroup = results[0]["stdout"].as_str().unwrap_or("");
    if fs::metadata("/sys/fs/cgroup/memory/memory.limit_in_bytes").is_ok() {
        let run = cgroup.trim_end().rsplit('/').next().unwrap_or("");
        assert!(
            cgroup.contains("/envcraft/") && run.starts_with("envcraft-"),
            "the command's memory cgroup is the run's: {cgroup}"
        );
    }
}

#[test]
fn a_workspace_filled_past_the_memory_limit_kills_the_command_and_the_session_recovers() {
    let _heavy = common::heavy_test_lock();
    if !memory_cgroup_ready() {
        return;
    }
    let results = fill_then_work(
        "exec head -c 200M /dev/zero > fill.bin",
        // The agent frees the memory with a file tool; the workspace then runs commands again.
        call("write", json!({"path": "fill.bin", "content": ""})),
    );
    assert_eq!(results[5]["exit_code"], json!(0), "{}", results[5]);
    assert_eq!(results[5]["stdout"], json!("alive\nstill here\n"));
}

/// HOME, `/tmp` and `/dev/shm` are directories of one scratch tmpfs (one filesystem a
/// sandbox, not three: see `mounts::scratch_bytes`), each bound at its place. From one of them
/// no name leads into another: a hard link or a rename between them fails (EXDEV: they are
/// different mounts), `..` of each is the sandbox's own root, and the mount table names each
/// by its own directory only. Their room is shared and bounded: `/tmp` filled ends in ENOSPC
/// at the three rooms' total (8 MiB each here), with the workspace, on its own tmpfs, still
/// writable and the root still read-only.
#[test]
fn the_private_directories_share_a_filesystem_but_no_path_leads_from_one_to_another() {
    if !ready(RunAs::Caller) {
        return;
    }
    let policy = fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/policies/default.toml"
    ))
    .unwrap()
    .replace("tmp_size = \"256MiB\"", "tmp_size = \"8MiB\"");
    let tasks = Tasks::new(Some(&policy));
    let probe = r#"
import errno, os
open('/root/secret', 'w').write('home')
open('/dev/shm/secret', 'w').write('shm')
for name, act in [
    ('LINK_HOME_TO_TMP', lambda: os.link('/root/secret', '/tmp/l')),
    ('RENAME_SHM_TO_TMP', lambda: os.rename('/dev/shm/secret', '/tmp/r')),
    ('LINK_TMP_TO_WORKSPACE', lambda: os.link('/dev/shm/secret', 'l')),
]:
    try:
        act(); print(name, 'OK')
    except OSError as e:
        print(name, 'FAILED', errno.errorcode[e.errno])
root = os.stat('/')
for d in ['/tmp', '/root', '/dev/shm']:
    up = os.stat(d + '/..')
    print(d, 'PARENT', 'ROOT' if d != '/dev/shm' and (up.st_dev, up.st_ino) == (root.st_dev, root.st_ino) else 'DEV' if d == '/dev/shm' and os.path.samestat(up, os.stat('/dev')) else 'ELSEWHERE')
print('MOUNTS', sorted(l.split()[3] for l in open('/proc/self/mountinfo') if l.split()[4] in ('/tmp', '/root', '/dev/shm', '/dev', '/')))
"#;
    let fill = "dd if=/dev/zero of=/tmp/fill bs=1M count=64 2>&1 | head -1; \
                echo FILLED $(($(wc -c < /tmp/fill) / 1048576)); \
                echo after > after.txt && echo WORKSPACE OK; \
                touch /x 2>/dev/null && echo ROOT WRITABLE || echo ROOT READ-ONLY";
    let calls = [
        exec(&format!("exec python3 -c {}", shell_quote(probe))),
        exec(fill),
    ];
    let ran = run_task(
        &tasks,
        "manifest",
        &calls,
        &[],
        RunAs::Caller,
        Duration::from_secs(60),
    );
    let results = ran.results();
    assert_eq!(results.len(), 2, "{}", ran.describe());
    let probed = results[0]["stdout"].as_str().unwrap_or("");
    for name in [
        "LINK_HOME_TO_TMP",
        "RENAME_SHM_TO_TMP",
        "LINK_TMP_TO_WORKSPACE",
    ] {
        assert!(
            probed.contains(&format!("{name} FAILED EXDEV")),
            "{name}: {}",
            results[0]
        );
    }
    for dir in [
        "/tmp PARENT ROOT",
        "/root PARENT ROOT",
        "/dev/shm PARENT DEV",
    ] {
        assert!(probed.contains(dir), "{dir}: {}", results[0]);
    }
    assert!(
        probed.contains("MOUNTS ['/rw/area!', '/rw/area!dev', '/rw/area!dev!shm', '/rw/area!root', '/rw/area!tmp']"),
        "each bound from its own directory: {}",
        results[0]
    );
    let filled = results[1]["stdout"].as_str().unwrap_or("");
    let mib: u64 = filled
        .lines()
        .find_map(|l| l.strip_prefix("FILLED "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(u64::MAX);
    // Three rooms of 8 MiB, the scratch's own 1 MiB and /dev's 64 KiB, less what is in use.
    assert!(
        (20..=26).contains(&mib),
        "{mib} MiB in /tmp: {}",
        results[1]
    );
    assert!(filled.contains("No space left"), "{}", results[1]);
    assert!(filled.contains("WORKSPACE OK"), "{}", results[1]);
    assert!(filled.contains("ROOT READ-ONLY"), "{}", results[1]);
}

// ---------------------------------------------------------------------------
// FIFOs, sockets, hard links.

fn fifo_met_by_the_verifier(who: RunAs) {
    if !ready(who) {
        return;
    }
    let tasks = Tasks::new(None);
    tasks.manifest(
        "fifo",
        &json!({"p": {"sha256": sha256(b"x\n")}, "sub/p": {"sha256": sha256(b"x\n")}}),
    );
    // A writer keeps the FIFO open in the background: an open for reading would not even
    // fail, it would read whatever the agent feeds it.
    let calls = [
        exec("mkdir sub && mkfifo p sub/p && echo made"),
        call(
            "exec",
            json!({"command": "while :; do echo x > p; done", "background": true}),
        ),
    ];
    let ran = run_task(&tasks, "fifo", &calls, &[], who, Duration::from_secs(45));
    assert_eq!(ran.code, Some(0), "{}", ran.describe());
    let report = ran.report();
    for check in report["checks"].as_array().unwrap() {
        assert_eq!(
            check["passed"],
            json!(false),
            "a FIFO was hashed as a file: {check}"
        );
    }
    assert_eq!(report["reward"], json!(0.0), "{report}");
}

#[test]
fn a_fifo_where_the_manifest_expects_a_file_never_hangs_or_feeds_the_verifier() {
    fifo_met_by_the_verifier(RunAs::Caller);
}

#[test]
fn a_fifo_where_the_manifest_expects_a_file_never_hangs_the_verifier_as_nobody() {
    fifo_met_by_the_verifier(RunAs::Nobody);
}

#[test]
fn a_unix_socket_in_the_workspace_never_hangs_the_verifier_or_a_fork() {
    if !ready(RunAs::Caller) {
        return;
    }
    let tasks = Tasks::new(None);
    tasks.manifest("manifest", &json!({"sock": {"sha256": sha256(b"")}}));
    let listen = "import socket, time\ns = socket.socket(socket.AF_UNIX)\ns.bind('sock')\n\
                  s.listen(1)\nopen('bound', 'w').close()\ntime.sleep(600)\n";
    let mut input = String::new();
    for line in [
        call("write", json!({"path": "listen.py", "content": listen})),
        call(
            "exec",
            json!({"command": "python3 listen.py", "background": true}),
        ),
        exec("for i in $(seq 400); do [ -e bound ] && exit 0; sleep 0.025; done; exit 1"),
    ] {
        input.push_str(&format!("{line}\n"));
    }
    input.push_str(":fork\n");
    input.push_str(&format!("{}\n", exec("ls -la sock; echo FORKED")));
    input.push_str(":use 0\n:quit\n");
    let ran = shell(&tasks, &input, RunAs::Caller, Duration::from_secs(60));
    assert_eq!(ran.code, Some(0), "{}", ran.describe());
    assert!(ran.stdout.contains("FORKED"), "{}", ran.describe());
    // The verifier, with the listener still running, where the manifest expects a file.
    let calls: Vec<Value> = input
        .lines()
        .take(3)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ran = run_task(
        &tasks,
        "manifest",
        &calls,
        &[],
        RunAs::Caller,
        Duration::from_secs(45),
    );
    assert_eq!(ran.code, Some(0), "{}", ran.describe());
    let report = ran.report();
    assert_eq!(
        report["checks"][0]["passed"],
        json!(false),
        "the socket passed as a file: {report}"
    );
    assert_eq!(report["reward"], json!(0.0), "{report}");
}

fn hard_link_kept(who: RunAs) {
    if !ready(who) {
        return;
    }
    let template = Template::for_user(who);
    let out = dir_for(who);
    let keep = out.path().join("kept");
    let outcome = Exec::new(template.path())
        .run_as(who)
        .args(&["--keep-changes", keep.to_str().unwrap()])
        .run(&[
            "sh",
            "-c",
            "ln README.txt hl && echo appended >> hl && ln sub/data.csv sub/hl2 && \
             ln hl hl3 && echo LINKED",
        ]);
    assert!(outcome.stdout.contains("LINKED"), "{}", outcome.describe());
    template.assert_unchanged();
    let template_inodes: Vec<(u64, u64)> = walkdir::WalkDir::new(template.path())
        .into_iter()
        .flatten()
        .filter_map(|e| e.metadata().ok().map(|m| (m.dev(), m.ino())))
        .collect();
    let files = keep.join("files");
    for name in ["hl", "hl3", "README.txt"] {
        let meta = fs::symlink_metadata(files.join(name)).unwrap();
        assert!(
            !template_inodes.contains(&(meta.dev(), meta.ino())),
            "{name} was kept as a link into the template"
        );
        let text = fs::read_to_string(files.join(name)).unwrap();
        assert!(text.ends_with("appended\n"), "{name}: {text:?}");
    }
}

#[test]
fn a_hard_link_made_in_the_workspace_is_never_kept_as_a_link_into_the_template() {
    hard_link_kept(RunAs::Caller);
}

#[test]
fn a_hard_link_made_in_the_workspace_is_never_kept_as_a_link_into_the_template_as_nobody() {
    hard_link_kept(RunAs::Nobody);
}

// ---------------------------------------------------------------------------
// Deep trees, long names, names that are not UTF-8.

#[test]
fn a_deep_tree_of_long_names_does_not_break_the_verifier_or_a_fork() {
    if !ready(RunAs::Caller) {
        return;
    }
    let tasks = Tasks::new(None);
    // 120 levels of 200-byte names: 24 KB of path, six times PATH_MAX, and 255-byte leaves.
    let make = r#"
import os
name = "n" * 200
os.makedirs("deep", exist_ok=True)
fd = os.open("deep", os.O_RDONLY)
for level in range(120):
    os.mkdir(name, dir_fd=fd)
    nfd = os.open(name, os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = nfd
for i in range(20):
    leaf = os.open(("f%02d" % i) + "x" * 252, os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(leaf, b"deep\n")
    os.close(leaf)
print("MADE")
"#;
    let mut input = String::new();
    for line in [
        call("write", json!({"path": "mk.py", "content": make})),
        exec("python3 mk.py"),
    ] {
        input.push_str(&format!("{line}\n"));
    }
    // os.fwalk walks by descriptors: a path below `deep` is far longer than PATH_MAX.
    input.push_str(":fork\n");
    input.push_str(&format!(
        "{}\n",
        exec("python3 -c \"import os; print('LEAVES', sum(len(f) for _, _, f, _ in os.fwalk('deep')))\"")
    ));
    input.push_str(":use 0\n:diff\n:quit\n");
    let ran = shell(&tasks, &input, RunAs::Caller, Duration::from_secs(90));
    assert_eq!(ran.code, Some(0), "{}", ran.describe());
    assert!(ran.stdout.contains("MADE"), "{}", ran.describe());
    assert!(
        ran.stdout.contains("LEAVES 20"),
        "the fork did not get the whole tree:\n{}",
        ran.describe()
    );
    assert!(
        ran.stdout.contains("\"added\""),
        "no change list:\n{}",
        ran.describe()
    );
    verified_whole(&tasks, &input);
}

/// The first two lines of `input` (tool calls) replayed with `envcraft run`: the manifest
/// verifier walks what they made and scores it, without an error.
fn verified_whole(tasks: &Tasks, input: &str) {
    let calls: Vec<Value> = input
        .lines()
        .take(2)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ran = run_task(
        tasks,
        "manifest",
        &calls,
        &[],
        RunAs::Caller,
        Duration::from_secs(90),
    );
    assert_eq!(ran.code, Some(0), "{}", ran.describe());
    let report = ran.report();
    assert!(report["verifier_error"].is_null(), "{report}");
    assert_eq!(report["reward"], json!(1.0), "{report}");
}

#[test]
fn names_that_are_not_utf8_survive_a_fork_and_the_verifier() {
    if !ready(RunAs::Caller) {
        return;
    }
    let tasks = Tasks::new(None);
    let make = "import os\nfor n, t in ((b'bad\\xfe', b'one'), (b'bad\\xff', b'two'), \
                (b'dir\\x80/in\\xc3', b'three')):\n    os.makedirs(os.path.dirname(n) or b'.', \
                exist_ok=True)\n    open(n, 'wb').write(t)\nprint('MADE')\n";
    let look = "python3 -c \"import os; print('SEEN', sorted(open(n, 'rb').read() for n in \
                (b'bad\\xfe', b'bad\\xff', b'dir\\x80/in\\xc3')))\"";
    let mut input = String::new();
    for line in [
        call("write", json!({"path": "mk.py", "content": make})),
        exec("python3 mk.py"),
    ] {
        input.push_str(&format!("{line}\n"));
    }
    input.push_str(&format!(":fork\n{}\n:use 0\n:quit\n", exec(look)));
    let ran = shell(&tasks, &input, RunAs::Caller, Duration::from_secs(60));
    assert_eq!(ran.code, Some(0), "{}", ran.describe());
    assert!(ran.stdout.contains("MADE"), "{}", ran.describe());
    assert!(
        ran.stdout.contains("SEEN [b'one', b'three', b'two']"),
        "the fork lost or merged names:\n{}",
        ran.describe()
    );
    verified_whole(&tasks, &input);
}

// ---------------------------------------------------------------------------
// Grader shadowing.

/// A perfect score printed by whatever the agent manages to run inside the grader.
const FORGED: &str = "import sys\nprint(1.0)\nsys.stdout.flush()\nimport os\nos._exit(0)\n";
/// The grader's score line: 1.0 only when the agent wrote `out.txt` as asked.
const SCORE: &str = "import json, os\nok = os.path.exists('out.txt') and open('out.txt').read() == 'done'\nprint(json.dumps(1.0 if ok else 0.0))\n";

fn write(path: &str, content: &str) -> Value {
    call("write", json!({"path": path, "content": content}))
}

/// The reference (write `out.txt`) scores 1.0 under `command`; the agent's `forgery` (which
/// does not do the task) scores 0.0.
fn grader_holds(command: &str, grader: &[(&str, &str)], forgery: &[Value]) {
    if !ready(RunAs::Caller) {
        return;
    }
    let tasks = Tasks::new(None);
    tasks.graded("graded", command, grader);
    let reference = run_task(
        &tasks,
        "graded",
        &[write("out.txt", "done")],
        &[],
        RunAs::Caller,
        Duration::from_secs(60),
    );
    assert_eq!(reference.code, Some(0), "{}", reference.describe());
    assert_eq!(
        reference.report()["reward"],
        json!(1.0),
        "{}",
        reference.describe()
    );
    let forged = run_task(
        &tasks,
        "graded",
        forgery,
        &[],
        RunAs::Caller,
        Duration::from_secs(60),
    );
    assert_eq!(forged.code, Some(0), "{}", forged.describe());
    let report = forged.report();
    assert_eq!(
        report["reward"],
        json!(0.0),
        "the agent chose its reward: {report}"
    );
}

/// The `python3 -c` score line (the ClawGym shape), run in the workspace.
fn python_c() -> String {
    format!("python3 -c {}", shell_quote(SCORE))
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

#[test]
fn a_sitecustomize_or_usercustomize_the_agent_leaves_never_runs_in_the_grader() {
    // Python imports `sitecustomize` and `usercustomize` from any directory on its path at
    // start-up: from the working directory or PYTHONPATH (the workspace, had it been put
    // there) and from the user site directory (under HOME; `~/.local` in the workspace had
    // HOME pointed there, and PYTHONNOUSERSITE not been set).
    let site = ".local/lib/python3/site-packages";
    let mut forgery = vec![
        write("sitecustomize.py", FORGED),
        write("usercustomize.py", FORGED),
    ];
    for minor in 8..=14 {
        let dir = format!(".local/lib/python3.{minor}/site-packages");
        forgery.push(write(&format!("{dir}/usercustomize.py"), FORGED));
        forgery.push(write(&format!("{dir}/sitecustomize.py"), FORGED));
    }
    forgery.push(write(&format!("{site}/usercustomize.py"), FORGED));
    grader_holds(&python_c(), &[], &forgery);
}

#[test]
fn a_pth_file_the_agent_leaves_never_runs_in_the_grader() {
    // A `.pth` line starting with `import` is executed by `site` for every site directory:
    // the workspace's own `.local` user site, or the working directory had it been one.
    let pth = "import os, sys; print(1.0); sys.stdout.flush(); os._exit(0)\n";
    let mut forgery = vec![write("zz.pth", pth)];
    for minor in 8..=14 {
        let dir = format!(".local/lib/python3.{minor}/site-packages");
        forgery.push(write(&format!("{dir}/zz.pth"), pth));
    }
    grader_holds(&python_c(), &[], &forgery);
}

#[test]
fn python_startup_files_the_agent_leaves_never_run_in_a_shell_wrapped_grader() {
    // A grader run through a shell: a login or interactive shell would read the workspace's
    // profile files had HOME been the workspace, and they could export PYTHONSTARTUP (read by
    // an interactive interpreter), PYTHONPATH or a PATH of the agent's.
    let profile = "export PYTHONSTARTUP=$PWD/startup.py PYTHONPATH=$PWD PATH=$PWD/bin:$PATH\n";
    let forgery = [
        write(".profile", profile),
        write(".bashrc", profile),
        write(".bash_profile", profile),
        write(".pythonrc.py", FORGED),
        write("startup.py", FORGED),
        write("json.py", FORGED),
        write("bin/python3", "#!/bin/sh\necho 1.0\n"),
        exec("chmod +x bin/python3"),
    ];
    let command = format!("bash -c {}", shell_quote(&python_c()));
    grader_holds(&command, &[], &forgery);
}

#[test]
fn a_json_or_os_module_the_agent_leaves_never_shadows_a_python_m_grader() {
    // `python3 -m check` puts the working directory (the workspace) first on the module path
    // unless PYTHONSAFEPATH is set: the agent's `check.py` would run instead of the grader's,
    // and its `json.py` would be what the grader's `import json` got.
    let forgery = [
        write("check.py", FORGED),
        write("json.py", FORGED),
        write("os.py", FORGED),
        write("encodings/__init__.py", FORGED),
    ];
    grader_holds("python3 -m check", &[("check.py", SCORE)], &forgery);
}

#[test]
fn a_python3_the_agent_puts_on_a_path_never_runs_as_the_grader() {
    // The grader's PATH is the policy's: no directory of the workspace, none under HOME, not
    // `.` (each of which the agent would fill with a `python3` that prints a perfect score).
    let fake = "#!/bin/sh\necho 1.0\n";
    let mut forgery = Vec::new();
    for dir in [
        "",
        "bin/",
        ".local/bin/",
        "node_modules/.bin/",
        ".venv/bin/",
        "usr/bin/",
    ] {
        forgery.push(write(&format!("{dir}python3"), fake));
        forgery.push(exec(&format!("chmod +x {dir}python3")));
    }
    grader_holds(&python_c(), &[], &forgery);
}
