//! `write {path, content}`: a file created or replaced whole.

use std::time::SystemTime;

use serde_json::{Value, json};

use super::fs::resolve::*;
use super::fs::writing::*;
use super::fs::*;
use super::registry::{Run, Tool, ToolSchema};
use super::skill::OfferedSkill;
use super::{Args, ToolError};
use std::borrow::Cow;

/// `write` in the registry.
pub(crate) const TOOL: Tool = Tool {
    name: "write",
    describe,
    run: Run::Files(run),
};

fn describe(_: &[OfferedSkill]) -> Option<ToolSchema> {
    Some(ToolSchema {
        name: "write",
        description: Cow::Borrowed(
            "Create or overwrite a file with the given content. Parent directories \
                          are created as needed.",
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": path_param("File path, relative to the workspace or absolute under it"),
                "content": {"type": "string", "description": "The whole content to write"},
            },
            "required": ["path", "content"],
        }),
    })
}

fn run(root: &WorkspaceRoot, args: &Value, now: SystemTime) -> Result<Value, ToolError> {
    write(root, args, now)
}

fn write(root: &WorkspaceRoot, args: &Value, now: SystemTime) -> Result<Value, ToolError> {
    let a = Args::new("write", args)?;
    let raw = a.string(
        PATH_NAMES,
        "the file to write, relative to the workspace (parent directories are created)",
    )?;
    let content = a.string(&["content"], "the whole new content of the file")?;
    let path = parse_path(root, raw)?;
    require_writable(root, &path.raw)?;
    if path.names_dir {
        return Err(ToolError::invalid_argument(format!(
            "`{}` names a directory: give a file path",
            path.raw
        )));
    }
    if content.len() > WRITE_MAX_BYTES {
        return Err(too_large_to_write(&path.raw, content.len()));
    }
    let created = replace_file(root, &path, content.as_bytes(), &timespec(now))
        .map_err(|e| fs_error(e, &path.raw, Access::Write))?;
    Ok(json!({"path": path.shown(), "bytes": content.len(), "created": created}))
}
