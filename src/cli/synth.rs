//! `envcraft synth ENV|DIR... [--count N] [--seed S] [--max-chain K] [--llm-url URL --model M]
//! [--out DIR] [--jobs N] [--graph] [--json]`: synthesize tasks from environments' tool
//! graphs, keep the ones the audit passes, and print EnvCraft's Table 2 for the run.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;

use super::judge_args::JudgeArgs;
use super::task_args::{SkillsDir, StateDir, WorkspacesDir};
use crate::cli::error::Error;
use crate::synth::{self, SynthOptions};

#[derive(Debug, Args)]
pub struct SynthArgs {
    /// Environment directories, directories of environments, or environment names under
    /// --workspaces.
    #[arg(value_name = "ENV", required = true)]
    pub envs: Vec<String>,
    /// Candidates in all, split evenly across the environments.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub count: u32,
    /// The run's seed: the same environments, seed and flags give the same tasks, byte for byte
    /// (without a model).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The longest chain of calls.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(2..=8))]
    pub max_chain: u16,
    /// Where the environments with their new tasks go (`DIR/ENV/tasks/synth-NNNN/`);
    /// default: into each environment's own tasks/.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Candidates audited at once, in parallel processes.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: u16,
    /// An OpenAI-compatible endpoint (`http://HOST:PORT/v1`) that writes each intent; the
    /// audit then also runs its rubric inspection with it.
    #[arg(
        long,
        value_name = "URL",
        env = "ENVCRAFT_SYNTH_URL",
        requires = "model"
    )]
    pub llm_url: Option<String>,
    /// The model asked at --llm-url.
    #[arg(
        long,
        value_name = "NAME",
        env = "ENVCRAFT_SYNTH_MODEL",
        requires = "llm_url"
    )]
    pub model: Option<String>,
    /// A file holding the endpoint's bearer token.
    #[arg(long, value_name = "FILE")]
    pub llm_key_file: Option<PathBuf>,
    /// The time limit of one request to the model, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub llm_timeout: u64,
    /// Requests per intent before the candidate is dropped (errors, unusable answers).
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=10))]
    pub llm_attempts: u32,
    /// Ask the model for a sequence of two or three turns instead of one prompt.
    #[arg(long, requires = "llm_url")]
    pub multi_turn: bool,
    /// Print each environment's tool graph (nodes, edges, the chains it allows) as JSON and
    /// make nothing.
    #[arg(long)]
    pub graph: bool,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub workspaces: WorkspacesDir,
    #[command(flatten)]
    pub skills: SkillsDir,
    #[command(flatten)]
    pub state_dir: StateDir,
}

/// The environment directories `args` name, in order.
fn env_dirs(args: &SynthArgs) -> Result<Vec<PathBuf>, Error> {
    let mut out = Vec::new();
    for given in &args.envs {
        let path = Path::new(given);
        let path = if path.exists() {
            path.to_path_buf()
        } else {
            args.workspaces.path.join(given)
        };
        if path.join("env.toml").is_file() {
            out.push(path);
            continue;
        }
        let mut found: Vec<PathBuf> = std::fs::read_dir(&path)
            .map_err(|_| Error::NoEnvs(given.clone()))?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("env.toml").is_file())
            .collect();
        found.sort();
        if found.is_empty() {
            return Err(Error::NoEnvs(given.clone()));
        }
        out.extend(found);
    }
    Ok(out)
}

fn judge_args(args: &SynthArgs) -> JudgeArgs {
    JudgeArgs {
        judge_url: args.llm_url.clone(),
        judge_model: args.model.clone(),
        judge_key_file: args.llm_key_file.clone(),
        judge_timeout: args.llm_timeout,
        judge_attempts: args.llm_attempts,
        judge_seed: args.seed,
        judge_no_cache: false,
    }
}

pub fn run(args: SynthArgs) -> Result<i32, Error> {
    let envs = env_dirs(&args)?;
    let mut out = std::io::stdout().lock();
    if args.graph {
        let mut graphs = Vec::new();
        for dir in &envs {
            let env = crate::spec::EnvSpec::load(dir).map_err(synth::SynthError::from)?;
            let graph = synth::env_graph(&env, &args.skills.path).map_err(Error::from)?;
            let chains = graph.chains(usize::from(args.max_chain));
            graphs.push(serde_json::json!({
                "env": env.name, "nodes": graph.nodes, "edges": graph.edges, "chains": chains,
            }));
        }
        serde_json::to_writer_pretty(&mut out, &graphs).map_err(|e| Error::Output(e.into()))?;
        writeln!(out).map_err(Error::Output)?;
        return Ok(0);
    }
    let state_root = crate::workspace::state_root::open(args.state_dir.path.clone())?;
    let judge = judge_args(&args);
    let endpoint = judge.endpoint(&state_root)?;
    let n = envs.len().max(1);
    let total = args.count as usize;
    let per_env: Vec<usize> = (0..envs.len())
        .map(|i| total / n + usize::from(i < total % n))
        .collect();
    let options = SynthOptions {
        per_env,
        seed: args.seed,
        max_chain: usize::from(args.max_chain),
        out: args.out.clone(),
        endpoint,
        multi_turn: args.multi_turn,
        session: crate::session::SessionOptions::new(state_root, args.skills.path.clone()),
    };
    let child = super::audit::child_args(&args.skills, &args.state_dir, &judge);
    let jobs = usize::from(args.jobs);
    let quiet = args.json;
    let mut auditor = |tasks: &[PathBuf]| {
        super::audit::in_children(tasks, jobs, &child, |a| {
            if !quiet {
                eprintln!("{} {}", if a.passed { "kept  " } else { "FAILED" }, a.task);
            }
        })
    };
    let report = synth::synthesize(&envs, &options, &mut auditor).map_err(Error::from)?;
    if args.json {
        serde_json::to_writer(&mut out, &report).map_err(|e| Error::Output(e.into()))?;
        writeln!(out).map_err(Error::Output)?;
    } else {
        write!(out, "{}", report.table()).map_err(Error::Output)?;
    }
    Ok(if report.kept() > 0 { 0 } else { 1 })
}
