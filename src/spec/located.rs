//! TOML and Markdown sources with line numbers: parsing a file into serde types with errors
//! located by line, column and key, and [`FileError`], what can be wrong with a file of any of
//! the environment, task and skill formats (each format's error wraps it beside its own).

use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// What can be wrong with a file of a spec format, whichever: it cannot be read, it is not where
/// or what the layout wants, it is not TOML of the expected shape, or a value is out of bounds.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A file or directory of the layout is missing, misplaced or of the wrong kind.
    #[error("{path} {problem}; expected {expected}")]
    Layout {
        path: PathBuf,
        problem: String,
        expected: String,
    },
    #[error("{file}, line {line}, column {column}{}: {message}", key_part(.key))]
    Syntax {
        file: PathBuf,
        /// The key on the offending line, when there is one.
        key: Option<String>,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{file}, line {line}: `{key}` {problem}; expected {expected}")]
    Invalid {
        file: PathBuf,
        key: String,
        line: usize,
        problem: String,
        expected: String,
    },
}

impl FileError {
    /// The file at `path` could not be read.
    pub(crate) fn read(path: &Path) -> impl FnOnce(io::Error) -> FileError + '_ {
        move |source| FileError::Read {
            path: path.to_path_buf(),
            source,
        }
    }

    /// `file` is not TOML of the expected shape.
    pub(crate) fn syntax(file: &Path, p: SyntaxProblem) -> FileError {
        FileError::Syntax {
            file: file.to_path_buf(),
            key: p.key,
            line: p.line,
            column: p.column,
            message: p.message,
        }
    }
}

/// The text of the file at `path`.
pub(crate) fn read_text(path: &Path) -> Result<String, FileError> {
    std::fs::read_to_string(path).map_err(FileError::read(path))
}

/// A file's text, and its path for error messages.
pub(crate) struct TomlFile<'a> {
    pub path: &'a Path,
    pub text: &'a str,
}

/// Where and why TOML could not be deserialized.
pub(crate) struct SyntaxProblem {
    /// The dotted key (`verifier.kind`) on the offending line, when there is one.
    pub key: Option<String>,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl TomlFile<'_> {
    /// Deserialize the whole file, locating any error.
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, SyntaxProblem> {
        toml::from_str(self.text).map_err(|e| {
            let message = e.message().trim().to_string();
            let (line, column) = e
                .span()
                .map(|span| line_col(self.text, span.start))
                .unwrap_or((0, 0));
            let missing = message
                .strip_prefix("missing field `")
                .and_then(|rest| rest.split_once('`'))
                .map(|(field, _)| field.to_string());
            let (key, message) = match missing {
                // The span of a missing field is its table: name the field, not that line's key.
                Some(field) => {
                    let table = self.table_at(line, true);
                    (
                        Some(qualified(table.as_deref(), &field)),
                        format!("missing key `{field}`, which is required"),
                    )
                }
                None => (self.key_at(line), readable_type_names(&message)),
            };
            SyntaxProblem {
                key,
                line,
                column,
                message,
            }
        })
    }

    /// The 1-based line of a span's start.
    pub fn line(&self, span: &Range<usize>) -> usize {
        line_col(self.text, span.start).0
    }

    /// The dotted key assigned on 1-based line `line`, qualified by its table.
    fn key_at(&self, line: usize) -> Option<String> {
        let index = line.checked_sub(1)?;
        let (lines, in_string) = self.scan(index);
        if in_string {
            return None;
        }
        let text = lines.get(index)?.trim();
        if text.starts_with('[') {
            return header_name(text);
        }
        let key = text.split_once('=')?.0.trim();
        if key.is_empty() || key.starts_with('#') {
            return None;
        }
        Some(qualified(self.table_at(line, false).as_deref(), key))
    }

    /// The table in force at 1-based line `line`: the last header above it (or on it, when
    /// `including` and the line is itself a header).
    fn table_at(&self, line: usize, including: bool) -> Option<String> {
        let index = line.checked_sub(1)?;
        let mut table = None;
        let mut in_string = false;
        for (i, text) in self.text.lines().enumerate() {
            if i > index || (i == index && !including) {
                break;
            }
            let trimmed = text.trim();
            if !in_string && trimmed.starts_with('[') {
                table = header_name(trimmed);
            }
            in_string ^= toggles_multiline_string(text);
        }
        table
    }

