//! Patches as data: parsing a unified diff (one or more files, `git diff` output included) or
//! OpenClaw's `*** Begin Patch` format into [`FileChange`]s, and applying hunks to bytes.
//!
//! Pure: nothing here touches a file. Hunks apply exactly: the context and removed lines must
//! match the file byte for byte. A unified hunk is tried first at the line its header names,
//! then at the nearest line where it matches (as `git apply` does), never before the previous
//! hunk; there is no fuzz. The line counts in `@@` headers are used to end a hunk but a wrong
//! count is forgiven, since models often get them wrong.

/// One line of a hunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HunkLine {
    Context(String),
    Remove(String),
    Add(String),
}

/// One hunk: lines to find (context and removed) and what replaces them (context and added).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hunk {
    /// The 1-based old line the unified header names (`@@ -N,...`).
    pub old_start: Option<usize>,
    /// Whether the unified header's old count is 0 (then `old_start` is the line to insert
    /// after).
    pub old_empty: bool,
    /// `*** Begin Patch` format: a line (`@@ text`) the hunk comes after.
    pub anchor: Option<String>,
    pub lines: Vec<HunkLine>,
    /// The hunk must match at the end of the file (`*** End of File`).
    pub at_eof: bool,
    /// The old text's last line has no newline (`\ No newline at end of file`).
    pub old_no_newline: bool,
    /// The new text's last line has no newline.
    pub new_no_newline: bool,
}

impl Hunk {
    fn old_lines(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                HunkLine::Context(s) | HunkLine::Remove(s) => Some(s.as_str()),
                HunkLine::Add(_) => None,
            })
            .collect()
    }

    fn new_lines(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter_map(|l| match l {
                HunkLine::Context(s) | HunkLine::Add(s) => Some(s.as_str()),
                HunkLine::Remove(_) => None,
            })
            .collect()
    }
}

/// What a patch does to one file. Paths are as the patch names them (`a/`, `b/` prefixes of
/// unified diffs removed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileChange {
    /// Create a file that must not exist.
    Add { path: String, content: Vec<u8> },
    /// Delete a file; with hunks, its content must be exactly what they remove.
    Delete { path: String, hunks: Vec<Hunk> },
    /// Change a file that must exist, and move it when `move_to` is set.
    Update {
        path: String,
        move_to: Option<String>,
        hunks: Vec<Hunk>,
    },
}

impl FileChange {
    pub fn path(&self) -> &str {
        match self {
            FileChange::Add { path, .. }
            | FileChange::Delete { path, .. }
            | FileChange::Update { path, .. } => path,
        }
    }
}

/// Why a patch could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    #[error("the patch is empty")]
    Empty,
    #[error(
        "no file found in the patch: a unified diff needs `--- a/PATH` and `+++ b/PATH` lines \
         before its `@@` hunks (or use `*** Begin Patch` / `*** Update File: PATH`)"
    )]
    NoFiles,
    #[error("patch line {line}: {what}")]
    Syntax { line: usize, what: String },
}

/// Why hunks did not apply to a file's content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HunkError {
    #[error("hunk {hunk} does not match: {what}")]
    NoMatch { hunk: usize, what: String },
    #[error("the file's content is not what the patch deletes")]
    DeleteMismatch,
}

/// Parse a patch in either format.
pub fn parse(text: &str) -> Result<Vec<FileChange>, PatchError> {
    if text.trim().is_empty() {
        return Err(PatchError::Empty);
    }
    let lines: Vec<&str> = text.split('\n').collect();
    let first = lines.iter().position(|l| !l.trim().is_empty()).unwrap_or(0);
    if lines[first].trim() == "*** Begin Patch" {
        parse_begin_patch(&lines, first + 1)
    } else {
        parse_unified(&lines)
    }
}

fn syntax(index: usize, what: impl Into<String>) -> PatchError {
    PatchError::Syntax {
        line: index + 1,
        what: what.into(),
    }
}

