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
//! The front matter is read by a small YAML reader of the subset PinchBench uses: block
//! mappings and sequences, plain, quoted and `|` block scalars, `[]`/`{}`, flow lists of
//! scalars, comments. Anything else (anchors, tags, folded scalars, flow mappings) is refused
//! with its line, never guessed.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{
    Content, EnvPlan, ImportError, Planned, PlannedFile, docs_md, env_toml, is_inner_path,
    need_notes, prompt_toml, sorted, source_table, unmet_needs,
};

pub const ORIGIN: &str = "PinchBench";
/// pinchbench/skill's license (its `LICENSE`, copied along when the source has it).
pub const LICENSE: &str = "MIT";
/// Where the grader's files appear in the grader's workspace (hidden, so that a grader that
/// lists the workspace is least likely to notice them).
pub const GRADER_DIR: &str = ".pinchbench";
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
/// `src/assets/`), else `src` itself; `TASK_TEMPLATE.md` and `README.md` are not tasks.
pub fn plan_all(src: &Path) -> Result<Vec<Planned>, ImportError> {
    if src.is_file() {
        let id = file_stem(src);
        return Ok(vec![(id, plan_task(src, &assets_root_of_file(src)))]);
    }
    let (tasks_dir, root) = if src.join("tasks").is_dir() {
        (src.join("tasks"), src.to_path_buf())
    } else {
        (src.to_path_buf(), src.to_path_buf())
    };
    let read_err = |source| ImportError::Read {
        path: tasks_dir.clone(),
        source,
    };
    let mut paths: Vec<PathBuf> = Vec::new();
    for entry in std::fs::read_dir(&tasks_dir).map_err(read_err)? {
        let path = entry.map_err(read_err)?.path();
        let name = file_stem(&path);
        if path.is_file()
            && path.extension().is_some_and(|e| e == "md")
            && !matches!(name.as_str(), "TASK_TEMPLATE" | "README")
        {
            paths.push(path);
        }
    }
    if paths.is_empty() {
        return Err(ImportError::NoTasks {
            path: src.to_path_buf(),
            format: "PinchBench",
            expected: "a folder of task files (*.md), or one holding tasks/*.md",
        });
    }
    paths.sort();
    Ok(paths
        .into_iter()
        .map(|p| (file_stem(&p), plan_task(&p, &root)))
        .collect())
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
    let text = std::fs::read_to_string(path).map_err(|source| ImportError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let doc = parse_document(&text).map_err(|(line, problem, expected)| ImportError::Format {
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
            _ => notes.push("the task is judged but has no `## LLM Judge Rubric` section".into()),
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
        PlannedFile {
            path: task_dir.join("task.md"),
            content: Content::Copy(path.to_path_buf()),
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
    for license in [
        path.parent().map(|p| p.join("LICENSE")),
        Some(root.join("LICENSE")),
    ]
    .into_iter()
    .flatten()
    {
        if license.is_file() {
            files.push(PlannedFile {
                path: "LICENSE".into(),
                content: Content::Copy(license),
            });
            break;
        }
    }
    workspace_files(fm.get("workspace_files"), path, root, &mut files)?;
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
    root: &Path,
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
            (None, None, Some(source), Some(dest)) | (Some(dest), None, Some(source), None) => {
                if !is_inner_path(&source) {
                    return Err(ImportError::Unrepresentable {
                        path: task.to_path_buf(),
                        reason: format!("workspace file source `{source}` leaves assets/"),
                    });
                }
                let from = root.join("assets").join(&source);
                if !from.is_file() {
                    return Err(ImportError::Format {
                        path: task.to_path_buf(),
                        line: None,
                        problem: format!(
                            "workspace file source `{}` is not a file",
                            from.display()
                        ),
                        expected: "a file under the task set's assets/".into(),
                    });
                }
                (dest, Content::Copy(from))
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

// ---------------------------------------------------------------------------------------------
// The document: front matter and `## ` sections.

/// A task file split up.
#[derive(Debug)]
pub struct Document {
    pub front_matter: Yaml,
    /// `## Title` → the text up to the next `## ` heading outside a code fence.
    pub sections: Vec<(String, String)>,
}

impl Document {
    pub fn section(&self, title: &str) -> Option<&str> {
        self.sections
            .iter()
            .find(|(t, _)| t == title)
            .map(|(_, body)| body.as_str())
    }
}

/// (line, problem, expected) of a syntax error.
type SyntaxError = (Option<usize>, String, String);

pub fn parse_document(text: &str) -> Result<Document, SyntaxError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or_default();
    if first.trim_end() != "---" {
        return Err((
            Some(1),
            "the file does not start with `---`".into(),
            "YAML front matter between `---` lines".into(),
        ));
    }
    let mut fm_lines = Vec::new();
    let mut closed = false;
    let mut body_start = first.len();
    for line in lines.by_ref() {
        body_start += line.len();
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        fm_lines.push(line.trim_end_matches(['\n', '\r']));
    }
    if !closed {
        return Err((
            None,
            "the front matter is never closed".into(),
            "a `---` line after the front matter".into(),
        ));
    }
    let front_matter = parse_yaml(&fm_lines, 2)?;
    let body = &text[body_start..];
    let mut sections: Vec<(String, String)> = Vec::new();
    let mut in_fence = false;
    for line in body.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        if bare.trim_start().starts_with("```") {
            in_fence = !in_fence;
        }
        if !in_fence && let Some(title) = bare.strip_prefix("## ") {
            sections.push((title.trim().to_string(), String::new()));
            continue;
        }
        if let Some((_, body)) = sections.last_mut() {
            body.push_str(line);
        }
    }
    Ok(Document {
        front_matter,
        sections,
    })
}

// ---------------------------------------------------------------------------------------------
// The YAML subset.

/// A YAML value of the subset read here. Scalars stay text (`as_str`); the caller reads
/// numbers and booleans from it.
#[derive(Debug, Clone, PartialEq)]
pub enum Yaml {
    Scalar(Scalar),
    Seq(Vec<Yaml>),
    /// Keys in the order written.
    Map(Vec<(String, Yaml)>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Scalar {
    pub text: String,
    pub quoted: bool,
}

impl Yaml {
    pub fn get(&self, key: &str) -> Option<&Yaml> {
        match self {
            Yaml::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Yaml::Scalar(s) => Some(&s.text),
            _ => None,
        }
    }
}

struct Line<'a> {
    /// 1-based, in the file.
    number: usize,
    indent: usize,
    text: &'a str,
}

struct YamlReader<'a> {
    lines: Vec<Line<'a>>,
    /// All lines, blank ones included, for block scalars.
    raw: Vec<&'a str>,
    pos: usize,
    first_line: usize,
}

const YAML_SUBSET: &str = "the YAML PinchBench uses: `key: value`, `- item` lists, plain, \
                           quoted and `|` block scalars, [] and {}";

/// Parse `lines` (the front matter; the first is line `first_line` of the file).
pub fn parse_yaml(raw: &[&str], first_line: usize) -> Result<Yaml, SyntaxError> {
    let mut lines = Vec::new();
    for (i, text) in raw.iter().enumerate() {
        if text.contains('\t') && text.trim_start().starts_with('\t') {
            return Err((
                Some(first_line + i),
                "a tab indents the line".into(),
                "spaces for indentation".into(),
            ));
        }
        let trimmed = text.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        lines.push(Line {
            number: first_line + i,
            indent: text.len() - trimmed.len(),
            text: trimmed.trim_end(),
        });
    }
    let mut reader = YamlReader {
        lines,
        raw: raw.to_vec(),
        pos: 0,
        first_line,
    };
    if reader.lines.is_empty() {
        return Ok(Yaml::Map(Vec::new()));
    }
    let indent = reader.lines[0].indent;
    let value = reader.node(indent)?;
    if let Some(line) = reader.lines.get(reader.pos) {
        return Err((
            Some(line.number),
            "this line is indented inconsistently".into(),
            YAML_SUBSET.into(),
        ));
    }
    Ok(value)
}

fn is_seq_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

/// `key: rest` or `key:` → (key, rest); none when the line is not a mapping entry.
fn split_key(text: &str) -> Option<(&str, &str)> {
    if text.starts_with(['"', '\'', '[', '{', '-', '|', '>']) {
        return None;
    }
    let colon = text
        .find(": ")
        .or_else(|| text.ends_with(':').then(|| text.len() - 1))?;
    let key = text[..colon].trim();
    (!key.is_empty() && !key.contains(" #")).then(|| (key, text[colon + 1..].trim()))
}

impl<'a> YamlReader<'a> {
    fn fail<T>(&self, number: usize, problem: impl Into<String>) -> Result<T, SyntaxError> {
        Err((Some(number), problem.into(), YAML_SUBSET.into()))
    }

    fn node(&mut self, indent: usize) -> Result<Yaml, SyntaxError> {
        let line = &self.lines[self.pos];
        if is_seq_item(line.text) {
            self.seq(indent)
        } else if split_key(line.text).is_some() {
            self.map(indent)
        } else {
            let (number, text) = (line.number, line.text);
            self.pos += 1;
            self.scalar(number, text)
        }
    }

    fn map(&mut self, indent: usize) -> Result<Yaml, SyntaxError> {
        let mut entries: Vec<(String, Yaml)> = Vec::new();
        while let Some(line) = self.lines.get(self.pos) {
            if line.indent < indent {
                break;
            }
            let number = line.number;
            if line.indent > indent {
                return self.fail(number, "this line is indented more than its mapping");
            }
            let Some((key, rest)) = split_key(line.text) else {
                if is_seq_item(line.text) {
                    break;
                }
                return self.fail(number, format!("`{}` is not `key: value`", line.text));
            };
            if entries.iter().any(|(k, _)| k == key) {
                return self.fail(number, format!("`{key}` is given twice"));
            }
            let key = key.to_string();
            self.pos += 1;
            let value = self.value_after(number, indent, rest, true)?;
            entries.push((key, value));
        }
        Ok(Yaml::Map(entries))
    }

    fn seq(&mut self, indent: usize) -> Result<Yaml, SyntaxError> {
        let mut items = Vec::new();
        while let Some(line) = self.lines.get(self.pos) {
            if line.indent != indent || !is_seq_item(line.text) {
                if line.indent > indent {
                    return self.fail(line.number, "this line is indented more than its list");
                }
                break;
            }
            let number = line.number;
            let rest = line.text[1..].trim_start();
            if rest.is_empty() {
                self.pos += 1;
                items.push(self.value_after(number, indent, "", false)?);
            } else if split_key(rest).is_some() || is_seq_item(rest) {
                // `- key: value` opens a mapping (or `- - x` a list) at the item's column.
                let offset = line.text.len() - rest.len();
                self.lines[self.pos] = Line {
                    number,
                    indent: indent + offset,
                    text: rest,
                };
                items.push(self.node(indent + offset)?);
            } else {
                self.pos += 1;
                items.push(self.value_after(number, indent, rest, false)?);
            }
        }
        Ok(Yaml::Seq(items))
    }

    /// The value of a key (or a list item) at `indent` whose inline part is `rest`.
    fn value_after(
        &mut self,
        number: usize,
        indent: usize,
        rest: &str,
        in_map: bool,
    ) -> Result<Yaml, SyntaxError> {
        if rest.starts_with('|') {
            return self.block_scalar(number, indent, rest);
        }
        if !rest.is_empty() && !rest.starts_with('#') {
            return self.scalar(number, rest);
        }
        match self.lines.get(self.pos) {
            Some(next) if next.indent > indent => {
                let child = next.indent;
                self.node(child)
            }
            // YAML lets a mapping's list sit at the key's own indentation.
            Some(next) if in_map && next.indent == indent && is_seq_item(next.text) => {
                self.seq(indent)
            }
            _ => Ok(Yaml::Scalar(Scalar {
                text: String::new(),
                quoted: false,
            })),
        }
    }

    /// A `|` block scalar whose header is on line `number`: the following lines indented more
    /// than `indent` (and blank ones among them), their common indentation removed.
    fn block_scalar(
        &mut self,
        number: usize,
        indent: usize,
        header: &str,
    ) -> Result<Yaml, SyntaxError> {
        let chomp = match header.split('#').next().unwrap_or_default().trim() {
            "|" => Chomp::Clip,
            "|-" => Chomp::Strip,
            "|+" => Chomp::Keep,
            other => {
                return self.fail(
                    number,
                    format!("block scalar header `{other}` is not read here"),
                );
            }
        };
        // Raw lines after the header, up to the first non-blank one indented no more than `indent`.
        let start = number - self.first_line + 1;
        let mut end = start;
        let mut block_indent = None;
        while end < self.raw.len() {
            let l = self.raw[end];
            let trimmed = l.trim_start_matches(' ');
            if trimmed.is_empty() {
                end += 1;
                continue;
            }
            let ind = l.len() - trimmed.len();
            if ind <= indent {
                break;
            }
            block_indent.get_or_insert(ind);
            end += 1;
        }
        let block_indent = block_indent.unwrap_or(indent + 1);
        let mut text = String::new();
        for l in &self.raw[start..end] {
            if l.trim().is_empty() {
                text.push_str(l.get(block_indent..).unwrap_or(""));
            } else {
                let ind = l.len() - l.trim_start_matches(' ').len();
                if ind < block_indent {
                    return self.fail(
                        self.first_line + start,
                        "a block scalar's line is indented less than its first line",
                    );
                }
                text.push_str(&l[block_indent..]);
            }
            text.push('\n');
        }
        let body = text.trim_end_matches('\n');
        let text = match chomp {
            Chomp::Strip => body.to_string(),
            Chomp::Clip if body.is_empty() => String::new(),
            Chomp::Clip => format!("{body}\n"),
            Chomp::Keep => text,
        };
        // Skip the significant lines the block consumed.
        let last_number = self.first_line + end;
        while self
            .lines
            .get(self.pos)
            .is_some_and(|l| l.number < last_number)
        {
            self.pos += 1;
        }
        Ok(Yaml::Scalar(Scalar { text, quoted: true }))
    }

    fn scalar(&self, number: usize, text: &str) -> Result<Yaml, SyntaxError> {
        let plain = |text: String| {
            Yaml::Scalar(Scalar {
                text,
                quoted: false,
            })
        };
        let text = text.trim();
        match text.chars().next() {
            Some('"') => {
                let (value, rest) = double_quoted(text).ok_or((
                    Some(number),
                    "a double-quoted string is not closed on its line".to_string(),
                    YAML_SUBSET.to_string(),
                ))?;
                self.only_comment_after(number, rest)?;
                Ok(Yaml::Scalar(Scalar {
                    text: value,
                    quoted: true,
                }))
            }
            Some('\'') => {
                let (value, rest) = single_quoted(text).ok_or((
                    Some(number),
                    "a single-quoted string is not closed on its line".to_string(),
                    YAML_SUBSET.to_string(),
                ))?;
                self.only_comment_after(number, rest)?;
                Ok(Yaml::Scalar(Scalar {
                    text: value,
                    quoted: true,
                }))
            }
            Some('[') => {
                let inner = strip_comment(text);
                let Some(inner) = inner.strip_prefix('[').and_then(|s| s.strip_suffix(']')) else {
                    return self.fail(number, "a flow list must close on its line");
                };
                if inner.contains(['[', '{']) {
                    return self.fail(number, "nested flow collections are not read here");
                }
                let mut items = Vec::new();
                for item in inner.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    items.push(self.scalar(number, item)?);
                }
                Ok(Yaml::Seq(items))
            }
            Some('{') => {
                if strip_comment(text) == "{}" {
                    Ok(Yaml::Map(Vec::new()))
                } else {
                    self.fail(number, "flow mappings are not read here")
                }
            }
            Some(c @ ('&' | '*' | '!' | '>' | '%' | '@' | '`' | '|')) => self.fail(
                number,
                format!("`{c}` (anchors, aliases, tags, folded scalars) is not read here"),
            ),
            _ => Ok(plain(strip_comment(text).to_string())),
        }
    }

    fn only_comment_after(&self, number: usize, rest: &str) -> Result<(), SyntaxError> {
        let rest = rest.trim();
        if rest.is_empty() || rest.starts_with('#') {
            Ok(())
        } else {
            self.fail(number, format!("`{rest}` follows a quoted string"))
        }
    }
}

enum Chomp {
    Clip,
    Strip,
    Keep,
}

/// A plain scalar without its ` # comment`.
fn strip_comment(text: &str) -> &str {
    match text.find(" #") {
        Some(i) => text[..i].trim_end(),
        None => text.trim_end(),
    }
}

/// `"..."` at the start of `text`: (the value, what follows the closing quote).
fn double_quoted(text: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = text.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &text[i + 1..])),
            '\\' => {
                let (_, e) = chars.next()?;
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    '0' => out.push('\0'),
                    '"' => out.push('"'),
                    '\\' => out.push('\\'),
                    '/' => out.push('/'),
                    ' ' => out.push(' '),
                    'u' | 'x' | 'U' => {
                        let len = match e {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        let hex: String = (0..len)
                            .filter_map(|_| chars.next().map(|(_, h)| h))
                            .collect();
                        out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                    }
                    _ => return None,
                }
            }
            c => out.push(c),
        }
    }
    None
}

