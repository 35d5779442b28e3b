//! Importers: other projects' Claw tasks turned into envcraft environments, unchanged.
//!
//! Each task of a source set becomes one environment, `DEST/FORMAT-ID/`, holding one task,
//! `tasks/ID/`: the environment's `files/` is the task's initial workspace, `task.toml` keeps
//! the original prompt byte for byte and records where it came from (`[source]`), the task's
//! own grader goes under `tasks/ID/grader/` (run by a `command` verifier), and
//! `tasks/ID/source.json` keeps the rest of the original metadata and every note about what
//! envcraft could not represent.
//!
//! An import is a pure plan first ([`EnvPlan`]: the files to write, as text or as a copy of a
//! source file), made by [`clawgym`], [`pinchbench`] or [`harbor`], then written by
//! [`write_plan`]. The
//! plan holds no absolute path, no time and no map with an unspecified order, so importing
//! the same source twice gives byte-identical trees. A task that cannot be represented is
//! refused with a reason and the others are imported; a task that asks for what the sandbox
//! does not give (the web, a container runtime) is imported unchanged with a note, or skipped
//! when asked.
//!
//! What every imported environment shares: no network (the `default` policy, or for Harbor
//! tasks a policy of their own with the same sandbox), every built-in tool, and a frozen clock
//! at [`IMPORT_BASE_TIME`] (no format has a clock of its own; `envcraft run --base-time`
//! overrides it).

pub mod clawgym;
pub mod dockerfile;
pub mod harbor;
pub mod pinchbench;
pub mod source;

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use crate::spec::env::BUILTIN_TOOLS;

pub use source::{SourceFile, SourceRoot};

/// The session clock of every imported environment: a Monday morning, fixed so that an
/// import is deterministic (neither ClawGym nor PinchBench records one).
pub const IMPORT_BASE_TIME: &str = "2026-01-05T09:00:00Z";

/// Why an import failed, or why one task of it was refused.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The source does not follow its format.
    #[error("{path}{}: {problem}; expected {expected}", line_part(*.line))]
    Format {
        path: PathBuf,
        /// 1-based, when the problem is on one line.
        line: Option<usize>,
        problem: String,
        expected: String,
    },
    /// A symbolic link (the file itself or one on the way to it) or a special file in a
    /// task source: its content would be the machine's, not the task's.
    #[error(
        "task {task}: {path} is {kind}; links and special files are refused in a task source (only regular files and directories are imported)"
    )]
    LinkOrSpecial {
        task: String,
        path: PathBuf,
        kind: &'static str,
    },
    /// The source is well formed but envcraft cannot represent it faithfully.
    #[error("{path}: cannot be represented: {reason}")]
    Unrepresentable { path: PathBuf, reason: String },
    #[error("{path} already exists; import into a new directory or remove it first")]
    Exists { path: PathBuf },
    #[error("{path} holds no {format} task; expected {expected}")]
    NoTasks {
        path: PathBuf,
        format: &'static str,
        expected: &'static str,
    },
    #[error(
        "cannot tell the format of {path}: expected a ClawGym task folder (holding data_entry.json), a PinchBench task file (.md) or a Harbor task directory (task.toml, instruction.md, environment/, tests/)"
    )]
    UnknownFormat { path: PathBuf },
}

fn line_part(line: Option<usize>) -> String {
    line.map(|l| format!(", line {l}")).unwrap_or_default()
}

/// The task formats envcraft imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// ClawGym: `task_NNNN/` folders (`data_entry.json`, `input_files/`, `reward/`).
    ClawGym,
    /// PinchBench: `tasks/*.md` (YAML front matter, `## Prompt`, `def grade(...)`).
    PinchBench,
    /// Harbor: task directories (`task.toml`, `instruction.md`, `environment/`, `tests/`,
    /// `solution/`), or a dataset of them.
    Harbor,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::ClawGym => "clawgym",
            Format::PinchBench => "pinchbench",
            Format::Harbor => "harbor",
        }
    }
}

/// Choices of an import.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// Skip (with a message) the tasks that need what the sandbox does not give, instead of
    /// importing them with a note.
    pub skip_unmet_needs: bool,
    /// What stands for a Harbor task's image (`--base host`: the host's system paths).
    pub base: harbor::Base,
}

/// One file of a plan, relative to the destination directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFile {
    pub path: PathBuf,
    pub content: Content,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// Written as given.
    Text(String),
    /// A copy of this source file, bytes and permission bits (never setuid), checked again
    /// on open when it is written.
    Copy(SourceFile),
}

