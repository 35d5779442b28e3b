//! `envcraft suite DIR [--jobs N] [--agent noop|reference|openclaw] [--json] [--report FILE]
//! [--keep DIR]`:
//! run every task under DIR in its own session (in parallel child processes), verify each, and
//! report per environment. DIR may also be a ClawGym, PinchBench or Harbor task set, imported
//! on the fly. With `--agent openclaw --model-url URL`, OpenClaw itself is each task's agent.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use clap::Args;
use serde_json::{Value, json};

use super::agent_args::ModelArgs;
use super::judge_args::JudgeArgs;
use super::task_args::SkillsDir;
use crate::cli::error::Error;

#[derive(Debug, Args)]
pub struct SuiteArgs {
    /// Task directories, environment directories, directories of environments, or ClawGym,
    /// PinchBench or Harbor task sets.
    #[arg(value_name = "DIR", required = true)]
    pub paths: Vec<PathBuf>,
    /// Tasks run at once, in parallel processes.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: u16,
    /// `reference`: replay each task's solution.jsonl; `noop`: call nothing (every reward
    /// should then be well below 1); `openclaw`: OpenClaw runs each task's prompt against
    /// --model-url (see `run --agent openclaw`).
    #[arg(long, default_value = "reference", value_parser = ["reference", "noop", "openclaw"])]
    pub agent: String,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Print one JSON object (every task, and the totals).
    #[arg(long)]
    pub json: bool,
    /// Also write the report to FILE: an HTML page (see `envcraft view`) when FILE ends in
    /// `.html` or `.htm`, else Markdown, with the failed checks spelled out.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Keep each task's run (`run --keep`) in DIR/ENV/TASK, its page in DIR/ENV/TASK/view.html;
    /// the HTML report links to those pages. DIR must be new or empty.
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
    #[command(flatten)]
    pub skills: SkillsDir,
    #[command(flatten)]
    pub state_dir: super::task_args::StateDir,
    #[command(flatten)]
    pub base: super::task_args::BaseArg,
    #[command(flatten)]
    pub judge: JudgeArgs,
}

/// One task's run, as the suite keeps it.
struct TaskRun {
    task: String,
    /// Where the run was kept, relative to `--keep DIR` (`ENV/TASK`).
    kept: Option<String>,
    env: String,
    reward: Option<f64>,
    passed: bool,
    /// The verifier's parts that did not run (a judge without an endpoint): no score then.
    not_run: Vec<String>,
    failed_checks: Vec<String>,
    error: Option<String>,
    duration_ms: u64,
    create_ms: f64,
    calls_ms: f64,
    verify_ms: f64,
    cleanup_ms: f64,
}

/// Where a task's run is kept beneath `--keep DIR`: `ENV/TASK`, from its directory's names.
fn kept_name(task: &Path) -> String {
    let name = |p: Option<&Path>| {
        p.and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    format!(
        "{}/{}",
        name(task.parent().and_then(Path::parent)),
        name(Some(task))
    )
}

fn spawn(task: &Path, args: &SuiteArgs, noop: &Path) -> std::io::Result<Child> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg("run")
        .arg(task)
        .arg("--json")
        .arg("--skills")
        .arg(&args.skills.path);
    if let Some(keep) = &args.keep {
        cmd.arg("--keep").arg(keep.join(kept_name(task)));
    }
    if let Some(state) = &args.state_dir.path {
        cmd.arg("--state-dir").arg(state);
    }
    match args.agent.as_str() {
        "noop" => {
            cmd.arg("--actions").arg(noop);
        }
        "openclaw" => {
            cmd.args(["--agent", "openclaw"]).args(args.model.to_args());
        }
        _ => {}
    }
    cmd.args(args.judge.to_args());
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn()
}

