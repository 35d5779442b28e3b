//! `edit {path, old_string, new_string, replace_all?}`: an exact piece of text replaced.

use std::time::SystemTime;

use serde_json::{Value, json};

use super::fs::resolve::*;
use super::fs::writing::*;
use super::fs::*;
use super::registry::{Run, Tool, ToolSchema};
use super::skill::OfferedSkill;
use super::{Args, ToolError};
use std::borrow::Cow;

/// `edit` in the registry.
pub(crate) const TOOL: Tool = Tool {
    name: "edit",
    describe,
    run: Run::Files(run),
};

fn describe(_: &[OfferedSkill]) -> Option<ToolSchema> {
    Some(ToolSchema {
        name: "edit",
        description: Cow::Borrowed(
            "Replace an exact piece of text in a file. `old_string` must match the \
                          file exactly (whitespace and indentation included) and occur once, \
                          unless `replace_all` is set.",
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": path_param("File path, relative to the workspace or absolute under it"),
                "old_string": {"type": "string", "description": "The exact text to replace"},
                "new_string": {"type": "string", "description": "The text to put in its place"},
                "replace_all": {"type": "boolean", "default": false,
                                "description": "Replace every occurrence"},
            },
            "required": ["path", "old_string", "new_string"],
        }),
    })
}

fn run(root: &WorkspaceRoot, args: &Value, now: SystemTime) -> Result<Value, ToolError> {
    edit(root, args, now)
}

fn edit(root: &WorkspaceRoot, args: &Value, now: SystemTime) -> Result<Value, ToolError> {
    let a = Args::new("edit", args)?;
    let raw = a.string(PATH_NAMES, "the file to edit, relative to the workspace")?;
    let old = a.string(
        &["old_string", "oldText", "old_str"],
        "the exact text to replace, as it appears in the file",
    )?;
    let new = a.string(
        &["new_string", "newText", "new_str"],
        "the text to put in its place",
    )?;
    let replace_all = a.opt_bool(&["replace_all", "replaceAll"])?.unwrap_or(false);
    let path = parse_path(root, raw)?;
    require_writable(root, &path.raw)?;
    if old.is_empty() {
        return Err(ToolError::invalid_argument(
            "`old_string` is empty: give the exact text to replace (write creates a file)",
        ));
    }
    if old == new {
        return Err(ToolError::invalid_argument(
            "`old_string` and `new_string` are the same: nothing would change",
        ));
    }
    let (loc, content, st) = load(root, &path, "edit")?;
    let finder = memchr::memmem::Finder::new(old.as_bytes());
    let count = finder.find_iter(&content).count();
    if count == 0 {
        return Err(ToolError::not_found(format!(
            "`old_string` was not found in `{}` (it must match exactly, including whitespace, \
             indentation and line endings)",
            path.raw
        )));
    }
    if count > 1 && !replace_all {
        return Err(ToolError::invalid_argument(format!(
            "`old_string` occurs {count} times in `{}`: include more surrounding text to make it \
             unique, or set `replace_all` to replace every occurrence",
            path.raw
        )));
    }
    let mut updated = Vec::with_capacity(content.len());
    let mut last = 0;
    let mut replaced = 0;
    for at in finder.find_iter(&content) {
        updated.extend_from_slice(&content[last..at]);
        updated.extend_from_slice(new.as_bytes());
        last = at + old.len();
        replaced += 1;
        if !replace_all {
            break;
        }
    }
    updated.extend_from_slice(&content[last..]);
    if updated.len() > WRITE_MAX_BYTES {
        return Err(too_large_to_write(&path.raw, updated.len()));
    }
    let now = timespec(now);
    let staged = stage(root, loc, &updated, st.st_mode & 0o777, &now)
        .map_err(|e| fs_error(FsError::Os(e), &path.raw, Access::Write))?;
    if let Err(e) = staged.commit() {
        staged.discard();
        return Err(fs_error(FsError::Os(e), &path.raw, Access::Write));
    }
    touch_dir(&staged.dir, &now);
    Ok(json!({"path": path.shown(), "replacements": replaced}))
}
