//! Task synthesis (`envcraft synth`), as in EnvCraft's and EnvFactory's data engines: chains
//! of tool calls sampled along an environment's tool graph, run against its real state, turned
//! into tasks, and kept only when the audit passes them.
//!
//! For each environment:
//!
//! 1. [`graph`]: the tool graph, from the built-in tools and the skills' `[synth]` calls;
//!    [`state`]: what the initial workspace offers as arguments.
//! 2. [`chain`]: a chain of 2 to `max_chain` calls, weighted toward the tools the
//!    environment's own tasks use least, each step planned ([`steps`]) from what the step
//!    before yielded and called in a session of a staging copy of the environment before the
//!    next is chosen; the last step changes the workspace. A chain that fails is dropped,
//!    and so is one already made (same calls) or one that leaves nothing a manifest checks.
//! 3. The session's final state is recorded (`expected.json`: the changed files, the absent
//!    ones, no extra file); the calls are the reference solution; [`intent`] writes the
//!    prompt (templates, or a model's rewrite).
//! 4. Every candidate is audited (the caller's auditor: `envcraft audit` in child processes);
//!    the passing ones are written, in candidate order, as `tasks/synth-NNNN/` of `OUT/ENV`
//!    (a copy of the environment) or of the environment itself ([`write`]).
//!
//! A run is a function of the environments, the seed and the options: each candidate draws
//! from its own generator ([`rng::Rng::derive`]), so the same run writes the same bytes.
//! Sessions are started here, so synthesis runs in a single-threaded process.

pub mod chain;
pub mod graph;
pub mod intent;
pub mod report;
pub mod rng;
pub mod state;
pub mod steps;
pub mod write;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::audit::TaskAudit;
use crate::session::{Session, SessionOptions};
use crate::spec::{EnvSpec, SkillSpec, TaskSpec};
use crate::verify::judge::Endpoint;

pub use report::{EnvReport, Report};

/// The choices of a run.
pub struct SynthOptions {
    /// Candidates per environment.
    pub per_env: Vec<usize>,
    pub seed: u64,
    /// The longest chain (≥ 2).
    pub max_chain: usize,
    /// Where `OUT/ENV/` go; `None`: into each environment.
    pub out: Option<PathBuf>,
    /// The model that writes intents; `None`: the templates.
    pub endpoint: Option<Endpoint>,
    /// Ask the model for a sequence of turns.
    pub multi_turn: bool,
    pub session: SessionOptions,
}

/// Why a run could not go on (a candidate's failure is a dropped candidate, not this).
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    #[error(transparent)]
    Env(#[from] crate::spec::EnvError),
    #[error(transparent)]
    Skill(#[from] crate::spec::SkillError),
    #[error(transparent)]
    Task(#[from] crate::spec::TaskError),
    #[error("{0}")]
    Files(String),
    #[error(
        "{path} already holds environment {env} with a different env.toml; write to a new --out"
    )]
    OtherEnv { path: PathBuf, env: String },
}

fn files_error(path: &Path) -> impl Fn(std::io::Error) -> SynthError + '_ {
    move |e| SynthError::Files(format!("{}: {e}", path.display()))
}

/// Audits candidate task directories, one result per directory, in order.
pub type Auditor<'a> = dyn FnMut(&[PathBuf]) -> Vec<TaskAudit> + 'a;

/// How many calls of each tool (`skill:NAME` for a skill) the environment's tasks make.
fn usage(env: &EnvSpec) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for task in env.tasks().unwrap_or_default() {
        for step in task.solution_steps().unwrap_or_default() {
            let key = match (step.tool.as_str(), step.args["name"].as_str()) {
                ("skill", Some(name)) => format!("skill:{name}"),
                (tool, _) => tool.to_string(),
            };
            *out.entry(key).or_default() += 1;
        }
    }
    out
}

/// The environment's tool graph.
pub fn env_graph(env: &EnvSpec, skills_root: &Path) -> Result<graph::Graph, SynthError> {
    let skills = env
        .skills
        .iter()
        .map(|name| SkillSpec::find(name, skills_root))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(graph::Graph::build(&env.tools, skills))
}