/// Everything one imported task becomes: one environment directory with one task.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvPlan {
    /// The environment's directory name under the destination.
    pub env: String,
    /// The task's id (its directory under `tasks/`).
    pub task: String,
    /// The files, paths relative to the environment's directory; sorted by path.
    pub files: Vec<PlannedFile>,
    /// What the task needs that the sandbox does not give (`network`, `docker`), each with
    /// why it was judged so.
    pub unmet_needs: Vec<(String, String)>,
    /// Everything else the import could not carry over exactly, for people.
    pub notes: Vec<String>,
    /// The image `env.toml` names (a Harbor task's `FROM`), which the store must hold.
    pub image: Option<String>,
    /// How that image is brought into the store when it lacks it (a Harbor task's).
    pub provision: Option<harbor::Provision>,
}

/// One task the importer looked at: planned, or refused with a reason.
pub type Planned = (String, Result<EnvPlan, ImportError>);

/// What an import did.
#[derive(Debug, Default)]
pub struct ImportOutcome {
    /// Each imported task: its directory, and the notes about it.
    pub imported: Vec<ImportedTask>,
    /// Each task left out: its id and why.
    pub skipped: Vec<(String, String)>,
}

#[derive(Debug)]
pub struct ImportedTask {
    pub env: String,
    pub task: String,
    /// `DEST/ENV/tasks/ID`.
    pub task_dir: PathBuf,
    pub notes: Vec<String>,
    /// The image the environment runs over, when it names one.
    pub image: Option<String>,
    /// How that image is brought into the store when it lacks it (see
    /// [`harbor::provide`]).
    pub provision: Option<harbor::Provision>,
}

/// Import every task of `format` under `src` into `dest` (created when missing), one
/// environment per task. Refused and skipped tasks are listed in the outcome; an error is
/// returned only when nothing of the source could be read or a write failed.
pub fn import(
    format: Format,
    src: &Path,
    dest: &Path,
    options: &ImportOptions,
) -> Result<ImportOutcome, ImportError> {
    let planned = match format {
        Format::ClawGym => clawgym::plan_all(src)?,
        Format::PinchBench => pinchbench::plan_all(src)?,
        Format::Harbor => harbor::plan_all(src, options.base)?,
    };
    std::fs::create_dir_all(dest).map_err(|source| ImportError::Write {
        path: dest.to_path_buf(),
        source,
    })?;
    let mut outcome = ImportOutcome::default();
    for (id, plan) in planned {
        let plan = match plan {
            Ok(plan) => plan,
            Err(e) => {
                outcome.skipped.push((id, crate::error::chain(&e)));
                continue;
            }
        };
        if options.skip_unmet_needs && !plan.unmet_needs.is_empty() {
            let needs: Vec<String> = plan
                .unmet_needs
                .iter()
                .map(|(need, why)| format!("{need} ({why})"))
                .collect();
            outcome.skipped.push((
                id,
                format!("needs what the sandbox does not give: {}", needs.join(", ")),
            ));
            continue;
        }
        let env_dir = match write_plan(&plan, dest) {
            Ok(dir) => dir,
            Err(e @ (ImportError::Exists { .. } | ImportError::LinkOrSpecial { .. })) => {
                outcome.skipped.push((id, e.to_string()));
                continue;
            }
            Err(e) => return Err(e),
        };
        outcome.imported.push(ImportedTask {
            task_dir: env_dir.join("tasks").join(&plan.task),
            env: plan.env,
            task: plan.task,
            notes: plan.notes,
            image: plan.image,
            provision: plan.provision,
        });
    }
    Ok(outcome)
}

/// The format of the one foreign task at `path`: a Harbor task directory (see
/// [`harbor::is_task_dir`]), a ClawGym task folder (holding `data_entry.json`) or a
/// PinchBench task file (`.md`).
pub fn single_task_format(path: &Path) -> Option<Format> {
    if harbor::is_task_dir(path) {
        Some(Format::Harbor)
    } else if path.is_dir() && path.join("data_entry.json").is_file() {
        Some(Format::ClawGym)
    } else if path.is_file() && path.extension().is_some_and(|e| e == "md") {
        Some(Format::PinchBench)
    } else {
        None
    }
}

