//! Environments: a scenario the agent works in, one directory `workspaces/ENV/` holding
//! `env.toml` (name, description, policy, tools and skills offered, the session clock),
//! `docs.md` (what the agent is told) and `files/` (the initial workspace, the immutable lower
//! layer of every session), plus its tasks under `tasks/` (see [`super::task`]).
//!
//! Loading refuses unknown keys, wrong types and impossible values with the file, the key, the
//! line and what is expected, and checks the layout (`docs.md` a non-empty file, `files/` a
//! directory) and that the policy loads. Whether the offered skills exist depends on a skills
//! root, so it is a second step: [`EnvSpec::check_skills`]. Directories are made canonical
//! (symlinks resolved), and names are checked against the real directories' names.
//!
//! ```toml
//! name = "example"                       # the directory's name
//! description = "An operations lead's inbox"
//! policy = "default"                     # a bundled policy, or a .toml path relative to ENV/
//! tools = ["read", "write", "exec"]      # default: every built-in tool
//! skills = ["word-count"]                # default: none; needs the `skill` tool
//! base_time = "2026-03-02T09:00:00Z"     # RFC 3339 with an offset; the clock at action 0
//! time_step_secs = 60                    # seconds per action; 0 freezes the clock
//! image = "office"                       # default: the host's root; an image of `envcraft image`,
//!                                        # or REGISTRY/REPO@sha256:HEX, pulled on first use
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::located::{self, Check, FileError, PLAIN_NAME, TomlFile};
use super::policy::{Policy, PolicyError};
use super::skill::{self, SkillError, SkillSpec};
use super::time::Timestamp;

/// Every built-in tool an environment can offer, in the order they are advertised.
pub const BUILTIN_TOOLS: [&str; 10] = [
    "read",
    "write",
    "edit",
    "apply_patch",
    "ls",
    "glob",
    "grep",
    "exec",
    "process",
    "skill",
];

/// The policy an environment runs under when `env.toml` names none.
pub const DEFAULT_POLICY: &str = "default";
/// Seconds the session clock advances per action when `env.toml` does not say.
pub const DEFAULT_TIME_STEP_SECS: u64 = 60;
/// The largest clock step: one day per action.
pub const MAX_TIME_STEP_SECS: u64 = 86_400;

/// Why an environment could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error(
        "{dir} is not an environment: it has no env.toml; expected a directory holding env.toml, docs.md and files/"
    )]
    NotAnEnvironment { dir: PathBuf },
    #[error("{file}, line {line}: `policy` names `{policy}`, which cannot be loaded")]
    Policy {
        file: PathBuf,
        line: usize,
        policy: String,
        #[source]
        source: Box<PolicyError>,
    },
    #[error("{file}, line {line}: `skills` offers `{skill}`, which cannot be loaded")]
    Skill {
        file: PathBuf,
        line: usize,
        skill: String,
        #[source]
        source: Box<SkillError>,
    },
}

/// A loaded, validated environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvSpec {
    /// Equal to the directory's name.
    pub name: String,
    pub description: String,
    /// A bundled policy's name, or a path ending in `.toml` (or holding a `/`) relative to
    /// [`EnvSpec::dir`]; [`EnvSpec::load_policy`] loads it.
    pub policy: String,
    /// The built-in tools offered, each one of [`BUILTIN_TOOLS`], without repeats.
    pub tools: Vec<String>,
    /// The skills offered, by name (directories under a skills root); without repeats.
    pub skills: Vec<String>,
    /// The session clock at action 0 (a task may override it); never before 1970.
    pub base_time: Timestamp,
    /// Seconds the clock advances per action; 0 freezes it.
    pub time_step_secs: u64,
    /// The environment's directory, absolute and canonical.
    pub dir: PathBuf,
    /// The content of `docs.md`: what the agent is told about this environment.
    pub docs: String,
    /// `dir/files`: the initial workspace.
    pub files: PathBuf,
    /// The image whose root filesystem sessions run over (`envcraft image ls`), instead of
    /// the host's read-only system paths; a registry reference pinned by digest is pulled on
    /// first use (`image::Store::image`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEnv {
    name: Spanned<String>,
    description: Spanned<String>,
    #[serde(default)]
    policy: Option<Spanned<String>>,
    #[serde(default)]
    tools: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    skills: Option<Spanned<Vec<Spanned<String>>>>,
    base_time: Spanned<toml::Value>,
    #[serde(default)]
    time_step_secs: Option<Spanned<i64>>,
    #[serde(default)]
    image: Option<Spanned<String>>,
}

