//! Sessions as a user drives them: `envcraft run` replaying trajectories over the bundled
//! example environment, `envcraft tools`, and `envcraft shell`. Every run goes through
//! `contained`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use common::{Snapshot, host_pids_with_arg, sandbox_ready};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `bash contained envcraft ARGS...` from the project root, with `stdin` fed in.
fn envcraft(args: &[&str], stdin: &str, state: &Path) -> (i32, String, String) {
    let mut child = Command::new("bash")
        .arg(common::contained().unwrap())
        .arg(common::envcraft())
        .args(args)
        .current_dir(root())
        .env("ENVCRAFT_STATE_DIR", state)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Replay `calls` (one JSON object per line) in a fresh session of `task`; the report.
fn run(task: &str, calls: &[Value], extra: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let traj = dir.path().join("traj.jsonl");
    let text: String = calls.iter().map(|c| format!("{c}\n")).collect();
    fs::write(&traj, text).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut args = vec!["run", task, "--json", "--actions", traj.to_str().unwrap()];
    args.extend_from_slice(extra);
    let (code, out, err) = envcraft(&args, "", state.path());
    assert_eq!(code, 0, "envcraft run failed: {err}\n{out}");
    let sessions = state.path().join("sessions");
    let left: Vec<_> = fs::read_dir(&sessions)
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    assert!(
        left.is_empty(),
        "a session directory was left behind: {left:?}"
    );
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn files() -> Snapshot {
    Snapshot::of(&root().join("workspaces/example/files"))
}

#[test]
fn the_reference_solution_of_a_task_replays_and_changes_what_it_should() {
    if !sandbox_ready() {
        return;
    }
    let before = files();
    let empty = run("example/extract-todos", &[], &[]);
    assert_eq!(
        empty["changes"]["modified"],
        json!([]),
        "nothing was called, nothing changed"
    );
    let state = tempfile::tempdir().unwrap();
    let (code, out, err) = envcraft(
        &["run", "example/extract-todos", "--json"],
        "",
        state.path(),
    );
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(report["failed_calls"], 0, "{report}");
    assert_eq!(report["changes"]["modified"], json!(["notes/todo.md"]));
    assert!(report["enforced"]["landlock_filesystem"].as_bool().unwrap());
    assert!(
        before.diff(&files()).is_empty(),
        "the environment's files changed"
    );
}

#[test]
fn the_same_trajectory_twice_gives_the_same_files_and_transcript() {
    if !sandbox_ready() {
        return;
    }
    let calls = [
        json!({"tool": "write", "args": {"path": "out/a.txt", "content": "one"}}),
        // (Files a command writes get the kernel's time as mtime: only content is compared.)
        json!({"tool": "exec", "args": {"command": "date -u +%FT%T > out/when.txt; cat out/a.txt"}}),
        json!({"tool": "edit", "args": {"path": "out/a.txt", "old_string": "one", "new_string": "two"}}),
    ];
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let ka = a.path().join("keep");
    let kb = b.path().join("keep");
    let ra = run(
        "example/extract-todos",
        &calls,
        &["--keep", ka.to_str().unwrap()],
    );
    let rb = run(
        "example/extract-todos",
        &calls,
        &["--keep", kb.to_str().unwrap()],
    );
    assert_eq!(ra["changes"], rb["changes"]);
    assert_eq!(common::action_results(&ra), common::action_results(&rb));
    assert_eq!(
        fs::read_to_string(ka.join("transcript.jsonl")).unwrap(),
        fs::read_to_string(kb.join("transcript.jsonl")).unwrap()
    );
    assert_eq!(
        fs::read(ka.join("files/out/when.txt")).unwrap(),
        fs::read(kb.join("files/out/when.txt")).unwrap()
    );
}

#[test]
fn the_session_clock_is_base_time_plus_action_index_times_step() {
    if !sandbox_ready() {
        return;
    }
    // The example starts on Monday 2026-03-02 09:00 UTC and steps a minute per action.
    let calls = [
        json!({"tool": "exec", "args": {"command": "date -u +'%A %H:%M'"}}),
        json!({"tool": "exec", "args": {"command": "python3 -c 'import datetime; print(datetime.datetime.now(datetime.timezone.utc).strftime(\"%A %H:%M\"))'"}}),
        json!({"tool": "write", "args": {"path": "t.txt", "content": "x"}}),
        json!({"tool": "exec", "args": {"command": "stat -c %Y t.txt; echo $ENVCRAFT_NOW $SOURCE_DATE_EPOCH"}}),
    ];
    let r = common::action_results(&run("example/extract-todos", &calls, &[]));
    assert_eq!(r[0]["stdout"], "Monday 09:00\n", "{r:?}");
    assert_eq!(r[1]["stdout"], "Monday 09:01\n", "{r:?}");
    // 09:02 for the write, 09:03 for the stat.
    assert_eq!(
        r[3]["stdout"], "1772442120\n1772442180 1772442180\n",
        "{r:?}"
    );
    let moved = run(
        "example/extract-todos",
        &calls[..1],
        &["--base-time", "2030-01-01T00:00:00Z"],
    );
    assert_eq!(
        common::action_results(&moved)[0]["stdout"],
        "Tuesday 00:00\n"
    );
}

#[test]
fn paths_that_leave_the_workspace_are_refused_by_every_tool() {
    if !sandbox_ready() {
        return;
    }
    let before = files();
    let mut calls = Vec::new();
    for path in [
        "../../../etc/passwd",
        "/etc/passwd",
        "/workspace/../../etc/passwd",
        "/proc/self/root/etc/passwd",
    ] {
        calls.push(json!({"tool": "read", "args": {"path": path}}));
        calls.push(json!({"tool": "write", "args": {"path": path, "content": "x"}}));
        calls.push(json!({"tool": "edit", "args": {"path": path, "old_string": "root", "new_string": "toor"}}));
        calls.push(json!({"tool": "ls", "args": {"path": path}}));
        calls.push(json!({"tool": "grep", "args": {"pattern": "root", "path": path}}));
    }
    // A symlink planted by the agent pointing out, then used by every file tool.
    calls.push(json!({"tool": "exec", "args": {"command": "ln -s /etc out; ln -s ../../.. up"}}));
    for path in ["out/passwd", "up/etc/passwd"] {
        calls.push(json!({"tool": "read", "args": {"path": path}}));
        calls.push(json!({"tool": "write", "args": {"path": path, "content": "x"}}));
    }
    calls.push(json!({"tool": "apply_patch", "args": {"patch": "--- a/out/passwd\n+++ b/out/passwd\n@@ -1 +1 @@\n-root\n+toor\n"}}));
    let report = run("example/extract-todos", &calls, &[]);
    for (call, result) in calls.iter().zip(common::action_results(&report)) {
        if call["tool"] == "exec" {
            continue;
        }
        let category = &result["error"]["category"];
        assert!(
            category == "permission" || category == "not_found",
            "{call} was not refused: {result}"
        );
        assert!(
            !result.to_string().contains("root:x:0:0"),
            "{call} read a host file: {result}"
        );
    }
    assert!(before.diff(&files()).is_empty());
}

#[test]
fn an_intent_sequence_moves_from_turn_to_turn() {
    if !sandbox_ready() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let keep = tempfile::tempdir().unwrap();
    let kept = keep.path().join("k");
    let (code, out, err) = envcraft(
        &[
            "run",
            "example/archive-read-mail",
            "--json",
            "--keep",
            kept.to_str().unwrap(),
        ],
        "",
        state.path(),
    );
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        report["changes"]["deleted"],
        json!(["inbox/1.txt", "inbox/3.txt"])
    );
    let turns: Vec<&Value> = report["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a.get("next_turn").is_some())
        .collect();
    assert_eq!(turns.len(), 1);
    // The transcript has both prompts as user messages, and calls in OpenClaw's shape.
    let transcript = fs::read_to_string(kept.join("transcript.jsonl")).unwrap();
    let lines: Vec<Value> = transcript
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let users = lines
        .iter()
        .filter(|l| l["message"]["role"] == "user")
        .count();
    assert_eq!(users, 2);
    let call = lines
        .iter()
        .find(|l| l["message"]["role"] == "assistant")
        .unwrap();
    assert_eq!(call["message"]["content"][0]["type"], "toolCall");
    assert_eq!(call["message"]["content"][0]["name"], "ls");
}

#[test]
fn skills_run_in_the_sandbox_and_check_their_arguments() {
    if !sandbox_ready() {
        return;
    }
    let calls = [
        json!({"tool": "skill", "args": {"name": "word-count", "args": {"path": "inbox/2.txt"}}}),
        json!({"tool": "skill", "args": {"name": "word-count", "args": {}}}),
        json!({"tool": "skill", "args": {"name": "no-such-skill", "args": {}}}),
        json!({"tool": "skill", "args": {"name": "word-count", "args": {"path": "missing.txt"}}}),
    ];
    let r = common::action_results(&run("example/extract-todos", &calls, &[]));
    assert_eq!(r[0]["ok"], true, "{r:?}");
    assert!(r[0]["output"]["words"].as_u64().unwrap() > 10);
    assert_eq!(r[1]["error"]["category"], "invalid_argument", "{r:?}");
    assert_eq!(r[2]["error"]["category"], "not_found", "{r:?}");
    assert_eq!(r[3]["ok"], false, "{r:?}");
    assert!(!r[3].to_string().contains("Traceback"), "{r:?}");
}

/// The restrictions a command needs and its init does not.
const RESTRICTED_STATUS: &str = "CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\n";

#[test]
fn every_command_of_a_session_runs_without_capabilities_under_seccomp() {
    // The init applies no_new_privs, the capability drop and seccomp once; each command
    // inherits them, the first and every later one.
    if !sandbox_ready() {
        return;
    }
    let status = "grep -E '^(Cap|NoNewPrivs|Seccomp)' /proc/self/status";
    let calls = [
        json!({"tool": "exec", "args": {"command": status}}),
        json!({"tool": "exec", "args": {"command": "sleep 0.1", "background": true}}),
        json!({"tool": "exec", "args": {"command": format!("{status}; unshare -U true || echo refused")}}),
    ];
    let r = common::action_results(&run("example/extract-todos", &calls, &[]));
    assert_eq!(r[0]["stdout"], RESTRICTED_STATUS, "{r:?}");
    let last = r[2]["stdout"].as_str().unwrap();
    assert!(last.starts_with(RESTRICTED_STATUS), "{r:?}");
    assert!(last.ends_with("refused\n"), "{r:?}");
}

#[test]
fn background_commands_are_listed_polled_and_killed() {
    if !sandbox_ready() {
        return;
    }
    let calls = [
        json!({"tool": "exec", "args": {"command": "for i in 1 2 3; do echo tick $i; done; sleep 0.2; echo done", "background": true}}),
        json!({"tool": "exec", "args": {"command": "sleep 600", "background": true}}),
        json!({"tool": "exec", "args": {"command": "sleep 0.6"}}),
        json!({"tool": "process", "args": {"action": "list"}}),
    ];
    let r = common::action_results(&run("example/extract-todos", &calls, &[]));
    let first = r[0]["id"].as_u64().unwrap();
    let second = r[1]["id"].as_u64().unwrap();
    let list = r[3]["sessions"].as_array().unwrap();
    assert_eq!(list.len(), 2, "{r:?}");
    let calls2 = [
        calls[0].clone(),
        calls[1].clone(),
        calls[2].clone(),
        json!({"tool": "process", "args": {"action": "poll", "id": first}}),
        json!({"tool": "process", "args": {"action": "poll", "id": first}}),
        json!({"tool": "process", "args": {"action": "kill", "id": second}}),
        json!({"tool": "exec", "args": {"command": "sleep 0.3"}}),
        json!({"tool": "process", "args": {"action": "log", "id": second}}),
        json!({"tool": "process", "args": {"action": "poll", "id": 999}}),
    ];
    let r = common::action_results(&run("example/extract-todos", &calls2, &[]));
    assert_eq!(r[3]["stdout"], "tick 1\ntick 2\ntick 3\ndone\n", "{r:?}");
    assert_eq!(r[3]["running"], false);
    assert_eq!(r[3]["exit_code"], 0);
    assert_eq!(r[4]["stdout"], "", "a second poll returns only what is new");
    assert_eq!(r[5]["killed"], true, "{r:?}");
    assert_eq!(r[7]["running"], false, "{r:?}");
    assert_eq!(r[8]["error"]["category"], "not_found");
}

/// Closing a session kills every process of its sandbox, also those forked while the kill goes
/// out and those whose parents died (orphans, the init's children then): the init kills what
/// its namespace's `/proc` lists, round after round, until nothing is left to reap.
#[test]
fn a_closed_session_leaves_none_of_a_tree_still_forking() {
    if !sandbox_ready() {
        return;
    }
    let digits: String = common::unique_token()
        .chars()
        .filter(char::is_ascii_digit)
        .take(6)
        .collect();
    let marker = format!("sleep 1000.{}{digits}", std::process::id());
    // Under the policy's 256 processes: three sleepers every 50 ms for about a second.
    let forker =
        format!("while :; do {marker} & ( {marker} & ) ; setsid {marker} & sleep 0.05; done");
    let calls = [
        json!({"tool": "exec", "args": {"command": forker, "background": true}}),
        json!({"tool": "exec", "args": {"command": format!("{marker} & {marker} & sleep 0.5")}}),
        json!({"tool": "exec", "args": {"command": format!("pgrep -fc '{marker}'")}}),
    ];
    let r = common::action_results(&run("example/extract-todos", &calls, &[]));
    let running: u32 = r[2]["stdout"]
        .as_str()
        .unwrap_or("")
        .trim()
        .parse()
        .unwrap_or(0);
    assert!(running >= 10, "the tree did not fork: {r:?}");
    // `run` returned once the session was closed: the init has reaped every process by then.
    let left = host_pids_with_arg(&marker);
    assert!(
        left.is_empty(),
        "processes outlived their session: {left:?}"
    );
}

#[test]
fn unknown_tools_and_bad_arguments_get_structured_errors() {
    if !sandbox_ready() {
        return;
    }
    let calls = [
        json!({"tool": "teleport", "args": {}}),
        json!({"tool": "write", "args": {"content": "x"}}),
        json!({"tool": "exec", "args": {}}),
        json!({"tool": "exec", "args": {"command": "sleep 30", "timeout": 1}}),
    ];
    let r = common::action_results(&run("example/extract-todos", &calls, &[]));
    assert_eq!(r[0]["error"]["category"], "invalid_argument");
    assert_eq!(r[1]["error"]["category"], "missing_field");
    assert!(r[1]["error"]["message"].as_str().unwrap().contains("path"));
    assert_eq!(r[2]["error"]["category"], "missing_field");
    assert_eq!(r[3]["error"]["category"], "timeout");
    for (i, result) in r.iter().enumerate() {
        assert_eq!(result["action_index"], i as u64);
        assert!(
            !result.to_string().contains("/work/"),
            "a host path leaked: {result}"
        );
    }
}

#[test]
fn tools_lists_what_the_environment_offers_in_openai_format() {
    if !sandbox_ready() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let (code, out, err) = envcraft(&["tools", "example/extract-todos"], "", state.path());
    assert_eq!(code, 0, "{err}");
    let tools: Value = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "read",
            "write",
            "edit",
            "apply_patch",
            "ls",
            "glob",
            "grep",
            "exec",
            "process",
            "skill"
        ]
    );
    assert!(
        tools[9]["function"]["description"]
            .as_str()
            .unwrap()
            .contains("word-count")
    );
    assert_eq!(tools[0]["type"], "function");
    let (code, _, err) = envcraft(&["tools", "example/no-such-task"], "", state.path());
    assert_ne!(code, 0);
    assert!(err.contains("no-such-task"), "{err}");
}

