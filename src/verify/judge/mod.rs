//! The LLM judge: a verifier part that asks an OpenAI-compatible model to score a run against
//! the task's rubric, as PinchBench does ([`prompt`], [`answer`]), through an [`Endpoint`]
//! (retries, cache).
//!
//! A judge that cannot run (no endpoint configured, the endpoint unreachable or refusing,
//! answers that never read as a score) gives no score: its part is reported as not run, with
//! why, and the verdict has no reward (see [`super::combine`]); it is never a 0.

pub mod answer;
pub mod endpoint;
pub mod prompt;

use std::io::Read;
use std::os::fd::AsFd;
use std::path::Path;

use nix::fcntl::OFlag;

pub use endpoint::{Endpoint, EndpointError};

use super::{Check, CheckKind};
use crate::spec::TaskSpec;
use crate::spec::verifier::{JudgeSpec, task_text_path};

/// What is said when a task has a judge and no endpoint is configured.
pub const NO_ENDPOINT: &str = "no judge endpoint is configured (--judge-url and --judge-model, or ENVCRAFT_JUDGE_URL and ENVCRAFT_JUDGE_MODEL)";

/// The judge's part of a verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct JudgePart {
    /// The judge's total, when it ran.
    pub score: Option<f64>,
    /// One check for the judgment (or for why there is none), then one per criterion scored.
    pub checks: Vec<Check>,
}

/// What the judge looks at: the task, the run's transcript (OpenClaw JSONL), the final
/// workspace (a directory of envcraft's own making, or one given to `envcraft verify`).
pub struct Run<'a> {
    pub task: &'a TaskSpec,
    pub transcript: Option<&'a Path>,
    pub workspace: Option<&'a Path>,
}

/// Judge `run` with the task's `spec`, asking `endpoint`.
pub fn judge(endpoint: Option<&Endpoint>, spec: &JudgeSpec, run: &Run<'_>) -> JudgePart {
    let rubric_name = spec.rubric.clone();
    let not_run = |why: String| JudgePart {
        score: None,
        checks: vec![judge_check(&rubric_name, false, format!("not run: {why}"))],
    };
    let Some(endpoint) = endpoint else {
        return not_run(NO_ENDPOINT.to_string());
    };
    let prompt = match build_prompt(spec, run) {
        Ok(p) => p,
        Err(why) => return not_run(why),
    };
    match endpoint.ask(&prompt) {
        Err(e) => not_run(e.to_string()),
        Ok(answered) => {
            let j = &answered.judgment;
            let mut actual = format!("{:.3}", j.total);
            if !j.notes.is_empty() {
                actual.push_str(": ");
                actual.push_str(&j.notes);
            }
            if answered.cached {
                actual.push_str(" (cached answer)");
            }
            let mut checks = vec![judge_check(&rubric_name, j.total >= 1.0, actual)];
            for (criterion, score) in &j.scores {
                checks.push(Check {
                    name: format!("judge {criterion}"),
                    kind: CheckKind::Judge,
                    path: criterion.clone(),
                    passed: *score >= 1.0,
                    expected: "1.0".into(),
                    actual: format!("{score:.3}"),
                    diff: None,
                });
            }
            JudgePart {
                score: Some(j.total),
                checks,
            }
        }
    }
}

fn judge_check(rubric: &str, passed: bool, actual: String) -> Check {
    Check {
        name: format!("judge {rubric}"),
        kind: CheckKind::Judge,
        path: rubric.to_string(),
        passed,
        expected: "a score of 1.0 from the judge".into(),
        actual,
        diff: None,
    }
}

/// The prompt for `run`: the task's prompts, its expected behaviour, the transcript's summary,
/// the rubric, the files asked for.
pub fn build_prompt(spec: &JudgeSpec, run: &Run<'_>) -> Result<String, String> {
    let task_text = |name: &str| -> Result<String, String> {
        let path = task_text_path(&run.task.dir, name).map_err(|e| e.to_string())?;
        std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    };
    let rubric = task_text(&spec.rubric)?;
    let expected = match &spec.expected_behavior {
        Some(name) => task_text(name)?,
        None => String::new(),
    };
    let summary = match run.transcript {
        Some(path) if path.exists() => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read the transcript {}: {e}", path.display()))?;
            prompt::summarize(&text)
        }
        _ => String::new(),
    };
    let files = match run.workspace {
        Some(root) => shown_files(root, &spec.files)?,
        None => Vec::new(),
    };
    Ok(prompt::build(
        &run.task.turns.join("\n\n"),
        expected.trim(),
        &summary,
        rubric.trim(),
        &files,
    ))
}

/// The workspace files the judge is shown, each read beneath `root` (never through a link,
/// never a special file), at most [`prompt::FILE_CHARS`] characters of it.
fn shown_files(root: &Path, paths: &[String]) -> Result<Vec<prompt::ShownFile>, String> {
    if paths.is_empty() {
        return Ok(Vec::new());
    }
    let dir = crate::workspace::tree::open_root(root).map_err(|e| e.to_string())?;
    Ok(paths
        .iter()
        .map(|path| prompt::ShownFile {
            path: path.clone(),
            text: read_beneath(&dir, path),
        })
        .collect())
}

fn read_beneath(dir: &impl AsFd, path: &str) -> Result<String, String> {
    let name = std::ffi::CString::new(path).map_err(|_| "a NUL in the path".to_string())?;
    // As the file tools open one name: beneath the workspace, no link at all.
    let resolve = crate::tools::fs::ONE_NAME;
    let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOFOLLOW | OFlag::O_NOCTTY;
    let fd =
        crate::sys::openat2(dir.as_fd(), &name, flags.bits(), 0, resolve).map_err(|e| {
            match e.raw_os_error() {
                Some(libc::ENOENT) => "missing".to_string(),
                Some(libc::ELOOP | libc::EXDEV) => "a symbolic link: not shown".to_string(),
                _ => format!("not readable: {e}"),
            }
        })?;
    let st = nix::sys::stat::fstat(&fd).map_err(|e| format!("not readable: {e}"))?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err("not a regular file: not shown".into());
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take((prompt::FILE_CHARS * 4) as u64)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("not readable: {e}"))?;
    let text = String::from_utf8_lossy(&bytes);
    let mut shown: String = text.chars().take(prompt::FILE_CHARS).collect();
    if text.chars().nth(prompt::FILE_CHARS).is_some() || (bytes.len() as i64) < st.st_size {
        shown.push_str(&format!("\n[… cut: the file has {} bytes]", st.st_size));
    }
    Ok(shown)
}
