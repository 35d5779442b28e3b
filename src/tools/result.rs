//! What a tool call returns to the agent: `{"ok": true, ...fields}` or `{"ok": false, "error":
//! {"category": ..., "message": ...}}`, never a panic or a transport error.
//!
//! Messages are shown to the agent as they are: they name workspace-relative or in-sandbox
//! paths only, and give a short reason instead of an OS error's internals (those are logged
//! where the error is handled).

use std::fmt;

use serde::de::{self, Deserializer};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Why a tool call failed, as the agent (and a trainer reading trajectories) sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCategory {
    /// A required argument is absent; the message names it and says what it needs.
    MissingField,
    /// An argument is present but unusable (wrong type, ambiguous, out of range, unknown tool).
    InvalidArgument,
    /// What the call names does not exist (a file, a string to replace, a patch's context).
    NotFound,
    /// The call would write where writing is not allowed, or reach outside the workspace; the
    /// message names the entity.
    Permission,
    /// A file, an argument or the workspace is over a size limit.
    TooLarge,
    /// The call ran past its time limit.
    Timeout,
    /// The caller gave up on the call (an MCP client's cancellation): its command was killed.
    Cancelled,
    /// The session is not in a state where this call is allowed; the message says which state
    /// it is in and why.
    InvalidTransition,
    /// A lock could not be taken in time; retry later.
    LockTimeout,
    /// The session does not exist (it may have expired or been reset).
    SessionNotFound,
    /// No session is bound to the caller.
    MissingBinding,
    /// The tool failed for a reason that is not the agent's (an I/O error of the machine);
    /// the message is a short reason, the details are in the server's log.
    Internal,
}

impl ErrorCategory {
    /// The category as it appears in JSON (`missing_field`, `not_found`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCategory::MissingField => "missing_field",
            ErrorCategory::InvalidArgument => "invalid_argument",
            ErrorCategory::NotFound => "not_found",
            ErrorCategory::Permission => "permission",
            ErrorCategory::TooLarge => "too_large",
            ErrorCategory::Timeout => "timeout",
            ErrorCategory::Cancelled => "cancelled",
            ErrorCategory::InvalidTransition => "invalid_transition",
            ErrorCategory::LockTimeout => "lock_timeout",
            ErrorCategory::SessionNotFound => "session_not_found",
            ErrorCategory::MissingBinding => "missing_binding",
            ErrorCategory::Internal => "internal",
        }
    }
}

impl fmt::Display for ErrorCategory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed tool call: a category and a message safe to show the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{category}: {message}")]
pub struct ToolError {
    pub category: ErrorCategory,
    pub message: String,
}

impl ToolError {
    pub fn new(category: ErrorCategory, message: impl Into<String>) -> Self {
        ToolError {
            category,
            message: message.into(),
        }
    }

    /// `field` is required; `what` says what it must hold (e.g. "the file to read").
    pub fn missing_field(field: &str, what: &str) -> Self {
        Self::new(
            ErrorCategory::MissingField,
            format!("`{field}` is required: {what}"),
        )
    }

    pub fn invalid_argument(message: impl Into<String>) -> Self {
        Self::new(ErrorCategory::InvalidArgument, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCategory::NotFound, message)
    }

    pub fn permission(message: impl Into<String>) -> Self {
        Self::new(ErrorCategory::Permission, message)
    }

    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(ErrorCategory::TooLarge, message)
    }

    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(ErrorCategory::Timeout, message)
    }

    /// `state` is the current state; `why` says why the call is not allowed in it.
    pub fn cancelled(message: impl Into<String>) -> Self {
        ToolError::new(ErrorCategory::Cancelled, message)
    }

    pub fn invalid_transition(state: &str, why: &str) -> Self {
        Self::new(
            ErrorCategory::InvalidTransition,
            format!("the session is {state}: {why}"),
        )
    }

    pub fn session_not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorCategory::SessionNotFound, message)
    }

    pub fn missing_binding(message: impl Into<String>) -> Self {
        Self::new(ErrorCategory::MissingBinding, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCategory::Internal, message)
    }
}

/// The result of one tool call.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolResult {
    /// The call succeeded; these fields follow `"ok": true`.
    Ok(Map<String, Value>),
    /// The call failed.
    Err(ToolError),
}