#[test]
fn shell_takes_calls_and_commands_line_by_line() {
    if !sandbox_ready() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let input = "write {\"path\": \"s.txt\", \"content\": \"from the shell\"}\n:diff\nread {\"path\": \"s.txt\"}\nnot json {\n:quit\n";
    let (code, out, err) = envcraft(&["shell", "example/extract-todos"], input, state.path());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("prompt: Please go through"), "{out}");
    assert!(out.contains("\"s.txt\""), "{out}");
    assert!(out.contains("from the shell"), "{out}");
    assert!(out.contains("not JSON"), "{out}");
}

#[test]
fn a_fork_starts_from_its_parent_and_neither_sees_the_others_later_changes() {
    if !sandbox_ready() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    // Parent: write a.txt, delete inbox/2.txt (a whiteout), replace notes/ (an opaque
    // directory). Fork, then change both sides.
    let input = [
        r#"write {"path": "a.txt", "content": "parent"}"#,
        r#"exec {"command": "rm inbox/2.txt && rm -r notes && mkdir notes && echo new > notes/only.md"}"#,
        ":fork",
        r#"exec {"command": "ls inbox notes; cat a.txt; echo; echo fork > b.txt"}"#,
        ":use 0",
        r#"write {"path": "c.txt", "content": "later"}"#,
        r#"exec {"command": "ls; echo; cat b.txt"}"#,
        ":use 1",
        r#"exec {"command": "cat c.txt"}"#,
        ":quit",
    ]
    .join("\n");
    let (code, out, err) = envcraft(&["shell", "example/extract-todos"], &input, state.path());
    assert_eq!(code, 0, "{err}");
    let results: Vec<Value> = out
        .split("envcraft> ")
        .filter_map(|chunk| serde_json::from_str::<Value>(chunk.trim()).ok())
        .collect();
    assert_eq!(results.len(), 6, "{out}");
    // The fork saw the parent's state: no 2.txt, the new notes/, a.txt.
    assert_eq!(
        results[2]["stdout"], "inbox:\n1.txt\n3.txt\n\nnotes:\nonly.md\nparent\n",
        "{out}"
    );
    // The parent does not see the fork's b.txt; the fork does not see the parent's c.txt.
    assert!(
        results[4]["stderr"].as_str().unwrap().contains("b.txt"),
        "{out}"
    );
    assert!(
        !results[4]["stdout"].as_str().unwrap().contains("fork"),
        "{out}"
    );
    // (results[3] is the parent's write of c.txt.)
    assert!(
        results[5]["stderr"]
            .as_str()
            .unwrap()
            .contains("c.txt: No such file"),
        "{out}"
    );
}

