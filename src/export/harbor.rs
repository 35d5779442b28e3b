//! `envcraft export harbor ENV DEST`: each task of an envcraft environment as a Harbor task
//! directory, `DEST/ENV-ID/`, that runs on any Harbor provider:
//!
//! - `task.toml` (schema 1.4, no network, the verifier's time limit), `instruction.md` = the
//!   prompt (several turns: joined, in order, said in the notes);
//! - `environment/Dockerfile`: `FROM` the environment's image, or, for an environment over the
//!   host's root, a plain Debian image with a comment saying so; `WORKDIR` the policy's
//!   workspace; `COPY files/` = the environment's files with the task's laid over them;
//! - `tests/test.sh`: the verifier, self-contained: a manifest as `tests/check.sh` (POSIX sh
//!   and awk over `rules.tsv`, the expected state, and `initial.tsv`, the initial workspace),
//!   a grader command as it is (its files in `tests/grader/`, copied where envcraft shows them),
//!   a hybrid their weighted mean; the reward to `/logs/verifier/reward.txt`;
//! - `solution/solve.sh`: `solution.jsonl` in shell: `write` as `printf`, `edit` as a short
//!   `python3` replace, `exec` as its command (its `workdir`, `env`, `timeout`), the reading
//!   tools as comments (they change nothing). A call with no shell equivalent (`skill`,
//!   `process`, `apply_patch`, a background `exec`) refuses that task, counted and reported;
//!   so does a judge verifier, and a grader that reads the transcript.
//!
//! Plans first (pure: [`plan_task`] returns the files), then written; the same environment
//! exports to byte-identical trees.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::spec::task::TaskSpec;
use crate::verify::{EntryKind, Expected, Manifest};

/// Why an export failed, or why one task of it was refused.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("{path} is not an environment (no env.toml)")]
    NotAnEnvironment { path: PathBuf },
    #[error("cannot read the task")]
    Task(#[from] Box<crate::spec::TaskError>),
    #[error("cannot read {what}")]
    Verify {
        what: String,
        #[source]
        source: crate::verify::VerifyError,
    },
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} already exists; export into a new directory or remove it first")]
    Exists { path: PathBuf },
    /// The task has something no Harbor task can carry.
    #[error("cannot be exported: {0}")]
    Untranslatable(String),
}

/// The manifest checker, `tests/check.sh`.
const CHECK_SH: &str = include_str!("harbor_check.sh");

/// What an export did.
#[derive(Debug, Default)]
pub struct ExportOutcome {
    /// Each exported task: its directory and the notes about it.
    pub exported: Vec<(PathBuf, Vec<String>)>,
    /// Each task refused: its id and why.
    pub refused: Vec<(String, String)>,
}

/// One file of a planned Harbor task: its path below the task's directory, its bytes, its mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedFile {
    pub path: PathBuf,
    pub bytes: Vec<u8>,
    pub mode: u32,
}

/// Export every task of the environment at `env_dir` into `dest` (created when missing).
pub fn export(env_dir: &Path, dest: &Path) -> Result<ExportOutcome, ExportError> {
    if !env_dir.join("env.toml").is_file() {
        return Err(ExportError::NotAnEnvironment {
            path: env_dir.to_path_buf(),
        });
    }
    let write_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ExportError::Write { path, source }
    };
    std::fs::create_dir_all(dest).map_err(write_err(dest))?;
    let mut outcome = ExportOutcome::default();
    for task_dir in crate::spec::task::find_tasks(env_dir) {
        let id = task_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let planned = TaskSpec::load(&task_dir)
            .map_err(|e| ExportError::Task(Box::new(e)))
            .and_then(|task| plan_task(&task));
        let (files, notes) = match planned {
            Ok(p) => p,
            Err(e) => {
                outcome.refused.push((id, crate::error::chain(&e)));
                continue;
            }
        };
        // `ENV-ID`: unique among the exports of several environments into one DEST.
        let name = format!("{}-{id}", env_name(env_dir));
        let target = dest.join(&name);
        if target.symlink_metadata().is_ok() {
            outcome
                .refused
                .push((id, ExportError::Exists { path: target }.to_string()));
            continue;
        }
        let partial = dest.join(format!(".{name}.exporting"));
        let _ = std::fs::remove_dir_all(&partial);
        let written = write_files(&partial, &files);
        if let Err(e) = written {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(e);
        }
        std::fs::rename(&partial, &target).map_err(write_err(&target))?;
        outcome.exported.push((target, notes));
    }
    Ok(outcome)
}

