//! A skill's `[synth]` table: the ways task synthesis (`envcraft synth`) may call the skill,
//! and how to say, in the environment's own terms, what a call found or changed.
//!
//! ```toml
//! [[synth.calls]]
//! args = { op = "list" }                 # fixed arguments (a string may hold `{KIND}`)
//! files = { path = ["*.md", "*.txt"] }   # a path argument filled from the workspace's files
//! folders = { folder = ["mail/*"] }      # a folder argument filled from its folders
//! words = ["query"]                      # an argument filled with a word of one file
//! kinds = { to = "email" }               # an argument's kind, when not its `format` or name
//! facts = { words = "the number of words in {path}" }          # scalar results
//! items = { matches = "the email in {folder} from {item.from}" } # each item of an array result
//! does = "send a reply to {to}"          # what the call changes (an action)
//! ```
//!
//! A phrase's `{ARG}` is the phrase of that argument's value, `{item.FIELD}` a field of the
//! item being described. Every name is checked against the arguments' schema and, when the
//! skill declares one, the result's `[outputs]` schema.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

/// What `[synth]` says: at least one call.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SkillUses {
    pub calls: Vec<SkillCall>,
}

/// One way of calling the skill.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SkillCall {
    /// Arguments every such call passes; a string may name the kind of an earlier value in
    /// braces (`"Re: {subject}"`).
    pub args: Map<String, Value>,
    /// Arguments filled from the workspace's files whose paths match one of the patterns
    /// (`*` within a name, `**/` any folders).
    pub files: BTreeMap<String, Vec<String>>,
    /// Arguments filled from the workspace's folders matching one of the patterns.
    pub folders: BTreeMap<String, Vec<String>>,
    /// Arguments filled with a word that picks out one file of the workspace (one below a
    /// folder or path argument already filled, where there is one).
    pub words: Vec<String>,
    /// Arguments' kinds, where the schema's `format` or the argument's name is not it.
    pub kinds: BTreeMap<String, String>,
    /// Top-level scalar results and the phrase that says what each is.
    pub facts: BTreeMap<String, String>,
    /// Top-level array results and the phrase that picks out one item.
    pub items: BTreeMap<String, String>,
    /// What the call changes in the workspace, for a call that changes it.
    pub does: Option<String>,
}

type Problem = (String, String, String);

fn problem(key: String, problem: impl Into<String>, expected: impl Into<String>) -> Problem {
    (key, problem.into(), expected.into())
}

/// The schema of the property at a dotted path (`stats.mean`) of an object schema.
pub fn property_at<'a>(schema: &'a Value, dotted: &str) -> Option<&'a Value> {
    dotted
        .split('.')
        .try_fold(schema, |s, part| s.get("properties")?.get(part))
}

fn properties(schema: &Value) -> Option<&Map<String, Value>> {
    schema.get("properties").and_then(Value::as_object)
}

/// `{NAME}` placeholders of a phrase, in order.
pub fn placeholders(phrase: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = phrase;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else { break };
        out.push(&after[..close]);
        rest = &after[close + 1..];
    }
    out
}

impl SkillUses {
    /// Check `[synth]` (as JSON) against the arguments' schema and the outputs' schema. On
    /// failure: the key below `synth`, the problem and what is expected.
    pub fn parse(
        synth: &Value,
        schema: &Value,
        outputs: Option<&Value>,
    ) -> Result<SkillUses, Problem> {
        let Some(table) = synth.as_object() else {
            return Err(problem(
                String::new(),
                "is not a table",
                "`[[synth.calls]]` tables",
            ));
        };
        if let Some(other) = table.keys().find(|k| *k != "calls") {
            return Err(problem(
                format!(".{other}"),
                "is not a key of `[synth]`",
                "only `calls`",
            ));
        }
        let calls = match table.get("calls") {
            Some(Value::Array(calls)) if !calls.is_empty() => calls,
            _ => {
                return Err(problem(
                    ".calls".into(),
                    "is missing or empty",
                    "one `[[synth.calls]]` table or more",
                ));
            }
        };
        let calls = calls
            .iter()
            .enumerate()
            .map(|(i, call)| SkillCall::parse(call, &format!(".calls[{i}]"), schema, outputs))
            .collect::<Result<_, _>>()?;
        Ok(SkillUses { calls })
    }
}

