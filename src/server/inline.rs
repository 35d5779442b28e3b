//! Inline tasks: a task given whole in `POST /v1/sessions` (trainers that generate tasks for
//! a known environment), written as a task directory so that it is checked and loaded as any
//! task on disk:
//!
//! ```json
//! {"env": "office-email", "prompt": "...", "verifier": {"kind": "manifest"},
//!  "files": {"inbox/new.eml": "..."}, "expected": {...}, "grader": {"check.py": "..."},
//!  "judge": {"rubric.md": "..."}}
//! ```
//!
//! Every key but `env`, `files`, `expected`, `grader` and `judge` is a key of `task.toml`
//! (`prompt` or `turns`, `base_time`, `verifier`). `files` are laid over the environment's
//! files, `expected` is the task's `expected.json`, `grader` the files of its `grader/`
//! directory, `judge` the files its `[verifier.judge]` names (rubric, expected behaviour), in
//! the task's directory.
//! The directory is `STATE/inline/ID/` with ID `inline-` and the first 16 hex digits of the
//! SHA-256 of the object: the same object is the same task, written once.

use std::fs;
use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::error::ApiError;
use crate::spec::env::EnvSpec;
use crate::spec::task::{TaskError, TaskSpec};
use crate::spec::{FileError, is_plain_name};
use crate::verify::Expected;

/// The keys of an inline task that are not `task.toml`'s.
const OWN_KEYS: &[&str] = &["env", "files", "expected", "grader", "judge"];
/// Names in a task's directory that a `judge` file may not take.
const TASK_NAMES: &[&str] = &[
    "task.toml",
    "expected.json",
    "solution.jsonl",
    "files",
    "grader",
];

