//! The sandbox: run one command in a fresh copy-on-write workspace under the OS isolation a
//! policy asks for, and report what happened and what was enforced.
//!
//! - [`plan`] (pure) turns a policy and a request into a [`plan::Plan`];
//! - [`child`] applies it in the cloned init, in one documented order, and [`command`] in each
//!   command process (and, without namespaces, in the command cloned by envcraft itself);
//! - [`live`] starts the clone and keeps it: a [`Sandbox`] runs commands (output captured
//!   with a cap, a wall-clock limit, the process group killed at its end) and reads the
//!   changes from the upper layer it was handed; closing it ends everything (the PID
//!   namespace makes that exact);
//! - this module holds the types a run reports and [`execute`], one command in a fresh sandbox;
//! - [`probe`] says what this machine can enforce (`envcraft doctor`);
//! - `idmap` makes the idmapped trees that show a root-owned template as the sandbox root's
//!   while that root is no host root; `mounts` and `serve` hold the init's mount helpers and
//!   its service loop; `live_start`, `live_commands` and `freeze` are [`live`]'s start, its
//!   commands' supervision, and the stop/continue of a sandbox's processes while its changes
//!   are read;
//! - [`seccomp`] and [`landlock`] compile the plan's rules; [`cgroup`] makes, joins and parks
//!   the run's cgroups; [`channel`] is the socket to the init and its messages; [`spawn`] the
//!   raw start of a command (`CLONE_VM | CLONE_VFORK`); [`netns`] the network namespace, made
//!   by a helper of the init; [`stale`] sweeps what killed runs left.
//!
//! Restrictions are applied only in the cloned processes, never in envcraft itself.
//! [`execute`] must be called from a single-threaded process (the CLI is one).

pub mod cancel;
pub mod cgroup;
pub mod channel;
pub mod child;
pub mod command;
pub mod handback;
mod idmap;
pub mod image_root;
pub mod landlock;
pub mod live;
pub mod maker;
mod mounts;
pub mod netns;
pub mod plan;
pub mod pool;
pub mod probe;
pub mod seccomp;
mod serve;
pub mod spawn;
pub mod stale;
pub mod warm;

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Serialize;

use self::cgroup::CgroupError;
use self::landlock::LandlockOutcome;
pub use self::live::{ExecRequest, ExecResult, Prestart, Sandbox, StdinSource};
use self::plan::{CgroupSupport, Plan, PlanError, Request, UidMapping, WorkspaceKind};
use crate::spec::policy::{Policy, Protection};
use crate::sys;
use crate::workspace::{Changes, WorkspaceError};

/// Why a sandbox could not run the command.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("workspace {path} is not a readable directory")]
    WorkspaceMissing {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot create the run's state directory under {path}")]
    StateDir {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot {what}")]
    Os {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("cannot show {path} through an idmapped mount")]
    IdmapRefused {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("user namespaces are not available here")]
    NamespacesUnavailable(#[source] io::Error),
    #[error("sandbox setup failed at step `{step}`: {detail}")]
    Setup {
        step: String,
        errno: i32,
        detail: String,
    },
    #[error("the sandbox's init ended without reporting the command's status")]
    Lost,
    #[error("the sandbox maker has ended: no new sandbox can be made until the server restarts")]
    MakerGone(#[source] io::Error),
    #[error("a command's input is {0} bytes; at most 65536 can be given")]
    StdinTooLarge(usize),
    #[error("{0} background commands are running: kill one before starting another")]
    TooManyBackground(usize),
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    #[error(transparent)]
    Seccomp(#[from] seccomp::SeccompError),
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
}

pub(crate) fn os(what: &'static str) -> impl FnOnce(io::Error) -> SandboxError {
    move |source| SandboxError::Os { what, source }
}

pub(crate) fn nix_os(what: &'static str) -> impl FnOnce(nix::Error) -> SandboxError {
    move |e| SandboxError::Os {
        what,
        source: e.into(),
    }
}

/// How the command's output is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputMode {
    /// Captured only (for `--json` and for callers).
    Capture,
    /// Captured and also written through to envcraft's own stdout/stderr as it arrives.
    PassThrough,
}

/// Options of one run besides the plan.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub output: OutputMode,
    /// Give the command envcraft's stdin (else /dev/null).
    pub inherit_stdin: bool,
    /// Copy the changed files out here after the run.
    pub keep_changes: Option<PathBuf>,
    /// Read the workspace's changes into [`Outcome::changes`] (else they are left unread and
    /// reported empty: for a caller that does not look at them, such as `envcraft exec`
    /// without `--json`). They are read anyway when `keep_changes` asks for them.
    pub read_changes: bool,
    /// Where per-run state directories are made: `ENVCRAFT_STATE_DIR`, else a private
    /// directory of ours in the user's runtime directory (`XDG_RUNTIME_DIR/envcraft`), else
    /// `/dev/shm/envcraft-UID`, else the system temp dir's `envcraft-UID` (see
    /// [`crate::workspace::state_root`], which also makes and checks it). A memory-backed place
    /// keeps a run's one mkdir/rmdir cheap, and without namespaces it holds the workspace copy.
    pub state_root: PathBuf,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            output: OutputMode::Capture,
            inherit_stdin: false,
            keep_changes: None,
            read_changes: true,
            state_root: default_state_root(),
        }
    }
}