/// A `---`/`+++` header's path: `None` for `/dev/null`; text after a tab (a timestamp) and
/// surrounding quotes dropped.
fn header_path(rest: &str) -> Option<String> {
    let path = rest.split('\t').next().unwrap_or("").trim_end_matches('\r');
    let path = path.trim();
    let path = path
        .strip_prefix('"')
        .and_then(|p| p.strip_suffix('"'))
        .unwrap_or(path);
    if path == "/dev/null" {
        None
    } else {
        Some(path.to_owned())
    }
}

fn is_file_header(lines: &[&str], i: usize) -> bool {
    lines[i].starts_with("--- ") && lines.get(i + 1).is_some_and(|l| l.starts_with("+++ "))
}

/// `@@ -a[,b] +c[,d] @@` → (a, b, c, d).
fn parse_hunk_header(line: &str) -> Option<(usize, usize, usize, usize)> {
    let rest = line.strip_prefix("@@ -")?;
    let (ranges, _) = rest.split_once(" @@")?;
    let (old, new) = ranges.split_once(" +")?;
    let range = |r: &str| -> Option<(usize, usize)> {
        match r.split_once(',') {
            Some((s, c)) => Some((s.parse().ok()?, c.parse().ok()?)),
            None => Some((r.parse().ok()?, 1)),
        }
    };
    let (a, b) = range(old)?;
    let (c, d) = range(new)?;
    Some((a, b, c, d))
}

fn parse_unified(lines: &[&str]) -> Result<Vec<FileChange>, PatchError> {
    let mut changes = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if is_file_header(lines, i) {
            let old = header_path(&line[4..]);
            let new = header_path(&lines[i + 1][4..]);
            let header_index = i;
            i += 2;
            let mut hunks = Vec::new();
            while i < lines.len() && lines[i].starts_with("@@") {
                let (hunk, next) = parse_unified_hunk(lines, i)?;
                hunks.push(hunk);
                i = next;
            }
            changes.push(unified_change(old, new, hunks, header_index)?);
        } else if line.starts_with("@@") {
            return Err(syntax(
                i,
                "a hunk outside any file: `--- a/PATH` and `+++ b/PATH` lines must come first",
            ));
        } else if line.starts_with("GIT binary patch") || line.starts_with("Binary files ") {
            return Err(syntax(i, "binary patches are not supported"));
        } else {
            // `diff --git`, `index`, mode lines, prose: nothing to apply.
            i += 1;
        }
    }
    if changes.is_empty() {
        return Err(PatchError::NoFiles);
    }
    Ok(changes)
}

/// Remove git's `a/` and `b/` prefixes when both sides carry them (or the other is /dev/null).
fn strip_git_prefixes(
    old: Option<String>,
    new: Option<String>,
) -> (Option<String>, Option<String>) {
    let old_ok = old.as_deref().is_none_or(|p| p.starts_with("a/"));
    let new_ok = new.as_deref().is_none_or(|p| p.starts_with("b/"));
    if old_ok && new_ok {
        let strip = |p: Option<String>| p.map(|p| p[2..].to_owned());
        (strip(old), strip(new))
    } else {
        (old, new)
    }
}

fn unified_change(
    old: Option<String>,
    new: Option<String>,
    hunks: Vec<Hunk>,
    header_index: usize,
) -> Result<FileChange, PatchError> {
    let (old, new) = strip_git_prefixes(old, new);
    if hunks.is_empty() {
        return Err(syntax(header_index, "a file without any `@@` hunk"));
    }
    match (old, new) {
        (None, None) => Err(syntax(header_index, "both sides are /dev/null")),
        (None, Some(path)) => {
            let mut lines = Vec::new();
            let mut no_newline = false;
            for h in &hunks {
                if h.lines.iter().any(|l| !matches!(l, HunkLine::Add(_))) {
                    return Err(syntax(
                        header_index,
                        format!("`{path}` is new (--- /dev/null): its hunk may only add lines"),
                    ));
                }
                lines.extend(h.new_lines());
                no_newline = h.new_no_newline;
            }
            Ok(FileChange::Add {
                path,
                content: join_lines(&lines, !no_newline),
            })
        }
        (Some(path), None) => Ok(FileChange::Delete { path, hunks }),
        (Some(old), Some(new)) => Ok(FileChange::Update {
            move_to: (old != new).then_some(new),
            path: old,
            hunks,
        }),
    }
}