#[test]
fn reference_solutions_score_one_and_an_untouched_workspace_does_not() {
    if !sandbox_ready() {
        return;
    }
    for task in ["example/extract-todos", "example/archive-read-mail"] {
        let state = tempfile::tempdir().unwrap();
        let (code, out, err) = envcraft(&["run", task, "--json"], "", state.path());
        assert_eq!(code, 0, "{err}");
        let report: Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(report["reward"], 1.0, "{task}: {report}");
        assert_eq!(report["passed"], true);
        let noop = run(task, &[json!({"tool": "ls", "args": {}})], &[]);
        assert!(noop["reward"].as_f64().unwrap() < 1.0, "{task}: {noop}");
        assert_eq!(noop["passed"], false);
        let failed: Vec<&Value> = noop["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["passed"] == false)
            .collect();
        assert!(!failed.is_empty());
    }
}

#[test]
fn record_writes_the_same_expected_json_from_the_reference_solution() {
    if !sandbox_ready() {
        return;
    }
    // A copy of the example environment, so the repository is never written.
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("example");
    let status = Command::new("cp")
        .args(["-a"])
        .arg(root().join("workspaces/example"))
        .arg(&env)
        .status()
        .unwrap();
    assert!(status.success());
    let task = env.join("tasks/archive-read-mail");
    let committed = fs::read_to_string(task.join("expected.json")).unwrap();
    fs::remove_file(task.join("expected.json")).unwrap();
    let state = tempfile::tempdir().unwrap();
    let (code, _, err) = envcraft(&["run", task.to_str().unwrap(), "--json"], "", state.path());
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = envcraft(&["record", task.to_str().unwrap()], "", state.path());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("2 file rules, 2 absent"), "{out}");
    assert_eq!(
        fs::read_to_string(task.join("expected.json")).unwrap(),
        committed
    );
    // A solution that fails records nothing.
    fs::write(
        task.join("bad.jsonl"),
        "{\"tool\": \"read\", \"args\": {\"path\": \"nope\"}}\n",
    )
    .unwrap();
    fs::remove_file(task.join("expected.json")).unwrap();
    let bad = task.join("bad.jsonl");
    let (code, _, err) = envcraft(
        &[
            "record",
            task.to_str().unwrap(),
            "--actions",
            bad.to_str().unwrap(),
        ],
        "",
        state.path(),
    );
    assert_eq!(code, 125);
    assert!(err.contains("reference solution failed"), "{err}");
    assert!(!task.join("expected.json").exists());
}

