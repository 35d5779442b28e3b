//! `tasks/ID/expected.json`: what the final workspace must hold, parsed and validated.
//!
//! ```json
//! {"version": 1,
//!  "files": {"out/report.md": {"sha256": "…"}, "run.sh": {"sha256": "…", "mode": "0755"},
//!            "latest": {"kind": "symlink", "sha256": "…"}, "logs": {"kind": "dir"}},
//!  "absent": ["tmp/scratch.txt"],
//!  "unchanged": ["src/**"],
//!  "ignore": ["**/__pycache__", "*.swp"],
//!  "extra": "allow",
//!  "all_or_nothing": false}
//! ```
//!
//! Promises: unknown keys, wrong types, paths that are not plain relative paths, bad hashes,
//! modes and globs, and rules that contradict each other are refused, naming the key
//! (`files."run.sh".mode`, `ignore[1]`). A file rule's `kind` defaults to `file`; `sha256` is
//! required for files and symlinks (of the link's target bytes) and refused for directories;
//! `mode` is checked only where given. A glob matches a path when it matches the path or one
//! of its ancestors (`node_modules` covers everything below it); `*` stays within one
//! component, `**` crosses them.

use std::collections::BTreeMap;
use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};
use serde::{Serialize, Serializer};
use serde_json::Value;

use super::VerifyError;
use super::manifest::{Entry, EntryKind, octal_mode};

/// The version written in, and required of, `expected.json`.
pub const VERSION: u32 = 1;

const TOP_KEYS: &str = "version, files, absent, unchanged, ignore, extra, all_or_nothing";
const RULE_KEYS: &str = "sha256, kind, mode";

/// What the final workspace must hold. Serializes as `expected.json` (with `"version"`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Expected {
    /// Path → what must be there.
    pub files: BTreeMap<String, FileRule>,
    /// Paths that must not exist.
    pub absent: Vec<String>,
    /// Globs whose entries must be as in the initial state.
    pub unchanged: Vec<Glob>,
    /// Globs left out of every check.
    pub ignore: Vec<Glob>,
    /// How paths added and named by no rule are judged.
    pub extra: Extra,
    /// Reward 1 when every check passes, else 0 (instead of the fraction passed).
    pub all_or_nothing: bool,
}

/// How a path present at the end but not at the start, and named by no rule, is judged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Extra {
    /// Not checked.
    #[default]
    Allow,
    /// Each one is a failed check.
    Deny,
}

/// What must be at one path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileRule {
    #[serde(skip_serializing_if = "is_file")]
    pub kind: EntryKind,
    /// Lowercase hex; `None` for directories only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Permission bits, checked when given.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "serialize_mode"
    )]
    pub mode: Option<u32>,
}

fn is_file(kind: &EntryKind) -> bool {
    *kind == EntryKind::File
}

fn serialize_mode<S: Serializer>(mode: &Option<u32>, s: S) -> Result<S::Ok, S::Error> {
    match mode {
        Some(m) => s.serialize_str(&octal_mode::format(*m)),
        None => s.serialize_none(),
    }
}

impl FileRule {
    /// A rule for a regular file with this content hash, any mode.
    pub fn file(sha256: impl Into<String>) -> FileRule {
        FileRule {
            kind: EntryKind::File,
            sha256: Some(sha256.into()),
            mode: None,
        }
    }

    /// The rule an entry satisfies exactly (kind and content; mode only if `with_mode`).
    pub fn of_entry(entry: &Entry, with_mode: bool) -> FileRule {
        FileRule {
            kind: entry.kind,
            sha256: entry.sha256.clone(),
            mode: with_mode.then_some(entry.mode),
        }
    }

    /// Whether `entry` satisfies the rule.
    pub fn matches(&self, entry: &Entry) -> bool {
        entry.kind == self.kind
            && (self.kind == EntryKind::Dir || entry.sha256 == self.sha256)
            && self.mode.is_none_or(|m| m == entry.mode)
    }

