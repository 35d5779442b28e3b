//! A chain sampled along the tool graph and run in a session: each step planned from what the
//! step before yielded, called, and its result read before the next step is chosen, so that
//! every argument is one the environment's real state gave.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::graph::{Graph, Node};
use super::rng::Rng;
use super::state::WorkspaceState;
use super::steps::{self, Fact, Inputs};
use crate::session::Session;

/// A chain that ran to its end.
#[derive(Debug, Clone)]
pub struct Chain {
    /// The nodes, in order.
    pub nodes: Vec<String>,
    /// The calls, as `solution.jsonl` lines hold them.
    pub calls: Vec<(String, Value)>,
    /// The goal, from the templates.
    pub goal: String,
    /// What each step found, for a model asked to write the intent.
    pub found: Vec<String>,
}

/// Why a chain gave no candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dropped {
    /// No node could take the step before's values (or none could start).
    NoPath(String),
    /// A call failed or its result gave nothing to go on.
    Failed { node: String, reason: String },
}

impl Dropped {
    pub fn reason(&self) -> String {
        match self {
            Dropped::NoPath(why) => format!("no path: {why}"),
            Dropped::Failed { node, reason } => format!("{node}: {reason}"),
        }
    }
}

/// What a chain is sampled against.
pub struct Ground<'a> {
    pub graph: &'a Graph,
    pub state: &'a WorkspaceState,
    /// How many calls of each node's tool the environment's tasks already make.
    pub usage: &'a BTreeMap<String, usize>,
    pub answer: &'a str,
    pub max_chain: usize,
}

/// The usage key of a node: its skill for a skill node, else its tool.
pub fn usage_key(node: &Node) -> String {
    match &node.op {
        super::graph::Op::Skill { skill, .. } => format!("skill:{skill}"),
        _ => node.tool.to_string(),
    }
}

fn summary(value: &Value) -> String {
    let mut text = value.to_string();
    if text.len() > 200 {
        let mut end = 200;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// Sample one chain and run it in `session`.
pub fn run(ground: &Ground, session: &mut Session, rng: &mut Rng) -> Result<Chain, Dropped> {
    let length = 2 + rng.below(ground.max_chain.saturating_sub(1).max(1));
    let mut chain = Chain {
        nodes: Vec::new(),
        calls: Vec::new(),
        goal: String::new(),
        found: Vec::new(),
    };
    let mut yields: Vec<Fact> = Vec::new();
    let mut carried: Vec<Fact> = Vec::new();
    let mut previous: Option<&Node> = None;
    for position in 0..length {
        let must_end = position + 1 == length;
        let candidates: Vec<&Node> = ground
            .graph
            .nodes
            .iter()
            .filter(|n| match previous {
                None => n.starts && !n.changes,
                // A node never follows itself: a chain goes somewhere.
                Some(p) => Graph::follows(p, n) && p.id != n.id,
            })
            .collect();
        // Nodes that keep the chain going first (unless it must end), then the ones that
        // end it; within each, drawn by weight without putting back.
        let groups: Vec<Vec<&Node>> = match (previous.is_none(), must_end) {
            (true, _) => vec![candidates.clone()],
            (false, true) => vec![candidates.iter().copied().filter(|n| n.changes).collect()],
            (false, false) => vec![
                candidates.iter().copied().filter(|n| !n.changes).collect(),
                candidates.iter().copied().filter(|n| n.changes).collect(),
            ],
        };
        let inputs = Inputs {
            yields: &yields,
            carried: &carried,
            state: ground.state,
            answer: ground.answer,
            first: previous.is_none(),
        };
        let mut chosen = None;
        'groups: for group in groups {
            let mut weights: Vec<f64> = group
                .iter()
                .map(|n| 1.0 / (1.0 + *ground.usage.get(&usage_key(n)).unwrap_or(&0) as f64))
                .collect();
            while let Some(i) = rng.weighted(&weights) {
                weights[i] = 0.0;
                let node = group[i];
                let skill = skill_of(ground.graph, node);
                if let Some(planned) = steps::plan(node, skill, &inputs, rng) {
                    chosen = Some((node, planned));
                    break 'groups;
                }
            }
        }
        let Some((node, planned)) = chosen else {
            return Err(Dropped::NoPath(match previous {
                None => "no node can start from this workspace".into(),
                Some(p) => format!("nothing can follow {} here", p.id),
            }));
        };
        let result = session.call(node.tool, &planned.args);
        let facts = steps::outcome(node, skill_of(ground.graph, node), &planned, &result, rng)
            .map_err(|reason| Dropped::Failed {
                node: node.id.clone(),
                reason,
            })?;
        chain.nodes.push(node.id.clone());
        chain
            .calls
            .push((node.tool.to_string(), planned.args.clone()));
        let shown = result.get("output").unwrap_or(&result);
        chain.found.push(format!(
            "{}: {} -> {}",
            node.id,
            summary(&planned.args),
            summary(shown)
        ));
        if let Some(goal) = planned.goal {
            chain.goal = goal;
            return Ok(chain);
        }
        if facts.is_empty() {
            return Err(Dropped::Failed {
                node: node.id.clone(),
                reason: "its result yields nothing to go on".into(),
            });
        }
        carried = planned.used.into_values().collect();
        yields = facts;
        previous = Some(node);
    }
    Err(Dropped::NoPath(
        "the chain did not end with a change".into(),
    ))
}

fn skill_of<'g>(graph: &'g Graph, node: &Node) -> Option<&'g crate::spec::SkillSpec> {
    match &node.op {
        super::graph::Op::Skill { skill, .. } => graph.skills.get(skill),
        _ => None,
    }
}

/// A chain's calls as the lines of `solution.jsonl`.
pub fn solution_lines(chain: &Chain) -> String {
    chain
        .calls
        .iter()
        .map(|(tool, args)| json!({"tool": tool, "args": args}).to_string() + "\n")
        .collect()
}
