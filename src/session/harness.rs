//! What a session takes from outside its tools: the model's own assistant messages, which a
//! client hands over to be recorded beside the calls, and an agent harness (OpenClaw itself)
//! that runs its own processes in the sandbox and brings its own transcript.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::{Session, SessionError, assistant, rfc3339, store, transcript};
use crate::sandbox;

impl Session {
    /// Record the model's own assistant message (`body`, checked by [`assistant::parse`]) in
    /// the transcript, at the current action's time; the entry's id. It does not advance the
    /// clock. Refused once the transcript reached its policy's limit.
    pub fn add_assistant_message(&mut self, body: &Value) -> Result<String, SessionError> {
        let message = assistant::parse(body)?;
        self.append_assistant(&message)
    }

    /// Append the checked assistant `message` (also a resume's replay of one).
    pub(super) fn append_assistant(&mut self, message: &Value) -> Result<String, SessionError> {
        if self.dir.transcript_cut() {
            return Err(SessionError::TranscriptFull);
        }
        let stamp = rfc3339(self.parts.clock.unix_at(self.action_index));
        let mut before = self.chain.clone();
        let line = transcript::assistant_message(message, &stamp, &mut self.chain);
        let mut bytes = crate::json::to_vec(&line);
        bytes.push(b'\n');
        let limit = self.parts.policy.limits.transcript_bytes;
        let index = self.action_index;
        let cut = || transcript::truncated_line(index, limit, &stamp, &mut before);
        match self.dir.append_call(&bytes, limit, cut)? {
            store::Appended::Recorded => Ok(self.chain.last().unwrap_or_default()),
            store::Appended::Cut | store::Appended::Omitted => Err(SessionError::TranscriptFull),
        }
    }

    /// Run a command of the agent's harness (OpenClaw itself, say) in the session's sandbox,
    /// with `env` over the policy's variables, captured: not a tool call, so neither counted
    /// nor recorded, and without the session clock (a harness keeps real time).
    pub fn run_harness(
        &mut self,
        argv: Vec<String>,
        env: Vec<(String, String)>,
        stdin: Option<Vec<u8>>,
        timeout: Duration,
    ) -> Result<sandbox::ExecResult, SessionError> {
        Ok(self.sandbox.exec(&sandbox::ExecRequest {
            argv,
            env,
            timeout,
            stdin: stdin.map_or(sandbox::StdinSource::Null, sandbox::StdinSource::Bytes),
            output: sandbox::OutputMode::Capture,
            cwd: PathBuf::new(),
        })?)
    }

    /// Replace the transcript with `jsonl`: an agent harness's own record of the session,
    /// which is then what graders and `--keep` read. Written atomically.
    pub fn replace_transcript(&self, jsonl: &[u8]) -> Result<(), SessionError> {
        Ok(self.dir.write_atomic(store::TRANSCRIPT, jsonl)?)
    }
}