    /// `file mode 0755 sha256 …` (only what the rule checks).
    pub fn describe(&self) -> String {
        let mut out = self.kind.name().to_string();
        if let Some(m) = self.mode {
            out.push_str(" mode ");
            out.push_str(&octal_mode::format(m));
        }
        if let Some(h) = &self.sha256 {
            out.push_str(" sha256 ");
            out.push_str(h);
        }
        out
    }
}

/// A glob over workspace paths; it matches a path when it matches the path itself or one of
/// its ancestors.
#[derive(Debug, Clone)]
pub struct Glob {
    text: String,
    matcher: GlobMatcher,
}

impl Glob {
    /// Compile `text` (`*` and `?` within one component, `**` across, `{a,b}`, `[ab]`).
    pub fn new(text: &str) -> Result<Glob, VerifyError> {
        let glob = GlobBuilder::new(text)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|source| VerifyError::Glob {
                glob: text.to_string(),
                source,
            })?;
        Ok(Glob {
            text: text.to_string(),
            matcher: glob.compile_matcher(),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the glob matches `path` or one of its ancestors.
    pub fn matches(&self, path: &str) -> bool {
        if self.matcher.is_match(path) {
            return true;
        }
        path.match_indices('/')
            .any(|(i, _)| self.matcher.is_match(&path[..i]))
    }
}

impl PartialEq for Glob {
    fn eq(&self, other: &Glob) -> bool {
        self.text == other.text
    }
}

impl Serialize for Glob {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

/// The JSON form of [`Expected`], keys in a readable order.
#[derive(Serialize)]
struct ExpectedOut<'a> {
    version: u32,
    files: &'a BTreeMap<String, FileRule>,
    absent: &'a [String],
    unchanged: &'a [Glob],
    ignore: &'a [Glob],
    extra: Extra,
    all_or_nothing: bool,
}

impl Serialize for Expected {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        ExpectedOut {
            version: VERSION,
            files: &self.files,
            absent: &self.absent,
            unchanged: &self.unchanged,
            ignore: &self.ignore,
            extra: self.extra,
            all_or_nothing: self.all_or_nothing,
        }
        .serialize(s)
    }
}

impl Expected {
    /// Read and validate `expected.json` at `path`.
    pub fn load(path: &Path) -> Result<Expected, VerifyError> {
        let text = std::fs::read_to_string(path).map_err(|source| VerifyError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        parse(&text, &path.display().to_string())
    }

    /// Validate the text of an `expected.json` (errors name it `expected.json`).
    pub fn from_json(text: &str) -> Result<Expected, VerifyError> {
        parse(text, "expected.json")
    }

    /// The JSON form, pretty-printed, that [`Expected::from_json`] reads back.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Whether any `ignore` glob matches `path`.
    pub fn is_ignored(&self, path: &str) -> bool {
        self.ignore.iter().any(|g| g.matches(path))
    }

    /// These globs added to `ignore`, and the `files` and `absent` rules they cover dropped
    /// (for `envcraft record`, which keeps a task's ignore list).
    pub fn ignoring(mut self, globs: Vec<Glob>) -> Expected {
        self.ignore.extend(globs);
        let ignore = self.ignore.clone();
        let ignored = |p: &str| ignore.iter().any(|g| g.matches(p));
        self.files.retain(|p, _| !ignored(p));
        self.absent.retain(|p| !ignored(p));
        self
    }
}

/// Builds `VerifyError::Expected` for one key of one file.
struct Parser<'a> {
    file: &'a str,
}

impl Parser<'_> {
    fn bad(&self, key: impl Into<String>, reason: impl Into<String>) -> VerifyError {
        VerifyError::Expected {
            file: self.file.to_string(),
            key: key.into(),
            reason: reason.into(),
        }
    }

    fn string_list(&self, key: &str, value: Value) -> Result<Vec<(String, String)>, VerifyError> {
        let Value::Array(items) = value else {
            return Err(self.bad(
                key,
                format!("must be a list of strings, not {}", kind_of(&value)),
            ));
        };
        items
            .into_iter()
            .enumerate()
            .map(|(i, item)| {
                let k = format!("{key}[{i}]");
                match item {
                    Value::String(s) => Ok((k, s)),
                    other => Err(self.bad(k, format!("must be a string, not {}", kind_of(&other)))),
                }
            })
            .collect()
    }

