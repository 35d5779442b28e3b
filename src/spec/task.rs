//! Tasks: one job in an environment, a directory `workspaces/ENV/tasks/ID/` holding
//! `task.toml` (the intent, the verifier, where an imported task came from), optionally
//! `files/` (laid over the environment's files to make the task's initial workspace) and
//! optionally `solution.jsonl` (a reference trajectory, one tool call per line).
//!
//! ```toml
//! prompt = "Collect the action items ..."   # or, for a sequence of intents:
//! # [[turns]]
//! # prompt = "First ..."
//! # [[turns]]
//! # prompt = "Then ..."
//! base_time = "2026-03-04T16:30:00+01:00"   # optional; overrides the environment's
//!
//! [verifier]                  # see `verifier` for every key
//! kind = "command"
//! command = "python3 check.py"
//!
//! [source]                    # optional, for imported and synthesized tasks
//! origin = "..."
//! id = "..."
//! license = "..."
//! seed = 7                    # optional: a synthesized task's run seed
//! chain = ["glob", "write"]   # optional: the tool-graph nodes its solution went through
//! ```
//!
//! A line of `solution.jsonl` is `{"tool": NAME, "args": {...}}`, with `"turn": N` (0-based,
//! never decreasing, default 0) saying which turn's prompt the call answers; the tool must be
//! one the environment offers.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toml::Spanned;

use super::env::{self, EnvError, EnvSpec};
use super::located::{self, Check, FileError, PLAIN_NAME, TomlFile};
use super::time::Timestamp;
use super::verifier::RawVerifier;
pub use super::verifier::{
    DEFAULT_VERIFIER_TIMEOUT_SECS, ExtraFiles, JudgeSpec, MAX_VERIFIER_TIMEOUT_SECS, VerifierKind,
    VerifierSpec, Weights,
};

/// Why a task could not be loaded or found.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error(transparent)]
    Env(#[from] EnvError),
    #[error(
        "no task `{arg}`: tried {tried}; expected a task directory, ENV/TASK_ID, a ClawGym task folder or a PinchBench task file (.md)"
    )]
    NotFound {
        arg: String,
        /// Each place tried and why it did not do, `; `-separated.
        tried: String,
    },
    #[error("{file}, line {line}: {problem}; expected {expected}")]
    Solution {
        file: PathBuf,
        line: usize,
        problem: String,
        expected: String,
    },
}

/// A loaded, validated task, with its environment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskSpec {
    /// The task directory's name.
    pub id: String,
    pub env: EnvSpec,
    /// The prompts in order: one for `prompt`, one per `[[turns]]` table; none empty.
    pub turns: Vec<String>,
    /// Overrides [`EnvSpec::base_time`] when set.
    pub base_time: Option<Timestamp>,
    /// `dir/files` when it exists: laid over [`EnvSpec::files`].
    pub files: Option<PathBuf>,
    /// `dir/solution.jsonl` when it exists (checked at load; [`TaskSpec::solution_steps`]).
    pub solution: Option<PathBuf>,
    pub verifier: VerifierSpec,
    /// The task's directory, absolute and canonical.
    pub dir: PathBuf,
    pub source: Option<Source>,
}

/// Where an imported task came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Source {
    /// The benchmark or dataset, such as a URL or a project name.
    pub origin: String,
    /// The task's id there.
    pub id: String,
    /// The license the task is used under (an SPDX identifier where there is one).
    pub license: String,
    /// For a synthesized task: the seed of the run that made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// For a synthesized task: the tool graph's nodes its reference solution went through.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub chain: Vec<String>,
}

