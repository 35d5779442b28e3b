//! A Harbor task's `task.toml`, as far as the import uses it: its `schema_version` checked,
//! the image, the working directory, resources, time limits, variables, and what the sandbox
//! cannot give (a network, GPUs), each said.

use std::path::Path;

use super::super::ImportError;
use super::SCHEMA_VERSIONS;

/// What a task.toml says that the import uses, checked.
#[derive(Debug, Default)]
pub(super) struct Config {
    pub(super) docker_image: Option<String>,
    pub(super) workdir: Option<String>,
    pub(super) memory_mb: Option<u64>,
    pub(super) storage_mb: Option<u64>,
    pub(super) agent_timeout: Option<u64>,
    pub(super) verifier_timeout: u64,
    /// `[environment].env`, `[verifier].env`, `[solution].env`: literal values only.
    pub(super) env: Vec<(String, String)>,
    pub(super) verifier_env: Vec<(String, String)>,
    pub(super) solution_env: Vec<(String, String)>,
    pub(super) needs: Vec<(String, String)>,
    pub(super) notes: Vec<String>,
}

/// Read `text`, the task.toml at `path`.
pub(super) fn config(path: &Path, text: &str) -> Result<Config, ImportError> {
    let table: toml::Table = toml::from_str(text).map_err(|e| ImportError::Format {
        path: path.to_path_buf(),
        line: e.span().map(|s| text[..s.start].lines().count().max(1)),
        problem: e.message().to_string(),
        expected: "Harbor's task.toml (TOML)".into(),
    })?;
    let bad = |key: &str, problem: String, expected: &str| ImportError::Format {
        path: path.to_path_buf(),
        line: None,
        problem: format!("`{key}` {problem}"),
        expected: expected.to_string(),
    };
    let unrepresentable = |reason: String| ImportError::Unrepresentable {
        path: path.to_path_buf(),
        reason,
    };
    let version = table.get("schema_version").or_else(|| table.get("version"));
    match version {
        None => {}
        Some(toml::Value::String(v)) if SCHEMA_VERSIONS.contains(&v.as_str()) => {}
        Some(other) => {
            return Err(bad(
                "schema_version",
                format!("is {other}, a version envcraft does not read"),
                &format!("one of {}", SCHEMA_VERSIONS.join(", ")),
            ));
        }
    }
    let empty = toml::Table::new();
    let section = |name: &str| -> Result<&toml::Table, ImportError> {
        match table.get(name) {
            None => Ok(&empty),
            Some(toml::Value::Table(t)) => Ok(t),
            Some(other) => Err(bad(name, format!("is {other}"), "a table")),
        }
    };
    let (environment, agent, verifier, solution) = (
        section("environment")?,
        section("agent")?,
        section("verifier")?,
        section("solution")?,
    );
    let string = |t: &toml::Table, key: &str| -> Result<Option<String>, ImportError> {
        match t.get(key) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(bad(key, format!("is {other}"), "a string")),
        }
    };
    let number = |t: &toml::Table, key: &str| -> Result<Option<f64>, ImportError> {
        match t.get(key) {
            None => Ok(None),
            Some(toml::Value::Integer(i)) if *i >= 0 => Ok(Some(*i as f64)),
            Some(toml::Value::Float(f)) if f.is_finite() && *f >= 0.0 => Ok(Some(*f)),
            Some(other) => Err(bad(key, format!("is {other}"), "a number, at least 0")),
        }
    };
    let mut c = Config::default();
    let literal_env = |t: &toml::Table, what: &str, notes: &mut Vec<String>| {
        let mut out = Vec::new();
        if let Some(toml::Value::Table(env)) = t.get("env") {
            for (name, value) in env {
                match value.as_str() {
                    Some(v) if !v.contains("${") => out.push((name.clone(), v.to_string())),
                    _ => notes.push(format!(
                        "{what}.env `{name}` is resolved from the host in Harbor; envcraft gives its sandboxes no host variable, so it is not set"
                    )),
                }
            }
        }
        out
    };
    if string(environment, "os")?.is_some_and(|os| !os.eq_ignore_ascii_case("linux")) {
        return Err(unrepresentable(
            "the task targets Windows; envcraft runs Linux sandboxes".into(),
        ));
    }
    if table.contains_key("steps") {
        return Err(unrepresentable(
            "it is a multi-step task ([[steps]]); envcraft imports single-step Harbor tasks".into(),
        ));
    }
    c.docker_image = string(environment, "docker_image")?;
    c.workdir = string(environment, "workdir")?;
    c.memory_mb = number(environment, "memory_mb")?
        .map(|m| m as u64)
        .filter(|m| *m > 0);
    c.storage_mb = number(environment, "storage_mb")?
        .map(|m| m as u64)
        .filter(|m| *m > 0);
    c.agent_timeout = number(agent, "timeout_sec")?.map(|t| t.ceil() as u64);
    c.verifier_timeout = number(verifier, "timeout_sec")?
        .unwrap_or(600.0)
        .ceil()
        .clamp(1.0, 86_400.0) as u64;
    c.env = literal_env(environment, "[environment]", &mut c.notes);
    c.verifier_env = literal_env(verifier, "[verifier]", &mut c.notes);
    c.solution_env = literal_env(solution, "[solution]", &mut c.notes);
    // The network: Harbor's default is the public one, which no sandbox of envcraft reaches.
    let legacy = environment
        .get("allow_internet")
        .and_then(toml::Value::as_bool);
    let baseline = string(environment, "network_mode")?.unwrap_or_else(|| match legacy {
        Some(false) => "no-network".into(),
        _ => "public".into(),
    });
    for (phase, mode) in [
        ("[environment]", Some(baseline)),
        ("[agent]", string(agent, "network_mode")?),
        ("[verifier]", string(verifier, "network_mode")?),
    ] {
        match mode.as_deref() {
            None | Some("no-network") => {}
            Some(m @ ("public" | "allowlist")) => c.needs.push((
                "network".into(),
                format!("{phase} network_mode is `{m}` (Harbor's default is `public`)"),
            )),
            Some(other) => {
                return Err(bad(
                    "network_mode",
                    format!("is `{other}`"),
                    "no-network, public or allowlist",
                ));
            }
        }
    }
    let gpus = number(environment, "gpus")?.unwrap_or(0.0);
    if gpus > 0.0 || environment.contains_key("tpu") || environment.contains_key("gpu_types") {
        c.needs
            .push(("gpu".into(), "[environment] asks for GPUs or TPUs".into()));
    }
    for (t, what, key, note) in [
        (
            environment,
            "[environment]",
            "cpus",
            "has no envcraft limit (CPU time is the policy's)",
        ),
        (
            environment,
            "[environment]",
            "mcp_servers",
            "are not started",
        ),
        (environment, "[environment]", "healthcheck", "is not run"),
        (environment, "[environment]", "skills_dir", "is not read"),
        (
            agent,
            "[agent]",
            "user",
            "is not applied: commands run as the sandbox's root",
        ),
        (
            verifier,
            "[verifier]",
            "user",
            "is not applied: the grader runs as the sandbox's root",
        ),
        (
            verifier,
            "[verifier]",
            "environment_mode",
            "is not applied: the grader runs over the agent's root, in a sandbox of its own",
        ),
        (
            verifier,
            "[verifier]",
            "environment",
            "is not applied: the grader runs over the agent's root, in a sandbox of its own",
        ),
        (
            verifier,
            "[verifier]",
            "collect",
            "commands are not run (there are no services)",
        ),
        (
            &table,
            "task.toml",
            "artifacts",
            "are not collected (the workspace's changes are the session's)",
        ),
    ] {
        if t.contains_key(key) {
            c.notes.push(format!("{what} {key} {note}"));
        }
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn schema_versions_are_checked() {
        let p = Path::new("task.toml");
        assert!(config(p, "schema_version = \"1.4\"\n").is_ok());
        assert!(config(p, "version = \"1.0\"\n").is_ok());
        assert!(config(p, "").is_ok());
        let err = config(p, "schema_version = \"9.0\"\n").unwrap_err();
        assert!(err.to_string().contains("does not read"), "{err}");
    }

    #[test]
    fn harbors_public_default_is_an_unmet_need() {
        let c = config(Path::new("t"), "").unwrap();
        assert_eq!(c.needs[0].0, "network");
        let c = config(
            Path::new("t"),
            "[environment]\nnetwork_mode = \"no-network\"\n",
        )
        .unwrap();
        assert!(c.needs.is_empty());
        let err = config(Path::new("t"), "[[steps]]\nname = \"a\"\n").unwrap_err();
        assert!(err.to_string().contains("multi-step"), "{err}");
    }
}