/// What `env.toml` says, checked: everything of an environment that its text alone decides
/// (the loader then checks it against the directory: its name, `docs.md`, `files/`, the
/// policy's file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvToml {
    pub name: String,
    /// The line of `name`, for the loader's check against the directory's name.
    pub name_line: usize,
    pub description: String,
    pub policy: String,
    /// The line of `policy` (0 when it is left out), for the loader's check that it loads.
    pub policy_line: usize,
    pub tools: Vec<String>,
    pub skills: Vec<String>,
    pub base_time: Timestamp,
    pub time_step_secs: u64,
    /// The image whose root the environment runs over (`image = "NAME"`), if any.
    pub image: Option<String>,
}

impl EnvToml {
    /// Parse and check the text of `file`, an `env.toml` (nothing is read from disk).
    pub fn parse(file: &Path, text: &str) -> Result<EnvToml, EnvError> {
        let toml = TomlFile { path: file, text };
        let raw: RawEnv = toml.parse().map_err(|p| FileError::syntax(file, p))?;
        let check = Check { toml: &toml };

        let name = raw.name.get_ref();
        if !located::is_plain_name(name) {
            return Err(check
                .invalid("name", raw.name.span(), format!("is `{name}`"), PLAIN_NAME)
                .into());
        }
        let description = check.non_empty("description", &raw.description)?;

        let policy = match &raw.policy {
            None => DEFAULT_POLICY.to_string(),
            Some(p) => {
                let value = p.get_ref();
                if is_policy_path(value) && Path::new(value).is_absolute() {
                    return Err(check.invalid(
                        "policy",
                        p.span(),
                        format!("is the absolute path `{value}`"),
                        "a bundled policy's name or a .toml path relative to the environment's directory",
                    ).into());
                }
                value.clone()
            }
        };

        let tools = match &raw.tools {
            None => BUILTIN_TOOLS.iter().map(|t| t.to_string()).collect(),
            Some(list) => {
                let mut tools: Vec<String> = Vec::new();
                for tool in list.get_ref() {
                    let t = tool.get_ref();
                    if !BUILTIN_TOOLS.contains(&t.as_str()) {
                        return Err(check
                            .invalid(
                                "tools",
                                tool.span(),
                                format!("lists `{t}`, which is not a built-in tool"),
                                &format!("some of {}", quoted_list(&BUILTIN_TOOLS)),
                            )
                            .into());
                    }
                    if tools.contains(t) {
                        return Err(check
                            .invalid(
                                "tools",
                                tool.span(),
                                format!("lists `{t}` twice"),
                                "each tool at most once",
                            )
                            .into());
                    }
                    tools.push(t.clone());
                }
                if tools.is_empty() {
                    return Err(check
                        .invalid(
                            "tools",
                            list.span(),
                            "is empty".into(),
                            "at least one tool (leave `tools` out to offer them all)",
                        )
                        .into());
                }
                tools
            }
        };

        let mut skills: Vec<String> = Vec::new();
        if let Some(list) = &raw.skills {
            for entry in list.get_ref() {
                let s = entry.get_ref();
                if !skill::is_skill_name(s) {
                    return Err(check
                        .invalid(
                            "skills",
                            entry.span(),
                            format!("lists `{s}`"),
                            skill::SKILL_NAME,
                        )
                        .into());
                }
                if skills.contains(s) {
                    return Err(check
                        .invalid(
                            "skills",
                            entry.span(),
                            format!("lists `{s}` twice"),
                            "each skill at most once",
                        )
                        .into());
                }
                skills.push(s.clone());
            }
            if !skills.is_empty() && !tools.iter().any(|t| t == "skill") {
                return Err(check.invalid(
                    "skills",
                    list.span(),
                    "offers skills but `tools` does not offer `skill`, the tool that calls them"
                        .into(),
                    "`skill` among the tools, or no skills",
                ).into());
            }
        }

        let base_time = base_time(&raw.base_time).map_err(|(problem, expected)| {
            check.invalid("base_time", raw.base_time.span(), problem, expected)
        })?;

        let time_step_secs = match &raw.time_step_secs {
            None => DEFAULT_TIME_STEP_SECS,
            Some(step) => {
                let v = *step.get_ref();
                if !(0..=MAX_TIME_STEP_SECS as i64).contains(&v) {
                    return Err(check.invalid(
                        "time_step_secs",
                        step.span(),
                        format!("is {v}"),
                        &format!(
                            "an integer from 0 (a frozen clock) to {MAX_TIME_STEP_SECS} (a day per action)"
                        ),
                    ).into());
                }
                v as u64
            }
        };

        let image = match &raw.image {
            None => None,
            Some(image) => {
                let v = image.get_ref();
                let ok = !v.is_empty()
                    && v.len() <= 255
                    && v.starts_with(|c: char| c.is_ascii_alphanumeric())
                    && v.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "._:/@+-".contains(c));
                if !ok {
                    return Err(check
                        .invalid(
                            "image",
                            image.span(),
                            format!("is {v:?}"),
                            "an image name as `envcraft image ls` lists them: 1 to 255 letters, digits and `._:/@+-`, starting with a letter or a digit",
                        )
                        .into());
                }
                Some(v.clone())
            }
        };
        Ok(EnvToml {
            name: name.clone(),
            name_line: toml.line(&raw.name.span()),
            description,
            policy,
            policy_line: raw
                .policy
                .as_ref()
                .map(|p| toml.line(&p.span()))
                .unwrap_or(0),
            tools,
            skills,
            base_time,
            time_step_secs,
            image,
        })
    }
}

