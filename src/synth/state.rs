//! What an environment's initial workspace offers a chain's arguments: its files and folders,
//! and the words that pick out one file. Read from the template's `files/` on the host, so it
//! is read as untrusted input: links and special files are skipped, depth, count and the
//! bytes read are bounded.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

/// The deepest folder looked into.
const MAX_DEPTH: usize = 16;
/// The most files listed.
const MAX_FILES: usize = 10_000;
/// Files larger than this give no words.
const MAX_TEXT_BYTES: u64 = 256 * 1024;

/// One regular file of the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    /// Relative, `/`-separated.
    pub path: String,
    pub size: u64,
}

/// The initial workspace, as far as synthesis uses it.
#[derive(Debug, Clone, Default)]
pub struct WorkspaceState {
    /// Sorted by path.
    pub files: Vec<FileInfo>,
    /// Every folder below the top (relative), sorted.
    pub dirs: Vec<String>,
    /// Words found in exactly one file, a few times at most, with that file: what a search
    /// can pick a file out by. Sorted.
    pub words: Vec<(String, String)>,
}

impl WorkspaceState {
    /// Scan `root` (an environment's `files/`; a missing one is an empty workspace).
    pub fn scan(root: &Path) -> std::io::Result<WorkspaceState> {
        let mut state = WorkspaceState::default();
        if root.exists() {
            walk(root, "", 0, &mut state)?;
        }
        state.files.sort_by(|a, b| a.path.cmp(&b.path));
        state.dirs.sort();
        let mut seen: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for (index, file) in state.files.iter().enumerate() {
            if file.size > MAX_TEXT_BYTES {
                continue;
            }
            let Some(text) = read_text(&root.join(&file.path)) else {
                continue;
            };
            for word in text
                .split(|c: char| !c.is_ascii_alphanumeric())
                .filter(|w| (6..=20).contains(&w.len()))
                .filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic()))
            {
                let entry = seen.entry(word.to_string()).or_insert((index, 0));
                entry.1 += if entry.0 == index { 1 } else { 1000 };
            }
        }
        state.words = seen
            .into_iter()
            .filter(|(_, (_, n))| *n <= 3)
            .map(|(w, (i, _))| (w, state.files[i].path.clone()))
            .collect();
        Ok(state)
    }

    /// The files matching one of `patterns` (see [`pattern_matches`]).
    pub fn matching(&self, patterns: &[String]) -> Vec<&FileInfo> {
        self.files
            .iter()
            .filter(|f| patterns.iter().any(|p| pattern_matches(p, &f.path)))
            .collect()
    }

    /// The fewest entries of the workspace that hold none of `touched` (paths a chain
    /// changed, made or removed): each untouched entry whose folder holds a touched one, as a
    /// glob of that path (glob characters escaped), for an `unchanged` rule.
    pub fn untouched(&self, touched: &[String]) -> Vec<String> {
        let hit = |p: &str| {
            touched
                .iter()
                .any(|t| t == p || t.strip_prefix(p).is_some_and(|r| r.starts_with('/')))
        };
        let mut out = Vec::new();
        let mut folders = vec![String::new()];
        while let Some(folder) = folders.pop() {
            let prefix = if folder.is_empty() {
                String::new()
            } else {
                format!("{folder}/")
            };
            let children = self
                .files
                .iter()
                .map(|f| (f.path.as_str(), false))
                .chain(self.dirs.iter().map(|d| (d.as_str(), true)))
                .filter(|(p, _)| {
                    p.strip_prefix(&prefix)
                        .is_some_and(|r| !r.is_empty() && !r.contains('/'))
                });
            for (path, is_dir) in children {
                if !hit(path) {
                    out.push(
                        path.chars()
                            .flat_map(|c| {
                                let escape = "*?[]{}\\".contains(c);
                                escape.then_some('\\').into_iter().chain(std::iter::once(c))
                            })
                            .collect(),
                    );
                } else if is_dir {
                    folders.push(path.to_string());
                }
            }
        }
        out.sort();
        out
    }

    /// Whether `path` is a file or folder of the workspace.
    pub fn exists(&self, path: &str) -> bool {
        self.files.iter().any(|f| f.path == path) || self.dirs.iter().any(|d| d == path)
    }
}

