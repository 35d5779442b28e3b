//! Sessions: one live run of one task. A session owns a private copy-on-write workspace (the
//! task's files over its environment's), one long-lived sandbox, an action counter that drives
//! its clock, and a transcript; every tool call goes through [`Session::call`] and returns a
//! structured result.
//!
//! - [`clock`]: `base_time + action_index × step`, never the wall clock;
//! - [`store`]: the session's directory (atomic state writes, a lock with a bounded wait);
//! - [`transfer`]: files in and out of the workspace as tar streams (all-or-nothing uploads,
//!   bounded downloads);
//! - [`transcript`]: the OpenClaw-shaped (v3) JSONL of turns, calls, results and the model's
//!   own messages; [`assistant`]: those messages as a client hands them over, checked;
//! - `harness`: recording those messages, and what an agent harness (OpenClaw) runs and
//!   brings (its processes, its own transcript);
//! - `verifying`: scoring the workspace with the task's verifier (manifest, grader, judge).
//!
//! No global state: everything a call needs is in its `Session`.

pub mod assistant;
pub mod clock;
mod harness;
pub mod resume;
mod root;
pub mod store;
pub mod trajectory;
pub mod transcript;
pub mod transfer;
mod verifying;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::{Value, json};

use self::clock::Clock;
use self::store::{SessionDir, StoreError};
use crate::sandbox::plan::Request;
use crate::sandbox::{self, Enforced, Sandbox, SandboxError};
use crate::spec::policy::{Policy, PolicyError};
use crate::spec::skill::{SkillError, SkillSpec};
use crate::spec::task::TaskSpec;
use crate::spec::time::Timestamp;
use crate::tools::skill::{OfferedSkill, SKILLS_MOUNT};
use crate::tools::{self, ToolError, WorkspaceRoot};
use crate::verify::{Expected, Extra, Manifest};
use crate::workspace::Changes;

/// Why a session could not be made or used.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Skill(#[from] SkillError),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("environment {env} runs over image {image:?}")]
    Image {
        env: String,
        image: String,
        #[source]
        source: Box<crate::image::StoreError>,
    },
    #[error("the sandbox did not hand over its workspace")]
    NoWorkspace,
    #[error("cannot duplicate the workspace descriptor")]
    Descriptor(#[source] std::io::Error),
    #[error(transparent)]
    Verify(#[from] crate::verify::VerifyError),
    #[error(transparent)]
    Grader(#[from] crate::verify::command::GraderError),
    #[error("task {task} has no expected.json yet: write it with `envcraft record {task}`")]
    NoExpected { task: String },
    #[error("the assistant message is not recorded: {0}")]
    Assistant(#[from] assistant::AssistantError),
    #[error(
        "the transcript reached its policy's limit (limits.transcript_bytes): the message is not recorded"
    )]
    TranscriptFull,
}

/// Where sessions live and what they can reach.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Sessions' directories go below `state_root/sessions/`.
    pub state_root: PathBuf,
    /// Where `skills/NAME/` are found.
    pub skills_root: PathBuf,
    /// Overrides the task's start time (Unix seconds), for tasks that have none.
    pub base_time: Option<i64>,
    /// A seed the task's own programs may use (`ENVCRAFT_SEED`); envcraft itself is
    /// deterministic and does not draw from it.
    pub seed: Option<u64>,
    /// What made the session, kept in its `state.json` for whoever resumes it (the server
    /// stores its create request); opaque to the session.
    pub origin: Value,
    /// The sandbox policy instead of the environment's (an agent harness's: OpenClaw's,
    /// reaching one port).
    pub policy: Option<Policy>,
    /// More host directories shown read-only inside, at the given absolute paths (an agent
    /// harness's install).
    pub binds: Vec<(PathBuf, PathBuf)>,
    /// The LLM judge's endpoint, for tasks with a judge (none: their judge part is not run).
    pub judge: Option<std::sync::Arc<crate::verify::judge::Endpoint>>,
}

