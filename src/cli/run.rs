//! `envcraft run TASK --actions TRAJ.jsonl [--json] [--keep DIR]`: replay tool calls in a fresh
//! session, verify the final workspace, and report what happened. With `--agent openclaw
//! --model-url URL`, OpenClaw itself is the agent of the session instead (see `crate::agent`).

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use serde_json::{Value, json};

use super::agent_args::ModelArgs;
use super::judge_args::JudgeArgs;
use super::task_args::{SessionArgs, TaskArgs};
use crate::agent::{AgentError, Install, ModelUrl, OpenClaw};
use crate::cli::error::Error;
use crate::session::Session;
use crate::session::trajectory::{self, Step};

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub task: TaskArgs,
    /// The tool calls to replay (JSONL); default: the task's solution.jsonl.
    #[arg(long, value_name = "TRAJ.jsonl")]
    pub actions: Option<PathBuf>,
    /// Print one JSON object instead of a summary.
    #[arg(long)]
    pub json: bool,
    /// Copy the changed files (and the originals of the modified and deleted ones), the
    /// transcript and the report to this (new or empty) directory, with the run's page
    /// (`view.html`, see `envcraft view`).
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
    #[command(flatten)]
    pub session: SessionArgs,
    #[command(flatten)]
    pub agent: AgentArgs,
    #[command(flatten)]
    pub judge: JudgeArgs,
}

impl RunArgs {
    /// The session's options: the state root's, the judge's.
    fn session_options(&self) -> Result<crate::session::SessionOptions, Error> {
        let mut options = self.session.options(&self.task)?;
        options.judge = self
            .judge
            .endpoint(&options.state_root)?
            .map(std::sync::Arc::new);
        Ok(options)
    }
}

/// The agent that runs the task's prompt, instead of a replayed trajectory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AgentKind {
    /// OpenClaw (npm `openclaw`), unchanged, inside the session's sandbox.
    Openclaw,
}

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Run the task's prompt through this agent instead of replaying tool calls.
    #[arg(long, value_enum, value_name = "AGENT")]
    pub agent: Option<AgentKind>,
    #[command(flatten)]
    pub model: ModelArgs,
}

pub fn run(args: RunArgs) -> Result<i32, Error> {
    if args.agent.agent.is_some() {
        return run_agent(args);
    }
    let start = Instant::now();
    let mut task = args.task.load()?;
    let actions_path = match (&args.actions, &task.solution) {
        (Some(p), _) => p.clone(),
        (None, Some(p)) => p.clone(),
        (None, None) => return Err(Error::NoTrajectory(task.dir.clone())),
    };
    let steps = trajectory::load(&actions_path)?;
    let options = args.session_options()?;
    task.check_image(&options.state_root)?;
    let creating = Instant::now();
    let mut session = Session::create(&task, &options)?;
    let create_us = creating.elapsed().as_micros() as u64;
    let mut actions = ActionLog::default();
    for step in steps {
        match step {
            Step::Call {
                tool,
                args: call_args,
                turn,
            } => {
                while turn.is_some_and(|t| t > session.turn()) {
                    let prompt = session.next_turn()?;
                    actions.push(&json!({"next_turn": prompt}));
                    if prompt.is_none() {
                        break;
                    }
                }
                let began = Instant::now();
                let result = session.call(&tool, &call_args);
                let duration_us = began.elapsed().as_micros() as u64;
                actions.push(&json!({"tool": tool, "args": call_args, "result": result, "duration_us": duration_us}));
            }
            Step::NextTurn => {
                let prompt = session.next_turn()?;
                actions.push(&json!({"next_turn": prompt}));
            }
        }
    }
    finish(&args, &task, session, actions, None, create_us, start)
}

/// `run --agent openclaw`: the task's turns through OpenClaw in the session's sandbox.
fn run_agent(args: RunArgs) -> Result<i32, Error> {
    let start = Instant::now();
    if args.actions.is_some() {
        return Err(Error::AgentWithActions);
    }
    let url = args
        .agent
        .model
        .model_url
        .as_deref()
        .ok_or(Error::NoModelUrl)?;
    let agent = OpenClaw::new(
        Install::locate(args.agent.model.openclaw_dir.as_deref())?,
        ModelUrl::parse(url).map_err(AgentError::from)?,
        args.agent.model.model.clone(),
        args.agent.model.turn_timeout,
    )?;
    let mut task = args.task.load()?;
    let options = agent.session_options(&task, args.session_options()?)?;
    task.check_image(&options.state_root)?;
    let creating = Instant::now();
    let mut session = Session::create(&task, &options)?;
    let create_us = creating.elapsed().as_micros() as u64;
    let ran = agent.run(&mut session);
    let ran = match ran {
        Ok(ran) => ran,
        Err(e) => {
            session.close();
            return Err(e.into());
        }
    };
    let mut actions = ActionLog {
        count: ran.tool_calls,
        failed: ran.failed_tool_calls,
        ..ActionLog::default()
    };
    for turn in &ran.turns {
        actions.text_push(&serde_json::to_value(turn).unwrap_or_default());
    }
    let agent_report = serde_json::to_value(&ran).unwrap_or_default();
    finish(
        &args,
        &task,
        session,
        actions,
        Some(agent_report),
        create_us,
        start,
    )
}

