//! `exec {command, workdir?, env?, yieldMs?, background?, timeout?}`: a shell command in the
//! session's sandbox, under the policy's limits, with the session's clock; OpenClaw's `exec`
//! where they overlap (see docs/tools.md). A command still running after `yieldMs` (default
//! 10 s) goes on in the background and the call answers `{status: "running", sessionId, tail}`;
//! `process` then polls, feeds and ends it.

use std::path::PathBuf;
use std::time::Duration;

use nix::errno::Errno;
use serde_json::{Map, Value, json};

use std::borrow::Cow;

use super::fs::WorkspaceRoot;
use super::fs::resolve::{open_dir, parse_path};
use super::process::Offsets;
use super::registry::{Context, Run, Tool, ToolSchema};
use super::result::{ToolError, ToolResult};
use super::shorten;
use super::skill::OfferedSkill;
use crate::sandbox::{ExecRequest, ExecResult, OutputMode, Sandbox, SandboxError, StdinSource};

/// How long a command runs in the foreground before it is moved to the background, when the
/// call does not say (OpenClaw's default).
pub const DEFAULT_YIELD_MS: u64 = 10_000;
/// The bounds a `yieldMs` is brought within (OpenClaw's).
pub const YIELD_MS_RANGE: (u64, u64) = (10, 120_000);
/// The most characters of output a yielded call's `tail` shows.
pub const TAIL_CHARS: usize = 2_000;
/// The most variables an `env` argument may set, and its most bytes in all.
pub const ENV_MAX_VARS: usize = 256;
pub const ENV_MAX_BYTES: usize = 64 * 1024;

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
    call(
        context.sandbox,
        context.offsets,
        context.root,
        args,
        env,
        context.limit,
    )
}

/// The JSON schema of `exec`'s arguments.
pub fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "A shell command, run with `sh -c` in the workspace."},
            "workdir": {"type": "string", "description": "Working directory: relative to the workspace, or an absolute path inside it (default: the workspace)."},
            "env": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Environment variables set for this command, over the sandbox's own."},
            "yieldMs": {"type": "integer", "minimum": 0, "description": "Milliseconds to wait before moving a command that still runs to the background (default 10000)."},
            "background": {"type": "boolean", "description": "Run in the background at once and answer with its sessionId; see the process tool."},
            "timeout": {"type": "integer", "minimum": 0, "description": "Seconds before the command is killed (default and most: the environment's limit; 0: that limit)."}
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

/// The arguments of one `exec` call, checked.
#[derive(Debug, Clone, PartialEq)]
struct ExecArgs {
    command: String,
    /// Workspace-relative; empty: the workspace.
    workdir: PathBuf,
    env: Vec<(String, String)>,
    timeout: Duration,
    /// `None`: run to the end in the background (`background: true`).
    yield_after: Option<Duration>,
}

/// A command's `process` id as the agent sees it (OpenClaw's `sessionId`: a string).
pub fn session_id(id: u64) -> String {
    id.to_string()
}

