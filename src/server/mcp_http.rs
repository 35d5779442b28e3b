//! MCP on `envcraft serve`: the dispatch of one JSON-RPC message to a session through
//! [`super::episode`] (shared by Streamable HTTP here, OpenEnv's `POST /mcp` and its WebSocket
//! `mcp` messages), and the Streamable HTTP endpoints: `POST /v1/sessions/{id}/mcp` for a
//! session made over `/v1` (the trainer keeps it: no `Mcp-Session-Id`, so the client never
//! deletes it), and `POST /v1/mcp?task=ENV/ID` whose `initialize` makes a session and names it
//! in `Mcp-Session-Id` (the client's: `DELETE /v1/mcp` closes it). Answers are JSON
//! (`application/json`), notifications and responses get `202 Accepted`; an unknown
//! `MCP-Protocol-Version` header is a 400, an unknown session a 404, as the transport says.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::AppState;
use super::episode::{self, Creation};
use super::error::ApiError;
use crate::mcp::{self, Incoming, RpcError};

/// The header naming the session an MCP client talks to.
pub const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";

/// An API error as a JSON-RPC server error, its category in `data`.
pub fn rpc_error(e: &ApiError) -> RpcError {
    RpcError {
        code: mcp::code::SERVER_ERROR,
        message: e.message.clone(),
        data: Some(json!({"category": e.category})),
    }
}

/// Answer `method` with `params` on session `id`.
pub async fn answer(
    state: &AppState,
    id: &str,
    method: String,
    params: Map<String, Value>,
) -> Result<Value, RpcError> {
    answer_request(state, id, None, method, params).await
}

/// Answer request `rpc_id` (when it has one: then a `notifications/cancelled` naming it kills
/// its command, see [`cancel`]) with `params` on session `id`.
async fn answer_request(
    state: &AppState,
    id: &str,
    rpc_id: Option<&Value>,
    method: String,
    params: Map<String, Value>,
) -> Result<Value, RpcError> {
    if let Some(answer) = mcp::answer_without_session(&method) {
        return answer;
    }
    let started = Instant::now();
    let tool = (method == "tools/call")
        .then(|| {
            params
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .flatten();
    let entry = match (&tool, rpc_id) {
        (Some(_), Some(rpc_id)) => state.registry.get(id).ok().map(|e| (e, rpc_id.to_string())),
        _ => None,
    };
    let result = episode::with_session(state, id, move |session| {
        let Some((entry, rpc_id)) = entry else {
            return mcp::answer(session, &method, &params);
        };
        match session.canceller() {
            Ok(cancel) => entry.begin_call(rpc_id, cancel),
            Err(e) => tracing::warn!(error = %e, "this call cannot be cancelled"),
        }
        let answer = mcp::answer(session, &method, &params);
        entry.end_call();
        answer
    })
    .await
    .map_err(|e| rpc_error(&e))?;
    if let (Some(tool), Ok(called)) = (tool, &result) {
        let ok = called.get("isError") == Some(&Value::Bool(false));
        state.metrics.tool_call(&tool, ok, started.elapsed());
    }
    result
}

/// Answer one message on session `id`: the response, or `None` for a notification.
pub async fn dispatch(state: &AppState, id: &str, message: Incoming) -> Option<Value> {
    match message {
        Incoming::Request {
            id: rpc_id,
            method,
            params,
        } => Some(mcp::response(
            &rpc_id,
            answer_request(state, id, Some(&rpc_id), method, params).await,
        )),
        Incoming::Notification { method, params } => {
            if method == "notifications/cancelled" {
                cancel(state, id, &params);
            }
            None
        }
        Incoming::Response => None,
    }
}

/// `notifications/cancelled` on session `id`: the call of the request it names, when it runs
/// now, has its command killed with its process group (the call then answers `cancelled`,
/// an answer the client no longer waits for); a request not running is not affected.
fn cancel(state: &AppState, id: &str, params: &Map<String, Value>) {
    if let (Some(rpc_id), Ok(entry)) = (params.get("requestId"), state.registry.get(id)) {
        let killed = entry.cancel_call(&rpc_id.to_string());
        tracing::debug!(session = id, request = %rpc_id, killed, "MCP cancellation");
    }
}

/// A JSON-RPC message in a response of `status`.
fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        crate::json::to_vec(body),
    )
        .into_response()
}

/// The request's body as one message; the response to send instead when it is not one.
fn message_of(
    state: &AppState,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Incoming, Box<Response>> {
    if let Some(version) = headers.get(VERSION_HEADER) {
        let version = version.to_str().unwrap_or_default();
        if !mcp::header_version_known(version) {
            let error = RpcError::new(
                mcp::code::INVALID_REQUEST,
                format!(
                    "unsupported MCP-Protocol-Version `{}`: this server speaks {}",
                    version.chars().take(32).collect::<String>(),
                    mcp::PROTOCOL_VERSIONS.join(", ")
                ),
            );
            return Err(Box::new(json_response(
                StatusCode::BAD_REQUEST,
                &mcp::error_response(&Value::Null, &error),
            )));
        }
    }
    let bytes = match body {
        Ok(bytes) => bytes,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return Err(Box::new(
                ApiError::payload_too_large(state.config.max_body).into_response(),
            ));
        }
        Err(_) => {
            return Err(Box::new(
                ApiError::bad_request("the request body could not be read").into_response(),
            ));
        }
    };
    mcp::parse(&bytes).map_err(|answer| Box::new(json_response(StatusCode::BAD_REQUEST, &answer)))
}