fn env_name(env_dir: &Path) -> String {
    std::fs::canonicalize(env_dir)
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "env".into())
}

fn write_files(root: &Path, files: &[PlannedFile]) -> Result<(), ExportError> {
    use std::os::unix::fs::PermissionsExt;
    for file in files {
        let path = root.join(&file.path);
        let err = |source| ExportError::Write {
            path: path.clone(),
            source,
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(err)?;
        }
        std::fs::write(&path, &file.bytes).map_err(err)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(file.mode)).map_err(err)?;
    }
    Ok(())
}

/// The files of `task` as a Harbor task, and the notes about what changed on the way.
pub fn plan_task(task: &TaskSpec) -> Result<(Vec<PlannedFile>, Vec<String>), ExportError> {
    let mut notes = Vec::new();
    let policy = task
        .env
        .load_policy()
        .map_err(|e| ExportError::Untranslatable(crate::error::chain(&e)))?;
    let workdir = policy.filesystem.workspace.to_string_lossy().into_owned();
    if task.verifier.judge.is_some() {
        return Err(ExportError::Untranslatable(
            "its verifier asks an LLM judge, which a Harbor test.sh cannot call offline".into(),
        ));
    }
    let mut files = Vec::new();
    let text = |path: &str, text: String, mode: u32| PlannedFile {
        path: path.into(),
        bytes: text.into_bytes(),
        mode,
    };

    // The initial workspace: the environment's files, the task's over them.
    let mut initial = manifest(&task.env.files)?;
    let mut sources: Vec<(String, PathBuf)> = initial
        .iter()
        .map(|e| (e.path.clone(), task.env.files.join(&e.path)))
        .collect();
    if let Some(over) = &task.files {
        for entry in manifest(over)? {
            initial.retain(|e| e.path != entry.path);
            sources.retain(|(p, _)| *p != entry.path);
            sources.push((entry.path.clone(), over.join(&entry.path)));
            initial.push(entry);
        }
    }
    initial.sort_by(|a, b| a.path.cmp(&b.path));
    sources.sort();
    for entry in &initial {
        if entry.path.contains(['\t', '\n']) {
            return Err(ExportError::Untranslatable(format!(
                "the workspace path {:?} holds a tab or a newline, which the checker's listing cannot carry",
                entry.path
            )));
        }
    }
    for (rel, source) in &sources {
        let meta = std::fs::symlink_metadata(source).map_err(|e| ExportError::Write {
            path: source.clone(),
            source: e,
        })?;
        if meta.is_file() {
            use std::os::unix::fs::PermissionsExt;
            let bytes = std::fs::read(source).map_err(|e| ExportError::Write {
                path: source.clone(),
                source: e,
            })?;
            files.push(PlannedFile {
                path: Path::new("environment/files").join(rel),
                bytes,
                mode: meta.permissions().mode() & 0o777,
            });
        } else if meta.file_type().is_symlink() {
            return Err(ExportError::Untranslatable(format!(
                "the workspace has the symbolic link {rel}, which a Docker COPY of files/ would follow"
            )));
        }
    }

    // The instruction.
    let instruction = match task.turns.as_slice() {
        [one] => one.clone(),
        turns => {
            notes.push(format!(
                "its {} turns are one instruction, in order (Harbor has one per task)",
                turns.len()
            ));
            turns.join("\n\n")
        }
    };
    files.push(text("instruction.md", instruction, 0o644));

    // The image.
    let from = match &task.env.image {
        Some(image) => format!(
            "# envcraft: the environment runs over the image `{image}` of envcraft's image store;\n\
             # give other providers the same image under this name (a registry, `docker load`).\n\
             FROM {image}\n"
        ),
        None => "# envcraft: the environment runs over the host's read-only system paths, not an\n\
                 # image; a plain Debian image stands in for them here. Tasks whose commands need\n\
                 # more than Debian's essential tools (python3, say) need it added to the image.\n\
                 FROM debian:bookworm-slim\n"
            .to_string(),
    };
    let mut dockerfile = format!("{from}WORKDIR {workdir}\n");
    if !sources.is_empty() {
        let _ = writeln!(dockerfile, "COPY files/ {workdir}/");
    }
    files.push(text("environment/Dockerfile", dockerfile, 0o644));
    if !task.env.skills.is_empty() {
        notes.push(format!(
            "the environment's skills ({}) are not part of the Harbor task",
            task.env.skills.join(", ")
        ));
    }

    // The verifier.
    let mut parts = Vec::new();
    if task.verifier.has_manifest() {
        let expected = Expected::load(&task.dir.join("expected.json")).map_err(|source| {
            ExportError::Verify {
                what: "expected.json".into(),
                source,
            }
        })?;
        files.push(text("tests/rules.tsv", rules(&expected)?, 0o644));
        files.push(text("tests/initial.tsv", listing(&initial), 0o644));
        files.push(text("tests/check.sh", CHECK_SH.to_string(), 0o755));
        let weight = task.verifier.weights.map(|w| w.manifest).unwrap_or(1.0);
        parts.push(("manifest", weight, "sh /tests/check.sh".to_string()));
    }
    if let Some(command) = &task.verifier.command {
        let grader = task.dir.join("grader");
        if grader.is_dir() {
            for entry in manifest(&grader)? {
                let source = grader.join(&entry.path);
                if entry.kind != EntryKind::File {
                    continue;
                }
                let bytes = std::fs::read(&source).map_err(|e| ExportError::Write {
                    path: source.clone(),
                    source: e,
                })?;
                if String::from_utf8_lossy(&bytes).contains("ENVCRAFT_TRANSCRIPT") {
                    return Err(ExportError::Untranslatable(format!(
                        "its grader reads the session's transcript (grader/{}), which Harbor does not give",
                        entry.path
                    )));
                }
                files.push(PlannedFile {
                    path: Path::new("tests/grader").join(&entry.path),
                    bytes,
                    mode: entry.mode & 0o777,
                });
            }
        }
        let weight = task.verifier.weights.map(|w| w.command).unwrap_or(1.0);
        parts.push(("command", weight, grader_command(task, command, &workdir)));
    }
    files.push(text(
        "tests/test.sh",
        test_sh(&parts, task.verifier.all_or_nothing),
        0o755,
    ));

    // The reference solution.
    match &task.solution {
        Some(_) => {
            let steps = task
                .solution_steps()
                .map_err(|e| ExportError::Task(Box::new(e)))?;
            files.push(text(
                "solution/solve.sh",
                solve_sh(&steps, &workdir)?,
                0o755,
            ));
        }
        None => notes.push("it has no reference solution: no solution/solve.sh".into()),
    }

    files.push(text("task.toml", task_toml(task, &policy), 0o644));
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok((files, notes))
}

