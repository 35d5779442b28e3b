//! One step of a chain: its arguments planned from the workspace and the step before, and
//! what its result yields (facts for the next step) or, for the last step, what it changes.
//!
//! Every value carries a phrase that says what it is without naming a tool: a value taken
//! from the workspace as it is (`` `notes/a.md` ``), or one the chain found ("the largest
//! file directly in `mail/inbox/`"). A step's phrase is built from the phrases of its
//! arguments, so the last step's phrase is the whole chain's goal.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::graph::{Node, Op, arg_kind, kind_of, property_at, takes_arg};
use super::rng::Rng;
use super::state::WorkspaceState;
use crate::spec::SkillSpec;
use crate::spec::skill_uses::SkillCall;

/// The longest value an answer file holds.
const MAX_ANSWER_CHARS: usize = 300;

/// A value a step yields, with what it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Fact {
    pub kind: String,
    pub value: Value,
    pub phrase: String,
}

/// A step's call, planned.
#[derive(Debug, Clone)]
pub struct Planned {
    /// The tool's arguments.
    pub args: Value,
    /// Each argument's value as a fact (for the next step, and for phrases).
    pub used: BTreeMap<String, Fact>,
    /// For a step that changes the workspace: the goal, said in full.
    pub goal: Option<String>,
}

/// Where a chain's values come from when a step is planned.
pub struct Inputs<'a> {
    /// What the step before yielded (a step after the first takes at least one of these).
    pub yields: &'a [Fact],
    /// The step before's own arguments (the file it looked at, ...).
    pub carried: &'a [Fact],
    pub state: &'a WorkspaceState,
    /// The file an answer is put in.
    pub answer: &'a str,
    pub first: bool,
}

/// A workspace path as a phrase.
pub fn literal_path(path: &str) -> String {
    format!("`{path}`")
}

fn text_of(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A value as an answer file holds it: a number without trailing zeros.
fn answer_text(value: &Value) -> Option<String> {
    match value {
        Value::Number(n) if n.is_f64() => {
            let f = n.as_f64()?;
            if !f.is_finite() {
                return None;
            }
            let text = n.to_string();
            Some(match text.strip_suffix(".0") {
                Some(whole) => whole.to_string(),
                None => text,
            })
        }
        other => text_of(other),
    }
}

fn quote_sh(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn extension(path: &str) -> Option<&str> {
    let name = file_name(path);
    let (stem, ext) = name.rsplit_once('.')?;
    (!stem.is_empty() && !ext.is_empty()).then_some(ext)
}

fn file_noun(ext: &str) -> String {
    match ext {
        "md" => "Markdown".into(),
        "txt" => "text".into(),
        "csv" => "CSV".into(),
        "json" => "JSON".into(),
        "jsonl" => "JSONL".into(),
        "log" => "log".into(),
        "py" => "Python".into(),
        "yaml" | "yml" => "YAML".into(),
        "toml" => "TOML".into(),
        "eml" => "email".into(),
        other => format!("`.{other}`"),
    }
}

/// The facts of kind `kind` (any kind for `*`) among `facts`.
fn of_kind<'f>(facts: &'f [Fact], kind: &str) -> Vec<&'f Fact> {
    facts
        .iter()
        .filter(|f| kind == "*" || f.kind == kind)
        .collect()
}

