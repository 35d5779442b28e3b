//! `envcraft serve`: the HTTP API for rollout workers (see [`crate::server`]).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::task_args::StateDir;
use super::task_args::{SkillsDir, WorkspacesDir};
use crate::cli::error::Error;
use crate::server::{self, ServeConfig};
use crate::session::SessionOptions;

/// What a verify's judge leaves of the request's deadline for the rest of the answer.
const JUDGE_ANSWER_SECS: u64 = 30;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (loopback by default; port 0 picks a free one).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    pub listen: String,
    #[command(flatten)]
    pub judge: super::judge_args::JudgeArgs,
    #[command(flatten)]
    pub workspaces: WorkspacesDir,
    #[command(flatten)]
    pub skills: SkillsDir,
    #[command(flatten)]
    pub state_dir: StateDir,
    /// Most sessions open at once (more get 429).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_sessions: usize,
    /// A file holding the bearer token every /v1 request must carry.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Close sessions no request used for this long.
    #[arg(long, value_name = "SECS", default_value_t = 1800)]
    pub idle_timeout: u64,
    /// Every request's deadline (past it: 504).
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    pub request_timeout: u64,
    /// Largest request body (past it: 413).
    #[arg(long, value_name = "BYTES", default_value_t = 16 * 1024 * 1024)]
    pub max_body: usize,
    /// Most connections open at once; past it, new ones wait in the listen backlog until one
    /// closes.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    pub max_connections: usize,
    /// Close a connection idle (no byte either way) for this long; must exceed
    /// --request-timeout, so that no request in flight is cut.
    #[arg(long, value_name = "SECS", default_value_t = 330)]
    pub connection_idle_timeout: u64,
    /// Most connections open at once from one address (default: a quarter of
    /// --max-connections, at least 16 or all of them); past it, a new one is answered 503
    /// too_many_connections and closed.
    #[arg(long, value_name = "N")]
    pub max_connections_per_peer: Option<usize>,
    /// How long a request head may take to arrive, from its first byte (a connection's first
    /// one: from its accept); past it the connection is closed.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub header_timeout: u64,
    /// How long a request body may take to arrive (past it: 408; never longer than
    /// --request-timeout).
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub body_timeout: u64,
    /// How long a request waits for a session another request is using (past it: 503
    /// lock_timeout).
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    pub lock_wait_ms: u64,
    /// Sandboxes made ahead of need: this many inits of each kind a task asked for (their
    /// namespaces made, nothing given to them yet), and this many whole sandboxes of each plan
    /// asked for more than once (at most 8 plans); creates take one instead of waiting. 0 (the
    /// default): none.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub warm_sandboxes: usize,
    /// OpenEnv's server mode: `simulation` serves /reset, /step and /state beside /ws and
    /// /mcp; `production` does not.
    #[arg(long, value_name = "MODE", default_value = "simulation", value_parser = ["simulation", "production"])]
    pub openenv_mode: String,
    /// The task (ENV/ID) of an OpenEnv reset that names none.
    #[arg(long, value_name = "ENV/ID")]
    pub openenv_task: Option<String>,
    /// A name requests may give as their Host or Origin besides loopback names and the listen
    /// address (repeatable; `*` turns the DNS-rebinding checks off, e.g. behind a proxy).
    #[arg(long = "allow-host", value_name = "NAME")]
    pub allow_hosts: Vec<String>,
    /// The OpenClaw install for sessions created with `"agent": {"name": "openclaw", ...}`
    /// (default: target/openclaw beside the binary).
    #[arg(long, value_name = "DIR", env = "ENVCRAFT_OPENCLAW_DIR")]
    pub openclaw_dir: Option<PathBuf>,
}

pub fn run(args: ServeArgs) -> Result<i32, Error> {
    let token = match &args.token_file {
        Some(path) => Some(server::read_token(path)?),
        None => None,
    };
    let lock_wait = Duration::from_millis(args.lock_wait_ms);
    let config = ServeConfig {
        listen: args.listen,
        workspaces: args.workspaces.path,
        max_sessions: args.max_sessions,
        token,
        idle_timeout: Duration::from_secs(args.idle_timeout),
        request_timeout: Duration::from_secs(args.request_timeout),
        max_body: args.max_body,
        lock_wait,
        max_connections: args.max_connections,
        connection_idle_timeout: Duration::from_secs(args.connection_idle_timeout),
        max_connections_per_peer: args.max_connections_per_peer.unwrap_or_else(|| {
            server::connections::ConnectionLimits::default_per_peer(args.max_connections)
        }),
        header_timeout: Duration::from_secs(args.header_timeout),
        body_timeout: Duration::from_secs(args.body_timeout),
        warm_sandboxes: args.warm_sandboxes,
        openenv_mode: match args.openenv_mode.as_str() {
            "production" => server::openenv::Mode::Production,
            _ => server::openenv::Mode::Simulation,
        },
        openenv_task: args.openenv_task,
        allow_hosts: args.allow_hosts,
        openclaw_dir: args.openclaw_dir,
    };
    let options = SessionOptions {
        state_root: crate::workspace::state_root::open(args.state_dir.path)?,
        skills_root: args.skills.path,
        base_time: None,
        seed: None,
        origin: serde_json::Value::Null,
        policy: None,
        binds: Vec::new(),
        judge: None,
    };
    // A verify's judge ends before the request's deadline (with time left to answer).
    let judge = args
        .judge
        .endpoint(&options.state_root)?
        .map(|mut endpoint| {
            endpoint.budget = Some(Duration::from_secs(
                args.request_timeout
                    .saturating_sub(JUDGE_ANSWER_SECS)
                    .max(1),
            ));
            std::sync::Arc::new(endpoint)
        });
    let options = SessionOptions { judge, ..options };
    server::run(config, options)?;
    Ok(0)
}
