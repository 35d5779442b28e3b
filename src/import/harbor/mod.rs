//! Harbor tasks: a directory holding `task.toml` (its `schema_version` checked),
//! `instruction.md`, `environment/` (a `Dockerfile`, or task.toml's `docker_image`),
//! `tests/test.sh` and `solution/solve.sh`; a dataset is a directory of them.
//!
//! Each becomes `harbor-ID/`:
//! - `env.toml` over the image (`FROM`, or `docker_image`), or over the host's read-only system
//!   paths when [`Base::Host`] says they stand in for it (said in the notes); `policy.toml`: the
//!   `default` policy's sandbox with the workspace at the task's working directory
//!   (`[environment].workdir`, else the last `WORKDIR`, else `/workspace`), Harbor's `/logs` and
//!   `/solution` as workspace mount points (`.harbor/logs`, `.harbor/solution`), the
//!   Dockerfile's `ENV`, the task's memory and storage;
//! - `files/` = what the Dockerfile's `COPY` steps put under the working directory (only
//!   `FROM`, `WORKDIR`, `COPY`, `ENV`, `ARG` run without a builder: see [`super::dockerfile`]);
//! - `tasks/ID/task.toml`: `instruction.md` byte for byte as the prompt, and a `command`
//!   verifier that runs `tests/test.sh` after the agent as Harbor's verifier does (the tests at
//!   `/tests`, read-only, never seen during the rollout; stale rewards removed first; its
//!   output in `/logs/verifier/test-stdout.txt`) and prints `/logs/verifier/reward.json` (its
//!   numbers averaged) or `reward.txt`; `tasks/ID/grader/` = `tests/`;
//! - `tasks/ID/solution.jsonl`: Harbor's oracle as tool calls: each file of `solution/` written
//!   under `/solution`, then `solve.sh` run there, its output in `/logs/agent/oracle.txt`;
//! - `tasks/ID/harbor-task.toml` (the original) and `source.json` with every note.
//!
//! What cannot be represented is said: refused (docker-compose services, Windows, multi-step
//! tasks, a Dockerfile step that needs a builder, a `COPY` outside the working directory), or
//! imported with a note (a network mode the sandbox cannot give, GPUs, CPU shares, MCP servers,
//! a separate verifier environment, variables resolved from the host).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

mod config;
mod provide;
mod written;

pub use provide::{ProvideError, Provision, provide};

use config::{Config, config};
use written::{check_policy, docs_md, env_toml, policy_toml, source_json, task_toml};

use super::dockerfile::{self, CopyStep};
use super::source::{SourceFile, SourceKind, SourceRoot};
use super::{Content, EnvPlan, ImportError, Planned, PlannedFile, need_notes, sorted, unmet_needs};

pub const ORIGIN: &str = "Harbor";
/// The `schema_version`s of task.toml read (Harbor's own reader defaults to the last).
pub const SCHEMA_VERSIONS: [&str; 5] = ["1.0", "1.1", "1.2", "1.3", "1.4"];
/// Harbor's writable paths during the rollout, and the workspace directories bound there.
pub const MOUNTS: [(&str, &str); 2] =
    [("/logs", ".harbor/logs"), ("/solution", ".harbor/solution")];
/// Where the tests appear to the grader.
pub const TESTS_DIR: &str = "/tests";
/// The workspace when neither task.toml nor the Dockerfile names a working directory.
pub const DEFAULT_WORKDIR: &str = "/workspace";
/// The longest a reference solution's `solve.sh` runs (one `exec` in the foreground).
pub const SOLVE_TIMEOUT_SECS: u64 = 120;
/// The most bytes of a task's text files read (task.toml, instruction.md, scripts).
pub const MAX_TEXT_BYTES: u64 = 4 << 20;

/// What stands for a task's image.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Base {
    /// The image itself: `env.toml` names it (pulled into the store when it lacks it, or built).
    #[default]
    Image,
    /// The host's read-only system paths (`--base host`), said in the notes.
    Host,
}

