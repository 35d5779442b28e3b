//! One task's run with OpenClaw as the agent: the session's sandbox gets the install
//! (read-only) and a policy that reaches only the model's port; OpenClaw's config is written
//! into its state dir (HOME's private tmpfs, never the workspace); each turn of the task's
//! prompt is one `openclaw agent --local --session-id ID` (as PinchBench runs it), all turns in
//! one OpenClaw session; then OpenClaw's transcript replaces the session's.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use super::config::{self, ConfigInput};
use super::install::{self, Install};
use super::model_url::ModelUrl;
use super::policy::{self, HOME};
use super::{AgentError, export};
use crate::session::{Session, SessionOptions};
use crate::spec::task::TaskSpec;

/// OpenClaw's state dir inside (below HOME, a private tmpfs).
pub const STATE_DIR: &str = "/root/.openclaw";

/// Names OpenClaw's bootstrap writes at the top of a new workspace. `skipBootstrap` keeps them
/// out; any that the run added anyway is reported (`harness_files`): the verifier sees them.
pub const BOOTSTRAP_NAMES: &[&str] = &[
    "AGENTS.md",
    "SOUL.md",
    "IDENTITY.md",
    "USER.md",
    "BOOTSTRAP.md",
    "HEARTBEAT.md",
    "TOOLS.md",
    "MEMORY.md",
    ".git",
    ".openclaw",
];

/// Seconds the transcript export and the config write may take.
const HELPER_SECS: u64 = 60;

/// OpenClaw as a session's agent.
#[derive(Debug, Clone)]
pub struct OpenClaw {
    pub install: Install,
    pub model_url: ModelUrl,
    pub model: String,
    /// The wall time of one turn (`openclaw agent --timeout`, and the sandbox's limit).
    pub turn_secs: u64,
}

/// What one turn did.
#[derive(Debug, Clone, Serialize)]
pub struct TurnReport {
    pub turn: usize,
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub duration_ms: u64,
    /// The agent's final text of the turn, as `--json` reported it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// The end of OpenClaw's stderr, when the turn failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr_tail: Option<String>,
}

/// What the whole run did.
#[derive(Debug, Clone, Serialize)]
pub struct AgentRun {
    pub agent: &'static str,
    pub version: String,
    pub model: String,
    pub turns: Vec<TurnReport>,
    /// Events of OpenClaw's transcript now in the session's `transcript.jsonl`.
    pub transcript_events: usize,
    /// Why the session kept envcraft's own transcript instead, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub transcript_error: Option<String>,
    /// Tool calls in OpenClaw's transcript, and those whose result was an error.
    pub tool_calls: usize,
    pub failed_tool_calls: usize,
    /// Bootstrap files OpenClaw added to the workspace (none is expected: see
    /// [`BOOTSTRAP_NAMES`]).
    pub harness_files: Vec<String>,
}

impl OpenClaw {
    pub fn new(
        install: Install,
        model_url: ModelUrl,
        model: String,
        turn_secs: u64,
    ) -> Result<OpenClaw, AgentError> {
        let len = model.chars().count();
        if !(1..=200).contains(&len) || model.chars().any(char::is_control) {
            return Err(AgentError::ModelName(model));
        }
        Ok(OpenClaw {
            install,
            model_url,
            model,
            turn_secs,
        })
    }

    /// `options` for a session of `task` with OpenClaw as its agent: the adjusted policy and
    /// the install bound read-only.
    pub fn session_options(
        &self,
        task: &TaskSpec,
        mut options: SessionOptions,
    ) -> Result<SessionOptions, AgentError> {
        let base = task.env.load_policy()?;
        options.policy = Some(policy::sandbox_policy(
            base,
            &self.model_url,
            self.turn_secs,
        ));
        options
            .binds
            .push((self.install.dir.clone(), PathBuf::from(install::MOUNT)));
        Ok(options)
    }

    /// Run every turn of the session's task through OpenClaw, then make OpenClaw's transcript
    /// the session's. A turn that fails is reported, not fatal: the verifier still scores the
    /// workspace.
    pub fn run(&self, session: &mut Session) -> Result<AgentRun, AgentError> {
        self.prepare(session)?;
        let mut turns = Vec::new();
        loop {
            turns.push(self.run_turn(session)?);
            if session.next_turn()?.is_none() {
                break;
            }
        }
        self.collect(session, turns)
    }

