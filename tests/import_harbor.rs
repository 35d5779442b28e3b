//! Harbor tasks as a user drives them: `envcraft import harbor`, and `envcraft run|suite|audit`
//! of a Harbor task or dataset directory as it is (through `contained`): Harbor's oracle (the
//! reference, `solve.sh`) scores 1.0 and no action 0.0, over the host's system paths with
//! `--base host`; a FROM image the store neither holds nor can pull is refused before start; bad tasks
//! (missing files, an unknown schema version, a Dockerfile step that needs a builder) are each
//! a clear error.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod import_support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use import_support::{contained, envcraft, envcraft_without_builders};

const TASK_TOML: &str = "schema_version = \"1.4\"\n\n[verifier]\ntimeout_sec = 60.0\n\n\
[verifier.env]\nEXPECTED = \"hello world\"\n\n[agent]\ntimeout_sec = 60.0\n\n\
[environment]\nnetwork_mode = \"no-network\"\nmemory_mb = 1024\n";

/// The grader: the agent's file in the working directory, the variables of the Dockerfile
/// and of `[verifier.env]`, the tests at /tests and nothing of the tests left to the agent.
const TEST_SH: &str = r#"#!/bin/bash
ok=1
[ "$(cat /app/hello.txt 2>/dev/null)" = "$EXPECTED" ] || ok=0
[ "$(pwd)" = /app ] || ok=0
[ -f /tests/helper.txt ] || ok=0
[ -e /app/.harbor/tests ] && ok=0
echo "checked: $ok"
if [ "$ok" = 1 ]; then echo '{"reward": 1.0}' > /logs/verifier/reward.json; else echo 0 > /logs/verifier/reward.txt; fi
"#;

const SOLVE_SH: &str = "#!/bin/bash\necho \"$GREETING $(cat data/name.txt)\" > /app/hello.txt\n";

const DOCKERFILE: &str = "# a comment\nFROM ubuntu:24.04\nWORKDIR /app\nENV GREETING=hello\n\
COPY data/ ./data/\nCMD [\"sleep\", \"infinity\"]\n";

/// A Harbor task `name` under `root`, with `dockerfile`.
fn write_task(root: &Path, name: &str, dockerfile: &str) -> PathBuf {
    let task = root.join(name);
    for d in ["tests", "solution", "environment/data"] {
        fs::create_dir_all(task.join(d)).unwrap();
    }
    fs::write(task.join("task.toml"), TASK_TOML).unwrap();
    fs::write(
        task.join("instruction.md"),
        "Write \"hello \" and the content of data/name.txt to /app/hello.txt.\n",
    )
    .unwrap();
    fs::write(task.join("environment/Dockerfile"), dockerfile).unwrap();
    fs::write(task.join("environment/data/name.txt"), "world\n").unwrap();
    fs::write(task.join("tests/helper.txt"), "for the tests only\n").unwrap();
    for (path, text) in [("tests/test.sh", TEST_SH), ("solution/solve.sh", SOLVE_SH)] {
        fs::write(task.join(path), text).unwrap();
        fs::set_permissions(task.join(path), fs::Permissions::from_mode(0o755)).unwrap();
    }
    task
}

