//! The quality gate of the EnvCraft pipeline: every task is checked the way a trainer depends
//! on it. For each task:
//!
//! - `spec`: the task, its environment and skills load, the reference solution parses and uses
//!   only offered tools, the verifier has what it needs (`expected.json` for a manifest);
//! - `reference`: the reference solution scores 1.0;
//! - `no_false_positive`: the untouched workspace does not pass;
//! - `deterministic`: the reference solution run twice gives the same final manifest;
//! - `sensitive`: flipping one byte of any file the manifest checks makes the verifier fail (a
//!   grader-only task: flipping some changed file must);
//! - `template_unchanged`: the environment's and the task's files hash the same afterwards;
//! - `rubric` (with a judge endpoint): EnvCraft's rubric inspection ([`inspection`]), kept at
//!   3, 3 and at least 2, the scores in the report.
//!
//! Sessions are started here, so an audit must run in a single-threaded process; `--jobs`
//! runs tasks in parallel child processes.

pub mod inspection;

use std::path::Path;
use std::time::Instant;

use serde::Serialize;
use serde_json::json;

use crate::session::{Session, SessionError, SessionOptions};
use crate::spec::task::TaskSpec;
use crate::verify::{EntryKind, Expected, Manifest};

/// One check of one task.
#[derive(Debug, Clone, Serialize)]
pub struct AuditCheck {
    pub name: &'static str,
    pub passed: bool,
    pub detail: String,
    /// The rubric inspection's scores.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scores: Option<serde_json::Value>,
}

/// The audit of one task.
#[derive(Debug, Clone, Serialize)]
pub struct TaskAudit {
    /// `ENV/ID`, or the directory when it did not load.
    pub task: String,
    pub env: String,
    pub passed: bool,
    pub checks: Vec<AuditCheck>,
    pub duration_ms: u64,
}

pub const CHECKS: [&str; 7] = [
    "spec",
    "reference",
    "no_false_positive",
    "deterministic",
    "sensitive",
    "template_unchanged",
    INSPECTION,
];

/// The check made only with a judge endpoint.
pub const INSPECTION: &str = "rubric";

fn check(name: &'static str, result: Result<String, String>) -> AuditCheck {
    match result {
        Ok(detail) => AuditCheck {
            name,
            passed: true,
            detail,
            scores: None,
        },
        Err(detail) => AuditCheck {
            name,
            passed: false,
            detail,
            scores: None,
        },
    }
}

fn chain(e: &SessionError) -> String {
    crate::error::chain(e)
}

/// The template's manifests (environment files, task files) to compare before and after.
fn template_state(task: &TaskSpec) -> Result<Vec<Manifest>, String> {
    let mut out = vec![Manifest::of_dir(&task.env.files).map_err(|e| crate::error::chain(&e))?];
    if let Some(files) = &task.files {
        out.push(Manifest::of_dir(files).map_err(|e| crate::error::chain(&e))?);
    }
    Ok(out)
}

