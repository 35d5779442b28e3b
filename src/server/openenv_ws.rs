//! OpenEnv's WebSocket `/ws`: one session per connection. The client sends
//! `{"type": "reset"|"step"|"state"|"close"|"mcp", "data": ...}` and is answered with
//! `observation`, `state`, `mcp` or `error` messages (`data.code`: OpenEnv's `INVALID_JSON`,
//! `UNKNOWN_TYPE`, `VALIDATION_ERROR`, `EXECUTION_ERROR`, `CAPACITY_REACHED`,
//! `SESSION_ERROR`; `data.category`: envcraft's), as `openenv-core` 0.3 does. `reset` makes the
//! connection's session (closing the one before); the session is closed when the connection
//! ends however it ends (a `close` message, a close frame, a client that vanished, the idle
//! timeout), so a vanished client leaves nothing behind. Frames and messages are bounded by
//! `--max-body`, the write buffer too: a client that does not read stalls only its own
//! connection.

use std::sync::Arc;

use axum::Extension;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::AppState;
use super::connections::Connection;
use super::episode;
use super::error::ApiError;
use super::openenv::{self, StepError};
use crate::mcp;

/// The connection's episode: its session.
struct Episode {
    session: String,
}

/// `GET /ws`: the upgrade to a WebSocket, bounded by `--max-body`.
pub async fn upgrade(
    State(state): State<Arc<AppState>>,
    connection: Option<Extension<ConnectInfo<Connection>>>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade,
        Err(rejection) => {
            return ApiError::bad_request(format!("GET /ws is OpenEnv's WebSocket: {rejection}"))
                .into_response();
        }
    };
    let max = state.config.max_body;
    upgrade
        .max_message_size(max)
        .max_frame_size(max)
        .max_write_buffer_size(2 * max + (64 << 10))
        .on_upgrade(move |socket| async move {
            // For as long as the socket is open, the connection is handling a request: no
            // head deadline (frames are not request heads), only the idle timeout.
            let _handling = connection.map(|c| c.0.0.handling());
            serve(state, socket).await;
        })
}

/// An `error` message.
fn error(code: &str, message: impl Into<String>) -> Value {
    json!({"type": "error", "data": {"message": message.into(), "code": code}})
}

/// An API error as an `error` message: a full server is `CAPACITY_REACHED` (with the counts),
/// a bad request (a field, a task name) `VALIDATION_ERROR`, anything else `EXECUTION_ERROR`;
/// with envcraft's category.
fn api_error(state: &AppState, e: &ApiError) -> Value {
    let capacity = matches!(e.category, "too_many_sessions" | "capacity" | "draining");
    let code = match e.category {
        _ if capacity => "CAPACITY_REACHED",
        "bad_request" | "missing_field" | "task_not_found" => "VALIDATION_ERROR",
        _ => "EXECUTION_ERROR",
    };
    let mut message = error(code, e.message.clone());
    message["data"]["category"] = json!(e.category);
    if capacity {
        message["data"]["active_sessions"] = json!(state.registry.len());
        message["data"]["max_sessions"] = json!(state.registry.max);
    }
    message
}

fn step_error(state: &AppState, e: StepError) -> Value {
    match e {
        StepError::Invalid(message) => error("VALIDATION_ERROR", message),
        StepError::Failed(e) => api_error(state, &e),
    }
}

/// The connection: messages answered in order until it ends; then its session is closed.
async fn serve(state: Arc<AppState>, mut socket: WebSocket) {
    let mut episode: Option<Episode> = None;
    while let Some(Ok(frame)) = socket.recv().await {
        let text = match frame {
            Message::Text(text) => text.to_string(),
            Message::Binary(bytes) => match String::from_utf8(bytes.to_vec()) {
                Ok(text) => text,
                Err(_) => {
                    let answer = error(
                        "INVALID_JSON",
                        "a binary frame that is not UTF-8: send JSON text",
                    );
                    if send(&mut socket, &answer).await.is_err() {
                        break;
                    }
                    continue;
                }
            },
            Message::Close(_) => break,
            Message::Ping(_) | Message::Pong(_) => continue,
        };
        let (answer, close) = handle(&state, &mut episode, &text).await;
        if let Some(answer) = answer
            && send(&mut socket, &answer).await.is_err()
        {
            break;
        }
        if close {
            break;
        }
    }
    if let Some(episode) = episode {
        close(&state, &episode.session).await;
    }
    let _ = socket.send(Message::Close(None)).await;
}