fn manifest(dir: &Path) -> Result<Vec<crate::verify::Entry>, ExportError> {
    Manifest::of_dir(dir)
        .map(|m| m.entries().to_vec())
        .map_err(|source| ExportError::Verify {
            what: dir.display().to_string(),
            source,
        })
}

fn kind_letter(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::File => "f",
        EntryKind::Dir => "d",
        EntryKind::Symlink => "l",
        EntryKind::Other => "o",
    }
}

/// The initial workspace as the checker lists it: kind, mode, hash, path.
fn listing(entries: &[crate::verify::Entry]) -> String {
    let mut out = String::new();
    for e in entries {
        let _ = writeln!(
            out,
            "{}\t{:o}\t{}\t{}",
            kind_letter(e.kind),
            e.mode,
            e.sha256.as_deref().unwrap_or("-"),
            e.path
        );
    }
    out
}

/// `expected.json` as the checker's rules: one per line, tab-separated, globs as regular
/// expressions.
fn rules(expected: &Expected) -> Result<String, ExportError> {
    let mut out = String::new();
    let plain = |p: &str| -> Result<(), ExportError> {
        match p.contains(['\t', '\n']) {
            true => Err(ExportError::Untranslatable(format!(
                "expected.json names {p:?}, with a tab or a newline"
            ))),
            false => Ok(()),
        }
    };
    for (path, rule) in &expected.files {
        plain(path)?;
        let mode = rule.mode.map(|m| format!("{m:o}")).unwrap_or("-".into());
        let _ = writeln!(
            out,
            "file\t{path}\t{}\t{}\t{mode}",
            kind_letter(rule.kind),
            rule.sha256.as_deref().unwrap_or("-")
        );
    }
    for path in &expected.absent {
        plain(path)?;
        let _ = writeln!(out, "absent\t{path}");
    }
    for (word, globs) in [
        ("unchanged", &expected.unchanged),
        ("ignore", &expected.ignore),
    ] {
        for glob in globs {
            let re = glob_regex(glob.as_str()).ok_or_else(|| {
                ExportError::Untranslatable(format!(
                    "the glob `{}` has a form the checker does not translate",
                    glob.as_str()
                ))
            })?;
            let _ = writeln!(out, "{word}\t{re}");
        }
    }
    let extra = match expected.extra {
        crate::verify::Extra::Deny => "deny",
        _ => "allow",
    };
    let _ = writeln!(out, "extra\t{extra}");
    let _ = writeln!(out, "all_or_nothing\t{}", u8::from(expected.all_or_nothing));
    Ok(out)
}

