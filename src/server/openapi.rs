//! The OpenAPI 3.0 description of the HTTP API, served at `GET /openapi.json`: the head below
//! (info, components, security) and one path item per route the server serves ([`super::routes::served`]), whose
//! entries carry their own operation objects, so the document describes exactly what is served.

use std::sync::OnceLock;

use serde_json::{Map, Value};

use super::openenv::Mode;
use super::routes::served;

/// Everything of the document but its paths.
const HEAD: &str = r##"{
  "openapi": "3.0.3",
  "info": {
    "title": "envcraft",
    "version": "1",
    "description": "Sessions of Claw-style agent tasks in sandboxed copy-on-write workspaces: create, call tools, move through turns, fork, verify, diff, close. When the server has a token file, every /v1 request needs `Authorization: Bearer TOKEN`. Every error is {\"error\": {\"category\", \"message\"}}."
  },
  "components": {
    "securitySchemes": {
      "bearer": {
        "type": "http",
        "scheme": "bearer"
      }
    },
    "schemas": {
      "Error": {
        "type": "object",
        "required": [
          "error"
        ],
        "properties": {
          "error": {
            "type": "object",
            "required": [
              "category",
              "message"
            ],
            "properties": {
              "category": {
                "type": "string",
                "enum": [
                  "bad_request",
                  "missing_field",
                  "unauthorized",
                  "forbidden_host",
                  "image_not_found",
                  "session_not_found",
                  "task_not_found",
                  "not_found",
                  "invalid_transition",
                  "lock_timeout",
                  "too_many_sessions",
                  "capacity",
                  "draining",
                  "too_many_connections",
                  "payload_too_large",
                  "permission",
                  "too_large",
                  "invalid_argument",
                  "timeout",
                  "internal"
                ]
              },
              "message": {
                "type": "string"
              }
            }
          }
        }
      },
      "ToolResult": {
        "type": "object",
        "description": "Exactly what the tool returned: {\"ok\": true, ..., \"action_index\": N} or {\"ok\": false, \"error\": {\"category\", \"message\"}, \"action_index\": N}.",
        "required": [
          "ok"
        ],
        "properties": {
          "ok": {
            "type": "boolean"
          },
          "action_index": {
            "type": "integer"
          }
        },
        "additionalProperties": true
      },
      "AssistantMessage": {
        "type": "object",
        "description": "The model's own assistant message, recorded in the transcript as OpenClaw's assistant message (thinking blocks first). At least one of text, thinking, content.",
        "additionalProperties": false,
        "properties": {
          "role": {"type": "string", "enum": ["assistant"]},
          "text": {"type": "string"},
          "thinking": {"type": "string"},
          "reasoning_content": {"type": "string", "description": "as thinking"},
          "content": {
            "type": "array",
            "items": {
              "oneOf": [
                {"type": "string"},
                {"type": "object", "required": ["type", "text"], "properties": {"type": {"type": "string", "enum": ["text"]}, "text": {"type": "string"}}},
                {"type": "object", "required": ["type", "thinking"], "properties": {"type": {"type": "string", "enum": ["thinking"]}, "thinking": {"type": "string"}, "thinkingSignature": {"type": "string"}}}
              ]
            }
          },
          "usage": {
            "type": "object",
            "description": "token counts in OpenClaw's names, or OpenAI's prompt_tokens/completion_tokens/total_tokens",
            "properties": {
              "input": {"type": "integer", "minimum": 0},
              "output": {"type": "integer", "minimum": 0},
              "cacheRead": {"type": "integer", "minimum": 0},
              "cacheWrite": {"type": "integer", "minimum": 0},
              "totalTokens": {"type": "integer", "minimum": 0},
              "prompt_tokens": {"type": "integer", "minimum": 0},
              "completion_tokens": {"type": "integer", "minimum": 0},
              "total_tokens": {"type": "integer", "minimum": 0},
              "cost": {"type": "object", "additionalProperties": {"type": "number", "minimum": 0}}
            },
            "additionalProperties": false
          },
          "model": {"type": "string", "minLength": 1, "maxLength": 256},
          "stopReason": {"type": "string", "enum": ["stop", "length", "toolUse", "error", "aborted"]},
          "stop_reason": {"type": "string", "enum": ["stop", "length", "toolUse", "error", "aborted"]}
        }
      },
      "Uploaded": {
        "type": "object",
        "required": ["path", "entries", "bytes"],
        "properties": {
          "path": {"type": "string", "description": "the directory unpacked in, workspace-relative"},
          "entries": {"type": "integer", "minimum": 0},
          "bytes": {"type": "integer", "minimum": 0, "description": "bytes of file data written"}
        }
      },
      "Changes": {
        "type": "object",
        "properties": {
          "added": {
            "type": "array",
            "items": {
              "type": "string"
            }
          },
          "modified": {
            "type": "array",
            "items": {
              "type": "string"
            }
          },
          "deleted": {
            "type": "array",
            "items": {
              "type": "string"
            }
          },
          "incomplete": {
            "type": "array",
            "items": {
              "type": "string"
            }
          }
        }
      }
    },
    "responses": {
      "Error": {
        "description": "An error",
        "content": {
          "application/json": {
            "schema": {
              "$ref": "#/components/schemas/Error"
            }
          }
        }
      }
    },
    "parameters": {
      "id": {
        "name": "id",
        "in": "path",
        "required": true,
        "schema": {
          "type": "string"
        }
      }
    }
  },
  "security": [
    {
      "bearer": []
    }
  ]
}"##;

