//! The one list of the built-in tools. Each tool is a [`Tool`] in a file of its own under
//! `src/tools/` (its name, what the model is told, its argument schema and its handler side by
//! side); [`super::TOOLS`] (beside the modules' declarations) lists them in the order they are advertised. The dispatch ([`call`],
//! [`call_file_tool`]), the OpenAI-shaped schemas ([`schemas`]) that `envcraft tools` prints
//! and the server serves, all read this list, and a test holds it to the names environments may
//! offer (`spec::env::BUILTIN_TOOLS`).

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::Value;

use super::fs::WorkspaceRoot;
use super::process::Offsets;
use super::skill::OfferedSkill;
use super::{TOOLS, ToolError, ToolResult, shorten};
use crate::sandbox::Sandbox;

/// One tool as the model is told about it: a name, what it does, and a JSON schema of its
/// arguments.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSchema {
    pub name: &'static str,
    pub description: Cow<'static, str>,
    pub parameters: Value,
}

/// A built-in tool.
pub struct Tool {
    pub name: &'static str,
    /// What the model is told of it, given the environment's skills; `None`: not offered there
    /// (`skill` without skills).
    pub describe: fn(&[OfferedSkill]) -> Option<ToolSchema>,
    pub run: Run,
}

/// How a tool runs.
pub enum Run {
    /// A file tool: the workspace's root alone, and the session clock's `now` for what it makes.
    Files(fn(&WorkspaceRoot, &Value, SystemTime) -> Result<Value, ToolError>),
    /// A tool that runs commands in the session's sandbox.
    Sandbox(fn(&mut Context<'_>, &Value) -> ToolResult),
}

/// What a call may use: the session's workspace, sandbox and skills, the clock's variables for
/// the commands it starts and its `now`, and the policy's wall-clock limit.
pub struct Context<'a> {
    pub root: &'a WorkspaceRoot,
    pub sandbox: &'a mut Sandbox,
    pub offsets: &'a mut Offsets,
    pub skills: &'a [OfferedSkill],
    pub env: Vec<(String, String)>,
    pub now: SystemTime,
    pub limit: Duration,
}

/// The tool named `name`.
pub fn find(name: &str) -> Option<&'static Tool> {
    TOOLS.iter().copied().find(|t| t.name == name)
}

/// The names of the file tools (those that need no sandbox), in order.
pub fn file_tool_names() -> Vec<&'static str> {
    TOOLS
        .iter()
        .filter(|t| matches!(t.run, Run::Files(_)))
        .map(|t| t.name)
        .collect()
}

/// Run the tool `name` with `args` (a JSON object) in a session's `context`.
pub fn call(context: &mut Context<'_>, name: &str, args: &Value) -> ToolResult {
    match find(name).map(|t| &t.run) {
        Some(Run::Files(run)) => as_owner(context.root, || run(context.root, args, context.now)),
        Some(Run::Sandbox(run)) => run(context, args),
        None => unknown(name, &TOOLS.iter().map(|t| t.name).collect::<Vec<_>>()),
    }
}

/// Run the file tool `name` over `root` alone (no sandbox: the file tools' own tests, and
/// anything that works on a directory without a session).
pub fn call_file_tool(
    root: &WorkspaceRoot,
    name: &str,
    args: &Value,
    now: SystemTime,
) -> ToolResult {
    match find(name).map(|t| &t.run) {
        Some(Run::Files(run)) => as_owner(root, || run(root, args, now)),
        _ => unknown(name, &file_tool_names()),
    }
}

/// A file tool's run as the workspace's owner (the sandbox's root: its own files, and the
/// permissions it has), not as host root.
fn as_owner(root: &WorkspaceRoot, run: impl FnOnce() -> Result<Value, ToolError>) -> ToolResult {
    crate::sys::with_fs_ids(root.owner(), run).into()
}

fn unknown(name: &str, known: &[&str]) -> ToolResult {
    ToolError::invalid_argument(format!(
        "unknown tool `{}`: the built-in tools are {}",
        shorten(name, 64),
        known.join(", ")
    ))
    .into()
}

/// The schemas of the `offered` tools, in the order given, as the model is told about them
/// (`skill` over `skills`; a name that is not a built-in tool, or `skill` without skills, is left
/// out).
pub fn schemas(offered: &[String], skills: &[OfferedSkill]) -> Vec<ToolSchema> {
    offered
        .iter()
        .filter_map(|name| find(name))
        .filter_map(|tool| (tool.describe)(skills))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_registry_lists_every_tool_an_environment_may_offer_in_order() {
        let names: Vec<&str> = super::TOOLS.iter().map(|t| t.name).collect();
        assert_eq!(names, crate::spec::env::BUILTIN_TOOLS);
    }

    #[test]
    fn every_tool_but_skill_is_described_without_skills_and_skill_only_with_them() {
        let all: Vec<String> = crate::spec::env::BUILTIN_TOOLS
            .iter()
            .map(|t| t.to_string())
            .collect();
        let names: Vec<&str> = schemas(&all, &[]).iter().map(|s| s.name).collect();
        assert_eq!(names, &crate::spec::env::BUILTIN_TOOLS[..9]);
        let skill = OfferedSkill {
            name: "weather".into(),
            description: "the forecast".into(),
            schema: serde_json::json!({"type": "object"}),
            executable: "run".into(),
            timeout: Duration::from_secs(1),
        };
        let with = schemas(&["skill".into()], &[skill]);
        assert_eq!(with.len(), 1);
        assert!(with[0].description.contains("weather: the forecast"));
    }
}