/// Plan a call of `node`, or `None` when the inputs cannot fill it.
pub fn plan(
    node: &Node,
    skill: Option<&SkillSpec>,
    inputs: &Inputs,
    rng: &mut Rng,
) -> Option<Planned> {
    let simple = |args: Value, used: Vec<(&str, Fact)>, goal: Option<String>| Planned {
        args,
        used: used.into_iter().map(|(k, f)| (k.to_string(), f)).collect(),
        goal,
    };
    let take_path = |rng: &mut Rng| -> Option<Fact> {
        rng.pick(&of_kind(inputs.yields, "path"))
            .map(|f| (*f).clone())
    };
    match &node.op {
        Op::Glob => {
            let mut patterns = Vec::new();
            let mut by_ext: BTreeMap<&str, usize> = BTreeMap::new();
            let mut by_dir_ext: BTreeMap<(String, &str), usize> = BTreeMap::new();
            for f in &inputs.state.files {
                let Some(ext) = extension(&f.path) else {
                    continue;
                };
                *by_ext.entry(ext).or_default() += 1;
                if let Some((dir, _)) = f.path.rsplit_once('/') {
                    *by_dir_ext.entry((dir.to_string(), ext)).or_default() += 1;
                }
            }
            for (ext, n) in by_ext {
                if n >= 2 {
                    patterns.push((format!("**/*.{ext}"), ext.to_string(), None));
                }
            }
            for ((dir, ext), n) in by_dir_ext {
                if n >= 2 {
                    patterns.push((format!("{dir}/*.{ext}"), ext.to_string(), Some(dir)));
                }
            }
            let (pattern, ext, dir) = rng.pick(&patterns)?.clone();
            let where_ = match dir {
                Some(d) => format!("directly in {}", literal_path(&format!("{d}/"))),
                None => "in the workspace".into(),
            };
            let what = Fact {
                kind: "pattern".into(),
                value: json!({"noun": file_noun(&ext), "where": where_}),
                phrase: String::new(),
            };
            Some(simple(
                json!({"pattern": pattern}),
                vec![("pattern", what)],
                None,
            ))
        }
        Op::Ls => {
            let dirs: Vec<&String> = inputs
                .state
                .dirs
                .iter()
                .filter(|d| {
                    let prefix = format!("{d}/");
                    inputs
                        .state
                        .files
                        .iter()
                        .filter(|f| {
                            f.path
                                .strip_prefix(&prefix)
                                .is_some_and(|r| !r.contains('/'))
                        })
                        .count()
                        >= 2
                })
                .collect();
            let dir = rng.pick(&dirs)?.to_string();
            let fact = Fact {
                kind: "dir".into(),
                value: Value::String(dir.clone()),
                phrase: literal_path(&format!("{dir}/")),
            };
            Some(simple(json!({"path": dir}), vec![("path", fact)], None))
        }
        Op::Grep => {
            let (word, _) = rng.pick(&inputs.state.words)?.clone();
            let fact = Fact {
                kind: "word".into(),
                value: Value::String(word.clone()),
                phrase: format!("“{word}”"),
            };
            Some(simple(
                json!({"pattern": word}),
                vec![("pattern", fact)],
                None,
            ))
        }
        Op::Read => {
            let path = take_path(rng)?;
            Some(simple(
                json!({"path": path.value}),
                vec![("path", path)],
                None,
            ))
        }
        Op::Answer => {
            // A value the phrase already says is no question.
            let usable: Vec<&Fact> = of_kind(inputs.yields, "*")
                .into_iter()
                .filter(|f| {
                    answer_text(&f.value).is_some_and(|t| {
                        !t.is_empty()
                            && t.chars().count() <= MAX_ANSWER_CHARS
                            && !t.contains('\n')
                            && t.trim() == t
                            && !f.phrase.contains(&t)
                    })
                })
                .collect();
            let fact = (*rng.pick(&usable)?).clone();
            let content = format!("{}\n", answer_text(&fact.value)?);
            let answer = literal_path(inputs.answer);
            let goal = match (&fact.value, fact.kind.as_str()) {
                (_, "path") => format!(
                    "Find {} and put its path, relative to the workspace, in {answer}: alone on one line, nothing else. Change nothing else in the workspace.",
                    fact.phrase
                ),
                (Value::Number(n), _) if n.is_f64() => format!(
                    "Find {} and put it in {answer}: the number alone on one line, without trailing zeros (2.5, not 2.50; 3, not 3.0). Change nothing else in the workspace.",
                    fact.phrase
                ),
                _ => format!(
                    "Find {} and put it in {answer}: the value alone on one line, nothing else. Change nothing else in the workspace.",
                    fact.phrase
                ),
            };
            Some(simple(
                json!({"path": inputs.answer, "content": content}),
                vec![("value", fact)],
                Some(goal),
            ))
        }
        Op::Copy | Op::Move => {
            let path = take_path(rng)?;
            let from = path.value.as_str()?.to_string();
            let (folder, verb) = match node.op {
                Op::Copy => ("backup", "cp -p"),
                _ => ("archive", "mv"),
            };
            let to = format!("{folder}/{}", file_name(&from));
            if from.starts_with(&format!("{folder}/")) || inputs.state.exists(&to) {
                return None;
            }
            let command = format!(
                "mkdir -p {folder} && {verb} -- {} {}",
                quote_sh(&from),
                quote_sh(&to)
            );
            let goal = match node.op {
                Op::Copy => format!(
                    "Put a copy of {} in {} under the same file name, and leave the original where it is. Change nothing else in the workspace.",
                    path.phrase,
                    literal_path(&format!("{folder}/"))
                ),
                _ => format!(
                    "Move {} into {}, keeping its file name. Change nothing else in the workspace.",
                    path.phrase,
                    literal_path(&format!("{folder}/"))
                ),
            };
            Some(simple(
                json!({"command": command}),
                vec![("path", path)],
                Some(goal),
            ))
        }
        Op::Skill { call, .. } => {
            let skill = skill?;
            let call = &skill.synth.as_ref()?.calls[*call];
            plan_skill(skill, call, inputs, rng)
        }
    }
}