/// The task `object` describes, over the environments under `workspaces`, its directory made
/// under `state_root/inline/`.
pub fn load(
    object: &Map<String, Value>,
    workspaces: &Path,
    state_root: &Path,
) -> Result<TaskSpec, ApiError> {
    let env_name = match object.get("env") {
        Some(Value::String(name)) => name,
        None | Some(Value::Null) => {
            return Err(ApiError::missing_field(
                "task.env",
                "the environment the inline task runs in (GET /v1/tasks lists them)",
            ));
        }
        Some(_) => return Err(ApiError::bad_request("field `task.env` must be a string")),
    };
    let env_dir = workspaces.join(env_name);
    if !is_plain_name(env_name) || !env_dir.join("env.toml").is_file() {
        return Err(ApiError::bad_request(format!(
            "field `task.env`: no environment `{}` here (GET /v1/tasks lists the tasks, ENV/ID)",
            env_name.chars().take(64).collect::<String>()
        )));
    }
    let env = EnvSpec::load(&env_dir).map_err(|e| {
        if let Some(refused) = super::capacity::refused_by_kernel(&e) {
            return refused;
        }
        tracing::error!(env = %env_name, error = %crate::error::chain(&e), "environment does not load");
        ApiError::internal(format!("environment {env_name} does not load: see the server's log"))
    })?;
    let digest = Sha256::digest(Value::Object(object.clone()).to_string().as_bytes());
    let id = format!(
        "inline-{}",
        digest
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    let dir = state_root.join("inline").join(&id);
    if !dir.join("task.toml").is_file() {
        write_task_dir(object, &env, &state_root.join("inline"), &id)?;
    }
    TaskSpec::load_in_env(env, &dir).map_err(|e| invalid(&e))
}

/// Write the directory of task `id` under `parent`: whole and checked (it loads as a task of
/// `env`) or not at all (written in a temporary directory, renamed into place).
fn write_task_dir(
    object: &Map<String, Value>,
    env: &EnvSpec,
    parent: &Path,
    id: &str,
) -> Result<(), ApiError> {
    let internal = |e: std::io::Error| {
        if let Some(refused) = super::capacity::refused_by_kernel(&e) {
            return refused;
        }
        tracing::error!(error = %e, "cannot write an inline task");
        ApiError::internal("cannot store the inline task: see the server's log")
    };
    fs::create_dir_all(parent).map_err(internal)?;
    let staging = tempfile::Builder::new()
        .prefix(".inline-")
        .tempdir_in(parent)
        .map_err(internal)?;
    // Named as the task, so that it loads as one before it is put in place.
    let temp = staging.path().join(id);
    fs::create_dir(&temp).map_err(internal)?;
    let toml_text = task_toml(object)?;
    fs::write(temp.join("task.toml"), toml_text).map_err(internal)?;
    for (key, sub) in [("files", "files"), ("grader", "grader")] {
        if let Some(files) = object.get(key) {
            write_files(&format!("task.{key}"), files, &temp.join(sub))?;
        }
    }
    if let Some(judge) = object.get("judge") {
        if let Some(taken) = judge.as_object().and_then(|files| {
            files
                .keys()
                .find(|name| TASK_NAMES.contains(&name.split('/').next().unwrap_or_default()))
        }) {
            return Err(ApiError::bad_request(format!(
                "field `task.judge`: `{taken}` is a name of the task's own files; expected the \
                 judge's files (rubric.md, expected_behavior.md) under other names"
            )));
        }
        write_files("task.judge", judge, &temp)?;
    }
    if let Some(expected) = object.get("expected") {
        let path = temp.join("expected.json");
        fs::write(&path, expected.to_string()).map_err(internal)?;
        Expected::load(&path).map_err(|e| {
            ApiError::bad_request(format!(
                "field `task.expected` is not an expected.json: {}",
                crate::error::chain(&e).replace(&path.display().to_string(), "expected.json")
            ))
        })?;
    }
    TaskSpec::load_in_env(env.clone(), &temp).map_err(|e| invalid(&e))?;
    let dir = parent.join(id);
    match fs::rename(&temp, &dir) {
        Ok(()) => Ok(()),
        // Written meanwhile by another request with the same task: theirs stays.
        Err(_) if dir.join("task.toml").is_file() => Ok(()),
        Err(e) => Err(internal(e)),
    }
}

/// The `task.toml` text of the inline task `object`: its keys but `env`, `files`, `expected`
/// and `grader`, written as TOML (`bad_request` for what TOML cannot hold: nulls).
pub fn task_toml(object: &Map<String, Value>) -> Result<String, ApiError> {
    let spec: Map<String, Value> = object
        .iter()
        .filter(|(k, _)| !OWN_KEYS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    toml::to_string(&Value::Object(spec)).map_err(|e| {
        ApiError::bad_request(format!(
            "field `task`: cannot be written as task.toml ({e}); expected the keys of task.toml \
             (prompt or turns, base_time, verifier) with strings, numbers, booleans, arrays and \
             objects, no nulls"
        ))
    })
}

/// Write `files` (an object of relative path → text) below `root`.
fn write_files(field: &str, files: &Value, root: &Path) -> Result<(), ApiError> {
    let Value::Object(files) = files else {
        return Err(ApiError::bad_request(format!(
            "field `{field}` must be an object of relative path → file content"
        )));
    };
    for (name, content) in files {
        let path = Path::new(name);
        let plain =
            !name.is_empty() && path.components().all(|c| matches!(c, Component::Normal(_)));
        if !plain {
            return Err(ApiError::bad_request(format!(
                "field `{field}`: `{}` is not a relative path inside the workspace (no `..`, no leading `/`)",
                name.chars().take(128).collect::<String>()
            )));
        }
        let Value::String(text) = content else {
            return Err(ApiError::bad_request(format!(
                "field `{field}`: the content of `{}` must be a string",
                name.chars().take(128).collect::<String>()
            )));
        };
        let target: PathBuf = root.join(path);
        let written = target
            .parent()
            .map_or(Ok(()), fs::create_dir_all)
            .and_then(|()| fs::write(&target, text));
        if let Err(e) = written {
            if let Some(refused) = super::capacity::refused_by_kernel(&e) {
                return Err(refused);
            }
            return Err(ApiError::bad_request(format!(
                "field `{field}`: cannot write `{}` ({e})",
                name.chars().take(128).collect::<String>()
            )));
        }
    }
    Ok(())
}

/// A task that does not check out, named as the request's fields (no server paths).
fn invalid(e: &TaskError) -> ApiError {
    match e {
        TaskError::File(FileError::Invalid {
            key,
            problem,
            expected,
            ..
        }) => ApiError::bad_request(format!("field `task.{key}` {problem}; expected {expected}")),
        TaskError::File(FileError::Syntax { key, message, .. }) => ApiError::bad_request(format!(
            "field `task{}`: {message}",
            key.as_ref().map(|k| format!(".{k}")).unwrap_or_default()
        )),
        other => {
            if let Some(refused) = super::capacity::refused_by_kernel(other) {
                return refused;
            }
            tracing::error!(error = %crate::error::chain(other), "inline task does not load");
            ApiError::bad_request("the inline task does not load: see the server's log")
        }
    }
}