    fn globs(&self, key: &str, value: Value) -> Result<Vec<Glob>, VerifyError> {
        self.string_list(key, value)?
            .into_iter()
            .map(|(k, text)| {
                if text.is_empty() || text.starts_with('/') {
                    return Err(self.bad(k, "must be a non-empty glob relative to the workspace"));
                }
                Glob::new(&text).map_err(|e| self.bad(k, crate::error::chain(&e)))
            })
            .collect()
    }

    fn rule(&self, key: &str, value: Value) -> Result<FileRule, VerifyError> {
        let Value::Object(map) = value else {
            return Err(self.bad(
                key,
                format!(
                    "must be an object with {RULE_KEYS}, not {}",
                    kind_of(&value)
                ),
            ));
        };
        let mut kind = EntryKind::File;
        let mut sha256 = None;
        let mut mode = None;
        for (name, v) in map {
            let k = format!("{key}.{name}");
            match name.as_str() {
                "sha256" => {
                    let Value::String(h) = v else {
                        return Err(self.bad(k, "must be a string of 64 hex digits"));
                    };
                    if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
                        return Err(self.bad(k, format!("{h:?} is not 64 hex digits")));
                    }
                    sha256 = Some(h.to_ascii_lowercase());
                }
                "kind" => {
                    kind = match v.as_str() {
                        Some("file") => EntryKind::File,
                        Some("symlink") => EntryKind::Symlink,
                        Some("dir") => EntryKind::Dir,
                        _ => {
                            return Err(self.bad(
                                k,
                                format!("{v} is not one of \"file\", \"symlink\", \"dir\""),
                            ));
                        }
                    }
                }
                "mode" => {
                    let parsed = v.as_str().and_then(octal_mode::parse);
                    let Some(m) = parsed else {
                        return Err(self.bad(
                            k,
                            format!("{v} is not permission bits as an octal string like \"0644\""),
                        ));
                    };
                    mode = Some(m);
                }
                _ => {
                    return Err(self.bad(k, format!("unknown key; expected one of {RULE_KEYS}")));
                }
            }
        }
        match (kind, &sha256) {
            (EntryKind::Dir, Some(_)) => {
                Err(self.bad(format!("{key}.sha256"), "a directory has no content hash"))
            }
            (EntryKind::File | EntryKind::Symlink, None) => Err(self.bad(
                format!("{key}.sha256"),
                format!(
                    "missing: a {} rule needs the sha256 of its content",
                    kind.name()
                ),
            )),
            _ => Ok(FileRule { kind, sha256, mode }),
        }
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Why `path` is not a plain relative path (`a/b.txt`), if it is not.
fn path_problem(path: &str) -> Option<&'static str> {
    if path.is_empty() {
        Some("is empty")
    } else if path.starts_with('/') {
        Some("must be relative to the workspace")
    } else if path.contains('\0') {
        Some("contains a NUL byte")
    } else if path
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        Some("must not have empty, `.` or `..` components")
    } else {
        None
    }
}

fn quoted(path: &str) -> String {
    serde_json::to_string(path).unwrap_or_else(|_| path.to_string())
}