/// A session of `task` with its reference solution replayed.
fn replay(task: &TaskSpec, options: &SessionOptions) -> Result<Session, String> {
    let steps = task.solution_steps().map_err(|e| crate::error::chain(&e))?;
    let mut session = Session::create(task, options).map_err(|e| chain(&e))?;
    for step in steps {
        while step.turn > session.turn() {
            match session.next_turn() {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => return Err(chain(&e)),
            }
        }
        let result = session.call(&step.tool, &step.args);
        if result["ok"] == false {
            let message = result["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            session.close();
            return Err(format!(
                "the solution's `{}` call failed: {message}",
                step.tool
            ));
        }
    }
    Ok(session)
}

/// A shell command that flips the first byte of `path` (or writes one into an empty file).
fn flip_command(path: &str) -> String {
    let quoted = format!("'{}'", path.replace('\'', "'\\''"));
    format!(
        "python3 -c \"import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()) or bytearray(b'x'); b[0] ^= 1; open(p, 'wb').write(bytes(b))\" {quoted}"
    )
}

/// Audit one task.
pub fn audit_task(dir: &Path, options: &SessionOptions) -> TaskAudit {
    let started = Instant::now();
    let mut checks = Vec::new();
    let expected_checks = CHECKS.len() - usize::from(options.judge.is_none());
    let finish = |task: String, env: String, checks: Vec<AuditCheck>| {
        let passed = checks.len() == expected_checks && checks.iter().all(|c| c.passed);
        TaskAudit {
            task,
            env,
            passed,
            checks,
            duration_ms: started.elapsed().as_millis() as u64,
        }
    };
    // spec
    let loaded = TaskSpec::load(dir)
        .map_err(|e| crate::error::chain(&e))
        .and_then(|task| {
            task.env
                .check_skills(&options.skills_root)
                .map_err(|e| crate::error::chain(&e))?;
            if task.solution.is_none() {
                return Err("no solution.jsonl: the reference solution is needed".into());
            }
            task.solution_steps().map_err(|e| crate::error::chain(&e))?;
            if task.verifier.has_manifest() {
                Expected::load(&task.dir.join("expected.json")).map_err(|e| {
                    format!(
                        "{} (write it with `envcraft record`)",
                        crate::error::chain(&e)
                    )
                })?;
            }
            Ok(task)
        });
    let task = match loaded {
        Ok(task) => task,
        Err(e) => {
            checks.push(check("spec", Err(e)));
            return finish(dir.display().to_string(), String::new(), checks);
        }
    };
    let name = format!("{}/{}", task.env.name, task.id);
    checks.push(check(
        "spec",
        Ok(format!(
            "{} turn(s), verifier {:?}",
            task.turns.len(),
            task.verifier.kind
        )),
    ));
    let before = template_state(&task);

    // reference
    let mut reference = match replay(&task, options) {
        Ok(s) => s,
        Err(e) => {
            checks.push(check("reference", Err(e)));
            return finish(name, task.env.name.clone(), checks);
        }
    };
    let verdict = reference.verify();
    checks.push(check(
        "reference",
        match &verdict {
            Ok(v) if v.reward == Some(1.0) => Ok("reward 1.0".into()),
            Ok(v) => Err(format!(
                "reward {}; failed: {}",
                v.reward_text(),
                v.failed()
                    .map(|c| c.name.clone())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Err(e) => Err(chain(e)),
        },
    ));

    // no false positive
    let untouched = Session::create(&task, options)
        .map_err(|e| chain(&e))
        .and_then(|mut s| {
            let v = s.verify().map_err(|e| chain(&e));
            s.close();
            v
        });
    checks.push(check(
        "no_false_positive",
        match untouched {
            Ok(v) if !v.passed => Ok(format!(
                "the untouched workspace scores {}",
                v.reward_text()
            )),
            Ok(v) => Err(format!(
                "the untouched workspace passes (reward {})",
                v.reward_text()
            )),
            Err(e) => Err(e),
        },
    ));

    // deterministic
    let first = reference.final_manifest().map_err(|e| chain(&e));
    let second = replay(&task, options).and_then(|mut s| {
        let m = s.final_manifest().map_err(|e| chain(&e));
        s.close();
        m
    });
    checks.push(check(
        "deterministic",
        match (first, second) {
            (Ok(a), Ok(b)) if a.entries() == b.entries() => {
                Ok(format!("{} entries, same twice", a.len()))
            }
            (Ok(a), Ok(b)) => {
                let differ: Vec<String> = a
                    .entries()
                    .iter()
                    .filter(|e| b.get(&e.path) != Some(*e))
                    .chain(b.entries().iter().filter(|e| a.get(&e.path).is_none()))
                    .map(|e| e.path.clone())
                    .take(10)
                    .collect();
                Err(format!("the two replays differ at: {}", differ.join(", ")))
            }
            (Err(e), _) | (_, Err(e)) => Err(e),
        },
    ));

    // sensitive
    let by_manifest = task.verifier.has_manifest();
    let targets: Vec<String> = match by_manifest {
        false => reference
            .changes()
            .map(|c| c.added.into_iter().chain(c.modified).collect())
            .unwrap_or_default(),
        true => Expected::load(&task.dir.join("expected.json"))
            .map(|e| {
                e.files
                    .iter()
                    .filter(|(_, rule)| rule.kind == EntryKind::File)
                    .map(|(p, _)| p.clone())
                    .collect()
            })
            .unwrap_or_default(),
    };
    let mut caught = Vec::new();
    let mut missed = Vec::new();
    for path in &targets {
        let outcome = reference
            .fork()
            .map_err(|e| chain(&e))
            .and_then(|mut fork| {
                let flipped = fork.call("exec", &json!({"command": flip_command(path)}));
                let v = if flipped["ok"] == true && flipped["exit_code"] == 0 {
                    fork.verify().map_err(|e| chain(&e))
                } else {
                    Err(format!("could not flip a byte of {path}: {flipped}"))
                };
                fork.close();
                v
            });
        match outcome {
            Ok(v) if !v.passed => caught.push(path.clone()),
            Ok(_) => missed.push(path.clone()),
            Err(e) => missed.push(format!("{path} ({e})")),
        }
    }
    let sensitive = match by_manifest {
        _ if targets.is_empty() => Err("the verifier checks no file content".to_string()),
        false if !caught.is_empty() => Ok(format!(
            "{} of {} changed files caught",
            caught.len(),
            targets.len()
        )),
        false => Err("no flipped byte in a changed file made the verifier fail".into()),
        _ if missed.is_empty() => Ok(format!("{} checked files, every flip caught", caught.len())),
        _ => Err(format!(
            "a flipped byte went unnoticed in: {}",
            missed.join(", ")
        )),
    };
    checks.push(check("sensitive", sensitive));
    reference.close();

    // template unchanged
    let after = template_state(&task);
    checks.push(check(
        "template_unchanged",
        match (before, after) {
            (Ok(b), Ok(a)) => {
                let same =
                    b.len() == a.len() && b.iter().zip(&a).all(|(x, y)| x.entries() == y.entries());
                if same {
                    Ok("the template hashes the same".into())
                } else {
                    Err("the template changed".into())
                }
            }
            (Err(e), _) | (_, Err(e)) => Err(e),
        },
    ));
    if let Some(endpoint) = &options.judge {
        checks.push(match inspection::inspect(&task, endpoint) {
            Ok(found) => AuditCheck {
                name: INSPECTION,
                passed: found.kept(),
                detail: format!(
                    "solvability {}, validation integrity {}, data consistency {}: {}{}",
                    found.task_solvability,
                    found.validation_integrity,
                    found.data_consistency,
                    if found.kept() {
                        "kept"
                    } else {
                        "not kept (3, 3 and at least 2 are)"
                    },
                    if found.notes.is_empty() {
                        String::new()
                    } else {
                        format!("; {}", found.notes)
                    }
                ),
                scores: Some(found.scores()),
            },
            Err(why) => check(INSPECTION, Err(format!("not run: {why}"))),
        });
    }
    finish(name, task.env.name.clone(), checks)
}

/// Totals per environment and overall, with the pass rate of each check.
pub fn summary(audits: &[TaskAudit]) -> serde_json::Value {
    let mut envs: std::collections::BTreeMap<String, (usize, usize)> = Default::default();
    for a in audits {
        let e = envs
            .entry(if a.env.is_empty() {
                "?".into()
            } else {
                a.env.clone()
            })
            .or_default();
        e.0 += 1;
        e.1 += usize::from(a.passed);
    }
    let rate = |passed: usize, total: usize| {
        if total == 0 {
            0.0
        } else {
            passed as f64 / total as f64
        }
    };
    let per_check: serde_json::Map<String, serde_json::Value> = CHECKS
        .iter()
        .filter(|name| {
            **name != INSPECTION
                || audits
                    .iter()
                    .any(|a| a.checks.iter().any(|c| c.name == INSPECTION))
        })
        .map(|name| {
            let passed = audits
                .iter()
                .filter(|a| a.checks.iter().any(|c| c.name == *name && c.passed))
                .count();
            (name.to_string(), json!(rate(passed, audits.len())))
        })
        .collect();
    let passed = audits.iter().filter(|a| a.passed).count();
    json!({
        "environments": envs.iter().map(|(env, (total, ok))| json!({
            "env": env, "tasks": total, "passed": ok, "pass_rate": rate(*ok, *total)
        })).collect::<Vec<_>>(),
        "tasks": audits.len(),
        "passed": passed,
        "pass_rate": rate(passed, audits.len()),
        "check_pass_rates": per_check,
    })
}