impl ToolResult {
    /// A success carrying `fields` (a JSON object; anything else is put under `"result"`).
    /// A field named `ok` is dropped: the success flag is not the tool's to set.
    pub fn ok(fields: Value) -> Self {
        let mut map = match fields {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                let mut map = Map::new();
                map.insert("result".to_owned(), other);
                map
            }
        };
        map.remove("ok");
        ToolResult::Ok(map)
    }

    pub fn is_ok(&self) -> bool {
        matches!(self, ToolResult::Ok(_))
    }

    /// The error, when the call failed.
    pub fn error(&self) -> Option<&ToolError> {
        match self {
            ToolResult::Ok(_) => None,
            ToolResult::Err(e) => Some(e),
        }
    }

    /// The error's category, when the call failed.
    pub fn category(&self) -> Option<ErrorCategory> {
        self.error().map(|e| e.category)
    }

    /// A field of a success (`None` for a failure or an absent field).
    pub fn field(&self, name: &str) -> Option<&Value> {
        match self {
            ToolResult::Ok(map) => map.get(name),
            ToolResult::Err(_) => None,
        }
    }

    /// The result as the JSON value the agent receives, its fields moved.
    pub fn into_json(self) -> Value {
        match self {
            ToolResult::Ok(mut fields) => {
                fields.insert("ok".to_owned(), Value::Bool(true));
                Value::Object(fields)
            }
            err => err.to_json(),
        }
    }

    /// The result as the JSON value the agent receives.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        match self {
            ToolResult::Ok(fields) => {
                map.insert("ok".to_owned(), Value::Bool(true));
                for (k, v) in fields {
                    map.insert(k.clone(), v.clone());
                }
            }
            ToolResult::Err(e) => {
                map.insert("ok".to_owned(), Value::Bool(false));
                let mut error = Map::new();
                error.insert(
                    "category".to_owned(),
                    Value::String(e.category.as_str().to_owned()),
                );
                error.insert("message".to_owned(), Value::String(e.message.clone()));
                map.insert("error".to_owned(), Value::Object(error));
            }
        }
        Value::Object(map)
    }
}

impl From<ToolError> for ToolResult {
    fn from(e: ToolError) -> Self {
        ToolResult::Err(e)
    }
}

impl From<Result<Value, ToolError>> for ToolResult {
    fn from(r: Result<Value, ToolError>) -> Self {
        match r {
            Ok(fields) => ToolResult::ok(fields),
            Err(e) => ToolResult::Err(e),
        }
    }
}

impl Serialize for ToolResult {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ToolResult::Ok(fields) => {
                let mut map = serializer.serialize_map(Some(fields.len() + 1))?;
                map.serialize_entry("ok", &true)?;
                for (k, v) in fields {
                    map.serialize_entry(k, v)?;
                }
                map.end()
            }
            ToolResult::Err(e) => {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("ok", &false)?;
                map.serialize_entry("error", e)?;
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for ToolResult {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut map = Map::deserialize(deserializer)?;
        match map.remove("ok") {
            Some(Value::Bool(true)) => Ok(ToolResult::Ok(map)),
            Some(Value::Bool(false)) => {
                let error = map
                    .remove("error")
                    .ok_or_else(|| de::Error::missing_field("error"))?;
                ToolError::deserialize(error)
                    .map(ToolResult::Err)
                    .map_err(de::Error::custom)
            }
            Some(_) => Err(de::Error::custom("`ok` must be a boolean")),
            None => Err(de::Error::missing_field("ok")),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn success_serializes_flat_with_ok_first() {
        let r = ToolResult::ok(json!({"path": "a.txt", "bytes": 3, "ok": false}));
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(text, r#"{"ok":true,"bytes":3,"path":"a.txt"}"#);
        assert_eq!(serde_json::to_value(&r).unwrap(), r.to_json());
    }

    #[test]
    fn failure_serializes_category_and_message() {
        let r: ToolResult = ToolError::missing_field("path", "the file to read").into();
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"ok": false, "error": {"category": "missing_field",
                   "message": "`path` is required: the file to read"}})
        );
        assert_eq!(r.category(), Some(ErrorCategory::MissingField));
        assert_eq!(serde_json::to_value(&r).unwrap(), r.to_json());
    }

    #[test]
    fn every_category_is_snake_case() {
        let all = [
            (ErrorCategory::MissingField, "missing_field"),
            (ErrorCategory::InvalidArgument, "invalid_argument"),
            (ErrorCategory::NotFound, "not_found"),
            (ErrorCategory::Permission, "permission"),
            (ErrorCategory::TooLarge, "too_large"),
            (ErrorCategory::Timeout, "timeout"),
            (ErrorCategory::Cancelled, "cancelled"),
            (ErrorCategory::InvalidTransition, "invalid_transition"),
            (ErrorCategory::LockTimeout, "lock_timeout"),
            (ErrorCategory::SessionNotFound, "session_not_found"),
            (ErrorCategory::MissingBinding, "missing_binding"),
            (ErrorCategory::Internal, "internal"),
        ];
        for (c, s) in all {
            assert_eq!(serde_json::to_value(c).unwrap(), json!(s));
            assert_eq!(c.to_string(), s);
        }
    }

    #[test]
    fn results_round_trip() {
        for r in [
            ToolResult::ok(json!({"content": "x", "total_lines": 1})),
            ToolResult::ok(json!(null)),
            ToolError::invalid_transition("closed", "a closed session takes no calls").into(),
        ] {
            let text = serde_json::to_string(&r).unwrap();
            let back: ToolResult = serde_json::from_str(&text).unwrap();
            assert_eq!(back, r);
        }
        assert!(serde_json::from_str::<ToolResult>(r#"{"path": "a"}"#).is_err());
        assert!(serde_json::from_str::<ToolResult>(r#"{"ok": false}"#).is_err());
    }

    #[test]
    fn non_object_success_goes_under_result() {
        let r = ToolResult::ok(json!([1, 2]));
        assert_eq!(r.to_json(), json!({"ok": true, "result": [1, 2]}));
    }
}
