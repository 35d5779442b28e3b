//! `envcraft record TASK [--actions TRAJ.jsonl]`: run the reference solution and write the
//! task's expected.json from the workspace it leaves.

use std::path::PathBuf;

use clap::Args;

use super::task_args::{SessionArgs, TaskArgs};
use crate::cli::error::Error;
use crate::session::Session;
use crate::session::trajectory::{self, Step};

#[derive(Debug, Args)]
pub struct RecordArgs {
    #[command(flatten)]
    pub task: TaskArgs,
    /// The calls to run (default: the task's solution.jsonl).
    #[arg(long, value_name = "TRAJ.jsonl")]
    pub actions: Option<PathBuf>,
    #[command(flatten)]
    pub session: SessionArgs,
}

pub fn run(args: RecordArgs) -> Result<i32, Error> {
    let options = args.session.options(&args.task)?;
    let task = args.task.open(&options.state_root)?;
    let path = match (&args.actions, &task.solution) {
        (Some(p), _) => p.clone(),
        (None, Some(p)) => p.clone(),
        (None, None) => return Err(Error::NoTrajectory(task.dir.clone())),
    };
    let steps = trajectory::load(&path)?;
    let mut session = Session::create(&task, &options)?;
    let mut failed = Vec::new();
    for step in steps {
        match step {
            Step::Call { tool, args, turn } => {
                while turn.is_some_and(|t| t > session.turn()) {
                    if session.next_turn()?.is_none() {
                        break;
                    }
                }
                let result = session.call(&tool, &args);
                if result["ok"] == false {
                    failed.push(format!("{tool}: {}", result["error"]["message"]));
                }
            }
            Step::NextTurn => {
                session.next_turn()?;
            }
        }
    }
    if !failed.is_empty() {
        session.close();
        return Err(Error::SolutionFailed(failed.join("; ")));
    }
    let expected = session.record()?;
    session.close();
    let target = task.dir.join("expected.json");
    std::fs::write(&target, expected.to_json() + "\n").map_err(Error::Output)?;
    println!(
        "{}/{}: wrote {} ({} file rules, {} absent)",
        task.env.name,
        task.id,
        target.display(),
        expected.files.len(),
        expected.absent.len()
    );
    Ok(0)
}
