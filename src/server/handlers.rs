//! The endpoints: each parses its request, calls the session library (blocking work off the
//! async threads) and turns the result into JSON. No logic of their own beyond that.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::AppState;
use super::episode::{self, Creation, blocking, session_error};
use super::error::ApiError;
use super::requests::{CallRequest, CreateRequest};
use crate::spec::is_plain_name;
use crate::spec::task::TaskSpec;

type ApiResult = Result<Response, ApiError>;

/// The body as a JSON object: `bad_request` for bad JSON or another type, `payload_too_large`
/// past the limit. An empty body is an empty object.
pub(super) fn object(
    state: &AppState,
    body: Result<Bytes, BytesRejection>,
) -> Result<Map<String, Value>, ApiError> {
    let bytes = match body {
        Ok(bytes) => bytes,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return Err(ApiError::payload_too_large(state.config.max_body));
        }
        Err(_) => return Err(ApiError::bad_request("the request body could not be read")),
    };
    super::requests::object(&bytes)
}

pub async fn healthz() -> Response {
    Json(json!({"status": "ok"})).into_response()
}

pub async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    if state.is_draining() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "draining"})),
        )
            .into_response();
    }
    Json(json!({
        "status": "ready",
        "sessions": state.registry.len(),
        "max_sessions": state.registry.max,
    }))
    .into_response()
}

pub async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(state.registry.len()),
    )
        .into_response()
}

pub async fn openapi(State(state): State<Arc<AppState>>) -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        super::openapi::document(state.config.openenv_mode),
    )
        .into_response()
}

pub async fn fallback() -> ApiError {
    ApiError::not_found()
}

pub async fn method_not_allowed() -> ApiError {
    ApiError::method_not_allowed()
}

/// `GET /v1/tasks`: every task under the workspaces root.
pub async fn tasks(State(state): State<Arc<AppState>>) -> ApiResult {
    let root = state.config.workspaces.clone();
    let tasks = blocking(move || {
        crate::spec::task::find_tasks(&root)
            .into_iter()
            .filter_map(|dir| match TaskSpec::load(&dir) {
                Ok(task) => Some(json!({
                    "task": format!("{}/{}", task.env.name, task.id),
                    "env": task.env.name,
                    "id": task.id,
                    "prompt": task.turns.first().cloned().unwrap_or_default(),
                })),
                Err(e) => {
                    tracing::warn!(error = %crate::error::chain(&e), "skipping a task that does not load");
                    None
                }
            })
            .collect::<Vec<_>>()
    })
    .await?;
    Ok(Json(json!({"tasks": tasks})).into_response())
}

/// The task a create request's `task` field names: `ENV/ID` under the workspaces root, or an
/// inline task (see [`super::inline`]).
pub(super) fn task_of(state: &AppState, task: &Value) -> Result<TaskSpec, ApiError> {
    match task {
        Value::String(name) => load_task(state, name),
        Value::Object(object) => super::inline::load(
            object,
            &state.config.workspaces,
            &state.session_options.state_root,
        ),
        _ => Err(ApiError::bad_request(
            "field `task` must be a task name, ENV/ID (GET /v1/tasks lists them), or an inline task object",
        )),
    }
}

/// The task `ENV/ID` under the workspaces root; never a path elsewhere.
fn load_task(state: &AppState, name: &str) -> Result<TaskSpec, ApiError> {
    let parts: Vec<&str> = name.split('/').collect();
    let [env, id] = parts[..] else {
        return Err(ApiError::task_not_found(name));
    };
    if !is_plain_name(env) || !is_plain_name(id) {
        return Err(ApiError::task_not_found(name));
    }
    let dir = state.config.workspaces.join(env).join("tasks").join(id);
    if !dir.join("task.toml").is_file() {
        return Err(ApiError::task_not_found(name));
    }
    super::task_cache::load(&dir).map_err(|e| {
        if let Some(refused) = super::capacity::refused_by_kernel(&e) {
            return refused;
        }
        tracing::error!(task = name, error = %crate::error::chain(&e), "task does not load");
        ApiError::internal(format!("task {name} does not load: see the server's log"))
    })
}

/// `POST /v1/sessions {"task", "base_time"?, "seed"?}` → 201 with the session's id, prompt,
/// docs, tools.
pub async fn create(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    if state.is_draining() {
        return Err(ApiError::draining());
    }
    let map = object(&state, body)?;
    let creation = creation_of(&map)?;
    let response = episode::create(&state, creation).await?;
    Ok((StatusCode::CREATED, Json(response)).into_response())
}

/// The session a create request asks for: `task` (required), `base_time`, `seed` (see
/// [`CreateRequest`]).
pub(super) fn creation_of(map: &Map<String, Value>) -> Result<Creation, ApiError> {
    let CreateRequest {
        task,
        base_time,
        seed,
        agent,
    } = CreateRequest::parse(map)?;
    Ok(Creation {
        task,
        base_time,
        seed,
        episode_id: None,
        agent,
    })
}

/// `POST /v1/sessions/{id}/call {"tool", "args"}` → the tool's result (a failed tool is a
/// result, not an HTTP error).
pub async fn call(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let map = object(&state, body)?;
    let CallRequest { tool, args } = CallRequest::parse(&map)?;
    let answer = episode::call(&state, &id, tool, args).await?;
    // The result may hold a whole file: written by `crate::json` (the bytes `Json` would
    // write, with strings escaped in blocks rather than byte by byte).
    let body = crate::json::to_vec(&answer);
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// `POST /v1/sessions/{id}/messages {"text", "thinking"?, "usage"?, ...}` → the transcript
/// entry the model's assistant message became.
pub async fn add_message(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let map = object(&state, body)?;
    let message = super::requests::assistant_message(&Value::Object(map))?;
    let entry = episode::add_message(&state, &id, message).await?;
    Ok((StatusCode::CREATED, Json(entry)).into_response())
}

/// `POST /v1/sessions/{id}/next_turn` → the next prompt; `invalid_transition` after the last.
pub async fn next_turn(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    Ok(Json(episode::next_turn(&state, &id).await?).into_response())
}

/// `POST /v1/sessions/{id}/agent/turn` → the current turn run by the session's OpenClaw.
pub async fn agent_turn(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    Ok(Json(super::agent::turn(&state, &id).await?).into_response())
}

/// `POST /v1/sessions/{id}/fork` → 201 with the new session's id.
pub async fn fork(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    let new_id = episode::fork(&state, &id).await?;
    Ok((StatusCode::CREATED, Json(json!({"session_id": new_id}))).into_response())
}

/// `POST /v1/sessions/{id}/verify` → reward, passed, checks.
pub async fn verify(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    Ok(Json(episode::verify(&state, &id).await?).into_response())
}

/// `GET /v1/sessions/{id}/diff` → the workspace's changes.
pub async fn diff(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    let changes = episode::with_session(&state, &id, |session| {
        session
            .changes()
            .map_err(|e| session_error("cannot list the changes", &e))
    })
    .await??;
    Ok(Json(changes).into_response())
}

/// `DELETE /v1/sessions/{id}` → the session is closed (processes, mounts, directory).
pub async fn close(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    episode::close(&state, &id).await?;
    Ok(Json(json!({"closed": id})).into_response())
}
