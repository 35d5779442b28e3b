//! ClawGym tasks: a folder `task_NNNN/` holding `data_entry.json` (`task_id`, `user_query`,
//! `input_mount_dir`, `metadata`), `input_files/` (the initial workspace) and `reward/`
//! (`reward.sh` and `check.py`, copied in only after the agent finished; the last line
//! `reward.sh` prints is the reward, 120 s allowed).
//!
//! Each becomes `clawgym-ID/`: `files/` = `input_files/` verbatim; `tasks/ID/task.toml` with
//! `prompt` = `user_query` byte for byte and a `command` verifier running `bash
//! reward/reward.sh` with `reward/` = `tasks/ID/grader/` (`grader_dir = "reward"`), as the
//! ClawGym harness does; `tasks/ID/data_entry.json` verbatim and `tasks/ID/source.json`.
//! There is no reference solution (ClawGym ships none).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::source::{SourceKind, SourceRoot};
use super::{
    Content, EnvPlan, ImportError, Planned, PlannedFile, docs_md, env_toml, need_notes,
    plan_copy_tree, prompt_toml, sorted, source_table, unmet_needs,
};

/// The most bytes a `data_entry.json` may hold.
pub const MAX_ENTRY_BYTES: u64 = 16 << 20;

pub const ORIGIN: &str = "ClawGym";
/// ClawGym-Agents' license (its `LICENSE`, copied along when the source has it).
pub const LICENSE: &str = "Apache-2.0";
/// Where ClawGym mounts the workspace; envcraft's policies show it there too.
pub const MOUNT_DIR: &str = "/root/.openclaw/workspace";
/// ClawGym's time limit for `reward.sh`.
pub const GRADER_TIMEOUT_SECS: u64 = 120;

/// Plan every task under `src`: `src` itself when it is a task folder, else each of its
/// subdirectories holding `data_entry.json` (or named `task_*`), sorted by name. A link or a
/// special file where a task folder would be is refused (listed with its reason).
pub fn plan_all(src: &Path) -> Result<Vec<Planned>, ImportError> {
    if src.join("data_entry.json").is_file() {
        let id = super::dir_name(src);
        return Ok(vec![(id, plan_task(src))]);
    }
    let root = SourceRoot::open(src)?;
    let read_err = |source| ImportError::Read {
        path: src.to_path_buf(),
        source,
    };
    let mut names: Vec<String> = Vec::new();
    for entry in std::fs::read_dir(root.path()).map_err(read_err)? {
        let name = entry.map_err(read_err)?.file_name();
        names.push(name.to_string_lossy().into_owned());
    }
    names.sort();
    let mut planned = Vec::new();
    for name in names {
        let rel = Path::new(&name);
        let kind = root.probe(&name, rel)?;
        let has_entry = || {
            root.probe(&name, &rel.join("data_entry.json"))
                .map(|k| k.is_some())
        };
        match kind {
            Some(SourceKind::Dir) if name.starts_with("task_") || has_entry()? => {
                let plan = plan_task_at(&root, rel, &name);
                planned.push((name, plan));
            }
            Some(SourceKind::Refused(kind)) if name.starts_with("task_") => {
                let refused = ImportError::LinkOrSpecial {
                    task: name.clone(),
                    path: root.display(rel),
                    kind,
                };
                planned.push((name, Err(refused)));
            }
            _ => {}
        }
    }
    if planned.is_empty() {
        return Err(ImportError::NoTasks {
            path: src.to_path_buf(),
            format: "ClawGym",
            expected: "a task folder holding data_entry.json, or a folder of them (task_NNNN/)",
        });
    }
    Ok(planned)
}

/// Plan the import of the one ClawGym task in `dir`.
pub fn plan_task(dir: &Path) -> Result<EnvPlan, ImportError> {
    let (parent, name) = super::split_single(dir);
    let root = SourceRoot::open(&parent)?;
    plan_task_at(&root, &name, &super::dir_name(dir))
}

/// What a ClawGym `data_entry.json` says, checked (the planner then looks at the task's
/// folder: `reward/`, `input_files/`, the licence).
#[derive(Debug, Clone, PartialEq)]
pub struct DataEntry {
    /// `task_id`: a plain name.
    pub id: String,
    /// `user_query`, byte for byte.
    pub prompt: String,
    /// `metadata`, or null.
    pub metadata: Value,
}