impl EnvSpec {
    /// Load and validate the environment in `dir` (`env.toml`, `docs.md`, `files/`).
    pub fn load(dir: impl AsRef<Path>) -> Result<EnvSpec, EnvError> {
        let given = dir.as_ref();
        let dir = std::fs::canonicalize(given).map_err(FileError::read(given))?;
        let file = dir.join("env.toml");
        if !file.is_file() {
            return Err(EnvError::NotAnEnvironment { dir });
        }
        let text = located::read_text(&file)?;
        let EnvToml {
            name,
            name_line,
            description,
            policy,
            policy_line,
            tools,
            skills,
            base_time,
            time_step_secs,
            image,
        } = EnvToml::parse(&file, &text)?;
        let dir_name = located::dir_name(&dir);
        if dir_name.as_deref() != Some(name.as_str()) {
            return Err(FileError::Invalid {
                file: file.clone(),
                key: "name".into(),
                line: name_line,
                problem: format!(
                    "is `{name}` but the directory is `{}`",
                    dir_name.unwrap_or_default()
                ),
                expected: "the environment's directory name, so that `ENV/TASK_ID` finds it".into(),
            }
            .into());
        }

        let docs_path = dir.join("docs.md");
        if !docs_path.is_file() {
            return Err(FileError::Layout {
                path: docs_path,
                problem: "is missing".into(),
                expected: "a Markdown file telling the agent about this environment".into(),
            }
            .into());
        }
        let docs = located::read_text(&docs_path)?;
        if docs.trim().is_empty() {
            return Err(FileError::Layout {
                path: docs_path,
                problem: "is empty".into(),
                expected: "a Markdown file telling the agent about this environment".into(),
            }
            .into());
        }
        let files = dir.join("files");
        if !files.is_dir() {
            return Err(FileError::Layout {
                problem: if files.exists() {
                    "is not a directory".into()
                } else {
                    "is missing".into()
                },
                path: files,
                expected: "a directory holding the initial workspace (it may be empty)".into(),
            }
            .into());
        }

        let env = EnvSpec {
            name,
            description,
            policy,
            tools,
            skills,
            base_time,
            time_step_secs,
            dir,
            docs,
            files,
            image,
        };
        if let Err(source) = env.load_policy() {
            return Err(EnvError::Policy {
                file: env.env_toml(),
                line: policy_line,
                policy: env.policy,
                source: Box::new(source),
            });
        }
        Ok(env)
    }

    /// `dir/env.toml`.
    pub fn env_toml(&self) -> PathBuf {
        self.dir.join("env.toml")
    }

    /// Whether the environment offers the built-in tool `tool`.
    pub fn offers_tool(&self, tool: &str) -> bool {
        self.tools.iter().any(|t| t == tool)
    }

