//! `envcraft serve`: the HTTP API rollout workers drive sessions through. A thin adapter over
//! [`crate::session`]: a registry of open sessions (one lock each, bounded waits), request
//! deadlines, a body limit, bearer-token auth on `/v1/*`, Prometheus metrics, an idle sweeper,
//! and a drain on SIGTERM/SIGINT that lets running calls finish and closes every session.
//!
//! - [`connections`]: how many connections, from whom, how long a request head may take, and
//!   how long a connection may stay idle;
//! - [`capacity`]: how many sessions the machine holds, and the refusal past it;
//! - [`bodies`]: request bodies, bounded in size and time before any handler reads them;
//! - [`error`]: API errors (category, status, agent-safe message);
//! - [`registry`]: the open sessions;
//! - [`episode`]: the session operations every protocol shares;
//! - [`handlers`]: the `/v1` endpoints;
//! - [`openenv`], [`openenv_ws`]: OpenEnv's HTTP endpoints and WebSocket;
//! - [`mcp_http`]: MCP over Streamable HTTP (and the dispatch OpenEnv's MCP messages use);
//! - [`inline`]: tasks given whole in a create request;
//! - [`metrics`]: the counters behind `/metrics`;
//! - [`openapi`]: the OpenAPI description served at `/openapi.json`;
//! - [`resume`]: at start, the sessions a killed server left.

pub mod agent;
pub mod bodies;
pub mod capacity;
pub mod connections;
pub mod episode;
pub mod error;
pub mod files;
pub mod handlers;
pub mod hosts;
pub mod inline;
pub mod mcp_http;
pub mod metrics;
pub mod openapi;
pub mod openenv;
pub mod openenv_ws;
pub mod registry;
pub mod requests;
pub mod resume;
pub mod routes;
pub mod task_cache;

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::{ConnectInfo, DefaultBodyLimit, Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use tokio::sync::Notify;

use self::error::ApiError;
use self::metrics::Metrics;
use self::registry::{Registry, close_entry};
use crate::session::SessionOptions;

/// Why the server could not start or stopped badly.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot start the async runtime")]
    Runtime(#[source] std::io::Error),
    #[error("cannot listen on {addr}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read the token file {path}")]
    TokenFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the token file {0} is empty")]
    EmptyToken(PathBuf),
    #[error("cannot announce the address on stdout")]
    Announce(#[source] std::io::Error),
    #[error("the server failed")]
    Serve(#[source] std::io::Error),
    #[error("cannot create the state directory {path}")]
    StateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    StateRoot(#[from] crate::workspace::state_root::StateRootError),
    #[error("cannot wait for signals")]
    Signal(#[source] std::io::Error),
    #[error(
        "another envcraft serve uses the state directory {0}: give each server its own --state-dir"
    )]
    StateDirInUse(PathBuf),
    #[error(
        "--connection-idle-timeout ({idle} s) must exceed --request-timeout ({request} s): a connection waiting for its answer would be cut"
    )]
    IdleBelowDeadline { idle: u64, request: u64 },
    #[error("{flag} must be at least 1 s: every connection would be cut at once")]
    ZeroDeadline { flag: &'static str },
}

/// What `envcraft serve` was told.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub listen: String,
    pub workspaces: PathBuf,
    pub max_sessions: usize,
    pub token: Option<String>,
    pub idle_timeout: Duration,
    pub request_timeout: Duration,
    pub max_body: usize,
    /// How long a request waits for a session another request is using.
    pub lock_wait: Duration,
    /// Connections open at once, and how long one may stay idle (see [`connections`]).
    pub max_connections: usize,
    pub connection_idle_timeout: Duration,
    /// Connections open at once from one address.
    pub max_connections_per_peer: usize,
    /// How long a request head may take from its first byte (a connection's first head: from
    /// its accept).
    pub header_timeout: Duration,
    /// How long a request body may take to arrive (never more than `request_timeout`).
    pub body_timeout: Duration,
    /// Sandboxes of each kind begun ahead of creates (see [`crate::sandbox::warm`]).
    pub warm_sandboxes: usize,
    /// OpenEnv's mode: whether `/reset`, `/step` and `/state` are served.
    pub openenv_mode: openenv::Mode,
    /// The task of an OpenEnv `reset` that names none.
    pub openenv_task: Option<String>,
    /// Names a request's `Host` or `Origin` may give besides loopback and the listen address
    /// (`*`: any; see [`hosts`]).
    pub allow_hosts: Vec<String>,
    /// The OpenClaw install of sessions whose agent is OpenClaw (see [`agent`]); default:
    /// `target/openclaw` beside the binary.
    pub openclaw_dir: Option<PathBuf>,
}

/// Shared by every request.
pub struct AppState {
    pub config: ServeConfig,
    pub session_options: SessionOptions,
    pub registry: Registry,
    pub metrics: Metrics,
    /// The `Host` and `Origin` a request may carry.
    pub hosts: hosts::Hosts,
    draining: AtomicBool,
    /// Requests being handled, and a wake-up when that drops.
    in_flight: AtomicUsize,
    idle: Notify,
}

impl AppState {
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }
}

