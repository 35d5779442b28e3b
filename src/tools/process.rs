//! `process {action, sessionId?, ...}`: the commands that run in the background (started with
//! `exec {background: true}`, or moved there after `yieldMs`), with OpenClaw's actions: `list`,
//! `poll`, `log`, `write`, `send-keys`, `submit`, `paste`, `kill`, `clear`, `remove` (see
//! docs/tools.md). A command is named by the string `sessionId` `exec` answered (the integer
//! `id` of earlier envcraft versions is accepted too).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};

use std::borrow::Cow;

use super::exec::session_id;
use super::keys;
use super::registry::{Context, Run, Tool, ToolSchema};
use super::result::{ToolError, ToolResult};
use super::skill::OfferedSkill;
use super::{Args, shorten};
use crate::sandbox::Sandbox;
use crate::sandbox::live::{Background, StdinError};

/// How much of each background command's output `poll` has already returned.
#[derive(Debug, Default, Clone)]
pub struct Offsets(BTreeMap<u64, (usize, usize)>);

impl Offsets {
    /// Count the first `seen` bytes of (stdout, stderr) of command `id` as returned.
    pub fn mark(&mut self, id: u64, seen: (usize, usize)) {
        self.0.insert(id, seen);
    }
}

/// The actions, in the order the schema lists them.
pub const ACTIONS: [&str; 10] = [
    "list",
    "poll",
    "log",
    "write",
    "send-keys",
    "submit",
    "paste",
    "kill",
    "clear",
    "remove",
];

/// The longest a `poll` with a `timeout` waits (OpenClaw's bound).
pub const POLL_WAIT_MAX_MS: u64 = 30_000;
/// The most bytes one `write`, `send-keys` or `paste` may carry.
pub const WRITE_MAX_BYTES: usize = 64 * 1024;

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
            "Manage background commands (exec with background: true, or still running after \
             yieldMs): list, poll new output, read the log, write to stdin, send keys, submit, \
             paste, kill, clear or remove one.",
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
            "action": {"type": "string", "enum": ACTIONS,
                       "description": "list: every background command; poll: status and new output; log: its output (offset/limit in lines); write: data to its stdin; send-keys: keys, hex bytes or literal text to its stdin; submit: a newline; paste: text (bracketed); kill: stop it; clear: forget one that ended; remove: kill if running and forget."},
            "sessionId": {"type": "string", "description": "The sessionId exec answered (every action but list)."},
            "data": {"type": "string", "description": "write: the text to write."},
            "eof": {"type": "boolean", "description": "write: close stdin after writing."},
            "keys": {"type": "array", "items": {"type": "string"}, "description": "send-keys: key names (Enter, Tab, Escape, Up, C-c, ^D, M-x, F5, ...)."},
            "hex": {"type": "array", "items": {"type": "string"}, "description": "send-keys: bytes in hex (\"1b\", \"0x03\")."},
            "literal": {"type": "string", "description": "send-keys: text sent as it is."},
            "text": {"type": "string", "description": "paste: the text."},
            "bracketed": {"type": "boolean", "description": "paste: wrap in bracketed-paste markers (default true)."},
            "offset": {"type": "integer", "minimum": 0, "description": "log: the first line (0-based)."},
            "limit": {"type": "integer", "minimum": 1, "description": "log: how many lines."},
            "timeout": {"type": "integer", "minimum": 0, "description": "poll: wait up to this many milliseconds for output or the end (at most 30000)."}
        },
        "required": ["action"]
    })
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `running`, or how it ended: `completed` (exit 0) or `failed`.
fn status(b: &Background) -> &'static str {
    match (b.ended, b.exit_code) {
        (false, _) => "running",
        (true, Some(0)) if !b.timed_out => "completed",
        _ => "failed",
    }
}

fn describe_one(b: &Background) -> Value {
    json!({
        "sessionId": session_id(b.id),
        "id": b.id,
        "status": status(b),
        "running": !b.ended,
        "exit_code": b.exit_code,
        "signal": b.signal,
        "timed_out": b.timed_out,
    })
}

/// The command the call names: `sessionId` (a string, or a number), or the older `id`.
fn named_id(obj: &serde_json::Map<String, Value>) -> Result<u64, ToolError> {
    let value = ["sessionId", "session_id", "id"]
        .iter()
        .find_map(|k| obj.get(*k).filter(|v| !v.is_null()));
    let bad = |v: &Value| {
        ToolError::not_found(format!(
            "no background command with sessionId {}",
            shorten(&v.to_string(), 40)
        ))
    };
    match value {
        None => Err(ToolError::missing_field(
            "sessionId",
            "the sessionId that exec answered",
        )),
        Some(Value::Number(n)) => n.as_u64().ok_or_else(|| bad(&Value::Number(n.clone()))),
        Some(Value::String(s)) => s.trim().parse::<u64>().map_err(|_| bad(&json!(s))),
        Some(_) => Err(ToolError::invalid_argument("`sessionId` must be a string")),
    }
}