    /// The policy the environment runs under: the bundled one of that name, or the file at
    /// that path relative to [`EnvSpec::dir`].
    pub fn load_policy(&self) -> Result<Policy, PolicyError> {
        if !is_policy_path(&self.policy) {
            return Policy::bundled(&self.policy);
        }
        let path = self.dir.join(&self.policy);
        let text = std::fs::read_to_string(&path).map_err(|source| PolicyError::Read {
            path: path.clone(),
            source,
        })?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.policy.clone());
        Policy::parse(&name, &path.display().to_string(), &text)
    }

    /// Load every skill the environment offers from `skills_root` (`skills_root/NAME/`), in
    /// the order of [`EnvSpec::skills`]; refuses the environment when one is missing or broken.
    pub fn check_skills(&self, skills_root: impl AsRef<Path>) -> Result<Vec<SkillSpec>, EnvError> {
        let root = skills_root.as_ref();
        self.skills
            .iter()
            .map(|name| {
                SkillSpec::find(name, root).map_err(|source| EnvError::Skill {
                    file: self.env_toml(),
                    line: self.skill_line(name),
                    skill: name.clone(),
                    source: Box::new(source),
                })
            })
            .collect()
    }

    /// The ids of the environment's tasks (the directories under `tasks/`, but hidden ones),
    /// sorted; none when there is no `tasks/`. [`EnvSpec::tasks`] loads them.
    pub fn task_ids(&self) -> Result<Vec<String>, EnvError> {
        let tasks = self.dir.join("tasks");
        if !tasks.exists() {
            return Ok(Vec::new());
        }
        let entries = std::fs::read_dir(&tasks).map_err(FileError::read(&tasks))?;
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry.map_err(FileError::read(&tasks))?;
            let path = entry.path();
            if !path.is_dir() {
                continue;
            }
            let Some(id) = entry.file_name().to_str().map(str::to_string) else {
                return Err(FileError::Layout {
                    path,
                    problem: "has a name that is not UTF-8".into(),
                    expected: format!("task directories named with {PLAIN_NAME}"),
                }
                .into());
            };
            if !id.starts_with('.') {
                ids.push(id);
            }
        }
        ids.sort();
        Ok(ids)
    }

    /// The line of `env.toml` that offers `skill` (1 when it cannot be found any more).
    fn skill_line(&self, skill: &str) -> usize {
        let file = self.env_toml();
        let Ok(text) = std::fs::read_to_string(&file) else {
            return 1;
        };
        let toml = TomlFile {
            path: &file,
            text: &text,
        };
        toml.parse::<RawEnv>()
            .ok()
            .and_then(|raw| raw.skills)
            .and_then(|list| {
                list.into_inner()
                    .into_iter()
                    .find(|s| s.get_ref() == skill)
                    .map(|s| toml.line(&s.span()))
            })
            .unwrap_or(1)
    }
}

/// As [`Policy::load`] decides: a path holds a `/` or ends in `.toml`; anything else is a
/// bundled policy's name.
fn is_policy_path(policy: &str) -> bool {
    policy.contains('/') || policy.ends_with(".toml")
}

/// A `base_time` value (an RFC 3339 string, or a TOML offset date-time) as a [`Timestamp`], or
/// the problem and what is expected. Shared with task files.
pub(super) fn base_time(value: &Spanned<toml::Value>) -> Result<Timestamp, (String, &'static str)> {
    const EXPECTED: &str = "an RFC 3339 time with an offset, on or after 1970-01-01T00:00:00Z, such as \"2026-03-02T09:00:00Z\" or \"2026-03-02T11:00:00+02:00\"";
    let text = match value.get_ref() {
        toml::Value::String(s) => s.clone(),
        toml::Value::Datetime(d) => d.to_string(),
        other => return Err((format!("is a {}", other.type_str()), EXPECTED)),
    };
    let ts = Timestamp::parse_rfc3339(&text)
        .map_err(|e| (format!("is `{text}`: {}", e.problem), EXPECTED))?;
    if ts < Timestamp::UNIX_EPOCH {
        return Err((
            format!("is {ts}, before 1970, where the session clock cannot go"),
            EXPECTED,
        ));
    }
    Ok(ts)
}

