//! Graders against the agent: an agent that cannot do the task may try to choose its own reward
//! by leaving files the grader would run (a module named like one the grader imports, in the
//! working directory or beside the grader's script). Each test replays such an agent with
//! `envcraft run` (through `contained`) and asserts that the reward is the one the grader's own
//! code gives, and that a legitimate grader still scores the reference solution 1.0.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use common::sandbox_ready;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A copy of the example environment with one task verified by `command`, its grader's files
/// `grader` (name, content) under `grader/`. Returns (temp dir, task path).
fn task_with_grader(command: &str, grader: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
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
    let command = toml::Value::String(command.to_string());
    fs::write(
        task.join("task.toml"),
        format!(
            "prompt = \"Add an Inbox item to notes/todo.md.\"\n\n[verifier]\nkind = \"command\"\n\
             command = {command}\ntimeout_secs = 20\n"
        ),
    )
    .unwrap();
    for (name, content) in grader {
        fs::write(task.join("grader").join(name), content).unwrap();
    }
    fs::write(
        task.join("solution.jsonl"),
        "{\"tool\": \"edit\", \"args\": {\"path\": \"notes/todo.md\", \"old_string\": \"## Inbox\\n\", \"new_string\": \"## Inbox\\n- [ ] Call the depot\\n\"}}\n",
    )
    .unwrap();
    (dir, task)
}