fn parse(
    root: &WorkspaceRoot,
    args: &Value,
    reserved: &[(String, String)],
    limit: Duration,
) -> Result<ExecArgs, ToolError> {
    let Some(obj) = args.as_object() else {
        return Err(ToolError::invalid_argument(
            "exec takes a JSON object: {\"command\": \"...\"}",
        ));
    };
    let command = match obj.get("command").or_else(|| obj.get("cmd")) {
        Some(Value::String(c)) if !c.trim().is_empty() => c.clone(),
        Some(Value::String(_)) => {
            return Err(ToolError::invalid_argument(
                "`command` is empty: give a shell command",
            ));
        }
        Some(_) => return Err(ToolError::invalid_argument("`command` must be a string")),
        None => {
            return Err(ToolError::missing_field(
                "command",
                "a shell command to run",
            ));
        }
    };
    if obj.get("pty").and_then(Value::as_bool) == Some(true) {
        return Err(ToolError::invalid_argument(
            "`pty` is not available here: commands get pipes, not a terminal (run without it; \
             feed input with process write)",
        ));
    }
    let timeout = match ["timeout", "timeoutSeconds"]
        .iter()
        .find_map(|k| obj.get(*k).filter(|v| !v.is_null()).map(|v| (*k, v)))
    {
        None => limit,
        Some((name, v)) => match v.as_u64() {
            Some(0) => limit,
            Some(secs) => Duration::from_secs(secs).min(limit),
            None => {
                return Err(ToolError::invalid_argument(format!(
                    "`{name}` must be a whole number of seconds (0: the environment's limit)"
                )));
            }
        },
    };
    let background = match obj.get("background") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(ToolError::invalid_argument(
                "`background` must be true or false",
            ));
        }
    };
    let yield_ms = match obj.get("yieldMs").or_else(|| obj.get("yield_ms")) {
        None | Some(Value::Null) => DEFAULT_YIELD_MS,
        Some(v) => match v
            .as_u64()
            .or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
        {
            Some(ms) => ms.clamp(YIELD_MS_RANGE.0, YIELD_MS_RANGE.1),
            None => {
                return Err(ToolError::invalid_argument(
                    "`yieldMs` must be a number of milliseconds, at least 0",
                ));
            }
        },
    };
    let workdir = match obj.get("workdir").or_else(|| obj.get("cwd")) {
        None | Some(Value::Null) => PathBuf::new(),
        Some(Value::String(w)) => workdir(root, w)?,
        Some(_) => return Err(ToolError::invalid_argument("`workdir` must be a string")),
    };
    let env = match obj.get("env") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(map)) => env(map, reserved)?,
        Some(_) => {
            return Err(ToolError::invalid_argument(
                "`env` must be an object of variable names to string values",
            ));
        }
    };
    Ok(ExecArgs {
        command,
        workdir,
        env,
        timeout,
        yield_after: (!background).then(|| Duration::from_millis(yield_ms)),
    })
}

/// `raw` as a workspace-relative directory: relative to the workspace, or absolute under it
/// (or one of its aliases); it must exist and be a directory reached beneath the workspace.
fn workdir(root: &WorkspaceRoot, raw: &str) -> Result<PathBuf, ToolError> {
    let shown = shorten(raw, 200);
    let outside = || {
        ToolError::permission(format!(
            "workdir `{shown}` is outside the workspace: commands may start only in {} or a \
             directory under it",
            root.mount().display()
        ))
    };
    let path = parse_path(root, raw).map_err(|e| match e.category {
        super::ErrorCategory::Permission => outside(),
        _ => e,
    })?;
    let opened = crate::sys::with_fs_ids(root.owner(), || open_dir(root, &path.rel));
    match opened {
        Ok(_) => Ok(path.rel),
        Err(Errno::ENOENT) => Err(ToolError::not_found(format!(
            "workdir `{shown}` does not exist in the workspace"
        ))),
        Err(Errno::ENOTDIR) => Err(ToolError::invalid_argument(format!(
            "workdir `{shown}` is not a directory"
        ))),
        Err(Errno::EXDEV | Errno::ELOOP) => Err(outside()),
        Err(Errno::EACCES | Errno::EPERM) => Err(ToolError::permission(format!(
            "workdir `{shown}` cannot be entered: no search permission"
        ))),
        Err(e) => {
            tracing::error!(error = %e, "workdir check");
            Err(ToolError::internal(format!(
                "workdir `{shown}` cannot be checked"
            )))
        }
    }
}