#[test]
fn manifest_prints_kind_mode_hash_and_path() {
    if !sandbox_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.txt"), "hello\n").unwrap();
    let state = tempfile::tempdir().unwrap();
    let (code, out, err) = envcraft(
        &["manifest", dir.path().to_str().unwrap()],
        "",
        state.path(),
    );
    assert_eq!(code, 0, "{err}");
    // sha256("hello\n")
    assert!(
        out.contains("5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03  a.txt"),
        "{out}"
    );
}

#[test]
fn a_session_killed_mid_call_leaves_nothing_behind() {
    if !sandbox_ready() {
        return;
    }
    // Not an attack (the command only sleeps), so envcraft runs directly: killing it inside
    // `contained` would end contained's PID namespace and prove nothing.
    let state = tempfile::tempdir().unwrap();
    let marker = format!("sleep 87.{}", std::process::id());
    let mut child = Command::new(common::envcraft())
        .args(["shell", "example/extract-todos"])
        .current_dir(root())
        .env("ENVCRAFT_STATE_DIR", state.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "exec {{\"command\": \"{marker} & {marker}\"}}").unwrap();
    // Wait (bounded) for the command to run in the sandbox.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while host_pids_with_arg(&marker).len() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the command never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let runs_before: Vec<_> = fs::read_dir(state.path()).unwrap().flatten().collect();
    assert!(
        !runs_before.is_empty(),
        "a run directory exists while the session lives"
    );
    child.kill().unwrap(); // SIGKILL: no destructor runs
    child.wait().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !host_pids_with_arg(&marker).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the sandbox's processes outlived envcraft: {:?}",
            host_pids_with_arg(&marker)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The next envcraft removes the directories (and cgroups) the killed one left.
    let names: Vec<String> = runs_before
        .iter()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("envcraft-"))
        .collect();
    let r = run("example/extract-todos", &[], &[]);
    assert_eq!(r["failed_calls"], 0);
    let (code, _, err) = envcraft(&["run", "example/extract-todos"], "", state.path());
    assert_eq!(code, 0, "{err}");
    let left: Vec<String> = fs::read_dir(state.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "sessions" && n != "manifests") // (a cache, kept on purpose)
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert_eq!(
        fs::read_dir(state.path().join("sessions")).unwrap().count(),
        0
    );
    for name in names {
        for parent in [
            "/sys/fs/cgroup/pids/envcraft",
            "/sys/fs/cgroup/memory/envcraft",
        ] {
            assert!(
                !Path::new(parent).join(&name).exists(),
                "cgroup {name} left in {parent}"
            );
        }
    }
}

