//! The one route table: each route's method, path, handler and OpenAPI operation side by side.
//! The router ([`super::router`]) and the OpenAPI document served at `GET /openapi.json`
//! ([`super::openapi`]) are both made from [`ROUTES`], so a route cannot be served undescribed
//! or described unserved. Adding a route: its handler in `handlers.rs`, its entry here.

use std::sync::Arc;

use axum::handler::Handler;
use axum::routing::MethodRouter;

use super::openenv::Mode;
use super::{AppState, files, handlers, mcp_http, openenv, openenv_ws};

/// The HTTP methods the API uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
    Put,
    Delete,
}

impl Method {
    /// The method's name in an OpenAPI path item.
    pub fn openapi_name(self) -> &'static str {
        match self {
            Method::Get => "get",
            Method::Post => "post",
            Method::Put => "put",
            Method::Delete => "delete",
        }
    }
}

/// One route of the API.
pub struct Route {
    pub method: Method,
    /// The path as axum and OpenAPI both write it (`{id}` for a parameter).
    pub path: &'static str,
    /// Makes the route's method router (a function, so that the table can be a constant).
    pub handler: fn() -> MethodRouter<Arc<AppState>>,
    /// The OpenAPI operation object (JSON) that describes it.
    pub operation: &'static str,
}

/// A method router for `handler` under `method`.
fn on<H, T>(method: Method, handler: H) -> MethodRouter<Arc<AppState>>
where
    H: Handler<T, Arc<AppState>>,
    T: 'static,
{
    match method {
        Method::Get => axum::routing::get(handler),
        Method::Post => axum::routing::post(handler),
        Method::Put => axum::routing::put(handler),
        Method::Delete => axum::routing::delete(handler),
    }
}

/// The routes a server in `mode` serves: [`ROUTES`], and in OpenEnv's simulation mode
/// [`SIMULATION_ROUTES`].
pub fn served(mode: Mode) -> impl Iterator<Item = &'static Route> {
    let simulation: &'static [Route] = match mode {
        Mode::Simulation => SIMULATION_ROUTES,
        Mode::Production => &[],
    };
    ROUTES.iter().chain(simulation)
}

/// Whether a request to `path` needs the bearer token (when the server has one): `/v1`, and
/// OpenEnv's routes that reach sessions; not the probes and descriptions.
pub fn needs_token(path: &str) -> bool {
    path.starts_with("/v1/") || matches!(path, "/ws" | "/mcp" | "/reset" | "/step" | "/state")
}

/// OpenEnv's simulation-mode routes (not served in production mode).
pub const SIMULATION_ROUTES: &[Route] = &[
    Route {
        method: Method::Post,
        path: "/reset",
        handler: || on(Method::Post, openenv::http_reset),
        operation: r##"{"summary": "OpenEnv: start an episode (a session) of a task", "requestBody": {"content": {"application/json": {"schema": {"type": "object", "additionalProperties": false, "properties": {"task": {"description": "ENV/ID or an inline task, as POST /v1/sessions (default: --openenv-task)"}, "seed": {"type": "integer", "minimum": 0}, "episode_id": {"type": "string", "maxLength": 255}, "base_time": {"type": "string", "format": "date-time"}}}}}}, "responses": {"200": {"description": "{\"observation\": {session_id, episode_id, task, seed, prompt, docs, tools, turn}, \"reward\": null, \"done\": false}"}, "400": {"$ref": "#/components/responses/Error"}, "404": {"$ref": "#/components/responses/Error"}, "429": {"$ref": "#/components/responses/Error"}, "503": {"$ref": "#/components/responses/Error"}}}"##,
    },
    Route {
        method: Method::Post,
        path: "/step",
        handler: || on(Method::Post, openenv::http_step),
        operation: r##"{"summary": "OpenEnv: one action on the session POST /reset made", "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["action", "session_id"], "properties": {"action": {"type": "object", "description": "type list_tools, call_tool (tool_name, arguments), verify, next_turn or fork"}, "session_id": {"type": "string"}, "timeout_s": {"type": "number"}, "request_id": {"type": "string"}}}}}}, "responses": {"200": {"description": "{\"observation\", \"reward\", \"done\"}"}, "400": {"$ref": "#/components/responses/Error"}, "404": {"$ref": "#/components/responses/Error"}, "503": {"$ref": "#/components/responses/Error"}}}"##,
    },
    Route {
        method: Method::Get,
        path: "/state",
        handler: || on(Method::Get, openenv::http_state),
        operation: r##"{"summary": "OpenEnv: the state of a session", "parameters": [{"name": "session_id", "in": "query", "required": true, "schema": {"type": "string"}}], "responses": {"200": {"description": "{episode_id, step_count, session_id, task, turn}"}, "400": {"$ref": "#/components/responses/Error"}, "404": {"$ref": "#/components/responses/Error"}}}"##,
    },
];

