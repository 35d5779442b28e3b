//! PinchBench tasks: one Markdown file per task, `tasks/ID.md`: YAML front matter (`id`,
//! `grading_type` automated | llm_judge | hybrid, `timeout_seconds`, `workspace_files` with
//! inline `content` or a `source` under `assets/`, optionally `sessions` and
//! `grading_weights`), a `## Prompt` section, `def grade(transcript, workspace_path) -> dict`
//! in a python block under `## Automated Checks` (the score is the mean of the dict's numbers)
//! and, for judged tasks, `## LLM Judge Rubric`.
//!
//! Each becomes `pinchbench-ID/`: `files/` = the workspace files; `tasks/ID/task.toml` with
//! the prompt byte for byte (`sessions` become `[[turns]]`); the grading code, verbatim, as
//! `tasks/ID/grader/grade.py` beside `run.py`, which calls it the way PinchBench's harness
//! does (the transcript JSONL from `$ENVCRAFT_TRANSCRIPT` as a list, the workspace path, the
//! mean of the numeric values) and prints the mean last. A judged task keeps its rubric
//! (`tasks/ID/rubric.md`); an `llm_judge`-only task's verifier says it needs a judge and
//! scores 0; a `hybrid` one scores its automated part, and `source.json` records the judge's
//! weight.
//!
//! The front matter is read by [`crate::spec::front_matter`], a bounded, linear-time reader of the
//! YAML subset PinchBench uses.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::source::{SourceKind, SourceRoot};
use super::{
    Content, EnvPlan, ImportError, Planned, PlannedFile, docs_md, env_toml, is_inner_path,
    need_notes, prompt_toml, sorted, source_table, unmet_needs,
};
use crate::spec::front_matter::{Document, Yaml, parse_document};

pub const ORIGIN: &str = "PinchBench";
/// pinchbench/skill's license (its `LICENSE`, copied along when the source has it).
pub const LICENSE: &str = "MIT";
/// Where the grader's files appear in the grader's workspace (hidden, so that a grader that
/// lists the workspace is least likely to notice them).
pub const GRADER_DIR: &str = ".pinchbench";
/// The most bytes a task file may hold.
pub const MAX_TASK_FILE_BYTES: u64 = 16 << 20;
/// The grader's time limit: PinchBench sets none for `grade()`; envcraft's default.
pub const GRADER_TIMEOUT_SECS: u64 = 120;

/// Runs `grade.py`'s `grade(transcript, workspace_path)` as PinchBench's harness does.
const RUN_PY: &str = r#"# Written by `envcraft import pinchbench`: runs grade.py's grade(transcript, workspace_path)
# as PinchBench's harness does (lib_grading._grade_automated) and prints the score last.
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def load_transcript():
    """The session's transcript (OpenClaw JSONL) as a list of events; [] when there is none."""
    path = os.environ.get("ENVCRAFT_TRANSCRIPT")
    events = []
    if path and os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    events.append(json.loads(line))
                except ValueError:
                    continue
    return events


def main():
    with open(os.path.join(HERE, "grade.py"), encoding="utf-8") as f:
        code = f.read()
    namespace = {}
    exec(code, namespace)
    grade = namespace.get("grade")
    if not callable(grade):
        print("grade.py defines no grade() function", file=sys.stderr)
        return 2
    workspace = os.environ.get("ENVCRAFT_WORKSPACE", "/workspace")
    scores = grade(load_transcript(), workspace)
    if not isinstance(scores, dict):
        scores = {}
    try:
        print(json.dumps(scores, default=str))
    except (TypeError, ValueError):
        pass
    # The mean of the numeric values, in the dict's order (PinchBench's _average_scores).
    values = [float(v) for v in scores.values() if isinstance(v, (int, float))]
    total = sum(values) / len(values) if values else 0.0
    print(repr(total))
    return 0


if __name__ == "__main__":
    sys.exit(main())
