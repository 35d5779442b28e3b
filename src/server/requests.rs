//! The request bodies the handlers read, parsed from their bytes alone: a JSON object, then
//! the fields of each endpoint that takes one (`POST /v1/sessions`, `POST .../call`, `POST
//! .../messages`). The
//! handlers call these and nothing else, so that what is fuzzed (the `fuzz_targets` module) is
//! what the server runs; every bad body is a `bad_request` or `missing_field` naming the field.

use serde_json::{Map, Value, json};

use super::error::ApiError;
use crate::spec::time::Timestamp;

/// The body as a JSON object: `bad_request` for bad JSON or another type. An empty body (or
/// one of white space) is an empty object.
pub fn object(bytes: &[u8]) -> Result<Map<String, Value>, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::bad_request(
            "the request body must be a JSON object",
        )),
        Err(e) => Err(ApiError::bad_request(format!(
            "the request body is not valid JSON: {e}"
        ))),
    }
}

/// `bad_request` for a field not in `known`.
pub fn no_unknown_fields(map: &Map<String, Value>, known: &[&str]) -> Result<(), ApiError> {
    match map.keys().find(|k| !known.contains(&k.as_str())) {
        Some(k) => Err(ApiError::bad_request(format!(
            "unknown field `{}`: expected {}",
            k.chars().take(64).collect::<String>(),
            known
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        None => Ok(()),
    }
}

/// A string field: `missing_field` when absent, `bad_request` when not a string.
fn string_field<'a>(
    map: &'a Map<String, Value>,
    field: &str,
    needs: &str,
) -> Result<&'a str, ApiError> {
    match map.get(field) {
        None | Some(Value::Null) => Err(ApiError::missing_field(field, needs)),
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(ApiError::bad_request(format!(
            "field `{field}` must be a string: {needs}"
        ))),
    }
}

/// `POST /v1/sessions {"task", "base_time"?, "seed"?}`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateRequest {
    /// `ENV/ID` (a string) or an inline task (an object, see [`super::inline`]); not yet
    /// looked up.
    pub task: Value,
    /// Unix seconds of the session's clock at action 0, when given.
    pub base_time: Option<i64>,
    pub seed: Option<u64>,
    /// The agent that runs the task's turns (see [`super::agent`]), not yet checked.
    pub agent: Option<Value>,
}

impl CreateRequest {
    pub fn parse(map: &Map<String, Value>) -> Result<CreateRequest, ApiError> {
        no_unknown_fields(map, &["task", "base_time", "seed", "agent"])?;
        let task = match map.get("task") {
            None | Some(Value::Null) => {
                return Err(ApiError::missing_field(
                    "task",
                    "the task to run, as ENV/ID (GET /v1/tasks lists them) or an inline task object",
                ));
            }
            Some(value @ (Value::String(_) | Value::Object(_))) => value.clone(),
            Some(_) => {
                return Err(ApiError::bad_request(
                    "field `task` must be a task name, ENV/ID (GET /v1/tasks lists them), or an inline task object",
                ));
            }
        };
        let base_time = match map.get("base_time") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => Some(
                Timestamp::parse_rfc3339(text)
                    .map_err(|e| ApiError::bad_request(format!("field `base_time`: {e}")))?
                    .unix_seconds(),
            ),
            Some(_) => {
                return Err(ApiError::bad_request(
                    "field `base_time` must be an RFC 3339 string",
                ));
            }
        };
        let seed = match map.get("seed") {
            None | Some(Value::Null) => None,
            Some(value) => Some(value.as_u64().ok_or_else(|| {
                ApiError::bad_request("field `seed` must be an integer from 0 to 2^64-1")
            })?),
        };
        let agent = map.get("agent").filter(|v| !v.is_null()).cloned();
        Ok(CreateRequest {
            task,
            base_time,
            seed,
            agent,
        })
    }
}

/// `POST /v1/sessions/{id}/call {"tool", "args"?}`.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRequest {
    pub tool: String,
    /// A JSON object (`{}` when left out).
    pub args: Value,
}

impl CallRequest {
    pub fn parse(map: &Map<String, Value>) -> Result<CallRequest, ApiError> {
        no_unknown_fields(map, &["tool", "args"])?;
        let tool = string_field(map, "tool", "the name of the tool to call")?.to_string();
        let args = match map.get("args") {
            None | Some(Value::Null) => json!({}),
            Some(Value::Object(o)) => Value::Object(o.clone()),
            Some(_) => {
                return Err(ApiError::bad_request(
                    "field `args` must be a JSON object of the tool's arguments",
                ));
            }
        };
        Ok(CallRequest { tool, args })
    }
}

/// `POST /v1/sessions/{id}/messages {"text"?, "thinking"?, "content"?, "usage"?, "model"?,
/// "stopReason"?}`: the model's assistant message, checked (see [`crate::session::assistant`]),
/// as the transcript will hold it.
pub fn assistant_message(body: &Value) -> Result<Value, ApiError> {
    crate::session::assistant::parse(body).map_err(|e| {
        if e.field == "content" && body.as_object().is_some_and(|m| m.is_empty()) {
            ApiError::missing_field(
                "text",
                "the model's text (or `thinking`, or `content` blocks)",
            )
        } else {
            ApiError::bad_request(format!("field {e}"))
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn a_body_that_is_no_json_object_is_a_bad_request_and_white_space_is_empty() {
        assert_eq!(object(b" \n\t").unwrap(), Map::new());
        for body in [&b"[1]"[..], b"\"task\"", b"{\"task\":", b"\xff"] {
            assert_eq!(
                object(body).unwrap_err().category,
                "bad_request",
                "{body:?}"
            );
        }
    }

    #[test]
    fn create_names_the_field_that_is_wrong() {
        let parse = |text: &str| CreateRequest::parse(&object(text.as_bytes()).unwrap());
        let ok = parse(r#"{"task": "example/t", "base_time": "2026-01-02T03:04:05Z", "seed": 7}"#)
            .unwrap();
        assert_eq!(ok.task, json!("example/t"));
        assert_eq!((ok.base_time, ok.seed), (Some(1_767_323_045), Some(7)));
        for (body, category, field) in [
            ("{}", "missing_field", "`task`"),
            (r#"{"task": 3}"#, "bad_request", "`task`"),
            (
                r#"{"task": "a/b", "base_time": 5}"#,
                "bad_request",
                "`base_time`",
            ),
            (
                r#"{"task": "a/b", "base_time": "yesterday"}"#,
                "bad_request",
                "`base_time`",
            ),
            (r#"{"task": "a/b", "seed": -1}"#, "bad_request", "`seed`"),
            (r#"{"task": "a/b", "extra": 1}"#, "bad_request", "`extra`"),
        ] {
            let e = parse(body).unwrap_err();
            assert_eq!(e.category, category, "{body}");
            assert!(e.message.contains(field), "{body}: {}", e.message);
        }
    }

    #[test]
    fn call_takes_a_tool_name_and_an_object_of_arguments() {
        let parse = |text: &str| CallRequest::parse(&object(text.as_bytes()).unwrap());
        let ok = parse(r#"{"tool": "read"}"#).unwrap();
        assert_eq!((ok.tool.as_str(), ok.args), ("read", json!({})));
        for (body, category) in [
            ("{}", "missing_field"),
            (r#"{"tool": 1}"#, "bad_request"),
            (r#"{"tool": "read", "args": [1]}"#, "bad_request"),
            (r#"{"tool": "read", "argz": {}}"#, "bad_request"),
        ] {
            assert_eq!(parse(body).unwrap_err().category, category, "{body}");
        }
    }
}