/// A glob of envcraft's (`*`, `?` within a component, `**` across, `{a,b}`, `[ab]`) as an
/// extended regular expression matching a path or one of its ancestors.
pub fn glob_regex(glob: &str) -> Option<String> {
    let chars: Vec<char> = glob.chars().collect();
    let mut re = String::from("^(");
    let mut i = 0;
    let mut braces = 0usize;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '*' if chars.get(i + 1) == Some(&'*') => {
                let slash_after = chars.get(i + 2) == Some(&'/');
                let at_start = i == 0 || chars[i - 1] == '/';
                match (at_start, slash_after) {
                    (true, true) => {
                        re.push_str("(.*/)?");
                        i += 3;
                    }
                    _ => {
                        re.push_str(".*");
                        i += 2;
                    }
                }
                continue;
            }
            '*' => re.push_str("[^/]*"),
            '?' => re.push_str("[^/]"),
            '[' => {
                let end = chars[i + 1..].iter().position(|&c| c == ']')? + i + 1;
                let mut class: String = chars[i + 1..end].iter().collect();
                if let Some(rest) = class.strip_prefix('!') {
                    class = format!("^{rest}");
                }
                if class.contains(['[', '\\']) {
                    return None;
                }
                let _ = write!(re, "[{class}]");
                i = end + 1;
                continue;
            }
            '{' => {
                braces += 1;
                re.push('(');
            }
            '}' if braces > 0 => {
                braces -= 1;
                re.push(')');
            }
            ',' if braces > 0 => re.push('|'),
            '\\' => {
                let next = *chars.get(i + 1)?;
                let _ = write!(re, "[{next}]");
                i += 2;
                continue;
            }
            c if ".+()|^$}{".contains(c) => {
                re.push('\\');
                re.push(c);
            }
            c => re.push(c),
        }
        i += 1;
    }
    if braces > 0 {
        return None;
    }
    re.push_str(")(/.*)?$");
    Some(re)
}

/// The grader command as envcraft runs it: its files where the task's `grader_dir` says (a
/// copy in the working directory), the variables envcraft sets, its time limit.
fn grader_command(task: &TaskSpec, command: &str, workdir: &str) -> String {
    let dir = &task.verifier.grader_dir;
    let at = match Path::new(dir).is_absolute() {
        true => dir.clone(),
        false => format!("{workdir}/{dir}"),
    };
    format!(
        "rm -rf {at_q} && mkdir -p \"$(dirname {at_q})\" && cp -R /tests/grader {at_q} && \
         ENVCRAFT_WORKSPACE={wd_q} PYTHONSAFEPATH=1 PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1 PYTHONPATH={at_q} \
         timeout {secs} sh -c {cmd_q}",
        at_q = quote(&at),
        wd_q = quote(workdir),
        secs = task.verifier.timeout_secs,
        cmd_q = quote(command),
    )
}

