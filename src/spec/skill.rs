//! Skills: a folder `skills/NAME/` holding `SKILL.md` (what the agent reads, opening with a
//! YAML front matter block that gives `name` and `description`), `skill.toml` (the argument
//! JSON schema, the executable, its timeout) and the executable itself, which runs inside the
//! sandbox with the workspace as its working directory.
//!
//! ```toml
//! executable = "run.py"          # relative to the skill's directory; must be executable
//! timeout_secs = 30              # default 30, at most 3600
//!
//! [schema]                       # the arguments' JSON schema, written as TOML...
//! type = "object"
//! required = ["path"]
//! properties.path = { type = "string" }
//! # ...or instead: schema_file = "schema.json"
//! ```
//!
//! The front matter is the small YAML subset every skill needs and nothing more: `key: value`
//! lines for `name` and `description`, values plain or quoted; anything else (nesting, lists,
//! block scalars, other keys) is refused with its line, so that what envcraft reads is what any
//! YAML reader would read. The name must be the directory's name.

use std::ops::Range;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use toml::Spanned;

use super::arg_schema::{check_schema, toml_to_json};
use super::located::{self, FileError, TomlFile};
pub use super::skill_uses::SkillUses;

/// What a skill name may be (the Agent Skills rule), for error messages.
pub const SKILL_NAME: &str = "a skill name: 1 to 64 lowercase ASCII letters, digits and single `-`, not starting or ending with `-`";
/// A skill's time limit per call when `skill.toml` does not say.
pub const DEFAULT_TIMEOUT_SECS: u64 = 30;
/// The largest time limit per call.
pub const MAX_TIMEOUT_SECS: u64 = 3600;
/// The longest description the front matter may give.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;

/// What the front matter must look like, for error messages.
const FRONT_MATTER: &str = "SKILL.md to open with a front matter block: a `---` line, `name: NAME` and `description: TEXT` lines, and a closing `---` line";

/// Why a skill could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error("`{name}` is not {SKILL_NAME}")]
    BadName { name: String },
    #[error("no skill `{name}` under {root}; expected one of: {known}")]
    NotFound {
        name: String,
        root: PathBuf,
        /// The skills that do exist there, quoted and comma-separated (`none` when empty).
        known: String,
    },
    #[error("{file}, line {line}: {problem}; expected {expected}")]
    FrontMatter {
        file: PathBuf,
        line: usize,
        problem: String,
        expected: String,
    },
    #[error("{file}, line {line}, column {column}: not JSON: {message}")]
    SchemaJson {
        file: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{file}: the schema at `{pointer}` {problem}; expected {expected}")]
    Schema {
        file: PathBuf,
        /// A JSON pointer into the schema (`/properties/path`); empty for the top level.
        pointer: String,
        problem: String,
        expected: String,
    },
}

/// A loaded, validated skill.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SkillSpec {
    /// From the front matter; equal to the directory's name.
    pub name: String,
    /// From the front matter: when to use the skill (shown with the tool list).
    pub description: String,
    /// The whole of `SKILL.md`.
    pub doc: String,
    /// The arguments' JSON schema: an object whose `type` is `"object"`.
    pub schema: Value,
    /// Relative to [`SkillSpec::dir`], without `..`: an executable regular file inside it.
    pub executable: PathBuf,
    /// The time limit of one call, 1 to [`MAX_TIMEOUT_SECS`].
    pub timeout_secs: u64,
    /// The skill's directory, absolute and canonical.
    pub dir: PathBuf,
    /// The result's JSON schema (`[outputs]`), when the skill declares it: an object schema,
    /// checked like the arguments' one; task synthesis follows it from one call to the next.
    pub outputs: Option<Value>,
    /// How task synthesis may call the skill and say what a call found (`[synth]`), checked
    /// against the two schemas.
    pub synth: Option<SkillUses>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSkill {
    executable: Spanned<String>,
    #[serde(default)]
    timeout_secs: Option<Spanned<i64>>,
    #[serde(default)]
    schema: Option<Spanned<toml::Value>>,
    #[serde(default)]
    schema_file: Option<Spanned<String>>,
    #[serde(default)]
    outputs: Option<Spanned<toml::Value>>,
    #[serde(default)]
    synth: Option<Spanned<toml::Value>>,
}

/// Whether `name` is [`SKILL_NAME`].
pub fn is_skill_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// What `SKILL.md`'s front matter says, checked (the loader then checks the name against the
/// skill's directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillDoc {
    pub name: String,
    /// The line of `name`, for the loader's check against the directory's name.
    pub name_line: usize,
    pub description: String,
}