fn report_of(out: &str) -> Value {
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn a_harbor_task_runs_as_it_is_oracle_one_and_nop_zero() {
    if !common::sandbox_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let task = write_task(dir.path(), "hello", DOCKERFILE);
    let task_arg = task.to_str().unwrap();
    let (code, out, err) = contained(&["run", task_arg, "--base", "host", "--json"]);
    assert_eq!(code, 0, "{err}");
    let report = report_of(&out);
    assert_eq!(report["reward"].as_f64(), Some(1.0), "{report}\n{err}");
    assert_eq!(report["task"], "harbor-hello/hello");
    assert!(err.contains("base=host"), "the stand-in is not said: {err}");

    let empty = dir.path().join("empty.jsonl");
    fs::write(&empty, "").unwrap();
    let (code, out, err) = contained(&[
        "run",
        task_arg,
        "--base",
        "host",
        "--json",
        "--actions",
        empty.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let report = report_of(&out);
    assert_eq!(report["reward"].as_f64(), Some(0.0), "{report}");
    let actual = report["checks"][0]["actual"].as_str().unwrap();
    assert!(actual.starts_with("score 0"), "{report}");

    // The agent cannot write its own reward: a stale reward.txt is removed before the tests.
    let cheat = dir.path().join("cheat.jsonl");
    fs::write(
        &cheat,
        "{\"tool\": \"exec\", \"args\": {\"command\": \"mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && echo '{\\\"reward\\\": 1}' > /logs/verifier/reward.json\"}}\n",
    )
    .unwrap();
    let (_, out, err) = contained(&[
        "run",
        task_arg,
        "--base",
        "host",
        "--json",
        "--actions",
        cheat.to_str().unwrap(),
    ]);
    assert_eq!(
        report_of(&out)["reward"].as_f64(),
        Some(0.0),
        "{out}\n{err}"
    );

    // audit: reference 1.0, untouched 0, deterministic, sensitive, template intact.
    let (code, out, err) = contained(&["audit", task_arg, "--base", "host", "--json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(report_of(&out)["summary"]["passed"], 1, "{out}");

    // suite over a dataset of two: the reference passes both, noop none.
    write_task(dir.path(), "hello2", DOCKERFILE);
    fs::remove_file(dir.path().join("empty.jsonl")).unwrap();
    fs::remove_file(dir.path().join("cheat.jsonl")).unwrap();
    let ds = dir.path().to_str().unwrap();
    let (code, out, err) = contained(&["suite", ds, "--base", "host", "--json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let report = report_of(&out);
    assert_eq!(report["totals"]["tasks"], 2, "{report}");
    assert_eq!(
        report["totals"]["mean_reward"].as_f64(),
        Some(1.0),
        "{report}"
    );
    let (code, out, err) = contained(&["suite", ds, "--base", "host", "--agent", "noop", "--json"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(report_of(&out)["totals"]["mean_reward"].as_f64(), Some(0.0));
}

#[test]
fn a_from_image_the_store_does_not_hold_and_cannot_pull_is_refused_before_start() {
    if !common::sandbox_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // An image no store holds and no registry serves (nothing listens on port 9).
    let from = "127.0.0.1:9/nosuch:1";
    let task = write_task(
        dir.path(),
        "hello",
        &DOCKERFILE.replace("ubuntu:24.04", from),
    );
    let (code, out, err) = contained(&["run", task.to_str().unwrap(), "--json"]);
    assert_eq!(code, 125, "{out}\n{err}");
    assert!(out.is_empty(), "a run started: {out}");
    let refusal = format!(
        "its Dockerfile's FROM image `{from}` is not in envcraft's image store and could not be pulled"
    );
    for words in [refusal.as_str(), "--base host"] {
        assert!(err.contains(words), "{words:?} not in: {err}");
    }
    // An import tries the pull too: the task is skipped, with why, and nothing is written.
    let dest = dir.path().join("out");
    let (code, out, err) = envcraft(&[
        "import",
        "harbor",
        task.to_str().unwrap(),
        dest.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}\n{err}");
    assert!(
        out.contains("skipped hello: task hello: its Dockerfile's FROM image"),
        "{out}"
    );
    assert!(!dest.join("harbor-hello").exists());
}

#[test]
fn an_import_is_deterministic_and_keeps_the_instruction_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let task = write_task(dir.path(), "hello", DOCKERFILE);
    let instruction = "Café “quoted” \"x\" \\ back\\slash\n\n- a\ttab\n";
    fs::write(task.join("instruction.md"), instruction).unwrap();
    let mut trees = Vec::new();
    for n in 0..2 {
        let dest = dir.path().join(format!("out{n}"));
        let (code, _, err) = envcraft(&[
            "import",
            "harbor",
            task.to_str().unwrap(),
            dest.to_str().unwrap(),
            "--base",
            "host",
        ]);
        assert_eq!(code, 0, "{err}");
        let mut files: Vec<(PathBuf, Vec<u8>)> = walkdir::WalkDir::new(&dest)
            .sort_by_file_name()
            .into_iter()
            .flatten()
            .filter(|e| e.file_type().is_file())
            .map(|e| {
                let rel = e.path().strip_prefix(&dest).unwrap().to_path_buf();
                (rel, fs::read(e.path()).unwrap())
            })
            .collect();
        files.sort();
        trees.push(files);
    }
    assert_eq!(trees[0], trees[1]);
    let spec =
        envcraft::spec::TaskSpec::load(dir.path().join("out0/harbor-hello/tasks/hello")).unwrap();
    assert_eq!(spec.turns[0], instruction);
    let names: Vec<String> = trees[0]
        .iter()
        .map(|(p, _)| p.display().to_string())
        .collect();
    for expected in [
        "harbor-hello/files/data/name.txt",
        "harbor-hello/tasks/hello/grader/test.sh",
        "harbor-hello/tasks/hello/grader/helper.txt",
        "harbor-hello/tasks/hello/solution.jsonl",
        "harbor-hello/policy.toml",
    ] {
        assert!(
            names.contains(&expected.to_string()),
            "{expected} not in {names:?}"
        );
    }
    let policy = fs::read_to_string(dir.path().join("out0/harbor-hello/policy.toml")).unwrap();
    assert!(policy.contains("workspace = \"/app\""), "{policy}");
    assert!(policy.contains("\"GREETING\" = \"hello\""), "{policy}");
    assert!(policy.contains("memory = \"1024MiB\""), "{policy}");
}

/// `envcraft import harbor` and `envcraft run` of `task`, with no image builder on PATH: both
/// refuse it, and say `words`.
fn refused(task: &Path, words: &[&str]) {
    let dest = task.parent().unwrap().join(format!(
        "out-{}",
        task.file_name().unwrap().to_string_lossy()
    ));
    let (code, out, _) = envcraft_without_builders(&[
        "import",
        "harbor",
        task.to_str().unwrap(),
        dest.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(!out.contains(", 0 skipped"), "{out}");
    for w in words {
        assert!(out.contains(w), "import: {w:?} not in: {out}");
    }
    assert!(
        !dest.join("harbor-hello").exists(),
        "a refused task was written"
    );
    let (code, out, err) =
        envcraft_without_builders(&["run", task.to_str().unwrap(), "--base", "host"]);
    assert_eq!(code, 125, "{out}\n{err}");
    for w in words {
        assert!(err.contains(w), "run: {w:?} not in: {err}");
    }
}

#[test]
fn bad_harbor_tasks_are_each_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let fresh =
        |name: &str, dockerfile: &str| write_task(&dir.path().join(name), "hello", dockerfile);

    let t = fresh("no-instruction", DOCKERFILE);
    fs::remove_file(t.join("instruction.md")).unwrap();
    refused(&t, &["has no instruction.md"]);

    let t = fresh("no-test", DOCKERFILE);
    fs::remove_file(t.join("tests/test.sh")).unwrap();
    refused(&t, &["has no tests/test.sh"]);

    let t = fresh("schema", DOCKERFILE);
    fs::write(t.join("task.toml"), "schema_version = \"2.0\"\n").unwrap();
    refused(&t, &["schema_version", "\"2.0\"", "1.4"]);

    let t = fresh(
        "run-step",
        "FROM ubuntu:24.04\nRUN apt-get install -y curl\n",
    );
    refused(
        &t,
        &["line 2", "RUN apt-get install -y curl", "needs a builder"],
    );

    let t = fresh(
        "copy-out",
        "FROM ubuntu:24.04\nWORKDIR /app\nCOPY data/name.txt /etc/name.txt\n",
    );
    refused(
        &t,
        &["line 3", "/etc/name.txt outside the working directory /app"],
    );

    let t = fresh("compose", DOCKERFILE);
    fs::write(t.join("environment/docker-compose.yaml"), "services: {}\n").unwrap();
    refused(
        &t,
        &["docker-compose.yaml", "services cannot be represented"],
    );

    let t = fresh("no-image", DOCKERFILE);
    fs::remove_file(t.join("environment/Dockerfile")).unwrap();
    refused(
        &t,
        &["neither environment/Dockerfile nor [environment].docker_image"],
    );
}