    /// The lines, and whether line `index` starts inside a multi-line string.
    fn scan(&self, index: usize) -> (Vec<&str>, bool) {
        let lines: Vec<&str> = self.text.lines().collect();
        let in_string = lines
            .iter()
            .take(index)
            .fold(false, |inside, l| inside ^ toggles_multiline_string(l));
        (lines, in_string)
    }
}

/// Whether a line opens or closes a `"""` or `'''` string (an odd number of delimiters).
fn toggles_multiline_string(line: &str) -> bool {
    (line.matches("\"\"\"").count() + line.matches("'''").count()) % 2 == 1
}

/// `verifier` from `[verifier]`, `turns` from `[[turns]]`, ignoring a trailing comment.
fn header_name(line: &str) -> Option<String> {
    let inner = line.trim_start_matches('[');
    let end = inner.find(']')?;
    let name = inner[..end].trim();
    (!name.is_empty()).then(|| name.to_string())
}

fn qualified(table: Option<&str>, key: &str) -> String {
    match table {
        Some(table) => format!("{table}.{key}"),
        None => key.to_string(),
    }
}

/// `, key `k`` for error messages, or nothing.
pub(crate) fn key_part(key: &Option<String>) -> String {
    key.as_ref()
        .map(|k| format!(", key `{k}`"))
        .unwrap_or_default()
}

/// serde names Rust types (`expected u64`); say what an author writes instead.
fn readable_type_names(message: &str) -> String {
    message
        .replace("expected i64", "expected an integer")
        .replace("expected u64", "expected an integer")
        .replace("expected f64", "expected a number")
        .replace("expected a boolean", "expected `true` or `false`")
        .replace("expected a sequence", "expected an array")
        .replace("expected a map", "expected a table")
}

/// 1-based line and column of a byte offset.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text.as_bytes()[..offset.min(text.len())];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map(|i| i + 1)
        .unwrap_or(0);
    (line, before.len() - line_start + 1)
}

/// Names of environments and tasks (their directory names): 1 to 128 ASCII letters, digits,
/// `-`, `_` or `.`, starting with a letter or digit, so that they are safe as one path component
/// and in `ENV/TASK_ID`.
pub(crate) fn is_plain_name(name: &str) -> bool {
    name.len() <= 128
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// What [`is_plain_name`] accepts, for error messages.
pub(crate) const PLAIN_NAME: &str =
    "1 to 128 ASCII letters, digits, `-`, `_` or `.`, starting with a letter or digit";

/// The last component of a directory as UTF-8, if it has one.
pub(crate) fn dir_name(dir: &Path) -> Option<String> {
    dir.file_name().and_then(|n| n.to_str()).map(str::to_string)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Doc {
        name: String,
        #[serde(default)]
        inner: Option<Inner>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        kind: String,
        #[serde(default)]
        count: u64,
    }

    fn problem(text: &str) -> SyntaxProblem {
        TomlFile {
            path: Path::new("t.toml"),
            text,
        }
        .parse::<Doc>()
        .unwrap_err()
    }

    #[test]
    fn unknown_key_in_a_table_is_qualified_by_the_table() {
        let p = problem("name = \"x\"\n\n[inner]\nkind = \"a\"\ncuont = 3\n");
        assert_eq!(p.key.as_deref(), Some("inner.cuont"));
        assert_eq!(p.line, 5);
        assert!(
            p.message.contains("expected `kind` or `count`"),
            "{}",
            p.message
        );
    }

    #[test]
    fn missing_key_names_the_key_not_the_line_it_points_at() {
        let p = problem("name = \"x\"\n[inner]\ncount = 1\n");
        assert_eq!(p.key.as_deref(), Some("inner.kind"));
        assert!(p.message.contains("missing key `kind`"), "{}", p.message);
        let p = problem("# nothing\n");
        assert_eq!(p.key.as_deref(), Some("name"));
    }

    #[test]
    fn headers_inside_multiline_strings_are_not_tables() {
        let p = problem("name = \"\"\"\n[inner]\n\"\"\"\nnmae = 1\n");
        assert_eq!(p.key.as_deref(), Some("nmae"));
        assert_eq!(p.line, 4);
    }

    #[test]
    fn wrong_types_are_named_as_authors_write_them() {
        let p = problem("name = \"x\"\n[inner]\nkind = \"a\"\ncount = \"many\"\n");
        assert!(p.message.contains("an integer"), "{}", p.message);
        assert_eq!(p.key.as_deref(), Some("inner.count"));
    }

    #[test]
    fn plain_names() {
        assert!(is_plain_name("extract-todos"));
        assert!(is_plain_name("task_001.v2"));
        for bad in ["", ".hidden", "-x", "a/b", "..", "a b", "é"] {
            assert!(!is_plain_name(bad), "{bad}");
        }
    }
}

/// Checks of values read from one TOML file.
pub(crate) struct Check<'a> {
    pub toml: &'a TomlFile<'a>,
}