fn strings(value: &Value) -> Option<Vec<String>> {
    value.as_array().and_then(|a| {
        a.iter()
            .map(|p| p.as_str().map(str::to_string))
            .collect::<Option<Vec<_>>>()
    })
}

fn string_map(value: Option<&Value>, key: &str) -> Result<BTreeMap<String, String>, Problem> {
    let mut out = BTreeMap::new();
    let Some(value) = value else { return Ok(out) };
    let Some(map) = value.as_object() else {
        return Err(problem(key.into(), "is not a table", "a table of strings"));
    };
    for (k, v) in map {
        let Some(s) = v.as_str() else {
            return Err(problem(format!("{key}.{k}"), "is not a string", "a string"));
        };
        out.insert(k.clone(), s.to_string());
    }
    Ok(out)
}

impl SkillCall {
    fn parse(
        call: &Value,
        at: &str,
        schema: &Value,
        outputs: Option<&Value>,
    ) -> Result<SkillCall, Problem> {
        const KEYS: [&str; 8] = [
            "args", "files", "folders", "words", "kinds", "facts", "items", "does",
        ];
        let Some(table) = call.as_object() else {
            return Err(problem(
                at.into(),
                "is not a table",
                "a `[[synth.calls]]` table",
            ));
        };
        if let Some(other) = table.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(problem(
                format!("{at}.{other}"),
                "is not a key of a synth call",
                "args, files, folders, words, kinds, facts, items, does",
            ));
        }
        let inputs = properties(schema).cloned().unwrap_or_default();
        let is_input = |key: String, name: &str| {
            if inputs.contains_key(name) {
                Ok(())
            } else {
                Err(problem(
                    key,
                    format!("names `{name}`, which is not an argument of the skill"),
                    "an argument listed in `[schema]`",
                ))
            }
        };
        let args = match table.get("args") {
            None => Map::new(),
            Some(Value::Object(args)) => args.clone(),
            Some(_) => {
                return Err(problem(
                    format!("{at}.args"),
                    "is not a table",
                    "a table of the arguments every such call passes",
                ));
            }
        };
        for name in args.keys() {
            is_input(format!("{at}.args.{name}"), name)?;
        }
        let mut hints = [BTreeMap::new(), BTreeMap::new()];
        for (hint, out) in ["files", "folders"].into_iter().zip(hints.iter_mut()) {
            let Some(value) = table.get(hint) else {
                continue;
            };
            let Some(map) = value.as_object() else {
                return Err(problem(
                    format!("{at}.{hint}"),
                    "is not a table",
                    "a table from an argument to path patterns",
                ));
            };
            for (name, patterns) in map {
                let key = format!("{at}.{hint}.{name}");
                is_input(key.clone(), name)?;
                match strings(patterns) {
                    Some(list) if !list.is_empty() => {
                        out.insert(name.clone(), list);
                    }
                    _ => {
                        return Err(problem(
                            key,
                            "is not a list of patterns",
                            "a non-empty list of path patterns such as [\"*.md\"]",
                        ));
                    }
                }
            }
        }
        let [files, folders] = hints;
        let words = match table.get("words") {
            None => Vec::new(),
            Some(value) => strings(value).ok_or_else(|| {
                problem(
                    format!("{at}.words"),
                    "is not a list of argument names",
                    "a list of the arguments filled with a word of the workspace",
                )
            })?,
        };
        for name in &words {
            is_input(format!("{at}.words"), name)?;
        }
        let kinds = string_map(table.get("kinds"), &format!("{at}.kinds"))?;
        for name in kinds.keys() {
            is_input(format!("{at}.kinds.{name}"), name)?;
        }
        let facts = string_map(table.get("facts"), &format!("{at}.facts"))?;
        let items = string_map(table.get("items"), &format!("{at}.items"))?;
        let does = match table.get("does") {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                return Err(problem(
                    format!("{at}.does"),
                    "is not a string",
                    "a phrase saying what the call changes",
                ));
            }
        };
        if facts.is_empty() && items.is_empty() && does.is_none() {
            return Err(problem(
                at.into(),
                "says nothing the call yields or does",
                "`facts`, `items` or `does`",
            ));
        }
        if (!facts.is_empty() || !items.is_empty()) && outputs.is_none() {
            return Err(problem(
                at.into(),
                "names results but the skill declares no `[outputs]`",
                "an `[outputs]` schema of the skill's result",
            ));
        }
        let results = |name: &str| outputs.and_then(|o| property_at(o, name));
        for (name, phrase) in &facts {
            let key = format!("{at}.facts.{name}");
            match results(name).and_then(|s| s.get("type")) {
                Some(Value::String(t))
                    if ["string", "integer", "number", "boolean"].contains(&t.as_str()) => {}
                Some(_) => {
                    return Err(problem(
                        key,
                        "is not a scalar result",
                        "a result of type string, integer, number or boolean in `[outputs]`",
                    ));
                }
                None => {
                    return Err(problem(
                        key,
                        format!("names `{name}`, which `[outputs]` does not list with a type"),
                        "a result listed in `[outputs]`",
                    ));
                }
            }
            check_phrase(&key, phrase, &inputs, None)?;
        }
        for (name, phrase) in &items {
            let key = format!("{at}.items.{name}");
            let item = match results(name) {
                Some(s) if s.get("type") == Some(&Value::from("array")) => s.get("items"),
                _ => {
                    return Err(problem(
                        key,
                        format!("names `{name}`, which `[outputs]` does not list as an array"),
                        "an array result listed in `[outputs]`",
                    ));
                }
            };
            check_phrase(&key, phrase, &inputs, item)?;
        }
        if let Some(does) = &does {
            check_phrase(&format!("{at}.does"), does, &inputs, None)?;
        }
        Ok(SkillCall {
            args,
            files,
            folders,
            words,
            kinds,
            facts,
            items,
            does,
        })
    }
}