impl SkillDoc {
    /// Parse and check the front matter of `doc`, the text of `doc_path` (nothing is read).
    pub fn parse(doc_path: &Path, doc: &str) -> Result<SkillDoc, SkillError> {
        let front =
            front_matter(doc).map_err(|(line, problem, expected)| SkillError::FrontMatter {
                file: doc_path.to_path_buf(),
                line,
                problem,
                expected: expected.to_string(),
            })?;
        let front_error = |line: usize, problem: String, expected: &str| SkillError::FrontMatter {
            file: doc_path.to_path_buf(),
            line,
            problem,
            expected: expected.to_string(),
        };
        let (name, name_line) = front.name;
        if !is_skill_name(&name) {
            return Err(front_error(
                name_line,
                format!("`name` is `{name}`"),
                SKILL_NAME,
            ));
        }
        let (description, description_line) = front.description;
        if description.trim().is_empty() || description.chars().count() > MAX_DESCRIPTION_CHARS {
            return Err(front_error(
                description_line,
                format!(
                    "`description` has {} characters",
                    description.trim().chars().count()
                ),
                "1 to 1024 characters saying what the skill does and when to use it",
            ));
        }

        Ok(SkillDoc {
            name,
            name_line,
            description,
        })
    }
}

/// Where a skill's argument schema is: inline in `skill.toml`, or in a file beside it.
#[derive(Debug, Clone, PartialEq)]
pub enum SchemaSource {
    /// The `[schema]` table, as JSON, checked.
    Inline(Value),
    /// `schema_file`: a relative path without `..` (not yet looked up), and its line.
    File { file: String, line: usize },
}

/// What `skill.toml` says, checked as far as its text alone decides (the loader then looks up
/// the executable and the schema file in the skill's directory).
#[derive(Debug, Clone, PartialEq)]
pub struct SkillToml {
    /// As written: relative, without `..` (not yet looked up).
    pub executable: String,
    pub executable_line: usize,
    pub timeout_secs: u64,
    pub schema: SchemaSource,
    pub outputs: Option<Value>,
    /// `[synth]` as written, checked against the schemas once both are known.
    pub synth: Option<(Value, usize)>,
}

impl SkillToml {
    /// Parse and check the text of `file`, a `skill.toml` (nothing is read from disk).
    pub fn parse(file: &Path, text: &str) -> Result<SkillToml, SkillError> {
        let toml = TomlFile { path: file, text };
        let raw: RawSkill = toml.parse().map_err(|p| FileError::syntax(file, p))?;
        let invalid =
            |key: &str, span: Range<usize>, problem: String, expected: &str| FileError::Invalid {
                file: file.to_path_buf(),
                key: key.to_string(),
                line: toml.line(&span),
                problem,
                expected: expected.to_string(),
            };
        lexical_relative(raw.executable.get_ref()).map_err(|problem| {
            invalid(
                "executable",
                raw.executable.span(),
                problem,
                "a path relative to the skill's directory, inside it",
            )
        })?;
        let timeout_secs = match &raw.timeout_secs {
            None => DEFAULT_TIMEOUT_SECS,
            Some(t) => {
                let v = *t.get_ref();
                if !(1..=MAX_TIMEOUT_SECS as i64).contains(&v) {
                    return Err(invalid(
                        "timeout_secs",
                        t.span(),
                        format!("is {v}"),
                        &format!("an integer from 1 to {MAX_TIMEOUT_SECS}"),
                    )
                    .into());
                }
                v as u64
            }
        };
        let schema = match (&raw.schema, &raw.schema_file) {
            (Some(inline), None) => SchemaSource::Inline({
                let json = toml_to_json(inline.get_ref(), "schema").map_err(|(key, problem)| {
                    invalid(&key, inline.span(), problem, "a value JSON can hold")
                })?;
                check_schema(&json).map_err(|(pointer, problem, expected)| {
                    invalid(
                        &format!("schema{}", pointer.replace('/', ".")),
                        inline.span(),
                        problem,
                        expected,
                    )
                })?;
                json
            }),
            (None, Some(file)) => {
                lexical_relative(file.get_ref()).map_err(|problem| {
                    invalid(
                        "schema_file",
                        file.span(),
                        problem,
                        "a JSON file relative to the skill's directory, inside it",
                    )
                })?;
                SchemaSource::File {
                    file: file.get_ref().clone(),
                    line: toml.line(&file.span()),
                }
            }
            (Some(_), Some(file)) => {
                return Err(invalid(
                    "schema_file",
                    file.span(),
                    "is given along with a `[schema]` table".into(),
                    "either `[schema]` or `schema_file`, not both",
                )
                .into());
            }
            (None, None) => {
                return Err(FileError::Invalid {
                    file: file.to_path_buf(),
                    key: "schema".into(),
                    line: 1,
                    problem: "is missing".into(),
                    expected: "a `[schema]` table (the arguments' JSON schema, as TOML) or `schema_file = \"schema.json\"`".into(),
                }.into());
            }
        };
        let outputs = match &raw.outputs {
            None => None,
            Some(inline) => {
                let json =
                    toml_to_json(inline.get_ref(), "outputs").map_err(|(key, problem)| {
                        invalid(&key, inline.span(), problem, "a value JSON can hold")
                    })?;
                check_schema(&json).map_err(|(pointer, problem, expected)| {
                    invalid(
                        &format!("outputs{}", pointer.replace('/', ".")),
                        inline.span(),
                        problem,
                        expected,
                    )
                })?;
                Some(json)
            }
        };
        let synth = match &raw.synth {
            None => None,
            Some(inline) => {
                let json = toml_to_json(inline.get_ref(), "synth").map_err(|(key, problem)| {
                    invalid(&key, inline.span(), problem, "a value JSON can hold")
                })?;
                Some((json, toml.line(&inline.span())))
            }
        };
        Ok(SkillToml {
            executable: raw.executable.get_ref().clone(),
            executable_line: toml.line(&raw.executable.span()),
            timeout_secs,
            schema,
            outputs,
            synth,
        })
    }
}