/// `tests/test.sh`: each part's score (a grader's output read as envcraft reads it), their
/// weighted mean, the reward to /logs/verifier/reward.txt.
fn test_sh(parts: &[(&str, f64, String)], all_or_nothing: bool) -> String {
    let mut out = String::from(
        "#!/bin/sh\n# Written by `envcraft export harbor`: the task's envcraft verifier.\n\
         mkdir -p /logs/verifier\n\
         # A score as envcraft reads a grader's output: a JSON object's mean, else the last line.\n\
         score() {\n\
         \x20 out=$(cat)\n\
         \x20 case \"$out\" in\n\
         \x20   \\{*) printf '%s' \"$out\" | python3 -c 'import json,sys\n\
         d = json.load(sys.stdin); v = [float(x) for x in d.values()]\n\
         print(sum(v) / len(v) if v and all(0 <= x <= 1 for x in v) else 0)' 2>/dev/null || echo 0 ;;\n\
         \x20   *) printf '%s\\n' \"$out\" | awk 'NF { last = $0 } END { x = last + 0; if (last ~ /^[ \\t]*[0-9.eE+-]+[ \\t]*$/ && x >= 0 && x <= 1) printf \"%.17g\\n\", x; else print 0 }' ;;\n\
         \x20 esac\n\
         }\n",
    );
    let mut terms = Vec::new();
    let total: f64 = parts.iter().map(|p| p.1).sum();
    for (name, weight, command) in parts {
        let _ = writeln!(out, "# The {name} part.\n{name}=$( ( {command} ) | score )");
        terms.push(format!("{weight:?} * {name}"));
    }
    let _ = writeln!(
        out,
        "reward=$(awk -v manifest=\"${{manifest:-0}}\" -v command=\"${{command:-0}}\" 'BEGIN {{ r = ({}) / {total:?}; if ({aon} == 1) r = (r >= 1) ? 1 : 0; printf \"%.17g\\n\", r }}')",
        terms.join(" + "),
        aon = u8::from(all_or_nothing),
    );
    out.push_str("echo \"$reward\" > /logs/verifier/reward.txt\necho \"reward $reward\"\n");
    out
}

/// `solution.jsonl` in shell, run from the working directory.
fn solve_sh(
    steps: &[crate::spec::task::SolutionStep],
    workdir: &str,
) -> Result<String, ExportError> {
    let mut out = format!(
        "#!/bin/bash\n# Written by `envcraft export harbor` from the task's solution.jsonl.\ncd {}\n",
        quote(workdir)
    );
    for (index, step) in steps.iter().enumerate() {
        let refuse = |why: String| {
            ExportError::Untranslatable(format!(
                "its solution's call {} (`{}`) {why}",
                index + 1,
                step.tool
            ))
        };
        let arg = |key: &str| step.args.get(key).and_then(Value::as_str);
        match step.tool.as_str() {
            "read" | "ls" | "glob" | "grep" => {
                let what = ["path", "pattern"]
                    .iter()
                    .find_map(|k| arg(k))
                    .unwrap_or("");
                let _ = writeln!(
                    out,
                    "# {} {} (reads only)",
                    step.tool,
                    what.replace('\n', " ")
                );
            }
            "write" => {
                let (Some(path), Some(content)) = (arg("path"), arg("content")) else {
                    return Err(refuse("has no path or content".into()));
                };
                let _ = writeln!(
                    out,
                    "mkdir -p -- \"$(dirname -- {p})\" && printf '%s' {c} > {p}",
                    p = quote(path),
                    c = quote(content)
                );
            }
            "edit" => {
                let old = ["old_string", "oldText", "old_str"]
                    .iter()
                    .find_map(|k| arg(k));
                let new = ["new_string", "newText", "new_str"]
                    .iter()
                    .find_map(|k| arg(k));
                let (Some(path), Some(old), Some(new)) = (arg("path"), old, new) else {
                    return Err(refuse("has no path, old_string or new_string".into()));
                };
                let all = step.args.get("replace_all").and_then(Value::as_bool) == Some(true);
                let program = "import sys\np, old, new, every = sys.argv[1:5]\ntext = open(p, encoding='utf-8').read()\nn = text.count(old)\nif n == 0 or (n > 1 and every != '1'):\n    sys.exit('edit: ' + p + ': the text to replace is found ' + str(n) + ' times')\nopen(p, 'w', encoding='utf-8').write(text.replace(old, new) if every == '1' else text.replace(old, new, 1))\n";
                let _ = writeln!(
                    out,
                    "python3 -c {} {} {} {} {}",
                    quote(program),
                    quote(path),
                    quote(old),
                    quote(new),
                    u8::from(all)
                );
            }
            "exec" => {
                let Some(command) = arg("command") else {
                    return Err(refuse("has no command".into()));
                };
                if step.args.get("background").and_then(Value::as_bool) == Some(true) {
                    return Err(refuse(
                        "runs in the background, which a script cannot follow".into(),
                    ));
                }
                let mut line = String::from("( ");
                if let Some(dir) = arg("workdir") {
                    let _ = write!(line, "cd {} && ", quote(dir));
                }
                if let Some(Value::Object(env)) = step.args.get("env") {
                    for (k, v) in env {
                        let _ = write!(line, "export {k}={}; ", quote(v.as_str().unwrap_or("")));
                    }
                }
                match step.args.get("timeout").and_then(Value::as_u64) {
                    Some(t) if t > 0 => {
                        let _ = write!(line, "timeout {t} ");
                    }
                    _ => {}
                }
                let _ = writeln!(line, "/bin/sh -c {} )", quote(command));
                out.push_str(&line);
            }
            other => {
                return Err(refuse(format!(
                    "has no shell equivalent (`{other}` is envcraft's own)"
                )));
            }
        }
    }
    Ok(out)
}