impl SessionOptions {
    /// Sessions under `state_root` with the skills of `skills_root`, and nothing else set: the
    /// task's own clock, policy and binds, no seed, no judge.
    pub fn new(state_root: PathBuf, skills_root: PathBuf) -> SessionOptions {
        SessionOptions {
            state_root,
            skills_root,
            base_time: None,
            seed: None,
            origin: Value::Null,
            policy: None,
            binds: Vec::new(),
            judge: None,
        }
    }
}

/// What `state.json` holds: enough to know what the session is, where it stands, and how to
/// make it again (see [`resume`]).
#[derive(Debug, Clone, Serialize)]
struct State<'a> {
    version: u32,
    session_id: &'a str,
    task: String,
    policy: &'a str,
    action_index: u64,
    turn: usize,
    clock: Clock,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    #[serde(skip_serializing_if = "Value::is_null")]
    origin: &'a Value,
    enforced: &'a Enforced,
}

/// What a session is made of besides its sandbox (shared with its forks).
#[derive(Clone)]
struct Parts {
    task: TaskSpec,
    policy: Policy,
    clock: Clock,
    offered: Vec<String>,
    skills: Vec<OfferedSkill>,
    sessions_root: PathBuf,
    seed: Option<u64>,
    origin: Value,
    judge: Option<std::sync::Arc<crate::verify::judge::Endpoint>>,
}

impl Parts {
    /// The variables every command of the session gets at action `index`: the clock's, and
    /// the seed when there is one.
    fn command_env(&self, index: u64) -> Vec<(String, String)> {
        let mut env = self.clock.env_at(index);
        if let Some(seed) = self.seed {
            env.push(("ENVCRAFT_SEED".into(), seed.to_string()));
        }
        env
    }
}

/// One live run of one task.
pub struct Session {
    id: String,
    dir: SessionDir,
    parts: Parts,
    sandbox: Sandbox,
    root: root::SessionRoot,
    action_index: u64,
    turn: usize,
    enforced: Enforced,
    /// What `process poll` already returned of each background command.
    offsets: tools::process::Offsets,
    /// Where the transcript's next entry goes.
    chain: transcript::Chain,
}