fn parse(text: &str, file: &str) -> Result<Expected, VerifyError> {
    let p = Parser { file };
    let value: Value = serde_json::from_str(text).map_err(|source| VerifyError::ExpectedJson {
        file: file.to_string(),
        source,
    })?;
    let Value::Object(map) = value else {
        return Err(p.bad(
            "(top level)",
            format!("must be an object, not {}", kind_of(&value)),
        ));
    };
    let mut expected = Expected::default();
    let mut version = None;
    for (key, v) in map {
        match key.as_str() {
            "version" => version = Some(v),
            "files" => {
                let Value::Object(files) = v else {
                    return Err(p.bad(
                        "files",
                        format!("must be an object of path → rule, not {}", kind_of(&v)),
                    ));
                };
                for (path, rule) in files {
                    let k = format!("files.{}", quoted(&path));
                    if let Some(why) = path_problem(&path) {
                        return Err(p.bad(k, format!("the path {why}")));
                    }
                    expected.files.insert(path, p.rule(&k, rule)?);
                }
            }
            "absent" => {
                for (k, path) in p.string_list("absent", v)? {
                    if let Some(why) = path_problem(&path) {
                        return Err(p.bad(k, format!("the path {why}")));
                    }
                    if expected.absent.contains(&path) {
                        return Err(p.bad(k, format!("{} is listed twice", quoted(&path))));
                    }
                    expected.absent.push(path);
                }
            }
            "unchanged" => expected.unchanged = p.globs("unchanged", v)?,
            "ignore" => expected.ignore = p.globs("ignore", v)?,
            "extra" => {
                expected.extra = match v.as_str() {
                    Some("allow") => Extra::Allow,
                    Some("deny") => Extra::Deny,
                    _ => return Err(p.bad("extra", format!("{v} is not \"allow\" or \"deny\""))),
                }
            }
            "all_or_nothing" => {
                let Value::Bool(b) = v else {
                    return Err(p.bad(
                        "all_or_nothing",
                        format!("must be true or false, not {}", kind_of(&v)),
                    ));
                };
                expected.all_or_nothing = b;
            }
            _ => return Err(p.bad(key, format!("unknown key; expected one of {TOP_KEYS}"))),
        }
    }
    match version {
        None => return Err(p.bad("version", format!("missing: say \"version\": {VERSION}"))),
        Some(v) if v.as_u64() == Some(u64::from(VERSION)) => {}
        Some(v) => {
            return Err(p.bad(
                "version",
                format!("{v} is not supported (this envcraft reads version {VERSION})"),
            ));
        }
    }
    check_consistent(&p, &expected)?;
    Ok(expected)
}