"#;

/// The verifier of an `llm_judge`-only task: no score without a judge, and it says so.
const JUDGE_PY: &str = r#"# Written by `envcraft import pinchbench`: this task is graded by an LLM judge only.
import sys

print("this PinchBench task needs an LLM judge (grading_type llm_judge); its rubric is in "
      "rubric.md beside this file and in the task's directory; envcraft gives it no score",
      file=sys.stderr)
sys.exit(3)
"#;

/// Plan every `*.md` task under `src`: `src/tasks/` when it exists (assets under
/// `src/assets/`), else `src` itself; `TASK_TEMPLATE.md` and `README.md` are not tasks. A task
/// file that is a link or a special file is refused (listed with its reason).
pub fn plan_all(src: &Path) -> Result<Vec<Planned>, ImportError> {
    if src.is_file() {
        let id = file_stem(src);
        return Ok(vec![(id, plan_task(src, &assets_root_of_file(src)))]);
    }
    let root = SourceRoot::open(src)?;
    let tasks_rel = match root.probe("tasks", Path::new("tasks"))? {
        Some(SourceKind::Dir) => PathBuf::from("tasks"),
        _ => PathBuf::new(),
    };
    let tasks_dir = root.display(&tasks_rel);
    let read_err = |source| ImportError::Read {
        path: tasks_dir.clone(),
        source,
    };
    let mut names: Vec<std::ffi::OsString> = Vec::new();
    for entry in std::fs::read_dir(&tasks_dir).map_err(read_err)? {
        names.push(entry.map_err(read_err)?.file_name());
    }
    names.sort();
    let mut planned = Vec::new();
    for name in names {
        let rel = tasks_rel.join(&name);
        let id = file_stem(&rel);
        if rel.extension().is_none_or(|e| e != "md")
            || matches!(id.as_str(), "TASK_TEMPLATE" | "README")
        {
            continue;
        }
        match root.probe(&id, &rel)? {
            Some(SourceKind::File) => {
                let plan = plan_task_at(&root, &rel, &id);
                planned.push((id, plan));
            }
            Some(SourceKind::Refused(kind)) => {
                let refused = ImportError::LinkOrSpecial {
                    task: id.clone(),
                    path: root.display(&rel),
                    kind,
                };
                planned.push((id, Err(refused)));
            }
            _ => {}
        }
    }
    if planned.is_empty() {
        return Err(ImportError::NoTasks {
            path: src.to_path_buf(),
            format: "PinchBench",
            expected: "a folder of task files (*.md), or one holding tasks/*.md",
        });
    }
    Ok(planned)
}