impl SkillSpec {
    /// The skill named `name` under `skills_root` (`skills_root/NAME/`).
    pub fn find(name: &str, skills_root: impl AsRef<Path>) -> Result<SkillSpec, SkillError> {
        let root = skills_root.as_ref();
        if !is_skill_name(name) {
            return Err(SkillError::BadName {
                name: name.to_string(),
            });
        }
        let dir = root.join(name);
        if !dir.join("SKILL.md").is_file() {
            let known = SkillSpec::names(root).unwrap_or_default();
            return Err(SkillError::NotFound {
                name: name.to_string(),
                root: root.to_path_buf(),
                known: if known.is_empty() {
                    "none".to_string()
                } else {
                    known
                        .iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                },
            });
        }
        SkillSpec::load(dir)
    }

    /// The names of the skills under `skills_root` (directories holding a `SKILL.md`), sorted.
    pub fn names(skills_root: impl AsRef<Path>) -> Result<Vec<String>, SkillError> {
        let root = skills_root.as_ref();
        let read_error = |source| FileError::Read {
            path: root.to_path_buf(),
            source,
        };
        let mut names = Vec::new();
        for entry in std::fs::read_dir(root).map_err(read_error)? {
            let entry = entry.map_err(read_error)?;
            if let Some(name) = entry.file_name().to_str()
                && entry.path().join("SKILL.md").is_file()
            {
                names.push(name.to_string());
            }
        }
        names.sort();
        Ok(names)
    }

