//! The OpenAPI 3.0 description of the HTTP API, served at `GET /openapi.json`. Hand-written:
//! keep it in step with [`super::router`] and [`super::handlers`] (a test checks every route
//! is described).

/// The document.
pub const SPEC: &str = r##"{
  "openapi": "3.0.3",
  "info": {
    "title": "envcraft",
    "version": "1",
    "description": "Sessions of Claw-style agent tasks in sandboxed copy-on-write workspaces: create, call tools, move through turns, fork, verify, diff, close. When the server has a token file, every /v1 request needs `Authorization: Bearer TOKEN`. Every error is {\"error\": {\"category\", \"message\"}}."
  },
  "components": {
    "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
    "schemas": {
      "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {"error": {"type": "object", "required": ["category", "message"], "properties": {
          "category": {"type": "string", "enum": ["bad_request", "missing_field", "unauthorized", "session_not_found", "task_not_found", "not_found", "invalid_transition", "lock_timeout", "too_many_sessions", "draining", "too_many_connections", "payload_too_large", "timeout", "internal"]},
          "message": {"type": "string"}
        }}}
      },
      "ToolResult": {
        "type": "object",
        "description": "Exactly what the tool returned: {\"ok\": true, ..., \"action_index\": N} or {\"ok\": false, \"error\": {\"category\", \"message\"}, \"action_index\": N}.",
        "required": ["ok"],
        "properties": {"ok": {"type": "boolean"}, "action_index": {"type": "integer"}},
        "additionalProperties": true
      },
      "Changes": {
        "type": "object",
        "properties": {
          "added": {"type": "array", "items": {"type": "string"}},
          "modified": {"type": "array", "items": {"type": "string"}},
          "deleted": {"type": "array", "items": {"type": "string"}},
          "incomplete": {"type": "array", "items": {"type": "string"}}
        }
      }
    },
    "responses": {
      "Error": {"description": "An error", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    },
    "parameters": {
      "id": {"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}
    }
  },
  "security": [{"bearer": []}],
  "paths": {
    "/healthz": {"get": {"security": [], "summary": "Liveness", "responses": {"200": {"description": "{\"status\": \"ok\"}"}}}},
    "/readyz": {"get": {"security": [], "summary": "Readiness", "responses": {
      "200": {"description": "{\"status\": \"ready\", \"sessions\": N, \"max_sessions\": M}"},
      "503": {"description": "{\"status\": \"draining\"}"}}}},
    "/metrics": {"get": {"security": [], "summary": "Prometheus metrics: envcraft_sessions_open, envcraft_sessions_created_total, envcraft_tool_calls_total{tool,outcome}, envcraft_tool_call_seconds, envcraft_verify_seconds, envcraft_http_requests_total{status}", "responses": {"200": {"description": "text/plain exposition", "content": {"text/plain": {"schema": {"type": "string"}}}}}}},
    "/openapi.json": {"get": {"security": [], "summary": "This document", "responses": {"200": {"description": "OpenAPI 3.0"}}}},
    "/v1/tasks": {"get": {"summary": "Every task under the server's workspaces", "responses": {
      "200": {"description": "The tasks", "content": {"application/json": {"schema": {"type": "object", "properties": {"tasks": {"type": "array", "items": {"type": "object", "properties": {
        "task": {"type": "string", "description": "ENV/ID"}, "env": {"type": "string"}, "id": {"type": "string"}, "prompt": {"type": "string", "description": "the first prompt"}}}}}}}}},
      "401": {"$ref": "#/components/responses/Error"}}}},
    "/v1/sessions": {"post": {"summary": "Create a session of a task",
      "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["task"], "additionalProperties": false, "properties": {
        "task": {"oneOf": [
          {"type": "string", "description": "ENV/ID"},
          {"type": "object", "description": "An inline task: the keys of task.toml (prompt or turns, base_time, verifier) plus env, and optionally files, expected (expected.json) and grader (files of grader/)", "required": ["env"], "properties": {
            "env": {"type": "string"}, "prompt": {"type": "string"}, "turns": {"type": "array", "items": {"type": "object", "properties": {"prompt": {"type": "string"}}}},
            "base_time": {"type": "string"}, "verifier": {"type": "object"},
            "files": {"type": "object", "additionalProperties": {"type": "string"}, "description": "relative path -> content, laid over the environment's files"},
            "expected": {"type": "object", "description": "the task's expected.json"},
            "grader": {"type": "object", "additionalProperties": {"type": "string"}, "description": "relative path -> content of the grader's files"}}}]},
        "base_time": {"type": "string", "format": "date-time", "description": "RFC 3339; overrides the task's start time"},
        "seed": {"type": "integer", "minimum": 0, "description": "exported to the session's commands, skills and grader as ENVCRAFT_SEED"}}}}}},
      "responses": {
        "201": {"description": "Created", "content": {"application/json": {"schema": {"type": "object", "properties": {
          "session_id": {"type": "string"}, "task": {"type": "string", "description": "ENV/ID; ENV/inline-HASH for an inline task"}, "seed": {"type": "integer", "nullable": true}, "prompt": {"type": "string"},
          "docs": {"type": "string", "description": "the environment's docs.md, or empty"},
          "tools": {"type": "array", "description": "OpenAI function-calling tools", "items": {"type": "object"}},
          "action_index": {"type": "integer"}}}}}},
        "400": {"$ref": "#/components/responses/Error"}, "401": {"$ref": "#/components/responses/Error"},
        "404": {"$ref": "#/components/responses/Error"}, "413": {"$ref": "#/components/responses/Error"},
        "429": {"$ref": "#/components/responses/Error"}, "503": {"$ref": "#/components/responses/Error"},
        "504": {"$ref": "#/components/responses/Error"}, "500": {"$ref": "#/components/responses/Error"}}}},
    "/v1/sessions/{id}": {"delete": {"summary": "Close a session", "parameters": [{"$ref": "#/components/parameters/id"}], "responses": {
      "200": {"description": "{\"closed\": ID}"}, "404": {"$ref": "#/components/responses/Error"}}}},
    "/v1/sessions/{id}/call": {"post": {"summary": "Call a tool; a failing tool is a 200 with result.ok false", "parameters": [{"$ref": "#/components/parameters/id"}],
      "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["tool"], "additionalProperties": false, "properties": {
        "tool": {"type": "string"}, "args": {"type": "object", "description": "the tool's arguments (default {})"}}}}}},
      "responses": {
        "200": {"description": "The result", "content": {"application/json": {"schema": {"type": "object", "properties": {
          "action_index": {"type": "integer", "description": "the session's action index after the call"},
          "result": {"$ref": "#/components/schemas/ToolResult"},
          "transcript_truncated": {"type": "boolean", "description": "present (true) once the session's transcript reached its policy's limits.transcript_bytes: the call ran but is not recorded"}}}}}},
        "400": {"$ref": "#/components/responses/Error"}, "404": {"$ref": "#/components/responses/Error"},
        "409": {"$ref": "#/components/responses/Error"}, "413": {"$ref": "#/components/responses/Error"},
        "503": {"description": "lock_timeout (with Retry-After): another call holds the session", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
        "504": {"$ref": "#/components/responses/Error"}}}},
    "/v1/sessions/{id}/next_turn": {"post": {"summary": "Move to the next prompt", "parameters": [{"$ref": "#/components/parameters/id"}], "responses": {
      "200": {"description": "The next prompt", "content": {"application/json": {"schema": {"type": "object", "properties": {"prompt": {"type": "string", "nullable": true}, "turn": {"type": "integer"}}}}}},
      "404": {"$ref": "#/components/responses/Error"},
      "409": {"description": "invalid_transition: the session is at its last turn", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}},
      "503": {"$ref": "#/components/responses/Error"}}}},
    "/v1/sessions/{id}/fork": {"post": {"summary": "A new session from this one's current state", "parameters": [{"$ref": "#/components/parameters/id"}], "responses": {
      "201": {"description": "{\"session_id\": ID}"}, "404": {"$ref": "#/components/responses/Error"},
      "429": {"$ref": "#/components/responses/Error"}, "503": {"$ref": "#/components/responses/Error"}}}},
    "/v1/sessions/{id}/verify": {"post": {"summary": "Score the workspace", "parameters": [{"$ref": "#/components/parameters/id"}], "responses": {
      "200": {"description": "The verdict", "content": {"application/json": {"schema": {"type": "object", "properties": {
        "reward": {"type": "number"}, "passed": {"type": "boolean"}, "checks": {"type": "array", "items": {"type": "object"}}}}}}},
      "404": {"$ref": "#/components/responses/Error"}, "500": {"$ref": "#/components/responses/Error"}}}},
    "/v1/sessions/{id}/diff": {"get": {"summary": "The workspace's changes", "parameters": [{"$ref": "#/components/parameters/id"}], "responses": {
      "200": {"description": "Changes", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Changes"}}}},
      "404": {"$ref": "#/components/responses/Error"}}}}
  }
}"##;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    #[test]
    fn is_json_and_describes_every_route() {
        let spec: serde_json::Value = serde_json::from_str(super::SPEC).unwrap();
        for path in [
            "/healthz",
            "/readyz",
            "/metrics",
            "/openapi.json",
            "/v1/tasks",
            "/v1/sessions",
            "/v1/sessions/{id}",
            "/v1/sessions/{id}/call",
            "/v1/sessions/{id}/next_turn",
            "/v1/sessions/{id}/fork",
            "/v1/sessions/{id}/verify",
            "/v1/sessions/{id}/diff",
        ] {
            assert!(spec["paths"].get(path).is_some(), "{path} is not described");
        }
    }
}