/// The command verifier: Harbor's verifier, step by step.
pub(super) const VERIFY: &str = "rm -f /logs/verifier/reward.txt /logs/verifier/reward.json; \
mkdir -p /logs/verifier /logs/agent /logs/artifacts; \
{ if [ -x /tests/test.sh ]; then /tests/test.sh; else bash /tests/test.sh; fi; } \
> /logs/verifier/test-stdout.txt 2>&1; tail -c 16384 /logs/verifier/test-stdout.txt >&2; \
if [ -f /logs/verifier/reward.json ]; then cat /logs/verifier/reward.json; \
elif [ -f /logs/verifier/reward.txt ]; then cat /logs/verifier/reward.txt; \
else echo 'envcraft: /tests/test.sh wrote neither /logs/verifier/reward.txt nor reward.json' >&2; exit 1; fi";

/// Phrases of a script that reach the network (an installer, a package manager).
const SCRIPT_NETWORK: [&str; 10] = [
    "curl ",
    "wget ",
    "pip install",
    "apt-get ",
    "apt install",
    "uv pip",
    "uvx ",
    "uv run",
    "npm install",
    "git clone",
];

/// Whether `dir` is a Harbor task directory: `task.toml` beside `instruction.md`,
/// `environment/`, `tests/` or `solution/`, and not an envcraft task (`ENV/tasks/ID/`).
pub fn is_task_dir(dir: &Path) -> bool {
    let envcraft = dir
        .parent()
        .filter(|p| p.file_name().is_some_and(|n| n == "tasks"))
        .and_then(Path::parent)
        .is_some_and(|env| env.join("env.toml").is_file());
    dir.join("task.toml").is_file()
        && !envcraft
        && (dir.join("instruction.md").exists()
            || ["environment", "tests", "solution"]
                .iter()
                .any(|d| dir.join(d).is_dir()))
}

/// Plan every task under `src`: `src` itself when it is a task, else each subdirectory that
/// is one (a dataset), sorted by name.
pub fn plan_all(src: &Path, base: Base) -> Result<Vec<Planned>, ImportError> {
    if is_task_dir(src) {
        return Ok(vec![(super::dir_name(src), plan_task(src, base))]);
    }
    let root = SourceRoot::open(src)?;
    let read_err = |source| ImportError::Read {
        path: src.to_path_buf(),
        source,
    };
    let mut names: Vec<String> = Vec::new();
    for entry in std::fs::read_dir(root.path()).map_err(read_err)? {
        names.push(
            entry
                .map_err(read_err)?
                .file_name()
                .to_string_lossy()
                .into_owned(),
        );
    }
    names.sort();
    let mut planned = Vec::new();
    for name in names {
        let rel = Path::new(&name);
        match root.probe(&name, rel)? {
            Some(SourceKind::Dir) if root.probe(&name, &rel.join("task.toml"))?.is_some() => {
                planned.push((name.clone(), plan_task_at(&root, rel, &name, base)));
            }
            _ => {}
        }
    }
    if planned.is_empty() {
        return Err(ImportError::NoTasks {
            path: src.to_path_buf(),
            format: "Harbor",
            expected: "a task directory (task.toml, instruction.md, environment/, tests/test.sh), or a directory of them",
        });
    }
    Ok(planned)
}

/// Plan the import of the one Harbor task in `dir`.
pub fn plan_task(dir: &Path, base: Base) -> Result<EnvPlan, ImportError> {
    let (parent, name) = super::split_single(dir);
    let root = SourceRoot::open(&parent)?;
    plan_task_at(&root, &name, &super::dir_name(dir), base)
}

