//! The endpoints: each parses its request, calls the session library (blocking work off the
//! async threads) and turns the result into JSON. No logic of their own beyond that.

use std::sync::Arc;
use std::time::Instant;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::AppState;
use super::error::ApiError;
use super::registry::{Locked, close_entry};
use super::requests::{CallRequest, CreateRequest};
use crate::session::{Session, SessionError};
use crate::spec::is_plain_name;
use crate::spec::task::TaskSpec;

type ApiResult = Result<Response, ApiError>;

/// The body as a JSON object: `bad_request` for bad JSON or another type, `payload_too_large`
/// past the limit. An empty body is an empty object.
fn object(
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

/// Run `work` on a blocking thread; a panic there is an internal error.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work).await.map_err(|e| {
        tracing::error!(error = %e, "a blocking task failed");
        ApiError::internal("the server failed while handling the request")
    })
}

/// A session error as an API error: logged in full, sent without internals. A resource the
/// kernel refused (descriptors, processes, memory) is `capacity`, not the session's fault.
fn session_error(what: &str, e: &SessionError) -> ApiError {
    if let Some(refused) = super::capacity::refused_by_kernel(e) {
        return refused;
    }
    tracing::error!(error = %crate::error::chain(e), "{what}");
    match e {
        // Names the task only.
        SessionError::NoExpected { .. } => ApiError::internal(format!("{what}: {e}")),
        _ => ApiError::internal(format!("{what}: see the server's log")),
    }
}

/// The session in a locked entry, or `invalid_transition` if it was closed meanwhile.
fn open(locked: &mut Locked) -> Result<&mut Session, ApiError> {
    locked.as_mut().ok_or_else(|| {
        ApiError::invalid_transition("the session is closing or closed: no more calls are taken")
    })
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

pub async fn openapi() -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        super::openapi::document(),
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
    TaskSpec::load(&dir).map_err(|e| {
        if let Some(refused) = super::capacity::refused_by_kernel(&e) {
            return refused;
        }
        tracing::error!(task = name, error = %crate::error::chain(&e), "task does not load");
        ApiError::internal(format!("task {name} does not load: see the server's log"))
    })
}

/// The tools of a session in OpenAI's function-calling form (as `envcraft tools`).
fn openai_tools(session: &Session) -> Vec<Value> {
    session
        .tool_schemas()
        .into_iter()
        .map(|(name, description, parameters)| {
            json!({
                "type": "function",
                "function": {"name": name, "description": description, "parameters": parameters},
            })
        })
        .collect()
}

