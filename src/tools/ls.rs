//! `ls {path?}`: a directory's entries with their type and size.

use std::os::unix::ffi::OsStrExt;
use std::time::SystemTime;

use nix::errno::Errno;
use nix::fcntl::AtFlags;
use nix::sys::stat::{FileStat, SFlag, fstatat};
use serde_json::{Value, json};

use super::fs::resolve::*;
use super::fs::walk::*;
use super::fs::*;
use super::registry::{Run, Tool, ToolSchema};
use super::skill::OfferedSkill;
use super::{Args, ToolError};
use std::borrow::Cow;

/// `ls` in the registry.
pub(crate) const TOOL: Tool = Tool {
    name: "ls",
    describe,
    run: Run::Files(run),
};

fn describe(_: &[OfferedSkill]) -> Option<ToolSchema> {
    Some(ToolSchema {
        name: "ls",
        description: Cow::Borrowed(
            "List a directory of the workspace: each entry's name, type and size, \
                          sorted by name.",
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": path_param("Directory, relative to the workspace (default: its root)"),
            },
            "required": [],
        }),
    })
}

fn run(root: &WorkspaceRoot, args: &Value, _now: SystemTime) -> Result<Value, ToolError> {
    ls(root, args)
}

fn kind_name(st: &FileStat) -> &'static str {
    match kind(st) {
        SFlag::S_IFREG => "file",
        SFlag::S_IFDIR => "dir",
        SFlag::S_IFLNK => "symlink",
        SFlag::S_IFIFO => "fifo",
        SFlag::S_IFSOCK => "socket",
        SFlag::S_IFCHR => "char_device",
        SFlag::S_IFBLK => "block_device",
        _ => "other",
    }
}

fn ls(root: &WorkspaceRoot, args: &Value) -> Result<Value, ToolError> {
    let a = Args::new("ls", args)?;
    let raw = a.opt_string(PATH_NAMES)?.unwrap_or(".");
    let path = parse_path(root, raw)?;
    let fd = open_dir(root, &path.rel).map_err(|e| match e {
        Errno::ENOTDIR => ToolError::invalid_argument(format!(
            "`{}` is not a directory (read shows a file)",
            path.raw
        )),
        e => fs_error(FsError::Os(e), &path.raw, Access::Read),
    })?;
    let mut dir = nix::dir::Dir::from_fd(fd)
        .map_err(|e| fs_error(FsError::Os(e), &path.raw, Access::Read))?;
    let mut names = dir_names(&mut dir);
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    let total = names.len();
    let entries: Vec<Value> = names
        .iter()
        .take(LS_MAX_ENTRIES)
        .filter_map(|name| {
            let st = fstatat(&dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW).ok()?;
            let mut entry = json!({"name": name.to_string_lossy(), "type": kind_name(&st)});
            if kind(&st) == SFlag::S_IFREG {
                entry["size"] = json!(st.st_size);
            }
            Some(entry)
        })
        .collect();
    Ok(json!({
        "path": path.shown(),
        "entries": entries,
        "total": total,
        "truncated": total > LS_MAX_ENTRIES,
    }))
}
