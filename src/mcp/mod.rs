//! MCP (the Model Context Protocol) over one session: the JSON-RPC core that `envcraft mcp`
//! (stdio) and `envcraft serve` (Streamable HTTP, OpenEnv's `/mcp` and its
//! WebSocket `mcp` messages) share. A transport hands it one message's bytes
//! and gets back what to answer; this module never reads a socket.
//!
//! What it promises: every message is answered as JSON-RPC 2.0 says (a parse error, an invalid
//! request, an unknown method, bad params: each with its code and a message naming what was
//! wrong and what was expected); the tools are the session's own, with their JSON schemas, and
//! a call is [`Session::call`], so it is recorded in the transcript as a `/v1` call is; a tool
//! that fails is a result with `isError: true` and the structured error, not a protocol error.
//! The session's grade is not a tool: an agent connected over MCP cannot see or ask for its
//! reward (the trainer verifies over `/v1` or OpenEnv).

use serde_json::{Map, Value, json};

use crate::session::Session;

/// The protocol versions the `initialize` handshake agrees on, newest first: the revisions the
/// current `mcp` Python SDK offers from 2025-06-18 on. A client asking for another version is
/// answered with the newest (the client then decides whether to go on).
pub const PROTOCOL_VERSIONS: [&str; 2] = ["2025-11-25", "2025-06-18"];

/// Versions a client may still name in the `MCP-Protocol-Version` header of a Streamable HTTP
/// request: the handshake's, and 2025-03-26, which the specification says to assume when the
/// header is absent.
pub fn header_version_known(version: &str) -> bool {
    PROTOCOL_VERSIONS.contains(&version) || version == "2025-03-26"
}

/// JSON-RPC 2.0's error codes.
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    /// A server error: the session could not be reached (closed, busy, capacity).
    pub const SERVER_ERROR: i64 = -32000;
}

/// A JSON-RPC error: its code, a message naming what was wrong and what was expected, and
/// optional data (envcraft's `{"category"}` when a server error has one).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("JSON-RPC error {code}: {message}")]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(code::INVALID_PARAMS, message)
    }
}

/// One message a client sent.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request: answered with a result or an error under its `id`.
    Request {
        id: Value,
        method: String,
        params: Map<String, Value>,
    },
    /// A notification: never answered (`notifications/initialized`, `notifications/cancelled`).
    Notification {
        method: String,
        params: Map<String, Value>,
    },
    /// A response to a request of ours (we send none): ignored.
    Response,
}

/// Read one JSON-RPC message; the error response to send when it is not one (a parse error or
/// an invalid request, with the request's `id` when it could be read).
pub fn parse(bytes: &[u8]) -> Result<Incoming, Value> {
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        error_response(
            &Value::Null,
            &RpcError::new(
                code::PARSE_ERROR,
                format!("the message is not valid JSON: {e}"),
            ),
        )
    })?;
    incoming(value)
}

/// A parsed JSON value as one JSON-RPC message (see [`parse`]).
pub fn incoming(value: Value) -> Result<Incoming, Value> {
    let invalid = |id: &Value, message: &str| {
        error_response(id, &RpcError::new(code::INVALID_REQUEST, message))
    };
    let Value::Object(mut map) = value else {
        return Err(invalid(
            &Value::Null,
            if value.is_array() {
                "batches are not accepted (removed from MCP in 2025-06-18): send one JSON-RPC object per message"
            } else {
                "a JSON-RPC message must be an object with `jsonrpc`, `method` and (for a request) `id`"
            },
        ));
    };
    let id = map.remove("id");
    let id_or_null = id.clone().unwrap_or(Value::Null);
    if map.get("jsonrpc") != Some(&Value::String("2.0".into())) {
        return Err(invalid(&id_or_null, "field `jsonrpc` must be \"2.0\""));
    }
    if map.contains_key("result") || map.contains_key("error") {
        return Ok(Incoming::Response);
    }
    let method = match map.remove("method") {
        Some(Value::String(method)) => method,
        Some(_) => return Err(invalid(&id_or_null, "field `method` must be a string")),
        None => {
            return Err(invalid(
                &id_or_null,
                "field `method` is missing: expected the method to call, e.g. `tools/list`",
            ));
        }
    };
    let params = match map.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(params)) => params,
        Some(_) => {
            return Err(error_response(
                &id_or_null,
                &RpcError::invalid_params("field `params` must be an object"),
            ));
        }
    };
    match id {
        None => Ok(Incoming::Notification { method, params }),
        Some(id @ (Value::String(_) | Value::Number(_))) => {
            Ok(Incoming::Request { id, method, params })
        }
        Some(_) => Err(invalid(
            &Value::Null,
            "field `id` must be a string or an integer (null is not an id)",
        )),
    }
}

