//! The rubric inspection of EnvCraft's data pipeline: an LLM reads a task whole (its prompts,
//! its environment's docs and tools, its initial files, its verifier, its reference solution)
//! and scores three dimensions from 0 to 3: whether the task can be solved from what the agent
//! is given (`task_solvability`), whether its verifier checks what the prompt asks and nothing
//! else, without a way around it (`validation_integrity`), and whether the prompt, the files
//! and the verifier's expectations agree (`data_consistency`). A task is kept when the scores
//! are 3, 3 and at least 2.
//!
//! What is shown is bounded ([`SHOWN_BYTES`] a file, [`TOTAL_BYTES`] in all) and read from the
//! task's own directories without following a link: a task file that is a link (to a host
//! file, say) is named, never read.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde_json::{Value, json};

use crate::spec::task::TaskSpec;
use crate::verify::judge::Endpoint;

/// The most bytes of one file shown.
pub const SHOWN_BYTES: usize = 4 * 1024;
/// The most bytes of files shown in all.
pub const TOTAL_BYTES: usize = 48 * 1024;
/// The most files listed per directory tree.
const LISTED_FILES: usize = 200;

/// The three scores, and the keep rule's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspection {
    pub task_solvability: u8,
    pub validation_integrity: u8,
    pub data_consistency: u8,
    pub notes: String,
}

impl Inspection {
    /// EnvCraft's keep rule: solvability 3, integrity 3, consistency at least 2.
    pub fn kept(&self) -> bool {
        self.task_solvability == 3 && self.validation_integrity == 3 && self.data_consistency >= 2
    }

    pub fn scores(&self) -> Value {
        json!({
            "task_solvability": self.task_solvability,
            "validation_integrity": self.validation_integrity,
            "data_consistency": self.data_consistency,
            "kept": self.kept(),
            "notes": self.notes,
        })
    }
}

/// Inspect `task` with `endpoint`: the scores, or why there are none.
pub fn inspect(task: &TaskSpec, endpoint: &Endpoint) -> Result<Inspection, String> {
    let prompt = prompt(task);
    endpoint
        .ask_as(&prompt, read)
        .map(|answered| answered.judgment)
        .map_err(|e| e.to_string())
}

/// Read the reviewer's answer: the JSON object (alone, fenced, or the last one in the text)
/// with the three scores as integers from 0 to 3.
pub fn read(text: &str) -> Result<Inspection, String> {
    let start = text.find('{').ok_or("the answer holds no JSON object")?;
    let end = text.rfind('}').ok_or("the answer holds no JSON object")?;
    let object: Value = serde_json::from_str(text.get(start..=end).unwrap_or_default())
        .map_err(|e| format!("the answer's JSON does not parse: {e}"))?;
    let score = |key: &str| -> Result<u8, String> {
        let value = object.get(key).map(|v| v.get("score").unwrap_or(v));
        match value.and_then(Value::as_u64) {
            Some(n) if n <= 3 => Ok(n as u8),
            _ => Err(format!(
                "`{key}` is {}; expected an integer from 0 to 3",
                value
                    .map(Value::to_string)
                    .unwrap_or_else(|| "missing".into())
            )),
        }
    };
    Ok(Inspection {
        task_solvability: score("task_solvability")?,
        validation_integrity: score("validation_integrity")?,
        data_consistency: score("data_consistency")?,
        notes: object
            .get("notes")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    })
}

/// What the reviewer is asked.
pub fn prompt(task: &TaskSpec) -> String {
    let mut budget = TOTAL_BYTES;
    let mut out = String::from(
        "You review one task of an agent benchmark before it is used to train agents with \
         reinforcement learning. The agent works in a workspace of files with the tools listed, \
         is given the prompt(s), and is scored by the verifier afterwards.\n\n\
         Score three dimensions, each an integer from 0 (worst) to 3 (best):\n\
         - task_solvability: the task can be solved from the prompt, the workspace files and the \
         offered tools alone; everything needed is there and the request is unambiguous.\n\
         - validation_integrity: the verifier checks exactly what the prompt asks: it accepts \
         every correct solution, rejects wrong, partial or trivial ones, and cannot be passed \
         without doing the task.\n\
         - data_consistency: the prompt, the files and the verifier's expectations agree with \
         each other (names, numbers, formats, dates).\n\n",
    );
    for (i, turn) in task.turns.iter().enumerate() {
        out.push_str(&format!("## Prompt (turn {})\n{turn}\n\n", i + 1));
    }
    out.push_str(&format!(
        "## Tools offered\n{}\n\n",
        task.env.tools.join(", ")
    ));
    if let Some(docs) = read_bounded(&task.env.dir.join("docs.md"), &mut budget) {
        out.push_str(&format!("## Environment docs\n{docs}\n\n"));
    }
    out.push_str("## Initial workspace files\n");
    for root in std::iter::once(&task.env.files).chain(task.files.as_ref()) {
        out.push_str(&files_section(root, &mut budget));
    }
    let verifier = &task.verifier;
    out.push_str(&format!(
        "\n## Verifier\nkind: {:?}; all_or_nothing: {}; command: {}\n",
        verifier.kind,
        verifier.all_or_nothing,
        verifier.command.as_deref().unwrap_or("none")
    ));
    if verifier.has_manifest()
        && let Some(text) = read_bounded(&task.dir.join("expected.json"), &mut budget)
    {
        out.push_str(&format!("### expected.json\n{text}\n"));
    }
    let grader = task.dir.join("grader");
    if grader.is_dir() {
        out.push_str("### grader files\n");
        out.push_str(&files_section(&grader, &mut budget));
    }
    if let Some(judge) = &verifier.judge
        && let Some(text) = read_bounded(&task.dir.join(&judge.rubric), &mut budget)
    {
        out.push_str(&format!("### judge rubric\n{text}\n"));
    }
    if let Some(solution) = &task.solution
        && let Some(text) = read_bounded(solution, &mut budget)
    {
        out.push_str(&format!("\n## Reference solution (tool calls)\n{text}\n"));
    }
    out.push_str(
        "\nRespond with ONLY this JSON object (no markdown, no extra text):\n\
         {\"task_solvability\": 0, \"validation_integrity\": 0, \"data_consistency\": 0, \
         \"notes\": \"one or two sentences on the weakest dimension\"}",
    );
    out
}