/// Plan the Harbor task at `dir` below `root`; `task` names it in errors.
fn plan_task_at(
    root: &SourceRoot,
    dir: &Path,
    task: &str,
    base: Base,
) -> Result<EnvPlan, ImportError> {
    let id = task.to_string();
    if !super::is_plain_name(&id) {
        return Err(ImportError::Unrepresentable {
            path: root.display(dir),
            reason: format!("the directory's name `{id}` cannot name an environment"),
        });
    }
    let text_of = |rel: &Path, what: &str| -> Result<String, ImportError> {
        match root.probe(task, rel)? {
            Some(SourceKind::File) => root.read_text(task, rel, MAX_TEXT_BYTES),
            Some(SourceKind::Refused(kind)) => Err(ImportError::LinkOrSpecial {
                task: task.to_string(),
                path: root.display(rel),
                kind,
            }),
            _ => Err(ImportError::Format {
                path: root.display(dir),
                line: None,
                problem: format!("has no {what}"),
                expected: "a Harbor task directory: task.toml, instruction.md, environment/ (a Dockerfile, or docker_image in task.toml), tests/test.sh, and solution/solve.sh for the reference".into(),
            }),
        }
    };
    let toml_rel = dir.join("task.toml");
    let mut c = config(&root.display(&toml_rel), &text_of(&toml_rel, "task.toml")?)?;
    let prompt = text_of(&dir.join("instruction.md"), "instruction.md")?;
    if prompt.trim().is_empty() {
        return Err(ImportError::Format {
            path: root.display(&dir.join("instruction.md")),
            line: None,
            problem: "is empty".into(),
            expected: "the task's instruction".into(),
        });
    }
    let test_sh = text_of(&dir.join("tests/test.sh"), "tests/test.sh")?;
    let env_dir = dir.join("environment");
    for compose in [
        "docker-compose.yaml",
        "docker-compose.yml",
        "compose.yaml",
        "compose.yml",
    ] {
        if root.probe(task, &env_dir.join(compose))?.is_some() {
            return Err(ImportError::Unrepresentable {
                path: root.display(&env_dir.join(compose)),
                reason: "its services cannot be represented: envcraft runs one sandbox per session, with no services beside it".into(),
            });
        }
    }

    // The image, the working directory, the files.
    let dockerfile_rel = env_dir.join("Dockerfile");
    let has_dockerfile = root.probe(task, &dockerfile_rel)?.is_some();
    let mut notes = std::mem::take(&mut c.notes);
    let mut env_vars = Vec::new();
    let mut copies = Vec::new();
    let mut provision = None;
    let can_build = base == Base::Image && crate::image::build::builder_installed();
    let (image, dockerfile_workdir) = match (&c.docker_image, has_dockerfile) {
        (Some(image), _) => {
            if has_dockerfile {
                notes.push(format!(
                    "environment/Dockerfile is not read: task.toml's docker_image `{image}` is the image"
                ));
            }
            if base == Base::Image {
                provision = Some(Provision::Pull {
                    reference: image.clone(),
                    what: "docker_image",
                });
            }
            (image.clone(), None)
        }
        (None, true) => {
            let path = root.display(&dockerfile_rel);
            let text = text_of(&dockerfile_rel, "environment/Dockerfile")?;
            match dockerfile::parse(&text) {
                Ok(parsed) => {
                    notes.extend(
                        parsed
                            .notes
                            .iter()
                            .map(|n| format!("environment/Dockerfile, {n}")),
                    );
                    let Some(from) = parsed.from.clone() else {
                        return Err(ImportError::Format {
                            path,
                            line: None,
                            problem: "has no FROM".into(),
                            expected: "a Dockerfile starting FROM an image".into(),
                        });
                    };
                    env_vars = parsed.env.clone();
                    copies = parsed.copies.clone();
                    if base == Base::Image {
                        provision = Some(Provision::Pull {
                            reference: from.clone(),
                            what: "Dockerfile's FROM image",
                        });
                    }
                    (from, parsed.workdir)
                }
                Err(e) if e.needs_builder() && can_build => {
                    let workdir = dockerfile::last_workdir(&text);
                    provision = Some(build_provision(
                        root,
                        &env_dir,
                        c.workdir.clone().or(workdir.clone()),
                    ));
                    notes.push(format!(
                        "environment/Dockerfile, line {}: `{}` needs a builder: the Dockerfile is built by {}",
                        e.line,
                        e.step,
                        crate::image::build::find_builder(None)
                            .map(|(b, _)| b.program())
                            .unwrap_or_default()
                    ));
                    (provide::build_name(root, task, &env_dir)?, workdir)
                }
                Err(e) => {
                    return Err(ImportError::Format {
                        path,
                        line: Some(e.line),
                        problem: format!("`{}` {}{}", e.step, e.problem, no_builder(&e, base)),
                        expected: "a Dockerfile envcraft runs without a builder".into(),
                    });
                }
            }
        }
        (None, false) => {
            return Err(ImportError::Format {
                path: root.display(dir),
                line: None,
                problem: "has neither environment/Dockerfile nor [environment].docker_image".into(),
                expected: "the task's image: a Dockerfile, or docker_image in task.toml".into(),
            });
        }
    };
    let workdir = match c.workdir.clone().or(dockerfile_workdir) {
        Some(w) => w.trim_end_matches('/').to_string(),
        None => {
            notes.push(format!(
                "neither task.toml nor the Dockerfile names a working directory: the workspace is at {DEFAULT_WORKDIR}"
            ));
            DEFAULT_WORKDIR.to_string()
        }
    };
    if !crate::spec::verifier::is_grader_mount(&workdir)
        || MOUNTS
            .iter()
            .chain(&[(TESTS_DIR, "")])
            .any(|(m, _)| Path::new(&workdir).starts_with(m) || Path::new(m).starts_with(&workdir))
    {
        return Err(ImportError::Unrepresentable {
            path: root.display(dir),
            reason: format!(
                "the working directory `{workdir}` cannot be the workspace: it must be an absolute directory apart from the system paths, /tmp and Harbor's /logs, /solution and /tests"
            ),
        });
    }
    let mut files: BTreeMap<PathBuf, SourceFile> = BTreeMap::new();
    let ignore = dockerignore(root, task, &env_dir)?;
    let mut image = image;
    for copy in &copies {
        match plan_copy(root, task, &env_dir, copy, &workdir, &ignore, &mut files) {
            Err(ImportError::Format { problem, .. })
                if problem.contains("needs a builder") && can_build =>
            {
                notes.push(format!(
                    "environment/Dockerfile, line {}: {problem}: the Dockerfile is built",
                    copy.line
                ));
                files.clear();
                env_vars.clear();
                provision = Some(build_provision(root, &env_dir, Some(workdir.clone())));
                image = provide::build_name(root, task, &env_dir)?;
                break;
            }
            Err(ImportError::Format {
                path,
                line,
                problem,
                expected,
            }) if problem.contains("needs a builder") => {
                return Err(ImportError::Format {
                    path,
                    line,
                    problem: format!("{problem}{}", no_builder_words(base)),
                    expected,
                });
            }
            done => done?,
        }
    }
    let image = match base {
        Base::Image => {
            notes.push(match &provision {
                None | Some(Provision::Pull { .. }) => format!(
                    "runs over the image `{image}`, pulled from its registry when envcraft's image store lacks it, else run with `--base host`"
                ),
                Some(Provision::Build { .. }) => format!(
                    "runs over the image `{image}`, built from environment/ when envcraft's image store lacks it"
                ),
            });
            Some(image)
        }
        Base::Host => {
            notes.push(format!(
                "base=host: the host's read-only system paths (/usr, /bin, /lib, /etc) stand in for the image `{image}`"
            ));
            None
        }
    };

    // Needs and notes.
    let mut needs = unmet_needs(&prompt);
    needs.append(&mut c.needs);
    for (file, text) in [("tests/test.sh", &test_sh)] {
        if let Some(p) = SCRIPT_NETWORK.iter().find(|p| text.contains(**p)) {
            needs.push(("network".into(), format!("{file} runs `{}`", p.trim())));
        }
    }
    let mut all_notes = need_notes(&needs);
    all_notes.append(&mut notes);

    let task_dir = PathBuf::from("tasks").join(&id);
    let env = format!("harbor-{id}");
    let mut planned = vec![
        text_file("env.toml", env_toml(&env, &id, image.as_deref())),
        text_file(
            "policy.toml",
            policy_toml(&workdir, &c, env_vars.iter().chain(&c.env)),
        ),
        text_file(task_dir.join("task.toml"), task_toml(&prompt, &id, &c)),
        PlannedFile {
            path: task_dir.join("harbor-task.toml"),
            content: Content::Copy(root.file(&toml_rel)),
        },
    ];
    check_policy(&planned[1], &root.display(dir))?;
    for (rel, source) in files {
        planned.push(PlannedFile {
            path: Path::new("files").join(rel),
            content: Content::Copy(source),
        });
    }
    super::plan_copy_tree(
        root,
        task,
        &dir.join("tests"),
        &task_dir.join("grader"),
        &mut planned,
    )?;
    match solution_jsonl(root, task, &dir.join("solution"), &c) {
        Ok(Some(text)) => planned.push(text_file(task_dir.join("solution.jsonl"), text)),
        Ok(None) => all_notes.push("there is no solution/solve.sh: no reference solution".into()),
        Err(why) => all_notes.push(format!("the reference solution is not imported: {why}")),
    }
    planned.push(text_file("docs.md", docs_md(&id, &workdir, &all_notes)));
    planned.push(text_file(
        task_dir.join("source.json"),
        source_json(&id, &workdir, image.as_deref(), &needs, &all_notes),
    ));
    Ok(EnvPlan {
        env,
        task: id,
        files: sorted(planned),
        unmet_needs: needs,
        notes: all_notes,
        image,
        provision,
    })
}