/// A copy of the example environment with one more task, verified by `verifier` (TOML lines)
/// with `grader/check.py` = `grader`. Returns (temp dir, task path).
fn graded_task(verifier: &str, grader: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("example");
    let status = Command::new("cp")
        .arg("-a")
        .arg(root().join("workspaces/example"))
        .arg(&env)
        .status()
        .unwrap();
    assert!(status.success());
    let task = env.join("tasks/graded");
    fs::create_dir_all(task.join("grader")).unwrap();
    fs::write(
        task.join("task.toml"),
        format!("prompt = \"Add an Inbox item to notes/todo.md.\"\n\n[verifier]\n{verifier}\n"),
    )
    .unwrap();
    fs::write(task.join("grader/check.py"), grader).unwrap();
    fs::write(
        task.join("solution.jsonl"),
        "{\"tool\": \"edit\", \"args\": {\"path\": \"notes/todo.md\", \"old_string\": \"## Inbox\\n\", \"new_string\": \"## Inbox\\n- [ ] Call the depot\\n\"}}\n",
    )
    .unwrap();
    (dir, task)
}

const GRADER: &str = r#"
import datetime, json, os
todo = open("/workspace/notes/todo.md").read()
entries = [json.loads(l) for l in open(os.environ["ENVCRAFT_TRANSCRIPT"])]
calls = [e for e in entries if e.get("type") == "message"]
names = [c["message"]["content"][0].get("name") for c in calls if c["message"]["role"] == "assistant"]
leaked = os.path.exists("/workspace/litter.txt")
try:
    open("/workspace/litter.txt", "w").write("x")
    wrote = 1
