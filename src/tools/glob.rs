//! `glob {pattern, path?}`: paths matching a glob, never following a link.

use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

use nix::errno::Errno;
use nix::fcntl::OFlag;
use serde_json::{Value, json};

use super::fs::resolve::*;
use super::fs::walk::*;
use super::fs::*;
use super::registry::{Run, Tool, ToolSchema};
use super::skill::OfferedSkill;
use super::{Args, ToolError};
use std::borrow::Cow;

/// `glob` in the registry.
pub(crate) const TOOL: Tool = Tool {
    name: "glob",
    describe,
    run: Run::Files(run),
};

fn describe(_: &[OfferedSkill]) -> Option<ToolSchema> {
    Some(ToolSchema {
        name: "glob",
        description: Cow::Borrowed(
            "Find paths matching a glob pattern (`*`, `?`, `[abc]`, `{a,b}`, `**` \
                          for any number of directories). Returns workspace-relative paths, \
                          sorted. Symbolic links are listed but not followed.",
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string",
                            "description": "Glob relative to the workspace, e.g. `**/*.py`"},
                "path": path_param("Directory the pattern is relative to (default: the root)"),
            },
            "required": ["pattern"],
        }),
    })
}

fn run(root: &WorkspaceRoot, args: &Value, _now: SystemTime) -> Result<Value, ToolError> {
    glob(root, args)
}

fn glob(root: &WorkspaceRoot, args: &Value) -> Result<Value, ToolError> {
    let a = Args::new("glob", args)?;
    let raw = a.string(
        &["pattern"],
        "a glob pattern relative to the workspace, such as `**/*.py` or `src/*.rs`",
    )?;
    let base = a.opt_string(PATH_NAMES)?;
    if raw.is_empty() {
        return Err(ToolError::invalid_argument("`pattern` is empty"));
    }
    let joined;
    let full = match base {
        Some(b) if !Path::new(raw).is_absolute() => {
            joined = format!("{}/{raw}", b.trim_end_matches('/'));
            joined.as_str()
        }
        _ => raw,
    };
    let path = parse_path(root, full)?;
    if path.rel.components().any(|c| c == Component::ParentDir) {
        return Err(ToolError::permission(format!(
            "`{}` leaves the workspace: `..` is not allowed in a glob pattern",
            path.raw
        )));
    }
    let pattern = path.rel.to_string_lossy().into_owned();
    if pattern.is_empty() {
        return Err(ToolError::invalid_argument(
            "`pattern` matches only the workspace itself",
        ));
    }
    let matcher = compile_glob(&pattern, "pattern")?;
    let comps: Vec<&OsStr> = path.rel.iter().collect();
    let literal = comps.iter().take_while(|c| !has_glob_meta(c)).count();
    let mut matches: Vec<String> = Vec::new();
    let mut complete = true;
    if literal == comps.len() {
        // No wildcard: the path itself, when it exists.
        if open_at(
            root.dir(),
            &path.rel,
            OFlag::O_PATH | OFlag::O_NOFOLLOW,
            0,
            BENEATH,
        )
        .is_ok()
        {
            matches.push(pattern.clone());
        }
    } else {
        let base: PathBuf = comps[..literal].iter().collect();
        let max_depth = if pattern.contains("**") {
            WALK_MAX_DEPTH
        } else {
            comps.len() - literal
        };
        match walk(
            root,
            &base,
            max_depth,
            |_| false,
            |rel, _| matcher.is_match(rel),
        ) {
            Ok(w) => {
                complete = w.complete;
                matches = w.found.iter().map(|(p, _)| display(p)).collect();
            }
            Err(Errno::ENOENT) | Err(Errno::ENOTDIR) => {}
            Err(e) => return Err(fs_error(FsError::Os(e), &display(&base), Access::Read)),
        }
    }
    matches.sort();
    let total = matches.len();
    matches.truncate(GLOB_MAX_RESULTS);
    Ok(json!({
        "pattern": pattern,
        "matches": matches,
        "count": matches.len(),
        "truncated": total > GLOB_MAX_RESULTS || !complete,
    }))
}
