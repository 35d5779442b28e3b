//! API errors: a category, an HTTP status and a message safe to show a client (no host paths,
//! no internals; those are logged once where the error is made).

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// One failed request, as the client sees it: `{"error": {"category", "message"}}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub category: &'static str,
    pub message: String,
    /// Seconds for a `Retry-After` header (busy, full or draining).
    pub retry_after: Option<u32>,
}

/// The message of `session_not_found`, the same for every unknown id.
pub const SESSION_NOT_FOUND: &str = "session not found: it may have expired or been reset";

impl ApiError {
    fn new(status: StatusCode, category: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            category,
            message: message.into(),
            retry_after: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// `field` is absent: `needs` says what it must hold.
    pub fn missing_field(field: &str, needs: &str) -> ApiError {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "missing_field",
            format!("missing field `{field}`: {needs}"),
        )
    }

    pub fn unauthorized() -> ApiError {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or wrong bearer token: send `Authorization: Bearer TOKEN`",
        )
    }

    /// A request whose `Host` or `Origin` does not name this server (see `hosts`).
    pub fn forbidden_host(message: String) -> ApiError {
        ApiError::new(StatusCode::FORBIDDEN, "forbidden_host", message)
    }

    /// A task whose environment runs over an image the server's store does not hold.
    pub fn image_not_found(message: String) -> ApiError {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "image_not_found", message)
    }

    /// A session asks for an agent this server has no install of.
    pub fn agent_not_installed(message: impl Into<String>) -> ApiError {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "agent_not_installed",
            message,
        )
    }

    pub fn session_not_found() -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "session_not_found",
            SESSION_NOT_FOUND,
        )
    }

    pub fn task_not_found(task: &str) -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "task_not_found",
            format!(
                "task not found: {}: expected ENV/ID of a task under the server's workspaces (GET /v1/tasks lists them)",
                task.chars().take(200).collect::<String>()
            ),
        )
    }

    pub fn not_found() -> ApiError {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "no such endpoint (GET /openapi.json lists them)",
        )
    }

    pub fn method_not_allowed() -> ApiError {
        ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "bad_request",
            "this endpoint does not take that method (GET /openapi.json lists them)",
        )
    }

    pub fn invalid_transition(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::CONFLICT, "invalid_transition", message)
    }

    pub fn lock_timeout() -> ApiError {
        ApiError {
            retry_after: Some(1),
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "lock_timeout",
                "the session is busy with another call: retry later",
            )
        }
    }

    pub fn too_many_sessions(max: usize) -> ApiError {
        ApiError {
            retry_after: Some(5),
            ..ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_sessions",
                format!("the server holds its maximum of {max} sessions: close one or retry later"),
            )
        }
    }

    /// The machine has no room for another session: `message` names the resource (descriptors,
    /// processes, memory), what is used of it and what to do.
    pub fn capacity(message: impl Into<String>) -> ApiError {
        ApiError {
            retry_after: Some(5),
            ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "capacity", message)
        }
    }

    pub fn draining() -> ApiError {
        ApiError {
            retry_after: Some(5),
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "draining",
                "the server is shutting down and takes no new sessions: use another server",
            )
        }
    }

    pub fn payload_too_large(max: usize) -> ApiError {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the request body is larger than the server's limit of {max} bytes"),
        )
    }

    pub fn timeout(secs: u64) -> ApiError {
        ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            "timeout",
            format!("the request did not finish within the server's deadline of {secs} s"),
        )
    }

    /// The body did not arrive within the body deadline of `secs` seconds.
    pub fn body_timeout(secs: u64) -> ApiError {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "timeout",
            format!(
                "the request body did not arrive within the server's body deadline of {secs} s"
            ),
        )
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// A refused file transfer (its message is the file tools' own: workspace paths and the
    /// tar's names only), under the tool error's category.
    pub fn transfer(e: crate::tools::ToolError) -> ApiError {
        use crate::tools::ErrorCategory as C;
        let (status, category) = match e.category {
            C::NotFound => (StatusCode::NOT_FOUND, "not_found"),
            C::Permission => (StatusCode::FORBIDDEN, "permission"),
            C::TooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "too_large"),
            C::MissingField => (StatusCode::BAD_REQUEST, "missing_field"),
            C::Internal => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
            _ => (StatusCode::BAD_REQUEST, "invalid_argument"),
        };
        ApiError::new(status, category, e.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"category": self.category, "message": self.message}});
        let mut response = (self.status, Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}