impl DataEntry {
    /// Parse and check `text`, the content of `entry_path` (nothing is read from disk).
    pub fn parse(entry_path: &Path, text: &str) -> Result<DataEntry, ImportError> {
        let format_err = |problem: String, expected: &str| ImportError::Format {
            path: entry_path.to_path_buf(),
            line: None,
            problem,
            expected: expected.to_string(),
        };
        let entry: Value = serde_json::from_str(text).map_err(|e| ImportError::Format {
            path: entry_path.to_path_buf(),
            line: Some(e.line()),
            problem: e.to_string(),
            expected: "a JSON object".into(),
        })?;
        let string_field = |key: &str| -> Result<String, ImportError> {
            match entry.get(key) {
                Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
                Some(other) => Err(format_err(
                    format!("`{key}` is {other}"),
                    "a non-empty string",
                )),
                None => Err(format_err(
                    format!("`{key}` is missing"),
                    "a non-empty string",
                )),
            }
        };
        let id = string_field("task_id")?;
        if !super::is_plain_name(&id) {
            return Err(ImportError::Unrepresentable {
                path: entry_path.to_path_buf(),
                reason: format!(
                    "task_id `{id}` cannot name a directory (1 to 128 ASCII letters, digits, `-`, `_` or `.`)"
                ),
            });
        }
        let prompt = string_field("user_query")?;
        let mount = match entry.get("input_mount_dir") {
            None => MOUNT_DIR.to_string(),
            Some(Value::String(s)) => s.clone(),
            Some(other) => {
                return Err(format_err(
                    format!("`input_mount_dir` is {other}"),
                    "a path string",
                ));
            }
        };
        if mount.trim_end_matches('/') != MOUNT_DIR {
            return Err(ImportError::Unrepresentable {
                path: entry_path.to_path_buf(),
                reason: format!(
                    "the workspace is mounted at `{mount}`; envcraft shows it at /workspace and {MOUNT_DIR} only"
                ),
            });
        }
        let metadata = entry.get("metadata").cloned().unwrap_or(Value::Null);
        Ok(DataEntry {
            id,
            prompt,
            metadata,
        })
    }
}

/// Plan the ClawGym task at `dir` below `root`; `task` names it in errors.
fn plan_task_at(root: &SourceRoot, dir: &Path, task: &str) -> Result<EnvPlan, ImportError> {
    let entry_rel = dir.join("data_entry.json");
    let entry_path = root.display(&entry_rel);
    let text = root.read_text(task, &entry_rel, MAX_ENTRY_BYTES)?;
    let DataEntry {
        id,
        prompt,
        metadata,
    } = DataEntry::parse(&entry_path, &text)?;

    let reward = dir.join("reward");
    match root.probe(task, &reward.join("reward.sh"))? {
        Some(SourceKind::File) => {}
        Some(SourceKind::Refused(kind)) => {
            return Err(ImportError::LinkOrSpecial {
                task: task.to_string(),
                path: root.display(&reward.join("reward.sh")),
                kind,
            });
        }
        _ => {
            return Err(ImportError::Format {
                path: root.display(dir),
                line: None,
                problem: "has no reward/reward.sh".into(),
                expected: "a ClawGym task folder with reward/reward.sh (and the check it runs)"
                    .into(),
            });
        }
    }
    let inputs = dir.join("input_files");
    let inputs_dir = match root.probe(task, &inputs)? {
        Some(SourceKind::Dir) => true,
        Some(SourceKind::Refused(kind)) => {
            return Err(ImportError::LinkOrSpecial {
                task: task.to_string(),
                path: root.display(&inputs),
                kind,
            });
        }
        Some(SourceKind::File) => {
            return Err(ImportError::Format {
                path: root.display(&inputs),
                line: None,
                problem: "input_files is a file".into(),
                expected: "a directory of the task's initial workspace".into(),
            });
        }
        None => false,
    };
    if inputs_dir && root.probe(task, &inputs.join("reward"))?.is_some() {
        return Err(ImportError::Unrepresentable {
            path: root.display(&inputs.join("reward")),
            reason: "the workspace already has a reward/ directory, where the grader's files \
                     must appear"
                .into(),
        });
    }

    let env = format!("clawgym-{id}");
    let task_dir = PathBuf::from("tasks").join(&id);
    let needs = unmet_needs(&prompt);
    let mut notes = need_notes(&needs);
    if let Some(kind) = metadata.get("grading_type").and_then(Value::as_str)
        && kind != "automated"
    {
        notes.push(format!(
            "metadata.grading_type is `{kind}`; only reward/reward.sh is run"
        ));
    }

    let mut files = vec![
        PlannedFile {
            path: "env.toml".into(),
            content: Content::Text(env_toml(
                &env,
                &format!("ClawGym task {id}, imported unchanged"),
            )),
        },
        PlannedFile {
            path: "docs.md".into(),
            content: Content::Text(docs_md(ORIGIN, &id, LICENSE, &notes)),
        },
        PlannedFile {
            path: task_dir.join("task.toml"),
            content: Content::Text(task_toml(&prompt, &id)),
        },
        PlannedFile {
            path: task_dir.join("data_entry.json"),
            content: Content::Copy(root.file(&entry_rel)),
        },
        PlannedFile {
            path: task_dir.join("source.json"),
            content: Content::Text(source_json(&id, &metadata, &needs, &notes)),
        },
    ];
    let license = dir.parent().unwrap_or(Path::new("")).join("LICENSE");
    match root.probe(task, &license)? {
        Some(SourceKind::File) => files.push(PlannedFile {
            path: "LICENSE".into(),
            content: Content::Copy(root.file(&license)),
        }),
        Some(SourceKind::Refused(kind)) => {
            return Err(ImportError::LinkOrSpecial {
                task: task.to_string(),
                path: root.display(&license),
                kind,
            });
        }
        _ => {}
    }
    if inputs_dir {
        plan_copy_tree(root, task, &inputs, Path::new("files"), &mut files)?;
    }
    plan_copy_tree(root, task, &reward, &task_dir.join("grader"), &mut files)?;
    Ok(EnvPlan {
        env,
        task: id,
        files: sorted(files),
        unmet_needs: needs,
        notes,
        image: None,
        provision: None,
    })
}

