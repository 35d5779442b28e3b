//! Resuming the sessions a killed envcraft left behind.
//!
//! A session's sandbox (its processes and the tmpfs that holds its workspace's changes) dies
//! with the process that made it; its directory does not: `state.json` (the task's origin, the
//! clock, the seed) and the transcript of every call with its result. A session is resumed by
//! making it again under its own id and replaying the transcript's calls in order, each at its
//! own action index (so at its own time), checking that every call gives the very result it
//! gave the first time. All equal: the workspace is the one the agent left, at the same action
//! index and turn. One differs (a command whose output depends on more than the workspace and
//! the clock, a background command polled while it ran): that session cannot be resumed
//! faithfully, and is dropped.
//!
//! [`claim`] takes the directories whose owner is gone out of the way of the stale sweep
//! (into `STATE/resuming/`), [`Saved::read`] reads one, [`Session::resume`] replays it.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::clock::Clock;
use super::{Session, SessionError, SessionOptions};
use crate::spec::task::TaskSpec;

/// Why a session could not be resumed.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a session's state: {problem}")]
    State { path: PathBuf, problem: String },
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(
        "replaying call {index} (`{tool}`) gave another result than the recorded one: the session depends on more than its workspace and clock"
    )]
    Diverged { index: u64, tool: String },
    #[error("the transcript holds {found} calls but state.json counts {expected}")]
    Incomplete { found: u64, expected: u64 },
}

/// What `state.json` says, as far as resuming needs.
#[derive(Debug, Deserialize)]
struct SavedState {
    session_id: String,
    clock: Clock,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    origin: Value,
    action_index: u64,
}

/// One step of a recorded transcript.
#[derive(Debug, Clone, PartialEq)]
enum Recorded {
    /// A user message after the first: the session moved to its next turn.
    NextTurn,
    /// A call and the text of its result (cut when `whole` says what the result was).
    Call {
        tool: String,
        args: Value,
        result: String,
        whole: Option<String>,
    },
    /// The model's own assistant message (no tool call in it), as recorded.
    Assistant(Value),
}

/// A session as its directory left it.
#[derive(Debug)]
pub struct Saved {
    pub id: String,
    /// What the session's maker stored (see [`SessionOptions::origin`]).
    pub origin: Value,
    pub clock: Clock,
    pub seed: Option<u64>,
    steps: Vec<Recorded>,
}

impl Saved {
    /// Read the session directory `dir`.
    pub fn read(dir: &Path) -> Result<Saved, ResumeError> {
        let read = |name: &str| {
            let path = dir.join(name);
            fs::read_to_string(&path).map_err(|source| ResumeError::Read { path, source })
        };
        let state_path = dir.join("state.json");
        let state: SavedState =
            serde_json::from_str(&read("state.json")?).map_err(|e| ResumeError::State {
                path: state_path.clone(),
                problem: e.to_string(),
            })?;
        let transcript = match read("transcript.jsonl") {
            Ok(text) => text,
            Err(ResumeError::Read { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                String::new()
            }
            Err(e) => return Err(e),
        };
        let steps = parse_transcript(&transcript);
        let calls = steps
            .iter()
            .filter(|s| matches!(s, Recorded::Call { .. }))
            .count() as u64;
        // state.json is written at turns and forks: the transcript may only have more.
        if calls < state.action_index {
            return Err(ResumeError::Incomplete {
                found: calls,
                expected: state.action_index,
            });
        }
        Ok(Saved {
            id: state.session_id,
            origin: state.origin,
            clock: state.clock,
            seed: state.seed,
            steps,
        })
    }
}

/// The steps of transcript `text`: its calls with their results, and its turns. A call
/// without a result (the process died between the two) and a cut last line are left out:
/// the call's answer never reached the agent.
fn parse_transcript(text: &str) -> Vec<Recorded> {
    let mut steps = Vec::new();
    let mut users = 0;
    let mut pending: Option<(String, String, Value)> = None;
    for line in text.lines() {
        let Ok(value) = serde_json::from_str::<Value>(line) else {
            break;
        };
        if value["type"] == "session" {
            continue; // the header: written again by the resumed session
        }
        let message = &value["message"];
        let is_call = message["content"][0]["type"] == "toolCall";
        match message["role"].as_str() {
            Some("user") => {
                users += 1;
                if users > 1 {
                    steps.push(Recorded::NextTurn);
                }
            }
            Some("assistant") if !is_call => {
                if pending.is_some() {
                    break;
                }
                steps.push(Recorded::Assistant(message.clone()));
            }
            Some("assistant") => {
                let call = &message["content"][0];
                pending = Some((
                    call["id"].as_str().unwrap_or_default().to_string(),
                    call["name"].as_str().unwrap_or_default().to_string(),
                    call["arguments"].clone(),
                ));
            }
            Some("toolResult") => {
                let Some((id, tool, args)) = pending.take() else {
                    break;
                };
                if message["toolCallId"].as_str() != Some(id.as_str()) {
                    break;
                }
                let result = message["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let whole = message["truncated"]["sha256"].as_str().map(str::to_string);
                steps.push(Recorded::Call {
                    tool,
                    args,
                    result,
                    whole,
                });
            }
            _ => break,
        }
    }
    steps
}

/// Move the session directories under `state_root` whose owner is gone (and those a resume
/// killed midway left) to `state_root/resuming/`, out of the stale sweep's way; their paths.
pub fn claim(state_root: &Path) -> Vec<PathBuf> {
    let resuming = state_root.join("resuming");
    if let Ok(entries) = fs::read_dir(state_root.join("sessions")) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() && crate::sandbox::stale::owner_gone(&path) {
                let _ = fs::create_dir_all(&resuming);
                if let Err(e) = fs::rename(&path, resuming.join(entry.file_name())) {
                    tracing::warn!(path = %path.display(), error = %e, "cannot claim a session to resume");
                }
            }
        }
    }
    let mut claimed: Vec<PathBuf> = fs::read_dir(&resuming)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    claimed.sort();
    claimed
}