fn plan_skill(
    skill: &SkillSpec,
    call: &SkillCall,
    inputs: &Inputs,
    rng: &mut Rng,
) -> Option<Planned> {
    let schema = &skill.schema;
    let mut args = Map::new();
    let mut used = BTreeMap::new();
    let mut took = false;
    for (name, value) in &call.args {
        let mut value = value.clone();
        let mut phrase = None;
        if let Some(text) = value.as_str() {
            let mut filled = text.to_string();
            for kind in crate::spec::skill_uses::placeholders(text) {
                let fact = match rng.pick(&of_kind(inputs.yields, kind)) {
                    Some(f) => {
                        took = true;
                        (*f).clone()
                    }
                    None => (*rng.pick(&of_kind(inputs.carried, kind))?).clone(),
                };
                if text == format!("{{{kind}}}") {
                    phrase = Some(fact.phrase.clone());
                }
                filled = filled.replace(&format!("{{{kind}}}"), &text_of(&fact.value)?);
            }
            value = Value::String(filled);
        }
        let phrase = phrase.unwrap_or_else(|| text_of(&value).unwrap_or_default());
        let kind = arg_kind(call, schema, name);
        used.insert(
            name.clone(),
            Fact {
                kind,
                value: value.clone(),
                phrase,
            },
        );
        args.insert(name.clone(), value);
    }
    let required: BTreeSet<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let names: Vec<String> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    for name in names
        .iter()
        .filter(|n| !call.args.contains_key(*n) && takes_arg(call, &required, n))
    {
        let kind = arg_kind(call, schema, name);
        // A value from the chain must be one the call's own hints would pick (a CSV file
        // for a CSV skill).
        let fits = |facts: &'_ [Fact]| -> Vec<Fact> {
            of_kind(facts, &kind)
                .into_iter()
                .filter(|f| {
                    let hint = call
                        .files
                        .get(name.as_str())
                        .or(call.folders.get(name.as_str()));
                    match (hint, f.value.as_str()) {
                        (None, _) => true,
                        (Some(patterns), Some(v)) => patterns
                            .iter()
                            .any(|p| super::state::pattern_matches(p, v.trim_end_matches('/'))),
                        (Some(_), None) => false,
                    }
                })
                .cloned()
                .collect()
        };
        let fact = if let Some(f) = rng.pick(&fits(inputs.yields)) {
            took = true;
            Some(f.clone())
        } else if let Some(f) = rng.pick(&fits(inputs.carried)) {
            Some(f.clone())
        } else {
            from_workspace(call, schema, name, &kind, &used, inputs.state, rng)
        };
        match fact {
            Some(f) => {
                args.insert(name.clone(), f.value.clone());
                used.insert(name.clone(), f);
            }
            None if required.contains(name.as_str()) => return None,
            None => {}
        }
    }
    if !inputs.first && !took {
        return None;
    }
    let goal = call.does.as_ref().map(|does| {
        let said = render(does, &used, None);
        format!(
            "{}. Change nothing else in the workspace.",
            capitalize(&said)
        )
    });
    Some(Planned {
        args: json!({"name": skill.name, "args": Value::Object(args)}),
        used,
        goal,
    })
}