    /// Load and validate the skill in `dir` (`SKILL.md`, `skill.toml`, the executable, and the
    /// schema file when there is one).
    pub fn load(dir: impl AsRef<Path>) -> Result<SkillSpec, SkillError> {
        let given = dir.as_ref();
        let dir = std::fs::canonicalize(given).map_err(FileError::read(given))?;
        let doc_path = dir.join("SKILL.md");
        let toml_path = dir.join("skill.toml");
        for (path, expected) in [
            (&doc_path, "the skill's documentation for the agent"),
            (
                &toml_path,
                "the skill's executable, timeout and argument schema",
            ),
        ] {
            if !path.is_file() {
                return Err(FileError::Layout {
                    path: path.clone(),
                    problem: "is missing".into(),
                    expected: format!("a file: {expected}"),
                }
                .into());
            }
        }

        let doc = located::read_text(&doc_path)?;
        let SkillDoc {
            name,
            name_line,
            description,
        } = SkillDoc::parse(&doc_path, &doc)?;
        let front_error = |line: usize, problem: String, expected: &str| SkillError::FrontMatter {
            file: doc_path.clone(),
            line,
            problem,
            expected: expected.to_string(),
        };
        let dir_name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        if name != dir_name {
            return Err(front_error(
                name_line,
                format!("`name` is `{name}` but the directory is `{dir_name}`"),
                "the skill's directory name, which is how environments offer it",
            ));
        }
        let text = located::read_text(&toml_path)?;
        let SkillToml {
            executable,
            executable_line,
            timeout_secs,
            schema,
            outputs,
            synth,
        } = SkillToml::parse(&toml_path, &text)?;
        let invalid =
            |key: &str, line: usize, problem: String, expected: &str| FileError::Invalid {
                file: toml_path.clone(),
                key: key.to_string(),
                line,
                problem,
                expected: expected.to_string(),
            };
        let executable = relative_inside(&dir, &executable).map_err(|problem| {
            invalid(
                "executable",
                executable_line,
                problem,
                "a path relative to the skill's directory, inside it",
            )
        })?;
        let exe_path = dir.join(&executable);
        match std::fs::metadata(&exe_path) {
            Err(_) => {
                return Err(invalid(
                    "executable",
                    executable_line,
                    format!("names `{}`, which does not exist", executable.display()),
                    "an executable file in the skill's directory",
                )
                .into());
            }
            Ok(meta) if !meta.is_file() => {
                return Err(invalid(
                    "executable",
                    executable_line,
                    format!(
                        "names `{}`, which is not a regular file",
                        executable.display()
                    ),
                    "an executable file in the skill's directory",
                )
                .into());
            }
            Ok(meta) if meta.permissions().mode() & 0o111 == 0 => {
                return Err(invalid(
                    "executable",
                    executable_line,
                    format!(
                        "names `{}`, which is not executable (mode {:o})",
                        executable.display(),
                        meta.permissions().mode() & 0o7777
                    ),
                    "a file with its execute bits set (`chmod +x`)",
                )
                .into());
            }
            Ok(_) => {}
        }
        let schema = match schema {
            SchemaSource::Inline(json) => json,
            SchemaSource::File { file, line } => {
                let relative = relative_inside(&dir, &file).map_err(|problem| {
                    invalid(
                        "schema_file",
                        line,
                        problem,
                        "a JSON file relative to the skill's directory, inside it",
                    )
                })?;
                let path = dir.join(&relative);
                if !path.is_file() {
                    return Err(invalid(
                        "schema_file",
                        line,
                        format!("names `{}`, which is not a file", relative.display()),
                        "a JSON file relative to the skill's directory, inside it",
                    )
                    .into());
                }
                let text = located::read_text(&path)?;
                let json: Value =
                    serde_json::from_str(&text).map_err(|e| SkillError::SchemaJson {
                        file: path.clone(),
                        line: e.line(),
                        column: e.column(),
                        message: e.to_string(),
                    })?;
                check_schema(&json).map_err(|(pointer, problem, expected)| SkillError::Schema {
                    file: path.clone(),
                    pointer,
                    problem,
                    expected: expected.to_string(),
                })?;
                json
            }
        };

        let synth = match synth {
            None => None,
            Some((json, line)) => {
                Some(SkillUses::parse(&json, &schema, outputs.as_ref()).map_err(
                    |(key, problem, expected)| {
                        invalid(&format!("synth{key}"), line, problem, &expected)
                    },
                )?)
            }
        };
        Ok(SkillSpec {
            name,
            description,
            doc,
            schema,
            executable,
            timeout_secs,
            dir,
            outputs,
            synth,
        })
    }

    /// The executable's absolute path on the host.
    pub fn executable_path(&self) -> PathBuf {
        self.dir.join(&self.executable)
    }
}

/// `value` as a relative path without `..` whose target (symlinks followed) stays in `dir`,
/// or what is wrong with it.
fn relative_inside(dir: &Path, value: &str) -> Result<PathBuf, String> {
    let clean = lexical_relative(value)?;
    if let Ok(target) = std::fs::canonicalize(dir.join(&clean))
        && !target.starts_with(dir)
    {
        return Err(format!("is `{value}`, a symlink leading out of the skill"));
    }
    Ok(clean)
}

/// `value` as a relative path without `..`, judged by its text alone.
fn lexical_relative(value: &str) -> Result<PathBuf, String> {
    let path = Path::new(value);
    if value.is_empty() || value.contains('\0') {
        return Err(format!("is `{value}`"));
    }
    if !path
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(format!(
            "is `{value}`, which is absolute or climbs with `..`"
        ));
    }
    Ok(path.components().collect())
}

/// The two keys of the front matter, each with its 1-based line.
struct FrontMatter {
    name: (String, usize),
    description: (String, usize),
}

