//! OpenEnv on `envcraft serve` (the runtime contract of `openenv-core` 0.3: what
//! `openenv validate --url` checks and its clients send): `GET /health`, `GET /metadata`,
//! `GET /schema`, `POST /mcp` (JSON-RPC: `openenv/session/create`, `openenv/session/close`,
//! and MCP's methods on the session `params.session_id` names), and in simulation mode
//! `POST /reset`, `POST /step`, `GET /state`; the WebSocket `/ws` is [`super::openenv_ws`].
//! Production mode (`--openenv-mode production`) serves neither `/reset`, `/step` nor
//! `/state` nor lists them in `/openapi.json`, as OpenEnv's mode contract says.
//!
//! An episode is an envcraft session. `reset` takes the task (a name or an inline task, as
//! `/v1/sessions` does; `--openenv-task` when absent), `seed`, `episode_id` and `base_time`,
//! and answers with the prompt, the docs and the tools. Actions are OpenEnv's MCP-style
//! `list_tools` and `call_tool`, plus `verify` (the reward, and `done`), `next_turn` and
//! `fork`: everything goes through [`super::episode`], as `/v1` does. Unlike OpenEnv's own
//! stateless HTTP `/reset` and `/step` (a fresh environment each request), the session a
//! `POST /reset` makes stays open under its `session_id` for `/step` and `/state` (and the
//! idle timeout).

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::AppState;
use super::episode::{self, Creation};
use super::error::ApiError;
use super::handlers::object;
use super::mcp_http;
use super::requests::no_unknown_fields;
use crate::mcp::{self, Incoming, RpcError};

/// OpenEnv's two server modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Training: `/reset`, `/step`, `/state` served beside `/ws` and `/mcp`.
    Simulation,
    /// Inference: only `/ws`, `/mcp` and the descriptions.
    Production,
}

/// What went wrong with an OpenEnv request: the request itself (OpenEnv's validation error),
/// or the session work (with its API category).
#[derive(Debug)]
pub enum StepError {
    Invalid(String),
    Failed(ApiError),
}

impl From<ApiError> for StepError {
    fn from(e: ApiError) -> StepError {
        StepError::Failed(e)
    }
}

impl StepError {
    fn into_api(self) -> ApiError {
        match self {
            StepError::Invalid(message) => ApiError::bad_request(message),
            StepError::Failed(e) => e,
        }
    }
}

/// An observation as OpenEnv sends it: `{"observation", "reward", "done"}`.
pub fn observation(observation: Value, reward: Option<f64>, done: bool) -> Value {
    json!({"observation": observation, "reward": reward, "done": done})
}

/// The fields `reset` takes.
const RESET_FIELDS: [&str; 4] = ["task", "seed", "episode_id", "base_time"];

/// A new episode from `reset`'s data: (the session's id, the observation).
pub async fn reset(
    state: &Arc<AppState>,
    data: &Map<String, Value>,
) -> Result<(String, String, Value), StepError> {
    if let Some(unknown) = data.keys().find(|k| !RESET_FIELDS.contains(&k.as_str())) {
        return Err(StepError::Invalid(format!(
            "unknown reset field `{}`: expected `task` (ENV/ID or an inline task), `seed`, `episode_id`, `base_time`",
            unknown.chars().take(64).collect::<String>()
        )));
    }
    let mut fields = data.clone();
    if !fields.contains_key("task")
        && let Some(task) = &state.config.openenv_task
    {
        fields.insert("task".into(), Value::String(task.clone()));
    }
    let episode_id = match fields.remove("episode_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) if id.len() <= 255 => Some(id),
        Some(_) => {
            return Err(StepError::Invalid(
                "field `episode_id` must be a string of at most 255 bytes".into(),
            ));
        }
    };
    let mut creation: Creation =
        super::handlers::creation_of(&fields).map_err(|e| StepError::Invalid(e.message))?;
    creation.episode_id = episode_id.clone();
    let body = episode::create(state, creation).await?;
    let session = body["session_id"].as_str().unwrap_or_default().to_string();
    let episode = episode_id.unwrap_or_else(|| session.clone());
    let tools = episode::with_session(state, &session, |s| mcp::tools(s)).await?;
    let seen = json!({
        "session_id": session,
        "episode_id": episode,
        "task": body["task"],
        "seed": body["seed"],
        "prompt": body["prompt"],
        "docs": body["docs"],
        "tools": openenv_tools(tools),
        "turn": 0,
    });
    Ok((session, episode, observation(seen, None, false)))
}

