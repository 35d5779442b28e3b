//! `envcraft audit PATH... [--json] [--jobs N]`: audit every task under the paths and report
//! pass rates per environment.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use clap::Args;
use serde_json::json;

use super::task_args::{SkillsDir, StateDir};
use crate::audit::{self, TaskAudit};
use crate::cli::error::Error;

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// Task directories, environment directories, directories of environments, or ClawGym,
    /// PinchBench or Harbor task sets (imported on the fly).
    #[arg(value_name = "PATH", required = true)]
    pub paths: Vec<PathBuf>,
    /// Print one JSON object (tasks with their checks, and the totals).
    #[arg(long)]
    pub json: bool,
    /// Tasks audited at once, in parallel processes.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: u16,
    #[command(flatten)]
    pub skills: SkillsDir,
    #[command(flatten)]
    pub state_dir: StateDir,
    #[command(flatten)]
    pub base: super::task_args::BaseArg,
    /// With --judge-url: judge tasks are judged, and each task gets EnvCraft's rubric
    /// inspection (check `rubric`).
    #[command(flatten)]
    pub judge: super::judge_args::JudgeArgs,
}

/// The flags a child `envcraft audit` is given besides `--json TASK`.
pub(crate) fn child_args(
    skills: &SkillsDir,
    state_dir: &StateDir,
    judge: &super::judge_args::JudgeArgs,
) -> Vec<OsString> {
    let mut out: Vec<OsString> = vec!["--skills".into(), skills.path.clone().into()];
    if let Some(state) = &state_dir.path {
        out.extend(["--state-dir".into(), state.clone().into()]);
    }
    out.extend(judge.to_args());
    out
}

/// One task audited by a child `envcraft audit --json ARGS TASK`.
fn spawn(task: &Path, args: &[OsString]) -> std::io::Result<Child> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg("audit").arg("--json").args(args).arg(task);
    cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn()
}

/// Audit `tasks` in child processes, `jobs` at once; one audit per task, in order (`each`
/// is told of each as it ends).
pub(crate) fn in_children(
    tasks: &[PathBuf],
    jobs: usize,
    args: &[OsString],
    mut each: impl FnMut(&TaskAudit),
) -> Vec<TaskAudit> {
    let mut audits = Vec::new();
    let mut running: Vec<(PathBuf, std::io::Result<Child>)> = Vec::new();
    let mut queue = tasks.iter();
    loop {
        while running.len() < jobs.max(1) {
            let Some(task) = queue.next() else { break };
            running.push((task.clone(), spawn(task, args)));
        }
        if running.is_empty() {
            break;
        }
        let (task, child) = running.remove(0);
        let a = match child {
            Ok(child) => collect(child, &task),
            Err(e) => failed(&task, format!("the audit process could not start: {e}")),
        };
        each(&a);
        audits.push(a);
    }
    audits
}

fn failed(task: &Path, detail: String) -> TaskAudit {
    TaskAudit {
        task: task.display().to_string(),
        env: String::new(),
        passed: false,
        checks: vec![audit::AuditCheck {
            name: "spec",
            passed: false,
            detail,
            scores: None,
        }],
        duration_ms: 0,
    }
}

fn collect(child: Child, task: &Path) -> TaskAudit {
    let failed = |detail: String| failed(task, detail);
    let out = match child.wait_with_output() {
        Ok(out) => out,
        Err(e) => return failed(format!("the audit process failed: {e}")),
    };
    let parsed: Result<serde_json::Value, _> = serde_json::from_slice(&out.stdout);
    match parsed.ok().and_then(|v| v["tasks"].get(0).cloned()) {
        Some(t) => TaskAudit {
            task: t["task"].as_str().unwrap_or_default().to_string(),
            env: t["env"].as_str().unwrap_or_default().to_string(),
            passed: t["passed"].as_bool().unwrap_or(false),
            checks: t["checks"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| {
                    let name = audit::CHECKS
                        .iter()
                        .find(|n| Some(**n) == c["name"].as_str())?;
                    Some(audit::AuditCheck {
                        name,
                        passed: c["passed"].as_bool().unwrap_or(false),
                        detail: c["detail"].as_str().unwrap_or_default().to_string(),
                        scores: c.get("scores").cloned(),
                    })
                })
                .collect(),
            duration_ms: t["duration_ms"].as_u64().unwrap_or(0),
        },
        None => failed(format!("the audit process ended with {}", out.status)),
    }
}

