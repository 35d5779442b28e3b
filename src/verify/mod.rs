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
//! - [`expected`]: `expected.json` ([`Expected`]): parsing, validation, globs;
//! - [`command`]: a grader command run over a copy-on-write view of the final workspace;
//! - [`judge`]: an LLM judge asked with the task's rubric;
//! - [`combine`]: a verifier's parts into one [`Verdict`].

pub mod cache;
pub mod command;
pub mod expected;
pub mod judge;
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
    /// The LLM judge's score (or why it gave none), and its score of each criterion.
    Judge,
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
    /// The score in [0, 1]: fraction of checks passed (1.0 when there are none), or a
    /// hybrid's weighted mean of its parts; 0 or 1 with `all_or_nothing`. `None` when a part
    /// of the verifier did not run (see `not_run`): there is no score then, never a 0.
    pub reward: Option<f64>,
    /// Every part ran and every check passed.
    pub passed: bool,
    pub checks: Vec<Check>,
    /// The parts that did not run (`judge`), each check saying why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_run: Vec<String>,
    /// With parts not run, the weighted score of those that ran (not a reward).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partial_reward: Option<f64>,
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
            reward: Some(reward),
            passed,
            checks,
            not_run: Vec::new(),
            partial_reward: None,
        }
    }

    /// The checks that failed.
    pub fn failed(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| !c.passed)
    }

    /// The reward, or 0 where there is none (for sums and means that say how many were not
    /// scored).
    pub fn reward_or_zero(&self) -> f64 {
        self.reward.unwrap_or(0.0)
    }

    /// The reward as text: `0.750`, or `not scored (judge not run)`.
    pub fn reward_text(&self) -> String {
        match self.reward {
            Some(r) => format!("{r:.3}"),
            None => format!("not scored ({} not run)", self.not_run.join(", ")),
        }
    }
}

/// The parts of a verdict: each present exactly when the task's verifier has it.
#[derive(Debug, Default)]
pub struct Parts {
    pub manifest: Option<Verdict>,
    pub grader: Option<(command::CommandScore, Check)>,
    pub judge: Option<judge::JudgePart>,
}

/// The verdict of a task's `[verifier]` from its parts, as `kind` asks: one part's score, or
/// (`hybrid`) the weighted mean of the parts' scores; `all_or_nothing`: 0 unless everything
/// passed. A part that did not run leaves the verdict without a reward.
pub fn combine(verifier: &crate::spec::task::VerifierSpec, parts: Parts) -> Verdict {
    let weights = verifier.weights.unwrap_or(crate::spec::task::Weights {
        manifest: 1.0,
        command: 1.0,
        judge: 1.0,
    });
    let mut checks = Vec::new();
    let mut not_run = Vec::new();
    let mut passed = true;
    let (mut sum, mut total_weight) = (0.0, 0.0);
    if let Some(m) = parts.manifest {
        passed &= m.passed;
        sum += weights.manifest * m.reward_or_zero();
        total_weight += weights.manifest;
        checks.extend(m.checks);
    }
    if let Some((score, check)) = parts.grader {
        passed &= score.score >= 1.0;
        sum += weights.command * score.score;
        total_weight += weights.command;
        checks.push(check);
    }
    if let Some(j) = parts.judge {
        match j.score {
            Some(score) => {
                passed &= score >= 1.0;
                sum += weights.judge * score;
                total_weight += weights.judge;
            }
            None => {
                passed = false;
                not_run.push("judge".to_string());
            }
        }
        checks.extend(j.checks);
    }
    let ran = total_weight > 0.0;
    let mut score = if ran { sum / total_weight } else { 0.0 };
    if verifier.all_or_nothing {
        score = if passed { 1.0 } else { 0.0 };
    }
    let (reward, partial_reward) = match (not_run.is_empty(), ran) {
        (true, true) => (Some(score), None),
        (true, false) => (Some(0.0), None),
        (false, true) => (None, Some(score)),
        (false, false) => (None, None),
    };
    Verdict {
        reward,
        passed: passed && ran,
        checks,
        not_run,
        partial_reward,
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
#[path = "tests.rs"]
pub(crate) mod tests;