/// The foreign format of the task set at `path`, when it is one: a Harbor task directory or a
/// dataset of them; a ClawGym task folder (`data_entry.json`) or a folder of them; a PinchBench task file (`.md`), a folder of them,
/// or a checkout holding `tasks/*.md`. `None` for anything else (an envcraft tree, say).
pub fn detect(path: &Path) -> Option<Format> {
    let has_child = |dir: &Path, test: &dyn Fn(&Path) -> bool| {
        std::fs::read_dir(dir)
            .map(|rd| rd.flatten().any(|e| test(&e.path())))
            .unwrap_or(false)
    };
    let is_md = |p: &Path| single_task_format(p) == Some(Format::PinchBench);
    if let Some(format) = single_task_format(path) {
        return Some(format);
    }
    if has_child(path, &|p| single_task_format(p) == Some(Format::ClawGym)) {
        return Some(Format::ClawGym);
    }
    if has_child(path, &harbor::is_task_dir) {
        return Some(Format::Harbor);
    }
    if path.join("tasks").is_dir() && has_child(&path.join("tasks"), &is_md) {
        return Some(Format::PinchBench);
    }
    let has_envcraft_tasks = path.join("env.toml").is_file() || path.join("task.toml").is_file();
    if path.is_dir() && !has_envcraft_tasks && has_child(path, &|p| is_md(p) && !is_readme(p)) {
        return Some(Format::PinchBench);
    }
    None
}

fn is_readme(path: &Path) -> bool {
    path.file_stem()
        .is_some_and(|s| s.eq_ignore_ascii_case("readme"))
}

/// Import the task set at `src` (in `format`) into a new temporary directory, removed when
/// the returned handle is dropped: what `envcraft suite` runs a foreign set from.
pub fn import_all_to_temp(
    format: Format,
    src: &Path,
    options: &ImportOptions,
) -> Result<(tempfile::TempDir, ImportOutcome), ImportError> {
    let temp = tempfile::Builder::new()
        .prefix("envcraft-import-")
        .tempdir()
        .map_err(|source| ImportError::Write {
            path: std::env::temp_dir(),
            source,
        })?;
    let outcome = import(format, src, temp.path(), options)?;
    Ok((temp, outcome))
}

/// Import the one task at `path` (a ClawGym task folder, a PinchBench `.md` file or a Harbor
/// task directory) into a new temporary directory; returns the directory (removed when
/// dropped) and the task as imported (its directory inside it, ready for
/// [`crate::spec::TaskSpec::load`]).
pub fn import_one_to_temp(
    path: &Path,
    options: &ImportOptions,
) -> Result<(tempfile::TempDir, ImportedTask), ImportError> {
    let plan = match single_task_format(path) {
        Some(Format::Harbor) => harbor::plan_task(path, options.base)?,
        Some(Format::ClawGym) => clawgym::plan_task(path)?,
        Some(Format::PinchBench) => {
            pinchbench::plan_task(path, &pinchbench::assets_root_of_file(path))?
        }
        None => {
            return Err(ImportError::UnknownFormat {
                path: path.to_path_buf(),
            });
        }
    };
    let temp = tempfile::Builder::new()
        .prefix("envcraft-import-")
        .tempdir()
        .map_err(|source| ImportError::Write {
            path: std::env::temp_dir(),
            source,
        })?;
    let env_dir = write_plan(&plan, temp.path())?;
    let task_dir = env_dir.join("tasks").join(&plan.task);
    Ok((
        temp,
        ImportedTask {
            env: plan.env,
            task: plan.task,
            task_dir,
            notes: plan.notes,
            image: plan.image,
            provision: plan.provision,
        },
    ))
}

/// Write `plan` as `dest/ENV/`: first into a hidden sibling, then renamed into place, so that a
/// failed import leaves no half environment behind. Refuses when `dest/ENV` exists.
pub fn write_plan(plan: &EnvPlan, dest: &Path) -> Result<PathBuf, ImportError> {
    let final_dir = dest.join(&plan.env);
    if final_dir.symlink_metadata().is_ok() {
        return Err(ImportError::Exists { path: final_dir });
    }
    let partial = dest.join(format!(".{}.importing", plan.env));
    if partial.symlink_metadata().is_ok() {
        std::fs::remove_dir_all(&partial).map_err(|source| ImportError::Write {
            path: partial.clone(),
            source,
        })?;
    }
    std::fs::create_dir(&partial).map_err(|source| ImportError::Write {
        path: partial.clone(),
        source,
    })?;
    let written = write_files(plan, &partial);
    if let Err(e) = written {
        let _ = std::fs::remove_dir_all(&partial);
        return Err(e);
    }
    std::fs::rename(&partial, &final_dir).map_err(|source| ImportError::Write {
        path: final_dir.clone(),
        source,
    })?;
    Ok(final_dir)
}

