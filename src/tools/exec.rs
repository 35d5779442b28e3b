//! `exec {command, timeout?}`: a shell command in the session's sandbox, under the policy's
//! limits, with the session's clock.

use std::time::Duration;

use serde_json::{Value, json};

use std::borrow::Cow;

use super::registry::{Context, Run, Tool, ToolSchema};
use super::result::{ToolError, ToolResult};
use super::skill::OfferedSkill;
use crate::sandbox::{ExecRequest, OutputMode, Sandbox, SandboxError, StdinSource};

/// `exec` in the registry.
pub(crate) const TOOL: Tool = Tool {
    name: "exec",
    describe,
    run: Run::Sandbox(run),
};

fn describe(_: &[OfferedSkill]) -> Option<ToolSchema> {
    Some(ToolSchema {
        name: "exec",
        description: Cow::Borrowed(
            "Run a shell command (sh -c) in the workspace; returns exit code, stdout and stderr.",
        ),
        parameters: schema(),
    })
}

fn run(context: &mut Context<'_>, args: &Value) -> ToolResult {
    let env = std::mem::take(&mut context.env);
    call(context.sandbox, args, env, context.limit)
}

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

/// The argv that runs `command`: `sh -c COMMAND`, except for a plain command line (words of
/// letters, digits and `_ . / , : = + % @ -` separated by spaces, the first not an assignment
/// or a shell keyword or builtin), which is executed directly, as shells do for a
/// `-c` string holding one simple command. The result is the same; one process start less.
pub fn argv_for(command: &str) -> Vec<String> {
    const SHELL_WORDS: &[&str] = &[
        "if", "then", "else", "elif", "fi", "case", "esac", "for", "while", "until", "do", "done",
        "function", "select", "time", "cd", "exit", "export", "set", "unset", "exec", "eval",
        "source", ".", "alias", "read", "return", "shift", "trap", "ulimit", "umask", "wait",
        "command", "builtin", "type", "hash", "jobs", "fg", "bg", "kill", "readonly", "local",
        "declare", "let", "test", "[", "echo", "printf", "pwd", "true", "false", ":",
    ];
    let plain = |c: char| c.is_ascii_alphanumeric() || "_./,:=+%@-".contains(c);
    let words: Vec<&str> = command.split(' ').filter(|w| !w.is_empty()).collect();
    let simple = !words.is_empty()
        && command.chars().all(|c| c == ' ' || plain(c))
        && !words[0].contains('=')
        && !SHELL_WORDS.contains(&words[0]);
    if simple {
        words.into_iter().map(String::from).collect()
    } else {
        vec!["/bin/sh".into(), "-c".into(), command.to_string()]
    }
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
        argv: argv_for(&command),
        env,
        timeout,
        stdin: StdinSource::Null,
        output: OutputMode::Capture,
    };
    if obj.get("background").and_then(Value::as_bool) == Some(true) {
        return match sandbox.spawn(&request) {
            Ok(id) => ToolResult::ok(json!({"id": id, "background": true})),
            Err(SandboxError::TooManyBackground(n)) => ToolError::invalid_transition(
                &format!("running {n} background commands"),
                "the session keeps at most that many: end one with process {\"action\": \"kill\", \"id\": ...} first",
            )
            .into(),
            Err(e) => {
                tracing::error!(error = %crate::error::chain(&e), "spawn failed in the sandbox");
                ToolError::internal("the command could not be started in the sandbox").into()
            }
        };
    }
    match sandbox.exec(&request) {
        Ok(r) => {
            if r.cancelled {
                return ToolError::cancelled(
                    "the call was cancelled by its caller: the command was killed with its process group",
                )
                .into();
            }
            if r.timed_out {
                return ToolError::timeout(format!(
                    "the command ran past {} s and was killed with its process group",
                    timeout.as_secs()
                ))
                .into();
            }
            let mut result = json!({
                "exit_code": r.exit_code,
                "signal": r.signal,
                "stdout": String::from_utf8_lossy(&r.stdout),
                "stderr": String::from_utf8_lossy(&r.stderr),
                "stdout_truncated": r.stdout_truncated,
                "stderr_truncated": r.stderr_truncated,
            });
            if r.oom_killed {
                // Only then: the results recorded before this key existed still replay equal.
                result["killed_by"] = json!("oom");
            }
            ToolResult::ok(result)
        }
        Err(e) => {
            tracing::error!(error = %crate::error::chain(&e), "exec failed in the sandbox");
            ToolError::internal("the command could not be started in the sandbox").into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_command_lines_skip_the_shell_and_the_rest_keep_it() {
        assert_eq!(argv_for("/bin/true"), vec!["/bin/true"]);
        assert_eq!(argv_for("ls -la  notes"), vec!["ls", "-la", "notes"]);
        for shell in [
            "echo hi",
            "ls > out",
            "a=1 env",
            "cd /tmp",
            "ls *.txt",
            "cat 'a b'",
            "ls $HOME",
            "true && false",
            "ls\tx",
            "",
        ] {
            assert_eq!(argv_for(shell)[0], "/bin/sh", "{shell:?}");
        }
    }
}
