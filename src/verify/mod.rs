//! Verifiers: turning a final workspace into a reward. Today the hash-manifest verifier: the
//! manifest of a tree, the expected state a task records, and the checks that compare them.
//!
//! Promises: every rule of `expected.json` becomes one [`Check`] with its outcome, what was
//! expected and what was found, so a reward can always be explained; the reward is the
//! fraction of checks passed (or 0/1 for `all_or_nothing`); symlinks are judged as links,
//! never followed; a path whose state is unknown (below a directory too deep to list) never
//! passes. Verifying never fails: only making a manifest or reading `expected.json` can.
//!
//! - [`manifest`]: [`Manifest`] of a directory (parallel SHA-256), JSON, and the incremental
//!   manifest of a session from the template's manifest plus the overlay's upper layer;
//! - [`expected`]: `expected.json` ([`Expected`]): parsing, validation, globs.

pub mod cache;
pub mod command;
pub mod expected;
pub mod manifest;

use std::collections::HashSet;
use std::io::Read;
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use serde::Serialize;

pub use expected::{Expected, Extra, FileRule, Glob};
pub use manifest::{Entry, EntryKind, Manifest, sha256_hex};

/// Why a manifest could not be made or an `expected.json` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} changed while it was being hashed")]
    Changed { path: PathBuf },
    #[error("{file}: key `{key}`: {reason}")]
    Expected {
        file: String,
        key: String,
        reason: String,
    },
    #[error("{file} is not valid JSON")]
    ExpectedJson {
        file: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("bad glob {glob:?}")]
    Glob {
        glob: String,
        #[source]
        source: globset::Error,
    },
    #[error("not a valid manifest")]
    ManifestJson(#[source] serde_json::Error),
}

/// Which rule a check comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CheckKind {
    /// A `files` rule: the path holds this kind, content (and mode).
    File,
    /// An `absent` rule: the path does not exist.
    Absent,
    /// An `unchanged` glob: every entry it matches is as in the initial state.
    Unchanged,
    /// `extra = "deny"`: a path added and named by no rule.
    Extra,
    /// A code check: the grader command's score.
    Command,
}

/// One rule applied to the final workspace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    /// `file out/report.md`, `absent tmp/x`, `unchanged src/**`, `extra notes.txt`.
    pub name: String,
    pub kind: CheckKind,
    /// The path (or, for `unchanged`, the glob) the check is about.
    pub path: String,
    pub passed: bool,
    pub expected: String,
    pub actual: String,
    /// For a failed file check on a text file: the first lines of the actual content (only
    /// the expected hash is recorded, not the content); for a failed `unchanged` check: one
    /// line per differing path. At most [`DIFF_LINES`] lines.
    pub diff: Option<String>,
}

/// The outcome of verifying one final workspace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// Fraction of checks passed (1.0 when there are none); 0 or 1 with `all_or_nothing`.
    pub reward: f64,
    /// Every check passed.
    pub passed: bool,
    pub checks: Vec<Check>,
}

impl Verdict {
    fn from_checks(checks: Vec<Check>, all_or_nothing: bool) -> Verdict {
        let ok = checks.iter().filter(|c| c.passed).count();
        let passed = ok == checks.len();
        let reward = if checks.is_empty() || (all_or_nothing && passed) {
            1.0
        } else if all_or_nothing {
            0.0
        } else {
            ok as f64 / checks.len() as f64
        };
        Verdict {
            reward,
            passed,
            checks,
        }
    }

    /// The checks that failed.
    pub fn failed(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| !c.passed)
    }
}

/// The verdict of a task's `[verifier]` from its parts: the manifest's verdict and the
/// grader's score, as `kind` asks (`hybrid`: the weighted mean; `all_or_nothing`: 0 unless
/// everything passed).
pub fn combine(
    verifier: &crate::spec::task::VerifierSpec,
    manifest: Option<Verdict>,
    grader: Option<(command::CommandScore, Check)>,
) -> Verdict {
    match (manifest, grader) {
        (Some(m), None) => m,
        (None, Some((score, check))) => Verdict {
            reward: if verifier.all_or_nothing && score.score < 1.0 {
                0.0
            } else {
                score.score
            },
            passed: score.score >= 1.0,
            checks: vec![check],
        },
        (Some(m), Some((score, check))) => {
            let w = verifier.weights.unwrap_or(crate::spec::task::Weights {
                manifest: 0.5,
                command: 0.5,
            });
            let passed = m.passed && score.score >= 1.0;
            let mut reward =
                (w.manifest * m.reward + w.command * score.score) / (w.manifest + w.command);
            if verifier.all_or_nothing && !passed {
                reward = 0.0;
            }
            let mut checks = m.checks;
            checks.push(check);
            Verdict {
                reward,
                passed,
                checks,
            }
        }
        (None, None) => Verdict {
            reward: 0.0,
            passed: false,
            checks: Vec::new(),
        },
    }
}