/// How `environment/` is built: its absolute path, and the working directory whose files the
/// built image gives the workspace.
fn build_provision(root: &SourceRoot, env_dir: &Path, workdir: Option<String>) -> Provision {
    let context = root.display(env_dir);
    Provision::Build {
        context: std::path::absolute(&context).unwrap_or(context),
        workdir: workdir
            .map(|w| w.trim_end_matches('/').to_string())
            .unwrap_or_else(|| DEFAULT_WORKDIR.to_string()),
    }
}

/// What a refusal of a step that needs a builder adds: why no builder runs it.
fn no_builder(e: &dockerfile::DockerfileError, base: Base) -> String {
    match e.needs_builder() {
        true => no_builder_words(base),
        false => String::new(),
    }
}

fn no_builder_words(base: Base) -> String {
    match base {
        Base::Host => "; with --base host no builder runs it (without --base host, an installed podman or buildah builds the Dockerfile)".into(),
        Base::Image => format!(
            "; no image builder is installed to run it (looked for {} on PATH)",
            crate::image::build::builders_looked_for()
        ),
    }
}

fn text_file(path: impl Into<PathBuf>, text: String) -> PlannedFile {
    PlannedFile {
        path: path.into(),
        content: Content::Text(text),
    }
}

/// The globs of `environment/.dockerignore` (a negation, `!`, is refused).
fn dockerignore(
    root: &SourceRoot,
    task: &str,
    env_dir: &Path,
) -> Result<Vec<globset::GlobMatcher>, ImportError> {
    let rel = env_dir.join(".dockerignore");
    if root.probe(task, &rel)?.is_none() {
        return Ok(Vec::new());
    }
    let text = root.read_text(task, &rel, MAX_TEXT_BYTES)?;
    let mut out = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let pattern = line.trim().trim_start_matches("./").trim_matches('/');
        if pattern.is_empty() || pattern.starts_with('#') {
            continue;
        }
        let fail = |problem: String| ImportError::Format {
            path: root.display(&rel),
            line: Some(index + 1),
            problem,
            expected: "patterns of paths to leave out (no `!` exceptions)".into(),
        };
        if pattern.starts_with('!') {
            return Err(fail(format!(
                "`{pattern}` is an exception, which envcraft does not read"
            )));
        }
        let glob = globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| fail(format!("`{pattern}`: {e}")))?;
        out.push(glob.compile_matcher());
    }
    Ok(out)
}

