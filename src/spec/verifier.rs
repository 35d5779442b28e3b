//! A task's `[verifier]`: how its final workspace becomes a reward. Up to three parts: the
//! hash manifest (`expected.json`), a grader command, and an LLM judge; `hybrid` weighs the
//! parts its `weights` name.
//!
//! ```toml
//! [verifier]
//! kind = "hybrid"             # "manifest" | "command" | "judge" | "hybrid"
//! command = "python3 check.py"  # command, and hybrid with a command part
//! timeout_secs = 120          # with a command; default 120
//! extra = "deny"              # manifest and hybrid: may files beyond the expected ones exist?
//! all_or_nothing = false      # a reward of 0 or 1 only
//! weights = { command = 0.5, judge = 0.5 }   # hybrid only; default { manifest = 0.5, command = 0.5 }
//!
//! [verifier.judge]            # judge, and hybrid with a judge part
//! rubric = "rubric.md"        # a file of the task directory
//! expected_behavior = "expected.md"   # optional, a file of the task directory
//! files = ["out/report.md"]   # optional: final workspace files the judge is shown
//! ```

use std::ops::Range;
use std::path::Path;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::located::{Check, FileError};
use super::task::TaskError;

/// A command verifier's time limit when `task.toml` does not say.
pub const DEFAULT_VERIFIER_TIMEOUT_SECS: u64 = 120;
/// The largest time limit of a verifier command.
pub const MAX_VERIFIER_TIMEOUT_SECS: u64 = 86_400;
/// The largest rubric or expected-behaviour file a judge is given.
pub const MAX_JUDGE_TEXT_BYTES: u64 = 64 * 1024;
/// The most workspace files a judge is shown.
pub const MAX_JUDGE_FILES: usize = 16;

/// How the final workspace becomes a reward.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerifierSpec {
    pub kind: VerifierKind,
    /// The check to run: set exactly when the verifier has a command part.
    pub command: Option<String>,
    /// The command's time limit (kept at the default where there is no command).
    pub timeout_secs: u64,
    /// Whether files beyond the expected ones are tolerated (manifest and hybrid).
    pub extra: ExtraFiles,
    /// A reward of 0 or 1 only, no partial credit.
    pub all_or_nothing: bool,
    /// How the parts of a `hybrid` verifier add up: set exactly for `hybrid`.
    pub weights: Option<Weights>,
    /// Where the task's `grader/` files appear to the grader: a directory of its workspace
    /// (relative; `grader` unless set: ClawGym's graders expect `reward`), or an absolute path
    /// apart from the workspace and the system paths (Harbor's `/tests`).
    pub grader_dir: String,
    /// The LLM judge: set exactly when the verifier has a judge part.
    pub judge: Option<JudgeSpec>,
}

impl VerifierSpec {
    /// Whether the verifier compares the workspace with `expected.json`.
    pub fn has_manifest(&self) -> bool {
        Parts::of(self.kind, self.weights).manifest
    }
}

/// Which parts a verifier of `kind` (with a hybrid's `weights`) has.
#[derive(Debug, Clone, Copy)]
struct Parts {
    manifest: bool,
    command: bool,
    judge: bool,
}