fn parse_unified_hunk(lines: &[&str], start: usize) -> Result<(Hunk, usize), PatchError> {
    let (old_start, old_count, _, new_count) =
        parse_hunk_header(lines[start]).ok_or_else(|| {
            syntax(
                start,
                "a malformed hunk header (expected `@@ -A,B +C,D @@`)",
            )
        })?;
    let mut hunk = Hunk {
        old_start: Some(old_start),
        old_empty: old_count == 0,
        ..Hunk::default()
    };
    let (mut old_seen, mut new_seen) = (0usize, 0usize);
    let mut i = start + 1;
    while i < lines.len() {
        let line = lines[i];
        let counted = old_seen >= old_count && new_seen >= new_count;
        if line.starts_with("@@") || line.starts_with("diff ") || is_file_header(lines, i) {
            break;
        }
        match line.as_bytes().first() {
            Some(b' ') => {
                hunk.lines.push(HunkLine::Context(line[1..].to_owned()));
                old_seen += 1;
                new_seen += 1;
            }
            Some(b'-') => {
                hunk.lines.push(HunkLine::Remove(line[1..].to_owned()));
                old_seen += 1;
            }
            Some(b'+') => {
                hunk.lines.push(HunkLine::Add(line[1..].to_owned()));
                new_seen += 1;
            }
            Some(b'\\') => {
                match hunk.lines.last() {
                    Some(HunkLine::Remove(_)) => hunk.old_no_newline = true,
                    Some(HunkLine::Add(_)) => hunk.new_no_newline = true,
                    Some(HunkLine::Context(_)) => {
                        hunk.old_no_newline = true;
                        hunk.new_no_newline = true;
                    }
                    None => return Err(syntax(i, "`\\ No newline` before any line")),
                }
                i += 1;
                continue;
            }
            // An empty line inside a hunk is an empty context line whose space was lost (an
            // editor trimmed it), as long as the header's counts say lines remain.
            None if !counted && i + 1 < lines.len() => {
                hunk.lines.push(HunkLine::Context(String::new()));
                old_seen += 1;
                new_seen += 1;
            }
            _ => break,
        }
        i += 1;
    }
    if hunk.lines.is_empty() {
        return Err(syntax(start, "an empty hunk"));
    }
    Ok((hunk, i))
}

fn parse_begin_patch(lines: &[&str], start: usize) -> Result<Vec<FileChange>, PatchError> {
    let mut changes = Vec::new();
    let mut i = start;
    let mut ended = false;
    while i < lines.len() {
        let line = lines[i].trim_end_matches('\r');
        if line.trim() == "*** End Patch" {
            ended = true;
            break;
        }
        if let Some(path) = line.strip_prefix("*** Add File: ") {
            let path = path.trim().to_owned();
            i += 1;
            let mut content = Vec::new();
            while i < lines.len() && !lines[i].starts_with("***") {
                match lines[i].strip_prefix('+') {
                    Some(l) => content.push(l),
                    None if lines[i].is_empty() && i + 1 == lines.len() => {}
                    None => {
                        return Err(syntax(i, "lines of an added file must start with `+`"));
                    }
                }
                i += 1;
            }
            changes.push(FileChange::Add {
                path,
                content: join_lines(&content, true),
            });
        } else if let Some(path) = line.strip_prefix("*** Delete File: ") {
            changes.push(FileChange::Delete {
                path: path.trim().to_owned(),
                hunks: Vec::new(),
            });
            i += 1;
        } else if let Some(path) = line.strip_prefix("*** Update File: ") {
            let path = path.trim().to_owned();
            i += 1;
            let mut move_to = None;
            if let Some(to) = lines.get(i).and_then(|l| l.strip_prefix("*** Move to: ")) {
                move_to = Some(to.trim().to_owned());
                i += 1;
            }
            let mut hunks = Vec::new();
            while i < lines.len() {
                let l = lines[i];
                if l.starts_with("*** ") && l.trim_end() != "*** End of File" {
                    break;
                }
                let (hunk, next) = parse_begin_patch_hunk(lines, i)?;
                hunks.push(hunk);
                i = next;
            }
            if hunks.is_empty() && move_to.is_none() {
                return Err(syntax(
                    i,
                    format!("`*** Update File: {path}` without a hunk"),
                ));
            }
            changes.push(FileChange::Update {
                path,
                move_to,
                hunks,
            });
        } else if line.trim().is_empty() {
            i += 1;
        } else {
            return Err(syntax(
                i,
                "expected `*** Add File: PATH`, `*** Delete File: PATH`, \
                 `*** Update File: PATH` or `*** End Patch`",
            ));
        }
    }
    if !ended && changes.is_empty() {
        return Err(PatchError::NoFiles);
    }
    if changes.is_empty() {
        return Err(PatchError::NoFiles);
    }
    Ok(changes)
}