fn collect(child: Child, task: &Path, keep: bool) -> TaskRun {
    let fallback_env = task
        .parent()
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let fallback_name = format!(
        "{fallback_env}/{}",
        task.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    let failed = |error: String| TaskRun {
        task: fallback_name.clone(),
        kept: None,
        env: fallback_env.clone(),
        reward: None,
        passed: false,
        not_run: Vec::new(),
        failed_checks: Vec::new(),
        error: Some(error),
        duration_ms: 0,
        create_ms: 0.0,
        calls_ms: 0.0,
        verify_ms: 0.0,
        cleanup_ms: 0.0,
    };
    let out = match child.wait_with_output() {
        Ok(out) => out,
        Err(e) => return failed(format!("the run process failed: {e}")),
    };
    let Ok(report) = serde_json::from_slice::<Value>(&out.stdout) else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return failed(
            stderr
                .trim()
                .lines()
                .last()
                .unwrap_or("no report")
                .to_string(),
        );
    };
    let calls_us: u64 = report["actions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["duration_us"].as_u64())
        .sum();
    let verify_us = report["verify_us"].as_u64().unwrap_or(0);
    let duration_ms = report["duration_ms"].as_u64().unwrap_or(0);
    let task_name = report["task"]
        .as_str()
        .unwrap_or(&fallback_name)
        .to_string();
    TaskRun {
        env: task_name
            .split('/')
            .next()
            .unwrap_or(&fallback_env)
            .to_string(),
        task: task_name,
        kept: keep.then(|| kept_name(task)),
        reward: report["reward"].as_f64(),
        passed: report["passed"].as_bool().unwrap_or(false),
        not_run: report["not_run"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(String::from)
            .collect(),
        failed_checks: report["checks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["passed"] == false)
            .map(|c| {
                format!(
                    "{}: expected {}, got {}",
                    c["name"].as_str().unwrap_or_default(),
                    c["expected"].as_str().unwrap_or_default(),
                    c["actual"].as_str().unwrap_or_default()
                )
            })
            .collect(),
        error: report["verifier_error"].as_str().map(String::from),
        duration_ms,
        create_ms: report["create_us"].as_u64().unwrap_or(0) as f64 / 1000.0,
        calls_ms: calls_us as f64 / 1000.0,
        verify_ms: verify_us as f64 / 1000.0,
        cleanup_ms: report["cleanup_us"].as_u64().unwrap_or(0) as f64 / 1000.0,
    }
}

impl TaskRun {
    /// Whether the task has a score: a run that failed scores 0; a task whose verifier had a
    /// part that did not run has none, and is left out of the means.
    fn scored(&self) -> bool {
        self.not_run.is_empty()
    }
}

/// Per environment: (tasks, passed, reward sum, time sum in ms, tasks scored).
type EnvTotals = (usize, usize, f64, u64, usize);

fn per_env(runs: &[TaskRun]) -> BTreeMap<String, EnvTotals> {
    let mut envs: BTreeMap<String, EnvTotals> = BTreeMap::new();
    for r in runs {
        let e = envs.entry(r.env.clone()).or_default();
        e.0 += 1;
        e.1 += usize::from(r.passed);
        if r.scored() {
            e.2 += r.reward.unwrap_or(0.0);
            e.4 += 1;
        }
        e.3 += r.duration_ms;
    }
    envs
}

fn table(runs: &[TaskRun], markdown: bool) -> String {
    let mut out = String::new();
    let envs = per_env(runs);
    let w = envs.keys().map(String::len).max().unwrap_or(0).max(24);
    let row = |name: &str, (tasks, passed, reward, ms, scored): EnvTotals| {
        let mean = if scored == 0 {
            0.0
        } else {
            reward / scored as f64
        };
        if markdown {
            format!(
                "| {name} | {tasks} | {passed} | {mean:.3} | {:.1} |\n",
                ms as f64 / 1000.0
            )
        } else {
            format!(
                "{name:<w$} {tasks:>6} {passed:>7} {mean:>12.3} {:>9.1}\n",
                ms as f64 / 1000.0
            )
        }
    };
    if markdown {
        out.push_str("| environment | tasks | passed | mean reward | time (s) |\n| --- | ---: | ---: | ---: | ---: |\n");
    } else {
        out.push_str(&format!(
            "{:<w$} {:>6} {:>7} {:>12} {:>9}\n",
            "environment", "tasks", "passed", "mean reward", "time (s)"
        ));
    }
    let mut total = (0, 0, 0.0, 0, 0);
    for (env, t) in &envs {
        out.push_str(&row(env, *t));
        total = (
            total.0 + t.0,
            total.1 + t.1,
            total.2 + t.2,
            total.3 + t.3,
            total.4 + t.4,
        );
    }
    out.push_str(&row("total", total));
    out
}

pub fn run(args: SuiteArgs) -> Result<i32, Error> {
    let started = Instant::now();
    if args.agent == "openclaw" && args.model.model_url.is_none() {
        return Err(Error::NoModelUrl);
    }
    let mut tasks: Vec<PathBuf> = Vec::new();
    // Foreign task sets are imported into temporary trees, kept until the suite ends.
    let mut imported = Vec::new();
    for path in &args.paths {
        let (temp, found) =
            super::audit::tasks_of(path, args.base, args.state_dir.path.as_deref())?;
        tasks.extend(found);
        imported.extend(temp);
    }
    if tasks.is_empty() {
        let names: Vec<String> = args.paths.iter().map(|p| p.display().to_string()).collect();
        return Err(Error::NoTasks(names.join(", ")));
    }
    if let Some(keep) = &args.keep
        && std::fs::read_dir(keep).is_ok_and(|mut d| d.next().is_some())
    {
        return Err(crate::workspace::WorkspaceError::KeepTargetNotEmpty(keep.clone()).into());
    }
    let noop = tempfile::NamedTempFile::new().map_err(Error::Output)?;
    let tty = std::io::stderr().is_terminal();
    let mut runs = Vec::with_capacity(tasks.len());
    let mut running: Vec<(PathBuf, Child)> = Vec::new();
    let mut queue = tasks.iter();
    loop {
        while running.len() < usize::from(args.jobs) {
            let Some(task) = queue.next() else { break };
            running.push((
                task.clone(),
                spawn(task, &args, noop.path()).map_err(Error::Output)?,
            ));
        }
        if running.is_empty() {
            break;
        }
        let (task, child) = running.remove(0);
        let r = collect(child, &task, args.keep.is_some());
        let done = runs.len() + 1;
        let status = match r.reward {
            Some(x) => format!("reward {x:.3}"),
            None if !r.scored() => format!("not scored: {} not run", r.not_run.join(", ")),
            None => "no reward".into(),
        };
        if !args.json {
            let mut err = std::io::stderr();
            if tty {
                let width = 30;
                let filled = done * width / tasks.len().max(1);
                let _ = write!(
                    err,
                    "\r\x1b[2K[{}{}] {done}/{} {} ({status})",
                    "#".repeat(filled),
                    " ".repeat(width - filled),
                    tasks.len(),
                    r.task
                );
            } else {
                let _ = writeln!(err, "{done}/{} {} {status}", tasks.len(), r.task);
            }
        }
        runs.push(r);
    }
    if tty && !args.json {
        eprintln!();
    }
    runs.sort_by(|a, b| a.task.cmp(&b.task));
    let mean = |f: fn(&TaskRun) -> f64| {
        if runs.is_empty() {
            0.0
        } else {
            runs.iter().map(f).sum::<f64>() / runs.len() as f64
        }
    };
    let scored: Vec<&TaskRun> = runs.iter().filter(|r| r.scored()).collect();
    let totals = json!({
        "tasks": runs.len(),
        "passed": runs.iter().filter(|r| r.passed).count(),
        "not_scored": runs.len() - scored.len(),
        "mean_reward": scored.iter().map(|r| r.reward.unwrap_or(0.0)).sum::<f64>()
            / scored.len().max(1) as f64,
        "wall_s": started.elapsed().as_secs_f64(),
        "tasks_per_s": runs.len() as f64 / started.elapsed().as_secs_f64().max(1e-9),
        "mean_create_ms": mean(|r| r.create_ms),
        "mean_calls_ms": mean(|r| r.calls_ms),
        "mean_verify_ms": mean(|r| r.verify_ms),
        "mean_cleanup_ms": mean(|r| r.cleanup_ms),
    });
    let report = json_report(&args, &runs, totals);
    if let Some(path) = &args.report {
        let html = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("html") || e.eq_ignore_ascii_case("htm"));
        let text = if html {
            let page_dir = path.parent().map(PathBuf::from).unwrap_or_default();
            crate::view::suite_page(&report, args.keep.as_deref(), Some(&page_dir))
        } else {
            markdown(&args, &runs)
        };
        std::fs::write(path, text).map_err(Error::Output)?;
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer(&mut out, &report).map_err(|e| Error::Output(e.into()))?;
        writeln!(out).map_err(Error::Output)?;
    } else {
        write!(out, "{}", table(&runs, false)).map_err(Error::Output)?;
        writeln!(
            out,
            "{:.1} tasks/s; per task: session {:.1} ms, calls {:.1} ms, verify {:.1} ms, cleanup {:.1} ms",
            report["totals"]["tasks_per_s"].as_f64().unwrap_or(0.0),
            report["totals"]["mean_create_ms"].as_f64().unwrap_or(0.0),
            report["totals"]["mean_calls_ms"].as_f64().unwrap_or(0.0),
            report["totals"]["mean_verify_ms"].as_f64().unwrap_or(0.0),
            report["totals"]["mean_cleanup_ms"].as_f64().unwrap_or(0.0)
        )
        .map_err(Error::Output)?;
    }
    // The reference agent must pass everything; the noop agent must pass nothing; a real
    // agent's run succeeds when every task got a reward (how many passed is what it measures).
    let ok = match args.agent.as_str() {
        "noop" => runs.iter().all(|r| !r.passed),
        "openclaw" => !runs.is_empty() && runs.iter().all(|r| r.reward.is_some()),
        _ => !runs.is_empty() && runs.iter().all(|r| r.passed),
    };
    Ok(if ok { 0 } else { 1 })
}

/// The `--json` object: every task, each environment, the totals (and with `--keep`, where the
/// runs were kept: `kept` at the top, each task's `kept` beneath it).
fn json_report(args: &SuiteArgs, runs: &[TaskRun], totals: Value) -> Value {
    let tasks_json: Vec<Value> = runs
        .iter()
        .map(|r| {
            json!({
                "task": r.task, "env": r.env, "reward": r.reward, "passed": r.passed,
                "not_run": r.not_run,
                "failed_checks": r.failed_checks, "error": r.error, "duration_ms": r.duration_ms,
                "create_ms": r.create_ms, "calls_ms": r.calls_ms, "verify_ms": r.verify_ms,
                "cleanup_ms": r.cleanup_ms, "kept": r.kept,
            })
        })
        .collect();
    let envs: Vec<Value> = per_env(runs)
        .into_iter()
        .map(|(env, (tasks, passed, reward, ms, scored))| {
            json!({"env": env, "tasks": tasks, "passed": passed, "not_scored": tasks - scored,
                   "mean_reward": reward / scored.max(1) as f64, "time_ms": ms})
        })
        .collect();
    let kept = args
        .keep
        .as_ref()
        .map(|k| std::path::absolute(k).unwrap_or_else(|_| k.clone()));
    json!({"agent": args.agent, "tasks": tasks_json, "environments": envs, "totals": totals,
           "kept": kept.map(|k| k.to_string_lossy().into_owned())})
}

/// The Markdown report: the table, then each task not passed with its error and failed checks.
fn markdown(args: &SuiteArgs, runs: &[TaskRun]) -> String {
    let mut md = format!(
        "# envcraft suite ({} agent)\n\n{}\n",
        args.agent,
        table(runs, true)
    );
    let failed: Vec<&TaskRun> = runs.iter().filter(|r| !r.passed).collect();
    if !failed.is_empty() {
        md.push_str("\n## Not passed\n\n");
        for r in failed {
            md.push_str(&format!("### {}\n\n", r.task));
            if let Some(e) = &r.error {
                md.push_str(&format!("- error: {e}\n"));
            }
            for c in &r.failed_checks {
                md.push_str(&format!("- {c}\n"));
            }
            md.push('\n');
        }
    }
    md
}