except OSError:
    wrote = 0
print(json.dumps({
    "item": 1.0 if "- [ ] Call the depot" in todo else 0.0,
    "used_edit": 1.0 if "edit" in names else 0.0,
    "monday": 1.0 if datetime.datetime.now().strftime("%A") == "Monday" else 0.0,
    "throwaway_view": 1.0 if wrote and not leaked else 0.0,
}))
"#;

#[test]
fn a_grader_command_scores_the_workspace_in_a_throwaway_view_of_its_own() {
    if !sandbox_ready() {
        return;
    }
    let (_dir, task) = graded_task(
        "kind = \"command\"\ncommand = \"python3 grader/check.py\"\ntimeout_secs = 20",
        GRADER,
    );
    let state = tempfile::tempdir().unwrap();
    let t = task.to_str().unwrap();
    let (code, out, err) = envcraft(&["run", t, "--json"], "", state.path());
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(report["reward"], 1.0, "{report}");
    let check = &report["checks"][0];
    assert_eq!(check["kind"], "command");
    assert!(
        check["diff"].as_str().unwrap().contains("throwaway_view"),
        "{check}"
    );
    // Nothing done: the item is missing and no edit was made; the rest still holds.
    let traj = task.join("noop.jsonl");
    fs::write(
        &traj,
        "{\"tool\": \"exec\", \"args\": {\"command\": \"ls grader\"}}\n",
    )
    .unwrap();
    let (code, out, err) = envcraft(
        &["run", t, "--json", "--actions", traj.to_str().unwrap()],
        "",
        state.path(),
    );
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(report["reward"], 0.5, "{report}");
    // The grader's files are not there during the rollout.
    assert_ne!(report["actions"][0]["result"]["exit_code"], 0, "{report}");
}