/// A fresh session id: 16 hex digits from the OS's random source.
fn new_id() -> String {
    let mut bytes = [0u8; 8];
    if getrandom_fill(&mut bytes).is_err() {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        bytes = ((nanos as u64) ^ (std::process::id() as u64) << 32).to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn getrandom_fill(buf: &mut [u8]) -> std::io::Result<()> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")?.read_exact(buf)
}

/// The RFC 3339 form of Unix seconds, for transcript timestamps.
fn rfc3339(unix: i64) -> String {
    Timestamp::from_unix_seconds(unix)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

impl Session {
    /// Make a session for `task`: its workspace, its sandbox, its directory and transcript.
    pub fn create(task: &TaskSpec, options: &SessionOptions) -> Result<Session, SessionError> {
        Session::create_as(task, options, None)
    }

    /// [`Session::create`] under a given id (a resumed session keeps its own), else a new one.
    fn create_as(
        task: &TaskSpec,
        options: &SessionOptions,
        id: Option<String>,
    ) -> Result<Session, SessionError> {
        let env = &task.env;
        let policy = match &options.policy {
            Some(policy) => policy.clone(),
            None => env.load_policy()?,
        };
        let mut binds = options.binds.clone();
        let mut skills = Vec::new();
        for name in &env.skills {
            let spec = SkillSpec::find(name, &options.skills_root)?;
            binds.push((spec.dir.clone(), Path::new(SKILLS_MOUNT).join(&spec.name)));
            skills.push(OfferedSkill {
                name: spec.name.clone(),
                description: spec.description.clone(),
                schema: spec.schema.clone(),
                executable: spec.executable.clone(),
                timeout: Duration::from_secs(spec.timeout_secs),
            });
        }
        let mut layers = Vec::new();
        if let Some(files) = &task.files {
            layers.push(files.clone());
        }
        layers.push(env.files.clone());
        let image = match &env.image {
            Some(name) => {
                let err = |source| SessionError::Image {
                    env: env.name.clone(),
                    image: name.clone(),
                    source: Box::new(source),
                };
                let store = crate::image::Store::open(&options.state_root).map_err(err)?;
                let record = store.image(name).map_err(err)?;
                Some(sandbox::image_root::ImageRoot::of(&store, &record))
            }
            None => None,
        };
        let request = Request {
            layers,
            binds,
            argv: vec!["/bin/true".into()],
            timeout_secs: None,
            host_env: std::env::vars().collect(),
            without_namespaces: false,
            image,
        };
        let sandbox = sandbox::start(&policy, &request, &options.state_root)?;
        let base_unix = options
            .base_time
            .unwrap_or_else(|| task.base_time.unwrap_or(env.base_time).unix_seconds());
        let clock = Clock {
            base_unix,
            step_secs: env.time_step_secs,
        };
        let parts = Parts {
            task: task.clone(),
            policy,
            clock,
            offered: env.tools.clone(),
            skills,
            sessions_root: options.state_root.join("sessions"),
            seed: options.seed,
            origin: options.origin.clone(),
            judge: options.judge.clone(),
        };
        let mut session = Session::assemble(parts, sandbox, 0, 0, Default::default(), None, id)?;
        // The header's id is derived, not the session's own: the same task, clock and seed give
        // the same transcript.
        let stamp = rfc3339(clock.unix_at(0));
        let material = format!(
            "envcraft transcript\n{}\n{}+{}\n{:?}",
            session.task_name(),
            clock.base_unix,
            clock.step_secs,
            session.parts.seed
        );
        let cwd = session.root.mount().display().to_string();
        let mut lines = transcript::header(&transcript::session_uuid(&material), &stamp, &cwd)
            .to_string()
            + "\n";
        if let Some(prompt) = task.turns.first() {
            let line = transcript::user_message(prompt, &stamp, &mut session.chain);
            lines += &format!("{line}\n");
        }
        {
            let appended = session.dir.append_transcript(lines.as_bytes());
            if let Err(e) = appended {
                // A session that could not be recorded is not made: nothing of it is left.
                session.close();
                return Err(e.into());
            }
        }
        Ok(session)
    }

    /// A session around a started sandbox: check it works and learn what it enforced (from the
    /// init, or without namespaces from a first command; either fails here if a required
    /// protection is missing), open its workspace for the file tools, make its directory.
    fn assemble(
        parts: Parts,
        mut sandbox: Sandbox,
        action_index: u64,
        turn: usize,
        offsets: tools::process::Offsets,
        known: Option<Enforced>,
        id: Option<String>,
    ) -> Result<Session, SessionError> {
        // A fork's sandbox is its parent's, built again: what was enforced is known.
        let enforced = match known {
            Some(enforced) => enforced,
            // The init reports what it enforced once its root is built and it is restricted
            // (every command inherits that); a setup that failed, or a required protection
            // missing, fails here.
            None if sandbox.plan().namespaced => {
                sandbox.wait_ready()?;
                sandbox::enforced(&sandbox)
            }
            // Without namespaces each command restricts itself: the first one tells.
            None => {
                let probe = sandbox.exec(&sandbox::ExecRequest {
                    argv: vec!["/bin/true".into()],
                    env: parts.command_env(action_index),
                    timeout: Duration::from_secs(10),
                    stdin: sandbox::StdinSource::Null,
                    output: sandbox::OutputMode::Capture,
                    cwd: Default::default(),
                })?;
                if probe.exit_code != Some(0) {
                    return Err(SessionError::Sandbox(SandboxError::Setup {
                        step: "run a first command".into(),
                        errno: 0,
                        detail: String::from_utf8_lossy(&probe.stderr).trim().to_string(),
                    }));
                }
                sandbox::enforced(&sandbox)
            }
        };
        let plan = sandbox.plan().clone();
        let fd = sandbox
            .take_workspace_root()?
            .ok_or(SessionError::NoWorkspace)?;
        let owner = (plan.uid != nix::unistd::geteuid().as_raw()).then_some((plan.uid, plan.gid));
        // File tools accept the in-sandbox paths of the workspace (also without namespaces,
        // where commands see the copy at its host path: agents write `/workspace/...`).
        let root = WorkspaceRoot::new(
            fd,
            parts.policy.filesystem.workspace.clone(),
            parts.policy.filesystem.workspace_aliases.clone(),
            plan.workspace_writable,
            owner,
        )
        .with_mounts(
            parts
                .policy
                .filesystem
                .workspace_mounts
                .iter()
                .map(|m| (m.path.clone(), m.dir.clone()))
                .collect(),
        );
        let root = root::SessionRoot::new(root);
        let id = id.unwrap_or_else(new_id);
        let dir = SessionDir::create(&parts.sessions_root, &id)?;
        let session = Session {
            id,
            dir,
            parts,
            sandbox,
            root,
            action_index,
            turn,
            enforced,
            offsets,
            chain: transcript::Chain::default(),
        };
        if let Err(e) = session.save() {
            // The state root full, say: its directory and sandbox go, not left to a sweep.
            session.close();
            return Err(e);
        }
        let mut session = session;
        session.settle();
        Ok(session)
    }

    /// A new session whose workspace starts from this one's current state, at the same action
    /// index and turn, with a copy of the transcript so far: for N rollouts of one prompt.
    /// Changes in either never show in the other.
    pub fn fork(&mut self) -> Result<Session, SessionError> {
        self.save()?;
        let sandbox = self.sandbox.fork()?;
        let mut fork = Session::assemble(
            self.parts.clone(),
            sandbox,
            self.action_index,
            self.turn,
            self.offsets.clone(),
            Some(self.enforced.clone()),
            None,
        )?;
        let transcript = self.dir.path.join(store::TRANSCRIPT);
        let copied = std::fs::read(&transcript)
            .map_err(|source| {
                SessionError::Store(StoreError::Write {
                    path: transcript.clone(),
                    source,
                })
            })
            .and_then(|bytes| Ok(fork.dir.append_transcript(&bytes)?));
        if let Err(e) = copied {
            fork.close();
            return Err(e);
        }
        fork.chain = self.chain.clone();
        Ok(fork)
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// The handle that cancels the command a call of this session runs in the foreground
    /// (see [`crate::sandbox::cancel`]), made on the first ask.
    pub fn canceller(&mut self) -> std::io::Result<std::sync::Arc<crate::sandbox::cancel::Cancel>> {
        self.sandbox.cancel_handle()
    }

    pub fn action_index(&self) -> u64 {
        self.action_index
    }

    /// Whether the session offers `tool` (what [`Session::call`] checks first), without
    /// building the schemas.
    pub fn offers(&self, tool: &str) -> bool {
        self.parts.offered.iter().any(|t| t == tool)
    }

    /// What the session's maker stored with it (see [`SessionOptions::origin`]).
    pub fn origin(&self) -> &Value {
        &self.parts.origin
    }

    pub fn enforced(&self) -> &Enforced {
        &self.enforced
    }

    /// The session's directory (state.json, transcript.jsonl).
    pub fn dir(&self) -> &Path {
        &self.dir.path
    }

    /// The current turn (0 for the first prompt).
    pub fn turn(&self) -> usize {
        self.turn
    }

    /// The prompt of the current turn.
    pub fn prompt(&self) -> &str {
        self.parts
            .task
            .turns
            .get(self.turn)
            .map(String::as_str)
            .unwrap_or("")
    }

    /// Move to the next turn of an intent sequence; its prompt, or `None` after the last.
    pub fn next_turn(&mut self) -> Result<Option<String>, SessionError> {
        if self.turn + 1 >= self.parts.task.turns.len() {
            return Ok(None);
        }
        self.turn += 1;
        let prompt = self.parts.task.turns[self.turn].clone();
        let line = transcript::user_message(
            &prompt,
            &rfc3339(self.parts.clock.unix_at(self.action_index)),
            &mut self.chain,
        );
        self.dir.append_transcript(format!("{line}\n").as_bytes())?;
        self.save()?;
        Ok(Some(prompt))
    }

    /// The schemas of the tools this session offers, in a stable order.
    pub fn tool_schemas(&self) -> Vec<(String, String, Value)> {
        offered_schemas(&self.parts.offered, &self.parts.skills)
    }

    fn save(&self) -> Result<(), SessionError> {
        let state = State {
            version: 1,
            session_id: &self.id,
            task: self.parts.task.dir.display().to_string(),
            policy: &self.parts.policy.name,
            action_index: self.action_index,
            turn: self.turn,
            clock: self.parts.clock,
            seed: self.parts.seed,
            origin: &self.parts.origin,
            enforced: &self.enforced,
        };
        let bytes = serde_json::to_vec_pretty(&state).unwrap_or_default();
        self.dir.write_atomic("state.json", &bytes)?;
        Ok(())
    }

    /// Call `tool` with `args`: the result the agent sees, with the call's `action_index`.
    /// Never fails: every problem is a structured error result.
    pub fn call(&mut self, tool: &str, args: &Value) -> Value {
        let index = self.action_index;
        let now = self.parts.clock.at(index);
        let stamp = rfc3339(self.parts.clock.unix_at(index));
        let result = if !self.parts.offered.iter().any(|t| t == tool) {
            ToolError::invalid_argument(format!(
                "unknown tool `{}`: this environment offers {}",
                tool.chars().take(64).collect::<String>(),
                self.parts.offered.join(", ")
            ))
            .into()
        } else {
            match self.root.get_for_tool(&mut self.sandbox) {
                Ok(root) => {
                    let mut context = tools::Context {
                        root,
                        limit: Duration::from_secs(self.sandbox.plan().wall_time_secs),
                        sandbox: &mut self.sandbox,
                        offsets: &mut self.offsets,
                        skills: &self.parts.skills,
                        env: self.parts.command_env(index),
                        now,
                    };
                    tools::registry::call(&mut context, tool, args)
                }
                Err(e) => e.into(),
            }
        };
        self.action_index += 1;
        let is_error = !result.is_ok();
        let mut json = result.into_json();
        if let Value::Object(map) = &mut json {
            map.insert("action_index".into(), json!(index));
        }
        // Both lines in one append: a reader never sees a call without its result. Within
        // the policy's transcript limit; past it, the call runs and answers unrecorded.
        if !self.dir.transcript_cut() {
            let limit = self.parts.policy.limits.transcript_bytes;
            let mut before = self.chain.clone();
            let lines =
                transcript::call_lines(index, tool, args, &json, is_error, &stamp, &mut self.chain);
            let cut = || transcript::truncated_line(index, limit, &stamp, &mut before);
            match self.dir.append_call(&lines, limit, cut) {
                Ok(store::Appended::Cut) => {
                    tracing::warn!(session = %self.id, action = index, limit, "the transcript reached its limit: later calls are not recorded");
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::error!(session = %self.id, error = %crate::error::chain(&e), "transcript");
                }
            }
        }
        // state.json is rewritten at turns and forks, not per call: the transcript (appended
        // per call) is the record of every call and of the action index.
        json
    }

    /// Give the sandbox's workspace descriptors back while this process holds more sandboxes
    /// than it has room for them (see [`crate::sandbox::handback`]): they are asked for again
    /// by the next call that needs them. The server calls this as each request lets go of the
    /// session.
    pub fn settle(&mut self) {
        if crate::sandbox::handback::crowded() {
            self.root.give_back(&mut self.sandbox);
        }
    }

    /// Give the sandbox's workspace descriptors back now, whatever the room (see
    /// [`Session::settle`]); whether they were (not without namespaces: no init to ask).
    pub fn give_back_descriptors(&mut self) -> bool {
        self.root.give_back(&mut self.sandbox)
    }

    /// Whether the transcript reached the policy's `limits.transcript_bytes` (calls from
    /// then on are not recorded).
    pub fn transcript_truncated(&self) -> bool {
        self.dir.transcript_cut()
    }

    /// The manifests of the workspace as it started and as it is now (the latter from the
    /// former and the changes: O(changed bytes) beyond the template's hash), and where the
    /// workspace can be read.
    ///
    /// The session's processes are frozen while its changes are read (see
    /// [`Sandbox::frozen`]).
    fn manifests(&mut self) -> Result<(Manifest, Manifest, PathBuf), SessionError> {
        let cache = self
            .parts
            .sessions_root
            .parent()
            .map(|root| root.join("manifests"))
            .unwrap_or_else(|| std::env::temp_dir().join("envcraft-manifests"));
        let workspace = self.root.get(&mut self.sandbox)?.proc_path();
        self.sandbox.frozen(|sandbox| {
            let changes = sandbox.changes()?;
            let paths = sandbox.state_paths()?;
            let lowers = sandbox.plan().lowers.clone();
            let initial = crate::verify::cache::template_manifest(&lowers, &paths.view, &cache)?;
            let final_ = match &paths.changes {
                Some(source) => initial.apply_changes(source, &changes)?,
                None => initial.clone(),
            };
            Ok((initial, final_, workspace))
        })
    }

    /// The manifest of the workspace as it is now.
    pub fn final_manifest(&mut self) -> Result<Manifest, SessionError> {
        Ok(self.manifests()?.1)
    }

    /// The task this session runs.
    /// The sandbox policy the session runs under.
    pub fn policy(&self) -> &Policy {
        &self.parts.policy
    }

    pub fn task(&self) -> &TaskSpec {
        &self.parts.task
    }

    fn task_name(&self) -> String {
        format!("{}/{}", self.parts.task.env.name, self.parts.task.id)
    }

    /// What the task's `expected.json` should hold if this session's workspace is the right
    /// answer (after its reference solution): every changed path as a rule.
    pub fn record(&mut self) -> Result<Expected, SessionError> {
        let (initial, final_, _) = self.manifests()?;
        let verifier = &self.parts.task.verifier;
        let extra = match verifier.extra {
            crate::spec::task::ExtraFiles::Allow => Extra::Allow,
            crate::spec::task::ExtraFiles::Deny => Extra::Deny,
        };
        let mut expected = crate::verify::expected_from(&initial, &final_, extra);
        expected.all_or_nothing = verifier.all_or_nothing;
        Ok(expected)
    }

    /// The workspace's changes so far.
    pub fn changes(&mut self) -> Result<Changes, SessionError> {
        Ok(self.sandbox.changes()?)
    }

    /// Copy the changed files out (see `--keep`).
    pub fn keep_changes(&mut self, out: &Path) -> Result<(), SessionError> {
        // Frozen, so that what is kept is the state the change list describes.
        let changes = self.sandbox.frozen(|sandbox| {
            let changes = sandbox.changes()?;
            sandbox.keep_changes(&changes, out).map(|()| changes)
        })?;
        let transcript = self.dir.path.join("transcript.jsonl");
        let _ = std::fs::copy(transcript, out.join("transcript.jsonl"));
        // The originals of what changed, for a diff (see `workspace::keep_bases`).
        let changed: Vec<String> = changes
            .modified
            .iter()
            .chain(&changes.deleted)
            .cloned()
            .collect();
        let mut layers = Vec::new();
        if let Some(files) = &self.parts.task.files {
            layers.push(files.clone());
        }
        layers.push(self.parts.task.env.files.clone());
        crate::workspace::keep_bases(&layers, &changed, out).map_err(SandboxError::from)?;
        Ok(())
    }

    /// End the session: its processes, mounts, cgroup and directory.
    pub fn close(self) {
        self.sandbox.close();
        self.dir.remove();
    }
}

/// The schemas of `offered` tools (built-in ones, `exec`, and `skill` over `skills`), as
/// (name, description, JSON schema of the arguments).
pub fn offered_schemas(
    offered: &[String],
    skills: &[OfferedSkill],
) -> Vec<(String, String, Value)> {
    tools::registry::schemas(offered, skills)
        .into_iter()
        .map(|s| (s.name.to_string(), s.description.into_owned(), s.parameters))
        .collect()
}