fn default_state_root() -> PathBuf {
    crate::workspace::state_root::default_root()
}

/// What was actually applied to a run: each protection, and how.
#[derive(Debug, Clone, Serialize)]
pub struct Enforced {
    pub policy: String,
    #[serde(flatten)]
    pub protections: BTreeMap<&'static str, bool>,
    /// `overlay`, `copy` or `read_only`.
    pub workspace: WorkspaceKind,
    pub landlock_abi: i32,
    /// Landlock enforced every right that was asked for.
    pub landlock_fully: bool,
    pub cgroup: CgroupSupport,
    /// `cgroup` or `rlimit_as`.
    pub memory_limit: &'static str,
    /// `cgroup+rlimit`, `rlimit` (unprivileged: counts per user in the namespace) or
    /// `none_for_root` (root without a cgroup: RLIMIT_NPROC does not bind uid 0).
    pub process_limit: &'static str,
    /// `pid_namespace` (exact) or `process_group` (without namespaces).
    pub process_tree_kill: &'static str,
    /// The invoking user: `root` or `unprivileged`.
    pub invoker: &'static str,
    /// The host uid that uid 0 inside stands for (see `uid_mapping`).
    pub sandbox_uid_maps_to: u32,
    /// Who uid 0 inside is on the host: `idmapped` (root over a root-owned template: an
    /// unused host id, the template shown through idmapped mounts), `template_owner` (root
    /// over another's template, or idmapped mounts refused: root-only host files masked when
    /// that owner is root), `invoker` (an unprivileged invoker), or `host` (no user namespace:
    /// the command runs as the invoker itself).
    pub uid_mapping: &'static str,
    /// What `/etc/hostname`, `/etc/hosts` and `/etc/machine-id` show: `policy` (its
    /// hostname and machine id) or `host` (no mount namespace to show other files in).
    pub identity: &'static str,
    /// Whether the template's owner is the sandbox's user. When not (an unprivileged invoker
    /// and someone else's template), the template's files are read-only inside unless their
    /// mode lets anyone write them.
    pub template_owner_mapped: bool,
    /// Which root filesystem the run had: `host` (the host's read-only system paths) or
    /// `image NAME@ID` (an image's layers, see `image_root`).
    pub root: String,
}

/// The result of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    #[serde(serialize_with = "lossy")]
    pub stdout: Vec<u8>,
    #[serde(serialize_with = "lossy")]
    pub stderr: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub duration_ms: u64,
    pub enforced: Enforced,
    /// Empty unless [`RunOptions::read_changes`] (or `keep_changes`) asked for them.
    pub changes: Changes,
}

fn lossy<S: serde::Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&String::from_utf8_lossy(bytes))
}

impl Outcome {
    /// The exit code the CLI should use: the command's, 128+signal, or 124 on timeout.
    pub fn cli_exit_code(&self) -> i32 {
        if self.timed_out {
            124
        } else if let Some(code) = self.exit_code {
            code
        } else {
            128 + self.signal.unwrap_or(0)
        }
    }
}