/// The router: public probes and descriptions, and the `/v1` API behind auth, deadline and
/// body limit (the layers apply to every route; auth only to `/v1`).
pub fn router(state: Arc<AppState>) -> Router {
    let max_body = state.config.max_body;
    let mut router = Router::new();
    for route in routes::served(state.config.openenv_mode) {
        router = router.route(route.path, (route.handler)());
    }
    router
        .fallback(handlers::fallback)
        .method_not_allowed_fallback(handlers::method_not_allowed)
        .layer(DefaultBodyLimit::max(max_body))
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .with_state(state)
}

/// Every request: counted in flight, authenticated under `/v1`, bounded by the deadline,
/// its status counted.
async fn guard(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    // The connection handles this request until its answer is made: its head deadline is off.
    let _handling = request
        .extensions()
        .get::<ConnectInfo<connections::Connection>>()
        .map(|info| info.0.handling());
    state.in_flight.fetch_add(1, Ordering::SeqCst);
    let (method, path) = (request.method().clone(), request.uri().path().to_string());
    let started = std::time::Instant::now();
    let response = guarded(&state, request, next).await;
    let status = response.status().as_u16();
    tracing::debug!(%method, %path, status, ms = started.elapsed().as_secs_f64() * 1e3, "request");
    state.metrics.http_response(status);
    if state.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
        state.idle.notify_waiters();
    }
    response
}

async fn guarded(state: &AppState, request: Request, next: Next) -> Response {
    if let Err(refused) = judge_hosts(&state.hosts, &request) {
        return ApiError::forbidden_host(refused.message()).into_response();
    }
    if routes::needs_token(request.uri().path())
        && let Some(token) = &state.config.token
    {
        let given = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer);
        if !given.is_some_and(|g| constant_time_eq(g.as_bytes(), token.as_bytes())) {
            return ApiError::unauthorized().into_response();
        }
    }
    let limit = state.config.request_timeout;
    let body_limit = state.config.body_timeout.min(limit);
    let handled = async {
        match bodies::read_whole(request, state.config.max_body, body_limit).await {
            Ok(request) => next.run(request).await,
            Err(e) => e.into_response(),
        }
    };
    match tokio::time::timeout(limit, handled).await {
        Ok(response) => response,
        Err(_) => ApiError::timeout(limit.as_secs()).into_response(),
    }
}

/// The request's `Host` (or its URI's authority, in HTTP/2) and `Origin`, judged.
fn judge_hosts(hosts: &hosts::Hosts, request: &Request) -> Result<(), hosts::Refusal> {
    let header = |name| {
        request
            .headers()
            .get(name)
            .map(|v: &header::HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned())
    };
    let host = header(header::HOST).or_else(|| request.uri().authority().map(|a| a.to_string()));
    hosts.judge(host.as_deref(), header(header::ORIGIN).as_deref())
}

/// The token of an `Authorization: Bearer TOKEN` value (the scheme in any case).
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Equality that takes as long for every mismatch of the same length (tokens).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Read a bearer token: the file's content, trimmed, not empty.
pub fn read_token(path: &std::path::Path) -> Result<String, ServerError> {
    let text = std::fs::read_to_string(path).map_err(|source| ServerError::TokenFile {
        path: path.to_path_buf(),
        source,
    })?;
    let token = text.trim().to_string();
    if token.is_empty() {
        return Err(ServerError::EmptyToken(path.to_path_buf()));
    }
    Ok(token)
}