/// The envcraft tasks under `path`: its own, or those of the foreign task set it is, imported
/// into a temporary tree (returned, removed when dropped; what could not be imported said on
/// stderr). A Harbor task whose image the store cannot give is refused before anything starts.
pub fn tasks_of(
    path: &Path,
    base: super::task_args::BaseArg,
    state_dir: Option<&Path>,
) -> Result<(Option<tempfile::TempDir>, Vec<PathBuf>), Error> {
    use crate::import::{self, Format};
    let found = crate::spec::task::find_tasks(path);
    let format = match import::detect(path) {
        Some(Format::Harbor) => Format::Harbor,
        Some(format) if found.is_empty() => format,
        _ => return Ok((None, found)),
    };
    let (temp, mut outcome) = import::import_all_to_temp(format, path, &base.import_options())?;
    for (id, why) in &outcome.skipped {
        eprintln!("skipped {} task {id}: {why}", format.name());
    }
    let mut tasks = Vec::new();
    let state_root = match outcome.imported.iter().any(|t| t.image.is_some()) {
        true => Some(crate::workspace::state_root::open(
            state_dir.map(Path::to_path_buf),
        )?),
        false => None,
    };
    for imported in &mut outcome.imported {
        if format == Format::Harbor {
            super::task_args::say_notes(imported);
        }
        if let Some(root) = &state_root
            && let Err(e) = super::task_args::check_image(imported, root)
        {
            eprintln!("skipped {} task {}: {e}", format.name(), imported.task);
            continue;
        }
        tasks.push(imported.task_dir.clone());
    }
    Ok((Some(temp), tasks))
}

pub fn run(args: AuditArgs) -> Result<i32, Error> {
    let mut tasks: Vec<PathBuf> = Vec::new();
    let mut imported = Vec::new();
    for path in &args.paths {
        let (temp, found) = tasks_of(path, args.base, args.state_dir.path.as_deref())?;
        tasks.extend(found);
        imported.extend(temp);
    }
    let options = crate::session::SessionOptions::new(
        crate::workspace::state_root::open(args.state_dir.path.clone())?,
        args.skills.path.clone(),
    );
    let options = crate::session::SessionOptions {
        judge: args
            .judge
            .endpoint(&options.state_root)?
            .map(std::sync::Arc::new),
        ..options
    };
    let mut audits = Vec::new();
    if args.jobs <= 1 || tasks.len() <= 1 {
        for task in &tasks {
            let a = audit::audit_task(task, &options);
            if !args.json {
                eprintln!("{} {}", if a.passed { "ok    " } else { "FAILED" }, a.task);
            }
            audits.push(a);
        }
    } else {
        let child = child_args(&args.skills, &args.state_dir, &args.judge);
        audits = in_children(&tasks, usize::from(args.jobs), &child, |a| {
            if !args.json {
                eprintln!("{} {}", if a.passed { "ok    " } else { "FAILED" }, a.task);
            }
        });
    }
    let summary = audit::summary(&audits);
    let mut out = std::io::stdout().lock();
    if args.json {
        let report = json!({"tasks": audits, "summary": summary});
        serde_json::to_writer(&mut out, &report).map_err(|e| Error::Output(e.into()))?;
        writeln!(out).map_err(Error::Output)?;
    } else {
        for a in audits.iter().filter(|a| !a.passed) {
            writeln!(out, "{}:", a.task).map_err(Error::Output)?;
            for c in a.checks.iter().filter(|c| !c.passed) {
                writeln!(out, "  {}: {}", c.name, c.detail).map_err(Error::Output)?;
            }
        }
        writeln!(
            out,
            "\n{:<24} {:>6} {:>7} {:>10}",
            "environment", "tasks", "passed", "pass rate"
        )
        .map_err(Error::Output)?;
        for e in summary["environments"].as_array().into_iter().flatten() {
            writeln!(
                out,
                "{:<24} {:>6} {:>7} {:>9.1}%",
                e["env"].as_str().unwrap_or_default(),
                e["tasks"].as_u64().unwrap_or(0),
                e["passed"].as_u64().unwrap_or(0),
                e["pass_rate"].as_f64().unwrap_or(0.0) * 100.0
            )
            .map_err(Error::Output)?;
        }
        writeln!(
            out,
            "{:<24} {:>6} {:>7} {:>9.1}%",
            "total",
            summary["tasks"].as_u64().unwrap_or(0),
            summary["passed"].as_u64().unwrap_or(0),
            summary["pass_rate"].as_f64().unwrap_or(0.0) * 100.0
        )
        .map_err(Error::Output)?;
        let rates: Vec<String> = audit::CHECKS
            .iter()
            .map(|c| {
                format!(
                    "{c} {:.0}%",
                    summary["check_pass_rates"][c].as_f64().unwrap_or(0.0) * 100.0
                )
            })
            .collect();
        writeln!(out, "checks: {}", rates.join(", ")).map_err(Error::Output)?;
    }
    let all = !audits.is_empty() && audits.iter().all(|a| a.passed);
    Ok(if all { 0 } else { 1 })
}