/// Parse the front matter subset; on failure the line, the problem and what is expected.
fn front_matter(doc: &str) -> Result<FrontMatter, (usize, String, &'static str)> {
    const PAIR: &str =
        "`name: VALUE` or `description: VALUE` (plain, \"double-quoted\" or 'single-quoted')";
    let doc = doc.strip_prefix('\u{feff}').unwrap_or(doc);
    let mut lines = doc.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    if lines.next().map(str::trim_end) != Some("---") {
        return Err((1, "does not open with `---`".into(), FRONT_MATTER));
    }
    let mut name = None;
    let mut description = None;
    let mut closed = false;
    for (index, line) in lines.enumerate() {
        let number = index + 2;
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            return Err((
                number,
                "is indented: nested YAML and multi-line values are not supported".into(),
                PAIR,
            ));
        }
        let Some((key, rest)) = line.split_once(':') else {
            return Err((number, format!("`{line}` is not `key: value`"), PAIR));
        };
        let slot = match key {
            "name" => &mut name,
            "description" => &mut description,
            _ => {
                return Err((
                    number,
                    format!("has the key `{key}`, which envcraft does not read"),
                    "only `name` and `description` in the front matter (the rest of SKILL.md is free text)",
                ));
            }
        };
        if slot.is_some() {
            return Err((number, format!("repeats `{key}`"), "each key once"));
        }
        if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
            return Err((number, format!("`{line}` has no space after `:`"), PAIR));
        }
        let value = scalar(rest.trim()).map_err(|problem| (number, problem, PAIR))?;
        *slot = Some((value, number));
    }
    if !closed {
        return Err((
            doc.split('\n').count(),
            "the front matter is never closed by a `---` line".into(),
            FRONT_MATTER,
        ));
    }
    let missing = |key: &str| (1, format!("the front matter has no `{key}`"), FRONT_MATTER);
    Ok(FrontMatter {
        name: name.ok_or_else(|| missing("name"))?,
        description: description.ok_or_else(|| missing("description"))?,
    })
}