fn file_stem(path: &Path) -> String {
    path.file_stem()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Where a lone task file's `assets/` are: beside `tasks/` when the file is in one, else
/// beside the file.
pub fn assets_root_of_file(file: &Path) -> PathBuf {
    let parent = file.parent().unwrap_or(Path::new("."));
    match parent.file_name() {
        Some(name) if name == "tasks" => parent.parent().unwrap_or(parent).to_path_buf(),
        _ => parent.to_path_buf(),
    }
}

/// Plan the import of the PinchBench task file `path`; `root` holds its `assets/`.
pub fn plan_task(path: &Path, root: &Path) -> Result<EnvPlan, ImportError> {
    let task = file_stem(path);
    match path.strip_prefix(root) {
        Ok(rel) => plan_task_at(&SourceRoot::open(root)?, rel, &task),
        Err(_) => {
            let (parent, name) = super::split_single(path);
            plan_task_at(&SourceRoot::open(&parent)?, &name, &task)
        }
    }
}

/// What a PinchBench task file's text makes: its front matter and sections, and every planned
/// file that comes from the text alone (the planner then adds the copies from the task's
/// folder: the file itself, the licence, `workspace_files`).
#[derive(Debug)]
pub struct DocumentPlan {
    pub document: Document,
    pub env: String,
    pub id: String,
    pub files: Vec<PlannedFile>,
    pub needs: Vec<(String, String)>,
    pub notes: Vec<String>,
}

impl DocumentPlan {
    /// Plan from `text`, the content of the task file `path` (nothing is read from disk).
    pub fn of(path: &Path, text: &str) -> Result<DocumentPlan, ImportError> {
        let doc =
            parse_document(text).map_err(|(line, problem, expected)| ImportError::Format {
                path: path.to_path_buf(),
                line,
                problem,
                expected,
            })?;
        let fail = |problem: String, expected: &str| ImportError::Format {
            path: path.to_path_buf(),
            line: None,
            problem,
            expected: expected.to_string(),
        };
        let fm = &doc.front_matter;
        let id = match fm.get("id").and_then(Yaml::as_str) {
            Some(id) if !id.is_empty() => id.to_string(),
            _ => {
                return Err(fail(
                    "the front matter has no `id`".into(),
                    "`id: task_NN_name`",
                ));
            }
        };
        if !super::is_plain_name(&id) {
            return Err(ImportError::Unrepresentable {
                path: path.to_path_buf(),
                reason: format!("id `{id}` cannot name a directory"),
            });
        }
        let grading_type = fm
            .get("grading_type")
            .and_then(Yaml::as_str)
            .unwrap_or("automated")
            .to_string();
        if !matches!(grading_type.as_str(), "automated" | "llm_judge" | "hybrid") {
            return Err(fail(
                format!("`grading_type` is `{grading_type}`"),
                "automated, llm_judge or hybrid",
            ));
        }
        let timeout_seconds = fm.get("timeout_seconds").and_then(Yaml::as_str);

        // The prompts: `sessions` when there are any (as PinchBench's harness), else `## Prompt`.
        let mut notes = Vec::new();
        let mut turns = Vec::new();
        let mut new_sessions = Vec::new();
        match fm.get("sessions") {
            Some(Yaml::Seq(items)) if !items.is_empty() => {
                for (index, item) in items.iter().enumerate() {
                    let (prompt, new_session) = match item {
                        Yaml::Scalar(s) => (s.text.clone(), false),
                        Yaml::Map(_) => (
                            item.get("prompt")
                                .or_else(|| item.get("message"))
                                .and_then(Yaml::as_str)
                                .unwrap_or_default()
                                .to_string(),
                            item.get("new_session").and_then(Yaml::as_str) == Some("true"),
                        ),
                        Yaml::Seq(_) => {
                            return Err(fail(
                                format!("`sessions` item {} is a list", index + 1),
                                "a prompt string or a mapping with `prompt`",
                            ));
                        }
                    };
                    if prompt.trim().is_empty() {
                        return Err(ImportError::Unrepresentable {
                            path: path.to_path_buf(),
                            reason: format!(
                                "`sessions` item {} has no prompt; envcraft turns cannot be empty",
                                index + 1
                            ),
                        });
                    }
                    if new_session {
                        new_sessions.push(index + 1);
                    }
                    turns.push(prompt);
                }
            }
            _ => match doc.section("Prompt") {
                Some(p) if !p.trim().is_empty() => turns.push(p.trim().to_string()),
                _ => {
                    return Err(fail(
                        "there is no `## Prompt` section".into(),
                        "`## Prompt` with the request",
                    ));
                }
            },
        }
        if !new_sessions.is_empty() {
            notes.push(format!(
            "sessions {new_sessions:?} start a new conversation in PinchBench; envcraft's turns \
             keep one session (the workspace carries over in both)"
        ));
        }

        let rubric = doc
            .section("LLM Judge Rubric")
            .map(|r| r.trim().to_string());
        let code = doc.section("Automated Checks").and_then(grading_code);
        let judge_weight = match grading_type.as_str() {
            "automated" => 0.0,
            "llm_judge" => 1.0,
            _ => {
                let weight = |key: &str| {
                    fm.get("grading_weights")
                        .and_then(|w| w.get(key))
                        .and_then(Yaml::as_str)
                        .and_then(|s| s.parse::<f64>().ok())
                };
                let auto = weight("automated").unwrap_or(0.5);
                let judge = weight("llm_judge").unwrap_or(0.5);
                if auto + judge > 0.0 {
                    judge / (auto + judge)
                } else {
                    0.5
                }
            }
        };
        let (verifier_py, needs_judge) = match (grading_type.as_str(), &code) {
            ("llm_judge", _) => (None, true),
            (_, Some(code)) => (Some(code.clone()), false),
            (_, None) => {
                return Err(fail(
                    format!(
                        "grading_type is `{grading_type}` but `## Automated Checks` has no ```python block"
                    ),
                    "a ```python block defining grade(transcript, workspace_path)",
                ));
            }
        };
        if !code.as_deref().is_none_or(|c| c.contains("def grade")) {
            return Err(fail(
                "the `## Automated Checks` code defines no grade()".into(),
                "def grade(transcript, workspace_path) -> dict",
            ));
        }
        if needs_judge {
            notes.push(
            "graded by an LLM judge only: the rubric is kept in rubric.md; envcraft's verifier \
             gives no score without a judge (0, with that reason)"
                .into(),
        );
        } else if grading_type == "hybrid" {
            notes.push(format!(
                "hybrid: the reward is the automated part only; PinchBench adds an LLM judge with \
             weight {judge_weight} (rubric in rubric.md)"
            ));
        }
        if needs_judge || grading_type == "hybrid" {
            match &rubric {
                Some(r) if !r.is_empty() => {}
                _ => {
                    notes.push("the task is judged but has no `## LLM Judge Rubric` section".into())
                }
            }
        }

        let env = format!("pinchbench-{id}");
        let task_dir = PathBuf::from("tasks").join(&id);
        let mut needs = Vec::new();
        for turn in &turns {
            for need in unmet_needs(turn) {
                if !needs.iter().any(|(n, _): &(String, String)| *n == need.0) {
                    needs.push(need);
                }
            }
        }
        let mut all_notes = need_notes(&needs);
        all_notes.extend(notes);

        let mut files = vec![
            PlannedFile {
                path: "env.toml".into(),
                content: Content::Text(env_toml(
                    &env,
                    &format!("PinchBench task {id}, imported unchanged"),
                )),
            },
            PlannedFile {
                path: "docs.md".into(),
                content: Content::Text(docs_md(ORIGIN, &id, LICENSE, &all_notes)),
            },
            PlannedFile {
                path: task_dir.join("task.toml"),
                content: Content::Text(task_toml(&turns, &id, needs_judge)),
            },
        ];
        let source = json!({
            "format": "pinchbench",
            "origin": ORIGIN,
            "id": id,
            "license": LICENSE,
            "name": fm.get("name").and_then(Yaml::as_str),
            "category": fm.get("category").and_then(Yaml::as_str),
            "grading_type": grading_type,
            "needs_llm_judge": needs_judge || grading_type == "hybrid",
            "judge_weight": judge_weight,
            "timeout_seconds": timeout_seconds.and_then(|t| t.parse::<u64>().ok()),
            "sessions_new": new_sessions,
            "unmet_needs": needs.iter().map(|(n, w)| json!({"need": n, "why": w})).collect::<Vec<Value>>(),
            "notes": all_notes,
        });
        let mut source_text = serde_json::to_string_pretty(&source).unwrap_or_default();
        source_text.push('\n');
        files.push(PlannedFile {
            path: task_dir.join("source.json"),
            content: Content::Text(source_text),
        });
        let grader = task_dir.join("grader");
        match verifier_py {
            Some(code) => {
                files.push(PlannedFile {
                    path: grader.join("grade.py"),
                    content: Content::Text(format!("{code}\n")),
                });
                files.push(PlannedFile {
                    path: grader.join("run.py"),
                    content: Content::Text(RUN_PY.into()),
                });
            }
            None => files.push(PlannedFile {
                path: grader.join("judge.py"),
                content: Content::Text(JUDGE_PY.into()),
            }),
        }
        if let Some(r) = rubric.filter(|r| !r.is_empty()) {
            for at in [task_dir.join("rubric.md"), grader.join("rubric.md")] {
                files.push(PlannedFile {
                    path: at,
                    content: Content::Text(format!("{r}\n")),
                });
            }
        }
        Ok(DocumentPlan {
            document: doc,
            env,
            id,
            files,
            needs,
            notes: all_notes,
        })
    }
}

/// Plan the task file `rel` below `source` (which holds its `assets/`); `task` names it in
/// errors.
fn plan_task_at(tree: &SourceRoot, rel: &Path, task: &str) -> Result<EnvPlan, ImportError> {
    let path = &tree.display(rel);
    let text = tree.read_text(task, rel, MAX_TASK_FILE_BYTES)?;
    let DocumentPlan {
        document,
        env,
        id,
        mut files,
        needs,
        notes: all_notes,
    } = DocumentPlan::of(path, &text)?;
    files.push(PlannedFile {
        path: PathBuf::from("tasks").join(&id).join("task.md"),
        content: Content::Copy(tree.file(rel)),
    });
    let beside = rel.parent().unwrap_or(Path::new("")).join("LICENSE");
    for license in [beside, PathBuf::from("LICENSE")] {
        match tree.probe(task, &license)? {
            Some(SourceKind::File) => {
                files.push(PlannedFile {
                    path: "LICENSE".into(),
                    content: Content::Copy(tree.file(&license)),
                });
                break;
            }
            Some(SourceKind::Refused(kind)) => {
                return Err(ImportError::LinkOrSpecial {
                    task: task.to_string(),
                    path: tree.display(&license),
                    kind,
                });
            }
            _ => {}
        }
    }
    workspace_files(
        document.front_matter.get("workspace_files"),
        path,
        (tree, task),
        &mut files,
    )?;
    let files = sorted(files);
    if let Some(pair) = files.windows(2).find(|w| w[0].path == w[1].path) {
        return Err(ImportError::Unrepresentable {
            path: path.to_path_buf(),
            reason: format!(
                "two workspace files go to the same path, {}",
                pair[0].path.display()
            ),
        });
    }
    Ok(EnvPlan {
        env,
        task: id,
        files,
        unmet_needs: needs,
        notes: all_notes,
    })
}

/// `task.toml`: the prompts as they are, the grader (or the judge's refusal), the source.
pub fn task_toml(turns: &[String], id: &str, needs_judge: bool) -> String {
    let command = if needs_judge {
        format!("python3 {GRADER_DIR}/judge.py")
    } else {
        format!("python3 {GRADER_DIR}/run.py")
    };
    format!(
        "{}\n[verifier]\n\
         kind = \"command\"\n\
         command = {}\n\
         grader_dir = {}\n\
         timeout_secs = {GRADER_TIMEOUT_SECS}\n{}",
        prompt_toml(turns),
        super::toml_string(&command),
        super::toml_string(GRADER_DIR),
        source_table(ORIGIN, id, LICENSE)
    )
}

/// Plan `workspace_files`: `{path, content}` written as given, `{source, dest}` copied from
/// `root/assets/source`.
fn workspace_files(
    spec: Option<&Yaml>,
    task: &Path,
    (source_root, id): (&SourceRoot, &str),
    files: &mut Vec<PlannedFile>,
) -> Result<(), ImportError> {
    let items = match spec {
        None => return Ok(()),
        Some(Yaml::Seq(items)) => items,
        Some(Yaml::Scalar(s)) if s.text.is_empty() => return Ok(()),
        Some(_) => {
            return Err(ImportError::Format {
                path: task.to_path_buf(),
                line: None,
                problem: "`workspace_files` is not a list".into(),
                expected: "a list of {path, content} or {source, dest}".into(),
            });
        }
    };
    for (index, item) in items.iter().enumerate() {
        let field = |k: &str| item.get(k).and_then(Yaml::as_str).map(str::to_string);
        let (dest, content) = match (
            field("path"),
            field("content"),
            field("source"),
            field("dest"),
        ) {
            (Some(dest), Some(content), None, _) => (dest, Content::Text(content)),
            (None, None, Some(asset), Some(dest)) | (Some(dest), None, Some(asset), None) => {
                if !is_inner_path(&asset) {
                    return Err(ImportError::Unrepresentable {
                        path: task.to_path_buf(),
                        reason: format!("workspace file source `{asset}` leaves assets/"),
                    });
                }
                let from = Path::new("assets").join(&asset);
                match source_root.probe(id, &from)? {
                    Some(SourceKind::File) => {}
                    Some(SourceKind::Refused(kind)) => {
                        return Err(ImportError::LinkOrSpecial {
                            task: id.to_string(),
                            path: source_root.display(&from),
                            kind,
                        });
                    }
                    _ => {
                        return Err(ImportError::Format {
                            path: task.to_path_buf(),
                            line: None,
                            problem: format!(
                                "workspace file source `{}` is not a file",
                                source_root.display(&from).display()
                            ),
                            expected: "a file under the task set's assets/".into(),
                        });
                    }
                }
                (dest, Content::Copy(source_root.file(&from)))
            }
            _ => {
                return Err(ImportError::Format {
                    path: task.to_path_buf(),
                    line: None,
                    problem: format!(
                        "`workspace_files` item {} has neither path+content nor source+dest",
                        index + 1
                    ),
                    expected: "{path, content} or {source, dest}".into(),
                });
            }
        };
        if !is_inner_path(&dest) {
            return Err(ImportError::Unrepresentable {
                path: task.to_path_buf(),
                reason: format!("workspace file `{dest}` is not a path inside the workspace"),
            });
        }
        files.push(PlannedFile {
            path: Path::new("files").join(dest),
            content,
        });
    }
    Ok(())
}

/// The grading code of `## Automated Checks` as PinchBench's harness extracts it: the first
/// ```python block, surrounding whitespace trimmed.
pub fn grading_code(section: &str) -> Option<String> {
    let start = section.find("```python")? + "```python".len();
    let rest = &section[start..];
    let end = rest.find("```")?;
    let code = rest[..end].trim();
    (!code.is_empty()).then(|| code.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn sections_ignore_headings_inside_code_fences() {
        let doc = parse_document(
            "---\nid: t\n---\n\n## Prompt\n\nDo it.\n\n## Automated Checks\n\n```python\n## not a heading\ndef grade(t, w):\n    return {}\n```\n\n## Notes\nx\n",
        )
        .unwrap();
        assert_eq!(doc.section("Prompt").unwrap().trim(), "Do it.");
        let code = grading_code(doc.section("Automated Checks").unwrap()).unwrap();
        assert!(code.starts_with("## not a heading\ndef grade"), "{code}");
        assert!(code.ends_with("return {}"), "{code}");
        assert_eq!(doc.section("Notes").unwrap(), "x\n");
    }

    #[test]
    fn turns_and_the_judge_marker_go_into_the_task_toml() {
        let text = task_toml(&["a \"b\"".into(), "c\n".into()], "t", true);
        let table: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(table["turns"][0]["prompt"].as_str().unwrap(), "a \"b\"");
        assert_eq!(table["turns"][1]["prompt"].as_str().unwrap(), "c\n");
        assert!(
            table["verifier"]["command"]
                .as_str()
                .unwrap()
                .contains("judge.py")
        );
    }
}