async fn send(socket: &mut WebSocket, message: &Value) -> Result<(), axum::Error> {
    let text = String::from_utf8(crate::json::to_vec(message)).unwrap_or_default();
    socket.send(Message::Text(text.into())).await
}

async fn close(state: &AppState, session: &str) {
    match episode::close(state, session).await {
        Ok(()) => {}
        // Already gone (the idle sweeper, a DELETE over /v1): nothing left to close.
        Err(e) if e.category == "session_not_found" => {}
        Err(e) => tracing::warn!(session, error = %e.message, "the session of a closed WebSocket"),
    }
}

/// One message: the answer (none for an MCP notification) and whether the connection ends.
async fn handle(
    state: &Arc<AppState>,
    episode: &mut Option<Episode>,
    text: &str,
) -> (Option<Value>, bool) {
    let message: Value = match serde_json::from_str(text) {
        Ok(message) => message,
        Err(e) => {
            return (
                Some(error("INVALID_JSON", format!("Invalid JSON: {e}"))),
                false,
            );
        }
    };
    let Value::Object(mut message) = message else {
        return (
            Some(error(
                "VALIDATION_ERROR",
                "a message must be an object {\"type\", \"data\"}",
            )),
            false,
        );
    };
    let kind = match message.remove("type") {
        Some(Value::String(kind)) => kind,
        _ => String::new(),
    };
    let data = message.remove("data");
    if let Some(extra) = message.keys().next() {
        return (
            Some(error(
                "VALIDATION_ERROR",
                format!(
                    "unknown field `{}` in a message: expected `type` and `data`",
                    extra.chars().take(64).collect::<String>()
                ),
            )),
            false,
        );
    }
    let answer = match kind.as_str() {
        "reset" => {
            let data = match data {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(data)) => data,
                Some(_) => {
                    return (
                        Some(error(
                            "VALIDATION_ERROR",
                            "`data` of a reset must be an object",
                        )),
                        false,
                    );
                }
            };
            if let Some(old) = episode.take() {
                close(state, &old.session).await;
            }
            match openenv::reset(state, &data).await {
                Ok((session, _, seen)) => {
                    *episode = Some(Episode { session });
                    json!({"type": "observation", "data": seen})
                }
                Err(e) => step_error(state, e),
            }
        }
        "step" => match (episode.as_ref(), data) {
            (None, _) => error(
                "VALIDATION_ERROR",
                "no episode yet: send a `reset` (with `task`) first",
            ),
            (Some(_), None) => error("VALIDATION_ERROR", "a step needs `data`: the action"),
            (Some(current), Some(action)) => {
                match openenv::step(state, &current.session, &action, None).await {
                    Ok(seen) => json!({"type": "observation", "data": seen}),
                    Err(e) => step_error(state, e),
                }
            }
        },
        "state" => match episode.as_ref() {
            None => json!({"type": "state", "data": {"episode_id": null, "step_count": 0}}),
            Some(current) => match openenv::session_state(state, &current.session).await {
                Ok(body) => json!({"type": "state", "data": body}),
                Err(e) => api_error(state, &e),
            },
        },
        "close" => return (None, true),
        "mcp" => {
            let Some(payload) = data else {
                return (
                    Some(error(
                        "VALIDATION_ERROR",
                        "an `mcp` message needs `data`: the JSON-RPC request",
                    )),
                    false,
                );
            };
            let answer = match mcp::incoming(payload) {
                Ok(incoming) => {
                    let own = episode.as_ref().map(|e| e.session.as_str());
                    match openenv::openenv_mcp(state, incoming, own).await {
                        Some(answer) => answer,
                        None => return (None, false),
                    }
                }
                Err(answer) => answer,
            };
            json!({"type": "mcp", "data": answer})
        }
        other => error(
            "UNKNOWN_TYPE",
            format!(
                "Unknown message type: `{}`: expected reset, step, state, close or mcp",
                other.chars().take(64).collect::<String>()
            ),
        ),
    };
    (Some(answer), false)
}
