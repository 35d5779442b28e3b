//! The tool graph of an environment: its built-in tools and its skills' declared calls as
//! nodes, an edge A→B where a kind of value A yields is one B takes.
//!
//! Kinds are names: a schema property's `format` where it has one (`"path"`, `"email"`),
//! else the property's name (`column`). The built-in nodes:
//!
//! | node | takes | yields | changes the workspace |
//! | --- | --- | --- | --- |
//! | `glob` | (a pattern from the workspace) | `path` | no |
//! | `ls` | (a folder from the workspace) | `path` | no |
//! | `grep` | (a word from the workspace) | `path`, `line` | no |
//! | `read` | `path` | `line` | no |
//! | `answer` | any value | | writes it to the answer file |
//! | `copy` | `path` | | copies the file into `backup/` |
//! | `move` | `path` | | moves the file into `archive/` |
//!
//! A skill call yields the kinds of its `facts` and of its `items`' fields, and takes the kinds
//! of its arguments not fixed by the call; a call with `does` changes the workspace and ends a
//! chain.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

use crate::spec::SkillSpec;
pub use crate::spec::skill_uses::property_at;
use crate::spec::skill_uses::{SkillCall, placeholders};

/// What a node does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Glob,
    Ls,
    Grep,
    Read,
    Answer,
    Copy,
    Move,
    /// The `call`-th `[[synth.calls]]` of the skill.
    Skill {
        skill: String,
        call: usize,
    },
}

/// One node of the graph.
#[derive(Debug, Clone, Serialize)]
pub struct Node {
    /// `glob`, `read`, ..., `skill:NAME` (`skill:NAME#K` for a skill's K-th call, K ≥ 2).
    pub id: String,
    /// The tool a call of this node is made with.
    pub tool: &'static str,
    #[serde(skip)]
    pub op: Op,
    /// The kinds it can take from the step before (`*`: any).
    pub takes: BTreeSet<String>,
    pub yields: BTreeSet<String>,
    /// It changes the workspace: it ends a chain.
    pub changes: bool,
    /// It can start a chain: every argument it needs comes from the workspace.
    pub starts: bool,
}

/// The graph of one environment.
#[derive(Debug, Clone, Serialize)]
pub struct Graph {
    pub nodes: Vec<Node>,
    /// `(from, to)` node ids.
    pub edges: Vec<(String, String)>,
    #[serde(skip)]
    pub skills: BTreeMap<String, SkillSpec>,
}

/// The kind of a schema property.
pub fn kind_of(name: &str, schema: Option<&Value>) -> String {
    schema
        .and_then(|s| s.get("format"))
        .and_then(Value::as_str)
        .unwrap_or(name)
        .to_string()
}

/// The kind of an argument of a call: its `kinds` entry, else its schema's.
pub fn arg_kind(call: &SkillCall, schema: &Value, name: &str) -> String {
    call.kinds
        .get(name)
        .cloned()
        .unwrap_or_else(|| kind_of(name, property_at(schema, name)))
}

fn builtin(id: &str, tool: &'static str, op: Op, takes: &[&str], yields: &[&str]) -> Node {
    let changes = matches!(op, Op::Answer | Op::Copy | Op::Move);
    Node {
        id: id.into(),
        tool,
        starts: takes.is_empty(),
        op,
        takes: takes.iter().map(|s| s.to_string()).collect(),
        yields: yields.iter().map(|s| s.to_string()).collect(),
        changes,
    }
}

/// Whether a call fills argument `name` (not fixed by the call): a required one, or an
/// optional one the call names (in `kinds`, `files`, `folders` or `words`).
pub fn takes_arg(call: &SkillCall, required: &BTreeSet<&str>, name: &str) -> bool {
    required.contains(name)
        || call.kinds.contains_key(name)
        || call.files.contains_key(name)
        || call.folders.contains_key(name)
        || call.words.iter().any(|w| w == name)
}