/// The HTTP answer to `answer` (none: 202).
fn answered(answer: Option<Value>, session: Option<&str>) -> Response {
    let Some(answer) = answer else {
        return StatusCode::ACCEPTED.into_response();
    };
    let mut response = json_response(StatusCode::OK, &answer);
    if let Some(value) = session.and_then(|s| HeaderValue::from_str(s).ok()) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

/// `POST /v1/sessions/{id}/mcp`: one MCP message to a session made over `/v1`.
pub async fn session_mcp(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if let Some(named) = headers.get(SESSION_HEADER)
        && named.as_bytes() != id.as_bytes()
    {
        return ApiError::session_not_found().into_response();
    }
    // Unknown sessions are a 404 whatever the message, as Streamable HTTP says.
    if let Err(e) = state.registry.get(&id) {
        return e.into_response();
    }
    match message_of(&state, &headers, body) {
        Ok(message) => answered(dispatch(&state, &id, message).await, None),
        Err(response) => *response,
    }
}

/// `POST /v1/mcp?task=ENV/ID&seed=N`: `initialize` makes a session of the task and answers
/// with its id in `Mcp-Session-Id`; later messages name it in that header.
pub async fn entry_mcp(
    State(state): State<Arc<AppState>>,
    Query(query): Query<Map<String, Value>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let message = match message_of(&state, &headers, body) {
        Ok(message) => message,
        Err(response) => return *response,
    };
    if let Some(named) = headers.get(SESSION_HEADER) {
        let id = named.to_str().unwrap_or_default().to_string();
        if let Err(e) = state.registry.get(&id) {
            return e.into_response();
        }
        return answered(dispatch(&state, &id, message).await, None);
    }
    let Incoming::Request {
        id: rpc_id,
        method,
        params,
    } = message
    else {
        return ApiError::bad_request(
            "no Mcp-Session-Id header: start with an `initialize` request, whose answer names the session",
        )
        .into_response();
    };
    if method != "initialize" {
        let error = RpcError::new(
            mcp::code::INVALID_REQUEST,
            format!(
                "no Mcp-Session-Id header: `{}` needs a session, which `initialize` makes",
                method.chars().take(64).collect::<String>()
            ),
        );
        return json_response(
            StatusCode::BAD_REQUEST,
            &mcp::error_response(&rpc_id, &error),
        );
    }
    let creation = match creation_of_query(&query) {
        Ok(creation) => creation,
        Err(e) => return e.into_response(),
    };
    let session = match episode::create(&state, creation).await {
        Ok(body) => body["session_id"].as_str().unwrap_or_default().to_string(),
        Err(e) => return e.into_response(),
    };
    let answer = answer(&state, &session, method, params).await;
    answered(Some(mcp::response(&rpc_id, answer)), Some(&session))
}

/// The session `POST /v1/mcp` makes: `task` (ENV/ID) and `seed` from the query string.
fn creation_of_query(query: &Map<String, Value>) -> Result<Creation, ApiError> {
    if let Some(unknown) = query
        .keys()
        .find(|k| !["task", "seed"].contains(&k.as_str()))
    {
        return Err(ApiError::bad_request(format!(
            "unknown query parameter `{}`: expected `task` (ENV/ID) and optionally `seed`",
            unknown.chars().take(64).collect::<String>()
        )));
    }
    let task = match query.get("task") {
        Some(Value::String(task)) => Value::String(task.clone()),
        _ => {
            return Err(ApiError::missing_field(
                "task",
                "the task to run, as the query parameter ?task=ENV/ID (GET /v1/tasks lists them)",
            ));
        }
    };
    let seed = match query.get("seed") {
        None => None,
        Some(Value::String(text)) => Some(text.parse::<u64>().map_err(|_| {
            ApiError::bad_request("query parameter `seed` must be an integer from 0 to 2^64-1")
        })?),
        Some(_) => {
            return Err(ApiError::bad_request(
                "query parameter `seed` must be an integer",
            ));
        }
    };
    Ok(Creation {
        task,
        base_time: None,
        seed,
        episode_id: None,
        agent: None,
    })
}

/// `DELETE /v1/mcp`: close the session `Mcp-Session-Id` names.
pub async fn entry_close(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    let Some(id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return ApiError::missing_field("Mcp-Session-Id", "the header naming the session to close")
            .into_response();
    };
    match episode::close(&state, id).await {
        Ok(()) => StatusCode::OK.into_response(),
        Err(e) => e.into_response(),
    }
}