/// The variables of an `env` argument, checked: POSIX names, string values without NUL, none
/// of the session's own (its clock and seed: `reserved`), within [`ENV_MAX_VARS`] and
/// [`ENV_MAX_BYTES`].
fn env(
    map: &Map<String, Value>,
    reserved: &[(String, String)],
) -> Result<Vec<(String, String)>, ToolError> {
    if map.len() > ENV_MAX_VARS {
        return Err(ToolError::too_large(format!(
            "`env` sets {} variables: at most {ENV_MAX_VARS}",
            map.len()
        )));
    }
    let mut out = Vec::with_capacity(map.len());
    let mut bytes = 0;
    for (name, value) in map {
        let shown = shorten(name, 64);
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(ToolError::invalid_argument(format!(
                "`env`: `{shown}` is not a variable name (letters, digits and _, not starting \
                 with a digit)"
            )));
        }
        if reserved.iter().any(|(k, _)| k == name) {
            return Err(ToolError::permission(format!(
                "`env`: `{shown}` is set by the session itself (its clock or seed) and cannot \
                 be replaced"
            )));
        }
        let Value::String(value) = value else {
            return Err(ToolError::invalid_argument(format!(
                "`env`: the value of `{shown}` must be a string"
            )));
        };
        if value.contains('\0') {
            return Err(ToolError::invalid_argument(format!(
                "`env`: the value of `{shown}` contains a NUL byte"
            )));
        }
        bytes += name.len() + value.len() + 2;
        if bytes > ENV_MAX_BYTES {
            return Err(ToolError::too_large(format!(
                "`env` holds more than {ENV_MAX_BYTES} bytes"
            )));
        }
        out.push((name.clone(), value.clone()));
    }
    Ok(out)
}

/// The last [`TAIL_CHARS`] characters of `stdout` then `stderr`.
fn tail(stdout: &[u8], stderr: &[u8]) -> String {
    let mut all = String::from_utf8_lossy(stdout).into_owned();
    all.push_str(&String::from_utf8_lossy(stderr));
    let count = all.chars().count();
    all.chars().skip(count.saturating_sub(TAIL_CHARS)).collect()
}

/// Run `exec` with `args` over the workspace `root`. `env` holds the session's variables (its
/// clock's, its seed), which the call's own `env` merges under; `limit` is the policy's
/// wall-clock limit, which a `timeout` argument can only shorten. What the answer of a command
/// moved to the background shows counts as polled in `offsets`.
pub fn call(
    sandbox: &mut Sandbox,
    offsets: &mut Offsets,
    root: &WorkspaceRoot,
    args: &Value,
    env: Vec<(String, String)>,
    limit: Duration,
) -> ToolResult {
    let a = match parse(root, args, &env, limit) {
        Ok(a) => a,
        Err(e) => return e.into(),
    };
    // Background commands past their timeouts are killed now (and their output collected).
    if let Err(e) = sandbox.background() {
        tracing::error!(error = %crate::error::chain(&e), "cannot read background commands");
    }
    let mut vars = a.env.clone();
    vars.extend(env);
    let request = ExecRequest {
        argv: argv_for(&a.command),
        env: vars,
        timeout: a.timeout,
        stdin: StdinSource::Pipe,
        output: OutputMode::Capture,
        cwd: a.workdir.clone(),
    };
    let ran = match a.yield_after {
        None => sandbox.spawn(&request).map(|id| ExecResult {
            yielded: Some(id),
            ..ExecResult::default()
        }),
        Some(after) if after < a.timeout => sandbox.exec_or_yield(&request, after),
        Some(_) => sandbox.exec(&request),
    };
    match ran {
        Ok(r) => {
            if let Some(id) = r.yielded {
                offsets.mark(id, (r.stdout.len(), r.stderr.len()));
            }
            finished(r, a.timeout, a.yield_after.is_none())
        }
        Err(SandboxError::TooManyBackground(n)) => ToolError::invalid_transition(
            &format!("running {n} background commands"),
            "the session keeps at most that many: end one with process {\"action\": \"kill\", \"sessionId\": ...} first",
        )
        .into(),
        Err(e) => {
            tracing::error!(error = %crate::error::chain(&e), "exec failed in the sandbox");
            ToolError::internal("the command could not be started in the sandbox").into()
        }
    }
}

/// The result of a command run to its end, or of one now in the background.
fn finished(r: ExecResult, timeout: Duration, background: bool) -> ToolResult {
    if let Some(id) = r.yielded {
        let mut result = json!({
            "status": "running",
            "sessionId": session_id(id),
            "id": id,
            "tail": tail(&r.stdout, &r.stderr),
        });
        if background {
            result["background"] = json!(true);
        } else {
            result["stdout"] = json!(String::from_utf8_lossy(&r.stdout));
            result["stderr"] = json!(String::from_utf8_lossy(&r.stderr));
        }
        return ToolResult::ok(result);
    }
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
