//! The built-in tools an agent calls, one file each, listed once in [`TOOLS`]: their
//! JSON schemas, and the dispatch that turns a tool name and JSON arguments into a
//! [`ToolResult`] ([`registry::call`] in a session, [`call`] for the file tools alone).
//!
//! Promises: a call never panics and never returns a transport error; every failure is a
//! [`ToolError`] with a category and an agent-safe message. Names and arguments follow
//! OpenClaw's tools so that trained agents transfer; the aliases other agents use (`file_path`,
//! `old_str`, `oldText`, ...) are accepted but not advertised.
//!
//! - [`registry`]: the one list of tools ([`Tool`]: name, schema, handler), the dispatch and the
//!   schemas every consumer reads.
//! - [`result`]: `ToolResult`, `ToolError` and the error categories.
//! - [`fs`]: the file tools' security core over a [`WorkspaceRoot`]: every path resolved
//!   beneath the workspace by the kernel, files replaced atomically, bounded walks.
//! - [`read`], [`write`], [`edit`], [`apply_patch`], [`ls`], [`glob`], [`grep`]: the file tools;
//!   [`exec`], [`process`], [`skill`]: the tools that run commands in the session's sandbox.
//! - [`keys`]: the bytes `process send-keys` and `paste` write (key names, hex, text), pure.
//! - [`patch`]: parsing unified diffs (and OpenClaw's `*** Begin Patch` format) and applying
//!   hunks to bytes, pure.

pub mod apply_patch;
pub mod edit;
pub mod exec;
pub mod fs;
pub mod glob;
pub mod grep;
pub mod keys;
pub mod ls;
pub mod patch;
pub mod process;
pub mod read;
pub mod registry;
pub mod result;
pub mod skill;
pub mod write;

use std::time::SystemTime;

use serde_json::{Map, Value};

pub use fs::WorkspaceRoot;
pub use registry::{Context, Run, Tool, ToolSchema};
pub use result::{ErrorCategory, ToolError, ToolResult};

/// Every built-in tool, in the order they are advertised.
pub const TOOLS: &[&Tool] = &[
    &read::TOOL,
    &write::TOOL,
    &edit::TOOL,
    &apply_patch::TOOL,
    &ls::TOOL,
    &glob::TOOL,
    &grep::TOOL,
    &exec::TOOL,
    &process::TOOL,
    &skill::TOOL,
];

/// The file tools' schemas (aliases accepted by [`call`] are not advertised), in the order of
/// [`TOOLS`].
pub fn schemas() -> Vec<ToolSchema> {
    let names: Vec<String> = tool_names().into_iter().map(String::from).collect();
    registry::schemas(&names, &[])
}

/// The names of the file tools, in the order of [`schemas`].
pub fn tool_names() -> Vec<&'static str> {
    registry::file_tool_names()
}

/// Run the file tool `tool` with `args` (a JSON object) over the workspace `root`.
///
/// `now` is the session clock: every file or directory the call creates or modifies gets it as
/// its modification and access time.
pub fn call(root: &WorkspaceRoot, tool: &str, args: &Value, now: SystemTime) -> ToolResult {
    registry::call_file_tool(root, tool, args, now)
}

/// `text` cut to at most `max` characters (with `...` when cut), for echoing agent input.
pub(crate) fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.to_owned(),
    }
}

/// A tool's arguments: each field looked up under its advertised name, then its aliases; a
/// JSON `null` counts as absent.
pub(crate) struct Args<'a> {
    tool: &'static str,
    map: Option<&'a Map<String, Value>>,
}

impl<'a> Args<'a> {
    pub(crate) fn new(tool: &'static str, value: &'a Value) -> Result<Self, ToolError> {
        match value {
            Value::Object(map) => Ok(Args {
                tool,
                map: Some(map),
            }),
            Value::Null => Ok(Args { tool, map: None }),
            _ => Err(ToolError::invalid_argument(format!(
                "the arguments of `{tool}` must be a JSON object"
            ))),
        }
    }