/// The document, made once.
pub fn document(mode: Mode) -> &'static str {
    static SIMULATION: OnceLock<String> = OnceLock::new();
    static PRODUCTION: OnceLock<String> = OnceLock::new();
    match mode {
        Mode::Simulation => SIMULATION.get_or_init(|| build(mode)),
        Mode::Production => PRODUCTION.get_or_init(|| build(mode)),
    }
}

fn build(mode: Mode) -> String {
    let mut doc: Value = serde_json::from_str(HEAD).unwrap_or_else(|_| Value::Object(Map::new()));
    let mut paths = Map::new();
    for route in served(mode) {
        let mut operation: Value = serde_json::from_str(route.operation).unwrap_or(Value::Null);
        // Every route may answer 403 `forbidden_host` (see `hosts`), before its own handler.
        if let Some(Value::Object(responses)) = operation.get_mut("responses") {
            responses.insert(
                "403".into(),
                serde_json::json!({"$ref": "#/components/responses/Error"}),
            );
        }
        let item = paths
            .entry(route.path)
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(item) = item {
            item.insert(route.method.openapi_name().into(), operation);
        }
    }
    if let Value::Object(doc) = &mut doc {
        doc.insert("paths".into(), Value::Object(paths));
    }
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    #[test]
    fn is_json_and_describes_every_route() {
        // The head and every route's operation are JSON (a broken one would be left out).
        let head: serde_json::Value = serde_json::from_str(super::HEAD).unwrap();
        assert!(head.get("paths").is_none());
        for route in super::served(super::Mode::Simulation) {
            let op: serde_json::Value = serde_json::from_str(route.operation)
                .unwrap_or_else(|e| panic!("{} {}: {e}", route.path, route.operation));
            assert!(op.get("responses").is_some(), "{}", route.path);
        }
        let spec: serde_json::Value =
            serde_json::from_str(super::document(super::Mode::Simulation)).unwrap();
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
            "/v1/sessions/{id}/mcp",
            "/v1/mcp",
            "/ws",
            "/mcp",
            "/health",
            "/metadata",
            "/schema",
            "/reset",
            "/step",
            "/state",
        ] {
            assert!(spec["paths"].get(path).is_some(), "{path} is not described");
        }
        let paths: std::collections::BTreeSet<&str> = super::served(super::Mode::Simulation)
            .map(|r| r.path)
            .collect();
        assert_eq!(spec["paths"].as_object().unwrap().len(), paths.len());
    }

    #[test]
    fn production_mode_describes_no_simulation_route() {
        let spec: serde_json::Value =
            serde_json::from_str(super::document(super::Mode::Production)).unwrap();
        for path in ["/reset", "/step", "/state"] {
            assert!(
                spec["paths"].get(path).is_none(),
                "{path} in production mode"
            );
        }
        assert!(spec["paths"].get("/ws").is_some());
        assert!(spec["paths"].get("/mcp").is_some());
    }
}
