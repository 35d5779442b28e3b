//! `read {path, offset?, limit?}`: a text file's lines, windowed and capped.

use std::time::SystemTime;

use serde_json::{Value, json};

use super::fs::resolve::*;
use super::fs::*;
use super::registry::{Run, Tool, ToolSchema};
use super::skill::OfferedSkill;
use super::{Args, ToolError};
use std::borrow::Cow;

/// `read` in the registry.
pub(crate) const TOOL: Tool = Tool {
    name: "read",
    describe,
    run: Run::Files(run),
};

fn describe(_: &[OfferedSkill]) -> Option<ToolSchema> {
    Some(ToolSchema {
        name: "read",
        description: Cow::Borrowed(
            "Read a text file of the workspace. Returns its lines from `offset` \
                          (default 1) up to `limit` lines (default 2000) or 100 KiB, the total \
                          line count, and whether more remains (`next_offset`). Binary files and \
                          files over 16 MiB are refused.",
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": path_param("File path, relative to the workspace or absolute under it"),
                "offset": {"type": "integer", "minimum": 1,
                           "description": "First line to return (1-based)"},
                "limit": {"type": "integer", "minimum": 1,
                          "description": "Maximum number of lines to return"},
            },
            "required": ["path"],
        }),
    })
}

fn run(root: &WorkspaceRoot, args: &Value, _now: SystemTime) -> Result<Value, ToolError> {
    read(root, args)
}

fn read(root: &WorkspaceRoot, args: &Value) -> Result<Value, ToolError> {
    let a = Args::new("read", args)?;
    let raw = a.string(
        PATH_NAMES,
        "the file to read, relative to the workspace (or under its mount point)",
    )?;
    let offset = a.opt_uint(&["offset"], 1)?.unwrap_or(1) as usize;
    let limit = a
        .opt_uint(&["limit"], 1)?
        .map_or(READ_DEFAULT_LINES, |l| l as usize);
    let path = parse_path(root, raw)?;
    let content = load_content(root, &path, "read")?;
    if is_binary(&content) {
        return Err(ToolError::invalid_argument(format!(
            "`{}` is a binary file ({} bytes): read shows text only",
            path.raw,
            content.len()
        )));
    }
    // Valid UTF-8 becomes the text as it is (no copy); only invalid text takes the lossy walk
    // (which changes neither the newlines nor the last byte's being one).
    let total = line_count(&content);
    let text = String::from_utf8(content)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    if offset > total.max(1) {
        return Err(ToolError::invalid_argument(format!(
            "`offset` {offset} is past the end of `{}`, which has {total} line(s)",
            path.raw
        )));
    }
    let start = offset - 1;
    let (out, end, cut) = if start == 0 && total <= limit && text.len() <= READ_MAX_OUTPUT_BYTES {
        // The whole file fits: no need to cut it into lines.
        (text, total, false)
    } else {
        lines_window(&text, start, limit)
    };
    let mut result = json!({
        "path": path.shown(),
        "content": out,
        "offset": offset,
        "lines": end - start,
        "total_lines": total,
        "truncated": end < total || cut,
    });
    if end < total {
        result["next_offset"] = json!(end + 1);
    }
    Ok(result)
}

/// The number of lines of `content`, as `split_inclusive('\n')` cuts its text (a last line
/// without its newline counts).
pub(crate) fn line_count(content: &[u8]) -> usize {
    // Counted per block of 32 bytes into a byte (at most 32): vector compares and sums.
    let blocks = content.chunks_exact(32);
    let tail = blocks.remainder().iter().filter(|&&b| b == b'\n').count();
    let newlines: usize = blocks
        .map(|block| usize::from(block.iter().map(|&b| u8::from(b == b'\n')).sum::<u8>()))
        .sum();
    let unterminated = content.last().is_some_and(|&b| b != b'\n');
    newlines + tail + usize::from(unterminated)
}

/// Lines `start..` (0-based) of `text`, at most `limit` of them and at most
/// [`READ_MAX_OUTPUT_BYTES`] (a first line longer than that is cut): the text, the index of the
/// first line not shown, and whether a line was cut.
pub(crate) fn lines_window(text: &str, start: usize, limit: usize) -> (String, usize, bool) {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out = String::new();
    let mut end = start;
    let mut cut = false;
    while end < lines.len() && end - start < limit {
        let line = lines[end];
        if out.len() + line.len() > READ_MAX_OUTPUT_BYTES {
            if end == start {
                // One line longer than the cap: show its beginning.
                let mut at = READ_MAX_OUTPUT_BYTES;
                while !line.is_char_boundary(at) {
                    at -= 1;
                }
                out.push_str(&line[..at]);
                end += 1;
                cut = true;
            }
            break;
        }
        out.push_str(line);
        end += 1;
    }
    (out, end, cut)
}