/// Most lines a check's `diff` shows.
pub const DIFF_LINES: usize = 40;
/// Longest line a `diff` shows (longer ones are cut, marked with `…`).
const DIFF_LINE_CHARS: usize = 240;
/// How much of a file is read to show its first lines.
const DIFF_READ_BYTES: usize = 64 * 1024;
const UNKNOWN: &str = "unknown: below a directory too deep to list";

/// `file mode 0644 sha256 …`, `dir mode 0755`, `missing`.
pub fn describe(entry: Option<&Entry>) -> String {
    match entry {
        None => "missing".to_string(),
        Some(e) => {
            let mut out = format!("{} mode {}", e.kind, manifest::octal_mode::format(e.mode));
            if let Some(h) = &e.sha256 {
                out.push_str(" sha256 ");
                out.push_str(h);
            }
            out
        }
    }
}

/// Judge `final_` (the final workspace's manifest) against `expected`, with `initial` (the
/// manifest of the workspace before the run) for `unchanged` and `extra`. With `final_root`
/// (the final workspace itself), a failed file check on a text file shows its first lines.
///
/// Checks, in order: one per `files` rule (by path), one per `absent` path, one per
/// `unchanged` glob, and with `extra = "deny"` one failed check per path present in `final_`
/// but not in `initial` that no rule names (not a `files` path or one of its ancestors, not
/// `absent`, not matched by an `unchanged` glob). Paths matched by an `ignore` glob are left
/// out of every check.
pub fn verify(
    expected: &Expected,
    initial: &Manifest,
    final_: &Manifest,
    final_root: Option<&Path>,
) -> Verdict {
    let mut checks = Vec::new();
    let root_fd = final_root.and_then(|root| {
        nix::fcntl::open(
            root,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .ok()
    });
    for (path, rule) in &expected.files {
        if expected.is_ignored(path) {
            continue;
        }
        let unknown = final_.is_unknown(path);
        let actual = final_.get(path);
        let passed = !unknown && actual.is_some_and(|e| rule.matches(e));
        let diff = match (passed, actual, &root_fd) {
            (false, Some(e), Some(fd))
                if rule.kind == EntryKind::File && e.kind == EntryKind::File =>
            {
                text_head(fd, path)
            }
            _ => None,
        };
        checks.push(Check {
            name: format!("file {path}"),
            kind: CheckKind::File,
            path: path.clone(),
            passed,
            expected: rule.describe(),
            actual: if unknown {
                UNKNOWN.to_string()
            } else {
                describe(actual)
            },
            diff,
        });
    }
    for path in &expected.absent {
        if expected.is_ignored(path) {
            continue;
        }
        let unknown = final_.is_unknown(path);
        let actual = final_.get(path);
        checks.push(Check {
            name: format!("absent {path}"),
            kind: CheckKind::Absent,
            path: path.clone(),
            passed: !unknown && actual.is_none(),
            expected: "absent".to_string(),
            actual: match (unknown, actual) {
                (true, _) => UNKNOWN.to_string(),
                (false, None) => "absent".to_string(),
                (false, Some(e)) => describe(Some(e)),
            },
            diff: None,
        });
    }
    for glob in &expected.unchanged {
        checks.push(unchanged_check(expected, glob, initial, final_));
    }
    if expected.extra == Extra::Deny {
        let mut named: HashSet<&str> = expected.absent.iter().map(String::as_str).collect();
        for path in expected.files.keys() {
            named.insert(path);
            for (i, _) in path.match_indices('/') {
                named.insert(&path[..i]);
            }
        }
        for entry in final_.entries() {
            let path = entry.path.as_str();
            if initial.get(path).is_some()
                || named.contains(path)
                || expected.is_ignored(path)
                || expected.unchanged.iter().any(|g| g.matches(path))
            {
                continue;
            }
            checks.push(Check {
                name: format!("extra {path}"),
                kind: CheckKind::Extra,
                path: path.to_string(),
                passed: false,
                expected: "absent (not in the initial state, named by no rule)".to_string(),
                actual: describe(Some(entry)),
                diff: None,
            });
        }
    }
    Verdict::from_checks(checks, expected.all_or_nothing)
}

/// One check for an `unchanged` glob: every non-ignored entry it matches, at the start or at
/// the end, must be in both with the same kind, mode and content.
fn unchanged_check(
    expected: &Expected,
    glob: &Glob,
    initial: &Manifest,
    final_: &Manifest,
) -> Check {
    let selected = |m: &'_ Manifest| -> Vec<Entry> {
        m.entries()
            .iter()
            .filter(|e| glob.matches(&e.path) && !expected.is_ignored(&e.path))
            .cloned()
            .collect()
    };
    let (before, after) = (selected(initial), selected(final_));
    let mut problems = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < before.len() || j < after.len() {
        let order = match (before.get(i), after.get(j)) {
            (Some(a), Some(b)) => a.path.cmp(&b.path),
            (Some(_), None) => std::cmp::Ordering::Less,
            _ => std::cmp::Ordering::Greater,
        };
        match order {
            std::cmp::Ordering::Less => {
                let a = &before[i];
                problems.push(format!("missing {} (was {})", a.path, describe(Some(a))));
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                let b = &after[j];
                problems.push(format!("added {} ({})", b.path, describe(Some(b))));
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                let (a, b) = (&before[i], &after[j]);
                if !a.same_state(b) {
                    problems.push(format!(
                        "changed {}: {} -> {}",
                        a.path,
                        describe(Some(a)),
                        describe(Some(b))
                    ));
                }
                i += 1;
                j += 1;
            }
        }
    }
    let passed = problems.is_empty();
    let actual = if passed {
        if before.is_empty() {
            "no entry matches, before or after".to_string()
        } else {
            format!("{} entries unchanged", before.len())
        }
    } else {
        format!("{} of the matching entries differ", problems.len())
    };
    let diff = (!passed).then(|| {
        let mut lines: Vec<String> = problems.iter().take(DIFF_LINES).cloned().collect();
        if problems.len() > DIFF_LINES {
            lines.push(format!("… and {} more", problems.len() - DIFF_LINES));
        }
        lines.join("\n")
    });
    Check {
        name: format!("unchanged {}", glob.as_str()),
        kind: CheckKind::Unchanged,
        path: glob.as_str().to_string(),
        passed,
        expected: format!("{} entries as in the initial state", before.len()),
        actual,
        diff,
    }
}