/// Run `process` with `args`.
pub fn call(sandbox: &mut Sandbox, offsets: &mut Offsets, args: &Value) -> ToolResult {
    match call_checked(sandbox, offsets, args) {
        Ok(v) => ToolResult::ok(v),
        Err(e) => e.into(),
    }
}

fn call_checked(
    sandbox: &mut Sandbox,
    offsets: &mut Offsets,
    args: &Value,
) -> Result<Value, ToolError> {
    let Some(obj) = args.as_object() else {
        return Err(ToolError::invalid_argument(
            "process takes a JSON object: {\"action\": ...}",
        ));
    };
    let a = Args::new("process", args)?;
    let action = match obj.get("action") {
        Some(Value::String(a)) => a.as_str(),
        Some(_) => return Err(ToolError::invalid_argument("`action` must be a string")),
        None => return Err(ToolError::missing_field("action", &ACTIONS.join(", "))),
    };
    if !ACTIONS.contains(&action) {
        return Err(ToolError::invalid_argument(format!(
            "unknown action `{}`: expected one of {}",
            shorten(action, 32),
            ACTIONS.join(", ")
        )));
    }
    let background = read(sandbox)?;
    if action == "list" {
        let list: Vec<Value> = background
            .iter()
            .map(|b| {
                let mut v = describe_one(b);
                v["command"] = json!(command_of(&b.argv));
                v["cwd"] = json!(super::fs::resolve::display(&b.cwd));
                v["stdin_open"] = json!(b.stdin_open());
                v
            })
            .collect();
        return Ok(json!({"sessions": list}));
    }
    let id = named_id(obj)?;
    let Some(b) = background.iter().find(|b| b.id == id) else {
        return Err(ToolError::not_found(format!(
            "no background command with sessionId {id} (process list shows them)"
        )));
    };
    let ended = b.ended;
    match action {
        "poll" => {
            let wait = a.opt_uint(&["timeout"], 0)?.unwrap_or(0);
            let seen = offsets.0.get(&id).copied().unwrap_or((0, 0));
            if wait > 0 && !ended {
                let limit = Duration::from_millis(wait.min(POLL_WAIT_MAX_MS));
                sandbox.await_news(id, seen, limit).map_err(internal)?;
            }
            let background = read(sandbox)?;
            let Some(b) = background.iter().find(|b| b.id == id) else {
                return Err(ToolError::not_found(format!(
                    "no background command with sessionId {id}"
                )));
            };
            let (o, e) = seen;
            let mut v = describe_one(b);
            v["stdout"] = json!(text(&b.stdout[o.min(b.stdout.len())..]));
            v["stderr"] = json!(text(&b.stderr[e.min(b.stderr.len())..]));
            offsets.mark(id, (b.stdout.len(), b.stderr.len()));
            Ok(v)
        }
        "log" => {
            let offset = a.opt_uint(&["offset"], 0)?;
            let limit = a.opt_uint(&["limit"], 1)?;
            let mut v = describe_one(b);
            match (offset, limit) {
                (None, None) => {
                    v["stdout"] = json!(text(&b.stdout));
                    v["stderr"] = json!(text(&b.stderr));
                }
                (offset, limit) => {
                    let (offset, limit) = (offset.unwrap_or(0), limit.unwrap_or(u64::MAX));
                    for (key, bytes) in [("stdout", &b.stdout), ("stderr", &b.stderr)] {
                        let all = text(bytes);
                        let lines: Vec<&str> = all.split_inclusive('\n').collect();
                        let slice: String = lines
                            .iter()
                            .skip(offset as usize)
                            .take(limit.min(usize::MAX as u64) as usize)
                            .copied()
                            .collect();
                        v[key] = json!(slice);
                        v[format!("{key}_lines")] = json!(lines.len());
                    }
                }
            }
            v["stdout_truncated"] = json!(b.stdout_truncated);
            v["stderr_truncated"] = json!(b.stderr_truncated);
            Ok(v)
        }
        "write" | "send-keys" | "submit" | "paste" => {
            let (bytes, eof) = match action {
                "write" => (
                    a.opt_string(&["data"])?.unwrap_or("").as_bytes().to_vec(),
                    a.opt_bool(&["eof"])?.unwrap_or(false),
                ),
                "send-keys" => {
                    let keys_ = strings(obj, "keys")?;
                    let hex = strings(obj, "hex")?;
                    let literal = a.opt_string(&["literal"])?;
                    if keys_.is_empty() && hex.is_empty() && literal.is_none_or(str::is_empty) {
                        return Err(ToolError::missing_field(
                            "keys",
                            "key names, `hex` bytes or `literal` text to send",
                        ));
                    }
                    (keys::encode(&keys_, &hex, literal)?, false)
                }
                "submit" => (b"\n".to_vec(), false),
                _ => {
                    let text = a.string(&["text"], "the text to paste")?;
                    if text.is_empty() {
                        return Err(ToolError::invalid_argument(
                            "`text` is empty: nothing to paste",
                        ));
                    }
                    let bracketed = a.opt_bool(&["bracketed"])?.unwrap_or(true);
                    (keys::paste(text, bracketed), false)
                }
            };
            if bytes.len() > WRITE_MAX_BYTES {
                return Err(ToolError::too_large(format!(
                    "{} bytes to write: at most {WRITE_MAX_BYTES} per call",
                    bytes.len()
                )));
            }
            let written = sandbox
                .write_stdin(id, &bytes, eof)
                .map_err(|e| stdin_error(e, id))?;
            Ok(
                json!({"sessionId": session_id(id), "id": id, "status": "running",
                      "bytes_written": written, "stdin_open": !eof}),
            )
        }
        "kill" => {
            if ended {
                return Err(ToolError::invalid_transition(
                    &format!("sessionId {id} has ended"),
                    "only a running command can be killed (clear or remove forgets it)",
                ));
            }
            sandbox.kill_background(id);
            Ok(json!({"sessionId": session_id(id), "id": id, "killed": true}))
        }
        "clear" => {
            if !ended {
                return Err(ToolError::invalid_transition(
                    &format!("sessionId {id} is still running"),
                    "clear forgets only a command that ended (kill it, or use remove)",
                ));
            }
            sandbox.forget_background(id).map_err(internal)?;
            offsets.0.remove(&id);
            Ok(json!({"sessionId": session_id(id), "id": id, "cleared": true}))
        }
        _ => {
            sandbox.forget_background(id).map_err(internal)?;
            offsets.0.remove(&id);
            Ok(
                json!({"sessionId": session_id(id), "id": id, "removed": true,
                      "killed": !ended}),
            )
        }
    }
}

