//! `envcraft synth`: tasks synthesized along the tool graph, grounded by execution, gated by
//! the audit. The bundled environments give at least 200 kept tasks from 400 candidates across
//! at least 10 environments, every one of which `envcraft audit` passes and none of whose
//! prompts names a tool; the same seed gives the same bytes; a test environment whose skills
//! form a known graph yields exactly the chains its topology allows; the model path is driven
//! against a local stub of the chat-completions API (scripted, malformed, tool-naming and slow
//! answers).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::{Value, json};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn synth(args: &[&str], state: &Path) -> Output {
    Command::new(common::envcraft())
        .current_dir(root())
        .arg("synth")
        .args(args)
        .arg("--state-dir")
        .arg(state)
        .output()
        .unwrap()
}

fn report(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "synth failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every file under `dir`, by relative path, with its bytes.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// The kept tasks' `task.toml`s under `out`.
fn kept_tasks(out: &Path) -> Vec<toml::Table> {
    tree(out)
        .into_iter()
        .filter(|(p, _)| p.contains("/tasks/synth-") && p.ends_with("task.toml"))
        .map(|(_, b)| String::from_utf8(b).unwrap().parse().unwrap())
        .collect()
}

fn prompt_of(task: &toml::Table) -> String {
    match task.get("prompt") {
        Some(p) => p.as_str().unwrap().to_string(),
        None => task["turns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["prompt"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

fn words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| c.is_whitespace() || ",;:!?()[]{}\"'“”‘’*`".contains(c))
        .map(|w| w.trim_end_matches('.').to_lowercase())
        .filter(|w| !w.contains('/') && !w.contains('.'))
        .collect()
}

/// The bundled environments over the host's root (the office one needs its image).
fn host_root_envs() -> Vec<String> {
    let mut envs: Vec<String> = std::fs::read_dir(root().join("workspaces"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("env.toml").is_file())
        .filter(|p| {
            let text = std::fs::read_to_string(p.join("env.toml")).unwrap();
            !text.parse::<toml::Table>().unwrap().contains_key("image")
        })
        .map(|p| format!("workspaces/{}", p.file_name().unwrap().to_string_lossy()))
        .collect();
    envs.sort();
    envs
}

#[test]
fn the_bundled_environments_give_200_audited_tasks_from_400_candidates() {
    if !common::sandbox_ready() {
        return;
    }
    let _heavy = common::heavy_test_lock();
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let envs = host_root_envs();
    let mut args: Vec<&str> = envs.iter().map(String::as_str).collect();
    let out_dir = out.path().to_str().unwrap().to_string();
    args.extend(["--count", "400", "--out", &out_dir, "--jobs", "2", "--json"]);
    let before = tree(&root().join("workspaces"));
    let report = report(&synth(&args, state.path()));
    assert_eq!(
        tree(&root().join("workspaces")),
        before,
        "the bundled environments changed"
    );

    let per_env = report["envs"].as_array().unwrap();
    let kept: u64 = per_env.iter().map(|e| e["kept"].as_u64().unwrap()).sum();
    let candidates: u64 = per_env
        .iter()
        .map(|e| e["candidates"].as_u64().unwrap())
        .sum();
    let with_tasks = per_env
        .iter()
        .filter(|e| e["kept"].as_u64().unwrap() > 0)
        .count();
    assert_eq!(candidates, 400);
    assert!(kept >= 200, "only {kept} tasks kept: {report}");
    assert!(
        with_tasks >= 10,
        "tasks in only {with_tasks} environments: {report}"
    );

    // Every kept task: a synth source, a prompt that names no tool or skill.
    let tasks = kept_tasks(out.path());
    assert_eq!(tasks.len() as u64, kept);
    let mut names: BTreeSet<String> = envcraft::spec::env::BUILTIN_TOOLS
        .iter()
        .map(|s| s.to_string())
        .collect();
    names.extend(
        std::fs::read_dir(root().join("skills"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned()),
    );
    for task in &tasks {
        let source = task["source"].as_table().unwrap();
        assert_eq!(source["origin"].as_str(), Some("synth"));
        assert_eq!(source["seed"].as_integer(), Some(0));
        let chain = source["chain"].as_array().unwrap();
        assert!((2..=4).contains(&chain.len()), "{task:?}");
        let prompt = prompt_of(task);
        let said = words(&prompt);
        let named: Vec<&String> = names.intersection(&said).collect();
        assert!(named.is_empty(), "the prompt names {named:?}: {prompt}");
    }

    // What was kept passes the audit as it is.
    let audit = Command::new(common::envcraft())
        .current_dir(root())
        .args(["audit", "--json", "--jobs", "2", "--state-dir"])
        .arg(state.path())
        .arg(out.path())
        .output()
        .unwrap();
    let audited: Value = serde_json::from_slice(&audit.stdout).unwrap();
    assert_eq!(audited["summary"]["tasks"].as_u64(), Some(kept));
    assert_eq!(
        audited["summary"]["passed"].as_u64(),
        Some(kept),
        "{audited}"
    );
}

#[test]
fn the_same_seed_gives_the_same_bytes() {
    if !common::sandbox_ready() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let run = |seed: &str| {
        let out = tempfile::tempdir().unwrap();
        let dir = out.path().to_str().unwrap().to_string();
        let args = [
            "workspaces/example",
            "workspaces/notes-docs",
            "--count",
            "24",
            "--seed",
            seed,
            "--out",
            &dir,
            "--json",
        ];
        report(&synth(&args, state.path()));
        let files = tree(out.path());
        assert!(
            files.keys().any(|p| p.contains("synth-0001")),
            "{:?}",
            files.keys()
        );
        files
    };
    let first = run("7");
    assert_eq!(first, run("7"), "two runs with one seed differ");
    assert_ne!(first, run("8"), "another seed gave the same tasks");
}

/// A skill of the known-graph test environment: `python3` reading its JSON arguments.
fn plant_skill(skills: &Path, name: &str, code: &str, toml: &str) {
    let dir = skills.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!(
            "---\nname: {name}\ndescription: A test skill of the known graph.\n---\n\n# {name}\n"
        ),
    )
    .unwrap();
    let script =
        format!("#!/usr/bin/env python3\nimport json, sys\nargs = json.load(sys.stdin)\n{code}\n");
    std::fs::write(dir.join("run.py"), script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.join("run.py"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.join("skill.toml"), toml).unwrap();
}

/// An environment offering `write`, `exec` (which the audit's byte flips need) and two skills: `first-token` (starts from a `.txt`
/// file, yields a `token`) and `shout` (takes a `token`, yields a `code`). Its graph allows
/// exactly two chains: first-token → answer, and first-token → shout → answer.
fn known_graph() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let skills = dir.path().join("skills");
    plant_skill(
        &skills,
        "first-token",
        "text = open(args['path']).read().split()\nprint(json.dumps({'token': text[0]}))",
        "executable = \"run.py\"\n\n[schema]\ntype = \"object\"\nrequired = [\"path\"]\n\n\
         [schema.properties.path]\ntype = \"string\"\n\n[outputs]\ntype = \"object\"\n\n\
         [outputs.properties.token]\ntype = \"string\"\n\n[[synth.calls]]\n\
         files = { path = [\"*.txt\"] }\nfacts = { token = \"the first word of {path}\" }\n",
    );
    plant_skill(
        &skills,
        "shout",
        "print(json.dumps({'code': args['token'].upper() + '-7'}))",
        "executable = \"run.py\"\n\n[schema]\ntype = \"object\"\nrequired = [\"token\"]\n\n\
         [schema.properties.token]\ntype = \"string\"\n\n[outputs]\ntype = \"object\"\n\n\
         [outputs.properties.code]\ntype = \"string\"\n\n[[synth.calls]]\n\
         facts = { code = \"the code made from {token}\" }\n",
    );
    let env = dir.path().join("envs/known");
    std::fs::create_dir_all(env.join("files/notes")).unwrap();
    for (name, text) in [
        ("a.txt", "alpha one\n"),
        ("b.txt", "bravo two\n"),
        ("c.txt", "charlie\n"),
    ] {
        std::fs::write(env.join("files/notes").join(name), text).unwrap();
    }
    std::fs::write(
        env.join("env.toml"),
        "name = \"known\"\ndescription = \"A known graph\"\npolicy = \"default\"\n\
         tools = [\"write\", \"exec\", \"skill\"]\nskills = [\"first-token\", \"shout\"]\n\
         base_time = \"2026-01-05T09:00:00Z\"\n",
    )
    .unwrap();
    std::fs::write(env.join("docs.md"), "# known\n").unwrap();
    (dir, skills, env)
}

#[test]
fn chains_follow_the_graph_exactly() {
    if !common::sandbox_ready() {
        return;
    }
    let (_dir, skills, env) = known_graph();
    let state = tempfile::tempdir().unwrap();
    let skills = skills.to_str().unwrap();
    let env_arg = env.to_str().unwrap();
    let graph = synth(
        &[env_arg, "--graph", "--skills", skills, "--max-chain", "3"],
        state.path(),
    );
    let graph = report(&graph);
    let chains: BTreeSet<Vec<String>> = serde_json::from_value(graph[0]["chains"].clone()).unwrap();
    let allowed: BTreeSet<Vec<String>> = [
        vec!["skill:first-token", "answer"],
        vec!["skill:first-token", "skill:shout", "answer"],
    ]
    .into_iter()
    .map(|c| c.into_iter().map(String::from).collect())
    .collect();
    assert_eq!(chains, allowed);

    let out = tempfile::tempdir().unwrap();
    let dir = out.path().to_str().unwrap();
    let args = [
        env_arg,
        "--skills",
        skills,
        "--max-chain",
        "3",
        "--count",
        "30",
        "--out",
        dir,
        "--json",
    ];
    let run = report(&synth(&args, state.path()));
    let made: BTreeSet<Vec<String>> = kept_tasks(out.path())
        .iter()
        .map(|t| {
            serde_json::from_value(serde_json::to_value(&t["source"]["chain"]).unwrap()).unwrap()
        })
        .collect();
    assert_eq!(made, allowed, "{run}");
    // Six distinct tasks exist (three files, two chains); the rest repeat.
    assert_eq!(run["envs"][0]["kept"].as_u64(), Some(6), "{run}");
    assert!(
        run["envs"][0]["dropped"]["repeated chain"]
            .as_u64()
            .unwrap()
            > 0,
        "{run}"
    );
    assert!(
        env.join("tasks")
            .read_dir()
            .map_or(true, |mut d| d.next().is_none())
    );
}

/// How the stub answers an intent request.
#[derive(Clone, Copy)]
enum Stub {
    /// `{"prompt": "Could you sort this out for me? GOAL"}`.
    Scripted,
    /// Not JSON.
    Malformed,
    /// A prompt that names a tool.
    NamesTool,
    /// Longer than the client's timeout.
    Slow,
}

/// A chat-completions stub on loopback: rubric requests get top scores, intent requests the
/// answer `mode` says. Returns its base URL and the count of requests made.
fn stub(mode: Stub) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = count.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let seen = seen.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut length = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let lower = line.to_ascii_lowercase();
                    if let Some(v) = lower.strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap();
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0; length];
                reader.read_exact(&mut body).unwrap();
                let request: Value = serde_json::from_slice(&body).unwrap();
                let content = request["messages"][0]["content"]
                    .as_str()
                    .unwrap_or_default();
                let answer = if content.contains("task_solvability") {
                    r#"{"task_solvability": 3, "validation_integrity": 3, "data_consistency": 3, "notes": "ok"}"#.to_string()
                } else {
                    seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let goal = content
                        .split("The goal it reached, said plainly:\n")
                        .nth(1)
                        .and_then(|rest| rest.split("\n\n").next())
                        .unwrap_or_default();
                    match mode {
                        Stub::Scripted => {
                            json!({"prompt": format!("Could you sort this out for me? {goal}")})
                                .to_string()
                        }
                        Stub::Malformed => "Sure! Here is a task: do the thing.".into(),
                        Stub::NamesTool => {
                            json!({"prompt": format!("Use grep first. {goal}")}).to_string()
                        }
                        Stub::Slow => {
                            std::thread::sleep(Duration::from_secs(3));
                            json!({"prompt": goal}).to_string()
                        }
                    }
                };
                let reply =
                    json!({"choices": [{"message": {"role": "assistant", "content": answer}}]})
                        .to_string();
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}",
                    reply.len()
                );
            });
        }
    });
    (url, count)
}