#[test]
fn graders_that_hang_crash_or_print_garbage_score_zero_with_a_reason() {
    if !sandbox_ready() {
        return;
    }
    for (grader, reason) in [
        ("import time\ntime.sleep(60)\n", "ran past 2 s"),
        (
            "raise SystemExit('boom')\n",
            "exited with Some(1), its stderr ends: boom",
        ),
        ("print('looks fine to me')\n", "not a score"),
        ("print(1.7)\n", "outside [0, 1]"),
        // The network is out of reach: the grader dies before it prints its score.
        (
            "import socket\ns = socket.create_connection(('127.0.0.1', 22), timeout=1)\nprint(1)\n",
            "Permission denied",
        ),
    ] {
        let (_dir, task) = graded_task(
            "kind = \"command\"\ncommand = \"python3 grader/check.py\"\ntimeout_secs = 2",
            grader,
        );
        let state = tempfile::tempdir().unwrap();
        let (code, out, err) =
            envcraft(&["run", task.to_str().unwrap(), "--json"], "", state.path());
        assert_eq!(code, 0, "{err}");
        let report: Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(report["reward"], 0.0, "{grader}: {report}");
        let actual = report["checks"][0]["actual"].as_str().unwrap();
        assert!(actual.contains(reason), "{grader}: {actual}");
    }
}