    /// Make the session ready for OpenClaw's turns: its config written into the state dir.
    pub fn prepare(&self, session: &mut Session) -> Result<(), AgentError> {
        self.write_config(session)
    }

    /// The session's current turn: its prompt through one `openclaw agent --local`.
    pub fn run_turn(&self, session: &mut Session) -> Result<TurnReport, AgentError> {
        let prompt = session.prompt().to_string();
        self.turn(session, &prompt)
    }

    /// What the run did after `turns`: OpenClaw's transcript, so far, made the session's (or
    /// why not), its tool calls counted, and any bootstrap file it left in the workspace.
    pub fn collect(
        &self,
        session: &mut Session,
        turns: Vec<TurnReport>,
    ) -> Result<AgentRun, AgentError> {
        let mut run = AgentRun {
            agent: "openclaw",
            version: self.install.version.clone(),
            model: self.model.clone(),
            turns,
            transcript_events: 0,
            transcript_error: None,
            tool_calls: 0,
            failed_tool_calls: 0,
            harness_files: Vec::new(),
        };
        match self.export(session) {
            Ok(jsonl) => {
                (run.tool_calls, run.failed_tool_calls) = count_tool_calls(&jsonl);
                match export::check(&jsonl) {
                    Ok(n) => {
                        session.replace_transcript(&jsonl)?;
                        run.transcript_events = n;
                    }
                    Err(why) => run.transcript_error = Some(why),
                }
            }
            Err(why) => run.transcript_error = Some(why),
        }
        let changes = session.changes()?;
        run.harness_files = changes
            .added
            .iter()
            .filter(|p| {
                let top = p.split('/').next().unwrap_or("");
                BOOTSTRAP_NAMES.contains(&top)
            })
            .cloned()
            .collect();
        Ok(run)
    }

    /// The variables of every OpenClaw process: its Node first on PATH, its state and config
    /// where [`STATE_DIR`] says, a compile cache, no colours. Not the session clock's: OpenClaw keeps real time.
    fn env(&self, session: &Session) -> Vec<(String, String)> {
        let path = format!(
            "{}:{}",
            Install::node_bin_inside().display(),
            session.policy().environment.path
        );
        vec![
            ("PATH".into(), path),
            ("HOME".into(), HOME.into()),
            ("OPENCLAW_STATE_DIR".into(), STATE_DIR.into()),
            (
                "OPENCLAW_CONFIG_PATH".into(),
                format!("{STATE_DIR}/openclaw.json"),
            ),
            // Node's compile cache under HOME: the second and later turns of a session start
            // warm (about a quarter less CPU here). Never shared between sessions: a cache one
            // session's agent could write is code the next would run.
            (
                "NODE_COMPILE_CACHE".into(),
                format!("{HOME}/.cache/node-compile-cache"),
            ),
            ("NO_COLOR".into(), "1".into()),
            ("FORCE_COLOR".into(), "0".into()),
        ]
    }

    fn write_config(&self, session: &mut Session) -> Result<(), AgentError> {
        let token = gateway_token();
        let config = config::openclaw_json(&ConfigInput {
            model_url: &self.model_url,
            model: &self.model,
            workspace: policy::WORKSPACE,
            gateway_token: &token,
            model_timeout_secs: self.turn_secs,
        });
        let bytes = serde_json::to_vec_pretty(&config).unwrap_or_default();
        let argv = [
            "/bin/sh",
            "-c",
            "umask 077 && mkdir -p \"$1\" && cat > \"$1/openclaw.json\"",
            "sh",
            STATE_DIR,
        ];
        let result = session.run_harness(
            argv.iter().map(|s| s.to_string()).collect(),
            self.env(session),
            Some(bytes),
            Duration::from_secs(HELPER_SECS),
        )?;
        if result.exit_code != Some(0) {
            return Err(AgentError::Config {
                detail: tail(&result.stderr),
            });
        }
        Ok(())
    }