fn skill_node(skill: &SkillSpec, index: usize, call: &SkillCall) -> Node {
    let schema = &skill.schema;
    let required: BTreeSet<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let props: Vec<&String> = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().collect())
        .unwrap_or_default();
    let mut takes = BTreeSet::new();
    let mut starts = true;
    for name in props {
        if call.args.contains_key(name) || !takes_arg(call, &required, name) {
            continue;
        }
        let from_workspace = call.files.contains_key(name)
            || call.folders.contains_key(name)
            || call.words.contains(name)
            || property_at(schema, name).is_some_and(|s| s.get("enum").is_some());
        if !from_workspace && required.contains(name.as_str()) {
            starts = false;
        }
        takes.insert(arg_kind(call, schema, name));
    }
    for value in call.args.values() {
        if let Some(text) = value.as_str() {
            for kind in placeholders(text) {
                takes.insert(kind.to_string());
                starts = false;
            }
        }
    }
    let mut yields = BTreeSet::new();
    let outputs = skill.outputs.clone().unwrap_or(Value::Null);
    for fact in call.facts.keys() {
        let last = fact.rsplit('.').next().unwrap_or(fact);
        yields.insert(kind_of(last, property_at(&outputs, fact)));
    }
    for list in call.items.keys() {
        let item = property_at(&outputs, list).and_then(|s| s.get("items"));
        match item
            .and_then(|i| i.get("properties"))
            .and_then(Value::as_object)
        {
            Some(fields) => {
                for (field, schema) in fields {
                    yields.insert(kind_of(field, Some(schema)));
                }
            }
            None => {
                let last = list.rsplit('.').next().unwrap_or(list);
                yields.insert(kind_of(last, item));
            }
        }
    }
    let id = match index {
        0 => format!("skill:{}", skill.name),
        k => format!("skill:{}#{}", skill.name, k + 1),
    };
    Node {
        id,
        tool: "skill",
        op: Op::Skill {
            skill: skill.name.clone(),
            call: index,
        },
        takes,
        yields,
        changes: call.does.is_some(),
        starts,
    }
}

impl Graph {
    /// The graph of an environment offering `tools`, with its `skills` (those that declare no
    /// `[synth]` give no node).
    pub fn build(tools: &[String], skills: Vec<SkillSpec>) -> Graph {
        let offers = |t: &str| tools.iter().any(|x| x == t);
        let mut nodes = Vec::new();
        for (id, tool, op, takes, yields) in [
            ("glob", "glob", Op::Glob, &[][..], &["path"][..]),
            ("ls", "ls", Op::Ls, &[], &["path"]),
            ("grep", "grep", Op::Grep, &[], &["path", "line"]),
            ("read", "read", Op::Read, &["path"], &["line"]),
            ("answer", "write", Op::Answer, &["*"], &[]),
            ("copy", "exec", Op::Copy, &["path"], &[]),
            ("move", "exec", Op::Move, &["path"], &[]),
        ] {
            if offers(tool) {
                nodes.push(builtin(id, tool, op, takes, yields));
            }
        }
        let mut by_name = BTreeMap::new();
        if offers("skill") {
            for skill in skills {
                if let Some(uses) = &skill.synth {
                    for (i, call) in uses.calls.iter().enumerate() {
                        nodes.push(skill_node(&skill, i, call));
                    }
                }
                by_name.insert(skill.name.clone(), skill);
            }
        }
        let mut edges = Vec::new();
        for a in &nodes {
            for b in &nodes {
                if Graph::follows(a, b) {
                    edges.push((a.id.clone(), b.id.clone()));
                }
            }
        }
        Graph {
            nodes,
            edges,
            skills: by_name,
        }
    }

    /// Whether `b` can take what `a` yields.
    pub fn follows(a: &Node, b: &Node) -> bool {
        !a.changes
            && !a.yields.is_empty()
            && (b.takes.contains("*") || a.yields.intersection(&b.takes).next().is_some())
    }

    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The node sequences of length 2..=`max` the graph allows: a start node, nodes that do
    /// not change the workspace, one that does at the end.
    pub fn chains(&self, max: usize) -> BTreeSet<Vec<String>> {
        let mut out = BTreeSet::new();
        let mut stack: Vec<Vec<&Node>> = self
            .nodes
            .iter()
            .filter(|n| n.starts && !n.changes)
            .map(|n| vec![n])
            .collect();
        while let Some(path) = stack.pop() {
            let last = path[path.len() - 1];
            for next in self
                .nodes
                .iter()
                .filter(|n| Graph::follows(last, n) && n.id != last.id)
            {
                let mut longer = path.clone();
                longer.push(next);
                if next.changes {
                    out.insert(longer.iter().map(|n| n.id.clone()).collect());
                } else if longer.len() < max {
                    stack.push(longer);
                }
            }
        }
        out
    }
}