/// Synthesize tasks for each environment directory of `envs`.
pub fn synthesize(
    envs: &[PathBuf],
    options: &SynthOptions,
    auditor: &mut Auditor,
) -> Result<Report, SynthError> {
    let mut report = Report::default();
    for (dir, count) in envs.iter().zip(&options.per_env) {
        report.envs.push(one_env(dir, *count, options, auditor)?);
    }
    Ok(report)
}

/// A candidate made and written to the staging copy.
struct Candidate {
    index: usize,
    dir: PathBuf,
    nodes: Vec<String>,
}

fn one_env(
    dir: &Path,
    count: usize,
    options: &SynthOptions,
    auditor: &mut Auditor,
) -> Result<EnvReport, SynthError> {
    let env = EnvSpec::load(dir)?;
    env.check_skills(&options.session.skills_root)?;
    let graph = env_graph(&env, &options.session.skills_root)?;
    let state = state::WorkspaceState::scan(&env.files).map_err(files_error(&env.files))?;
    let usage = usage(&env);
    let answer = ["answer.txt", "synth-answer.txt", "synth-answer-1.txt"]
        .into_iter()
        .find(|a| !state.exists(a))
        .unwrap_or("synth-answer-2.txt");
    let ground = chain::Ground {
        graph: &graph,
        state: &state,
        usage: &usage,
        answer,
        max_chain: options.max_chain.max(2),
    };
    let mut tools: Vec<String> = env.tools.clone();
    tools.extend(env.skills.iter().cloned());
    tools.extend(["apply_patch", "skill", "process"].map(String::from));

    let stage_root = tempfile::Builder::new()
        .prefix("synth-")
        .tempdir_in(&options.session.state_root)
        .map_err(files_error(&options.session.state_root))?;
    let stage = stage_root.path().join(&env.name);
    write::copy_env(&env.dir, &stage).map_err(SynthError::Files)?;
    let stage_env = EnvSpec::load(&stage)?;

    let mut report = EnvReport::new(&env.name, &graph);
    let mut chains_seen = BTreeSet::new();
    let mut tasks_seen = BTreeSet::new();
    let mut candidates = Vec::new();
    let started = Instant::now();
    for index in 0..count {
        report.candidates += 1;
        let mut rng = rng::Rng::derive(options.seed, &env.name, index as u64);
        let cand_dir = stage.join("tasks").join(format!("candidate-{index:05}"));
        std::fs::create_dir_all(&cand_dir).map_err(files_error(&cand_dir))?;
        write::write_whole(&cand_dir.join("task.toml"), write::PROVISIONAL_TASK)
            .map_err(files_error(&cand_dir))?;
        let made = make_candidate(
            &stage_env,
            &cand_dir,
            &ground,
            &mut rng,
            options,
            &tools,
            index,
            &mut chains_seen,
            &mut tasks_seen,
        );
        match made {
            Ok(nodes) => {
                report.executed += 1;
                candidates.push(Candidate {
                    index,
                    dir: cand_dir,
                    nodes,
                });
            }
            Err(reason) => {
                report.drop(&reason);
                std::fs::remove_dir_all(&cand_dir).map_err(files_error(&cand_dir))?;
            }
        }
    }
    report.execute_ms = started.elapsed().as_millis() as u64;

    let started = Instant::now();
    let dirs: Vec<PathBuf> = candidates.iter().map(|c| c.dir.clone()).collect();
    let audits = if dirs.is_empty() {
        Vec::new()
    } else {
        auditor(&dirs)
    };
    report.audited = dirs.len();
    report.audit_ms = started.elapsed().as_millis() as u64;

    let target = match &options.out {
        Some(out) => {
            let target = out.join(&env.name);
            if target.exists() {
                let ours = std::fs::read(env.dir.join("env.toml")).ok();
                let theirs = std::fs::read(target.join("env.toml")).ok();
                if ours != theirs {
                    return Err(SynthError::OtherEnv {
                        path: target,
                        env: env.name.clone(),
                    });
                }
                std::fs::create_dir_all(target.join("tasks")).map_err(files_error(&target))?;
            } else {
                write::copy_env(&env.dir, &target).map_err(SynthError::Files)?;
            }
            target
        }
        None => env.dir.clone(),
    };
    let tasks_dir = target.join("tasks");
    std::fs::create_dir_all(&tasks_dir).map_err(files_error(&tasks_dir))?;
    let mut number = write::next_number(&tasks_dir);
    for (candidate, audit) in candidates.iter().zip(&audits) {
        if !audit.passed {
            let failed: Vec<&str> = audit
                .checks
                .iter()
                .filter(|c| !c.passed)
                .map(|c| c.name)
                .collect();
            let detail = audit
                .checks
                .iter()
                .find(|c| !c.passed)
                .map(|c| c.detail.as_str())
                .unwrap_or("no check ran");
            report.drop(&format!("audit: {}: {detail}", failed.join(", ")));
            continue;
        }
        let dest = write::kept_dir(&tasks_dir, number);
        number += 1;
        copy_task(&candidate.dir, &dest)?;
        report.keep(&candidate.nodes, candidate.index, &dest);
    }
    Ok(report)
}