/// A success response.
pub fn result_response(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response.
pub fn error_response(id: &Value, error: &RpcError) -> Value {
    let mut object = json!({"code": error.code, "message": error.message});
    if let Some(data) = &error.data {
        object["data"] = data.clone();
    }
    json!({"jsonrpc": "2.0", "id": id, "error": object})
}

/// The response to `result` under `id`.
pub fn response(id: &Value, result: Result<Value, RpcError>) -> Value {
    match result {
        Ok(result) => result_response(id, result),
        Err(error) => error_response(id, &error),
    }
}

/// Whether `method` needs the session (the others are answered without locking it).
pub fn needs_session(method: &str) -> bool {
    matches!(
        method,
        "initialize" | "tools/list" | "tools/call" | "resources/list" | "resources/read"
    )
}

/// The answer to a method that needs no session (`ping`, or an unknown method), or `None` for
/// one that does.
pub fn answer_without_session(method: &str) -> Option<Result<Value, RpcError>> {
    match method {
        "ping" => Some(Ok(json!({}))),
        m if needs_session(m) => None,
        other => Some(Err(RpcError::new(
            code::METHOD_NOT_FOUND,
            format!(
                "unknown method `{}`: this server answers initialize, ping, tools/list, tools/call, resources/list and resources/read",
                other.chars().take(64).collect::<String>()
            ),
        ))),
    }
}

/// The URIs of the resources a session offers.
const PROMPT_URI: &str = "envcraft://task/prompt";
const DOCS_URI: &str = "envcraft://environment/docs";

/// Answer `method` with `params` on `session`.
pub fn answer(
    session: &mut Session,
    method: &str,
    params: &Map<String, Value>,
) -> Result<Value, RpcError> {
    if let Some(answer) = answer_without_session(method) {
        return answer;
    }
    match method {
        "initialize" => initialize(session, params),
        "tools/list" => Ok(tools_list(session)),
        "tools/call" => tools_call(session, params),
        "resources/list" => Ok(resources_list(session)),
        _ => resources_read(session, params),
    }
}

/// The version to agree on for a client that asked for `asked`.
pub fn negotiate(asked: &str) -> &'static str {
    PROTOCOL_VERSIONS
        .iter()
        .copied()
        .find(|v| *v == asked)
        .unwrap_or(PROTOCOL_VERSIONS[0])
}

fn initialize(session: &Session, params: &Map<String, Value>) -> Result<Value, RpcError> {
    let asked = match params.get("protocolVersion") {
        Some(Value::String(v)) => v.as_str(),
        _ => {
            return Err(RpcError::invalid_params(format!(
                "`params.protocolVersion` must be a string: this server speaks {}",
                PROTOCOL_VERSIONS.join(", ")
            )));
        }
    };
    let task = session.task();
    Ok(json!({
        "protocolVersion": negotiate(asked),
        "capabilities": {
            "tools": {"listChanged": false},
            "resources": {"listChanged": false, "subscribe": false},
        },
        "serverInfo": {
            "name": "envcraft",
            "title": format!("envcraft: {}/{}", task.env.name, task.id),
            "version": env!("CARGO_PKG_VERSION"),
        },
        "instructions": session.prompt(),
    }))
}

/// The session's tools in MCP's form.
pub fn tools(session: &Session) -> Vec<Value> {
    let mut tools: Vec<Value> = session
        .tool_schemas()
        .into_iter()
        .map(|(name, description, schema)| {
            json!({"name": name, "description": description, "inputSchema": schema})
        })
        .collect();
    if session.policy().agent.may_verify && !session.offers(VERIFY_TOOL) {
        tools.push(json!({
            "name": VERIFY_TOOL,
            "description": "Grade the workspace as it is now with the task's verifier: the reward (0 to 1), whether every check passed, and the checks.",
            "inputSchema": {"type": "object", "properties": {}, "additionalProperties": false},
        }));
    }
    tools
}