impl Check<'_> {
    /// `key` (at `span`) has `problem`; `expected` says what would do.
    pub fn invalid(
        &self,
        key: &str,
        span: std::ops::Range<usize>,
        problem: String,
        expected: &str,
    ) -> FileError {
        FileError::Invalid {
            file: self.toml.path.to_path_buf(),
            key: key.to_string(),
            line: self.toml.line(&span),
            problem,
            expected: expected.to_string(),
        }
    }

    pub fn non_empty(&self, key: &str, value: &toml::Spanned<String>) -> Result<String, FileError> {
        if value.get_ref().trim().is_empty() {
            return Err(self.invalid(key, value.span(), "is empty".into(), "a non-empty string"));
        }
        Ok(value.get_ref().clone())
    }
}

#[cfg(test)]
pub(crate) mod fixture {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::path::{Path, PathBuf};

    /// The crate's own directory (where `workspaces/` and `skills/` are).
    pub fn repo() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }

    /// A scratch copy of `workspaces/example` and `skills/`, as `tmp/workspaces/example` and
    /// `tmp/skills` (modes kept, so executables stay executable).
    pub struct Example {
        pub tmp: tempfile::TempDir,
    }

    impl Example {
        pub fn new() -> Example {
            let tmp = tempfile::tempdir().unwrap();
            copy_tree(
                &repo().join("workspaces/example"),
                &tmp.path().join("workspaces/example"),
            );
            copy_tree(&repo().join("skills"), &tmp.path().join("skills"));
            Example { tmp }
        }

        pub fn workspaces(&self) -> PathBuf {
            self.tmp.path().join("workspaces")
        }

        pub fn env_dir(&self) -> PathBuf {
            self.workspaces().join("example")
        }

        pub fn task_dir(&self, id: &str) -> PathBuf {
            self.env_dir().join("tasks").join(id)
        }

        pub fn skills(&self) -> PathBuf {
            self.tmp.path().join("skills")
        }

        /// Replace `from` by `to` in a file, which must contain it.
        pub fn edit(&self, path: &Path, from: &str, to: &str) {
            let text = std::fs::read_to_string(path).unwrap();
            assert!(text.contains(from), "{} has no `{from}`", path.display());
            std::fs::write(path, text.replacen(from, to, 1)).unwrap();
        }
    }

    fn copy_tree(from: &Path, to: &Path) {
        for entry in walkdir::WalkDir::new(from) {
            let entry = entry.unwrap();
            let target = to.join(entry.path().strip_prefix(from).unwrap());
            if entry.file_type().is_dir() {
                std::fs::create_dir_all(&target).unwrap();
            } else {
                std::fs::copy(entry.path(), &target).unwrap();
            }
        }
    }

    /// The 1-based line of the first line of `path` that contains `needle`.
    pub fn line_of(path: &Path, needle: &str) -> usize {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{} has no `{needle}`", path.display()))
            + 1
    }
}