fn read_text(path: &Path) -> Option<String> {
    let file = std::fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_TEXT_BYTES).read_to_end(&mut bytes).ok()?;
    String::from_utf8(bytes).ok()
}

fn walk(dir: &Path, prefix: &str, depth: usize, state: &mut WorkspaceState) -> std::io::Result<()> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let path = format!("{prefix}{name}");
        let meta = std::fs::symlink_metadata(entry.path())?;
        if meta.is_dir() {
            state.dirs.push(path.clone());
            walk(&entry.path(), &format!("{path}/"), depth + 1, state)?;
        } else if meta.is_file() && state.files.len() < MAX_FILES {
            state.files.push(FileInfo {
                path,
                size: meta.len(),
            });
        }
    }
    Ok(())
}

/// Whether `path` matches `pattern`: a pattern without `/` is matched against the file's
/// name, one with `/` against the whole path; `*` matches within a name, `**/` any folders.
pub fn pattern_matches(pattern: &str, path: &str) -> bool {
    if !pattern.contains('/') {
        let name = path.rsplit('/').next().unwrap_or(path);
        return name_matches(pattern, name);
    }
    let pat: Vec<&str> = pattern.split('/').collect();
    let parts: Vec<&str> = path.split('/').collect();
    segments_match(&pat, &parts)
}

fn segments_match(pat: &[&str], parts: &[&str]) -> bool {
    match (pat.first(), parts.first()) {
        (None, None) => true,
        (Some(&"**"), _) => {
            segments_match(&pat[1..], parts)
                || (!parts.is_empty() && segments_match(pat, &parts[1..]))
        }
        (Some(p), Some(s)) => name_matches(p, s) && segments_match(&pat[1..], &parts[1..]),
        _ => false,
    }
}

fn name_matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            let Some(rest) = name.strip_prefix(head) else {
                return false;
            };
            (0..=rest.len())
                .filter(|i| rest.is_char_boundary(*i))
                .any(|i| name_matches(tail, &rest[i..]))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn patterns_match_names_and_paths() {
        assert!(pattern_matches("*.md", "notes/a.md"));
        assert!(!pattern_matches("*.md", "notes/a.mdx"));
        assert!(pattern_matches("mail/inbox/*", "mail/inbox/1.txt"));
        assert!(!pattern_matches("mail/inbox/*", "mail/inbox/x/1.txt"));
        assert!(pattern_matches("**/*.csv", "a.csv"));
        assert!(pattern_matches("**/*.csv", "a/b/c.csv"));
        assert!(pattern_matches("logs/**/*.log", "logs/x/y.log"));
        assert!(!pattern_matches("logs/**/*.log", "other/y.log"));
    }

    #[test]
    fn untouched_entries_are_the_fewest_that_hold_no_change() {
        let state = WorkspaceState {
            files: ["a/x.txt", "a/y.txt", "b/z.txt", "c[1].txt"]
                .iter()
                .map(|p| FileInfo {
                    path: p.to_string(),
                    size: 1,
                })
                .collect(),
            dirs: vec!["a".into(), "b".into()],
            words: vec![],
        };
        assert_eq!(
            state.untouched(&["a/x.txt".into(), "archive/x.txt".into()]),
            vec!["a/y.txt", "b", "c\\[1\\].txt"]
        );
    }

    #[test]
    fn a_scan_skips_links_and_finds_words_of_one_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("notes")).unwrap();
        std::fs::write(root.join("notes/a.md"), "kestrel common words\n").unwrap();
        std::fs::write(root.join("notes/b.md"), "common words plover\n").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("notes/link")).unwrap();
        let state = WorkspaceState::scan(root).unwrap();
        let paths: Vec<&str> = state.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, vec!["notes/a.md", "notes/b.md"]);
        assert_eq!(state.dirs, vec!["notes"]);
        let words: Vec<(&str, &str)> = state
            .words
            .iter()
            .map(|(w, f)| (w.as_str(), f.as_str()))
            .collect();
        assert_eq!(
            words,
            vec![("kestrel", "notes/a.md"), ("plover", "notes/b.md")]
        );
    }
}