/// One hunk of an `*** Update File:` section: an optional `@@ [anchor]` line, then lines.
fn parse_begin_patch_hunk(lines: &[&str], start: usize) -> Result<(Hunk, usize), PatchError> {
    let mut hunk = Hunk::default();
    let mut i = start;
    if let Some(rest) = lines[i].strip_prefix("@@") {
        let anchor = rest.trim();
        if !anchor.is_empty() {
            hunk.anchor = Some(anchor.to_owned());
        }
        i += 1;
    }
    while i < lines.len() {
        let line = lines[i];
        if line.trim_end() == "*** End of File" {
            hunk.at_eof = true;
            i += 1;
            break;
        }
        if line.starts_with("***") || line.starts_with("@@") {
            break;
        }
        match line.as_bytes().first() {
            Some(b' ') => hunk.lines.push(HunkLine::Context(line[1..].to_owned())),
            Some(b'-') => hunk.lines.push(HunkLine::Remove(line[1..].to_owned())),
            Some(b'+') => hunk.lines.push(HunkLine::Add(line[1..].to_owned())),
            None if i + 1 < lines.len() => hunk.lines.push(HunkLine::Context(String::new())),
            None => {}
            _ => {
                return Err(syntax(
                    i,
                    "a hunk line must start with ` ` (context), `-` (remove) or `+` (add)",
                ));
            }
        }
        i += 1;
    }
    if hunk.lines.is_empty() {
        return Err(syntax(start, "an empty hunk"));
    }
    Ok((hunk, i))
}

/// `lines` joined with `\n`, with a final newline when `final_newline` (and any line).
fn join_lines<S: AsRef<[u8]>>(lines: &[S], final_newline: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for (n, l) in lines.iter().enumerate() {
        if n > 0 {
            out.push(b'\n');
        }
        out.extend_from_slice(l.as_ref());
    }
    if final_newline && !lines.is_empty() {
        out.push(b'\n');
    }
    out
}

/// A file's lines (without their `\n`) and whether its last line ends with one.
fn split_lines(content: &[u8]) -> (Vec<&[u8]>, bool) {
    if content.is_empty() {
        return (Vec::new(), false);
    }
    let ends_with_newline = content.ends_with(b"\n");
    let body = if ends_with_newline {
        &content[..content.len() - 1]
    } else {
        content
    };
    (body.split(|b| *b == b'\n').collect(), ends_with_newline)
}

fn matches_at(lines: &[&[u8]], at: usize, block: &[&str]) -> bool {
    at + block.len() <= lines.len()
        && block
            .iter()
            .zip(&lines[at..])
            .all(|(want, have)| want.as_bytes() == *have)
}

/// Where `block` matches in `lines`, at `from` or later: the position nearest `hint` when
/// there is one, else the first.
fn find_block(lines: &[&[u8]], block: &[&str], from: usize, hint: Option<usize>) -> Option<usize> {
    if block.len() > lines.len() {
        return None;
    }
    let last = lines.len() - block.len();
    if from > last {
        return None;
    }
    match hint {
        None => (from..=last).find(|&at| matches_at(lines, at, block)),
        Some(hint) => {
            let hint = hint.clamp(from, last);
            (0..=(last - from))
                .flat_map(|d| [hint.checked_add(d), hint.checked_sub(d)])
                .flatten()
                .filter(|&at| at >= from && at <= last)
                .find(|&at| matches_at(lines, at, block))
        }
    }
}

