//! `exec {command, timeout?}`: a shell command in the session's sandbox, under the policy's
//! limits, with the session's clock.

use std::time::Duration;

use serde_json::{Value, json};

use super::result::{ToolError, ToolResult};
use crate::sandbox::{ExecRequest, OutputMode, Sandbox, StdinSource};

/// The JSON schema of `exec`'s arguments.
pub fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "A shell command, run with `sh -c` in the workspace."},
            "timeout": {"type": "integer", "minimum": 1, "description": "Seconds before the command is killed (at most the environment's limit)."},
            "background": {"type": "boolean", "description": "Start it and return its id at once; see the process tool."}
        },
        "required": ["command"]
    })
}

/// Run `exec` with `args`. `env` holds the session's clock variables; `limit` is the policy's
/// wall-clock limit, which a `timeout` argument can only shorten.
pub fn call(
    sandbox: &mut Sandbox,
    args: &Value,
    env: Vec<(String, String)>,
    limit: Duration,
) -> ToolResult {
    let Some(obj) = args.as_object() else {
        return ToolError::invalid_argument("exec takes a JSON object: {\"command\": \"...\"}")
            .into();
    };
    let command = match obj.get("command").or_else(|| obj.get("cmd")) {
        Some(Value::String(c)) if !c.trim().is_empty() => c.clone(),
        Some(Value::String(_)) => {
            return ToolError::invalid_argument("`command` is empty: give a shell command").into();
        }
        Some(_) => return ToolError::invalid_argument("`command` must be a string").into(),
        None => return ToolError::missing_field("command", "a shell command to run").into(),
    };

    let timeout = match obj.get("timeout") {
        None | Some(Value::Null) => limit,
        Some(v) => match v.as_u64() {
            Some(secs) if secs >= 1 => Duration::from_secs(secs).min(limit),
            _ => {
                return ToolError::invalid_argument(
                    "`timeout` must be a whole number of seconds, at least 1",
                )
                .into();
            }
        },
    };
    let request = ExecRequest {
        argv: vec!["/bin/sh".into(), "-c".into(), command],
        env,
        timeout,
        stdin: StdinSource::Null,
        output: OutputMode::Capture,
    };
    if obj.get("background").and_then(Value::as_bool) == Some(true) {
        return match sandbox.spawn(&request) {
            Ok(id) => ToolResult::ok(json!({"id": id, "background": true})),
            Err(e) => {
                tracing::error!(error = %crate::error::chain(&e), "spawn failed in the sandbox");
                ToolError::internal("the command could not be started in the sandbox").into()
            }
        };
    }
    match sandbox.exec(&request) {
        Ok(r) => {
            if r.timed_out {
                return ToolError::timeout(format!(
                    "the command ran past {} s and was killed with its process group",
                    timeout.as_secs()
                ))
                .into();
            }
            ToolResult::ok(json!({
                "exit_code": r.exit_code,
                "signal": r.signal,
                "stdout": String::from_utf8_lossy(&r.stdout),
                "stderr": String::from_utf8_lossy(&r.stderr),
                "stdout_truncated": r.stdout_truncated,
                "stderr_truncated": r.stderr_truncated,
            }))
        }
        Err(e) => {
            tracing::error!(error = %crate::error::chain(&e), "exec failed in the sandbox");
            ToolError::internal("the command could not be started in the sandbox").into()
        }
    }
}