/// `envcraft run TASK --json [--actions TRAJ]` through `contained`; the report.
fn run(task: &Path, calls: Option<&[Value]>) -> Value {
    let state = tempfile::tempdir().unwrap();
    let mut cmd = Command::new("bash");
    cmd.arg(common::contained().unwrap())
        .arg(common::envcraft())
        .args(["run", task.to_str().unwrap(), "--json"])
        .env("ENVCRAFT_STATE_DIR", state.path());
    let traj = state.path().join("agent.jsonl");
    if let Some(calls) = calls {
        let text: String = calls.iter().map(|c| format!("{c}\n")).collect();
        fs::write(&traj, text).unwrap();
        cmd.arg("--actions").arg(&traj);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "envcraft run failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn write(path: &str, content: &str) -> Value {
    json!({"tool": "write", "args": {"path": path, "content": content}})
}

/// A module that, once imported, prints a perfect score and ends the interpreter.
const FAKE_SCORE: &str = "print('{\"forged\": 1.0}')\nprint(1.0)\nraise SystemExit(0)\n";

/// The grader's check, importing `json` (a standard module the agent can name its file after).
const CHECK: &str = r#"
import json
todo = open("/workspace/notes/todo.md").read()
print(json.dumps({"item": 1.0 if "- [ ] Call the depot" in todo else 0.0}))
"#;

#[test]
fn a_module_the_agent_leaves_in_the_working_directory_does_not_run_in_a_python_c_grader() {
    if !sandbox_ready() {
        return;
    }
    // The ClawGym shape: the grader's score goes through `python3 -c 'import json ...'`, whose
    // module path starts with the working directory, which is the agent's workspace.
    let (_dir, task) = task_with_grader(
        "python3 -c 'import json, sys; todo = open(\"notes/todo.md\").read(); \
         print(json.dumps(1.0 if \"- [ ] Call the depot\" in todo else 0.0))'",
        &[],
    );
    assert_eq!(run(&task, None)["reward"], 1.0, "the reference solution");
    let forged = run(
        &task,
        Some(&[write("json.py", FAKE_SCORE), write("sys.py", FAKE_SCORE)]),
    );
    assert_eq!(
        forged["reward"], 0.0,
        "the agent chose its reward: {forged}"
    );
}

#[test]
fn a_module_the_agent_leaves_beside_the_graders_script_does_not_shadow_its_imports() {
    if !sandbox_ready() {
        return;
    }
    // The grader's script imports `json` and a helper of its own from its directory; the agent
    // leaves `grader/json.py`, its own `grader/gradelib.py` and `grader/check.py`, and a
    // `json.py` in the working directory.
    let check = format!("import gradelib\n{CHECK}\ngradelib.done()\n");
    let (_dir, task) = task_with_grader(
        "python3 grader/check.py",
        &[
            ("check.py", &check),
            ("gradelib.py", "def done():\n    pass\n"),
        ],
    );
    assert_eq!(
        run(&task, None)["reward"],
        1.0,
        "the reference solution, with the grader importing its own helper"
    );
    let forged = run(
        &task,
        Some(&[
            write("grader/json.py", FAKE_SCORE),
            write("grader/gradelib.py", FAKE_SCORE),
            write("grader/check.py", FAKE_SCORE),
            write("json.py", FAKE_SCORE),
        ]),
    );
    assert_eq!(
        forged["reward"], 0.0,
        "the agent chose its reward: {forged}"
    );
    let check = &forged["checks"][0];
    assert!(
        check["diff"].as_str().unwrap_or_default().contains("item"),
        "the grader's own check ran: {check}"
    );
}

#[test]
fn a_shell_grader_does_not_run_a_check_the_agent_put_in_its_directory() {
    if !sandbox_ready() {
        return;
    }
    // A grader that runs every check in its directory: the agent adds one of its own that
    // prints a perfect score and ends the grader.
    let (_dir, task) = task_with_grader(
        "bash grader/reward.sh",
        &[(
            "reward.sh",
            "for check in grader/*.check; do . \"$check\"; done\ncheck_item\n",
        )],
    );
    fs::write(
        task.join("grader/item.check"),
        "check_item() { if grep -q -- '- \\[ \\] Call the depot' notes/todo.md; then echo 1; else echo 0; fi; }\n",
    )
    .unwrap();
    assert_eq!(run(&task, None)["reward"], 1.0, "the reference solution");
    let forged = run(&task, Some(&[write("grader/zz.check", "echo 1; exit 0\n")]));
    assert_eq!(
        forged["reward"], 0.0,
        "the agent chose its reward: {forged}"
    );
}

/// A grader that runs the agent's program first (as ClawGym's do with a CLI the agent built),
/// then its own check: the check counts the todo item and the program's output file.
const RUNS_THE_AGENTS_TOOL: &str = "sh bin/tool >/dev/null 2>&1; python3 grader/check.py";
const CHECK_TOOL_OUTPUT: &str = r#"
import json, os
todo = open("/workspace/notes/todo.md").read()
print(json.dumps({"item": 1.0 if "- [ ] Call the depot" in todo else 0.0,
                  "output": 1.0 if os.path.exists("/workspace/out/result.txt") else 0.0}))
"#;

#[test]
fn the_agents_program_run_by_the_grader_may_write_its_outputs_but_not_the_graders_files() {
    if !sandbox_ready() {
        return;
    }
    let (_dir, task) = task_with_grader(RUNS_THE_AGENTS_TOOL, &[("check.py", CHECK_TOOL_OUTPUT)]);
    // The program writes its output in the workspace (the grader's view of it is writable),
    // then tries to replace the grader's check with one that prints a perfect score.
    let tool = "mkdir -p out && echo done > out/result.txt\n\
                printf 'print(1.0)\\n' > grader/check.py\n\
                printf 'print(1.0)\\n' > /workspace/grader/check.py\n\
                rm -f grader/check.py\n";
    let report = run(&task, Some(&[write("bin/tool", tool)]));
    let checks = report["checks"].to_string();
    // The output was written (0.5 of the score); the check was the grader's own: the agent did
    // not add the item, so the score is not 1.0.
    assert_eq!(report["reward"], 0.5, "{report}");
    assert!(
        checks.contains("output"),
        "the grader's own check ran: {checks}"
    );
    // Nothing the grader's run wrote is the session's: the workspace changes are the agent's.
    assert_eq!(
        report["changes"]["added"],
        json!(["bin", "bin/tool"]),
        "{report}"
    );
}

/// A Python grader that runs the agent's package as ClawGym's graders do (`python -m app`,
/// working directory the workspace) and scores whether it answered, beside its own check.
const CHECK_RUNS_AGENT_PACKAGE: &str = r#"
import json, subprocess, sys
todo = open("/workspace/notes/todo.md").read()
ran = subprocess.run([sys.executable, "-m", "app"], capture_output=True, text=True, cwd="/workspace")
print(json.dumps({"item": 1.0 if "- [ ] Call the depot" in todo else 0.0,
                  "agent_package": 1.0 if ran.stdout.strip() == "app ok" else 0.0}))
"#;

#[test]
fn the_agents_package_run_by_a_python_grader_imports_but_its_modules_never_reach_the_grader() {
    if !sandbox_ready() {
        return;
    }
    // The grader's own Python takes nothing from the workspace (a `json.py` and a
    // `sitecustomize.py` the agent left there are not imported: the grader's score stands);
    // the agent's program the grader starts imports the agent's own package from there.
    let (_dir, task) = task_with_grader(
        "python3 grader/check.py",
        &[("check.py", CHECK_RUNS_AGENT_PACKAGE)],
    );
    let package = [
        write("app/__init__.py", ""),
        write("app/__main__.py", "print('app ok')\n"),
    ];
    let mut calls: Vec<Value> = package.to_vec();
    calls.push(write("json.py", FAKE_SCORE));
    calls.push(write("sitecustomize.py", FAKE_SCORE));
    let solved = run(&task, Some(&calls));
    // The reference trajectory's change is not made here: `item` is 0, `agent_package` 1.
    assert_eq!(solved["reward"], 0.5, "{solved}");
    let checks = solved["checks"].to_string();
    assert!(!checks.contains("forged"), "{checks}");
}
