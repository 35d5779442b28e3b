//! The fuzz targets: one entry per parser an outsider can feed, from bytes, with no disk.
//! `fuzz/fuzz_targets/<name>.rs` (cargo-fuzz, nightly) and `tests/fuzz_regressions.rs` (the
//! saved corpus, stable, in `make test`) both call [`TARGETS`], so what is fuzzed is what the
//! regression test replays and what the loaders run: each entry calls the same parse
//! functions the loaders, importers and HTTP handlers call on the text they read.
//!
//! Promise of every entry: it returns, whatever the bytes (no panic, no hang, no unbounded
//! allocation); a parser's refusal is an `Err`, never a panic. Where a parse succeeds, the
//! entry also runs what the program runs next on the result when that is text-only (an
//! imported task's `task.toml` must load as a task, an `expected.json` written back must read
//! back): a failure there is a bug of the program, and the entry panics to report it.
//!
//! Text formats take UTF-8 (the loaders refuse anything else before parsing); other bytes
//! return at once.

use std::path::Path;

use crate::import::clawgym::{self, DataEntry};
use crate::import::pinchbench::DocumentPlan;
use crate::import::{Content, PlannedFile};
use crate::server::inline;
use crate::server::requests::{self, CallRequest, CreateRequest};
use crate::session::trajectory;
use crate::spec::env::EnvToml;
use crate::spec::policy::Policy;
use crate::spec::skill::{SkillDoc, SkillToml};
use crate::spec::task::TaskToml;
use crate::tools::patch;
use crate::verify::Expected;

/// A fuzz target: its name (the directory of its corpus, `fuzz/seeds/<name>/`) and its entry.
pub type Target = (&'static str, fn(&[u8]));

/// Every fuzz target, by name.
pub const TARGETS: &[Target] = &[
    ("policy_toml", policy_toml),
    ("env_toml", env_toml),
    ("task_toml", task_toml),
    ("skill_toml", skill_toml),
    ("skill_md", skill_md),
    ("expected_json", expected_json),
    ("trajectory", trajectory_jsonl),
    ("pinchbench_task", pinchbench_task),
    ("patch", patch_text),
    ("clawgym_entry", clawgym_entry),
    ("http_create", http_create),
    ("http_call", http_call),
];

/// The entry of the target `name`.
pub fn target(name: &str) -> Option<fn(&[u8])> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// A policy file (`policies/NAME.toml`, or a path an environment names).
pub fn policy_toml(data: &[u8]) {
    if let Some(text) = text(data) {
        let _ = Policy::parse("fuzz", "policies/fuzz.toml", text);
    }
}

/// An environment's `env.toml`.
pub fn env_toml(data: &[u8]) {
    if let Some(text) = text(data) {
        let _ = EnvToml::parse(Path::new("env.toml"), text);
    }
}

/// A task's `task.toml`.
pub fn task_toml(data: &[u8]) {
    if let Some(text) = text(data) {
        let _ = TaskToml::parse(Path::new("task.toml"), text);
    }
}

/// A skill's `skill.toml`.
pub fn skill_toml(data: &[u8]) {
    if let Some(text) = text(data) {
        let _ = SkillToml::parse(Path::new("skill.toml"), text);
    }
}

/// A skill's `SKILL.md` (its front matter).
pub fn skill_md(data: &[u8]) {
    if let Some(text) = text(data) {
        let _ = SkillDoc::parse(Path::new("SKILL.md"), text);
    }
}

/// A task's `expected.json`; what it reads is written back and must read back.
pub fn expected_json(data: &[u8]) {
    let Some(text) = text(data) else { return };
    if let Ok(expected) = Expected::from_json(text) {
        let written = expected.to_json();
        if let Err(e) = Expected::from_json(&written) {
            panic!("expected.json written back does not read back: {e}\n{written}");
        }
    }
}

/// A trajectory (`envcraft replay`, a task's `solution.jsonl`).
pub fn trajectory_jsonl(data: &[u8]) {
    if let Some(text) = text(data) {
        let _ = trajectory::parse(Path::new("trajectory.jsonl"), text);
    }
}

/// A PinchBench task file (front matter and sections) as the importer plans it; the
/// `task.toml` it plans must load as a task.
pub fn pinchbench_task(data: &[u8]) {
    let Some(text) = text(data) else { return };
    if let Ok(plan) = DocumentPlan::of(Path::new("task.md"), text) {
        for file in &plan.files {
            check_planned_task_toml(file);
        }
    }
}

/// A patch (`apply_patch`'s input, either format), applied to the patch's own text and to the
/// old side of its hunks.
pub fn patch_text(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let Ok(changes) = patch::parse(text) else {
        return;
    };
    for change in &changes {
        let hunks = match change {
            patch::FileChange::Add { .. } => continue,
            patch::FileChange::Delete { hunks, .. } | patch::FileChange::Update { hunks, .. } => {
                hunks
            }
        };
        let old: Vec<u8> = hunks
            .iter()
            .flat_map(|h| h.lines.iter())
            .filter_map(|line| match line {
                patch::HunkLine::Context(t) | patch::HunkLine::Remove(t) => Some(t),
                patch::HunkLine::Add(_) => None,
            })
            .flat_map(|line| line.bytes().chain(std::iter::once(b'\n')))
            .collect();
        for original in [data, old.as_slice()] {
            let _ = patch::apply_hunks(original, hunks);
            let _ = patch::check_delete(original, hunks);
        }
    }
}

/// A ClawGym `data_entry.json` as the importer reads it; the `task.toml` it writes from it
/// must load as a task.
pub fn clawgym_entry(data: &[u8]) {
    let Some(text) = text(data) else { return };
    if let Ok(entry) = DataEntry::parse(Path::new("data_entry.json"), text) {
        let toml = clawgym::task_toml(&entry.prompt, &entry.id);
        if let Err(e) = TaskToml::parse(Path::new("task.toml"), &toml) {
            panic!("the imported task.toml does not load: {e}\n{toml}");
        }
    }
}

/// The body of `POST /v1/sessions`, and of an inline task in it: its `task.toml` as the server
/// writes it, then parsed, and its `expected.json`.
pub fn http_create(data: &[u8]) {
    let Ok(map) = requests::object(data) else {
        return;
    };
    let Ok(request) = CreateRequest::parse(&map) else {
        return;
    };
    if let serde_json::Value::Object(task) = &request.task {
        if let Ok(toml) = inline::task_toml(task) {
            let _ = TaskToml::parse(Path::new("task.toml"), &toml);
        }
        if let Some(expected) = task.get("expected") {
            let _ = Expected::from_json(&expected.to_string());
        }
    }
}

/// The body of `POST /v1/sessions/{id}/call`.
pub fn http_call(data: &[u8]) {
    if let Ok(map) = requests::object(data) {
        let _ = CallRequest::parse(&map);
    }
}

/// A planned `task.toml` (an importer's output) must load as a task.
fn check_planned_task_toml(file: &PlannedFile) {
    if file.path.file_name().is_some_and(|n| n == "task.toml")
        && let Content::Text(toml) = &file.content
        && let Err(e) = TaskToml::parse(Path::new("task.toml"), toml)
    {
        panic!("the imported task.toml does not load: {e}\n{toml}");
    }
}