/// One call of a reference trajectory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SolutionStep {
    /// The index of the turn whose prompt this call answers.
    #[serde(default)]
    pub turn: usize,
    pub tool: String,
    /// The tool's arguments: a JSON object.
    pub args: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTask {
    #[serde(default)]
    prompt: Option<Spanned<String>>,
    #[serde(default)]
    turns: Option<Spanned<Vec<RawTurn>>>,
    #[serde(default)]
    base_time: Option<Spanned<toml::Value>>,
    verifier: Spanned<RawVerifier>,
    #[serde(default)]
    source: Option<RawSource>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTurn {
    prompt: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSource {
    origin: Spanned<String>,
    id: Spanned<String>,
    license: Spanned<String>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    chain: Vec<String>,
}

/// What `task.toml` says, checked: everything of a task that its text alone decides (the
/// loader then looks at the task's directory: `files/`, `solution.jsonl`).
#[derive(Debug, Clone)]
pub struct TaskToml {
    pub turns: Vec<String>,
    pub base_time: Option<Timestamp>,
    pub verifier: VerifierSpec,
    pub source: Option<Source>,
}

impl TaskToml {
    /// Parse and check the text of `file`, a `task.toml` (nothing is read from disk).
    pub fn parse(file: &Path, text: &str) -> Result<TaskToml, TaskError> {
        let toml = TomlFile { path: file, text };
        let raw: RawTask = toml.parse().map_err(|p| FileError::syntax(file, p))?;
        let check = Check { toml: &toml };

        let turns = match (&raw.prompt, &raw.turns) {
            (Some(prompt), None) => vec![check.prompt("prompt", prompt)?],
            (None, Some(turns)) => {
                if turns.get_ref().is_empty() {
                    return Err(check
                        .invalid(
                            "turns",
                            turns.span(),
                            "is empty".into(),
                            "at least one `[[turns]]` table with a `prompt`",
                        )
                        .into());
                }
                turns
                    .get_ref()
                    .iter()
                    .map(|t| check.prompt("turns.prompt", &t.prompt))
                    .collect::<Result<Vec<_>, _>>()?
            }
            (Some(_), Some(turns)) => {
                return Err(check.invalid(
                    "turns",
                    turns.span(),
                    "is given along with `prompt`".into(),
                    "either `prompt = \"...\"` for one intent or `[[turns]]` tables for a sequence, not both",
                ).into());
            }
            (None, None) => {
                return Err(FileError::Invalid {
                    file: file.to_path_buf(),
                    key: "prompt".into(),
                    line: 1,
                    problem: "is missing".into(),
                    expected: "`prompt = \"...\"` or `[[turns]]` tables each with a `prompt`"
                        .into(),
                }
                .into());
            }
        };

        let base_time = raw
            .base_time
            .as_ref()
            .map(|value| {
                env::base_time(value).map_err(|(problem, expected)| {
                    check.invalid("base_time", value.span(), problem, expected)
                })
            })
            .transpose()?;

        let verifier = check.verifier(&raw.verifier)?;

        let source = raw
            .source
            .as_ref()
            .map(|s| {
                Ok::<_, TaskError>(Source {
                    origin: check.non_empty("source.origin", &s.origin)?,
                    id: check.non_empty("source.id", &s.id)?,
                    license: check.non_empty("source.license", &s.license)?,
                    seed: s.seed,
                    chain: s.chain.clone(),
                })
            })
            .transpose()?;

        Ok(TaskToml {
            turns,
            base_time,
            verifier,
            source,
        })
    }
}

impl TaskSpec {
    /// Load the task in `task_dir` and its environment, `task_dir/../..` (the layout is
    /// `ENV/tasks/ID/`).
    pub fn load(task_dir: impl AsRef<Path>) -> Result<TaskSpec, TaskError> {
        let given = task_dir.as_ref();
        let dir = std::fs::canonicalize(given).map_err(FileError::read(given))?;
        if !dir.join("task.toml").is_file() {
            return Err(FileError::Layout {
                path: dir,
                problem: "has no task.toml".into(),
                expected: "a task directory, ENV/tasks/ID/, holding task.toml".into(),
            }
            .into());
        }
        let env_dir = dir
            .parent()
            .filter(|tasks| tasks.file_name().is_some_and(|n| n == "tasks"))
            .and_then(Path::parent)
            .ok_or_else(|| FileError::Layout {
                path: dir.clone(),
                problem: "is not inside a `tasks` directory".into(),
                expected: "a task directory at ENV/tasks/ID/, beside ENV/env.toml".into(),
            })?;
        let env = EnvSpec::load(env_dir)?;
        TaskSpec::load_in(env, dir)
    }

    /// Find and load a task named by `arg`: a task directory's path, or `ENV/TASK_ID` for
    /// `workspaces_root/ENV/tasks/TASK_ID/`. When neither is a task, the error lists each
    /// place tried.
    pub fn resolve(arg: &str, workspaces_root: impl AsRef<Path>) -> Result<TaskSpec, TaskError> {
        let root = workspaces_root.as_ref();
        let mut candidates = vec![PathBuf::from(arg)];
        let parts: Vec<&str> = arg.trim_end_matches('/').split('/').collect();
        if let [env_name, task_id] = parts[..]
            && located::is_plain_name(env_name)
            && located::is_plain_name(task_id)
        {
            candidates.push(root.join(env_name).join("tasks").join(task_id));
        }
        let mut tried = Vec::new();
        for candidate in candidates {
            if candidate.join("task.toml").is_file() {
                return TaskSpec::load(&candidate);
            }
            let why = if candidate.is_dir() {
                "no task.toml there"
            } else if candidate.exists() {
                "not a directory"
            } else {
                "does not exist"
            };
            tried.push(format!("{} ({why})", candidate.display()));
        }
        Err(TaskError::NotFound {
            arg: arg.to_string(),
            tried: tried.join("; "),
        })
    }

    /// The session clock at action 0: the task's `base_time`, else the environment's.
    pub fn effective_base_time(&self) -> Timestamp {
        self.base_time.unwrap_or(self.env.base_time)
    }

    /// The reference trajectory, or an empty one when the task has none.
    pub fn solution_steps(&self) -> Result<Vec<SolutionStep>, TaskError> {
        match &self.solution {
            None => Ok(Vec::new()),
            Some(path) => read_solution(path, &self.env, self.turns.len()),
        }
    }

    /// Load the task in `dir` (anywhere, named as a task id) for the already loaded `env`:
    /// tasks that do not live in their environment's `tasks/` (the server's inline tasks).
    pub fn load_in_env(env: EnvSpec, dir: &Path) -> Result<TaskSpec, TaskError> {
        let dir = std::fs::canonicalize(dir).map_err(FileError::read(dir))?;
        TaskSpec::load_in(env, dir)
    }

    /// Load the task in the canonical directory `dir` of the already loaded `env`.
    fn load_in(env: EnvSpec, dir: PathBuf) -> Result<TaskSpec, TaskError> {
        let id = located::dir_name(&dir).unwrap_or_default();
        if !located::is_plain_name(&id) {
            return Err(FileError::Layout {
                path: dir,
                problem: "is not named as a task id".into(),
                expected: format!("a directory name of {PLAIN_NAME}"),
            }
            .into());
        }
        let file = dir.join("task.toml");
        let text = located::read_text(&file)?;
        let TaskToml {
            turns,
            base_time,
            verifier,
            source,
        } = TaskToml::parse(&file, &text)?;
        if let Some(judge) = &verifier.judge {
            super::verifier::check_judge_files(judge, &dir)?;
        }

        let files_dir = dir.join("files");
        let files = if files_dir.is_dir() {
            Some(files_dir)
        } else if files_dir.exists() {
            return Err(FileError::Layout {
                path: files_dir,
                problem: "is not a directory".into(),
                expected: "a directory of files laid over the environment's (or nothing)".into(),
            }
            .into());
        } else {
            None
        };

        let solution_path = dir.join("solution.jsonl");
        let solution = if solution_path.is_file() {
            read_solution(&solution_path, &env, turns.len())?;
            Some(solution_path)
        } else if solution_path.exists() {
            return Err(FileError::Layout {
                path: solution_path,
                problem: "is not a file".into(),
                expected: "a JSONL file of tool calls (or nothing)".into(),
            }
            .into());
        } else {
            None
        };

        Ok(TaskSpec {
            id,
            env,
            turns,
            base_time,
            files,
            solution,
            verifier,
            dir,
            source,
        })
    }
}

impl EnvSpec {
    /// Every task of the environment (see [`EnvSpec::task_ids`]), loaded, sorted by id.
    /// Defined here rather than in `env` so that `env` does not depend on `task`.
    pub fn tasks(&self) -> Result<Vec<TaskSpec>, TaskError> {
        self.task_ids()?
            .into_iter()
            .map(|id| TaskSpec::load_in(self.clone(), self.dir.join("tasks").join(id)))
            .collect()
    }
}

/// Read and check a reference trajectory against the environment's tools and the task's turns.
fn read_solution(path: &Path, env: &EnvSpec, turns: usize) -> Result<Vec<SolutionStep>, TaskError> {
    const STEP: &str =
        "a JSON object {\"tool\": NAME, \"args\": {...}} with an optional \"turn\": N";
    let text = located::read_text(path)?;
    let fail = |line: usize, problem: String, expected: &str| TaskError::Solution {
        file: path.to_path_buf(),
        line,
        problem,
        expected: expected.to_string(),
    };
    let mut steps: Vec<SolutionStep> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        if line.trim().is_empty() {
            continue;
        }
        let step: SolutionStep = serde_json::from_str(line)
            .map_err(|e| fail(number, format!("column {}: {e}", e.column()), STEP))?;
        if !env.offers_tool(&step.tool) {
            return Err(fail(
                number,
                format!(
                    "calls `{}`, which the environment does not offer",
                    step.tool
                ),
                &format!("one of the environment's tools: {}", env.tools.join(", ")),
            ));
        }
        if !step.args.is_object() {
            return Err(fail(
                number,
                format!("`args` is {}", step.args),
                "the tool's arguments as a JSON object",
            ));
        }
        if step.turn >= turns {
            return Err(fail(
                number,
                format!("`turn` is {}, but the task has {turns} turn(s)", step.turn),
                &format!("a turn index from 0 to {}", turns - 1),
            ));
        }
        if let Some(previous) = steps.last()
            && step.turn < previous.turn
        {
            return Err(fail(
                number,
                format!("`turn` goes back from {} to {}", previous.turn, step.turn),
                "calls in the order of the turns they answer",
            ));
        }
        steps.push(step);
    }
    Ok(steps)
}

impl Check<'_> {
    fn prompt(&self, key: &str, value: &Spanned<String>) -> Result<String, TaskError> {
        if value.get_ref().trim().is_empty() {
            return Err(self
                .invalid(
                    key,
                    value.span(),
                    "is empty".into(),
                    "the request the agent is given, as non-empty text",
                )
                .into());
        }
        Ok(value.get_ref().clone())
    }
}