/// Refuse rules no workspace can satisfy: a path both required and absent, a path below a
/// required file or symlink, a required path below an absent one.
fn check_consistent(p: &Parser<'_>, expected: &Expected) -> Result<(), VerifyError> {
    for (i, gone) in expected.absent.iter().enumerate() {
        let key = format!("absent[{i}]");
        if expected.files.contains_key(gone) {
            return Err(p.bad(key, format!("{} is also required by files", quoted(gone))));
        }
        if let Some(below) = expected
            .files
            .keys()
            .find(|f| super::manifest::is_below(f, gone))
        {
            return Err(p.bad(key, format!("files requires {} below it", quoted(below))));
        }
    }
    for path in expected.files.keys() {
        for (i, _) in path.match_indices('/') {
            let ancestor = &path[..i];
            if let Some(rule) = expected.files.get(ancestor)
                && rule.kind != EntryKind::Dir
            {
                return Err(p.bad(
                    format!("files.{}", quoted(path)),
                    format!("{} is required to be a {}", quoted(ancestor), rule.kind),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const H: &str = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";

    /// The error message of parsing `text`.
    fn refused(text: &str) -> String {
        crate::error::chain(&Expected::from_json(text).unwrap_err())
    }

    #[test]
    fn a_full_expected_state_parses() {
        let text = format!(
            r#"{{"version": 1,
                "files": {{"out/report.md": {{"sha256": "{}"}},
                          "run.sh": {{"sha256": "{H}", "mode": "0755"}},
                          "latest": {{"kind": "symlink", "sha256": "{H}"}},
                          "logs": {{"kind": "dir"}}}},
                "absent": ["tmp/scratch.txt"],
                "unchanged": ["src/**"],
                "ignore": ["**/__pycache__", "*.swp"],
                "extra": "deny",
                "all_or_nothing": true}}"#,
            H.to_uppercase()
        );
        let e = Expected::from_json(&text).unwrap();
        assert_eq!(e.files["out/report.md"], FileRule::file(H));
        assert_eq!(e.files["run.sh"].mode, Some(0o755));
        assert_eq!(e.files["latest"].kind, EntryKind::Symlink);
        assert_eq!(
            e.files["logs"],
            FileRule {
                kind: EntryKind::Dir,
                sha256: None,
                mode: None
            }
        );
        assert_eq!(e.absent, ["tmp/scratch.txt"]);
        assert_eq!(e.unchanged[0].as_str(), "src/**");
        assert_eq!((e.extra, e.all_or_nothing), (Extra::Deny, true));
        assert_eq!(Expected::from_json(&e.to_json()).unwrap(), e);
    }

    #[test]
    fn defaults_allow_extra_paths_and_give_partial_credit() {
        let e = Expected::from_json(r#"{"version": 1}"#).unwrap();
        assert_eq!(e, Expected::default());
        assert_eq!((e.extra, e.all_or_nothing), (Extra::Allow, false));
    }

    #[test]
    fn unknown_keys_are_refused_by_name() {
        let msg = refused(r#"{"version": 1, "extras": "deny"}"#);
        assert!(
            msg.starts_with("expected.json: key `extras`: unknown key; expected one of"),
            "{msg}"
        );
        let msg = refused(&format!(
            r#"{{"version": 1, "files": {{"a.txt": {{"sha": "{H}"}}}}}}"#
        ));
        assert!(
            msg.contains(r#"key `files."a.txt".sha`: unknown key"#),
            "{msg}"
        );
    }

    #[test]
    fn bad_values_are_refused_naming_the_key() {
        let cases = [
            (r#"{"files": {}}"#.to_string(), "key `version`: missing"),
            (
                r#"{"version": 2}"#.to_string(),
                "key `version`: 2 is not supported",
            ),
            (
                r#"{"version": 1, "files": {"a": {"sha256": "abc"}}}"#.to_string(),
                r#"key `files."a".sha256`: "abc" is not 64 hex digits"#,
            ),
            (
                r#"{"version": 1, "files": {"a": {}}}"#.to_string(),
                r#"key `files."a".sha256`: missing"#,
            ),
            (
                r#"{"version": 1, "files": {"a": {"kind": "dir", "sha256": "H"}}}"#.replace('H', H),
                r#"key `files."a".sha256`: a directory has no content hash"#,
            ),
            (
                r#"{"version": 1, "files": {"a": {"kind": "fifo"}}}"#.to_string(),
                r#"key `files."a".kind`"#,
            ),
            (
                r#"{"version": 1, "files": {"a": {"sha256": "H", "mode": "0999"}}}"#
                    .replace('H', H),
                r#"key `files."a".mode`: "0999" is not permission bits"#,
            ),
            (
                r#"{"version": 1, "files": {"a": {"sha256": "H", "mode": 420}}}"#.replace('H', H),
                r#"key `files."a".mode`: 420 is not"#,
            ),
            (
                r#"{"version": 1, "files": {"../a": {"sha256": "H"}}}"#.replace('H', H),
                r#"key `files."../a"`: the path must not have"#,
            ),
            (
                r#"{"version": 1, "absent": ["/etc/passwd"]}"#.to_string(),
                "key `absent[0]`: the path must be relative",
            ),
            (
                r#"{"version": 1, "absent": ["a//b"]}"#.to_string(),
                "key `absent[0]`: the path must not have empty",
            ),
            (
                r#"{"version": 1, "absent": ["a", "a"]}"#.to_string(),
                "key `absent[1]`: \"a\" is listed twice",
            ),
            (
                r#"{"version": 1, "absent": "a"}"#.to_string(),
                "key `absent`: must be a list of strings",
            ),
            (
                r#"{"version": 1, "ignore": ["ok", 3]}"#.to_string(),
                "key `ignore[1]`: must be a string",
            ),
            (
                r#"{"version": 1, "unchanged": ["src/[a"]}"#.to_string(),
                "key `unchanged[0]`: bad glob \"src/[a\"",
            ),
            (
                r#"{"version": 1, "ignore": ["/abs/*"]}"#.to_string(),
                "key `ignore[0]`: must be a non-empty glob relative",
            ),
            (
                r#"{"version": 1, "extra": "maybe"}"#.to_string(),
                "key `extra`: \"maybe\" is not \"allow\" or \"deny\"",
            ),
            (
                r#"{"version": 1, "all_or_nothing": "yes"}"#.to_string(),
                "key `all_or_nothing`: must be true or false",
            ),
            (r#"[1]"#.to_string(), "key `(top level)`: must be an object"),
        ];
        for (text, want) in cases {
            let msg = refused(&text);
            assert!(msg.contains(want), "{text}\n  gave: {msg}\n  want: {want}");
        }
    }

    #[test]
    fn contradictory_rules_are_refused() {
        let both =
            format!(r#"{{"version": 1, "files": {{"a": {{"sha256": "{H}"}}}}, "absent": ["a"]}}"#);
        assert!(refused(&both).contains("key `absent[0]`: \"a\" is also required by files"));
        let below_absent = format!(
            r#"{{"version": 1, "files": {{"d/a": {{"sha256": "{H}"}}}}, "absent": ["d"]}}"#
        );
        assert!(refused(&below_absent).contains("files requires \"d/a\" below it"));
        let below_file = format!(
            r#"{{"version": 1, "files": {{"d": {{"sha256": "{H}"}}, "d/a": {{"sha256": "{H}"}}}}}}"#
        );
        assert!(
            refused(&below_file).contains(r#"key `files."d/a"`: "d" is required to be a file"#)
        );
        let below_dir = format!(
            r#"{{"version": 1, "files": {{"d": {{"kind": "dir"}}, "d/a": {{"sha256": "{H}"}}}}}}"#
        );
        assert!(Expected::from_json(&below_dir).is_ok());
    }

    #[test]
    fn invalid_json_is_refused_with_its_line() {
        let err = Expected::from_json("{\"version\": 1,\n  \"files\": }").unwrap_err();
        assert!(matches!(err, VerifyError::ExpectedJson { .. }));
        assert!(
            crate::error::chain(&err).contains("line 2"),
            "{}",
            crate::error::chain(&err)
        );
    }

    #[test]
    fn load_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("expected.json");
        std::fs::write(&path, r#"{"version": 1, "bogus": 1}"#).unwrap();
        let msg = crate::error::chain(&Expected::load(&path).unwrap_err());
        assert!(
            msg.starts_with(&format!("{}: key `bogus`", path.display())),
            "{msg}"
        );
        let missing = Expected::load(&dir.path().join("nope.json")).unwrap_err();
        assert!(matches!(missing, VerifyError::Read { .. }));
    }

    #[test]
    fn globs_stay_in_a_component_unless_doubled_and_cover_what_is_below() {
        let g = |t: &str| Glob::new(t).unwrap();
        assert!(g("*.txt").matches("a.txt"));
        assert!(!g("*.txt").matches("d/a.txt"));
        assert!(g("**/*.txt").matches("a.txt") && g("**/*.txt").matches("d/e/a.txt"));
        assert!(g("node_modules").matches("node_modules/x/y.js"));
        assert!(!g("node_modules").matches("src/node_modules"));
        assert!(g("**/__pycache__").matches("a/b/__pycache__/m.pyc"));
        assert!(g("src/**").matches("src/a/b.rs") && !g("src/**").matches("srcx/a"));
        assert!(g("{a,b}.md").matches("b.md"));
        assert!(g(r"\*").matches("*") && !g(r"\*").matches("x"));
    }

    #[test]
    fn ignoring_drops_the_rules_it_covers() {
        let e = Expected {
            files: [
                ("cache/x".to_string(), FileRule::file(H)),
                ("keep".to_string(), FileRule::file(H)),
            ]
            .into(),
            absent: vec!["cache/y".into(), "gone".into()],
            ..Expected::default()
        };
        let e = e.ignoring(vec![Glob::new("cache").unwrap()]);
        assert_eq!(e.files.keys().collect::<Vec<_>>(), ["keep"]);
        assert_eq!(e.absent, ["gone"]);
        assert_eq!(e.ignore.len(), 1);
    }
}