/// The workspace files one `COPY` makes: `files` (workspace path to source) updated, later
/// copies replacing earlier ones.
fn plan_copy(
    root: &SourceRoot,
    task: &str,
    env_dir: &Path,
    copy: &CopyStep,
    workdir: &str,
    ignore: &[globset::GlobMatcher],
    files: &mut BTreeMap<PathBuf, SourceFile>,
) -> Result<(), ImportError> {
    let dockerfile = root.display(&env_dir.join("Dockerfile"));
    let fail = |problem: String| ImportError::Format {
        path: dockerfile.clone(),
        line: Some(copy.line),
        problem,
        expected: "COPY of files of environment/ into the working directory".into(),
    };
    let ignored = |rel: &Path| {
        let text = rel.to_string_lossy();
        let mut prefixes =
            std::iter::once(text.as_ref()).chain(text.match_indices('/').map(|(i, _)| &text[..i]));
        prefixes.any(|p| ignore.iter().any(|g| g.is_match(p)))
    };
    for source in &copy.sources {
        let clean = source.trim_start_matches('/');
        let parts: Vec<&str> = clean
            .split('/')
            .filter(|p| !p.is_empty() && *p != ".")
            .collect();
        if parts.contains(&"..") {
            return Err(fail(format!(
                "copies `{source}`, outside the build context (environment/)"
            )));
        }
        let rel: PathBuf = parts.iter().collect();
        let found: Vec<(PathBuf, SourceFile)> = match root.probe(task, &env_dir.join(&rel))? {
            Some(SourceKind::Dir) => {
                let mut inner = Vec::new();
                root.walk_files(task, &env_dir.join(&rel), Path::new(""), &mut inner)?;
                inner
                    .into_iter()
                    .filter(|(p, _)| !ignored(&rel.join(p)))
                    .map(|(p, f)| (Path::new(&copy.dest).join(p), f))
                    .collect()
            }
            Some(SourceKind::File) if !ignored(&rel) => {
                let name = rel.file_name().map(PathBuf::from).unwrap_or_default();
                let target = match copy.dest_is_dir {
                    true => Path::new(&copy.dest).join(name),
                    false => PathBuf::from(&copy.dest),
                };
                vec![(target, root.file(&env_dir.join(&rel)))]
            }
            Some(SourceKind::File) => Vec::new(),
            Some(SourceKind::Refused(kind)) => {
                return Err(ImportError::LinkOrSpecial {
                    task: task.to_string(),
                    path: root.display(&env_dir.join(&rel)),
                    kind,
                });
            }
            None => {
                return Err(fail(format!(
                    "copies `{source}`, which environment/ does not have"
                )));
            }
        };
        for (target, file) in found {
            let inside = target.strip_prefix(workdir).ok().map(Path::to_path_buf);
            match inside {
                Some(rel) if !rel.as_os_str().is_empty() => {
                    if rel.starts_with(".harbor") {
                        return Err(fail(format!(
                            "puts {} in the workspace's .harbor/, where envcraft keeps Harbor's /logs and /solution",
                            target.display()
                        )));
                    }
                    files.insert(rel, file);
                }
                _ => {
                    return Err(fail(format!(
                        "puts {} outside the working directory {workdir}: only the workspace is written (the image's root is read-only), so this needs a builder",
                        target.display()
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Harbor's oracle as tool calls: `solution/`'s files written under `/solution`, then
/// `solve.sh` run. `None` without `solution/solve.sh`; `Err` (why) when a file cannot be
/// written by the `write` tool (not UTF-8 text).
fn solution_jsonl(
    root: &SourceRoot,
    task: &str,
    dir: &Path,
    c: &Config,
) -> Result<Option<String>, String> {
    match root.probe(task, &dir.join("solve.sh")) {
        Ok(Some(SourceKind::File)) => {}
        Ok(_) => return Ok(None),
        Err(e) => return Err(crate::error::chain(&e)),
    }
    let mut found = Vec::new();
    root.walk_files(task, dir, Path::new("/solution"), &mut found)
        .map_err(|e| crate::error::chain(&e))?;
    let mut lines = String::new();
    for (target, file) in &found {
        let text = root
            .read_text(task, &file.rel, MAX_TEXT_BYTES)
            .map_err(|e| {
                format!(
                    "{} ({})",
                    root.display(&file.rel).display(),
                    crate::error::chain(&e)
                )
            })?;
        let call =
            json!({"tool": "write", "args": {"path": target.to_string_lossy(), "content": text}});
        lines.push_str(&call.to_string());
        lines.push('\n');
    }
    let mut args = json!({
        "command": "mkdir -p /logs/agent && chmod +x /solution/solve.sh && /solution/solve.sh > /logs/agent/oracle.txt 2>&1",
        "timeout": SOLVE_TIMEOUT_SECS,
        "yieldMs": SOLVE_TIMEOUT_SECS * 1000,
    });
    if !c.solution_env.is_empty() {
        let env: serde_json::Map<String, Value> = c
            .solution_env
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        args["env"] = Value::Object(env);
    }
    lines.push_str(&json!({"tool": "exec", "args": args}).to_string());
    lines.push('\n');
    Ok(Some(lines))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_harbor_task_dir_is_told_from_an_envcraft_task() {
        let dir = tempfile::tempdir().unwrap();
        let env = dir.path().join("e");
        let task = env.join("tasks/t");
        std::fs::create_dir_all(task.join("tests")).unwrap();
        std::fs::write(task.join("task.toml"), "").unwrap();
        assert!(is_task_dir(&task));
        std::fs::write(env.join("env.toml"), "").unwrap();
        assert!(!is_task_dir(&task));
    }
}