fn synth_with(mode: Stub) -> (Value, tempfile::TempDir, usize) {
    let (url, count) = stub(mode);
    let state = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().to_str().unwrap().to_string();
    let args = [
        "workspaces/example",
        "--count",
        "4",
        "--llm-url",
        &url,
        "--model",
        "stub",
        "--llm-timeout",
        "1",
        "--llm-attempts",
        "2",
        "--out",
        &dir,
        "--json",
    ];
    let result = synth(&args, state.path());
    let value = serde_json::from_slice(&result.stdout).unwrap_or(Value::Null);
    (value, out, count.load(std::sync::atomic::Ordering::SeqCst))
}

#[test]
fn a_model_writes_the_intent_and_its_failures_drop_candidates() {
    if !common::sandbox_ready() {
        return;
    }
    let (run, out, asked) = synth_with(Stub::Scripted);
    let kept = run["envs"][0]["kept"].as_u64().unwrap();
    assert!(kept > 0, "{run}");
    assert!(asked >= kept as usize);
    for task in kept_tasks(out.path()) {
        assert!(
            prompt_of(&task).starts_with("Could you sort this out for me? "),
            "{task:?}"
        );
    }
    for (mode, reason) in [
        (Stub::Malformed, "not the JSON asked for"),
        (Stub::NamesTool, "names the tool"),
        (Stub::Slow, "could not be reached"),
    ] {
        let (run, out, asked) = synth_with(mode);
        let env = &run["envs"][0];
        assert_eq!(env["kept"].as_u64(), Some(0), "{run}");
        assert!(kept_tasks(out.path()).is_empty());
        let executed = env["candidates"].as_u64().unwrap()
            - env["dropped"]
                .as_object()
                .unwrap()
                .iter()
                .filter(|(k, _)| !k.starts_with("intent"))
                .map(|(_, v)| v.as_u64().unwrap())
                .sum::<u64>();
        let dropped = env["dropped"]["intent"].as_u64().unwrap_or(0);
        assert_eq!(dropped, executed, "{reason}: {run}");
        // Bounded: two attempts per candidate at most.
        assert!(
            asked as u64 <= 2 * env["candidates"].as_u64().unwrap(),
            "{asked} requests"
        );
        let reasons = run["envs"][0]["drop_examples"].to_string();
        assert!(reasons.contains(reason), "{reason} not in {reasons}");
    }
}