/// One YAML scalar on one line, as the string a YAML reader would see; refuses what would not
/// be a plain string there. Quoted values are decoded by the front-matter reader's own
/// functions, so a value means the same in a `SKILL.md` as in a PinchBench task file.
fn scalar(value: &str) -> Result<String, String> {
    let (text, rest) = if value.starts_with('"') {
        super::front_matter::double_quoted(value).ok_or(
            "the double-quoted value is not closed on its line, or holds an escape YAML does \
             not know",
        )?
    } else if value.starts_with('\'') {
        super::front_matter::single_quoted(value)
            .ok_or("the single-quoted value is not closed on its line")?
    } else {
        if value.is_empty() {
            return Err(
                "has no value (block scalars, lists and nested maps are not supported)".into(),
            );
        }
        let first = value.chars().next().unwrap_or(' ');
        let indicator = "[]{}#&*!|>%@`,'\"".contains(first)
            || ["- ", "? ", ": "].iter().any(|p| value.starts_with(p))
            || value == "-";
        if indicator {
            return Err(format!(
                "the value `{value}` starts with `{first}`, which YAML reads specially: quote it"
            ));
        }
        if value.contains(": ") || value.ends_with(':') || value.contains(" #") {
            return Err(format!(
                "the value `{value}` holds `: ` or ` #`, which YAML reads specially: quote it"
            ));
        }
        let lower = value.to_ascii_lowercase();
        let not_a_string = ["~", "null", "true", "false", "yes", "no", "on", "off"]
            .contains(&lower.as_str())
            || value.parse::<f64>().is_ok();
        if not_a_string {
            return Err(format!(
                "YAML reads the value `{value}` as a number, a boolean or null: quote it"
            ));
        }
        return Ok(value.to_string());
    };
    let rest = rest.trim();
    if !rest.is_empty() && !rest.starts_with('#') {
        return Err(format!(
            "`{rest}` follows the quoted value (only a `# comment` may)"
        ));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::spec::located::fixture::{Example, line_of, repo};
    use serde_json::json;

    fn word_count(ex: &Example) -> PathBuf {
        ex.skills().join("word-count")
    }

    fn load_with_toml(text: &str) -> (Example, SkillError) {
        let ex = Example::new();
        std::fs::write(word_count(&ex).join("skill.toml"), text).unwrap();
        let err = SkillSpec::load(word_count(&ex)).unwrap_err();
        (ex, err)
    }

    fn load_with_doc(doc: &str) -> SkillError {
        let ex = Example::new();
        std::fs::write(word_count(&ex).join("SKILL.md"), doc).unwrap();
        SkillSpec::load(word_count(&ex)).unwrap_err()
    }

    const SCHEMA: &str = "\n[schema]\ntype = \"object\"\nproperties.path = { type = \"string\" }\n";

    #[test]
    fn the_example_skill_loads() {
        let skill = SkillSpec::find("word-count", repo().join("skills")).unwrap();
        assert_eq!(skill.name, "word-count");
        assert!(
            skill
                .description
                .starts_with("Count the lines, words and characters")
        );
        assert!(skill.doc.starts_with("---\nname: word-count\n"));
        assert_eq!(skill.executable, Path::new("run.py"));
        assert_eq!(skill.executable_path(), skill.dir.join("run.py"));
        assert_eq!(skill.timeout_secs, 10);
        assert_eq!(
            skill.schema,
            json!({
                "type": "object",
                "required": ["path"],
                "additionalProperties": false,
                "properties": {"path": {
                    "type": "string",
                    "description": "The file to count, relative to the workspace"
                }}
            })
        );
        // (Other bundled skills come and go; word-count is the one this test knows.)
        assert!(
            SkillSpec::names(repo().join("skills"))
                .unwrap()
                .contains(&"word-count".to_string())
        );
    }

    /// The example skill does what SKILL.md says, on the example environment's files.
    #[test]
    fn the_example_skill_counts_and_refuses_bad_input() {
        if !Path::new("/usr/bin/python3").exists() {
            assert!(
                std::env::var("ENVCRAFT_TEST_REQUIRE").as_deref() != Ok("all"),
                "python3 is required"
            );
            eprintln!("skipping: /usr/bin/python3 is not installed");
            return;
        }
        let skill = SkillSpec::find("word-count", repo().join("skills")).unwrap();
        let run = |input: &str| {
            use std::io::Write;
            let mut child = std::process::Command::new(skill.executable_path())
                .current_dir(repo().join("workspaces/example/files"))
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(
                out.stderr.is_empty(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let value: Value = serde_json::from_slice(&out.stdout).unwrap();
            (out.status.code(), value)
        };
        let (code, value) = run(r#"{"path": "notes/todo.md"}"#);
        assert_eq!(code, Some(0));
        assert_eq!(value, json!({"lines": 8, "words": 24, "chars": 120}));
        for bad in [
            "",
            "not json",
            "[]",
            "{}",
            r#"{"path": 7}"#,
            r#"{"path": "notes/todo.md", "mode": "x"}"#,
            r#"{"path": "../../env.toml"}"#,
            r#"{"path": "/etc/hostname"}"#,
            r#"{"path": "inbox"}"#,
            r#"{"path": "inbox/9.txt"}"#,
        ] {
            let (code, value) = run(bad);
            assert_eq!(code, Some(2), "{bad}");
            assert_eq!(value["error"]["category"], "invalid_argument", "{bad}");
            assert!(value["error"]["message"].is_string(), "{bad}");
        }
    }

    #[test]
    fn an_unknown_skill_lists_the_known_ones() {
        let err = SkillSpec::find("wordcount", repo().join("skills")).unwrap_err();
        assert!(matches!(err, SkillError::NotFound { .. }), "{err}");
        assert!(err.to_string().contains("`word-count`"), "{err}");
        let err = SkillSpec::find("../word-count", repo().join("skills")).unwrap_err();
        assert!(matches!(err, SkillError::BadName { .. }), "{err}");
    }

    #[test]
    fn the_name_must_be_the_directory_name() {
        let ex = Example::new();
        let moved = ex.skills().join("count-words");
        std::fs::rename(word_count(&ex), &moved).unwrap();
        let err = SkillSpec::load(&moved).unwrap_err();
        match &err {
            SkillError::FrontMatter {
                file,
                line,
                problem,
                ..
            } => {
                assert!(file.ends_with("count-words/SKILL.md"));
                assert_eq!(*line, 2);
                assert!(problem.contains("`count-words`"), "{problem}");
            }
            other => panic!("unexpected {other}"),
        }
    }

    #[test]
    fn a_non_object_schema_is_refused() {
        let (ex, err) = load_with_toml("executable = \"run.py\"\n\n[schema]\ntype = \"array\"\n");
        match &err {
            SkillError::File(FileError::Invalid {
                key,
                line,
                expected,
                ..
            }) => {
                assert_eq!(key, "schema.type");
                assert_eq!(*line, 3);
                assert!(expected.contains("\"object\""), "{expected}");
            }
            other => panic!("unexpected {other}"),
        }
        drop(ex);
        let (_, err) = load_with_toml("executable = \"run.py\"\nschema = [1, 2]\n");
        assert!(
            matches!(&err, SkillError::File(FileError::Invalid { key, line: 2, .. }) if key == "schema"),
            "{err}"
        );
        let ex = Example::new();
        let dir = word_count(&ex);
        std::fs::write(dir.join("schema.json"), "[{\"type\": \"object\"}]").unwrap();
        std::fs::write(
            dir.join("skill.toml"),
            "executable = \"run.py\"\nschema_file = \"schema.json\"\n",
        )
        .unwrap();
        let err = SkillSpec::load(&dir).unwrap_err();
        assert!(
            matches!(&err, SkillError::Schema { pointer, .. } if pointer.is_empty()),
            "{err}"
        );
        assert!(err.to_string().contains("is an array"), "{err}");
        std::fs::write(
            dir.join("schema.json"),
            "{\"type\": \"object\",\n \"required\": [\"path\"],\n \"properties\": {}}",
        )
        .unwrap();
        let err = SkillSpec::load(&dir).unwrap_err();
        assert!(err.to_string().contains("`/required`"), "{err}");
        std::fs::write(
            dir.join("schema.json"),
            "{\"type\": \"object\",\n \"properties\": {\"path\": }}",
        )
        .unwrap();
        let err = SkillSpec::load(&dir).unwrap_err();
        assert!(
            matches!(err, SkillError::SchemaJson { line: 2, .. }),
            "{err}"
        );
        std::fs::write(
            dir.join("schema.json"),
            "{\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}}}",
        )
        .unwrap();
        let skill = SkillSpec::load(&dir).unwrap();
        assert_eq!(skill.schema["properties"]["path"]["type"], "string");
        assert_eq!(skill.timeout_secs, DEFAULT_TIMEOUT_SECS);
    }

    #[test]
    fn the_schema_comes_from_exactly_one_place() {
        let (_, err) = load_with_toml("executable = \"run.py\"\n");
        assert!(
            matches!(&err, SkillError::File(FileError::Invalid { key, .. }) if key == "schema"),
            "{err}"
        );
        let (_, err) = load_with_toml(&format!(
            "executable = \"run.py\"\nschema_file = \"schema.json\"\n{SCHEMA}"
        ));
        assert!(
            matches!(&err, SkillError::File(FileError::Invalid { key, line: 2, .. }) if key == "schema_file"),
            "{err}"
        );
        let (_, err) = load_with_toml(&format!(
            "executable = \"run.py\"\n{SCHEMA}default = 2026-03-02T09:00:00Z\n"
        ));
        assert!(err.to_string().contains("JSON cannot hold"), "{err}");
    }

    #[test]
    fn a_non_executable_executable_is_refused() {
        let ex = Example::new();
        let exe = word_count(&ex).join("run.py");
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = SkillSpec::load(word_count(&ex)).unwrap_err();
        let line = line_of(&word_count(&ex).join("skill.toml"), "executable =");
        match &err {
            SkillError::File(FileError::Invalid {
                key,
                line: l,
                problem,
                expected,
                ..
            }) => {
                assert_eq!(key, "executable");
                assert_eq!(*l, line);
                assert!(problem.contains("not executable (mode 644)"), "{problem}");
                assert!(expected.contains("chmod +x"), "{expected}");
            }
            other => panic!("unexpected {other}"),
        }
        for (value, problem) in [
            ("missing.py", "does not exist"),
            ("../word-count/run.py", "climbs"),
            ("/usr/bin/python3", "absolute"),
            (".", "not a regular file"),
        ] {
            let (_, err) = load_with_toml(&format!("executable = \"{value}\"\n{SCHEMA}"));
            assert!(
                matches!(&err, SkillError::File(FileError::Invalid { key, .. }) if key == "executable"),
                "{err}"
            );
            assert!(err.to_string().contains(problem), "{value}: {err}");
        }
        let ex = Example::new();
        std::os::unix::fs::symlink("/usr/bin/env", word_count(&ex).join("out")).unwrap();
        std::fs::write(
            word_count(&ex).join("skill.toml"),
            format!("executable = \"out\"\n{SCHEMA}"),
        )
        .unwrap();
        let err = SkillSpec::load(word_count(&ex)).unwrap_err();
        assert!(
            err.to_string().contains("leading out of the skill"),
            "{err}"
        );
    }

    #[test]
    fn skill_toml_keys_are_checked() {
        let (_, err) = load_with_toml(&format!("executable = \"run.py\"\ntimeout = 5\n{SCHEMA}"));
        assert!(
            matches!(&err, SkillError::File(FileError::Syntax { key: Some(k), line: 2, .. }) if k == "timeout"),
            "{err}"
        );
        assert!(err.to_string().contains("expected one of"), "{err}");
        let (_, err) = load_with_toml(&format!(
            "executable = \"run.py\"\ntimeout_secs = 0\n{SCHEMA}"
        ));
        assert!(
            matches!(&err, SkillError::File(FileError::Invalid { key, line: 2, .. }) if key == "timeout_secs"),
            "{err}"
        );
    }

    #[test]
    fn the_front_matter_subset_is_parsed_and_the_rest_refused() {
        let ok = front_matter(
            "---\r\nname: \"word-count\"  # quoted\r\n\r\ndescription: 'Dana''s counter: lines, words'\r\n---\r\nbody",
        )
        .map_err(|e| e.1)
        .unwrap();
        assert_eq!(ok.name, ("word-count".to_string(), 2));
        assert_eq!(
            ok.description,
            ("Dana's counter: lines, words".to_string(), 4)
        );
        let ok = front_matter("---\nname: x\ndescription: \"say \\\"hi\\\"\"\n---\n")
            .map_err(|e| e.1)
            .unwrap();
        assert_eq!(ok.description.0, "say \"hi\"");

        for (doc, line, problem) in [
            ("# word-count\n", 1, "does not open with `---`"),
            ("---\nname: word-count\ndescription: d\n", 4, "never closed"),
            (
                "---\nname: word-count\nlicense: MIT\ndescription: d\n---\n",
                3,
                "`license`",
            ),
            (
                "---\nname: word-count\ndescription: |\n  long\n---\n",
                3,
                "starts with `|`",
            ),
            (
                "---\nname: word-count\n  description: d\n---\n",
                3,
                "indented",
            ),
            (
                "---\nname: word-count\ndescription: counts: words\n---\n",
                3,
                "quote it",
            ),
            (
                "---\nname: word-count\ndescription: see issue #4\n---\n",
                3,
                "quote it",
            ),
            (
                "---\nname: word-count\ndescription: yes\n---\n",
                3,
                "boolean",
            ),
            (
                "---\nname: word-count\ndescription: \"open\n---\n",
                3,
                "not closed",
            ),
            (
                "---\nname: word-count\ndescription: 'a' b\n---\n",
                3,
                "follows the quoted",
            ),
            (
                "---\nname: word-count\nname: again\ndescription: d\n---\n",
                3,
                "repeats",
            ),
            ("---\nname: word-count\n---\n", 1, "no `description`"),
            ("---\nname: word-count\ndescription:d\n---\n", 3, "no space"),
            (
                "---\nname: word-count\n- description\n---\n",
                3,
                "is not `key: value`",
            ),
        ] {
            let (l, p, _) = front_matter(doc).err().unwrap_or_else(|| panic!("{doc}"));
            assert_eq!(l, line, "{doc}");
            assert!(p.contains(problem), "{doc}: {p}");
        }
        let err = load_with_doc("---\nname: word-count\ndescription: d\nversion: 2\n---\n");
        let msg = err.to_string();
        assert!(msg.contains("SKILL.md, line 4"), "{msg}");
        assert!(
            msg.contains("expected only `name` and `description`"),
            "{msg}"
        );
        let err = load_with_doc("---\nname: Word_Count\ndescription: d\n---\n");
        assert!(err.to_string().contains("lowercase"), "{err}");
    }

    #[test]
    fn a_quoted_value_means_the_same_in_a_skill_md_as_in_a_task_files_front_matter() {
        // The escapes the two readers once decoded differently (the skill reader refused
        // them), and ones both read: each now decodes once, the same way.
        for quoted in [
            r#""line\rreturn""#,
            r#""nul\0""#,
            r#""hex \x41""#,
            r#""\u00e9t\u00e9""#,
            r#""emoji \U0001F600""#,
            r#""back\ space""#,
            r#""say \"hi\"""#,
            r#"'it''s'"#,
        ] {
            let skill = front_matter(&format!("---\nname: x\ndescription: {quoted}\n---\n"))
                .map_err(|e| e.1)
                .unwrap_or_else(|e| panic!("{quoted}: {e}"))
                .description
                .0;
            let task =
                crate::spec::front_matter::parse_yaml(&[&format!("d: {quoted}")], 1).unwrap();
            assert_eq!(
                Some(skill.as_str()),
                task.get("d").and_then(|v| v.as_str()),
                "{quoted}"
            );
        }
        for bad in [r#""\q""#, r#""open"#] {
            let doc = format!("---\nname: x\ndescription: {bad}\n---\n");
            assert!(front_matter(&doc).is_err(), "{bad}");
            assert!(crate::spec::front_matter::parse_yaml(&[&format!("d: {bad}")], 1).is_err());
        }
    }

    #[test]
    fn skill_names() {
        assert!(is_skill_name("word-count"));
        assert!(is_skill_name("pdf2text"));
        for bad in [
            "",
            "Word",
            "-x",
            "x-",
            "a--b",
            "a_b",
            "a/b",
            &"a".repeat(65),
        ] {
            assert!(!is_skill_name(bad), "{bad}");
        }
    }
}