    fn turn(&self, session: &mut Session, prompt: &str) -> Result<TurnReport, AgentError> {
        let turn = session.turn();
        let argv = vec![
            Install::node_inside().display().to_string(),
            Install::entry_inside().display().to_string(),
            "agent".into(),
            "--local".into(),
            "--session-id".into(),
            session.id().to_string(),
            "--message".into(),
            prompt.to_string(),
            "--json".into(),
            "--timeout".into(),
            self.turn_secs.to_string(),
        ];
        let started = Instant::now();
        // A little past OpenClaw's own deadline, so that it reports its timeout itself.
        let limit = Duration::from_secs(self.turn_secs + 30);
        let result = session.run_harness(argv, self.env(session), None, limit)?;
        let reply: Option<Value> = serde_json::from_slice(&result.stdout).ok();
        let meta = reply.as_ref().map(|r| &r["meta"]);
        let text = |key: &str| meta.and_then(|m| m[key].as_str()).map(str::to_string);
        let ok = result.exit_code == Some(0);
        Ok(TurnReport {
            turn,
            exit_code: result.exit_code,
            timed_out: result.timed_out,
            duration_ms: started.elapsed().as_millis() as u64,
            reply: text("finalAssistantVisibleText"),
            stop_reason: text("stopReason"),
            stderr_tail: (!ok).then(|| tail(&result.stderr)),
        })
    }

    /// OpenClaw's transcript of this session, as JSONL, or why it could not be read.
    fn export(&self, session: &mut Session) -> Result<Vec<u8>, String> {
        let argv = vec![
            Install::node_inside().display().to_string(),
            "-e".into(),
            export::SCRIPT.into(),
            Path::new(STATE_DIR)
                .join(export::DATABASE)
                .display()
                .to_string(),
            session.id().to_string(),
        ];
        let result = session
            .run_harness(
                argv,
                self.env(session),
                None,
                Duration::from_secs(HELPER_SECS),
            )
            .map_err(|e| crate::error::chain(&e))?;
        if result.exit_code != Some(0) {
            return Err(format!("the export failed: {}", tail(&result.stderr)));
        }
        if result.stdout_truncated {
            return Err("the transcript is larger than the policy's output_bytes".into());
        }
        Ok(result.stdout)
    }
}

/// OpenClaw attached to one live session that a client drives turn by turn (the server's
/// `POST /v1/sessions/{id}/agent/turn`): the config written before the first turn, each turn
/// run at most once.
#[derive(Debug)]
pub struct AttachedAgent {
    pub agent: OpenClaw,
    prepared: bool,
    ran: Option<usize>,
}

/// Why a turn of an attached agent did not run.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    #[error("OpenClaw already ran turn {0} of this session: move to the next turn first")]
    AlreadyRan(usize),
    #[error(transparent)]
    Agent(#[from] AgentError),
}

impl AttachedAgent {
    pub fn new(agent: OpenClaw) -> AttachedAgent {
        AttachedAgent {
            agent,
            prepared: false,
            ran: None,
        }
    }

    /// Run the session's current turn through OpenClaw; what the run did so far, with
    /// OpenClaw's transcript made the session's.
    pub fn turn(&mut self, session: &mut Session) -> Result<AgentRun, TurnError> {
        let turn = session.turn();
        if self.ran == Some(turn) {
            return Err(TurnError::AlreadyRan(turn));
        }
        if !self.prepared {
            self.agent.prepare(session)?;
            self.prepared = true;
        }
        let report = self.agent.run_turn(session)?;
        self.ran = Some(turn);
        Ok(self.agent.collect(session, vec![report])?)
    }
}

/// Tool calls in an OpenClaw transcript, and those whose result is an error.
fn count_tool_calls(jsonl: &[u8]) -> (usize, usize) {
    let (mut calls, mut failed) = (0, 0);
    for line in jsonl.split(|b| *b == b'\n') {
        let Ok(event) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        let message = &event["message"];
        match message["role"].as_str() {
            Some("assistant") => {
                calls += message["content"]
                    .as_array()
                    .map(|c| c.iter().filter(|p| p["type"] == "toolCall").count())
                    .unwrap_or(0);
            }
            Some("toolResult") if message["isError"] == true => failed += 1,
            _ => {}
        }
    }
    (calls, failed)
}

/// The last lines of a process's output, for a report.
fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(8)..].join("\n")
}

/// A fresh Gateway token: 32 hex digits from the OS's random source.
fn gateway_token() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    let _ = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_calls_and_failed_results_are_counted_from_the_transcript() {
        let jsonl = br#"{"type":"session","version":4}
{"type":"message","message":{"role":"assistant","content":[{"type":"toolCall","name":"write"},{"type":"toolCall","name":"exec"}]}}
{"type":"message","message":{"role":"toolResult","isError":false}}
{"type":"message","message":{"role":"toolResult","isError":true}}
{"type":"message","message":{"role":"assistant","content":[{"type":"text","text":"done"}]}}
"#;
        assert_eq!(count_tool_calls(jsonl), (2, 1));
    }
}