/// The owner of the bottom template layer (an environment's files), after checking that
/// every layer is a readable directory.
fn template_owner(layers: &[PathBuf]) -> Result<(u32, u32), SandboxError> {
    use std::os::unix::fs::MetadataExt;
    let mut owner = (0, 0);
    for layer in layers {
        let meta = fs::metadata(layer).map_err(|source| SandboxError::WorkspaceMissing {
            path: layer.clone(),
            source,
        })?;
        if !meta.is_dir() {
            return Err(SandboxError::WorkspaceMissing {
                path: layer.clone(),
                source: io::Error::from(io::ErrorKind::NotADirectory),
            });
        }
        owner = (meta.uid(), meta.gid());
    }
    Ok(owner)
}

/// Plan `request` under `policy` and start its sandbox, falling back to the no-namespace mode
/// when user namespaces are refused and the policy does not require them.
pub fn start(
    policy: &Policy,
    request: &Request,
    state_root: &Path,
) -> Result<Sandbox, SandboxError> {
    // The init is cloned first, so that its namespaces (the network namespace above all) are
    // made while the run is planned. Where that fails, it is tried again below, after the
    // plan, whose outcome decides (a refused user namespace falls back or fails there).
    // With sandboxes built ahead (see `pool`, and `warm` for the inits), the plan comes
    // first: a sandbox of that very plan may be waiting, and a warm init is taken, not made.
    let pooled = !request.without_namespaces && pool::active();
    let prestart = if request.without_namespaces || pooled {
        None
    } else {
        Prestart::clone(plan::wants_network_namespace(policy)).ok()
    };
    let owner = template_owner(&request.layers)?;
    let host = probe::HostFacts::read();
    let idmap = idmap::host_root(host.uid) && idmap::reachable(state_root);
    let plan = Plan::build(policy, request, &host.as_plan_host(owner, idmap))?;
    if pooled
        && plan.namespaced
        && let Some(sandbox) = pool::take(&plan, state_root)
    {
        return Ok(sandbox);
    }
    match Sandbox::start_prestarted(&plan, state_root, prestart) {
        Err(SandboxError::IdmapRefused { path, source }) => {
            // The template's filesystem cannot idmap: the sandbox's root becomes the template's
            // owner again, with the root-only host files masked (see `plan::UidMapping`).
            tracing::warn!(path = %path.display(), error = %source, "idmapped mount refused; masking root-only files instead");
            let plan = Plan::build(policy, request, &host.as_plan_host(owner, false))?;
            Sandbox::start(&plan, state_root)
        }
        Err(SandboxError::NamespacesUnavailable(e))
            if !policy
                .protections
                .required
                .iter()
                .any(|p| p.needs_namespaces()) =>
        {
            tracing::warn!(error = %e, "user namespaces refused; running without namespaces");
            let fallback = Request {
                without_namespaces: true,
                ..request.clone()
            };
            let plan = Plan::build(policy, &fallback, &host.as_plan_host(owner, false))?;
            Sandbox::start(&plan, state_root)
        }
        Err(SandboxError::NamespacesUnavailable(e)) => {
            Err(SandboxError::Plan(PlanError::RequiredUnavailable {
                policy: policy.name.clone(),
                protection: Protection::UserNamespace,
                reason: format!("here: creating a user namespace failed ({e})"),
            }))
        }
        other => other,
    }
}