/// The command line as `exec` was given it (a plain one is run without the shell: see
/// [`super::exec::argv_for`]).
fn command_of(argv: &[String]) -> String {
    match argv {
        [sh, c, command] if sh == "/bin/sh" && c == "-c" => command.clone(),
        words => words.join(" "),
    }
}

fn read(sandbox: &mut Sandbox) -> Result<&[Background], ToolError> {
    sandbox.background().map_err(internal)
}

fn internal(e: crate::sandbox::SandboxError) -> ToolError {
    tracing::error!(error = %crate::error::chain(&e), "cannot read background commands");
    ToolError::internal("the background commands cannot be read")
}

/// An optional array of strings.
fn strings(obj: &serde_json::Map<String, Value>, name: &str) -> Result<Vec<String>, ToolError> {
    match obj.get(name) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str().map(str::to_string).ok_or_else(|| {
                    ToolError::invalid_argument(format!("`{name}` must hold strings only"))
                })
            })
            .collect(),
        Some(_) => Err(ToolError::invalid_argument(format!(
            "`{name}` must be an array of strings"
        ))),
    }
}

fn stdin_error(e: StdinError, id: u64) -> ToolError {
    match e {
        StdinError::Unknown => {
            ToolError::not_found(format!("no background command with sessionId {id}"))
        }
        StdinError::Ended => ToolError::invalid_transition(
            &format!("sessionId {id} has ended"),
            "its stdin takes nothing more",
        ),
        StdinError::Closed => ToolError::invalid_transition(
            &format!("the stdin of sessionId {id} is closed"),
            "it was closed by an earlier write with eof",
        ),
        StdinError::Full { written } => ToolError::invalid_transition(
            &format!("sessionId {id} is not reading its input"),
            &format!("its stdin is full after {written} bytes of this write: poll it, then retry"),
        ),
        StdinError::Gone => ToolError::invalid_transition(
            &format!("sessionId {id} closed its stdin"),
            "it reads no more input",
        ),
    }
}
