//! `envcraft view`: one self-contained HTML page of a run, for a person debugging a task: a
//! session kept with `run --keep DIR` (its turns, tool calls, workspace diff, checks and
//! timings), a `run --json` report, or a suite run's `suite --json` object (a table per
//! environment, a link per task).
//!
//! What a run holds is the agent's: every string is escaped ([`html`]), every file is read
//! beneath the kept directory without following a link ([`kept`]), every read and every list is
//! bounded with a note of what was left out, and bytes that are not UTF-8 are shown as `\xNN`.
//! The page loads nothing (its Content-Security-Policy allows only its own inline style, see
//! [`page`]) and runs no script.
//!
//! - [`html`]: escaping, links from paths, bounded text;
//! - [`page`]: the document around a view, its style and policy;
//! - [`kept`]: reading a kept run's directory;
//! - [`turns`]: turns and tool calls from a transcript or from `run --json`'s actions;
//! - [`diff`]: the line diff;
//! - [`changes`]: the workspace diff section;
//! - [`session`]: a run's page; [`suite`]: a suite's page.

pub mod changes;
pub mod diff;
pub mod html;
pub mod kept;
pub mod page;
pub mod session;
pub mod suite;
pub mod turns;

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use self::kept::Kept;

/// The most bytes of a JSON file (`suite --json`, `run --json`) read.
pub const JSON_BYTES: usize = 256 << 20;
/// The most bytes of a kept run's transcript, report or change list read.
pub const KEPT_FILE_BYTES: usize = 64 << 20;

/// The name of the page `run --keep DIR` writes into DIR.
pub const PAGE_NAME: &str = "view.html";

/// Why there is no page.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    #[error("cannot open {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is {size} bytes, more than the {max} a view reads")]
    TooLarge { path: PathBuf, size: u64, max: u64 },
    #[error("{0} is not a regular file")]
    NotAFile(PathBuf),
    #[error("{path} is not JSON")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "{0} is not a run: expected a directory kept by `envcraft run --keep` (transcript.jsonl, changes.json, report.json), or the JSON of `envcraft suite --json` or `envcraft run --json`"
    )]
    NotARun(PathBuf),
}

/// The page of `path`: a kept run's directory, or a `suite --json` / `run --json` file.
/// `page_dir` is where the page will be written (links to a suite's kept runs are made
/// relative to it; without it they are absolute `file://` links).
pub fn render(path: &Path, page_dir: Option<&Path>) -> Result<String, ViewError> {
    if path.is_dir() {
        return kept_page(path);
    }
    let bytes = read_bounded(path, JSON_BYTES)?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|source| ViewError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    if value["tasks"].is_array() && value["totals"].is_object() {
        let kept_root = value["kept"].as_str().map(|k| {
            // A relative `kept` is relative to the JSON file's directory.
            let base = path.parent().unwrap_or(Path::new("."));
            absolute(&base.join(k))
        });
        return Ok(suite_page(&value, kept_root.as_deref(), page_dir));
    }
    if value["actions"].is_array() && value["task"].is_string() {
        let actions = value["actions"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let turns = turns::from_actions(actions);
        let run = session::Run {
            report: &value,
            turns: &turns,
            changes: &value["changes"],
            kept: None,
        };
        return Ok(session::page(&run));
    }
    Err(ViewError::NotARun(path.to_path_buf()))
}

/// The page of a directory kept by `run --keep`.
pub fn kept_page(dir: &Path) -> Result<String, ViewError> {
    let kept = Kept::open(dir)?;
    let json = |name: &str| -> Result<Option<Value>, ViewError> {
        match kept.file(name, KEPT_FILE_BYTES)? {
            None => Ok(None),
            Some(bytes) => {
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|source| ViewError::Json {
                        path: dir.join(name),
                        source,
                    })
            }
        }
    };
    let report = json("report.json")?;
    let changes = json("changes.json")?;
    // A transcript is bounded by its policy (`transcript_bytes`), which may allow more than a
    // page reads: then its head is shown, with a note.
    let (transcript, transcript_cut) = match kept.entry("transcript.jsonl", KEPT_FILE_BYTES) {
        Some(kept::Entry::File { size, head }) => {
            let cut = size > head.len() as u64;
            (Some(head), cut)
        }
        Some(_) => return Err(ViewError::NotAFile(dir.join("transcript.jsonl"))),
        None => (None, false),
    };
    if report.is_none() && changes.is_none() && transcript.is_none() {
        return Err(ViewError::NotARun(dir.to_path_buf()));
    }
    let report = report.unwrap_or(Value::Null);
    let mut turns = transcript
        .map(|t| turns::from_transcript(&html::lossless(&t)))
        .unwrap_or_default();
    if transcript_cut {
        let note = turns::Item::Event(format!(
            "the transcript past its first {} is not shown",
            html::size(KEPT_FILE_BYTES as u64)
        ));
        match turns.last_mut() {
            Some(turn) => turn.items.push(note),
            None => turns.push(turns::Turn {
                prompt: None,
                items: vec![note],
            }),
        }
    }
    // The calls' times, in the order of the calls (a replay's: an agent's run has none).
    let times: Vec<Option<u64>> = report["call_us"]
        .as_array()
        .into_iter()
        .flatten()
        .map(Value::as_u64)
        .collect();
    // A transcript cut at its limit holds the first calls only: their times are the first.
    if times.len() >= turns::calls_mut(&mut turns).count() {
        for (call, us) in turns::calls_mut(&mut turns).zip(times) {
            call.duration_us = us;
        }
    }
    let changes = changes.unwrap_or_else(|| report["changes"].clone());
    let run = session::Run {
        report: &report,
        turns: &turns,
        changes: &changes,
        kept: Some(&kept),
    };
    Ok(session::page(&run))
}

/// The page of a suite report; `kept_root` is where its runs were kept (`suite --keep`).
pub fn suite_page(report: &Value, kept_root: Option<&Path>, page_dir: Option<&Path>) -> String {
    let kept_root = kept_root.map(absolute);
    let link = |task: &Value| -> Option<String> {
        let root = kept_root.as_deref()?;
        let rel = task["kept"].as_str()?;
        let target = root.join(rel).join(PAGE_NAME);
        let shown = match page_dir {
            Some(dir) => relative(&absolute(dir), &target),
            None => target,
        };
        Some(html::href(&shown.to_string_lossy()))
    };
    suite::page(report, &link)
}

/// `path` made absolute (against the current directory) and `.`/`..` resolved lexically.
fn absolute(path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(path)
    };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The path of `to` seen from the directory `from` (both absolute).
fn relative(from: &Path, to: &Path) -> PathBuf {
    let f: Vec<Component> = from.components().collect();
    let t: Vec<Component> = to.components().collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::new();
    for _ in common..f.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c);
    }
    out
}

fn read_bounded(path: &Path, max: usize) -> Result<Vec<u8>, ViewError> {
    let read = |source| ViewError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(|source| ViewError::Open {
        path: path.to_path_buf(),
        source,
    })?;
    let meta = file.metadata().map_err(read)?;
    if !meta.is_file() {
        return Err(ViewError::NotAFile(path.to_path_buf()));
    }
    if meta.len() > max as u64 {
        return Err(ViewError::TooLarge {
            path: path.to_path_buf(),
            size: meta.len(),
            max: max as u64,
        });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max as u64)
        .read_to_end(&mut bytes)
        .map_err(read)?;
    Ok(bytes)
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
