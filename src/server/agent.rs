//! Sessions whose agent is OpenClaw itself, driven over `/v1`: `POST /v1/sessions` with
//! `"agent": {"name": "openclaw", "model_url", "model"?, "turn_timeout"?}` makes the session
//! under OpenClaw's policy (the model's port only, the install read-only: see
//! [`crate::agent`]), and `POST /v1/sessions/{id}/agent/turn` runs the current turn's prompt
//! through OpenClaw, after which OpenClaw's transcript is the session's. `next_turn`, `verify`,
//! `diff` and `DELETE` work as for any session; tools can still be called by the client.
//!
//! Such a session is not forked (OpenClaw's state lives in its sandbox's HOME, which a fork does
//! not copy) and not resumed by a restarted server (OpenClaw is not a replayable trajectory).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::AppState;
use super::episode::{blocking, session_error};
use super::error::ApiError;
use crate::agent::{AgentError, AttachedAgent, Install, ModelUrl, OpenClaw, TurnError};

/// The turn timeout when the request gives none (as `envcraft run`'s), within the server's
/// request deadline.
pub const DEFAULT_TURN_SECS: u64 = 600;

/// Seconds of a turn request beyond OpenClaw's own deadline: the config write, the export of
/// its transcript, and the margin the sandbox gives it past `--timeout`.
pub const TURN_OVERHEAD_SECS: u64 = 90;

/// The agent a create request asks for, checked.
#[derive(Debug, Clone)]
pub struct AgentRequest {
    pub model_url: ModelUrl,
    pub model: String,
    pub turn_secs: u64,
    /// As the request gave it (kept with the session's origin).
    pub raw: Value,
}

/// The most a turn may take on a server whose requests end after `request_timeout`.
fn max_turn_secs(request_timeout: Duration) -> u64 {
    request_timeout.as_secs().saturating_sub(TURN_OVERHEAD_SECS)
}

/// `value` (the create request's `agent`) checked against the server's request deadline.
pub fn parse(value: &Value, request_timeout: Duration) -> Result<AgentRequest, ApiError> {
    let Value::Object(map) = value else {
        return Err(ApiError::bad_request(
            "field `agent` must be an object: {\"name\": \"openclaw\", \"model_url\": \"http://127.0.0.1:PORT/v1\"}",
        ));
    };
    super::requests::no_unknown_fields(map, &["name", "model_url", "model", "turn_timeout"])
        .map_err(|e| ApiError::bad_request(format!("field `agent`: {}", e.message)))?;
    match map.get("name") {
        Some(Value::String(name)) if name == "openclaw" => {}
        Some(_) => {
            return Err(ApiError::bad_request(
                "field `agent.name`: the one agent is \"openclaw\"",
            ));
        }
        None => return Err(ApiError::missing_field("agent.name", "\"openclaw\"")),
    }
    let url = string(map, "model_url")?.ok_or_else(|| {
        ApiError::missing_field(
            "agent.model_url",
            "the model's OpenAI-compatible base URL on this host's loopback",
        )
    })?;
    let model_url = ModelUrl::parse(url)
        .map_err(|e| ApiError::bad_request(format!("field `agent.model_url`: {e}")))?;
    let model = string(map, "model")?.unwrap_or("default").to_string();
    let most = max_turn_secs(request_timeout);
    if most == 0 {
        return Err(ApiError::bad_request(format!(
            "field `agent`: this server's --request-timeout leaves no time for a turn (it \
             needs more than {TURN_OVERHEAD_SECS} s)"
        )));
    }
    let turn_secs = match map.get("turn_timeout") {
        None | Some(Value::Null) => DEFAULT_TURN_SECS.min(most),
        Some(v) => match v.as_u64() {
            Some(secs) if (1..=most).contains(&secs) => secs,
            _ => {
                return Err(ApiError::bad_request(format!(
                    "field `agent.turn_timeout`: whole seconds from 1 to {most} (this server's \
                     --request-timeout less {TURN_OVERHEAD_SECS} s)"
                )));
            }
        },
    };
    Ok(AgentRequest {
        model_url,
        model,
        turn_secs,
        raw: value.clone(),
    })
}

fn string<'a>(map: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, ApiError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::bad_request(format!(
            "field `agent.{key}` must be a string"
        ))),
    }
}

/// OpenClaw for `request`, from the server's install.
pub fn openclaw(state: &AppState, request: &AgentRequest) -> Result<OpenClaw, ApiError> {
    let install = Install::locate(state.config.openclaw_dir.as_deref()).map_err(|e| {
        tracing::warn!(error = %crate::error::chain(&e), "no OpenClaw install");
        ApiError::agent_not_installed(
            "OpenClaw is not installed for this server: run `make openclaw`, or start the \
             server with --openclaw-dir DIR",
        )
    })?;
    OpenClaw::new(
        install,
        request.model_url.clone(),
        request.model.clone(),
        request.turn_secs,
    )
    .map_err(|e| match e {
        AgentError::ModelName(_) => ApiError::bad_request(format!("field `agent.model`: {e}")),
        e => {
            tracing::error!(error = %crate::error::chain(&e), "OpenClaw");
            ApiError::internal("cannot set OpenClaw up: see the server's log")
        }
    })
}

/// What the create answer says of the agent.
pub fn describe(agent: &OpenClaw) -> Value {
    json!({"name": "openclaw", "version": agent.install.version, "model": agent.model,
           "turn_timeout": agent.turn_secs})
}

/// `POST /v1/sessions/{id}/agent/turn`: the current turn through the session's OpenClaw; the
/// turn's report and the run so far (`turns`, `tool_calls`, `transcript_events`, ...).
pub async fn turn(state: &AppState, id: &str) -> Result<Value, ApiError> {
    let entry = state.registry.get(id)?;
    let Some(agent) = entry.agent.clone() else {
        return Err(ApiError::invalid_transition(
            "this session has no agent: create it with \"agent\": {\"name\": \"openclaw\", ...}",
        ));
    };
    let mut locked = entry.lock(state.config.lock_wait).await?;
    blocking(move || -> Result<Value, ApiError> {
        let Some(session) = locked.as_mut() else {
            return Err(ApiError::session_not_found());
        };
        let mut agent = agent.lock().unwrap_or_else(|p| p.into_inner());
        let ran = agent.turn(session);
        session.settle();
        let ran = ran.map_err(|e| match e {
            TurnError::AlreadyRan(_) => ApiError::invalid_transition(e.to_string()),
            TurnError::Agent(AgentError::Session(e)) => session_error("OpenClaw's turn failed", &e),
            TurnError::Agent(e) => {
                tracing::error!(error = %crate::error::chain(&e), "OpenClaw's turn");
                ApiError::internal("OpenClaw's turn failed: see the server's log")
            }
        })?;
        let mut body = serde_json::to_value(&ran).unwrap_or_default();
        body["turn"] = json!(session.turn());
        body["action_index"] = json!(session.action_index());
        Ok(body)
    })
    .await?
}

/// The attached agent of a new session, for the registry.
pub fn attach(agent: OpenClaw) -> Arc<Mutex<AttachedAgent>> {
    Arc::new(Mutex::new(AttachedAgent::new(agent)))
}