/// The task directories under `path`: a task itself (it has `task.toml`), an environment (its
/// `tasks/*`), or a directory of environments (`*/tasks/*`). Sorted.
pub fn find_tasks(path: &Path) -> Vec<PathBuf> {
    let is_task = |p: &Path| p.join("task.toml").is_file();
    let children = |p: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(p)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    };
    if is_task(path) {
        return vec![path.to_path_buf()];
    }
    if path.join("env.toml").is_file() {
        return children(&path.join("tasks"))
            .into_iter()
            .filter(|t| is_task(t))
            .collect();
    }
    children(path)
        .into_iter()
        .flat_map(|env| children(&env.join("tasks")))
        .filter(|t| is_task(t))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::spec::located::fixture::{Example, repo};
    use crate::spec::time::Weekday;

    /// An extract-todos copy whose task.toml is replaced by `text`.
    fn load_text(text: &str) -> (Example, Result<TaskSpec, TaskError>) {
        let ex = Example::new();
        std::fs::write(ex.task_dir("extract-todos").join("task.toml"), text).unwrap();
        let result = TaskSpec::load(ex.task_dir("extract-todos"));
        (ex, result)
    }

    fn invalid_key(err: &TaskError) -> (&str, usize) {
        match err {
            TaskError::File(FileError::Invalid { key, line, .. }) => (key, *line),
            other => panic!("unexpected {other}"),
        }
    }

    const MANIFEST: &str = "\n[verifier]\nkind = \"manifest\"\n";

    #[test]
    fn the_example_tasks_load() {
        let env_dir = repo().join("workspaces/example");
        let task = TaskSpec::load(env_dir.join("tasks/extract-todos")).unwrap();
        assert_eq!(task.id, "extract-todos");
        assert_eq!(task.env.name, "example");
        assert_eq!(task.turns.len(), 1);
        assert!(task.turns[0].starts_with("Please go through the emails in inbox/"));
        assert!(task.turns[0].ends_with("change nothing else."));
        assert_eq!(task.base_time, None);
        assert_eq!(task.effective_base_time(), task.env.base_time);
        assert_eq!(task.files, None);
        assert_eq!(task.source, None);
        assert_eq!(
            task.verifier,
            VerifierSpec {
                kind: VerifierKind::Manifest,
                command: None,
                timeout_secs: DEFAULT_VERIFIER_TIMEOUT_SECS,
                extra: ExtraFiles::Deny,
                all_or_nothing: false,
                weights: None,
                grader_dir: "grader".into(),
                judge: None,
            }
        );
        let steps = task.solution_steps().unwrap();
        assert_eq!(steps.len(), 5);
        assert_eq!(steps[0].tool, "read");
        assert_eq!(steps[0].args["path"], "inbox/1.txt");
        let last = steps.last().unwrap();
        assert_eq!(last.tool, "write");
        assert_eq!(last.args["path"], "notes/todo.md");
        // The reference answer adds exactly the ACTION lines, in order, to the to-do list.
        let content = last.args["content"].as_str().unwrap();
        for n in 1..=3 {
            let email =
                std::fs::read_to_string(env_dir.join(format!("files/inbox/{n}.txt"))).unwrap();
            for action in email.lines().filter_map(|l| l.strip_prefix("ACTION: ")) {
                assert!(content.contains(&format!("- [ ] {action}\n")), "{action}");
            }
        }

        let task = TaskSpec::load(env_dir.join("tasks/archive-read-mail")).unwrap();
        assert_eq!(task.turns.len(), 2);
        assert!(task.turns[1].contains("archive/"));
        let start = task.effective_base_time();
        assert_eq!(start.to_string(), "2026-03-06T16:30:00Z");
        assert_eq!(start.weekday(), Weekday::Friday);
        let steps = task.solution_steps().unwrap();
        assert_eq!(steps.iter().map(|s| s.turn).max(), Some(1));
        assert!(steps.iter().any(|s| {
            s.tool == "exec"
                && s.args["command"]
                    .as_str()
                    .unwrap()
                    .contains("mv inbox/1.txt inbox/3.txt archive/")
        }));

        let ids: Vec<_> = task
            .env
            .tasks()
            .unwrap()
            .into_iter()
            .map(|t| t.id)
            .collect();
        assert_eq!(ids, ["archive-read-mail", "extract-todos"]);
    }

    #[test]
    fn a_task_resolves_as_env_slash_id_or_as_a_path() {
        let ex = Example::new();
        let task = TaskSpec::resolve("example/extract-todos", ex.workspaces()).unwrap();
        assert_eq!(task.id, "extract-todos");
        assert_eq!(
            task.dir,
            std::fs::canonicalize(ex.task_dir("extract-todos")).unwrap()
        );
        let path = ex.task_dir("archive-read-mail");
        let task = TaskSpec::resolve(path.to_str().unwrap(), "/nonexistent").unwrap();
        assert_eq!(task.id, "archive-read-mail");
    }

    #[test]
    fn an_unknown_task_lists_what_was_tried() {
        let ex = Example::new();
        let err = TaskSpec::resolve("example/extract-todo", ex.workspaces()).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, TaskError::NotFound { .. }), "{msg}");
        assert!(
            msg.contains("example/extract-todo (does not exist)"),
            "{msg}"
        );
        let under_root = ex.workspaces().join("example/tasks/extract-todo");
        assert!(
            msg.contains(&format!("{} (does not exist)", under_root.display())),
            "{msg}"
        );
        // A directory that is not a task says so.
        let env_dir = ex.env_dir();
        let err = TaskSpec::resolve(env_dir.to_str().unwrap(), ex.workspaces()).unwrap_err();
        assert!(err.to_string().contains("no task.toml there"), "{err}");
    }

    #[test]
    fn a_task_must_sit_in_a_tasks_directory() {
        let ex = Example::new();
        let stray = ex.env_dir().join("stray");
        std::fs::create_dir(&stray).unwrap();
        std::fs::write(stray.join("task.toml"), format!("prompt = \"p\"{MANIFEST}")).unwrap();
        let err = TaskSpec::load(&stray).unwrap_err();
        assert!(
            err.to_string().contains("not inside a `tasks` directory"),
            "{err}"
        );
    }

    #[test]
    fn a_broken_environment_fails_the_task() {
        let ex = Example::new();
        ex.edit(&ex.env_dir().join("env.toml"), "name =", "nmae =");
        let err = TaskSpec::load(ex.task_dir("extract-todos")).unwrap_err();
        assert!(
            matches!(&err, TaskError::Env(EnvError::File(FileError::Syntax { key: Some(k), .. })) if k == "nmae"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_prompt_is_refused() {
        let (_, result) = load_text(MANIFEST);
        let err = result.unwrap_err();
        assert_eq!(invalid_key(&err).0, "prompt");
        assert!(err.to_string().contains("[[turns]]"), "{err}");
        let (_, result) = load_text(&format!("prompt = \"  \"{MANIFEST}"));
        assert_eq!(invalid_key(&result.unwrap_err()), ("prompt", 1));
        let (_, result) = load_text(&format!(
            "[[turns]]\nprompt = \"a\"\n[[turns]]\nprompt = \"\"\n{MANIFEST}"
        ));
        assert_eq!(invalid_key(&result.unwrap_err()), ("turns.prompt", 4));
        let (_, result) = load_text(&format!("[[turns]]\n{MANIFEST}"));
        let err = result.unwrap_err();
        assert!(err.to_string().contains("key `turns.prompt`"), "{err}");
        let (_, result) = load_text(&format!("turns = []\n{MANIFEST}"));
        assert_eq!(invalid_key(&result.unwrap_err()).0, "turns");
    }

    #[test]
    fn prompt_and_turns_together_are_refused() {
        let (_, result) = load_text(&format!(
            "prompt = \"one\"\n\n[[turns]]\nprompt = \"two\"\n{MANIFEST}"
        ));
        let err = result.unwrap_err();
        assert_eq!(invalid_key(&err).0, "turns");
        assert!(err.to_string().contains("not both"), "{err}");
    }

    #[test]
    fn a_typo_in_the_verifier_names_the_qualified_key_and_the_line() {
        let (_, result) =
            load_text("prompt = \"p\"\n\n[verifier]\nkind = \"manifest\"\nextar = \"deny\"\n");
        let err = result.unwrap_err();
        match &err {
            TaskError::File(FileError::Syntax { key, line, .. }) => {
                assert_eq!(key.as_deref(), Some("verifier.extar"));
                assert_eq!(*line, 5);
            }
            other => panic!("unexpected {other}"),
        }
        let msg = err.to_string();
        assert!(msg.contains("task.toml, line 5"), "{msg}");
        assert!(msg.contains("expected one of"), "{msg}");
        let (_, result) = load_text("prompt = \"p\"\n[verifier]\nkind = \"manual\"\n");
        let msg = result.unwrap_err().to_string();
        assert!(msg.contains("`manifest`, `command`"), "{msg}");
        let (_, result) = load_text("prompt = \"p\"\n");
        let msg = result.unwrap_err().to_string();
        assert!(msg.contains("missing key `verifier`"), "{msg}");
    }

    #[test]
    fn hybrid_weights_must_be_non_negative_with_a_positive_sum() {
        let text = "prompt = \"p\"\n\n[verifier]\nkind = \"hybrid\"\ncommand = \"python3 check.py\"\nweights = { manifest = -0.5, command = 1.5 }\n";
        let (_, result) = load_text(text);
        let err = result.unwrap_err();
        assert_eq!(invalid_key(&err), ("verifier.weights.manifest", 6));
        assert!(err.to_string().contains("non-negative"), "{err}");
        let (_, result) = load_text(&text.replace("-0.5, command = 1.5", "0, command = 0"));
        assert_eq!(invalid_key(&result.unwrap_err()), ("verifier.weights", 6));
        let (_, result) = load_text(&text.replace("-0.5, command = 1.5", "1, command = 3"));
        let task = result.unwrap();
        assert_eq!(
            task.verifier.weights,
            Some(Weights {
                manifest: 1.0,
                command: 3.0,
                judge: 0.0
            })
        );
        assert_eq!(task.verifier.command.as_deref(), Some("python3 check.py"));
        let (_, result) =
            load_text(&text.replace("weights = { manifest = -0.5, command = 1.5 }\n", ""));
        assert_eq!(
            result.unwrap().verifier.weights,
            Some(Weights {
                manifest: 0.5,
                command: 0.5,
                judge: 0.0
            })
        );
    }

    #[test]
    fn verifier_keys_must_fit_the_kind() {
        let base = "prompt = \"p\"\n[verifier]\n";
        for (rest, key) in [
            ("kind = \"command\"\n", "verifier.command"),
            ("kind = \"hybrid\"\n", "verifier.command"),
            (
                "kind = \"manifest\"\ncommand = \"true\"\n",
                "verifier.command",
            ),
            (
                "kind = \"manifest\"\ntimeout_secs = 5\n",
                "verifier.timeout_secs",
            ),
            (
                "kind = \"command\"\ncommand = \"true\"\nextra = \"deny\"\n",
                "verifier.extra",
            ),
            (
                "kind = \"command\"\ncommand = \"true\"\ntimeout_secs = 0\n",
                "verifier.timeout_secs",
            ),
            (
                "kind = \"command\"\ncommand = \"true\"\nweights = { manifest = 1, command = 1 }\n",
                "verifier.weights",
            ),
        ] {
            let (_, result) = load_text(&format!("{base}{rest}"));
            assert_eq!(invalid_key(&result.unwrap_err()).0, key, "{rest}");
        }
        let (_, result) = load_text(&format!(
            "{base}kind = \"command\"\ncommand = \"./check.sh\"\ntimeout_secs = 30\nall_or_nothing = true\n"
        ));
        let v = result.unwrap().verifier;
        assert_eq!(v.kind, VerifierKind::Command);
        assert_eq!(v.timeout_secs, 30);
        assert!(v.all_or_nothing);
        assert_eq!(v.extra, ExtraFiles::Allow);
    }

    #[test]
    fn a_judge_needs_its_table_a_rubric_inside_the_task_and_hybrid_weights() {
        let base = "prompt = \"p\"\n[verifier]\n";
        for (rest, key) in [
            ("kind = \"judge\"\n", "verifier.judge"),
            (
                "kind = \"judge\"\n[verifier.judge]\nrubric = \"../rubric.md\"\n",
                "verifier.judge.rubric",
            ),
            (
                "kind = \"judge\"\n[verifier.judge]\nrubric = \"r.md\"\nfiles = [\"/etc/passwd\"]\n",
                "verifier.judge.files",
            ),
            (
                "kind = \"command\"\ncommand = \"true\"\n[verifier.judge]\nrubric = \"r.md\"\n",
                "verifier.judge",
            ),
            (
                "kind = \"hybrid\"\ncommand = \"true\"\n[verifier.judge]\nrubric = \"r.md\"\n",
                "verifier.weights",
            ),
            (
                "kind = \"hybrid\"\nweights = { judge = 1 }\n[verifier.judge]\nrubric = \"r.md\"\n",
                "verifier.weights",
            ),
            (
                "kind = \"hybrid\"\ncommand = \"true\"\nweights = { manifest = 1, judge = 1 }\n[verifier.judge]\nrubric = \"r.md\"\n",
                "verifier.command",
            ),
        ] {
            let (_, result) = load_text(&format!("{base}{rest}"));
            assert_eq!(invalid_key(&result.unwrap_err()).0, key, "{rest}");
        }
        // The rubric must exist, as a file of the task directory.
        let text = format!(
            "{base}kind = \"hybrid\"\ncommand = \"true\"\nweights = {{ command = 1, judge = 3 }}\n[verifier.judge]\nrubric = \"rubric.md\"\n"
        );
        let (_, result) = load_text(&text);
        let err = result.unwrap_err();
        assert!(err.to_string().contains("rubric.md"), "{err}");
        let fixture = Example::new();
        let dir = fixture.task_dir("extract-todos");
        std::fs::write(dir.join("task.toml"), &text).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", dir.join("rubric.md")).unwrap();
        let err = TaskSpec::load(&dir).unwrap_err().to_string();
        assert!(err.contains("resolves to /etc/hostname"), "{err}");
        std::fs::remove_file(dir.join("rubric.md")).unwrap();
        std::fs::write(dir.join("rubric.md"), "Score the summary.").unwrap();
        let v = TaskSpec::load(&dir).unwrap().verifier;
        assert_eq!(v.kind, VerifierKind::Hybrid);
        assert!(!v.has_manifest());
        assert_eq!(
            v.weights,
            Some(Weights {
                manifest: 0.0,
                command: 1.0,
                judge: 3.0
            })
        );
        assert_eq!(v.judge.unwrap().rubric, "rubric.md");
    }

    #[test]
    fn a_task_base_time_is_checked_like_the_environments() {
        let (_, result) = load_text(&format!(
            "prompt = \"p\"\nbase_time = \"Friday\"\n{MANIFEST}"
        ));
        let err = result.unwrap_err();
        assert_eq!(invalid_key(&err), ("base_time", 2));
        assert!(err.to_string().contains("RFC 3339"), "{err}");
    }

    #[test]
    fn an_imported_task_records_its_source() {
        let (_, result) = load_text(&format!(
            "prompt = \"p\"\n{MANIFEST}\n[source]\norigin = \"https://example.org/bench\"\nid = \"t-17\"\nlicense = \"CC-BY-4.0\"\n"
        ));
        assert_eq!(
            result.unwrap().source,
            Some(Source {
                origin: "https://example.org/bench".into(),
                id: "t-17".into(),
                license: "CC-BY-4.0".into(),
                seed: None,
                chain: vec![],
            })
        );
        let (_, result) = load_text(&format!(
            "prompt = \"p\"\n{MANIFEST}\n[source]\norigin = \"o\"\nid = \"t-17\"\n"
        ));
        let msg = result.unwrap_err().to_string();
        assert!(msg.contains("key `source.license`"), "{msg}");
    }

    #[test]
    fn task_files_are_found_when_present() {
        let ex = Example::new();
        let files = ex.task_dir("extract-todos").join("files/inbox");
        std::fs::create_dir_all(&files).unwrap();
        std::fs::write(files.join("4.txt"), "Status: unread\n").unwrap();
        let task = TaskSpec::load(ex.task_dir("extract-todos")).unwrap();
        assert_eq!(task.files, Some(task.dir.join("files")));
    }

    #[test]
    fn a_solution_is_checked_line_by_line() {
        let ex = Example::new();
        let solution = ex.task_dir("archive-read-mail").join("solution.jsonl");
        for (from, to, line, problem) in [
            (
                "\"tool\": \"grep\"",
                "\"tool\": \"browse\"",
                2,
                "does not offer",
            ),
            (
                "\"turn\": 1, \"tool\": \"exec\"",
                "\"turn\": 2, \"tool\": \"exec\"",
                3,
                "2 turn(s)",
            ),
            (
                "\"turn\": 1, \"tool\": \"ls\"",
                "\"turn\": 0, \"tool\": \"ls\"",
                4,
                "goes back",
            ),
            ("{\"path\": \"archive\"}", "[\"archive\"]", 4, "JSON object"),
            (
                "\"args\": {\"path\": \"inbox\"}",
                "\"argz\": {}",
                1,
                "unknown field",
            ),
        ] {
            let original = std::fs::read_to_string(&solution).unwrap();
            ex.edit(&solution, from, to);
            assert!(
                std::fs::read_to_string(&solution)
                    .unwrap()
                    .lines()
                    .nth(line - 1)
                    .unwrap()
                    .contains(to)
            );
            let err = TaskSpec::load(ex.task_dir("archive-read-mail")).unwrap_err();
            match &err {
                TaskError::Solution { line: l, .. } => assert_eq!(*l, line, "{err}"),
                other => panic!("unexpected {other}"),
            }
            assert!(err.to_string().contains(problem), "{err}");
            std::fs::write(&solution, original).unwrap();
        }
    }
}
