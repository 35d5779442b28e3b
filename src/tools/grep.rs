//! `grep {pattern, path?, glob?, ignore_case?, limit?}`: matching lines of text files.

use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use nix::errno::Errno;
use nix::sys::stat::SFlag;
use serde_json::{Value, json};

use super::fs::resolve::*;
use super::fs::walk::*;
use super::fs::*;
use super::registry::{Run, Tool, ToolSchema};
use super::skill::OfferedSkill;
use super::{Args, ToolError, shorten};
use std::borrow::Cow;

/// `grep` in the registry.
pub(crate) const TOOL: Tool = Tool {
    name: "grep",
    describe,
    run: Run::Files(run),
};

fn describe(_: &[OfferedSkill]) -> Option<ToolSchema> {
    Some(ToolSchema {
        name: "grep",
        description: Cow::Borrowed(
            "Search text files for a regular expression (Rust regex syntax). \
                          Returns `path:line:text` matches, sorted by path and line, capped by \
                          `limit`. Binary files, files over 16 MiB and `.git` directories are \
                          skipped; symbolic links are not followed.",
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regular expression"},
                "path": path_param("File or directory to search (default: the workspace root)"),
                "glob": {"type": "string",
                         "description": "Only files matching this glob: by file name \
                                         (`*.py`), or by workspace-relative path when it \
                                         contains `/` (`src/**/*.rs`)"},
                "ignore_case": {"type": "boolean", "default": false,
                                "description": "Match case-insensitively"},
                "limit": {"type": "integer", "minimum": 1, "maximum": GREP_MAX_MATCHES,
                          "description": "Maximum number of matches (default 200)"},
            },
            "required": ["pattern"],
        }),
    })
}

fn run(root: &WorkspaceRoot, args: &Value, _now: SystemTime) -> Result<Value, ToolError> {
    grep(root, args)
}

fn grep(root: &WorkspaceRoot, args: &Value) -> Result<Value, ToolError> {
    let a = Args::new("grep", args)?;
    let pattern = a.string(&["pattern"], "a regular expression to search for")?;
    let raw = a.opt_string(PATH_NAMES)?.unwrap_or(".");
    let glob = a.opt_string(&["glob"])?;
    let ignore_case = a
        .opt_bool(&["ignore_case", "ignoreCase", "-i"])?
        .unwrap_or(false);
    let limit = a
        .opt_uint(&["limit"], 1)?
        .map_or(GREP_DEFAULT_MATCHES, |l| (l as usize).min(GREP_MAX_MATCHES));
    let regex = regex::bytes::RegexBuilder::new(pattern)
        .case_insensitive(ignore_case)
        .size_limit(1 << 24)
        .build()
        .map_err(|e| {
            ToolError::invalid_argument(format!("`pattern` is not a valid regular expression: {e}"))
        })?;
    let filter = match glob {
        Some(g) if !g.is_empty() => Some((compile_glob(g, "glob")?, g.contains('/'))),
        _ => None,
    };
    let path = parse_path(root, raw)?;
    let mut files: Vec<PathBuf> = Vec::new();
    let mut complete = true;
    match open_dir(root, &path.rel) {
        Ok(_) => {
            let walked = walk(
                root,
                &path.rel,
                WALK_MAX_DEPTH,
                |name| name == ".git",
                |rel, st| {
                    kind(st) == SFlag::S_IFREG
                        && filter.as_ref().is_none_or(|(m, whole)| {
                            if *whole {
                                m.is_match(rel)
                            } else {
                                rel.file_name().is_some_and(|n| m.is_match(n))
                            }
                        })
                },
            )
            .map_err(|e| fs_error(FsError::Os(e), &path.raw, Access::Read))?;
            complete = walked.complete;
            files = walked.found.into_iter().map(|(p, _)| p).collect();
            files.sort_by(|a, b| a.as_os_str().as_bytes().cmp(b.as_os_str().as_bytes()));
        }
        Err(Errno::ENOTDIR) => {
            // One file, named by the agent: say why it cannot be searched.
            let (loc, _, _) = load(root, &path, "grep")?;
            files.push(loc.rel);
        }
        Err(e) => return Err(fs_error(FsError::Os(e), &path.raw, Access::Read)),
    }
    let mut matches: Vec<String> = Vec::new();
    let mut truncated = !complete;
    let mut budget = GREP_MAX_TOTAL_BYTES;
    'files: for rel in &files {
        let Some(content) = read_for_grep(root, rel, &mut budget) else {
            if budget == 0 {
                truncated = true;
                break;
            }
            continue;
        };
        let shown = display(rel);
        for (n, line) in content.split(|b| *b == b'\n').enumerate() {
            if regex.is_match(line) {
                if matches.len() == limit {
                    truncated = true;
                    break 'files;
                }
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                let text = String::from_utf8_lossy(line);
                matches.push(format!(
                    "{shown}:{}:{}",
                    n + 1,
                    shorten(&text, GREP_MAX_LINE_CHARS)
                ));
            }
        }
    }
    Ok(json!({
        "matches": matches,
        "count": matches.len(),
        "truncated": truncated,
    }))
}

/// A text file's content for grep, or `None` (binary, too large, gone, over the budget).
fn read_for_grep(root: &WorkspaceRoot, rel: &Path, budget: &mut u64) -> Option<Vec<u8>> {
    let loc = locate(root, rel, false).ok()?;
    let (file, st) = open_regular(&loc).ok()?;
    let size = st.st_size.max(0) as u64;
    if size > MAX_FILE_BYTES {
        return None;
    }
    if size > *budget {
        *budget = 0;
        return None;
    }
    let mut content = Vec::with_capacity(size as usize);
    file.take(size.min(*budget))
        .read_to_end(&mut content)
        .ok()?;
    *budget -= content.len() as u64;
    if is_binary(&content) {
        return None;
    }
    if content.ends_with(b"\n") {
        content.pop();
    }
    Some(content)
}
