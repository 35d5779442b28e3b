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
//! mean of the numeric values) and prints the mean last. A judged task gets envcraft's judge
//! as PinchBench judges it: the rubric (`## LLM Judge Rubric`, else the `## Grading Criteria`
//! checklist) in `tasks/ID/rubric.md`, `## Expected Behavior` in `expected_behavior.md`; an
//! `llm_judge` task has `kind = "judge"`, a `hybrid` one weighs its automated part and the
//! judge by `grading_weights` (0.5 each by default), as PinchBench's `_combine_grades` does.
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

        // PinchBench's judge is given the rubric, else the grading criteria as a list.
        let rubric = doc
            .section("LLM Judge Rubric")
            .map(|r| r.trim().to_string())
            .filter(|r| !r.is_empty())
            .or_else(|| doc.section("Grading Criteria").and_then(criteria_list));
        let expected_behavior = doc
            .section("Expected Behavior")
            .map(|r| r.trim().to_string())
            .filter(|r| !r.is_empty());
        let code = doc.section("Automated Checks").and_then(grading_code);
        let grading = match grading_type.as_str() {
            "automated" => Grading::Automated,
            "llm_judge" => Grading::Judge,
            _ => {
                let weight = |key: &str| {
                    fm.get("grading_weights")
                        .and_then(|w| w.get(key))
                        .and_then(Yaml::as_str)
                        .and_then(|s| s.parse::<f64>().ok())
                        .filter(|w| w.is_finite() && *w >= 0.0)
                };
                let automated = weight("automated").unwrap_or(0.5);
                let judge = weight("llm_judge").unwrap_or(0.5);
                match (automated > 0.0, judge > 0.0) {
                    (true, true) => Grading::Hybrid { automated, judge },
                    (true, false) => Grading::Automated,
                    (false, true) => Grading::Judge,
                    // PinchBench: weights that sum to 0 count as 0.5 each.
                    (false, false) => Grading::Hybrid {
                        automated: 0.5,
                        judge: 0.5,
                    },
                }
            }
        };
        let judge_weight = match grading {
            Grading::Automated => 0.0,
            Grading::Judge => 1.0,
            Grading::Hybrid { automated, judge } => judge / (automated + judge),
        };
        let needs_judge = grading != Grading::Automated;
        let verifier_py = match (grading, &code) {
            (Grading::Judge, _) => None,
            (_, Some(code)) => Some(code.clone()),
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
            notes.push(format!(
                "judged by an LLM (weight {judge_weight}) as PinchBench judges it: rubric.md, \
                 expected_behavior.md; without a judge endpoint (--judge-url) the task has no \
                 score, never a 0"
            ));
            if rubric.is_none() {
                notes.push(
                    "the task is judged but has no `## LLM Judge Rubric` or `## Grading Criteria`: \
                     the judge gets an empty rubric, as in PinchBench"
                        .into(),
                );
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
                content: Content::Text(task_toml(
                    &turns,
                    &id,
                    grading,
                    expected_behavior.is_some(),
                )),
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
            "needs_llm_judge": needs_judge,
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
        if let Some(code) = verifier_py {
            files.push(PlannedFile {
                path: grader.join("grade.py"),
                content: Content::Text(format!("{code}\n")),
            });
            files.push(PlannedFile {
                path: grader.join("run.py"),
                content: Content::Text(RUN_PY.into()),
            });
        }
        if needs_judge {
            files.push(PlannedFile {
                path: task_dir.join("rubric.md"),
                content: Content::Text(rubric.map(|r| format!("{r}\n")).unwrap_or_default()),
            });
            if let Some(text) = &expected_behavior {
                files.push(PlannedFile {
                    path: task_dir.join("expected_behavior.md"),
                    content: Content::Text(format!("{text}\n")),
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
        image: None,
        provision: None,
    })
}

/// How a PinchBench task is graded (its `grading_type`, with `grading_weights`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Grading {
    Automated,
    Judge,
    Hybrid { automated: f64, judge: f64 },
}

/// `- [ ] criterion` lines of `## Grading Criteria` as PinchBench's judge is given them
/// (`- criterion`); none when there are no such lines.
fn criteria_list(section: &str) -> Option<String> {
    let items: Vec<String> = section
        .lines()
        .filter_map(|line| {
            let rest = line.trim_start().strip_prefix("- [")?;
            let (_, criterion) = rest.split_once(']')?;
            Some(format!("- {}", criterion.trim()))
        })
        .collect();
    (!items.is_empty()).then(|| items.join("\n"))
}

/// `task.toml`: the prompts as they are, the grader and the judge as `grading` says, the source.
pub fn task_toml(turns: &[String], id: &str, grading: Grading, expected_behavior: bool) -> String {
    let command = super::toml_string(&format!("python3 {GRADER_DIR}/run.py"));
    let grader = format!(
        "command = {command}\ngrader_dir = {}\ntimeout_secs = {GRADER_TIMEOUT_SECS}\n",
        super::toml_string(GRADER_DIR)
    );
    let verifier = match grading {
        Grading::Automated => format!("kind = \"command\"\n{grader}"),
        Grading::Judge => "kind = \"judge\"\n".to_string(),
        Grading::Hybrid { automated, judge } => format!(
            "kind = \"hybrid\"\n{grader}weights = {{ command = {automated:?}, judge = {judge:?} }}\n"
        ),
    };
    let judge = match grading {
        Grading::Automated => String::new(),
        Grading::Judge | Grading::Hybrid { .. } => format!(
            "\n[verifier.judge]\nrubric = \"rubric.md\"\n{}",
            if expected_behavior {
                "expected_behavior = \"expected_behavior.md\"\n"
            } else {
                ""
            }
        ),
    };
    format!(
        "{}\n[verifier]\n{verifier}{judge}{}",
        prompt_toml(turns),
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
    fn turns_the_grader_and_the_judge_go_into_the_task_toml() {
        let hybrid = Grading::Hybrid {
            automated: 0.4,
            judge: 0.6,
        };
        let text = task_toml(&["a \"b\"".into(), "c\n".into()], "t", hybrid, true);
        let table: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(table["turns"][0]["prompt"].as_str().unwrap(), "a \"b\"");
        assert_eq!(table["turns"][1]["prompt"].as_str().unwrap(), "c\n");
        let verifier = &table["verifier"];
        assert_eq!(verifier["kind"].as_str(), Some("hybrid"));
        assert_eq!(verifier["weights"]["judge"].as_float(), Some(0.6));
        assert_eq!(verifier["judge"]["rubric"].as_str(), Some("rubric.md"));
        assert!(verifier["command"].as_str().unwrap().contains("run.py"));
        let judged: toml::Table =
            toml::from_str(&task_toml(&["p".into()], "t", Grading::Judge, false)).unwrap();
        assert_eq!(judged["verifier"]["kind"].as_str(), Some("judge"));
        assert!(judged["verifier"].get("command").is_none());
        assert!(
            judged["verifier"]["judge"]
                .get("expected_behavior")
                .is_none()
        );
        assert_eq!(
            criteria_list("Intro\n- [ ] Date is right\n- [x] Time is 3 PM\nno\n").as_deref(),
            Some("- Date is right\n- Time is 3 PM")
        );
    }
}