/// Copy a candidate's three files into `dest` (a new directory), each written whole.
fn copy_task(from: &Path, dest: &Path) -> Result<(), SynthError> {
    let partial = dest.with_extension("partial");
    std::fs::create_dir_all(&partial).map_err(files_error(&partial))?;
    for name in ["task.toml", "solution.jsonl", "expected.json"] {
        std::fs::copy(from.join(name), partial.join(name))
            .map_err(files_error(&from.join(name)))?;
    }
    std::fs::rename(&partial, dest).map_err(files_error(dest))
}

/// Sample, run and write one candidate into `dir`; on failure, the reason it was dropped.
#[allow(clippy::too_many_arguments)]
fn make_candidate(
    env: &EnvSpec,
    dir: &Path,
    ground: &chain::Ground,
    rng: &mut rng::Rng,
    options: &SynthOptions,
    tools: &[String],
    index: usize,
    chains_seen: &mut BTreeSet<String>,
    tasks_seen: &mut BTreeSet<String>,
) -> Result<Vec<String>, String> {
    let task = TaskSpec::load_in_env(env.clone(), dir).map_err(|e| crate::error::chain(&e))?;
    let mut session = Session::create(&task, &options.session)
        .map_err(|e| format!("session: {}", crate::error::chain(&e)))?;
    let ran = chain::run(ground, &mut session, rng);
    let expected = match &ran {
        Ok(_) => session.record().map_err(|e| crate::error::chain(&e)),
        Err(_) => Err(String::new()),
    };
    session.close();
    let chain = ran.map_err(|d| d.reason())?;
    let expected = expected?;
    let solution = chain::solution_lines(&chain);
    if !chains_seen.insert(solution.clone()) {
        return Err("repeated chain".into());
    }
    if expected.files.is_empty() {
        return Err("no file content for a manifest to check".into());
    }
    // What the chain did not touch must stay as it was, and the reward is all or nothing
    // (otherwise a workspace left alone would score most of the checks).
    let mut expected = expected;
    let touched: Vec<String> = expected
        .files
        .keys()
        .cloned()
        .chain(expected.absent.iter().cloned())
        .collect();
    for glob in ground.state.untouched(&touched) {
        let glob = crate::verify::Glob::new(&glob).map_err(|e| crate::error::chain(&e))?;
        expected.unchanged.push(glob);
    }
    expected.all_or_nothing = true;
    let intent = intent::write(
        &chain,
        &env.description,
        tools,
        options.endpoint.as_ref(),
        options.multi_turn,
    )
    .map_err(|e| format!("intent: {e}"))?;
    let expected_json = expected.to_json() + "\n";
    if !tasks_seen.insert(format!("{:?}\n{expected_json}", intent.turns)) {
        return Err("duplicate task".into());
    }
    let files = [
        ("solution.jsonl", solution),
        ("expected.json", expected_json),
        (
            "task.toml",
            write::task_toml(&env.name, options.seed, index, &chain, &intent),
        ),
    ];
    for (name, text) in files {
        write::write_whole(&dir.join(name), &text).map_err(|e| format!("{name}: {e}"))?;
    }
    Ok(chain.nodes)
}