/// Run the server until SIGTERM or SIGINT, then drain and close every session.
pub fn run(config: ServeConfig, session_options: SessionOptions) -> Result<(), ServerError> {
    if config.connection_idle_timeout <= config.request_timeout {
        return Err(ServerError::IdleBelowDeadline {
            idle: config.connection_idle_timeout.as_secs(),
            request: config.request_timeout.as_secs(),
        });
    }
    for (flag, value) in [
        ("--header-timeout", config.header_timeout),
        ("--body-timeout", config.body_timeout),
    ] {
        if value.is_zero() {
            return Err(ServerError::ZeroDeadline { flag });
        }
    }
    // Before anything opens a descriptor or starts a thread: the process that makes every
    // sandbox (see `sandbox::maker`).
    if let Err(e) = crate::sandbox::maker::start() {
        tracing::warn!(error = %crate::error::Chain(&e), "no sandbox maker: sandboxes are cloned from the server itself");
    }
    // Sessions are bounded by descriptors first: take all the hard limit allows.
    let fd_limit = capacity::raise_descriptor_limit();
    let root = &session_options.state_root;
    crate::workspace::state_root::prepare(root)?;
    // One server per state directory: its sessions are this server's alone.
    let _state_lock = lock_state_dir(root)?;
    // The sessions a killed server left are set aside to be resumed; what else it left (its
    // sandboxes' directories and cgroups) goes.
    let claimed = crate::session::resume::claim(root);
    crate::sandbox::stale::sweep_once(&session_options.state_root);
    // Every sandbox's init is cloned by the sandbox maker, forked here while this process
    // has no other thread (see `sandbox::maker`). Where it cannot start, inits are cloned from
    // this multi-threaded process, and the child keeps glibc's view of the other threads and
    // whatever locks they held: then every thread is made up front and kept (a fixed,
    // prewarmed blocking pool that never shrinks) and clones are serialized (`clone_lock`).
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    let prewarmed = if crate::sandbox::maker::running() {
        None
    } else {
        let threads = config.max_sessions.clamp(8, 256) + 4;
        runtime
            .max_blocking_threads(threads)
            .thread_keep_alive(Duration::from_secs(365 * 24 * 3600));
        Some(threads)
    };
    let runtime = runtime.build().map_err(ServerError::Runtime)?;
    if let Some(threads) = prewarmed {
        runtime.block_on(prewarm(threads));
    }
    let served = runtime.block_on(serve(config, session_options, claimed, fd_limit));
    // What was made ahead of need goes with the server (directories, cgroups, processes),
    // then the maker.
    crate::sandbox::pool::drain();
    crate::sandbox::warm::drain();
    crate::sandbox::maker::stop();
    served
}

/// Hold `root/serve.lock` (an exclusive `flock`, released when the server exits, however).
fn lock_state_dir(root: &std::path::Path) -> Result<nix::fcntl::Flock<std::fs::File>, ServerError> {
    let path = root.join("serve.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| ServerError::StateDir {
            path: path.clone(),
            source,
        })?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock)
        .map_err(|_| ServerError::StateDirInUse(root.to_path_buf()))
}

/// Start all `n` blocking threads now: `n` tasks that can only finish together.
async fn prewarm(n: usize) {
    let barrier = Arc::new(std::sync::Barrier::new(n));
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let barrier = barrier.clone();
            tokio::task::spawn_blocking(move || {
                barrier.wait();
            })
        })
        .collect();
    for task in tasks {
        let _ = task.await;
    }
}