/// MCP tools in OpenEnv's `Tool` form (`input_schema`).
fn openenv_tools(tools: Vec<Value>) -> Vec<Value> {
    tools
        .into_iter()
        .map(|mut t| {
            let schema = t
                .get_mut("inputSchema")
                .map(Value::take)
                .unwrap_or(Value::Null);
            json!({"name": t["name"], "description": t["description"], "input_schema": schema})
        })
        .collect()
}

/// The action types.
const ACTION_TYPES: [&str; 5] = ["list_tools", "call_tool", "verify", "next_turn", "fork"];

/// The actions a step takes, for messages that name them.
const ACTIONS: &str =
    "`list_tools`, `call_tool` (with `tool_name` and `arguments`), `verify`, `next_turn`, `fork`";

/// One action on session `id`: the observation.
/// `limit`: the step's `timeout_s` (a `call_tool` past it has its command killed and answers a
/// `timeout` error, as OpenEnv's own MCP environments do).
pub async fn step(
    state: &Arc<AppState>,
    id: &str,
    action: &Value,
    limit: Option<std::time::Duration>,
) -> Result<Value, StepError> {
    let Value::Object(action) = action else {
        return Err(StepError::Invalid(format!(
            "the action must be an object with `type`: one of {ACTIONS}"
        )));
    };
    let kind = action
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let allowed: &[&str] = match kind {
        "call_tool" => &[
            "type",
            "tool_name",
            "arguments",
            "metadata",
            "assistant_message",
        ],
        _ => &["type", "metadata", "assistant_message"],
    };
    if let Some(unknown) = action.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(StepError::Invalid(format!(
            "unknown field `{}` in a `{kind}` action: expected {}",
            unknown.chars().take(64).collect::<String>(),
            allowed.join(", ")
        )));
    }
    // The model's own message that led to this action goes in the transcript first.
    let said = match action.get("assistant_message") {
        None | Some(Value::Null) => None,
        Some(message) => Some(
            crate::session::assistant::parse(message)
                .map_err(|e| StepError::Invalid(format!("`assistant_message`: field {e}")))?,
        ),
    };
    if !ACTION_TYPES.contains(&kind) {
        return Err(StepError::Invalid(format!(
            "unknown action type `{}`: expected {ACTIONS}",
            kind.chars().take(64).collect::<String>()
        )));
    }
    if let Some(message) = said {
        episode::add_message(state, id, message).await?;
    }
    match kind {
        "list_tools" => {
            let tools = episode::with_session(state, id, |s| mcp::tools(s)).await?;
            Ok(observation(
                json!({"tools": openenv_tools(tools)}),
                None,
                false,
            ))
        }
        "call_tool" => {
            let Some(Value::String(tool)) = action.get("tool_name") else {
                return Err(StepError::Invalid("a `call_tool` action needs `tool_name`, the name of a tool (`list_tools` lists them)".into()));
            };
            let arguments = match action.get("arguments") {
                None | Some(Value::Null) => json!({}),
                Some(Value::Object(o)) => Value::Object(o.clone()),
                Some(_) => {
                    return Err(StepError::Invalid(
                        "`arguments` must be an object of the tool's arguments".into(),
                    ));
                }
            };
            let mut answer =
                episode::call_within(state, id, tool.clone(), arguments, limit).await?;
            let category = answer["result"]["error"]["category"].as_str();
            if let (Some(limit), Some("cancelled")) = (limit, category) {
                let message = format!(
                    "Tool '{tool}' timed out after {} seconds: its command was killed",
                    limit.as_secs_f64()
                );
                return Ok(observation(
                    json!({"tool_name": tool, "result": null,
                           "error": {"error_type": "timeout", "message": message},
                           "metadata": {}}),
                    None,
                    false,
                ));
            }
            // The result carries the call's own `action_index`.
            let mut metadata = json!({});
            if answer.get("transcript_truncated").is_some() {
                metadata["transcript_truncated"] = Value::Bool(true);
            }
            let result = answer
                .get_mut("result")
                .map(Value::take)
                .unwrap_or(Value::Null);
            Ok(observation(
                json!({"tool_name": tool, "result": result, "error": null, "metadata": metadata}),
                None,
                false,
            ))
        }
        "verify" => {
            let verdict = episode::verify(state, id).await?;
            let reward = verdict["reward"].as_f64();
            Ok(observation(verdict, reward, true))
        }
        "next_turn" => Ok(observation(
            episode::next_turn(state, id).await?,
            None,
            false,
        )),
        "fork" => {
            let fork = episode::fork(state, id).await?;
            Ok(observation(json!({"session_id": fork}), None, false))
        }
        other => Err(StepError::Invalid(format!(
            "unknown action type `{}`: expected {ACTIONS}",
            other.chars().take(64).collect::<String>()
        ))),
    }
}