/// Every `{NAME}` of `phrase` is an argument, or `{item.FIELD}` a field of `item`'s schema.
fn check_phrase(
    key: &str,
    phrase: &str,
    inputs: &Map<String, Value>,
    item: Option<&Value>,
) -> Result<(), Problem> {
    for name in placeholders(phrase) {
        let known = match name.strip_prefix("item.") {
            Some(field) => match item {
                Some(schema) if schema.get("type") == Some(&Value::from("object")) => {
                    properties(schema).is_some_and(|p| p.contains_key(field))
                }
                Some(_) => field.is_empty(),
                None => false,
            },
            None => inputs.contains_key(name) || (name == "item" && item.is_some()),
        };
        if !known {
            return Err(problem(
                key.into(),
                format!("names `{{{name}}}`, which is neither an argument nor a field of the item"),
                "`{ARG}` for an argument, `{item}` or `{item.FIELD}` for the item described",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string"}, "folder": {"type": "string"}}})
    }

    fn outputs() -> Value {
        json!({"type": "object", "properties": {
            "words": {"type": "integer"},
            "matches": {"type": "array", "items": {"type": "object", "properties": {"from": {"type": "string"}}}}
        }})
    }

    #[test]
    fn a_call_names_only_arguments_and_results() {
        let ok = json!({"calls": [{"files": {"path": ["*.md"]}, "facts": {"words": "the words of {path}"},
            "items": {"matches": "the email in {folder} from {item.from}"}}]});
        let uses = SkillUses::parse(&ok, &schema(), Some(&outputs())).unwrap();
        assert_eq!(uses.calls[0].files["path"], vec!["*.md".to_string()]);
        for (bad, key) in [
            (
                json!({"calls": [{"facts": {"lines": "x"}}]}),
                ".calls[0].facts.lines",
            ),
            (
                json!({"calls": [{"facts": {"words": "{nope}"}}]}),
                ".calls[0].facts.words",
            ),
            (
                json!({"calls": [{"items": {"matches": "{item.to}"}}]}),
                ".calls[0].items.matches",
            ),
            (
                json!({"calls": [{"args": {"zz": 1}, "does": "x"}]}),
                ".calls[0].args.zz",
            ),
            (json!({"calls": [{}]}), ".calls[0]"),
            (json!({"calls": []}), ".calls"),
            (json!({"other": 1}), ".other"),
        ] {
            let err = SkillUses::parse(&bad, &schema(), Some(&outputs())).unwrap_err();
            assert_eq!(err.0, key, "{bad}: {err:?}");
        }
        let err = SkillUses::parse(&ok, &schema(), None).unwrap_err();
        assert!(err.1.contains("no `[outputs]`"), "{err:?}");
    }

    #[test]
    fn placeholders_are_found_in_order() {
        assert_eq!(placeholders("a {x} b {item.y}{z"), vec!["x", "item.y"]);
    }
}
