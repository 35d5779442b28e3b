//! `skill {name, args}`: run one of the environment's skills. The arguments are checked against
//! the skill's JSON schema, then given as JSON on the standard input of its executable, which
//! runs in the sandbox (in the workspace, under the policy) with the session's clock; its
//! standard output (JSON, or text) is the result.
//!
//! The schema check covers the subset of JSON Schema skills use: `type` (object, array,
//! string, integer, number, boolean, null), `properties`, `required`,
//! `additionalProperties: false`, `enum`, `items`, `minimum`/`maximum`, `minLength`/`maxLength`.
//! Other keywords are ignored (the skill still validates its own input).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use std::borrow::Cow;

use super::registry::{Context, Run, Tool, ToolSchema};
use super::result::{ToolError, ToolResult};
use crate::sandbox::live::STDIN_BYTES_MAX;
use crate::sandbox::{ExecRequest, OutputMode, Sandbox, StdinSource};

/// Where skills are shown inside the sandbox: `SKILLS_MOUNT/NAME/`.
pub const SKILLS_MOUNT: &str = "/.envcraft/skills";

/// What the session knows of one offered skill.
#[derive(Debug, Clone)]
pub struct OfferedSkill {
    pub name: String,
    pub description: String,
    pub schema: Value,
    /// The executable, relative to the skill's directory.
    pub executable: PathBuf,
    pub timeout: Duration,
}

/// `skill` in the registry: offered only where the environment has skills.
pub(crate) const TOOL: Tool = Tool {
    name: "skill",
    describe,
    run: Run::Sandbox(run),
};

fn describe(skills: &[OfferedSkill]) -> Option<ToolSchema> {
    if skills.is_empty() {
        return None;
    }
    let list: Vec<String> = skills
        .iter()
        .map(|s| format!("{}: {}", s.name, s.description))
        .collect();
    Some(ToolSchema {
        name: "skill",
        description: Cow::Owned(format!(
            "Run one of this environment's skills with JSON arguments. Skills: {}",
            list.join("; ")
        )),
        parameters: schema(skills),
    })
}

fn run(context: &mut Context<'_>, args: &Value) -> ToolResult {
    let env = std::mem::take(&mut context.env);
    call(context.sandbox, context.skills, args, env)
}

/// The JSON schema of `skill`'s arguments, naming the offered skills.
pub fn schema(skills: &[OfferedSkill]) -> Value {
    let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "enum": names, "description": "Which skill to run."},
            "args": {"type": "object", "description": "The skill's arguments, as its documentation describes."}
        },
        "required": ["name"]
    })
}

/// Check `value` against `schema` (the subset above); the first problem, as an agent-safe
/// message naming where it is.
pub fn check(schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    let here = if at.is_empty() {
        "args".to_string()
    } else {
        at.to_string()
    };
    if let Some(expected) = schema.get("type").and_then(Value::as_str) {
        let ok = match expected {
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            "null" => value.is_null(),
            _ => true,
        };
        if !ok {
            return Err(format!("`{here}` must be of type {expected}"));
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        return Err(format!(
            "`{here}` must be one of {}",
            Value::Array(options.clone())
        ));
    }
    if let Some(n) = value.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && n < min
        {
            return Err(format!("`{here}` must be at least {min}"));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && n > max
        {
            return Err(format!("`{here}` must be at most {max}"));
        }
    }
    if let Some(s) = value.as_str() {
        let len = s.chars().count() as u64;
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
            && len < min
        {
            return Err(format!("`{here}` must have at least {min} characters"));
        }
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
            && len > max
        {
            return Err(format!("`{here}` must have at most {max} characters"));
        }
    }
    if let Some(obj) = value.as_object() {
        let props = schema.get("properties").and_then(Value::as_object);
        for field in schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !obj.contains_key(field) {
                return Err(format!("`{here}.{field}` is required"));
            }
        }
        for (key, v) in obj {
            match props.and_then(|p| p.get(key)) {
                Some(sub) => check(sub, v, &format!("{here}.{key}"))?,
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    return Err(format!("`{here}.{key}` is not an argument of this skill"));
                }
                None => {}
            }
        }
    }
    if let (Some(items), Some(arr)) = (schema.get("items"), value.as_array()) {
        for (i, v) in arr.iter().enumerate() {
            check(items, v, &format!("{here}[{i}]"))?;
        }
    }
    Ok(())
}

