//! The workspace diff of a kept run: each added, modified and deleted path, text files as a
//! line diff of the kept original (`base/`) and the final version (`files/`), other files named
//! with their sizes, links with their targets. Bounded per file and in all.

use serde_json::Value;

use super::diff::{self, Line};
use super::html::{self, Html};
use super::kept::{Entry, Kept};

/// The most bytes of one file read for its diff.
pub const FILE_BYTES: usize = 256 * 1024;
/// The most diff lines shown per file.
pub const FILE_LINES: usize = 400;
/// The most paths shown (the rest are counted).
pub const PATHS: usize = 300;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Change {
    Added,
    Modified,
    Deleted,
}

impl Change {
    fn word(self) -> &'static str {
        match self {
            Change::Added => "added",
            Change::Modified => "modified",
            Change::Deleted => "deleted",
        }
    }
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// Text when it is UTF-8 without NUL bytes (a file cut at the bound may end inside a
/// character: that tail is dropped).
fn as_text(bytes: &[u8], whole: bool) -> Option<&str> {
    if bytes.contains(&0) {
        return None;
    }
    match std::str::from_utf8(bytes) {
        Ok(t) => Some(t),
        Err(e) if !whole && e.error_len().is_none() => {
            std::str::from_utf8(&bytes[..e.valid_up_to()]).ok()
        }
        Err(_) => None,
    }
}

/// A kept file's text and whether it was cut at the bound; `None` when it is no text file.
fn text_of(entry: &Option<Entry>) -> Option<(&str, bool)> {
    match entry {
        Some(Entry::File { size, head }) => {
            let whole = *size as usize == head.len();
            as_text(head, whole).map(|t| (t, !whole))
        }
        _ => None,
    }
}

fn describe(entry: &Option<Entry>) -> String {
    match entry {
        None => "not kept".into(),
        Some(Entry::File { size, .. }) => format!("file, {}", html::size(*size)),
        Some(Entry::Link(t)) => format!("symbolic link to {}", html::lossless(t)),
        Some(Entry::Dir) => "directory".into(),
        Some(Entry::Special) => "special file (not read)".into(),
    }
}

/// The section of a run's changes; `kept` gives the files (without it, only the names).
pub fn section(changes: &Value, kept: Option<&Kept>) -> Html {
    let mut h = Html::new();
    h.raw("<h2 id=\"changes\">Workspace changes</h2>");
    let lists = [
        (Change::Added, strings(&changes["added"])),
        (Change::Modified, strings(&changes["modified"])),
        (Change::Deleted, strings(&changes["deleted"])),
    ];
    let total: usize = lists.iter().map(|(_, l)| l.len()).sum();
    h.raw("<p class=\"summary\">");
    for (change, list) in &lists {
        h.raw("<span>")
            .text(&format!("{} {}", list.len(), change.word()))
            .raw("</span>");
    }
    h.raw("</p>");
    if total == 0 {
        h.raw("<p class=\"note\">No file changed.</p>");
    }
    let mut shown = 0;
    for (change, list) in &lists {
        for path in list {
            if shown == PATHS {
                break;
            }
            shown += 1;
            h.append(&file(*change, path, kept));
        }
    }
    if total > shown {
        h.raw("<p class=\"cut\">")
            .text(&format!("… {} more changed paths not shown", total - shown))
            .raw("</p>");
    }
    let incomplete = strings(&changes["incomplete"]);
    if !incomplete.is_empty() {
        h.raw("<p class=\"note\">Directories too deep to list: ")
            .text(&incomplete.join(", "))
            .raw("</p>");
    }
    if let Some(not_kept) = changes["not_kept"].as_array().filter(|l| !l.is_empty()) {
        h.raw("<h3>Not kept</h3><ul>");
        for item in not_kept.iter().take(PATHS) {
            h.raw("<li><span class=\"path\">")
                .text(item[0].as_str().unwrap_or(""))
                .raw("</span>: ")
                .text(item[1].as_str().unwrap_or(""))
                .raw("</li>");
        }
        h.raw("</ul>");
    }
    h
}

fn file(change: Change, path: &str, kept: Option<&Kept>) -> Html {
    let shown_path = html::lossless(&crate::workspace::name::decode(path));
    let old = match change {
        Change::Added => None,
        _ => kept.and_then(|k| k.entry(&format!("base/{path}"), FILE_BYTES)),
    };
    let new = match change {
        Change::Deleted => None,
        _ => kept.and_then(|k| k.entry(&format!("files/{path}"), FILE_BYTES)),
    };
    let mut h = Html::new();
    h.raw("<div class=\"file ")
        .text(change.word())
        .raw("\" data-path=\"")
        .text(&shown_path)
        .raw("\"><h3><span class=\"path\">")
        .text(&shown_path)
        .raw("</span> ")
        .text(&format!("({})", change.word()))
        .raw("</h3>");
    if kept.is_none() {
        return close(h);
    }
    let (old_text, new_text) = (text_of(&old), text_of(&new));
    let diffable = match change {
        Change::Added => new_text.map(|(n, cut)| ("", n, cut)),
        Change::Deleted => old_text.map(|(o, cut)| (o, "", cut)),
        Change::Modified => old_text
            .zip(new_text)
            .map(|((o, ocut), (n, ncut))| (o, n, ocut || ncut)),
    };
    match diffable {
        Some((o, n, cut)) => h.append(&diff_block(o, n, cut)),
        _ => {
            let what = match change {
                Change::Added => describe(&new),
                Change::Deleted => format!("was: {}", describe(&old)),
                Change::Modified => {
                    format!("was: {}; now: {}", describe(&old), describe(&new))
                }
            };
            let binary = [&old, &new]
                .iter()
                .any(|e| matches!(e, Some(Entry::File { .. })) && text_of(e).is_none());
            let label = if binary { "binary or not UTF-8: " } else { "" };
            h.raw("<p class=\"note\">")
                .text(label)
                .text(&what)
                .raw("</p>")
        }
    };
    close(h)
}

fn close(mut h: Html) -> Html {
    h.raw("</div>");
    h
}

fn diff_block(old: &str, new: &str, cut_read: bool) -> Html {
    let (lines, cut_lines) = diff::lines(old, new, FILE_LINES);
    let mut h = Html::new();
    h.raw("<pre class=\"diff\">");
    for line in &lines {
        match line {
            Line::Same(l) => h.raw("<span> ").text(l).raw("</span>\n"),
            Line::Removed(l) => h.raw("<span class=\"del\">-").text(l).raw("</span>\n"),
            Line::Added(l) => h.raw("<span class=\"add\">+").text(l).raw("</span>\n"),
            Line::Skipped(n) => h
                .raw("<span class=\"skip\">")
                .text(&format!("@@ {n} unchanged lines @@"))
                .raw("</span>\n"),
        };
    }
    h.raw("</pre>");
    if cut_lines {
        h.raw("<p class=\"cut\">")
            .text(&format!("… diff cut at {FILE_LINES} lines"))
            .raw("</p>");
    }
    if cut_read {
        h.raw("<p class=\"cut\">")
            .text(&format!(
                "… only the first {} of the file compared",
                html::size(FILE_BYTES as u64)
            ))
            .raw("</p>");
    }
    h
}