/// Verify, report and close: the same for a replay and for an agent's run.
fn finish(
    args: &RunArgs,
    task: &crate::spec::task::TaskSpec,
    mut session: Session,
    actions: ActionLog,
    agent: Option<Value>,
    create_us: u64,
    start: Instant,
) -> Result<i32, Error> {
    let changes = match session.changes() {
        Ok(c) => c,
        Err(e) => {
            session.close();
            return Err(e.into());
        }
    };
    if let Some(dir) = &args.keep {
        session.keep_changes(dir)?;
    }
    // The verdict, or why there is none (the task has no expected.json yet, say).
    let verify_started = Instant::now();
    let verified = session.verify();
    let verify_us = verify_started.elapsed().as_micros() as u64;
    let verdict = match verified {
        Ok(v) => serde_json::to_value(&v).unwrap_or(Value::Null),
        Err(e) => {
            json!({"reward": null, "passed": null, "checks": [], "verifier_error": crate::error::chain(&e)})
        }
    };
    let failed = actions.failed;
    let session_id = session.id().to_string();
    let enforced = session.enforced().clone();
    let transcript_truncated = session.transcript_truncated();
    let closing = Instant::now();
    session.close();
    let cleanup_us = closing.elapsed().as_micros() as u64;
    let mut report = json!({
        "task": format!("{}/{}", task.env.name, task.id),
        "session": session_id,
        "reward": verdict["reward"],
        "passed": verdict["passed"],
        "checks": verdict["checks"],
        "verifier_error": verdict.get("verifier_error"),
        "not_run": verdict.get("not_run"),
        "partial_reward": verdict.get("partial_reward"),
        "failed_calls": failed,
        "transcript_truncated": transcript_truncated,
        "changes": changes,
        "enforced": enforced,
        "create_us": create_us,
        "verify_us": verify_us,
        "cleanup_us": cleanup_us,
        "duration_ms": start.elapsed().as_millis() as u64,
    });
    if let Some(agent) = agent {
        report["agent"] = agent;
    }
    if let Some(dir) = &args.keep {
        keep_report(dir, &report, &actions.durations)?;
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        // `actions` first (the keys in serde_json's order), then the rest of the report.
        let rest = crate::json::to_vec(&report);
        let mut text = Vec::with_capacity(actions.text.len() + rest.len() + 16);
        text.extend_from_slice(b"{\"actions\":[");
        text.extend_from_slice(&actions.text);
        text.extend_from_slice(b"],");
        text.extend_from_slice(&rest[1..]);
        text.push(b'\n');
        out.write_all(&text).map_err(Error::Output)?;
    } else {
        let reward = match (report["reward"].as_f64(), report["not_run"].as_array()) {
            (Some(r), _) => format!("reward {r:.3}"),
            (None, Some(parts)) => format!(
                "not scored ({} not run: see its check)",
                parts
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            (None, None) => "no reward".to_string(),
        };
        writeln!(
            out,
            "{}: {reward}; {} calls ({} failed); added {}, modified {}, deleted {}",
            report["task"].as_str().unwrap_or_default(),
            actions.count,
            failed,
            changes.added.len(),
            changes.modified.len(),
            changes.deleted.len()
        )
        .map_err(Error::Output)?;
    }
    Ok(0)
}

/// Beside what `--keep` copied: `report.json` (the report, without the actions, with each
/// call's time in `call_us`) and the run's page, `view.html`.
fn keep_report(dir: &std::path::Path, report: &Value, durations: &[u64]) -> Result<(), Error> {
    let mut kept = report.clone();
    kept["call_us"] = json!(durations);
    let mut text = crate::json::to_vec(&kept);
    text.push(b'\n');
    std::fs::write(dir.join("report.json"), text).map_err(Error::Output)?;
    // The run is done and kept: a page that cannot be made is said, not the run's failure.
    match crate::view::kept_page(dir) {
        Ok(page) => {
            std::fs::write(dir.join(crate::view::PAGE_NAME), page).map_err(Error::Output)?
        }
        Err(e) => eprintln!(
            "envcraft: warning: no {}: {}",
            crate::view::PAGE_NAME,
            crate::error::chain(&e)
        ),
    }
    Ok(())
}

/// The actions replayed so far, as the items of the report's JSON array, each written when it is
/// made: a result may hold a whole file, and a long trajectory held as JSON values would cost
/// far more memory (and the page faults of that growth would land in the next call's timing).
#[derive(Default)]
struct ActionLog {
    text: Vec<u8>,
    count: usize,
    failed: usize,
    /// Each replayed call's time (µs), in order.
    durations: Vec<u64>,
}

impl ActionLog {
    fn push(&mut self, action: &Value) {
        if self.count > 0 {
            self.text.push(b',');
        }
        crate::json::write_value(&mut self.text, action);
        self.count += 1;
        if let Some(us) = action["duration_us"].as_u64() {
            self.durations.push(us);
        }
        if action["result"]["ok"] == Value::Bool(false) {
            self.failed += 1;
        }
    }

    /// Append an item without counting it (an agent's turn: its calls are counted from its
    /// transcript).
    fn text_push(&mut self, item: &Value) {
        if !self.text.is_empty() {
            self.text.push(b',');
        }
        crate::json::write_value(&mut self.text, item);
    }
}
