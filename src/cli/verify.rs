//! `envcraft verify TASK --workspace DIR [--transcript FILE] [--json]`: score a final
//! workspace (a directory) against a task, with the task's own verifier (its judge, when it
//! has one, reads the run's transcript).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use super::judge_args::JudgeArgs;
use super::task_args::StateDir;
use super::task_args::TaskArgs;
use crate::cli::error::Error;
use crate::session::clock::Clock;
use crate::verify::{self, Expected, Manifest};

#[derive(Debug, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    pub task: TaskArgs,
    /// The final workspace to score.
    #[arg(long, value_name = "DIR")]
    pub workspace: PathBuf,
    /// The run's transcript (OpenClaw JSONL, as `run --keep` writes it), for a judge.
    #[arg(long, value_name = "FILE")]
    pub transcript: Option<PathBuf>,
    /// Print the verdict as JSON (reward, passed, checks, and what did not run).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub state_dir: StateDir,
    #[command(flatten)]
    pub judge: JudgeArgs,
}

pub fn run(args: VerifyArgs) -> Result<i32, Error> {
    let state_root = crate::workspace::state_root::open(args.state_dir.path.clone())?;
    let task = args.task.open(&state_root)?;
    let workspace = args.workspace.canonicalize().map_err(|source| {
        crate::sandbox::SandboxError::WorkspaceMissing {
            path: args.workspace.clone(),
            source,
        }
    })?;
    let verifier = task.verifier.clone();
    let endpoint = args.judge.endpoint(&state_root)?;
    let manifest = match verifier.has_manifest() {
        false => None,
        true => {
            let path = task.dir.join("expected.json");
            if !path.exists() {
                return Err(crate::session::SessionError::NoExpected {
                    task: format!("{}/{}", task.env.name, task.id),
                }
                .into());
            }
            let expected = Expected::load(&path)?;
            // The workspace's start: the task's files laid over the environment's.
            let mut initial = Manifest::of_dir(&task.env.files)?;
            if let Some(files) = &task.files {
                initial = initial.overlaid_with(&Manifest::of_dir(files)?);
            }
            let final_ = Manifest::of_dir(&workspace)?;
            Some(verify::verify(
                &expected,
                &initial,
                &final_,
                Some(&workspace),
            ))
        }
    };
    let grader = match verifier.command {
        None => None,
        Some(_) => {
            let clock = Clock {
                base_unix: task.effective_base_time().unix_seconds(),
                step_secs: task.env.time_step_secs,
            };
            Some(verify::command::run_grader(
                &task,
                vec![workspace.clone()],
                None,
                clock.env_at(0),
                &state_root,
            )?)
        }
    };
    let judge = verifier.judge.as_ref().map(|spec| {
        let run = verify::judge::Run {
            task: &task,
            transcript: args.transcript.as_deref(),
            workspace: Some(&workspace),
        };
        verify::judge::judge(endpoint.as_ref(), spec, &run)
    });
    let verdict = verify::combine(
        &verifier,
        verify::Parts {
            manifest,
            grader,
            judge,
        },
    );
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer(&mut out, &verdict).map_err(|e| Error::Output(e.into()))?;
        writeln!(out).map_err(Error::Output)?;
    } else {
        writeln!(
            out,
            "{}/{}: reward {} ({})",
            task.env.name,
            task.id,
            verdict.reward_text(),
            if verdict.passed {
                "passed"
            } else {
                "not passed"
            }
        )
        .map_err(Error::Output)?;
        for check in verdict.failed() {
            writeln!(
                out,
                "  failed: {}: expected {}, got {}",
                check.name, check.expected, check.actual
            )
            .map_err(Error::Output)?;
        }
    }
    Ok(if verdict.passed { 0 } else { 1 })
}