fn describe(block: &[&str]) -> String {
    match block.first() {
        Some(first) => format!(
            "the {} line(s) it expects, starting with `{}`, are not in the file",
            block.len(),
            crate::tools::shorten(first, 80)
        ),
        None => "it has nothing to match".to_owned(),
    }
}

/// Apply `hunks` in order to `original`; each must match exactly, after the previous one.
pub fn apply_hunks(original: &[u8], hunks: &[Hunk]) -> Result<Vec<u8>, HunkError> {
    let (lines, mut ends_with_newline) = split_lines(original);
    let mut out: Vec<&[u8]> = Vec::with_capacity(lines.len());
    let mut cursor = 0usize;
    for (n, hunk) in hunks.iter().enumerate() {
        let number = n + 1;
        let old = hunk.old_lines();
        let new = hunk.new_lines();
        let mut from = cursor;
        if let Some(anchor) = &hunk.anchor {
            let found = (cursor..lines.len()).find(|&j| lines[j] == anchor.as_bytes());
            match found {
                Some(j) => from = j + 1,
                None => {
                    return Err(HunkError::NoMatch {
                        hunk: number,
                        what: format!(
                            "its `@@ {}` line is not in the file",
                            crate::tools::shorten(anchor, 80)
                        ),
                    });
                }
            }
        }
        let at = if hunk.at_eof {
            let at = lines.len().checked_sub(old.len()).filter(|&at| at >= from);
            match at.filter(|&at| matches_at(&lines, at, &old)) {
                Some(at) => at,
                None => {
                    return Err(HunkError::NoMatch {
                        hunk: number,
                        what: format!("{} at the end of the file", describe(&old)),
                    });
                }
            }
        } else if old.is_empty() {
            // Pure insertion: after line N for a unified `-N,0`, else at the end.
            let at = match hunk.old_start {
                Some(s) if hunk.old_empty => s,
                Some(s) => s.saturating_sub(1),
                None => lines.len(),
            };
            at.clamp(from, lines.len().max(from))
        } else {
            let hint = hunk.old_start.map(|s| s.saturating_sub(1));
            match find_block(&lines, &old, from, hint) {
                Some(at) => at,
                None => {
                    let where_ = if number > 1 {
                        " (after the previous hunk)"
                    } else {
                        ""
                    };
                    return Err(HunkError::NoMatch {
                        hunk: number,
                        what: format!("{}{where_}", describe(&old)),
                    });
                }
            }
        };
        if at > lines.len() {
            return Err(HunkError::NoMatch {
                hunk: number,
                what: "it starts past the end of the file".to_owned(),
            });
        }
        out.extend_from_slice(&lines[cursor..at]);
        out.extend(new.iter().map(|l| l.as_bytes()));
        cursor = at + old.len();
        if cursor == lines.len() {
            ends_with_newline = if new.is_empty() {
                true
            } else {
                !hunk.new_no_newline
            };
        }
    }
    out.extend_from_slice(&lines[cursor..]);
    Ok(join_lines(&out, ends_with_newline))
}