/// The tool that grades the session, offered to the agent only where its policy says
/// `[agent] may_verify = true`.
pub const VERIFY_TOOL: &str = "verify";

/// `verify` called as a tool: the verdict as a tool result.
fn verify_tool(session: &mut Session) -> Value {
    let _clone = crate::sandbox::maker::clone_lock();
    match session.verify() {
        Ok(v) => {
            let mut result = serde_json::to_value(&v).unwrap_or(Value::Null);
            result["ok"] = Value::Bool(true);
            result
        }
        Err(e) => {
            tracing::error!(error = %crate::error::chain(&e), "verify called by the agent failed");
            json!({"ok": false, "error": {"category": "internal", "message": "the workspace could not be verified"}})
        }
    }
}

fn tools_list(session: &Session) -> Value {
    json!({"tools": tools(session)})
}

/// A tool's result in MCP's form: the text of the result for the model, the result itself as
/// `structuredContent`, `isError` when the tool failed.
pub fn call_result(result: &Value) -> Value {
    let ok = result.get("ok") == Some(&Value::Bool(true));
    let text = String::from_utf8(crate::json::to_vec(result)).unwrap_or_default();
    json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": result,
        "isError": !ok,
    })
}

fn tools_call(session: &mut Session, params: &Map<String, Value>) -> Result<Value, RpcError> {
    let (name, arguments) = call_params(params)?;
    if name == VERIFY_TOOL && session.policy().agent.may_verify && !session.offers(name) {
        return Ok(call_result(&verify_tool(session)));
    }
    if !session.offers(name) {
        return Err(unknown_tool(name, session));
    }
    Ok(call_result(&session.call(name, &arguments)))
}

/// The `name` and `arguments` of a `tools/call`.
pub fn call_params(params: &Map<String, Value>) -> Result<(&str, Value), RpcError> {
    let name = match params.get("name") {
        Some(Value::String(name)) => name.as_str(),
        _ => {
            return Err(RpcError::invalid_params(
                "`params.name` must be the name of a tool (tools/list lists them)",
            ));
        }
    };
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(Value::Object(o)) => Value::Object(o.clone()),
        Some(_) => {
            return Err(RpcError::invalid_params(
                "`params.arguments` must be an object of the tool's arguments",
            ));
        }
    };
    Ok((name, arguments))
}

/// The error for a `tools/call` of a tool the session does not offer.
pub fn unknown_tool(name: &str, session: &Session) -> RpcError {
    let offered: Vec<String> = session
        .tool_schemas()
        .into_iter()
        .map(|(n, _, _)| n)
        .collect();
    RpcError::invalid_params(format!(
        "unknown tool `{}`: this session offers {}",
        name.chars().take(64).collect::<String>(),
        offered.join(", ")
    ))
}

fn resources_list(session: &Session) -> Value {
    let mut resources = vec![json!({
        "uri": PROMPT_URI,
        "name": "prompt",
        "title": "The task's prompt (the current turn)",
        "mimeType": "text/plain",
    })];
    if !session.task().env.docs.is_empty() {
        resources.push(json!({
            "uri": DOCS_URI,
            "name": "docs",
            "title": "The environment's documentation",
            "mimeType": "text/markdown",
        }));
    }
    json!({"resources": resources})
}

fn resources_read(session: &Session, params: &Map<String, Value>) -> Result<Value, RpcError> {
    let uri = params
        .get("uri")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let (text, mime) = match uri {
        PROMPT_URI => (session.prompt().to_string(), "text/plain"),
        DOCS_URI if !session.task().env.docs.is_empty() => {
            (session.task().env.docs.clone(), "text/markdown")
        }
        _ => {
            let mut error = RpcError::new(
                -32002,
                format!(
                    "unknown resource `{}`: resources/list lists this session's resources",
                    uri.chars().take(128).collect::<String>()
                ),
            );
            error.data = Some(json!({"uri": uri}));
            return Err(error);
        }
    };
    Ok(json!({"contents": [{"uri": uri, "mimeType": mime, "text": text}]}))
}

#[cfg(test)]
#[path = "mcp_tests.rs"]
mod tests;