/// `` `a`, `b`, `c` ``.
pub(super) fn quoted_list(items: &[&str]) -> String {
    items
        .iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::spec::located::fixture::{Example, line_of, repo};
    use crate::spec::time::Weekday;

    fn env_toml(ex: &Example) -> PathBuf {
        ex.env_dir().join("env.toml")
    }

    /// Load after replacing `from` by `to` in env.toml.
    fn load_edited(from: &str, to: &str) -> (Example, EnvError) {
        let ex = Example::new();
        ex.edit(&env_toml(&ex), from, to);
        let err = EnvSpec::load(ex.env_dir()).unwrap_err();
        (ex, err)
    }

    #[test]
    fn the_example_environment_loads() {
        let env = EnvSpec::load(repo().join("workspaces/example")).unwrap();
        assert_eq!(env.name, "example");
        assert!(env.description.contains("Dana Okafor"));
        assert_eq!(env.policy, "default");
        assert_eq!(env.tools, BUILTIN_TOOLS.map(String::from).to_vec());
        assert_eq!(env.skills, ["word-count"]);
        assert_eq!(env.base_time.to_string(), "2026-03-02T09:00:00Z");
        assert_eq!(env.base_time.weekday(), Weekday::Monday);
        assert_eq!(env.time_step_secs, 60);
        assert!(env.dir.is_absolute());
        assert!(env.docs.starts_with("# Dana's mailbox"));
        assert_eq!(env.files, env.dir.join("files"));
        assert!(env.files.join("inbox/1.txt").is_file());
        assert_eq!(env.load_policy().unwrap().name, "default");
        let skills = env.check_skills(repo().join("skills")).unwrap();
        assert_eq!(skills.len(), 1);
        assert_eq!(skills[0].name, "word-count");
        assert_eq!(
            env.task_ids().unwrap(),
            ["archive-read-mail", "extract-todos"]
        );
    }

    #[test]
    fn left_out_keys_take_their_defaults() {
        let ex = Example::new();
        std::fs::write(
            env_toml(&ex),
            "name = \"example\"\ndescription = \"d\"\nbase_time = \"2026-03-02T11:00:00+02:00\"\n",
        )
        .unwrap();
        let env = EnvSpec::load(ex.env_dir()).unwrap();
        assert_eq!(env.policy, DEFAULT_POLICY);
        assert_eq!(env.tools.len(), BUILTIN_TOOLS.len());
        assert!(env.skills.is_empty());
        assert_eq!(env.time_step_secs, DEFAULT_TIME_STEP_SECS);
        assert_eq!(env.base_time.to_string(), "2026-03-02T09:00:00Z");
        assert!(env.check_skills(ex.skills()).unwrap().is_empty());
    }

    #[test]
    fn a_typo_in_a_key_names_the_file_the_key_the_line_and_the_keys_expected() {
        let (ex, err) = load_edited("time_step_secs = 60", "time_step_sec = 60");
        let line = line_of(&env_toml(&ex), "time_step_sec");
        match &err {
            EnvError::File(FileError::Syntax {
                file, key, line: l, ..
            }) => {
                assert!(file.ends_with("example/env.toml"));
                assert_eq!(key.as_deref(), Some("time_step_sec"));
                assert_eq!(*l, line);
            }
            other => panic!("unexpected {other}"),
        }
        let msg = err.to_string();
        assert!(msg.contains("env.toml"), "{msg}");
        assert!(msg.contains(&format!("line {line}")), "{msg}");
        assert!(msg.contains("expected one of"), "{msg}");
        assert!(msg.contains("`time_step_secs`"), "{msg}");
    }

    #[test]
    fn a_wrong_type_says_what_is_expected() {
        let (_, err) = load_edited("time_step_secs = 60", "time_step_secs = \"60\"");
        let msg = err.to_string();
        assert!(msg.contains("an integer"), "{msg}");
        assert!(msg.contains("key `time_step_secs`"), "{msg}");
    }

    #[test]
    fn a_missing_key_is_named() {
        let (_, err) = load_edited("base_time = \"2026-03-02T09:00:00Z\"", "");
        let msg = err.to_string();
        assert!(msg.contains("key `base_time`"), "{msg}");
        assert!(msg.contains("missing"), "{msg}");
    }

    #[test]
    fn a_malformed_base_time_names_the_key_the_line_and_the_format() {
        for bad in [
            "\"2026-03-02 9am\"",
            "\"2026-03-02T09:00:00\"",
            "\"2026-03-02T09:00:00.250Z\"",
            "2026-03-02T09:00:00",
            "\"1969-07-20T20:17:00Z\"",
            "20260302",
        ] {
            let (ex, err) = load_edited(
                "base_time = \"2026-03-02T09:00:00Z\"",
                &format!("base_time = {bad}"),
            );
            let line = line_of(&env_toml(&ex), "base_time =");
            match &err {
                EnvError::File(FileError::Invalid {
                    key,
                    line: l,
                    expected,
                    ..
                }) => {
                    assert_eq!(key, "base_time", "{bad}");
                    assert_eq!(*l, line, "{bad}");
                    assert!(expected.contains("RFC 3339"), "{bad}: {expected}");
                }
                other => panic!("{bad}: unexpected {other}"),
            }
        }
    }

    #[test]
    fn a_toml_offset_date_time_is_accepted_too() {
        let ex = Example::new();
        ex.edit(
            &env_toml(&ex),
            "base_time = \"2026-03-02T09:00:00Z\"",
            "base_time = 2026-03-02T10:00:00+01:00",
        );
        let env = EnvSpec::load(ex.env_dir()).unwrap();
        assert_eq!(env.base_time.to_string(), "2026-03-02T09:00:00Z");
    }

    #[test]
    fn the_time_step_is_bounded_and_may_be_zero() {
        let ex = Example::new();
        ex.edit(&env_toml(&ex), "time_step_secs = 60", "time_step_secs = 0");
        assert_eq!(EnvSpec::load(ex.env_dir()).unwrap().time_step_secs, 0);
        for bad in ["-1", "86401"] {
            let (_, err) = load_edited("time_step_secs = 60", &format!("time_step_secs = {bad}"));
            assert!(
                matches!(&err, EnvError::File(FileError::Invalid { key, expected, .. })
                    if key == "time_step_secs" && expected.contains("86400")),
                "{err}"
            );
        }
    }

    #[test]
    fn a_missing_files_directory_is_refused() {
        let ex = Example::new();
        std::fs::remove_dir_all(ex.env_dir().join("files")).unwrap();
        let err = EnvSpec::load(ex.env_dir()).unwrap_err();
        assert!(
            matches!(&err, EnvError::File(FileError::Layout { path, problem, .. })
                if path.ends_with("example/files") && problem == "is missing"),
            "{err}"
        );
        assert!(err.to_string().contains("expected a directory"), "{err}");
        std::fs::write(ex.env_dir().join("files"), "not a directory").unwrap();
        let err = EnvSpec::load(ex.env_dir()).unwrap_err();
        assert!(err.to_string().contains("is not a directory"), "{err}");
    }

    #[test]
    fn missing_or_empty_docs_are_refused() {
        let ex = Example::new();
        std::fs::write(ex.env_dir().join("docs.md"), "\n  \n").unwrap();
        let err = EnvSpec::load(ex.env_dir()).unwrap_err();
        assert!(err.to_string().contains("docs.md is empty"), "{err}");
        std::fs::remove_file(ex.env_dir().join("docs.md")).unwrap();
        let err = EnvSpec::load(ex.env_dir()).unwrap_err();
        assert!(err.to_string().contains("docs.md is missing"), "{err}");
    }

    #[test]
    fn a_directory_without_env_toml_is_not_an_environment() {
        let ex = Example::new();
        std::fs::remove_file(env_toml(&ex)).unwrap();
        let err = EnvSpec::load(ex.env_dir()).unwrap_err();
        assert!(matches!(err, EnvError::NotAnEnvironment { .. }), "{err}");
        let err = EnvSpec::load(ex.tmp.path().join("nowhere")).unwrap_err();
        assert!(
            matches!(err, EnvError::File(FileError::Read { .. })),
            "{err}"
        );
    }

    #[test]
    fn the_name_must_be_the_directory_name() {
        let (_, err) = load_edited("name = \"example\"", "name = \"sample\"");
        assert!(
            matches!(&err, EnvError::File(FileError::Invalid { key, line: 2, problem, .. })
                if key == "name" && problem.contains("`example`")),
            "{err}"
        );
        let (_, err) = load_edited("name = \"example\"", "name = \"../x\"");
        assert!(
            matches!(&err, EnvError::File(FileError::Invalid { key, .. }) if key == "name"),
            "{err}"
        );
    }

    #[test]
    fn unknown_repeated_or_no_tools_are_refused() {
        let (ex, err) = load_edited("\"read\", \"write\"", "\"read\", \"browser\"");
        let line = line_of(&env_toml(&ex), "browser");
        match &err {
            EnvError::File(FileError::Invalid {
                key,
                line: l,
                expected,
                ..
            }) => {
                assert_eq!(key, "tools");
                assert_eq!(*l, line);
                assert!(expected.contains("`apply_patch`"), "{expected}");
            }
            other => panic!("unexpected {other}"),
        }
        let (_, err) = load_edited("\"read\", \"write\"", "\"read\", \"read\"");
        assert!(err.to_string().contains("twice"), "{err}");
        let (_, err) = load_edited(
            "\"read\", \"write\", \"edit\", \"apply_patch\", \"ls\", \"glob\", \"grep\", \"exec\", \"process\", \"skill\"",
            "",
        );
        assert!(err.to_string().contains("is empty"), "{err}");
    }

    #[test]
    fn skills_need_the_skill_tool() {
        let (_, err) = load_edited(", \"skill\"]", "]");
        assert!(
            matches!(&err, EnvError::File(FileError::Invalid { key, problem, .. })
                if key == "skills" && problem.contains("`skill`")),
            "{err}"
        );
    }

    #[test]
    fn an_offered_skill_that_does_not_exist_is_refused_with_its_line() {
        let ex = Example::new();
        ex.edit(
            &env_toml(&ex),
            "[\"word-count\"]",
            "[\"word-count\", \"wordcount\"]",
        );
        let env = EnvSpec::load(ex.env_dir()).unwrap();
        let err = env.check_skills(ex.skills()).unwrap_err();
        let line = line_of(&env_toml(&ex), "wordcount");
        match &err {
            EnvError::Skill {
                line: l,
                skill,
                source,
                ..
            } => {
                assert_eq!(*l, line);
                assert_eq!(skill, "wordcount");
                assert!(matches!(**source, SkillError::NotFound { .. }));
            }
            other => panic!("unexpected {other}"),
        }
        let chain = crate::error::chain(&err);
        assert!(chain.contains("`skills` offers `wordcount`"), "{chain}");
        assert!(
            chain.contains("expected one of: `") && chain.contains("`word-count`"),
            "{chain}"
        );
        // A skill name that cannot be a directory is refused at load.
        let (_, err) = load_edited("[\"word-count\"]", "[\"../word-count\"]");
        assert!(
            matches!(&err, EnvError::File(FileError::Invalid { key, .. }) if key == "skills"),
            "{err}"
        );
    }

    #[test]
    fn the_policy_is_a_bundled_name_or_a_relative_file() {
        let (ex, err) = load_edited("policy = \"default\"", "policy = \"defualt\"");
        let line = line_of(&env_toml(&ex), "defualt");
        assert!(
            matches!(&err, EnvError::Policy { line: l, source, .. } if *l == line && matches!(**source, PolicyError::UnknownName { .. })),
            "{err}"
        );
        let chain = crate::error::chain(&err);
        assert!(chain.contains("`strict`"), "{chain}");

        let ex = Example::new();
        std::fs::write(
            ex.env_dir().join("mine.toml"),
            crate::spec::policy::BUNDLED[1].1,
        )
        .unwrap();
        ex.edit(
            &env_toml(&ex),
            "policy = \"default\"",
            "policy = \"mine.toml\"",
        );
        let env = EnvSpec::load(ex.env_dir()).unwrap();
        assert_eq!(env.load_policy().unwrap().name, "mine");

        let (_, err) = load_edited("policy = \"default\"", "policy = \"/etc/envcraft.toml\"");
        assert!(
            matches!(&err, EnvError::File(FileError::Invalid { key, .. }) if key == "policy"),
            "{err}"
        );
    }

    #[test]
    fn task_ids_skip_files_and_hidden_directories() {
        let ex = Example::new();
        let tasks = ex.env_dir().join("tasks");
        std::fs::write(tasks.join("README.md"), "notes").unwrap();
        std::fs::create_dir(tasks.join(".draft")).unwrap();
        let env = EnvSpec::load(ex.env_dir()).unwrap();
        assert_eq!(
            env.task_ids().unwrap(),
            ["archive-read-mail", "extract-todos"]
        );
        std::fs::remove_dir_all(&tasks).unwrap();
        assert!(env.task_ids().unwrap().is_empty());
    }
}