/// Check that `hunks` delete the whole of `original`.
pub fn check_delete(original: &[u8], hunks: &[Hunk]) -> Result<(), HunkError> {
    if hunks.is_empty() {
        return Ok(());
    }
    match apply_hunks(original, hunks) {
        Ok(rest) if rest.is_empty() => Ok(()),
        Ok(_) => Err(HunkError::DeleteMismatch),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn update(text: &str) -> (String, Option<String>, Vec<Hunk>) {
        match parse(text).unwrap().remove(0) {
            FileChange::Update {
                path,
                move_to,
                hunks,
            } => (path, move_to, hunks),
            other => panic!("not an update: {other:?}"),
        }
    }

    #[test]
    fn git_diff_parses_and_applies() {
        let diff = "diff --git a/src/x.txt b/src/x.txt\nindex 1..2 100644\n\
                    --- a/src/x.txt\n+++ b/src/x.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n";
        let (path, move_to, hunks) = update(diff);
        assert_eq!(path, "src/x.txt");
        assert_eq!(move_to, None);
        assert_eq!(apply_hunks(b"a\nb\nc\n", &hunks).unwrap(), b"a\nB\nc\n");
    }

    #[test]
    fn prefixes_are_kept_without_git_style_headers() {
        let (path, _, _) = update("--- x.txt\n+++ x.txt\n@@ -1 +1 @@\n-a\n+b\n");
        assert_eq!(path, "x.txt");
        let (path, move_to, _) = update("--- a/x\t2024-01-01\n+++ c/x\n@@ -1 +1 @@\n-a\n+b\n");
        assert_eq!((path.as_str(), move_to.as_deref()), ("a/x", Some("c/x")));
    }

    #[test]
    fn several_files_and_hunks() {
        let diff = "--- a/one\n+++ b/one\n@@ -1,2 +1,2 @@\n-1\n+one\n 2\n@@ -9,2 +9,2 @@\n 9\n-10\n+ten\n\
                    --- /dev/null\n+++ b/two\n@@ -0,0 +1,2 @@\n+x\n+y\n\
                    --- a/three\n+++ /dev/null\n@@ -1 +0,0 @@\n-gone\n";
        let changes = parse(diff).unwrap();
        assert_eq!(changes.len(), 3);
        let FileChange::Update { hunks, .. } = &changes[0] else {
            panic!()
        };
        assert_eq!(hunks.len(), 2);
        let orig: Vec<u8> = (1..=12)
            .map(|n| format!("{n}\n"))
            .collect::<String>()
            .into();
        let new = String::from_utf8(apply_hunks(&orig, hunks).unwrap()).unwrap();
        assert!(
            new.starts_with("one\n2\n") && new.contains("9\nten\n11\n"),
            "{new}"
        );
        assert_eq!(
            changes[1],
            FileChange::Add {
                path: "two".into(),
                content: b"x\ny\n".to_vec()
            }
        );
        let FileChange::Delete { path, hunks } = &changes[2] else {
            panic!()
        };
        assert_eq!(path, "three");
        check_delete(b"gone\n", hunks).unwrap();
        assert_eq!(
            check_delete(b"gone\nmore\n", hunks),
            Err(HunkError::DeleteMismatch)
        );
    }

    #[test]
    fn hunk_found_away_from_its_stated_line_but_never_before_the_previous() {
        let (_, _, hunks) = update("--- a/f\n+++ b/f\n@@ -40,2 +40,2 @@\n x\n-y\n+Y\n");
        assert_eq!(apply_hunks(b"x\ny\nz\n", &hunks).unwrap(), b"x\nY\nz\n");
        // The second hunk's context exists only before the first hunk: refused.
        let (_, _, hunks) = update("--- a/f\n+++ b/f\n@@ -3 +3 @@\n-c\n+C\n@@ -1 +1 @@\n-a\n+A\n");
        let err = apply_hunks(b"a\nb\nc\n", &hunks).unwrap_err();
        assert!(matches!(err, HunkError::NoMatch { hunk: 2, .. }), "{err}");
    }

    #[test]
    fn nearest_match_to_the_stated_line_wins() {
        let (_, _, hunks) = update("--- a/f\n+++ b/f\n@@ -4 +4 @@\n-x\n+X\n");
        assert_eq!(
            apply_hunks(b"x\na\nb\nx\nc\n", &hunks).unwrap(),
            b"x\na\nb\nX\nc\n"
        );
    }

    #[test]
    fn mismatch_names_the_hunk_and_the_expected_line() {
        let (_, _, hunks) = update("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-nothere\n+x\n");
        let err = apply_hunks(b"a\n", &hunks).unwrap_err();
        assert!(err.to_string().contains("hunk 1"));
        assert!(err.to_string().contains("`nothere`"));
    }

    #[test]
    fn wrong_counts_and_trimmed_blank_context_are_forgiven() {
        // Header says 2 old lines but the hunk has 3; blank context line lost its space.
        let (_, _, hunks) = update("--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n\n-b\n+B\n");
        assert_eq!(apply_hunks(b"a\n\nb\n", &hunks).unwrap(), b"a\n\nB\n");
    }

    #[test]
    fn no_newline_markers() {
        let (_, _, hunks) = update(
            "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n\\ No newline at end of file\n",
        );
        assert_eq!(apply_hunks(b"a", &hunks).unwrap(), b"b");
        let (_, _, hunks) =
            update("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n");
        assert_eq!(apply_hunks(b"a", &hunks).unwrap(), b"b\n");
        // A hunk in the middle keeps the file's missing final newline.
        let (_, _, hunks) = update("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+A\n");
        assert_eq!(apply_hunks(b"a\nz", &hunks).unwrap(), b"A\nz");
    }

    #[test]
    fn insertion_after_a_line_and_into_an_empty_file() {
        let (_, _, hunks) = update("--- a/f\n+++ b/f\n@@ -1,0 +2 @@\n+new\n");
        assert_eq!(apply_hunks(b"a\nb\n", &hunks).unwrap(), b"a\nnew\nb\n");
        let (_, _, hunks) = update("--- a/f\n+++ b/f\n@@ -0,0 +1 @@\n+only\n");
        assert_eq!(apply_hunks(b"", &hunks).unwrap(), b"only\n");
    }

    #[test]
    fn begin_patch_format() {
        let text = "*** Begin Patch\n*** Add File: new.txt\n+hello\n+world\n\
                    *** Update File: src/app.py\n*** Move to: src/main.py\n@@ def main():\n-    return 1\n+    return 0\n\
                    *** Delete File: old.txt\n*** End Patch\n";
        let changes = parse(text).unwrap();
        assert_eq!(
            changes[0],
            FileChange::Add {
                path: "new.txt".into(),
                content: b"hello\nworld\n".to_vec()
            }
        );
        let FileChange::Update {
            path,
            move_to,
            hunks,
        } = &changes[1]
        else {
            panic!()
        };
        assert_eq!(path, "src/app.py");
        assert_eq!(move_to.as_deref(), Some("src/main.py"));
        let src = b"def other():\n    return 1\ndef main():\n    return 1\n";
        assert_eq!(
            apply_hunks(src, hunks).unwrap(),
            b"def other():\n    return 1\ndef main():\n    return 0\n"
        );
        assert_eq!(
            changes[2],
            FileChange::Delete {
                path: "old.txt".into(),
                hunks: vec![]
            }
        );
    }

    #[test]
    fn begin_patch_end_of_file_anchor() {
        let text =
            "*** Begin Patch\n*** Update File: f\n@@\n x\n+end\n*** End of File\n*** End Patch";
        let (_, _, hunks) = update(text);
        assert!(hunks[0].at_eof);
        assert_eq!(
            apply_hunks(b"x\ny\nx\n", &hunks).unwrap(),
            b"x\ny\nx\nend\n"
        );
        assert!(apply_hunks(b"x\ny\n", &hunks).is_err());
    }

    #[test]
    fn malformed_patches_are_refused_with_a_line() {
        assert_eq!(parse("  \n"), Err(PatchError::Empty));
        assert_eq!(parse("just prose\n"), Err(PatchError::NoFiles));
        assert!(matches!(
            parse("@@ -1 +1 @@\n-a\n+b\n"),
            Err(PatchError::Syntax { line: 1, .. })
        ));
        assert!(matches!(
            parse("--- a/f\n+++ b/f\n@@ nonsense @@\n"),
            Err(PatchError::Syntax { line: 3, .. })
        ));
        assert!(parse("--- a/f\n+++ b/f\n").is_err());
        assert!(parse("*** Begin Patch\n*** Frobnicate: x\n*** End Patch\n").is_err());
        assert!(parse("*** Begin Patch\n*** Add File: x\nno plus\n*** End Patch\n").is_err());
        assert!(
            parse("--- /dev/null\n+++ b/n\n@@ -1 +1 @@\n-a\n+b\n").is_err(),
            "a new file whose hunk removes lines"
        );
    }
}
