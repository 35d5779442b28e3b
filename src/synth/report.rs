//! What a synthesis run made: per environment, EnvCraft's Table 2 (candidates, executed,
//! audited, kept, pass rate), why candidates were dropped, and the chain-length and
//! tool-coverage histograms of the kept tasks.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use super::graph::Graph;

/// One environment's run.
#[derive(Debug, Clone, Serialize)]
pub struct EnvReport {
    pub env: String,
    /// Chains sampled.
    pub candidates: usize,
    /// Chains that ran to their end and made a task.
    pub executed: usize,
    /// Tasks sent to the audit.
    pub audited: usize,
    /// Tasks that passed it and were written.
    pub kept: usize,
    /// Why the others were dropped: the reason (up to its first `:`) and how many.
    pub dropped: BTreeMap<String, usize>,
    /// The first full reason under each head of `dropped`.
    pub drop_examples: BTreeMap<String, String>,
    /// Kept tasks by the number of calls of their reference solution.
    pub chain_lengths: BTreeMap<usize, usize>,
    /// Kept tasks by each node of the graph their solution goes through (0: never).
    pub coverage: BTreeMap<String, usize>,
    /// The kept tasks' directories and the candidate each came from.
    pub tasks: Vec<(String, usize)>,
    pub execute_ms: u64,
    pub audit_ms: u64,
}

/// The whole run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub envs: Vec<EnvReport>,
}

impl EnvReport {
    pub fn new(env: &str, graph: &Graph) -> EnvReport {
        EnvReport {
            env: env.to_string(),
            candidates: 0,
            executed: 0,
            audited: 0,
            kept: 0,
            dropped: BTreeMap::new(),
            drop_examples: BTreeMap::new(),
            chain_lengths: BTreeMap::new(),
            coverage: graph.nodes.iter().map(|n| (n.id.clone(), 0)).collect(),
            tasks: Vec::new(),
            execute_ms: 0,
            audit_ms: 0,
        }
    }

    /// Count a dropped candidate under its reason's head.
    pub fn drop(&mut self, reason: &str) {
        let head = match reason.split_once(": ") {
            Some(("audit", rest)) => format!("audit: {}", rest.split(": ").next().unwrap_or(rest)),
            Some((head, rest)) => match rest.split_once(':') {
                Some((what, _)) if head.contains(':') => format!("{head}: {what}"),
                _ => head.to_string(),
            },
            None => reason.to_string(),
        };
        self.drop_examples
            .entry(head.clone())
            .or_insert_with(|| reason.to_string());
        *self.dropped.entry(head).or_default() += 1;
    }

    pub fn keep(&mut self, nodes: &[String], index: usize, dir: &Path) {
        self.kept += 1;
        *self.chain_lengths.entry(nodes.len()).or_default() += 1;
        let mut seen: Vec<&String> = nodes.iter().collect();
        seen.dedup();
        for node in seen {
            *self.coverage.entry(node.clone()).or_default() += 1;
        }
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        self.tasks.push((name, index));
    }

    pub fn pass_rate(&self) -> f64 {
        if self.candidates == 0 {
            0.0
        } else {
            self.kept as f64 / self.candidates as f64
        }
    }
}

fn bar(n: usize, most: usize) -> String {
    let width = if most == 0 {
        0
    } else {
        (n * 30).div_ceil(most)
    };
    "#".repeat(width)
}

impl Report {
    pub fn kept(&self) -> usize {
        self.envs.iter().map(|e| e.kept).sum()
    }

    /// The table and the histograms, as text.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<24} {:>10} {:>9} {:>8} {:>6} {:>10}",
            "environment", "candidates", "executed", "audited", "kept", "pass rate"
        );
        let mut total = (0, 0, 0, 0);
        let mut lengths: BTreeMap<usize, usize> = BTreeMap::new();
        let mut coverage: BTreeMap<String, usize> = BTreeMap::new();
        let mut dropped: BTreeMap<String, usize> = BTreeMap::new();
        for e in &self.envs {
            let _ = writeln!(
                out,
                "{:<24} {:>10} {:>9} {:>8} {:>6} {:>9.1}%",
                e.env,
                e.candidates,
                e.executed,
                e.audited,
                e.kept,
                e.pass_rate() * 100.0
            );
            total.0 += e.candidates;
            total.1 += e.executed;
            total.2 += e.audited;
            total.3 += e.kept;
            for (k, v) in &e.chain_lengths {
                *lengths.entry(*k).or_default() += v;
            }
            for (k, v) in &e.coverage {
                *coverage.entry(k.clone()).or_default() += v;
            }
            for (k, v) in &e.dropped {
                *dropped.entry(k.clone()).or_default() += v;
            }
        }
        let rate = if total.0 == 0 {
            0.0
        } else {
            total.3 as f64 / total.0 as f64
        };
        let _ = writeln!(
            out,
            "{:<24} {:>10} {:>9} {:>8} {:>6} {:>9.1}%",
            "total",
            total.0,
            total.1,
            total.2,
            total.3,
            rate * 100.0
        );
        let _ = writeln!(out, "\nchain length (kept tasks)");
        let most = lengths.values().copied().max().unwrap_or(0);
        for (k, v) in &lengths {
            let _ = writeln!(out, "  {k:>2} calls {v:>6} {}", bar(*v, most));
        }
        let _ = writeln!(out, "\ntool coverage (kept tasks through each node)");
        let most = coverage.values().copied().max().unwrap_or(0);
        for (k, v) in &coverage {
            let _ = writeln!(out, "  {k:<28} {v:>6} {}", bar(*v, most));
        }
        if !dropped.is_empty() {
            let _ = writeln!(out, "\ndropped");
            let mut by_count: Vec<(&String, &usize)> = dropped.iter().collect();
            by_count.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            for (k, v) in by_count {
                let _ = writeln!(out, "  {v:>6}  {k}");
            }
        }
        out
    }
}