/// `POST /v1/sessions {"task", "base_time"?}` → 201 with the session's id, prompt, docs, tools.
pub async fn create(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    if state.is_draining() {
        return Err(ApiError::draining());
    }
    let map = object(&state, body)?;
    let CreateRequest {
        task: task_value,
        base_time,
        seed,
    } = CreateRequest::parse(&map)?;
    let slot_state = state.clone();
    let response = blocking(move || -> Result<Value, ApiError> {
        let state = slot_state;
        let slot = state.registry.reserve()?;
        let task = task_of(&state, &task_value)?;
        let name = format!("{}/{}", task.env.name, task.id);
        let mut options = state.session_options.clone();
        options.base_time = base_time;
        options.seed = seed;
        // What a restarted server needs to make the session again (see `super::resume`).
        options.origin = json!({"task": task_value});
        let session = {
            let _clone = super::clone_lock();
            Session::create(&task, &options)
        }
        .map_err(|e| session_error("cannot create the session", &e))?;
        let body = json!({
            "task": name,
            "seed": seed,
            "prompt": session.prompt(),
            "docs": task.env.docs,
            "tools": openai_tools(&session),
            "action_index": session.action_index(),
        });
        // Inserted here, not in the async handler: a request past its deadline still leaves
        // the session where the idle sweeper finds it.
        let id = state.registry.insert(slot, session);
        state.metrics.session_created();
        tracing::info!(session = %id, task = %name, "session created");
        let mut body = body;
        body["session_id"] = json!(id);
        Ok(body)
    })
    .await??;
    Ok((StatusCode::CREATED, Json(response)).into_response())
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
    let entry = state.registry.get(&id)?;
    let mut locked = entry.lock(state.config.lock_wait).await?;
    open(&mut locked)?;
    let started = Instant::now();
    let (locked, result) = blocking(move || {
        let result = match locked.as_mut() {
            Some(session) => session.call(&tool, &args),
            None => Value::Null,
        };
        (locked, result)
    })
    .await?;
    let Some(session) = locked.as_ref() else {
        return Err(ApiError::internal("the session was lost"));
    };
    let action_index = session.action_index();
    let transcript_truncated = session.transcript_truncated();
    let name = map.get("tool").and_then(Value::as_str).unwrap_or_default();
    let label = if entry.tools.iter().any(|t| t == name) {
        name
    } else {
        "unknown"
    };
    let ok = result.get("ok") == Some(&Value::Bool(true));
    state.metrics.tool_call(label, ok, started.elapsed());
    // The result may hold a whole file: written by `crate::json` (the bytes `Json` would
    // write, with strings escaped in blocks rather than byte by byte).
    let mut answer = json!({"action_index": action_index, "result": result});
    if transcript_truncated {
        // Said on every call from the cut on: the session's record is no longer complete.
        answer["transcript_truncated"] = Value::Bool(true);
    }
    let body = crate::json::to_vec(&answer);
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

/// `POST /v1/sessions/{id}/next_turn` → the next prompt; `invalid_transition` after the last.
pub async fn next_turn(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    let entry = state.registry.get(&id)?;
    let mut locked = entry.lock(state.config.lock_wait).await?;
    open(&mut locked)?;
    let result = blocking(move || {
        let session = locked.as_mut().ok_or_else(ApiError::session_not_found)?;
        let (turn, turns) = (session.turn(), session.task().turns.len());
        match session.next_turn() {
            Ok(Some(prompt)) => Ok(json!({"prompt": prompt, "turn": session.turn()})),
            Ok(None) => Err(ApiError::invalid_transition(format!(
                "the session is at its last turn (turn {turn} of {turns}, counting from 0): there is no next prompt"
            ))),
            Err(e) => Err(session_error("cannot move to the next turn", &e)),
        }
    })
    .await??;
    Ok(Json(result).into_response())
}

/// `POST /v1/sessions/{id}/fork` → 201 with the new session's id.
pub async fn fork(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    if state.is_draining() {
        return Err(ApiError::draining());
    }
    let entry = state.registry.get(&id)?;
    let mut locked = entry.lock(state.config.lock_wait).await?;
    open(&mut locked)?;
    let fork_state = state.clone();
    let new_id = blocking(move || {
        let state = fork_state;
        let slot = state.registry.reserve()?;
        let session = locked.as_mut().ok_or_else(ApiError::session_not_found)?;
        let fork = {
            let _clone = super::clone_lock();
            session.fork()
        }
        .map_err(|e| session_error("cannot fork the session", &e))?;
        let id = state.registry.insert(slot, fork);
        state.metrics.session_created();
        Ok::<_, ApiError>(id)
    })
    .await??;
    Ok((StatusCode::CREATED, Json(json!({"session_id": new_id}))).into_response())
}

/// `POST /v1/sessions/{id}/verify` → reward, passed, checks.
pub async fn verify(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    let entry = state.registry.get(&id)?;
    let mut locked = entry.lock(state.config.lock_wait).await?;
    open(&mut locked)?;
    let started = Instant::now();
    let verdict = blocking(move || {
        let session = locked.as_mut().ok_or_else(ApiError::session_not_found)?;
        let _clone = super::clone_lock();
        session
            .verify()
            .map_err(|e| session_error("cannot verify the session", &e))
    })
    .await??;
    state.metrics.verified(started.elapsed());
    Ok(Json(json!({
        "reward": verdict.reward,
        "passed": verdict.passed,
        "checks": verdict.checks,
    }))
    .into_response())
}

/// `GET /v1/sessions/{id}/diff` → the workspace's changes.
pub async fn diff(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    let entry = state.registry.get(&id)?;
    let mut locked = entry.lock(state.config.lock_wait).await?;
    open(&mut locked)?;
    let changes = blocking(move || {
        let session = locked.as_mut().ok_or_else(ApiError::session_not_found)?;
        session
            .changes()
            .map_err(|e| session_error("cannot list the changes", &e))
    })
    .await??;
    Ok(Json(changes).into_response())
}

/// `DELETE /v1/sessions/{id}` → the session is closed (processes, mounts, directory).
pub async fn close(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    let entry = state
        .registry
        .remove(&id)
        .ok_or_else(ApiError::session_not_found)?;
    if !close_entry(entry, state.config.request_timeout).await {
        return Err(ApiError::internal("the session could not be closed"));
    }
    tracing::info!(session = %id, "session closed");
    Ok(Json(json!({"closed": id})).into_response())
}