    /// The first of `names` present and not null, with the name it was found under.
    fn lookup(&self, names: &[&'static str]) -> Option<(&'static str, &'a Value)> {
        let map = self.map?;
        names
            .iter()
            .find_map(|n| map.get(*n).filter(|v| !v.is_null()).map(|v| (*n, v)))
    }

    /// A required string; `what` says what it must hold (for the `missing_field` message).
    pub(crate) fn string(&self, names: &[&'static str], what: &str) -> Result<&'a str, ToolError> {
        match self.opt_string(names)? {
            Some(s) => Ok(s),
            None => Err(ToolError::new(
                ErrorCategory::MissingField,
                format!(
                    "`{}` is required by `{}`: {what}",
                    names.first().copied().unwrap_or("argument"),
                    self.tool
                ),
            )),
        }
    }

    pub(crate) fn opt_string(&self, names: &[&'static str]) -> Result<Option<&'a str>, ToolError> {
        match self.lookup(names) {
            None => Ok(None),
            Some((_, Value::String(s))) => Ok(Some(s)),
            Some((name, _)) => Err(ToolError::invalid_argument(format!(
                "`{name}` must be a string"
            ))),
        }
    }

    /// An optional integer of at least `min` (a numeric string is accepted too).
    pub(crate) fn opt_uint(
        &self,
        names: &[&'static str],
        min: u64,
    ) -> Result<Option<u64>, ToolError> {
        let Some((name, value)) = self.lookup(names) else {
            return Ok(None);
        };
        let n = match value {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse::<u64>().ok(),
            _ => None,
        };
        match n {
            Some(n) if n >= min => Ok(Some(n)),
            _ => Err(ToolError::invalid_argument(format!(
                "`{name}` must be an integer of at least {min}"
            ))),
        }
    }

    /// An optional boolean (`"true"`/`"false"` strings are accepted too).
    pub(crate) fn opt_bool(&self, names: &[&'static str]) -> Result<Option<bool>, ToolError> {
        match self.lookup(names) {
            None => Ok(None),
            Some((_, Value::Bool(b))) => Ok(Some(*b)),
            Some((_, Value::String(s))) if s == "true" => Ok(Some(true)),
            Some((_, Value::String(s))) if s == "false" => Ok(Some(false)),
            Some((name, _)) => Err(ToolError::invalid_argument(format!(
                "`{name}` must be true or false"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_tool_names_the_known_ones() {
        let dir = tempfile::tempdir().unwrap();
        let root = WorkspaceRoot::open(dir.path(), "/workspace", vec![], true, None).unwrap();
        let r = call(&root, "rm_rf", &json!({}), SystemTime::UNIX_EPOCH);
        let e = r.error().unwrap();
        assert_eq!(e.category, ErrorCategory::InvalidArgument);
        for name in tool_names() {
            assert!(e.message.contains(name), "{}", e.message);
        }
    }

    #[test]
    fn schemas_cover_every_tool_and_advertise_no_alias() {
        let schemas = schemas();
        let names: Vec<&str> = schemas.iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            ["read", "write", "edit", "apply_patch", "ls", "glob", "grep"]
        );
        assert_eq!(names, tool_names());
        for s in &schemas {
            assert!(!s.description.is_empty());
            assert_eq!(s.parameters["type"], "object");
            let props = s.parameters["properties"].as_object().unwrap();
            for required in s.parameters["required"].as_array().unwrap() {
                assert!(props.contains_key(required.as_str().unwrap()));
            }
            for alias in [
                "file_path",
                "file",
                "oldText",
                "old_str",
                "newText",
                "new_str",
                "replaceAll",
            ] {
                assert!(!props.contains_key(alias), "{} advertises {alias}", s.name);
            }
            serde_json::to_string(s).unwrap();
        }
    }

    #[test]
    fn args_types_and_aliases() {
        let v = json!({"file_path": "a", "offset": "3", "limit": 2, "replaceAll": "true",
                       "bad": 1.5, "neg": -1, "n": null});
        let a = Args::new("read", &v).unwrap();
        assert_eq!(a.string(&["path", "file_path"], "x").unwrap(), "a");
        assert_eq!(a.opt_uint(&["offset"], 1).unwrap(), Some(3));
        assert_eq!(a.opt_uint(&["limit"], 1).unwrap(), Some(2));
        assert_eq!(
            a.opt_bool(&["replace_all", "replaceAll"]).unwrap(),
            Some(true)
        );
        assert!(a.opt_uint(&["bad"], 0).is_err());
        assert!(a.opt_uint(&["neg"], 0).is_err());
        assert_eq!(a.opt_uint(&["n"], 0).unwrap(), None);
        let e = a.string(&["n"], "something").unwrap_err();
        assert_eq!(e.category, ErrorCategory::MissingField);
        assert!(e.message.contains("`n`"));
        assert!(Args::new("read", &json!([1])).is_err());
        assert!(Args::new("read", &Value::Null).is_ok());
    }

    #[test]
    fn shorten_cuts_on_characters() {
        assert_eq!(shorten("héllo", 2), "hé...");
        assert_eq!(shorten("hi", 2), "hi");
    }
}