/// `task.toml`: the prompt as it is, `reward.sh` as the verifier, where it came from.
pub fn task_toml(prompt: &str, id: &str) -> String {
    format!(
        "{}\n[verifier]\n\
         # reward.sh runs check.py on /root/.openclaw/workspace (= /workspace) and prints the reward.\n\
         kind = \"command\"\n\
         command = \"bash reward/reward.sh\"\n\
         grader_dir = \"reward\"\n\
         timeout_secs = {GRADER_TIMEOUT_SECS}\n{}",
        prompt_toml(&[prompt.to_string()]),
        source_table(ORIGIN, id, LICENSE)
    )
}

fn source_json(id: &str, metadata: &Value, needs: &[(String, String)], notes: &[String]) -> String {
    let needs: Vec<Value> = needs
        .iter()
        .map(|(need, why)| json!({"need": need, "why": why}))
        .collect();
    let doc = json!({
        "format": "clawgym",
        "origin": ORIGIN,
        "id": id,
        "license": LICENSE,
        "input_mount_dir": MOUNT_DIR,
        "metadata": metadata,
        "grader": "reward/reward.sh, run after the agent finished with reward/ at /root/.openclaw/workspace/reward; its last stdout line is the reward (non-numeric: 0)",
        "unmet_needs": needs,
        "notes": notes,
    });
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_task_toml_keeps_the_prompt_and_names_the_source() {
        let prompt =
            "I’m organizing \"follow-ups\".\n\n- input/a.csv\\b\n All file paths are relative.";
        let text = task_toml(prompt, "task_0000");
        let table: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(table["prompt"].as_str().unwrap(), prompt);
        assert_eq!(
            table["verifier"]["command"].as_str().unwrap(),
            "bash reward/reward.sh"
        );
        assert_eq!(table["verifier"]["grader_dir"].as_str().unwrap(), "reward");
        assert_eq!(table["source"]["id"].as_str().unwrap(), "task_0000");
        assert_eq!(table["source"]["license"].as_str().unwrap(), "Apache-2.0");
    }

    #[test]
    fn a_task_mounted_elsewhere_is_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("reward")).unwrap();
        std::fs::write(dir.path().join("reward/reward.sh"), "echo 1\n").unwrap();
        std::fs::write(
            dir.path().join("data_entry.json"),
            r#"{"task_id": "t1", "user_query": "q", "input_mount_dir": "/data"}"#,
        )
        .unwrap();
        let err = plan_task(dir.path()).unwrap_err();
        assert!(err.to_string().contains("mounted at `/data`"), "{err}");
        std::fs::write(
            dir.path().join("data_entry.json"),
            r#"{"task_id": "t1", "user_query": "q"}"#,
        )
        .unwrap();
        let plan = plan_task(dir.path()).unwrap();
        assert_eq!(plan.env, "clawgym-t1");
        assert!(
            plan.files
                .iter()
                .any(|f| f.path == Path::new("tasks/t1/grader/reward.sh"))
        );
    }
}