impl Parts {
    fn of(kind: VerifierKind, weights: Option<Weights>) -> Parts {
        let weighted = |part: fn(&Weights) -> f64| weights.is_some_and(|w| part(&w) > 0.0);
        match kind {
            VerifierKind::Manifest => Parts {
                manifest: true,
                command: false,
                judge: false,
            },
            VerifierKind::Command => Parts {
                manifest: false,
                command: true,
                judge: false,
            },
            VerifierKind::Judge => Parts {
                manifest: false,
                command: false,
                judge: true,
            },
            VerifierKind::Hybrid => Parts {
                manifest: weighted(|w| w.manifest),
                command: weighted(|w| w.command),
                judge: weighted(|w| w.judge),
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerifierKind {
    /// Compare the final workspace with the expected one, file by file, by hash.
    Manifest,
    /// Run a command over the final workspace; its result is the reward.
    Command,
    /// Ask an LLM judge, with the task's rubric; its score is the reward.
    Judge,
    /// Two or more of those, weighted.
    Hybrid,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExtraFiles {
    /// Files the expected workspace does not have are ignored.
    Allow,
    /// Files the expected workspace does not have count against the reward.
    Deny,
}

/// The weights of a hybrid verifier's parts: non-negative, with a positive sum; a part with
/// weight 0 is not part of the verifier.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Weights {
    pub manifest: f64,
    pub command: f64,
    pub judge: f64,
}

/// What an LLM judge is given besides the task's prompts and the session's transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JudgeSpec {
    /// The rubric: a file of the task directory (relative, checked at load).
    pub rubric: String,
    /// What a correct run does: a file of the task directory, when given.
    pub expected_behavior: Option<String>,
    /// Paths of the final workspace whose contents the judge is shown.
    pub files: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawVerifier {
    kind: VerifierKind,
    #[serde(default)]
    command: Option<Spanned<String>>,
    #[serde(default)]
    timeout_secs: Option<Spanned<i64>>,
    #[serde(default)]
    extra: Option<Spanned<ExtraFiles>>,
    #[serde(default)]
    all_or_nothing: bool,
    #[serde(default)]
    weights: Option<Spanned<RawWeights>>,
    #[serde(default)]
    grader_dir: Option<Spanned<String>>,
    #[serde(default)]
    judge: Option<Spanned<RawJudge>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWeights {
    #[serde(default)]
    manifest: Option<Spanned<f64>>,
    #[serde(default)]
    command: Option<Spanned<f64>>,
    #[serde(default)]
    judge: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJudge {
    rubric: Spanned<String>,
    #[serde(default)]
    expected_behavior: Option<Spanned<String>>,
    #[serde(default)]
    files: Option<Spanned<Vec<String>>>,
}

/// A relative path of plain components: no `.`, `..`, empty component or leading `/`.
fn is_plain_relative(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && path
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
}

/// Paths an absolute `grader_dir` may not be, hold or lie below: the system's, and those the
/// sandbox makes itself.
const SYSTEM_PATHS: [&str; 11] = [
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/etc",
    "/proc",
    "/dev",
    "/tmp",
    "/.envcraft",
];

/// Whether `path` can be an absolute `grader_dir`: absolute, plain components only, apart
/// from [`SYSTEM_PATHS`] (its overlap with the workspace is the grader's check: the policy
/// decides where the workspace is).
pub fn is_grader_mount(path: &str) -> bool {
    let Some(rest) = path.strip_prefix('/') else {
        return false;
    };
    is_plain_relative(rest)
        && !SYSTEM_PATHS.iter().any(|s| {
            let s = Path::new(s);
            Path::new(path).starts_with(s) || s.starts_with(path)
        })
}

impl Check<'_> {
    pub(super) fn verifier(&self, raw: &Spanned<RawVerifier>) -> Result<VerifierSpec, TaskError> {
        let v = raw.get_ref();
        let kind = v.kind;
        let kind_name = match kind {
            VerifierKind::Manifest => "manifest",
            VerifierKind::Command => "command",
            VerifierKind::Judge => "judge",
            VerifierKind::Hybrid => "hybrid",
        };
        let weights = self.weights(v, kind, kind_name)?;
        let parts = Parts::of(kind, weights);
        let (needs_command, needs_judge) = (parts.command, parts.judge);
        let unused = |key: &str, span: Range<usize>, applies: &str| {
            self.invalid(
                key,
                span,
                format!("is set but the verifier (kind `{kind_name}`) has no {applies} part"),
                &format!("`{key}` only with a {applies} part (its kind, or a hybrid's weight)"),
            )
        };
        let missing = |key: &str, part: &str, expected: &str| {
            self.invalid(
                key,
                raw.span(),
                format!("is missing, which the verifier's {part} part needs"),
                expected,
            )
        };

        let command = match (&v.command, needs_command) {
            (Some(c), true) => Some(self.non_empty("verifier.command", c)?),
            (None, true) => {
                return Err(missing(
                    "verifier.command",
                    "command",
                    "`command = \"...\"`: the check to run over the final workspace",
                )
                .into());
            }
            (Some(c), false) => return Err(unused("verifier.command", c.span(), "command").into()),
            (None, false) => None,
        };

        let timeout_secs = match &v.timeout_secs {
            None => DEFAULT_VERIFIER_TIMEOUT_SECS,
            Some(t) if !needs_command => {
                return Err(unused("verifier.timeout_secs", t.span(), "command").into());
            }
            Some(t) => {
                let secs = *t.get_ref();
                if !(1..=MAX_VERIFIER_TIMEOUT_SECS as i64).contains(&secs) {
                    return Err(self
                        .invalid(
                            "verifier.timeout_secs",
                            t.span(),
                            format!("is {secs}"),
                            &format!("an integer from 1 to {MAX_VERIFIER_TIMEOUT_SECS}"),
                        )
                        .into());
                }
                secs as u64
            }
        };

        let extra = match &v.extra {
            None => ExtraFiles::Allow,
            Some(e) if !parts.manifest => {
                return Err(unused("verifier.extra", e.span(), "manifest").into());
            }
            Some(e) => *e.get_ref(),
        };

        let grader_dir = match &v.grader_dir {
            None => "grader".to_string(),
            Some(d) if !needs_command => {
                return Err(unused("verifier.grader_dir", d.span(), "command").into());
            }
            Some(d) => {
                let dir = d.get_ref();
                if !is_plain_relative(dir) && !is_grader_mount(dir) {
                    return Err(self
                        .invalid(
                            "verifier.grader_dir",
                            d.span(),
                            format!("is `{dir}`"),
                            "a relative directory inside the workspace, without `.` or `..`, or an absolute path apart from the system's (`/tests`)",
                        )
                        .into());
                }
                dir.clone()
            }
        };

        let judge = match (&v.judge, needs_judge) {
            (Some(j), true) => Some(self.judge(j.get_ref())?),
            (None, true) => {
                return Err(missing(
                    "verifier.judge",
                    "judge",
                    "a `[verifier.judge]` table with `rubric = \"FILE\"` (a file of the task directory)",
                )
                .into());
            }
            (Some(j), false) => return Err(unused("verifier.judge", j.span(), "judge").into()),
            (None, false) => None,
        };

        Ok(VerifierSpec {
            kind,
            command,
            timeout_secs,
            extra,
            all_or_nothing: v.all_or_nothing,
            weights,
            grader_dir,
            judge,
        })
    }

    /// A hybrid's weights (the default names the manifest and the command); none otherwise.
    fn weights(
        &self,
        v: &RawVerifier,
        kind: VerifierKind,
        kind_name: &str,
    ) -> Result<Option<Weights>, TaskError> {
        let w = match (&v.weights, kind) {
            (None, VerifierKind::Hybrid) => {
                if let Some(j) = &v.judge {
                    return Err(self
                        .invalid(
                            "verifier.weights",
                            j.span(),
                            "is missing, and a hybrid verifier with a judge has no default".into(),
                            "`weights = { command = 0.5, judge = 0.5 }` (or `manifest`) naming the parts",
                        )
                        .into());
                }
                return Ok(Some(Weights {
                    manifest: 0.5,
                    command: 0.5,
                    judge: 0.0,
                }));
            }
            (None, _) => return Ok(None),
            (Some(w), VerifierKind::Hybrid) => w,
            (Some(w), _) => {
                return Err(self
                    .invalid(
                        "verifier.weights",
                        w.span(),
                        format!("is set but the verifier's kind is `{kind_name}`"),
                        "`weights` only with kind `hybrid`",
                    )
                    .into());
            }
        };
        let raw = w.get_ref();
        let mut values = [0.0f64; 3];
        for (i, (key, value)) in [
            ("verifier.weights.manifest", &raw.manifest),
            ("verifier.weights.command", &raw.command),
            ("verifier.weights.judge", &raw.judge),
        ]
        .into_iter()
        .enumerate()
        {
            let Some(value) = value else { continue };
            let x = *value.get_ref();
            if !x.is_finite() || x < 0.0 {
                return Err(self
                    .invalid(
                        key,
                        value.span(),
                        format!("is {x}"),
                        "a finite, non-negative weight",
                    )
                    .into());
            }
            values[i] = x;
        }
        let [manifest, command, judge] = values;
        let parts = values.iter().filter(|x| **x > 0.0).count();
        if parts < 2 {
            let problem = if parts == 0 {
                "sums to 0".to_string()
            } else {
                "gives weight to one part only".to_string()
            };
            return Err(self
                .invalid(
                    "verifier.weights",
                    w.span(),
                    problem,
                    "positive weights for two or more of `manifest`, `command`, `judge` (one part: use its kind)",
                )
                .into());
        }
        Ok(Some(Weights {
            manifest,
            command,
            judge,
        }))
    }

    fn judge(&self, raw: &RawJudge) -> Result<JudgeSpec, TaskError> {
        let task_file = |key: &str, value: &Spanned<String>| -> Result<String, TaskError> {
            let path = value.get_ref();
            if !is_plain_relative(path) {
                return Err(self
                    .invalid(
                        key,
                        value.span(),
                        format!("is `{path}`"),
                        "a file of the task directory, as a relative path without `.` or `..`",
                    )
                    .into());
            }
            Ok(path.clone())
        };
        let rubric = task_file("verifier.judge.rubric", &raw.rubric)?;
        let expected_behavior = raw
            .expected_behavior
            .as_ref()
            .map(|e| task_file("verifier.judge.expected_behavior", e))
            .transpose()?;
        let mut files = Vec::new();
        if let Some(list) = &raw.files {
            if list.get_ref().len() > MAX_JUDGE_FILES {
                return Err(self
                    .invalid(
                        "verifier.judge.files",
                        list.span(),
                        format!("names {} files", list.get_ref().len()),
                        &format!("at most {MAX_JUDGE_FILES} workspace files"),
                    )
                    .into());
            }
            for path in list.get_ref() {
                if !is_plain_relative(path) {
                    return Err(self
                        .invalid(
                            "verifier.judge.files",
                            list.span(),
                            format!("holds `{path}`"),
                            "workspace paths, relative, without `.` or `..`",
                        )
                        .into());
                }
                files.push(path.clone());
            }
        }
        Ok(JudgeSpec {
            rubric,
            expected_behavior,
            files,
        })
    }
}

/// Check that the judge's files are regular files of the canonical task directory `dir`
/// (no link out of it) and small enough to send.
pub(super) fn check_judge_files(judge: &JudgeSpec, dir: &Path) -> Result<(), FileError> {
    for name in std::iter::once(&judge.rubric).chain(judge.expected_behavior.as_ref()) {
        task_text_path(dir, name)?;
    }
    Ok(())
}

/// The path of `name`, a judge's file of the canonical task directory `dir`: a regular file
/// at most [`MAX_JUDGE_TEXT_BYTES`] long that resolves inside `dir`.
pub fn task_text_path(dir: &Path, name: &str) -> Result<std::path::PathBuf, FileError> {
    let path = dir.join(name);
    let layout = |problem: String| FileError::Layout {
        path: path.clone(),
        problem,
        expected: format!(
            "a regular file of the task directory (no link out of it), at most {MAX_JUDGE_TEXT_BYTES} bytes"
        ),
    };
    let resolved = std::fs::canonicalize(&path).map_err(FileError::read(&path))?;
    if !resolved.starts_with(dir) {
        return Err(layout(format!("resolves to {}", resolved.display())));
    }
    let meta = std::fs::metadata(&resolved).map_err(FileError::read(&path))?;
    if !meta.is_file() {
        return Err(layout("is not a regular file".into()));
    }
    if meta.len() > MAX_JUDGE_TEXT_BYTES {
        return Err(layout(format!("is {} bytes", meta.len())));
    }
    Ok(resolved)
}