impl Session {
    /// Make `saved` again for `task` (as its origin names it): a fresh sandbox under the same
    /// id, then every recorded call replayed and checked. Closed again on any difference.
    pub fn resume(
        saved: &Saved,
        task: &TaskSpec,
        options: &SessionOptions,
    ) -> Result<Session, ResumeError> {
        let options = SessionOptions {
            base_time: Some(saved.clock.base_unix),
            seed: saved.seed,
            origin: saved.origin.clone(),
            policy: None,
            binds: Vec::new(),
            ..options.clone()
        };
        let mut session = Session::create_as(task, &options, Some(saved.id.clone()))?;
        if session.parts.clock != saved.clock {
            session.close();
            return Err(ResumeError::State {
                path: PathBuf::from("state.json"),
                problem: "its clock is not the task's any more (the environment changed)".into(),
            });
        }
        for step in &saved.steps {
            let replayed = match step {
                Recorded::NextTurn => session.next_turn().map(|_| ()).map_err(Into::into),
                Recorded::Assistant(message) => session
                    .append_assistant(message)
                    .map(|_| ())
                    .map_err(Into::into),
                Recorded::Call {
                    tool,
                    args,
                    result,
                    whole,
                } => {
                    let index = session.action_index();
                    let again = session.call(tool, args);
                    // A cut result is checked by the digest of the whole.
                    let same = match whole {
                        Some(digest) => *digest == super::transcript::result_digest(&again),
                        None => serde_json::from_str::<Value>(result)
                            .is_ok_and(|recorded| recorded == again),
                    };
                    if same {
                        Ok(())
                    } else {
                        Err(ResumeError::Diverged {
                            index,
                            tool: tool.clone(),
                        })
                    }
                }
            };
            if let Err(e) = replayed {
                session.close();
                return Err(e);
            }
        }
        session.save()?;
        Ok(session)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::session::transcript;
    use serde_json::json;

    fn lines(values: &[Value]) -> String {
        values.iter().map(|v| format!("{v}\n")).collect()
    }

    #[test]
    fn calls_turns_and_results_are_read_back_in_order() {
        let mut chain = transcript::Chain::default();
        let said = json!({"role": "assistant", "content": [{"type": "text", "text": "on it"}]});
        let text = lines(&[
            transcript::header("id", "t", "/workspace"),
            transcript::user_message("first", "t", &mut chain),
            transcript::assistant_message(&said, "t", &mut chain),
            transcript::tool_call(0, "write", &json!({"path": "a"}), "t", &mut chain),
            transcript::tool_result(0, "write", &json!({"ok": true}), false, "t", &mut chain),
            transcript::user_message("second", "t", &mut chain),
            transcript::tool_call(1, "read", &json!({"path": "a"}), "t", &mut chain),
            transcript::tool_result(1, "read", &json!({"ok": false}), true, "t", &mut chain),
        ]);
        assert_eq!(
            parse_transcript(&text),
            vec![
                Recorded::Assistant(said),
                Recorded::Call {
                    tool: "write".into(),
                    args: json!({"path": "a"}),
                    result: json!({"ok": true}).to_string(),
                    whole: None,
                },
                Recorded::NextTurn,
                Recorded::Call {
                    tool: "read".into(),
                    args: json!({"path": "a"}),
                    result: json!({"ok": false}).to_string(),
                    whole: None,
                },
            ]
        );
    }

    #[test]
    fn a_call_without_its_result_and_a_cut_line_are_left_out() {
        let mut chain = transcript::Chain::default();
        let mut text = lines(&[
            transcript::user_message("first", "t", &mut chain),
            transcript::tool_call(0, "write", &json!({"path": "a"}), "t", &mut chain),
            transcript::tool_result(0, "write", &json!({"ok": true}), false, "t", &mut chain),
            transcript::tool_call(1, "write", &json!({"path": "b"}), "t", &mut chain),
        ]);
        assert_eq!(parse_transcript(&text).len(), 1);
        text.push_str("{\"type\": \"mess");
        assert_eq!(parse_transcript(&text).len(), 1);
    }

    #[test]
    fn directories_of_live_owners_are_not_claimed() {
        let root = tempfile::tempdir().unwrap();
        let sessions = root.path().join("sessions");
        fs::create_dir_all(sessions.join("live")).unwrap();
        fs::create_dir_all(sessions.join("dead")).unwrap();
        let _held = crate::sandbox::stale::mark_owner(&sessions.join("live"), root.path()).unwrap();
        crate::sandbox::stale::mark_dead_owner(&sessions.join("dead"));
        let claimed = claim(root.path());
        assert_eq!(claimed, vec![root.path().join("resuming").join("dead")]);
        assert!(sessions.join("live").exists());
    }

    #[test]
    fn a_state_without_its_calls_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(
            dir.path().join("state.json"),
            json!({"session_id": "s", "clock": {"base_unix": 0, "step_secs": 60},
                   "action_index": 2, "turn": 0})
            .to_string(),
        )
        .unwrap();
        assert!(matches!(
            Saved::read(dir.path()),
            Err(ResumeError::Incomplete {
                found: 0,
                expected: 2
            })
        ));
    }
}