/// Run `skill` with `args`.
pub fn call(
    sandbox: &mut Sandbox,
    skills: &[OfferedSkill],
    args: &Value,
    env: Vec<(String, String)>,
) -> ToolResult {
    let Some(obj) = args.as_object() else {
        return ToolError::invalid_argument(
            "skill takes a JSON object: {\"name\": ..., \"args\": {...}}",
        )
        .into();
    };
    let name = match obj.get("name").or_else(|| obj.get("skill")) {
        Some(Value::String(n)) => n,
        Some(_) => return ToolError::invalid_argument("`name` must be a string").into(),
        None => {
            return ToolError::missing_field("name", "the name of one of the offered skills")
                .into();
        }
    };
    let Some(skill) = skills.iter().find(|s| &s.name == name) else {
        let known: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        return ToolError::not_found(format!(
            "no skill `{}` here; the offered skills are: {}",
            name.chars().take(64).collect::<String>(),
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        ))
        .into();
    };
    let skill_args = obj
        .get("args")
        .or_else(|| obj.get("arguments"))
        .cloned()
        .unwrap_or(json!({}));
    if let Err(problem) = check(&skill.schema, &skill_args, "") {
        return ToolError::invalid_argument(format!("skill `{}`: {problem}", skill.name)).into();
    }
    let input = skill_args.to_string().into_bytes();
    if input.len() > STDIN_BYTES_MAX {
        return ToolError::too_large(format!(
            "the arguments are {} bytes; a skill takes at most {STDIN_BYTES_MAX}",
            input.len()
        ))
        .into();
    }
    let program = Path::new(SKILLS_MOUNT)
        .join(&skill.name)
        .join(&skill.executable);
    let request = ExecRequest {
        argv: vec![program.display().to_string()],
        env,
        timeout: skill.timeout,
        stdin: StdinSource::Bytes(input),
        output: OutputMode::Capture,
        cwd: Default::default(),
    };
    match sandbox.exec(&request) {
        Ok(r) if r.timed_out => ToolError::timeout(format!(
            "skill `{}` ran past {} s and was killed",
            skill.name,
            skill.timeout.as_secs()
        ))
        .into(),
        Ok(r) => {
            let stdout = String::from_utf8_lossy(&r.stdout).into_owned();
            let output =
                serde_json::from_str::<Value>(stdout.trim()).unwrap_or(Value::String(stdout));
            if r.exit_code == Some(0) {
                ToolResult::ok(json!({"skill": skill.name, "output": output}))
            } else {
                let message = match &output {
                    Value::Object(o) => o
                        .get("error")
                        .map(|e| e.to_string())
                        .unwrap_or_else(|| output.to_string()),
                    Value::String(s) if !s.trim().is_empty() => s.trim().to_string(),
                    _ => String::from_utf8_lossy(&r.stderr).trim().to_string(),
                };
                ToolError::invalid_argument(format!(
                    "skill `{}` failed (exit {}): {}",
                    skill.name,
                    r.exit_code
                        .map(|c| c.to_string())
                        .unwrap_or_else(|| "by signal".into()),
                    message.chars().take(2000).collect::<String>()
                ))
                .into()
            }
        }
        Err(e) => {
            tracing::error!(error = %crate::error::chain(&e), "skill failed in the sandbox");
            ToolError::internal("the skill could not be started in the sandbox").into()
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn schema_check_names_the_first_problem() {
        let schema = json!({
            "type": "object",
            "properties": {"path": {"type": "string", "minLength": 1}, "n": {"type": "integer", "minimum": 1}},
            "required": ["path"],
            "additionalProperties": false
        });
        assert!(check(&schema, &json!({"path": "a.csv", "n": 2}), "").is_ok());
        assert_eq!(
            check(&schema, &json!({}), "").unwrap_err(),
            "`args.path` is required"
        );
        assert_eq!(
            check(&schema, &json!({"path": 3}), "").unwrap_err(),
            "`args.path` must be of type string"
        );
        assert!(
            check(&schema, &json!({"path": "a", "n": 0}), "")
                .unwrap_err()
                .contains("at least 1")
        );
        assert!(
            check(&schema, &json!({"path": "a", "x": 1}), "")
                .unwrap_err()
                .contains("not an argument")
        );
        assert!(
            check(&schema, &json!([1]), "")
                .unwrap_err()
                .contains("type object")
        );
    }
}