/// The first lines of the file at `path` below the final workspace, as the added side of a
/// unified diff, when it is text (no NUL byte, UTF-8); `None` for binary or unreadable files.
fn text_head(root: &std::os::fd::OwnedFd, path: &str) -> Option<String> {
    let fd = manifest::open_beneath(
        root,
        &crate::workspace::name::decode(path),
        OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY,
    )
    .ok()?;
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(DIFF_READ_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    let cut = bytes.len() > DIFF_READ_BYTES;
    bytes.truncate(DIFF_READ_BYTES);
    if bytes.contains(&0) {
        return None;
    }
    let text = match std::str::from_utf8(&bytes) {
        Ok(t) => t,
        // A character split by the cut at DIFF_READ_BYTES is not a sign of binary content.
        Err(e) if cut && e.error_len().is_none() => {
            std::str::from_utf8(&bytes[..e.valid_up_to()]).ok()?
        }
        Err(_) => return None,
    };
    let all: Vec<&str> = text.lines().collect();
    let shown = all.len().min(DIFF_LINES);
    let mut out = format!("--- expected {path} (only its hash is recorded)\n");
    out.push_str(&format!("+++ actual {path}\n@@ -0,0 +1,{shown} @@\n"));
    for line in &all[..shown] {
        out.push('+');
        if line.chars().count() > DIFF_LINE_CHARS {
            out.extend(line.chars().take(DIFF_LINE_CHARS));
            out.push('…');
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    if cut || all.len() > shown {
        out.push_str("… (more lines not shown)\n");
    }
    Some(out)
}

/// What `envcraft record` writes after the reference solution: a `files` rule for every path
/// added or changed between `initial` and `final_`, an `absent` rule for every path removed
/// (the topmost one only: a removed directory covers its content), and `extra`.
///
/// A rule records the mode where it matters: when the solution changed a path's permission
/// bits, when a new file is executable, or when a new path has setuid, setgid or sticky bits.
/// A new directory gets a rule only when nothing is recorded below it (an empty directory);
/// `other` entries (fifos, sockets, devices) cannot be expressed and are left out.
pub fn expected_from(initial: &Manifest, final_: &Manifest, extra: Extra) -> Expected {
    let mut expected = Expected {
        extra,
        ..Expected::default()
    };
    // Whether something that gets a rule (anything but `other`) lies below `path`.
    let has_recorded_below = |m: &Manifest, path: &str| {
        let prefix = format!("{path}/");
        let entries = m.entries();
        let i = entries.partition_point(|e| e.path.as_str() < prefix.as_str());
        entries[i..]
            .iter()
            .take_while(|e| e.path.starts_with(&prefix))
            .any(|e| e.kind != EntryKind::Other)
    };
    for entry in final_.entries() {
        if entry.kind == EntryKind::Other {
            continue;
        }
        let special = entry.mode & 0o7000 != 0;
        let executable = entry.kind == EntryKind::File && entry.mode & 0o111 != 0;
        let with_mode = match initial.get(&entry.path) {
            Some(old) if old.same_state(entry) => continue,
            Some(old) if old.kind == entry.kind => old.mode != entry.mode,
            Some(_) => special || executable,
            None => {
                if entry.kind == EntryKind::Dir
                    && has_recorded_below(final_, &entry.path)
                    && !special
                {
                    continue;
                }
                special || executable
            }
        };
        expected
            .files
            .insert(entry.path.clone(), FileRule::of_entry(entry, with_mode));
    }
    for entry in initial.entries() {
        if final_.get(&entry.path).is_some() {
            continue;
        }
        let parent_is_dir = match entry.path.rfind('/') {
            None => true,
            Some(i) => final_
                .get(&entry.path[..i])
                .is_some_and(|p| p.kind == EntryKind::Dir),
        };
        if parent_is_dir {
            expected.absent.push(entry.path.clone());
        }
    }
    expected
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::fs;
    use std::os::unix::fs::{PermissionsExt, symlink};

    /// A small deterministic PRNG (splitmix64) for randomized tests.
    pub(crate) struct Rng(u64);

    impl Rng {
        pub(crate) fn new(seed: u64) -> Rng {
            Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
        }

        pub(crate) fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }

        /// A number in `0..n` (`n > 0`).
        pub(crate) fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }

        pub(crate) fn pick<T: Copy>(&mut self, items: &[T]) -> T {
            items[self.below(items.len())]
        }

        pub(crate) fn fill(&mut self, bytes: &mut [u8]) {
            for chunk in bytes.chunks_mut(8) {
                let word = self.next().to_le_bytes();
                chunk.copy_from_slice(&word[..chunk.len()]);
            }
        }
    }

    /// Write `text` at `root/rel`, making parent directories.
    pub(crate) fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    pub(crate) fn chmod(root: &Path, rel: &str, mode: u32) {
        fs::set_permissions(root.join(rel), fs::Permissions::from_mode(mode)).unwrap();
    }

    /// Copy a tree with modes and symlinks (special bits kept, unlike the workspace copies).
    pub(crate) fn copy_all(from: &Path, to: &Path) {
        fs::create_dir(to).unwrap();
        for entry in fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let (src, dst) = (entry.path(), to.join(entry.file_name()));
            let meta = fs::symlink_metadata(&src).unwrap();
            if meta.is_dir() {
                copy_all(&src, &dst);
            } else if meta.file_type().is_symlink() {
                symlink(fs::read_link(&src).unwrap(), &dst).unwrap();
            } else {
                fs::copy(&src, &dst).unwrap();
            }
            fs::set_permissions(&dst, meta.permissions()).ok();
        }
    }

    /// Skip loudly; with ENVCRAFT_TEST_REQUIRE=all, fail instead.
    pub(crate) fn skip(why: &str) {
        if std::env::var("ENVCRAFT_TEST_REQUIRE").as_deref() == Ok("all") {
            panic!("required but unavailable: {why}");
        }
        eprintln!("skipping: {why}");
    }

    fn sha(text: &str) -> String {
        sha256_hex(text.as_bytes())
    }

    fn manifest(root: &Path) -> Manifest {
        Manifest::of_dir(root).unwrap()
    }

    /// An initial and a final tree in one temp dir.
    struct Trees {
        _dir: tempfile::TempDir,
        initial: PathBuf,
        final_: PathBuf,
    }

    fn trees(initial: &[(&str, &str)], final_: &[(&str, &str)]) -> Trees {
        let dir = tempfile::tempdir().unwrap();
        let (i, f) = (dir.path().join("initial"), dir.path().join("final"));
        fs::create_dir(&i).unwrap();
        fs::create_dir(&f).unwrap();
        for (path, text) in initial {
            write(&i, path, text);
        }
        for (path, text) in final_ {
            write(&f, path, text);
        }
        Trees {
            _dir: dir,
            initial: i,
            final_: f,
        }
    }

    impl Trees {
        fn verify(&self, expected: &Expected) -> Verdict {
            verify(
                expected,
                &manifest(&self.initial),
                &manifest(&self.final_),
                Some(&self.final_),
            )
        }
    }

    fn files(rules: &[(&str, FileRule)]) -> Expected {
        Expected {
            files: rules
                .iter()
                .map(|(p, r)| (p.to_string(), r.clone()))
                .collect(),
            ..Expected::default()
        }
    }

    fn globs(texts: &[&str]) -> Vec<Glob> {
        texts.iter().map(|t| Glob::new(t).unwrap()).collect()
    }

    #[test]
    fn a_file_rule_passes_on_the_expected_content() {
        let t = trees(&[], &[("out/report.md", "done\n")]);
        let v = t.verify(&files(&[("out/report.md", FileRule::file(sha("done\n")))]));
        assert_eq!((v.reward, v.passed, v.checks.len()), (1.0, true, 1));
        let c = &v.checks[0];
        assert_eq!(
            (c.kind, c.name.as_str(), c.path.as_str()),
            (CheckKind::File, "file out/report.md", "out/report.md")
        );
        assert_eq!(c.diff, None);
    }

    #[test]
    fn a_failed_file_check_shows_both_hashes_and_the_first_forty_lines_of_text() {
        let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
        let t = trees(&[], &[("report.md", &text)]);
        let want = sha("the right answer\n");
        let v = t.verify(&files(&[("report.md", FileRule::file(&want))]));
        assert_eq!((v.reward, v.passed), (0.0, false));
        let c = &v.checks[0];
        assert_eq!(c.expected, format!("file sha256 {want}"));
        assert_eq!(c.actual, format!("file mode 0644 sha256 {}", sha(&text)));
        let diff = c.diff.as_deref().unwrap();
        assert!(diff.starts_with("--- expected report.md"), "{diff}");
        let added: Vec<&str> = diff
            .lines()
            .filter(|l| l.starts_with('+') && !l.starts_with("+++"))
            .collect();
        assert_eq!(added.len(), DIFF_LINES);
        assert_eq!(added[0], "+line 1");
        assert!(diff.contains("more lines not shown"));
        // Without the final tree there is nothing to show.
        let v = verify(
            &files(&[("report.md", FileRule::file(&want))]),
            &Manifest::default(),
            &manifest(&t.final_),
            None,
        );
        assert_eq!(v.checks[0].diff, None);
    }

    #[test]
    fn a_failed_check_on_a_binary_file_has_no_diff() {
        let t = trees(&[], &[]);
        fs::write(t.final_.join("blob"), [0u8, 159, 146, 150]).unwrap();
        let v = t.verify(&files(&[("blob", FileRule::file(sha("x")))]));
        assert!(!v.passed);
        assert_eq!(v.checks[0].diff, None);
    }

    #[test]
    fn a_missing_file_fails_its_rule() {
        let t = trees(&[], &[]);
        let v = t.verify(&files(&[("a.txt", FileRule::file(sha("a")))]));
        assert_eq!(v.checks[0].actual, "missing");
        assert!(!v.passed);
    }

    #[test]
    fn absent_passes_when_the_path_is_gone_and_fails_when_it_is_there() {
        let t = trees(&[("tmp/x", "x"), ("keep", "k")], &[("keep", "k")]);
        let expected = Expected {
            absent: vec!["tmp/x".into(), "tmp".into(), "keep".into()],
            ..Expected::default()
        };
        let v = t.verify(&expected);
        let outcome: Vec<(&str, bool)> = v
            .checks
            .iter()
            .map(|c| (c.path.as_str(), c.passed))
            .collect();
        assert_eq!(outcome, [("tmp/x", true), ("tmp", true), ("keep", false)]);
        assert!(v.checks.iter().all(|c| c.kind == CheckKind::Absent));
        assert_eq!(
            v.checks[2].actual,
            format!("file mode 0644 sha256 {}", sha("k"))
        );
        assert!((v.reward - 2.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn unchanged_compares_every_matching_entry_with_the_initial_state() {
        let initial = [("src/a.rs", "a"), ("src/b.rs", "b"), ("docs/x.md", "x")];
        let t = trees(
            &initial,
            &[("src/a.rs", "A"), ("src/c.rs", "c"), ("docs/x.md", "x")],
        );
        let expected = Expected {
            unchanged: globs(&["src/**", "docs", "nothing/**"]),
            ..Expected::default()
        };
        let v = t.verify(&expected);
        let [src, docs, nothing] = &v.checks[..] else {
            panic!("{v:?}")
        };
        assert_eq!((src.kind, src.passed), (CheckKind::Unchanged, false));
        let diff = src.diff.as_deref().unwrap();
        assert!(
            diff.contains(&format!(
                "changed src/a.rs: file mode 0644 sha256 {} -> file mode 0644 sha256 {}",
                sha("a"),
                sha("A")
            )),
            "{diff}"
        );
        assert!(diff.contains("missing src/b.rs"), "{diff}");
        assert!(diff.contains("added src/c.rs"), "{diff}");
        assert_eq!(src.actual, "3 of the matching entries differ");
        assert!(docs.passed, "{docs:?}");
        assert_eq!(docs.actual, "2 entries unchanged");
        assert!(nothing.passed);
    }

    #[test]
    fn extra_deny_fails_each_added_path_no_rule_names() {
        let t = trees(
            &[("README", "r")],
            &[
                ("README", "r"),
                ("out/result.txt", "42"),
                ("junk.txt", "j"),
                ("cache/x", "x"),
                ("src/new.rs", "n"),
            ],
        );
        let mut expected = files(&[("out/result.txt", FileRule::file(sha("42")))]);
        expected.extra = Extra::Deny;
        expected.ignore = globs(&["cache"]);
        expected.unchanged = globs(&["src/**"]);
        let v = t.verify(&expected);
        let extra: Vec<&str> = v
            .checks
            .iter()
            .filter(|c| c.kind == CheckKind::Extra)
            .map(|c| c.path.as_str())
            .collect();
        // `out` holds a required file, `cache` is ignored, `src/new.rs` is judged by
        // `unchanged` (and `src`, new as well, only by extra).
        assert_eq!(extra, ["junk.txt", "src"]);
        let junk = v.checks.iter().find(|c| c.path == "junk.txt").unwrap();
        assert_eq!((junk.name.as_str(), junk.passed), ("extra junk.txt", false));
        assert_eq!(v.checks.len(), 4);
        expected.extra = Extra::Allow;
        let v = t.verify(&expected);
        assert!(v.checks.iter().all(|c| c.kind != CheckKind::Extra));
    }

    #[test]
    fn ignored_paths_are_left_out_of_every_check() {
        let t = trees(
            &[("src/m.py", "m")],
            &[
                ("src/m.py", "m"),
                ("src/__pycache__/m.pyc", "c"),
                ("x.swp", "s"),
            ],
        );
        let expected = Expected {
            files: [("x.swp".to_string(), FileRule::file(sha("other")))].into(),
            absent: vec!["src/__pycache__/m.pyc".into()],
            unchanged: globs(&["src/**"]),
            ignore: globs(&["**/__pycache__", "*.swp"]),
            extra: Extra::Deny,
            all_or_nothing: false,
        };
        let v = t.verify(&expected);
        assert_eq!(v.checks.len(), 1, "{v:?}");
        assert_eq!(
            (v.checks[0].kind, v.checks[0].passed),
            (CheckKind::Unchanged, true)
        );
        assert_eq!(v.reward, 1.0);
    }

    #[test]
    fn all_or_nothing_makes_the_reward_zero_or_one() {
        let t = trees(&[], &[("a", "a"), ("b", "wrong")]);
        let mut expected = files(&[
            ("a", FileRule::file(sha("a"))),
            ("b", FileRule::file(sha("b"))),
        ]);
        assert_eq!(t.verify(&expected).reward, 0.5);
        expected.all_or_nothing = true;
        let v = t.verify(&expected);
        assert_eq!((v.reward, v.passed), (0.0, false));
        fs::write(t.final_.join("b"), "b").unwrap();
        let v = t.verify(&expected);
        assert_eq!((v.reward, v.passed), (1.0, true));
    }

    #[test]
    fn no_rules_give_reward_one_unless_extra_paths_are_denied() {
        let t = trees(&[("a", "a")], &[("a", "a"), ("new", "n")]);
        let v = t.verify(&Expected::default());
        assert_eq!((v.reward, v.passed, v.checks.len()), (1.0, true, 0));
        let deny = Expected {
            extra: Extra::Deny,
            ..Expected::default()
        };
        let v = t.verify(&deny);
        assert_eq!((v.reward, v.passed, v.checks.len()), (0.0, false, 1));
    }

    #[test]
    fn symlinks_are_judged_by_their_target_never_followed() {
        let t = trees(&[], &[("data.txt", "data")]);
        symlink("data.txt", t.final_.join("latest")).unwrap();
        // A file whose content is the link's target text, and a link whose target text is
        // the expected file content: neither passes for the other.
        write(&t.final_, "fake-link", "data.txt");
        symlink("data", t.final_.join("fake-file")).unwrap();
        let link_rule = FileRule {
            kind: EntryKind::Symlink,
            sha256: Some(sha("data.txt")),
            mode: None,
        };
        let expected = files(&[
            ("latest", link_rule.clone()),
            ("fake-link", link_rule.clone()),
            ("fake-file", FileRule::file(sha("data"))),
        ]);
        let v = t.verify(&expected);
        let outcome: Vec<(&str, bool)> = v
            .checks
            .iter()
            .map(|c| (c.path.as_str(), c.passed))
            .collect();
        assert_eq!(
            outcome,
            [("fake-file", false), ("fake-link", false), ("latest", true)]
        );
        // Retargeting the link fails its rule.
        fs::remove_file(t.final_.join("latest")).unwrap();
        symlink("/etc/passwd", t.final_.join("latest")).unwrap();
        let v = t.verify(&files(&[("latest", link_rule)]));
        assert!(!v.passed);
        assert_eq!(
            v.checks[0].actual,
            format!("symlink mode 0777 sha256 {}", sha("/etc/passwd"))
        );
    }

    #[test]
    fn a_mode_is_checked_only_where_the_rule_gives_one() {
        let t = trees(&[], &[("run.sh", "#!/bin/sh\n")]);
        let content = sha("#!/bin/sh\n");
        let with_mode = FileRule {
            mode: Some(0o755),
            ..FileRule::file(&content)
        };
        let v = t.verify(&files(&[("run.sh", with_mode.clone())]));
        assert!(!v.passed);
        assert_eq!(
            v.checks[0].expected,
            format!("file mode 0755 sha256 {content}")
        );
        assert!(v.checks[0].actual.starts_with("file mode 0644"));
        assert!(
            t.verify(&files(&[("run.sh", FileRule::file(&content))]))
                .passed
        );
        chmod(&t.final_, "run.sh", 0o755);
        assert!(t.verify(&files(&[("run.sh", with_mode)])).passed);
    }

    #[test]
    fn a_directory_replaced_by_a_file_and_back_is_seen() {
        let t = trees(&[("d/a", "a")], &[("d", "now a file")]);
        let dir_rule = FileRule {
            kind: EntryKind::Dir,
            sha256: None,
            mode: None,
        };
        let expected = Expected {
            files: [("d".to_string(), dir_rule)].into(),
            absent: vec!["d/a".into()],
            ..Expected::default()
        };
        let v = t.verify(&expected);
        assert_eq!(
            v.checks[0].actual,
            format!("file mode 0644 sha256 {}", sha("now a file"))
        );
        assert_eq!((v.checks[0].passed, v.checks[1].passed), (false, true));
        fs::remove_file(t.final_.join("d")).unwrap();
        write(&t.final_, "d/a", "a");
        let v = t.verify(&expected);
        assert_eq!((v.checks[0].passed, v.checks[1].passed), (true, false));
        // And a file rule on a path that became a directory fails.
        let v = t.verify(&files(&[("d", FileRule::file(sha("now a file")))]));
        assert!(v.checks[0].actual.starts_with("dir mode"));
        assert!(!v.passed);
    }

    #[test]
    fn rules_combined_give_the_fraction_passed() {
        let t = trees(
            &[
                ("src/lib.rs", "lib"),
                ("notes.txt", "n"),
                ("tmp/scratch", "s"),
            ],
            &[
                ("src/lib.rs", "lib"),
                ("notes.txt", "n"),
                ("out/a.txt", "a"),
                ("out/b.txt", "wrong"),
                ("stray", "s"),
            ],
        );
        let expected = Expected {
            files: [
                ("out/a.txt".to_string(), FileRule::file(sha("a"))),
                ("out/b.txt".to_string(), FileRule::file(sha("b"))),
            ]
            .into(),
            absent: vec!["tmp".into()],
            unchanged: globs(&["src/**", "notes.txt"]),
            ignore: vec![],
            extra: Extra::Deny,
            all_or_nothing: false,
        };
        let v = t.verify(&expected);
        let outcome: Vec<(&str, bool)> = v
            .checks
            .iter()
            .map(|c| (c.name.as_str(), c.passed))
            .collect();
        assert_eq!(
            outcome,
            [
                ("file out/a.txt", true),
                ("file out/b.txt", false),
                ("absent tmp", true),
                ("unchanged src/**", true),
                ("unchanged notes.txt", true),
                ("extra stray", false),
            ]
        );
        assert!((v.reward - 4.0 / 6.0).abs() < 1e-9);
        assert_eq!(v.failed().count(), 2);
        let json = serde_json::to_value(&v).unwrap();
        assert_eq!(json["checks"][1]["kind"], "file");
        assert_eq!(json["checks"][5]["kind"], "extra");
        assert_eq!(json["passed"], false);
    }

    #[test]
    fn paths_below_a_directory_too_deep_to_list_never_pass() {
        let deep = "d/".repeat(manifest::MAX_DEPTH);
        let deepest = deep.trim_end_matches('/').to_string();
        let final_ = Manifest::from_entries(vec![], vec![deepest.clone()]);
        let below = format!("{deepest}/x");
        let expected = Expected {
            files: [(below.clone(), FileRule::file(sha("x")))].into(),
            absent: vec![format!("{deepest}/y")],
            ..Expected::default()
        };
        let v = verify(&expected, &Manifest::default(), &final_, None);
        assert!(
            v.checks.iter().all(|c| !c.passed && c.actual == UNKNOWN),
            "{v:?}"
        );
    }

    /// A reference solution's result recorded as expected state: it passes, the untouched
    /// initial state does not, and a flipped byte in any checked file fails.
    #[test]
    fn expected_from_records_what_the_solution_changed() {
        let initial = [
            ("keep.txt", "k"),
            ("edit.txt", "old"),
            ("gone/a", "a"),
            ("gone/b/c", "c"),
            ("script.sh", "#!/bin/sh\n"),
            ("d/x", "x"),
        ];
        let t = trees(&initial, &[]);
        fs::remove_dir(&t.final_).unwrap();
        copy_all(&t.initial, &t.final_);
        // The reference solution:
        write(&t.final_, "edit.txt", "new");
        fs::remove_dir_all(t.final_.join("gone")).unwrap();
        write(&t.final_, "out/report.md", "report");
        write(&t.final_, "bin/tool", "#!/bin/sh\necho\n");
        chmod(&t.final_, "bin/tool", 0o755);
        chmod(&t.final_, "script.sh", 0o755);
        fs::create_dir(t.final_.join("empty")).unwrap();
        symlink("out/report.md", t.final_.join("latest")).unwrap();
        chmod(&t.final_, "d", 0o700);
        let (before, after) = (manifest(&t.initial), manifest(&t.final_));
        let expected = expected_from(&before, &after, Extra::Deny);
        let rules: Vec<(&str, String)> = expected
            .files
            .iter()
            .map(|(p, r)| (p.as_str(), r.describe()))
            .collect();
        assert_eq!(
            rules,
            [
                (
                    "bin/tool",
                    format!("file mode 0755 sha256 {}", sha("#!/bin/sh\necho\n"))
                ),
                ("d", "dir mode 0700".to_string()),
                ("edit.txt", format!("file sha256 {}", sha("new"))),
                ("empty", "dir".to_string()),
                ("latest", format!("symlink sha256 {}", sha("out/report.md"))),
                ("out/report.md", format!("file sha256 {}", sha("report"))),
                (
                    "script.sh",
                    format!("file mode 0755 sha256 {}", sha("#!/bin/sh\n"))
                ),
            ]
        );
        assert_eq!(expected.absent, ["gone"]);
        assert_eq!(expected.extra, Extra::Deny);
        let reread = Expected::from_json(&expected.to_json()).unwrap();
        assert_eq!(reread, expected);
        let v = verify(&reread, &before, &after, Some(&t.final_));
        assert_eq!((v.reward, v.passed), (1.0, true), "{v:?}");
        let untouched = verify(&reread, &before, &before, None);
        assert!(!untouched.passed && untouched.reward < 0.5, "{untouched:?}");
        for (path, rule) in &reread.files {
            if rule.kind != EntryKind::File {
                continue;
            }
            let original = fs::read(t.final_.join(path)).unwrap();
            let mut flipped = original.clone();
            flipped[0] ^= 1;
            fs::write(t.final_.join(path), &flipped).unwrap();
            let v = verify(&reread, &before, &manifest(&t.final_), None);
            assert!(!v.passed, "flipping a byte of {path} went unseen");
            fs::write(t.final_.join(path), &original).unwrap();
        }
    }
}