/// An argument's value from the workspace itself: a matching file or folder, a word of one
/// file (below an argument already filled, where one is), or a value of its `enum`.
fn from_workspace(
    call: &SkillCall,
    schema: &Value,
    name: &str,
    kind: &str,
    used: &BTreeMap<String, Fact>,
    state: &WorkspaceState,
    rng: &mut Rng,
) -> Option<Fact> {
    let literal = |value: &str| Fact {
        kind: kind.to_string(),
        value: Value::String(value.to_string()),
        phrase: literal_path(value),
    };
    if let Some(patterns) = call.files.get(name) {
        return rng
            .pick(&state.matching(patterns))
            .map(|f| literal(&f.path));
    }
    if let Some(patterns) = call.folders.get(name) {
        let dirs: Vec<&String> = state
            .dirs
            .iter()
            .filter(|d| patterns.iter().any(|p| super::state::pattern_matches(p, d)))
            .collect();
        return rng.pick(&dirs).map(|d| literal(d));
    }
    if call.words.iter().any(|w| w == name) {
        let below: Vec<String> = used
            .values()
            .filter_map(|f| f.value.as_str())
            .map(|p| format!("{}/", p.trim_end_matches('/')))
            .collect();
        let words: Vec<&(String, String)> = state
            .words
            .iter()
            .filter(|(_, file)| {
                below.is_empty() || below.iter().any(|b| file.starts_with(b.as_str()))
            })
            .collect();
        return rng.pick(&words).map(|(w, _)| Fact {
            kind: kind.to_string(),
            value: Value::String(w.clone()),
            phrase: format!("“{w}”"),
        });
    }
    let options = property_at(schema, name)
        .and_then(|s| s.get("enum"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    rng.pick(&options).map(|v| Fact {
        kind: kind.to_string(),
        phrase: text_of(v).unwrap_or_default(),
        value: v.clone(),
    })
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) => c.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// `phrase` with `{ARG}` replaced by the argument's phrase and `{item...}` by the item's value.
pub fn render(phrase: &str, used: &BTreeMap<String, Fact>, item: Option<&Value>) -> String {
    let mut out = phrase.to_string();
    for name in crate::spec::skill_uses::placeholders(phrase) {
        let with = match name.strip_prefix("item") {
            Some("") => item.and_then(text_of),
            Some(field) => item
                .and_then(|i| i.get(field.trim_start_matches('.')))
                .and_then(text_of),
            None => used.get(name).map(|f| f.phrase.clone()),
        };
        out = out.replace(&format!("{{{name}}}"), &with.unwrap_or_default());
    }
    out
}

/// What a call's result yields for the next step; an error names what went wrong.
pub fn outcome(
    node: &Node,
    skill: Option<&SkillSpec>,
    planned: &Planned,
    result: &Value,
    rng: &mut Rng,
) -> Result<Vec<Fact>, String> {
    if result["ok"] != true {
        return Err(format!("the call failed: {}", result["error"]["message"]));
    }
    if result["truncated"] == true {
        return Err("the result was truncated".into());
    }
    let path_fact = |value: &str, phrase: String| Fact {
        kind: "path".into(),
        value: Value::String(value.to_string()),
        phrase,
    };
    match &node.op {
        Op::Glob => {
            let mut found: Vec<String> = result["matches"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| m.as_str().map(str::to_string))
                .collect();
            found.sort();
            if found.len() < 2 {
                return Err(format!("{} file(s) matched", found.len()));
            }
            let what = &planned.used["pattern"].value;
            let (pick, order) = match rng.below(2) {
                0 => (found[0].clone(), "first"),
                _ => (found[found.len() - 1].clone(), "last"),
            };
            let phrase = format!(
                "the {} file {} whose path comes {order} in alphabetical order",
                what["noun"].as_str().unwrap_or("matching"),
                what["where"].as_str().unwrap_or_default()
            );
            Ok(vec![path_fact(&pick, phrase)])
        }
        Op::Ls => {
            let dir = planned.used["path"].value.as_str().unwrap_or_default();
            let files: Vec<(String, u64)> = result["entries"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|e| e["type"] == "file")
                .filter_map(|e| Some((e["name"].as_str()?.to_string(), e["size"].as_u64()?)))
                .collect();
            let largest = rng.below(2) == 0;
            let best = files.iter().map(|f| f.1).fold(None, |acc: Option<u64>, s| {
                Some(match acc {
                    None => s,
                    Some(a) if largest => a.max(s),
                    Some(a) => a.min(s),
                })
            });
            let chosen: Vec<&(String, u64)> = files.iter().filter(|f| Some(f.1) == best).collect();
            if files.len() < 2 || chosen.len() != 1 {
                return Err("no single largest or smallest file".into());
            }
            let phrase = format!(
                "the {} file directly in {}",
                if largest { "largest" } else { "smallest" },
                planned.used["path"].phrase
            );
            Ok(vec![path_fact(&format!("{dir}/{}", chosen[0].0), phrase)])
        }
        Op::Grep => {
            let word = &planned.used["pattern"].phrase;
            let matches: Vec<(String, String)> = result["matches"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| {
                    let (path, rest) = m.as_str()?.split_once(':')?;
                    let (_, text) = rest.split_once(':')?;
                    Some((path.to_string(), text.to_string()))
                })
                .collect();
            let Some(first) = matches.first() else {
                return Err("nothing matched".into());
            };
            if matches.iter().any(|m| m.0 != first.0) {
                return Err("more than one file matched".into());
            }
            let mut out = vec![path_fact(
                &first.0,
                format!("the file that mentions {word}"),
            )];
            if matches.len() == 1 {
                out.push(Fact {
                    kind: "line".into(),
                    value: Value::String(first.1.clone()),
                    phrase: format!("the line of the workspace that mentions {word}"),
                });
            }
            Ok(out)
        }
        Op::Read => {
            let content = result["content"].as_str().unwrap_or_default();
            let lines: Vec<&str> = content.lines().collect();
            let non_empty: Vec<&str> = lines
                .iter()
                .copied()
                .filter(|l| !l.trim().is_empty())
                .collect();
            let (Some(first), Some(last)) = (non_empty.first(), non_empty.last()) else {
                return Err("the file has no line".into());
            };
            let path = &planned.used["path"].phrase;
            let (value, phrase) = match rng.below(2) {
                0 if lines.first() == Some(first) => (*first, format!("the first line of {path}")),
                0 => (*first, format!("the first non-empty line of {path}")),
                _ if lines.last() == Some(last) => (*last, format!("the last line of {path}")),
                _ => (*last, format!("the last non-empty line of {path}")),
            };
            Ok(vec![Fact {
                kind: "line".into(),
                value: Value::String(value.to_string()),
                phrase,
            }])
        }
        Op::Answer | Op::Copy | Op::Move => {
            if node.tool == "exec" && result["exit_code"] != 0 {
                return Err(format!("the command failed: {}", result["stderr"]));
            }
            Ok(Vec::new())
        }
        Op::Skill { call, .. } => {
            let skill = skill.ok_or("the skill is not loaded")?;
            let output = &result["output"];
            if output.get("error").is_some() || !output.is_object() {
                return Err(format!("the skill refused: {}", output["error"]["message"]));
            }
            let call = &skill.synth.as_ref().ok_or("no [synth]")?.calls[*call];
            skill_facts(skill, call, planned, output, rng)
        }
    }
}

fn value_at<'v>(value: &'v Value, dotted: &str) -> Option<&'v Value> {
    dotted.split('.').try_fold(value, |v, part| v.get(part))
}