fn write_files(plan: &EnvPlan, root: &Path) -> Result<(), ImportError> {
    // files/ must exist even when the workspace starts empty.
    let files = root.join("files");
    std::fs::create_dir(&files).map_err(|source| ImportError::Write {
        path: files,
        source,
    })?;
    for file in &plan.files {
        let target = root.join(&file.path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent).map_err(|source| ImportError::Write {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        match &file.content {
            Content::Text(text) => {
                use std::io::Write as _;
                std::fs::File::create_new(&target)
                    .and_then(|mut f| f.write_all(text.as_bytes()))
                    .map_err(|source| ImportError::Write {
                        path: target,
                        source,
                    })?
            }
            Content::Copy(from) => from.copy_to(&plan.task, &target)?,
        }
    }
    Ok(())
}

/// Plan copies of every regular file under `from` (below `root`) to `to/REL`. Symbolic links
/// and special files are refused: a link could point out of the workspace, and their meaning
/// depends on the machine they were made on.
pub(crate) fn plan_copy_tree(
    root: &SourceRoot,
    task: &str,
    from: &Path,
    to: &Path,
    files: &mut Vec<PlannedFile>,
) -> Result<(), ImportError> {
    let mut found = Vec::new();
    root.walk_files(task, from, to, &mut found)?;
    files.extend(found.into_iter().map(|(path, source)| PlannedFile {
        path,
        content: Content::Copy(source),
    }));
    Ok(())
}

/// The directory holding the one task at `path` (the source root) and the task's path below
/// it: the user named `path`, so links on the way to its directory are followed, and the
/// task itself is opened below it like every other file.
pub(crate) fn split_single(path: &Path) -> (PathBuf, PathBuf) {
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) => (parent.to_path_buf(), PathBuf::from(name)),
        _ => match std::fs::canonicalize(path) {
            Ok(full) => match (full.parent(), full.file_name()) {
                (Some(parent), Some(name)) => (parent.to_path_buf(), PathBuf::from(name)),
                _ => (full, PathBuf::new()),
            },
            Err(_) => (path.to_path_buf(), PathBuf::new()),
        },
    }
}

/// Whether `name` can be a directory name envcraft accepts as an environment or a task id.
pub(crate) use crate::spec::is_plain_name;

/// Whether `path` is relative and stays inside the directory it is relative to.
pub(crate) fn is_inner_path(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && path
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
}

/// `text` as a TOML basic string that reads back as exactly `text`: `"` and `\` escaped,
/// control characters (and DEL) as escapes, everything else as it is.
pub fn toml_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The name of a source directory (of its canonical path, for `.` and the like).
pub(crate) fn dir_name(dir: &Path) -> String {
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
    name.or_else(|| {
        std::fs::canonicalize(dir)
            .ok()
            .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
    })
    .unwrap_or_default()
}

/// The `env.toml` of an imported environment.
pub(crate) fn env_toml(name: &str, description: &str) -> String {
    let tools: Vec<String> = BUILTIN_TOOLS.iter().map(|t| toml_string(t)).collect();
    format!(
        "# Imported by `envcraft import`; the clock is fixed (the source has none).\n\
         name = {}\n\
         description = {}\n\
         policy = \"default\"\n\
         tools = [{}]\n\
         base_time = {}\n\
         time_step_secs = 0\n",
        toml_string(name),
        toml_string(description),
        tools.join(", "),
        toml_string(IMPORT_BASE_TIME),
    )
}

/// The `[source]` table of an imported task.
pub(crate) fn source_table(origin: &str, id: &str, license: &str) -> String {
    format!(
        "\n[source]\norigin = {}\nid = {}\nlicense = {}\n",
        toml_string(origin),
        toml_string(id),
        toml_string(license)
    )
}

/// The prompt lines of `task.toml`: `prompt = ...` for one, `[[turns]]` tables for several.
pub(crate) fn prompt_toml(turns: &[String]) -> String {
    match turns {
        [one] => format!("prompt = {}\n", toml_string(one)),
        many => many
            .iter()
            .map(|t| format!("[[turns]]\nprompt = {}\n\n", toml_string(t)))
            .collect(),
    }
}