/// The state of session `id`: OpenEnv's `episode_id` (the reset's, else the session's id) and
/// `step_count` (the tool calls so far), and the session, task and turn.
pub async fn session_state(state: &AppState, id: &str) -> Result<Value, ApiError> {
    let (calls, turn, task, episode) = episode::with_session(state, id, |s| {
        let episode = match &s.origin()["episode_id"] {
            Value::String(episode) => episode.clone(),
            _ => s.id().to_string(),
        };
        (
            s.action_index(),
            s.turn(),
            format!("{}/{}", s.task().env.name, s.task().id),
            episode,
        )
    })
    .await?;
    Ok(
        json!({"episode_id": episode, "step_count": calls, "session_id": id, "task": task, "turn": turn}),
    )
}

/// `POST /reset {"task"?, "seed"?, "episode_id"?, "base_time"?}`.
pub async fn http_reset(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let data = match object(&state, body) {
        Ok(data) => data,
        Err(e) => return e.into_response(),
    };
    match reset(&state, &data).await {
        Ok((_, _, seen)) => Json(seen).into_response(),
        Err(e) => e.into_api().into_response(),
    }
}

/// `POST /step {"action", "session_id", "timeout_s"?, "request_id"?}`.
pub async fn http_step(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let answer = async {
        let map = object(&state, body)?;
        no_unknown_fields(&map, &["action", "session_id", "timeout_s", "request_id"])?;
        let Some(Value::String(id)) = map.get("session_id") else {
            return Err(ApiError::missing_field(
                "session_id",
                "the session_id the observation of POST /reset named",
            ));
        };
        let Some(action) = map.get("action") else {
            return Err(ApiError::missing_field(
                "action",
                &format!("the action: one of {ACTIONS}"),
            ));
        };
        let limit = match map.get("timeout_s") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) if n.as_f64().is_some_and(|s| s > 0.0 && s <= 86_400.0) => {
                n.as_f64().map(std::time::Duration::from_secs_f64)
            }
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "`timeout_s` must be a number of seconds above 0 and at most 86400, not {}",
                    other.to_string().chars().take(64).collect::<String>()
                )));
            }
        };
        step(&state, id, action, limit)
            .await
            .map_err(StepError::into_api)
    };
    match answer.await {
        Ok(seen) => (StatusCode::OK, Json(seen)).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /state?session_id=ID`.
pub async fn http_state(
    State(state): State<Arc<AppState>>,
    Query(query): Query<Map<String, Value>>,
) -> Response {
    let Some(Value::String(id)) = query.get("session_id") else {
        return ApiError::missing_field(
            "session_id",
            "the query parameter ?session_id= naming the session POST /reset made",
        )
        .into_response();
    };
    match session_state(&state, id).await {
        Ok(body) => Json(body).into_response(),
        Err(e) => e.into_response(),
    }
}

pub async fn health() -> Response {
    Json(json!({"status": "healthy"})).into_response()
}

pub async fn metadata() -> Response {
    Json(json!({
        "name": "envcraft",
        "description": "Claw-style agent tasks in sandboxed copy-on-write workspaces: reset with a task, call its tools, verify for the reward",
        "version": env!("CARGO_PKG_VERSION"),
        "readme_content": null,
        "author": null,
        "documentation_url": null,
    }))
    .into_response()
}

/// The JSON schemas of the actions, observations and state (`GET /schema`).
const SCHEMA: &str = r##"{
  "action": {"title": "EnvcraftAction", "oneOf": [
    {"type": "object", "required": ["type"], "properties": {"type": {"const": "list_tools"}, "metadata": {"type": "object"}, "assistant_message": {"type": "object", "description": "the model's own message before this action (text, thinking, usage, model, stopReason: as POST /v1/sessions/{id}/messages), recorded in the transcript first"}}},
    {"type": "object", "required": ["type", "tool_name"], "properties": {"type": {"const": "call_tool"}, "tool_name": {"type": "string"}, "arguments": {"type": "object"}, "metadata": {"type": "object"}, "assistant_message": {"type": "object", "description": "the model's own message before this action (text, thinking, usage, model, stopReason: as POST /v1/sessions/{id}/messages), recorded in the transcript first"}}},
    {"type": "object", "required": ["type"], "properties": {"type": {"const": "verify"}, "metadata": {"type": "object"}, "assistant_message": {"type": "object", "description": "the model's own message before this action (text, thinking, usage, model, stopReason: as POST /v1/sessions/{id}/messages), recorded in the transcript first"}}},
    {"type": "object", "required": ["type"], "properties": {"type": {"const": "next_turn"}, "metadata": {"type": "object"}, "assistant_message": {"type": "object", "description": "the model's own message before this action (text, thinking, usage, model, stopReason: as POST /v1/sessions/{id}/messages), recorded in the transcript first"}}},
    {"type": "object", "required": ["type"], "properties": {"type": {"const": "fork"}, "metadata": {"type": "object"}, "assistant_message": {"type": "object", "description": "the model's own message before this action (text, thinking, usage, model, stopReason: as POST /v1/sessions/{id}/messages), recorded in the transcript first"}}}
  ]},
  "observation": {"title": "EnvcraftObservation", "type": "object", "description": "reset: session_id, episode_id, task, seed, prompt, docs, tools, turn; list_tools: tools; call_tool: tool_name, result (the tool's result: ok, and its fields or error {category, message}), error, metadata {action_index}; verify: reward, passed, checks; next_turn: prompt, turn; fork: session_id", "properties": {"session_id": {"type": "string"}, "episode_id": {"type": "string"}, "prompt": {"type": "string"}, "docs": {"type": "string"}, "tools": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "description": {"type": "string"}, "input_schema": {"type": "object"}}}}, "tool_name": {"type": "string"}, "result": {"type": "object"}, "reward": {"type": "number", "nullable": true}, "passed": {"type": "boolean"}, "checks": {"type": "array"}}},
  "state": {"title": "State", "type": "object", "properties": {"episode_id": {"type": "string", "nullable": true}, "step_count": {"type": "integer", "minimum": 0}, "session_id": {"type": "string"}, "task": {"type": "string"}, "turn": {"type": "integer"}}}
}"##;

pub async fn schema() -> Response {
    let schema: Value = serde_json::from_str(SCHEMA).unwrap_or(Value::Null);
    Json(schema).into_response()
}

/// `POST /mcp`: OpenEnv's JSON-RPC endpoint, always a 200 with a JSON-RPC body.
pub async fn http_mcp(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let answer = match body {
        Ok(bytes) => match mcp::parse(&bytes) {
            Ok(message) => openenv_mcp(&state, message, None).await,
            Err(answer) => Some(answer),
        },
        Err(_) => Some(mcp::error_response(
            &Value::Null,
            &RpcError::new(
                mcp::code::INVALID_REQUEST,
                format!(
                    "the request body could not be read (at most {} bytes)",
                    state.config.max_body
                ),
            ),
        )),
    };
    match answer {
        Some(answer) => Json(answer).into_response(),
        None => StatusCode::ACCEPTED.into_response(),
    }
}

/// One JSON-RPC message of OpenEnv's: its session methods, or MCP's on the session
/// `params.session_id` names (or `connection`'s, the session of a WebSocket).
pub async fn openenv_mcp(
    state: &Arc<AppState>,
    message: Incoming,
    connection: Option<&str>,
) -> Option<Value> {
    let Incoming::Request {
        id: rpc_id,
        method,
        mut params,
    } = message
    else {
        return None;
    };
    let answer = match method.as_str() {
        "openenv/session/create" => match connection {
            Some(own) => Ok(json!({"session_id": own})),
            None => reset(state, &params)
                .await
                .map(|(session, _, _)| json!({"session_id": session}))
                .map_err(|e| match e {
                    StepError::Invalid(message) => {
                        RpcError::new(mcp::code::INVALID_PARAMS, message)
                    }
                    StepError::Failed(e) => mcp_http::rpc_error(&e),
                }),
        },
        "openenv/session/close" => match params.get("session_id").and_then(Value::as_str) {
            None => Err(RpcError::new(
                mcp::code::INVALID_PARAMS,
                "`params.session_id` is required: the session to close",
            )),
            Some(target) if Some(target) == connection => Err(RpcError::new(
                mcp::code::INVALID_REQUEST,
                "this WebSocket's own session closes with the connection (a `close` message)",
            )),
            Some(target) => episode::close(state, target)
                .await
                .map(|()| json!({"session_id": target, "closed": true}))
                .map_err(|e| mcp_http::rpc_error(&e)),
        },
        _ => {
            let named = match params.remove("session_id") {
                Some(Value::String(named)) => Some(named),
                _ => None,
            };
            match named.as_deref().or(connection) {
                Some(session) => mcp_http::answer(state, session, method, params).await,
                None if !mcp::needs_session(&method) => {
                    mcp_http::answer(state, "", method, params).await
                }
                None => Err(RpcError::new(
                    mcp::code::INVALID_PARAMS,
                    "`params.session_id` is required: `openenv/session/create` (with `task`) makes a session",
                )),
            }
        }
    };
    Some(mcp::response(&rpc_id, answer))
}