async fn serve(
    config: ServeConfig,
    session_options: SessionOptions,
    claimed: Vec<PathBuf>,
    fd_limit: u64,
) -> Result<(), ServerError> {
    let listener = tokio::net::TcpListener::bind(&config.listen)
        .await
        .map_err(|source| ServerError::Bind {
            addr: config.listen.clone(),
            source,
        })?;
    let addr: SocketAddr = listener.local_addr().map_err(|source| ServerError::Bind {
        addr: config.listen.clone(),
        source,
    })?;
    // Before any session: what the machine offers, what one session costs, how many fit.
    let machine = capacity::machine(fd_limit);
    let cost = {
        let (workspaces, options) = (config.workspaces.clone(), session_options.clone());
        tokio::task::spawn_blocking(move || capacity::measure_session(&workspaces, &options))
            .await
            .unwrap_or(capacity::UNMEASURED)
    };
    // What is built ahead comes out of what sessions may take.
    let warm = capacity::warm_sandboxes(
        &machine,
        &cost,
        config.max_connections as u64,
        config.warm_sandboxes,
    );
    let machine = machine.less_warm(warm, &cost);
    let plan = capacity::plan(
        &machine,
        &cost,
        config.max_connections as u64,
        config.max_sessions as u64,
    );
    capacity::log(&plan, &machine, &cost);
    // Past these, a session gives its sandbox's workspace descriptors back after each
    // request and asks for them again when a call needs them.
    crate::sandbox::handback::set_room(plan.holding);
    // Only now (the measurement above counted one session's descriptors and processes): the
    // warm sandboxes, made ahead of creates (see `sandbox::warm`).
    if warm < config.warm_sandboxes {
        tracing::info!(
            warm,
            asked = config.warm_sandboxes,
            "capacity: fewer sandboxes built ahead than --warm-sandboxes asks"
        );
    }
    if let Err(e) =
        crate::sandbox::warm::start(warm).and_then(|()| crate::sandbox::pool::start(warm))
    {
        tracing::warn!(error = %e, "no sandboxes built ahead: cannot start their threads");
    }
    let config_hosts = config.allow_hosts.clone();
    let state = Arc::new(AppState {
        registry: Registry::new(
            config.max_sessions,
            capacity::Headroom::new(&plan, &machine, &cost)
                .with_state_root(&session_options.state_root),
        ),
        config,
        session_options,
        metrics: Metrics::default(),
        hosts: hosts::Hosts::new(addr.ip(), &config_hosts),
        draining: AtomicBool::new(false),
        in_flight: AtomicUsize::new(0),
        idle: Notify::new(),
    });
    if !claimed.is_empty() {
        // Before the address is announced: a client never sees a resumable session missing.
        let resuming = state.clone();
        let found = claimed.len();
        let (resumed, dropped) =
            tokio::task::spawn_blocking(move || resume::resume_all(&resuming, claimed))
                .await
                .unwrap_or((0, found));
        tracing::info!(resumed, dropped, "sessions of a killed server");
    }
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on http://{addr}").map_err(ServerError::Announce)?;
        out.flush().map_err(ServerError::Announce)?;
    }
    tracing::info!(%addr, "serving");
    if !addr.ip().is_loopback() && state.config.token.is_none() {
        tracing::warn!(%addr, "listening beyond loopback without --token-file: anyone who can reach this address can run sessions");
    }
    let sweeper = tokio::spawn(sweep_idle(state.clone()));
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(ServerError::Signal)?;
    let drained = {
        let state = state.clone();
        async move {
            tokio::select! {
                _ = sigterm.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            drain(&state).await;
        }
    };
    let listener = connections::Bounded::new(
        listener,
        connections::ConnectionLimits {
            max_connections: state.config.max_connections,
            per_peer: state.config.max_connections_per_peer,
            idle: state.config.connection_idle_timeout,
            header: state.config.header_timeout,
        },
    );
    let app =
        router(state.clone()).into_make_service_with_connect_info::<connections::Connection>();
    axum::serve(listener, app)
        .with_graceful_shutdown(drained)
        .await
        .map_err(ServerError::Serve)?;
    sweeper.abort();
    close_all(&state).await;
    tracing::info!("stopped");
    Ok(())
}

/// Stop taking sessions (readyz says `draining`) and wait, at most a request deadline, for
/// the requests being handled to finish. Returning starts the graceful shutdown.
async fn drain(state: &AppState) {
    tracing::info!("draining");
    state.draining.store(true, Ordering::SeqCst);
    let deadline = tokio::time::Instant::now() + state.config.request_timeout;
    loop {
        let idle = state.idle.notified();
        if state.in_flight.load(Ordering::SeqCst) == 0 {
            return;
        }
        if tokio::time::timeout_at(deadline, idle).await.is_err() {
            tracing::warn!("requests still running at the end of the drain");
            return;
        }
    }
}

/// Close every session (processes, mounts, directories).
async fn close_all(state: &AppState) {
    for id in state.registry.ids() {
        if let Some(entry) = state.registry.remove(&id)
            && !close_entry(entry, state.config.lock_wait).await
        {
            tracing::warn!(session = %id, "a call still holds the session: left to the process exit");
        }
    }
}

/// Close sessions no request used for the idle timeout; checks a few times per timeout.
async fn sweep_idle(state: Arc<AppState>) {
    let every =
        (state.config.idle_timeout / 4).clamp(Duration::from_millis(200), Duration::from_secs(60));
    loop {
        tokio::time::sleep(every).await;
        for id in state.registry.idle(state.config.idle_timeout) {
            if let Some(entry) = state.registry.remove(&id) {
                tracing::info!(session = %id, "closing an idle session");
                close_entry(entry, state.config.lock_wait).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_in_any_case_of_the_scheme() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer"), None);
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
    }
}