/// What a prompt asks for that the `default` sandbox does not give: `(need, why)` pairs,
/// judged from phrases that ask for the web or a container runtime. A prompt that forbids
/// the Internet ("do not use the Internet") asks for none of them.
pub fn unmet_needs(prompt: &str) -> Vec<(String, String)> {
    const NETWORK: [&str; 9] = [
        "web search",
        "search the web",
        "internet retrieval",
        "over https",
        "http client",
        "curl",
        "wget",
        "fetch",
        "download",
    ];
    const DOCKER: [&str; 4] = [
        "docker-compose",
        "docker compose",
        "docker run",
        "in docker",
    ];
    let lower = prompt.to_lowercase();
    let mut needs = Vec::new();
    for (need, phrases) in [("network", &NETWORK[..]), ("docker", &DOCKER[..])] {
        if let Some(p) = phrases.iter().find(|p| lower.contains(**p)) {
            needs.push((need.to_string(), format!("the prompt says \"{p}\"")));
        }
    }
    needs
}

/// The note that goes with each unmet need, in `docs.md`, `source.json` and the import's report.
pub(crate) fn need_notes(needs: &[(String, String)]) -> Vec<String> {
    needs
        .iter()
        .map(|(need, why)| match need.as_str() {
            "network" => format!(
                "needs the network ({why}), which the `default` policy does not give: \
                 imported unchanged, so the agent cannot do that part and the grader scores \
                 what it left"
            ),
            "docker" => format!(
                "needs a container runtime ({why}), which the sandbox does not offer: \
                 imported unchanged, so the agent cannot do that part and the grader scores \
                 what it left"
            ),
            other => format!("needs {other} ({why})"),
        })
        .collect()
}

/// The `docs.md` of an imported environment.
pub(crate) fn docs_md(origin: &str, id: &str, license: &str, notes: &[String]) -> String {
    let mut docs = format!(
        "# {origin} task {id}\n\n\
         Imported from {origin} ({license}) by `envcraft import`. Your working directory is the \
         workspace (also at /root/.openclaw/workspace); paths in the request are relative to \
         it. There is no network.\n"
    );
    if !notes.is_empty() {
        docs.push_str("\nNotes on the import:\n\n");
        for note in notes {
            let _ = writeln!(docs, "- {note}");
        }
    }
    docs
}

/// Sort a plan's files by path (so the plan, like the tree it writes, has one order).
pub(crate) fn sorted(mut files: Vec<PlannedFile>) -> Vec<PlannedFile> {
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn toml_strings_read_back_byte_for_byte() {
        for text in [
            "plain",
            "I’m “quoted” \"and\" 'single' \\ back\\slash",
            "lines\nand\r\nCRLF\tand tabs\u{0}\u{1b}\u{7f} and é 日本 🦀",
            "ends with a backslash \\",
            "\"\"\" triple",
            "",
        ] {
            let doc = format!("prompt = {}\n", toml_string(text));
            let table: toml::Table = toml::from_str(&doc).unwrap();
            assert_eq!(table["prompt"].as_str().unwrap(), text, "{doc}");
        }
    }

    #[test]
    fn several_prompts_become_turns() {
        let doc = prompt_toml(&["one".into(), "two\nlines".into()]);
        let table: toml::Table = toml::from_str(&doc).unwrap();
        let turns = table["turns"].as_array().unwrap();
        assert_eq!(turns.len(), 2);
        assert_eq!(turns[1]["prompt"].as_str().unwrap(), "two\nlines");
    }

    #[test]
    fn needs_are_read_from_what_the_prompt_asks_not_what_it_forbids() {
        assert!(unmet_needs("Please do not use the Internet. Sort input/a.csv.").is_empty());
        let needs = unmet_needs("Perform web searches to find three PDFs");
        assert_eq!(needs[0].0, "network");
        let needs = unmet_needs("Run the service with docker-compose");
        assert_eq!(needs[0].0, "docker");
    }

    #[test]
    fn names_and_inner_paths() {
        assert!(is_plain_name("task_0001"));
        assert!(!is_plain_name("../x"));
        assert!(is_inner_path("config/settings.json"));
        for bad in ["/etc/passwd", "a/../b", "", "a//b", "./a"] {
            assert!(!is_inner_path(bad), "{bad}");
        }
    }
}