/// Every route, in the order the OpenAPI document lists them.
pub const ROUTES: &[Route] = &[
    Route {
        method: Method::Get,
        path: "/healthz",
        handler: || on(Method::Get, handlers::healthz),
        operation: r##"{"security": [], "summary": "Liveness", "responses": {"200": {"description": "{\"status\": \"ok\"}"}}}"##,
    },
    Route {
        method: Method::Get,
        path: "/readyz",
        handler: || on(Method::Get, handlers::readyz),
        operation: r##"{"security": [], "summary": "Readiness", "responses": {"200": {"description": "{\"status\": \"ready\", \"sessions\": N, \"max_sessions\": M}"}, "503": {"description": "{\"status\": \"draining\"}"}}}"##,
    },
    Route {
        method: Method::Get,
        path: "/metrics",
        handler: || on(Method::Get, handlers::metrics),
        operation: r##"{"security": [], "summary": "Prometheus metrics: envcraft_sessions_open, envcraft_sessions_created_total, envcraft_tool_calls_total{tool,outcome}, envcraft_tool_call_seconds, envcraft_verify_seconds, envcraft_http_requests_total{status}", "responses": {"200": {"description": "text/plain exposition", "content": {"text/plain": {"schema": {"type": "string"}}}}}}"##,
    },
    Route {
        method: Method::Get,
        path: "/openapi.json",
        handler: || on(Method::Get, handlers::openapi),
        operation: r##"{"security": [], "summary": "This document", "responses": {"200": {"description": "OpenAPI 3.0"}}}"##,
    },
    Route {
        method: Method::Get,
        path: "/v1/tasks",
        handler: || on(Method::Get, handlers::tasks),
        operation: r##"{"summary": "Every task under the server's workspaces", "responses": {"200": {"description": "The tasks", "content": {"application/json": {"schema": {"type": "object", "properties": {"tasks": {"type": "array", "items": {"type": "object", "properties": {"task": {"type": "string", "description": "ENV/ID"}, "env": {"type": "string"}, "id": {"type": "string"}, "prompt": {"type": "string", "description": "the first prompt"}}}}}}}}}, "401": {"$ref": "#/components/responses/Error"}}}"##,
    },
    Route {
        method: Method::Post,
        path: "/v1/sessions",
        handler: || on(Method::Post, handlers::create),
        operation: r##"{"summary": "Create a session of a task", "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["task"], "additionalProperties": false, "properties": {"task": {"oneOf": [{"type": "string", "description": "ENV/ID"}, {"type": "object", "description": "An inline task: the keys of task.toml (prompt or turns, base_time, verifier) plus env, and optionally files, expected (expected.json), grader (files of grader/) and judge (the judge's rubric files)", "required": ["env"], "properties": {"env": {"type": "string"}, "prompt": {"type": "string"}, "turns": {"type": "array", "items": {"type": "object", "properties": {"prompt": {"type": "string"}}}}, "base_time": {"type": "string"}, "verifier": {"type": "object"}, "files": {"type": "object", "additionalProperties": {"type": "string"}, "description": "relative path -> content, laid over the environment's files"}, "expected": {"type": "object", "description": "the task's expected.json"}, "grader": {"type": "object", "additionalProperties": {"type": "string"}, "description": "relative path -> content of the grader's files"}, "judge": {"type": "object", "additionalProperties": {"type": "string"}, "description": "relative path -> content of the files [verifier.judge] names (rubric, expected behaviour), in the task's directory"}}}]}, "base_time": {"type": "string", "format": "date-time", "description": "RFC 3339; overrides the task's start time"}, "seed": {"type": "integer", "minimum": 0, "description": "exported to the session's commands, skills and grader as ENVCRAFT_SEED"}, "agent": {"type": "object", "description": "OpenClaw as the session's agent (POST /v1/sessions/{id}/agent/turn runs a turn)", "required": ["name", "model_url"], "additionalProperties": false, "properties": {"name": {"type": "string", "enum": ["openclaw"]}, "model_url": {"type": "string", "description": "an OpenAI-compatible base URL on this host's loopback; the sandbox may connect to its port only"}, "model": {"type": "string"}, "turn_timeout": {"type": "integer", "minimum": 1, "description": "seconds a turn may take: at most the server's --request-timeout less 90"}}}}}}}}, "responses": {"201": {"description": "Created", "content": {"application/json": {"schema": {"type": "object", "properties": {"session_id": {"type": "string"}, "task": {"type": "string", "description": "ENV/ID; ENV/inline-HASH for an inline task"}, "seed": {"type": "integer", "nullable": true}, "prompt": {"type": "string"}, "docs": {"type": "string", "description": "the environment's docs.md, or empty"}, "tools": {"type": "array", "description": "OpenAI function-calling tools", "items": {"type": "object"}}, "action_index": {"type": "integer"}, "agent": {"type": "object", "description": "present when the session has an agent: name, version, model, turn_timeout"}}}}}}, "400": {"$ref": "#/components/responses/Error"}, "401": {"$ref": "#/components/responses/Error"}, "404": {"$ref": "#/components/responses/Error"}, "413": {"$ref": "#/components/responses/Error"}, "429": {"$ref": "#/components/responses/Error"}, "503": {"$ref": "#/components/responses/Error"}, "504": {"$ref": "#/components/responses/Error"}, "500": {"$ref": "#/components/responses/Error"}}}"##,
    },
    Route {
        method: Method::Delete,
        path: "/v1/sessions/{id}",
        handler: || on(Method::Delete, handlers::close),
        operation: r##"{"summary": "Close a session", "parameters": [{"$ref": "#/components/parameters/id"}], "responses": {"200": {"description": "{\"closed\": ID}"}, "404": {"$ref": "#/components/responses/Error"}}}"##,
    },
    Route {
        method: Method::Post,
        path: "/v1/sessions/{id}/call",
        handler: || on(Method::Post, handlers::call),
        operation: r##"{"summary": "Call a tool; a failing tool is a 200 with result.ok false", "parameters": [{"$ref": "#/components/parameters/id"}], "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["tool"], "additionalProperties": false, "properties": {"tool": {"type": "string"}, "args": {"type": "object", "description": "the tool's arguments (default {})"}}}}}}, "responses": {"200": {"description": "The result", "content": {"application/json": {"schema": {"type": "object", "properties": {"action_index": {"type": "integer", "description": "the session's action index after the call"}, "result": {"$ref": "#/components/schemas/ToolResult"}, "transcript_truncated": {"type": "boolean", "description": "present (true) once the session's transcript reached its policy's limits.transcript_bytes: the call ran but is not recorded"}}}}}}, "400": {"$ref": "#/components/responses/Error"}, "404": {"$ref": "#/components/responses/Error"}, "409": {"$ref": "#/components/responses/Error"}, "413": {"$ref": "#/components/responses/Error"}, "503": {"description": "lock_timeout (with Retry-After): another call holds the session", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}, "504": {"$ref": "#/components/responses/Error"}}}"##,
    },
    Route {
        method: Method::Post,
        path: "/v1/sessions/{id}/messages",
        handler: || on(Method::Post, handlers::add_message),
        operation: r##"{"summary": "Record the model's own assistant message (text, thinking, usage) in the session's transcript, beside its tool calls", "parameters": [{"$ref": "#/components/parameters/id"}], "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/AssistantMessage"}}}}, "responses": {"201": {"description": "The transcript entry", "content": {"application/json": {"schema": {"type": "object", "properties": {"id": {"type": "string", "description": "the entry's id in the transcript"}, "action_index": {"type": "integer"}}}}}}, "400": {"$ref": "#/components/responses/Error"}, "404": {"$ref": "#/components/responses/Error"}, "409": {"description": "invalid_transition: the transcript reached its policy's limits.transcript_bytes", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}, "413": {"$ref": "#/components/responses/Error"}, "503": {"$ref": "#/components/responses/Error"}}}"##,
    },
    Route {
        method: Method::Post,
        path: "/v1/sessions/{id}/agent/turn",
        handler: || on(Method::Post, handlers::agent_turn),
        operation: r##"{"summary": "Run the current turn's prompt through the session's agent (OpenClaw, when the session was created with agent); OpenClaw's transcript is then the session's", "parameters": [{"$ref": "#/components/parameters/id"}], "responses": {"200": {"description": "The turn's report and the run so far", "content": {"application/json": {"schema": {"type": "object", "properties": {"agent": {"type": "string"}, "version": {"type": "string"}, "model": {"type": "string"}, "turns": {"type": "array", "items": {"type": "object", "properties": {"turn": {"type": "integer"}, "exit_code": {"type": "integer", "nullable": true}, "timed_out": {"type": "boolean"}, "duration_ms": {"type": "integer"}, "reply": {"type": "string"}, "stop_reason": {"type": "string"}, "stderr_tail": {"type": "string"}}}}, "transcript_events": {"type": "integer"}, "transcript_error": {"type": "string"}, "tool_calls": {"type": "integer"}, "failed_tool_calls": {"type": "integer"}, "harness_files": {"type": "array", "items": {"type": "string"}}, "turn": {"type": "integer"}, "action_index": {"type": "integer"}}}}}}, "404": {"$ref": "#/components/responses/Error"}, "409": {"description": "invalid_transition: the session has no agent, or its agent already ran this turn", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}, "500": {"$ref": "#/components/responses/Error"}, "503": {"$ref": "#/components/responses/Error"}, "504": {"$ref": "#/components/responses/Error"}}}"##,
    },
    Route {
        method: Method::Post,
        path: "/v1/sessions/{id}/next_turn",
        handler: || on(Method::Post, handlers::next_turn),
        operation: r##"{"summary": "Move to the next prompt", "parameters": [{"$ref": "#/components/parameters/id"}], "responses": {"200": {"description": "The next prompt", "content": {"application/json": {"schema": {"type": "object", "properties": {"prompt": {"type": "string", "nullable": true}, "turn": {"type": "integer"}}}}}}, "404": {"$ref": "#/components/responses/Error"}, "409": {"description": "invalid_transition: the session is at its last turn", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}, "503": {"$ref": "#/components/responses/Error"}}}"##,
    },
    Route {
        method: Method::Post,
        path: "/v1/sessions/{id}/fork",
        handler: || on(Method::Post, handlers::fork),
        operation: r##"{"summary": "A new session from this one's current state", "parameters": [{"$ref": "#/components/parameters/id"}], "responses": {"201": {"description": "{\"session_id\": ID}"}, "404": {"$ref": "#/components/responses/Error"}, "429": {"$ref": "#/components/responses/Error"}, "503": {"$ref": "#/components/responses/Error"}}}"##,
    },
    Route {
        method: Method::Post,
        path: "/v1/sessions/{id}/verify",
        handler: || on(Method::Post, handlers::verify),
        operation: r##"{"summary": "Score the workspace", "parameters": [{"$ref": "#/components/parameters/id"}], "responses": {"200": {"description": "The verdict", "content": {"application/json": {"schema": {"type": "object", "properties": {"reward": {"type": "number", "nullable": true, "description": "null when a part of the verifier did not run (see not_run)"}, "passed": {"type": "boolean"}, "checks": {"type": "array", "items": {"type": "object"}}, "not_run": {"type": "array", "items": {"type": "string"}, "description": "the verifier's parts that did not run (judge: no endpoint, or it gave no score); each has a check saying why"}, "partial_reward": {"type": "number", "description": "with parts not run: the weighted score of those that ran"}}}}}}, "404": {"$ref": "#/components/responses/Error"}, "500": {"$ref": "#/components/responses/Error"}}}"##,
    },
    Route {
        method: Method::Get,
        path: "/v1/sessions/{id}/diff",
        handler: || on(Method::Get, handlers::diff),
        operation: r##"{"summary": "The workspace's changes", "parameters": [{"$ref": "#/components/parameters/id"}], "responses": {"200": {"description": "Changes", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Changes"}}}}, "404": {"$ref": "#/components/responses/Error"}}}"##,
    },
    Route {
        method: Method::Put,
        path: "/v1/sessions/{id}/files",
        handler: || on(Method::Put, files::upload),
        operation: r##"{"summary": "Upload files: a tar (plain, gzip or zstd) unpacked beneath the workspace directory ?path= (made where missing), all or nothing. Refused whole: names with `..` or absolute, symbolic links leading out of the workspace or absolute, hard links to anything but an earlier file of the same tar, device nodes, FIFOs, a directory reached through a symbolic link, a file where the workspace has a directory; past --max-body bytes of body, 256 MiB decompressed (and the policy's workspace_bytes), 100,000 entries or 64 names deep", "parameters": [{"$ref": "#/components/parameters/id"}, {"name": "path", "in": "query", "required": true, "schema": {"type": "string"}, "description": "a directory of the workspace: relative to it, or absolute under its mount point"}], "requestBody": {"required": true, "content": {"application/x-tar": {"schema": {"type": "string", "format": "binary"}}}}, "responses": {"200": {"description": "Unpacked", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Uploaded"}}}}, "400": {"$ref": "#/components/responses/Error"}, "403": {"$ref": "#/components/responses/Error"}, "404": {"$ref": "#/components/responses/Error"}, "409": {"$ref": "#/components/responses/Error"}, "413": {"$ref": "#/components/responses/Error"}, "503": {"$ref": "#/components/responses/Error"}}}"##,
    },
    Route {
        method: Method::Get,
        path: "/v1/sessions/{id}/files",
        handler: || on(Method::Get, files::download),
        operation: r##"{"summary": "Download files: a tar of ?path= (a directory's contents, named relative to it; or the one file, under its own name). Links are kept as links, never followed; sockets, FIFOs and devices are left out (counted in X-Envcraft-Skipped); refused whole (413, never a truncated tar) past 256 MiB of tar, 100,000 entries or 64 names deep", "parameters": [{"$ref": "#/components/parameters/id"}, {"name": "path", "in": "query", "required": true, "schema": {"type": "string"}, "description": "a file or directory of the workspace"}], "responses": {"200": {"description": "The tar; X-Envcraft-Kind says file or directory", "headers": {"X-Envcraft-Kind": {"schema": {"type": "string", "enum": ["file", "directory"]}}, "X-Envcraft-Entries": {"schema": {"type": "integer"}}, "X-Envcraft-Skipped": {"schema": {"type": "integer"}}}, "content": {"application/x-tar": {"schema": {"type": "string", "format": "binary"}}}}, "400": {"$ref": "#/components/responses/Error"}, "403": {"$ref": "#/components/responses/Error"}, "404": {"$ref": "#/components/responses/Error"}, "409": {"$ref": "#/components/responses/Error"}, "413": {"$ref": "#/components/responses/Error"}, "503": {"$ref": "#/components/responses/Error"}}}"##,
    },
    Route {
        method: Method::Post,
        path: "/v1/sessions/{id}/mcp",
        handler: || on(Method::Post, mcp_http::session_mcp),
        operation: r##"{"summary": "MCP (Streamable HTTP, JSON answers) to a session: initialize, ping, tools/list, tools/call, resources/list, resources/read", "parameters": [{"$ref": "#/components/parameters/id"}], "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "description": "one JSON-RPC 2.0 message"}}}}, "responses": {"200": {"description": "the JSON-RPC response"}, "202": {"description": "a notification or response, accepted"}, "400": {"description": "not a JSON-RPC message, or an unknown MCP-Protocol-Version"}, "404": {"$ref": "#/components/responses/Error"}}}"##,
    },
    Route {
        method: Method::Post,
        path: "/v1/mcp",
        handler: || on(Method::Post, mcp_http::entry_mcp),
        operation: r##"{"summary": "MCP (Streamable HTTP) with a session of its own: initialize makes one of ?task=ENV/ID (&seed=N) and names it in Mcp-Session-Id", "parameters": [{"name": "task", "in": "query", "schema": {"type": "string"}}, {"name": "seed", "in": "query", "schema": {"type": "integer"}}], "responses": {"200": {"description": "the JSON-RPC response"}, "202": {"description": "a notification or response, accepted"}, "400": {"description": "not a JSON-RPC message (a JSON-RPC error), or no task to make the session of (an envcraft error)"}, "404": {"$ref": "#/components/responses/Error"}, "429": {"$ref": "#/components/responses/Error"}}}"##,
    },
    Route {
        method: Method::Delete,
        path: "/v1/mcp",
        handler: || on(Method::Delete, mcp_http::entry_close),
        operation: r##"{"summary": "Close the MCP session Mcp-Session-Id names", "responses": {"200": {"description": "closed"}, "400": {"$ref": "#/components/responses/Error"}, "404": {"$ref": "#/components/responses/Error"}}}"##,
    },
    Route {
        method: Method::Get,
        path: "/health",
        handler: || on(Method::Get, openenv::health),
        operation: r##"{"security": [], "summary": "OpenEnv: health", "responses": {"200": {"description": "{\"status\": \"healthy\"}"}}}"##,
    },
    Route {
        method: Method::Get,
        path: "/metadata",
        handler: || on(Method::Get, openenv::metadata),
        operation: r##"{"security": [], "summary": "OpenEnv: what this environment server is", "responses": {"200": {"description": "{name, description, version, readme_content, author, documentation_url}"}}}"##,
    },
    Route {
        method: Method::Get,
        path: "/schema",
        handler: || on(Method::Get, openenv::schema),
        operation: r##"{"security": [], "summary": "OpenEnv: JSON schemas of the actions, observations and state", "responses": {"200": {"description": "{action, observation, state}"}}}"##,
    },
    Route {
        method: Method::Post,
        path: "/mcp",
        handler: || on(Method::Post, openenv::http_mcp),
        operation: r##"{"summary": "OpenEnv: JSON-RPC (always 200): openenv/session/create {task, seed?, episode_id?}, openenv/session/close {session_id}, and MCP's methods with params.session_id", "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object"}}}}, "responses": {"200": {"description": "a JSON-RPC response"}}}"##,
    },
    Route {
        method: Method::Get,
        path: "/ws",
        handler: || on(Method::Get, openenv_ws::upgrade),
        operation: r##"{"summary": "OpenEnv: WebSocket, one session per connection: {type: reset|step|state|close|mcp, data} answered with observation, state, mcp or error messages", "responses": {"101": {"description": "switching to the WebSocket protocol"}, "400": {"$ref": "#/components/responses/Error"}}}"##,
    },
];