/// `'...'` at the start of `text` (`''` is a quote).
fn single_quoted(text: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let bytes = text.as_bytes();
    let mut i = 1;
    while i < text.len() {
        if bytes[i] == b'\'' {
            if bytes.get(i + 1) == Some(&b'\'') {
                out.push('\'');
                i += 2;
                continue;
            }
            return Some((out, &text[i + 1..]));
        }
        let c = text[i..].chars().next()?;
        out.push(c);
        i += c.len_utf8();
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn yaml(text: &str) -> Result<Yaml, SyntaxError> {
        let lines: Vec<&str> = text.lines().collect();
        parse_yaml(&lines, 2)
    }

    fn s(y: Option<&Yaml>) -> &str {
        y.and_then(Yaml::as_str).unwrap()
    }

    #[test]
    fn the_front_matter_subset_reads_like_yaml() {
        let y = yaml(
            "id: task_08_memory\nname: \"Quoted: yes\"\ngrading_type: automated # a comment\n\
             timeout_seconds: 120\nempty: []\nworkspace_files:\n  - path: \"notes.md\"\n    content: |\n      # Title\n\n      - item\n        indented\n  - source: assets/a.txt\n    dest: 'it''s.txt'\n\
             grading_weights:\n  automated: 0.6\n  llm_judge: 0.4\nsessions:\n- First prompt\n- prompt: |-\n    Second\n  new_session: true\n",
        )
        .unwrap();
        assert_eq!(s(y.get("id")), "task_08_memory");
        assert_eq!(s(y.get("name")), "Quoted: yes");
        assert_eq!(s(y.get("grading_type")), "automated");
        assert_eq!(y.get("empty"), Some(&Yaml::Seq(vec![])));
        let Some(Yaml::Seq(files)) = y.get("workspace_files") else {
            panic!("{y:?}")
        };
        assert_eq!(
            s(files[0].get("content")),
            "# Title\n\n- item\n  indented\n"
        );
        assert_eq!(s(files[1].get("dest")), "it's.txt");
        assert_eq!(s(y.get("grading_weights").unwrap().get("llm_judge")), "0.4");
        let Some(Yaml::Seq(sessions)) = y.get("sessions") else {
            panic!("{y:?}")
        };
        assert_eq!(sessions[0].as_str(), Some("First prompt"));
        assert_eq!(s(sessions[1].get("prompt")), "Second");
        assert_eq!(s(sessions[1].get("new_session")), "true");
    }

    #[test]
    fn what_the_reader_does_not_know_is_refused_with_its_line() {
        for (text, line) in [
            ("a: &anchor x\n", 2),
            ("a: >\n  folded\n", 2),
            ("a: {b: 1}\n", 2),
            ("a: 1\na: 2\n", 3),
            ("a: \"open\n", 2),
            ("a:\n  - x\n    y: 1\n", 4),
        ] {
            let err = yaml(text).unwrap_err();
            assert_eq!(err.0, Some(line), "{text:?}: {err:?}");
        }
    }

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
