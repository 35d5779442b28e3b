//! `process {action: list | poll | log | kill, id?}`: the commands an agent started with
//! `exec {background: true}`.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use std::borrow::Cow;

use super::registry::{Context, Run, Tool, ToolSchema};
use super::result::{ToolError, ToolResult};
use super::skill::OfferedSkill;
use crate::sandbox::Sandbox;

/// How much of each background command's output `poll` has already returned.
#[derive(Debug, Default, Clone)]
pub struct Offsets(BTreeMap<u64, (usize, usize)>);

/// `process` in the registry.
pub(crate) const TOOL: Tool = Tool {
    name: "process",
    describe,
    run: Run::Sandbox(run),
};

fn describe(_: &[OfferedSkill]) -> Option<ToolSchema> {
    Some(ToolSchema {
        name: "process",
        description: Cow::Borrowed(
            "List, poll, read the log of, or kill the commands started with exec {background: true}.",
        ),
        parameters: schema(),
    })
}

fn run(context: &mut Context<'_>, args: &Value) -> ToolResult {
    call(context.sandbox, context.offsets, args)
}

/// The JSON schema of `process`'s arguments.
pub fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["list", "poll", "log", "kill"],
                       "description": "list: all background commands; poll: status and new output of one; log: all its output; kill: stop it."},
            "id": {"type": "integer", "description": "The id `exec` returned (not needed for list)."}
        },
        "required": ["action"]
    })
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Run `process` with `args`.
pub fn call(sandbox: &mut Sandbox, offsets: &mut Offsets, args: &Value) -> ToolResult {
    let Some(obj) = args.as_object() else {
        return ToolError::invalid_argument("process takes a JSON object: {\"action\": ...}")
            .into();
    };
    let action = match obj.get("action") {
        Some(Value::String(a)) => a.as_str(),
        Some(_) => return ToolError::invalid_argument("`action` must be a string").into(),
        None => return ToolError::missing_field("action", "one of list, poll, log, kill").into(),
    };
    let background = match sandbox.background() {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(error = %crate::error::chain(&e), "cannot read background commands");
            return ToolError::internal("the background commands cannot be read").into();
        }
    };
    if action == "list" {
        let list: Vec<Value> = background
            .iter()
            .map(|b| {
                json!({"id": b.id, "command": b.argv.last(), "running": !b.ended,
                       "exit_code": b.exit_code, "signal": b.signal})
            })
            .collect();
        return ToolResult::ok(json!({"processes": list}));
    }
    if !matches!(action, "poll" | "log" | "kill") {
        return ToolError::invalid_argument(format!(
            "unknown action `{}`: expected list, poll, log or kill",
            action.chars().take(32).collect::<String>()
        ))
        .into();
    }
    let id = match obj.get("id").and_then(Value::as_u64) {
        Some(id) => id,
        None => return ToolError::missing_field("id", "the id that exec returned").into(),
    };
    let Some(b) = background.iter().find(|b| b.id == id) else {
        return ToolError::not_found(format!("no background command with id {id}")).into();
    };
    let status =
        json!({"id": id, "running": !b.ended, "exit_code": b.exit_code, "signal": b.signal});
    match action {
        "poll" => {
            let (o, e) = offsets.0.get(&id).copied().unwrap_or((0, 0));
            let (out, err) = (
                text(&b.stdout[o.min(b.stdout.len())..]),
                text(&b.stderr[e.min(b.stderr.len())..]),
            );
            offsets.0.insert(id, (b.stdout.len(), b.stderr.len()));
            let mut v = status;
            v["stdout"] = json!(out);
            v["stderr"] = json!(err);
            ToolResult::ok(v)
        }
        "log" => {
            let mut v = status;
            v["stdout"] = json!(text(&b.stdout));
            v["stderr"] = json!(text(&b.stderr));
            v["stdout_truncated"] = json!(b.stdout_truncated);
            v["stderr_truncated"] = json!(b.stderr_truncated);
            ToolResult::ok(v)
        }
        _ => {
            let was_running = !b.ended;
            sandbox.kill_background(id);
            ToolResult::ok(json!({"id": id, "killed": was_running}))
        }
    }
}