fn task_toml(task: &TaskSpec, policy: &crate::spec::policy::Policy) -> String {
    let network = match policy.network.mode {
        crate::spec::policy::NetworkMode::None => "no-network",
        crate::spec::policy::NetworkMode::Host => "public",
    };
    format!(
        "# Written by `envcraft export harbor` from {env}/{id}.\n\
         schema_version = \"1.4\"\n\n\
         [metadata]\nenvcraft_env = {env_q}\nenvcraft_task = {id_q}\n\n\
         [verifier]\ntimeout_sec = {verifier}.0\n\n\
         [agent]\ntimeout_sec = {agent}.0\n\n\
         [environment]\nnetwork_mode = \"{network}\"\nmemory_mb = {memory}\n",
        env = task.env.name,
        id = task.id,
        env_q = toml::Value::String(task.env.name.clone()),
        id_q = toml::Value::String(task.id.clone()),
        verifier = task.verifier.timeout_secs.max(60) * 2,
        agent = policy.limits.wall_time_secs,
        memory = policy.limits.memory_bytes >> 20,
    )
}

/// `text` as one single-quoted shell word.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn globs_become_regular_expressions_that_match_as_envcraft_globs_do() {
        let paths = [
            "docs",
            "docs/a/b.md",
            "docsx/a",
            "meetings/a.docx",
            "meetings/x/a.docx",
            "a/b/__pycache__/c.pyc",
            "__pycache__",
            "b.txt",
            "c.txt",
            "f7.txt",
            "abtxt",
            "a.txt",
            "x/a.txt",
        ];
        for glob in [
            "docs/**",
            "meetings/*.docx",
            "**/__pycache__",
            "{a,b}.txt",
            "f[0-9].txt",
            "a.txt",
            "**",
            "*/a.txt",
            "?.txt",
        ] {
            let re = glob_regex(glob).unwrap();
            let ours = crate::verify::Glob::new(glob).unwrap();
            for path in paths {
                assert_eq!(
                    awk_matches(&re, path),
                    ours.matches(path),
                    "{glob} {path} {re}"
                );
            }
        }
    }

    /// Whether awk matches `path` with `re` (given as the checker reads it, with no escape
    /// processing).
    fn awk_matches(re: &str, path: &str) -> bool {
        std::process::Command::new("awk")
            .env("P", path)
            .env("RE", re)
            .arg("BEGIN { exit !(ENVIRON[\"P\"] ~ ENVIRON[\"RE\"]) }")
            .status()
            .unwrap()
            .success()
    }
}