/// Each file under `root` (sorted, at most [`LISTED_FILES`]): its path and size, and the text
/// of small regular files while the budget lasts; links are named, never followed.
fn files_section(root: &Path, budget: &mut usize) -> String {
    let mut out = String::new();
    let walk = walkdir::WalkDir::new(root)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.depth() > 0 && !e.file_type().is_dir());
    for (n, entry) in walk.enumerate() {
        if n == LISTED_FILES {
            out.push_str("- … (more files not listed)\n");
            break;
        }
        let rel = entry
            .path()
            .strip_prefix(root)
            .unwrap_or(entry.path())
            .display()
            .to_string();
        if !entry.file_type().is_file() {
            out.push_str(&format!("- {rel} (not a regular file: not shown)\n"));
            continue;
        }
        let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
        match read_bounded(entry.path(), budget) {
            Some(text) => out.push_str(&format!("- {rel} ({size} bytes):\n```\n{text}\n```\n")),
            None => out.push_str(&format!("- {rel} ({size} bytes)\n")),
        }
    }
    out
}

/// The start of the regular file at `path` (never through a link) as text, charged to
/// `budget`; `None` when it is not text, not readable or the budget is spent.
fn read_bounded(path: &Path, budget: &mut usize) -> Option<String> {
    if *budget == 0 {
        return None;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let limit = SHOWN_BYTES.min(*budget);
    let mut bytes = Vec::new();
    file.take(limit as u64 + 1).read_to_end(&mut bytes).ok()?;
    let cut = bytes.len() > limit;
    bytes.truncate(limit);
    if bytes.contains(&0) {
        return None;
    }
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if cut {
        text.push_str("\n[… cut]");
    }
    *budget -= bytes.len();
    Some(text)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn scores_are_integers_from_0_to_3_and_the_keep_rule_is_3_3_2() {
        let answer = read("```json\n{\"task_solvability\": 3, \"validation_integrity\": {\"score\": 3}, \"data_consistency\": 2, \"notes\": \"fine\"}\n```").unwrap();
        assert!(answer.kept());
        assert_eq!(answer.notes, "fine");
        let weak =
            read(r#"{"task_solvability": 3, "validation_integrity": 2, "data_consistency": 3}"#)
                .unwrap();
        assert!(!weak.kept());
        for bad in [
            "no json",
            r#"{"task_solvability": 4, "validation_integrity": 3, "data_consistency": 3}"#,
            r#"{"task_solvability": 2.5, "validation_integrity": 3, "data_consistency": 3}"#,
            r#"{"validation_integrity": 3, "data_consistency": 3}"#,
        ] {
            assert!(read(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn files_are_shown_bounded_and_links_never_followed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "hello").unwrap();
        std::fs::write(dir.path().join("big.txt"), "x".repeat(SHOWN_BYTES * 2)).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", dir.path().join("link")).unwrap();
        let mut budget = TOTAL_BYTES;
        let shown = files_section(dir.path(), &mut budget);
        assert!(
            shown.contains("- a.txt (5 bytes):\n```\nhello\n```"),
            "{shown}"
        );
        assert!(shown.contains("[… cut]"), "{shown}");
        assert!(
            shown.contains("- link (not a regular file: not shown)"),
            "{shown}"
        );
        assert_eq!(budget, TOTAL_BYTES - 5 - SHOWN_BYTES);
        let mut spent = 0;
        assert_eq!(read_bounded(&dir.path().join("a.txt"), &mut spent), None);
    }
}