fn skill_facts(
    skill: &SkillSpec,
    call: &SkillCall,
    planned: &Planned,
    output: &Value,
    rng: &mut Rng,
) -> Result<Vec<Fact>, String> {
    let outputs = skill.outputs.clone().unwrap_or(Value::Null);
    let mut out = Vec::new();
    for (dotted, phrase) in &call.facts {
        let Some(value) = value_at(output, dotted).filter(|v| text_of(v).is_some()) else {
            continue;
        };
        let last = dotted.rsplit('.').next().unwrap_or(dotted);
        out.push(Fact {
            kind: kind_of(last, property_at(&outputs, dotted)),
            value: value.clone(),
            phrase: render(phrase, &planned.used, None),
        });
    }
    for (dotted, phrase) in &call.items {
        let Some(items) = value_at(output, dotted).and_then(Value::as_array) else {
            continue;
        };
        let said: Vec<String> = items
            .iter()
            .map(|i| render(phrase, &planned.used, Some(i)))
            .collect();
        let order: Vec<usize> = rng.shuffled(&(0..items.len()).collect::<Vec<_>>());
        let Some(&index) = order
            .iter()
            .find(|i| said.iter().filter(|s| **s == said[**i]).count() == 1)
        else {
            continue;
        };
        let item = &items[index];
        let item_schema = property_at(&outputs, dotted).and_then(|s| s.get("items"));
        match item.as_object() {
            Some(fields) => {
                for (field, value) in fields {
                    if text_of(value).is_none() {
                        continue;
                    }
                    let schema = item_schema
                        .and_then(|s| s.get("properties"))
                        .and_then(|p| p.get(field));
                    let kind = kind_of(field, schema);
                    let phrase = match (
                        kind.as_str(),
                        schema.and_then(|s| s.get("title")).and_then(Value::as_str),
                    ) {
                        ("path", _) => said[index].clone(),
                        (_, Some(title)) => format!("the {title} of {}", said[index]),
                        _ => format!("the {field} of {}", said[index]),
                    };
                    out.push(Fact {
                        kind,
                        value: value.clone(),
                        phrase,
                    });
                }
            }
            None => {
                let last = dotted.rsplit('.').next().unwrap_or(dotted);
                out.push(Fact {
                    kind: kind_of(last, item_schema),
                    value: item.clone(),
                    phrase: said[index].clone(),
                });
            }
        }
    }
    if out.is_empty() && call.does.is_none() {
        return Err("the result holds none of the declared facts".into());
    }
    Ok(out)
}