/// Run `request`'s command once in a fresh sandbox: build it, run the command, read the
/// changes, close it (`envcraft exec`). For a process that exits after it: the sandbox's init
/// finishes exiting after this returns (see [`Sandbox::close_before_exit`]).
pub fn execute(
    policy: &Policy,
    request: &Request,
    options: &RunOptions,
) -> Result<Outcome, SandboxError> {
    let begin = Instant::now();
    let mut sandbox = start(policy, request, &options.state_root)?;
    let plan = sandbox.plan().clone();
    let result = sandbox.exec_last(&ExecRequest {
        argv: plan.argv.clone(),
        env: Vec::new(),
        timeout: Duration::from_secs(plan.wall_time_secs),
        stdin: if options.inherit_stdin {
            StdinSource::Inherit
        } else {
            StdinSource::Null
        },
        output: options.output,
        cwd: Default::default(),
    })?;
    let changes = if options.read_changes || options.keep_changes.is_some() {
        // Read and kept with nothing of the sandbox running (see `Sandbox::frozen`).
        sandbox.frozen(|sandbox| {
            let changes = sandbox.changes()?;
            if let Some(out) = &options.keep_changes {
                sandbox.keep_changes(&changes, out)?;
            }
            Ok::<_, SandboxError>(changes)
        })?
    } else {
        Changes::default()
    };
    let enforced = enforced(&sandbox);
    sandbox.close_before_exit();
    Ok(Outcome {
        exit_code: result.exit_code,
        signal: result.signal,
        timed_out: result.timed_out,
        stdout: result.stdout,
        stderr: result.stderr,
        stdout_truncated: result.stdout_truncated,
        stderr_truncated: result.stderr_truncated,
        duration_ms: begin.elapsed().as_millis() as u64,
        enforced,
        changes,
    })
}

/// What a sandbox applied, protection by protection.
pub fn enforced(sandbox: &Sandbox) -> Enforced {
    let plan = sandbox.plan();
    let kind = sandbox.workspace_kind();
    let landlock = sandbox.landlock();
    let cgroup_ns = sandbox.cgroup_namespace();
    let cgroup_active = sandbox.cgroup_active();
    let ns = plan.namespaced;
    let ll = landlock.unwrap_or_else(|| LandlockOutcome {
        abi: sys::landlock_abi_version(),
        filesystem: false,
        network: false,
        scope: false,
        fully: false,
    });
    let ran = landlock.is_some();
    let root = plan.invoker_is_root;
    let mut protections = BTreeMap::new();
    for p in Protection::ALL {
        let on = match p {
            Protection::UserNamespace
            | Protection::MountNamespace
            | Protection::PidNamespace
            | Protection::IpcNamespace
            | Protection::UtsNamespace => ns,
            Protection::NetworkNamespace => plan.network_namespace,
            Protection::CgroupNamespace => ns && cgroup_ns,
            Protection::OverlayWorkspace => ns && kind != WorkspaceKind::Copy,
            Protection::WorkspaceSizeLimit => ns,
            Protection::LandlockFilesystem => ll.filesystem,
            Protection::LandlockNetwork => ll.network,
            Protection::LandlockScope => ll.scope,
            Protection::Seccomp
            | Protection::NoNewPrivs
            | Protection::CapabilitiesDropped
            | Protection::Rlimits => ran,
            Protection::CgroupLimits => cgroup_active,
        };
        protections.insert(p.name(), on);
    }
    Enforced {
        policy: plan.policy_name.clone(),
        protections,
        workspace: kind,
        landlock_abi: ll.abi,
        landlock_fully: ll.fully,
        cgroup: plan
            .cgroup
            .map(|c| c.support)
            .unwrap_or(CgroupSupport::None),
        memory_limit: if cgroup_active { "cgroup" } else { "rlimit_as" },
        process_limit: match (cgroup_active, root) {
            (true, _) => "cgroup+rlimit",
            (false, false) => "rlimit",
            (false, true) => "none_for_root",
        },
        process_tree_kill: if ns { "pid_namespace" } else { "process_group" },
        invoker: if root { "root" } else { "unprivileged" },
        sandbox_uid_maps_to: plan.uid,
        uid_mapping: match (ns, plan.uid_mapping) {
            (false, _) => "host",
            (true, UidMapping::Idmapped) => "idmapped",
            (true, UidMapping::TemplateOwner) => "template_owner",
            (true, UidMapping::Invoker) => "invoker",
        },
        identity: if ns { "policy" } else { "host" },
        template_owner_mapped: plan.uid_mapping == UidMapping::Idmapped
            || plan.template_owner == (plan.uid, plan.gid)
            || !ns,
        root: match &plan.image {
            Some(image) => format!("image {}@{}", image.name, image.id),
            None => "host".to_string(),
        },
    }
}