#[test]
fn a_hybrid_verifier_weighs_the_manifest_and_the_grader() {
    if !sandbox_ready() {
        return;
    }
    let (_dir, task) = graded_task(
        "kind = \"hybrid\"\ncommand = \"python3 grader/check.py\"\nweights = { manifest = 3.0, command = 1.0 }",
        "print(0.5)\n",
    );
    let state = tempfile::tempdir().unwrap();
    let t = task.to_str().unwrap();
    let (code, _, err) = envcraft(&["record", t], "", state.path());
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = envcraft(&["run", t, "--json"], "", state.path());
    assert_eq!(code, 0, "{err}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    // Manifest 1.0 (weight 3) and grader 0.5 (weight 1): 0.875, and not passed.
    assert_eq!(report["reward"], 0.875, "{report}");
    assert_eq!(report["passed"], false);
}

#[test]
fn verify_scores_a_directory_with_the_tasks_own_verifier() {
    if !sandbox_ready() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kept = dir.path().join("kept");
    let (code, _, err) = envcraft(
        &[
            "run",
            "example/extract-todos",
            "--keep",
            kept.to_str().unwrap(),
        ],
        "",
        state.path(),
    );
    assert_eq!(code, 0, "{err}");
    let final_dir = dir.path().join("final");
    let status = Command::new("cp")
        .arg("-a")
        .arg(root().join("workspaces/example/files"))
        .arg(&final_dir)
        .status()
        .unwrap();
    assert!(status.success());
    fs::copy(
        kept.join("files/notes/todo.md"),
        final_dir.join("notes/todo.md"),
    )
    .unwrap();
    let w = final_dir.to_str().unwrap();
    let (code, out, err) = envcraft(
        &[
            "verify",
            "example/extract-todos",
            "--workspace",
            w,
            "--json",
        ],
        "",
        state.path(),
    );
    assert_eq!(code, 0, "{err}");
    let verdict: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(verdict["reward"], 1.0);
    // One byte flipped: not passed, exit 1, the failed check named.
    let mut bytes = fs::read(final_dir.join("notes/todo.md")).unwrap();
    bytes[0] ^= 1;
    fs::write(final_dir.join("notes/todo.md"), bytes).unwrap();
    let (code, out, _) = envcraft(
        &["verify", "example/extract-todos", "--workspace", w],
        "",
        state.path(),
    );
    assert_eq!(code, 1);
    assert!(out.contains("failed: file notes/todo.md"), "{out}");
    // A grader task scores the directory in its sandbox.
    let (_g, task) = graded_task(
        "kind = \"command\"\ncommand = \"python3 grader/check.py\"",
        "import os\nprint(1.0 if os.path.exists('/workspace/notes/todo.md') else 0.0)\n",
    );
    let (code, out, err) = envcraft(
        &["verify", task.to_str().unwrap(), "--workspace", w, "--json"],
        "",
        state.path(),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        serde_json::from_str::<Value>(out.trim()).unwrap()["reward"],
        1.0
    );
}

#[test]
fn audit_passes_sound_tasks_and_names_what_fails_in_unsound_ones() {
    if !sandbox_ready() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    // The example environment (tests/bundled.rs audits every bundled one, office over its image).
    let (code, out, err) = envcraft(&["audit", "workspaces/example", "--json"], "", state.path());
    assert_eq!(code, 0, "{err}\n{out}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(report["summary"]["pass_rate"], 1.0, "{report}");
    // Two unsound tasks in a copy: a wrong expected hash, and a verifier that checks nothing.
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("example");
    assert!(
        Command::new("cp")
            .arg("-a")
            .arg(root().join("workspaces/example"))
            .arg(&env)
            .status()
            .unwrap()
            .success()
    );
    let before = Snapshot::of(&env.join("files"));
    let expected = env.join("tasks/extract-todos/expected.json");
    let text = fs::read_to_string(&expected)
        .unwrap()
        .replace("b5636b", "000000");
    fs::write(&expected, text).unwrap();
    fs::write(
        env.join("tasks/archive-read-mail/expected.json"),
        "{\"version\": 1, \"files\": {}, \"absent\": []}\n",
    )
    .unwrap();
    let (code, out, err) = envcraft(
        &["audit", env.to_str().unwrap(), "--json", "--jobs", "2"],
        "",
        state.path(),
    );
    assert_eq!(code, 1, "{err}\n{out}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(report["summary"]["passed"], 0, "{report}");
    let failed = |task: &str| -> Vec<String> {
        report["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["task"] == task)
            .unwrap()["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["passed"] == false)
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(failed("example/extract-todos"), ["reference"]);
    assert_eq!(
        failed("example/archive-read-mail"),
        ["no_false_positive", "sensitive"]
    );
    assert!(before.diff(&Snapshot::of(&env.join("files"))).is_empty());
}

#[test]
fn suite_runs_every_task_and_the_noop_agent_passes_none() {
    if !sandbox_ready() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let report = state.path().join("report.md");
    let (code, out, err) = envcraft(
        &[
            "suite",
            "workspaces/example",
            "--json",
            "--report",
            report.to_str().unwrap(),
        ],
        "",
        state.path(),
    );
    assert_eq!(code, 0, "{err}\n{out}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["totals"]["tasks"], 2);
    assert_eq!(v["totals"]["passed"], 2);
    assert_eq!(v["environments"][0]["mean_reward"], 1.0);
    assert!(
        fs::read_to_string(&report)
            .unwrap()
            .contains("| example | 2 | 2 | 1.000 |")
    );
    let (code, out, err) = envcraft(
        &["suite", "workspaces/example", "--agent", "noop", "--json"],
        "",
        state.path(),
    );
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["totals"]["passed"], 0);
    assert!(v["totals"]["mean_reward"].as_f64().unwrap() < 0.5);
}
