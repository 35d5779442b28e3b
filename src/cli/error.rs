//! The CLI's error, gathering each module's own, and the exit codes the CLI documents. Only
//! the command line needs the aggregate: every module below it has its own error type.

use crate::sandbox::SandboxError;
use crate::spec::policy::PolicyError;
use crate::verify::VerifyError;
use crate::workspace::WorkspaceError;

/// Exit codes of `envcraft` itself (a command run by `exec` passes its own through).
pub mod exit {
    /// Usage error (bad flags).
    pub const USAGE: i32 = 2;
    /// The command ran past its wall-clock limit (as `timeout(1)`).
    pub const TIMEOUT: i32 = 124;
    /// envcraft failed: bad policy, missing workspace, sandbox could not be built or a
    /// required protection is not available here.
    pub const ENVCRAFT: i32 = 125;
    /// The command was found but could not be executed.
    pub const NOT_EXECUTABLE: i32 = 126;
    /// The command was not found in the sandbox's PATH.
    pub const NOT_FOUND: i32 = 127;
    /// `doctor`: the `default` policy cannot run on this machine.
    pub const DOCTOR_UNFIT: i32 = 1;
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
    #[error(transparent)]
    Verify(#[from] VerifyError),
    #[error("cannot write the output")]
    Output(#[source] std::io::Error),
    #[error(transparent)]
    Task(Box<crate::spec::TaskError>),
    #[error(transparent)]
    Skill(#[from] crate::spec::SkillError),
    #[error(transparent)]
    Time(#[from] crate::spec::time::TimeError),
    #[error(transparent)]
    Session(Box<crate::session::SessionError>),
    #[error(transparent)]
    Trajectory(#[from] crate::session::trajectory::TrajectoryError),
    #[error("task {0} has no solution.jsonl: give the calls to replay with --actions")]
    NoTrajectory(std::path::PathBuf),
    #[error(transparent)]
    Grader(#[from] crate::verify::command::GraderError),
    #[error(transparent)]
    Import(#[from] crate::import::ImportError),
    #[error(transparent)]
    Export(#[from] crate::export::harbor::ExportError),
    #[error(
        "task {task}: its image `{image}` is not in envcraft's image store and cannot be pulled ({reason}); import or pull it under that name (`envcraft image import FILE --name {image}`, `envcraft image pull REF --name {image}`), or pass `--base host` to run it over the host's read-only system paths instead"
    )]
    NoBaseImage {
        task: String,
        image: String,
        reason: String,
    },
    #[error(
        "no task under {0}: expected task directories (task.toml), environments (env.toml), a directory of environments, or a ClawGym, PinchBench or Harbor task set"
    )]
    NoTasks(String),
    #[error(transparent)]
    Server(#[from] crate::server::ServerError),
    #[error(transparent)]
    ImageImport(#[from] crate::image::ImportError),
    #[error(transparent)]
    ImageStore(#[from] crate::image::StoreError),
    #[error(transparent)]
    ImagePull(Box<crate::image::PullError>),
    #[error(transparent)]
    ImageBuild(Box<crate::image::BuildError>),
    #[error("{}", crate::error::chain(.0.as_ref()))]
    Provide(Box<crate::import::harbor::ProvideError>),
    #[error(transparent)]
    ImageCredentials(#[from] crate::image::CredentialsError),
    #[error(transparent)]
    StateRoot(#[from] crate::workspace::state_root::StateRootError),
    #[error(transparent)]
    Agent(Box<crate::agent::AgentError>),
    #[error("--agent runs the task's prompt through an agent; it does not replay --actions")]
    AgentWithActions,
    #[error("--agent openclaw needs --model-url URL (an OpenAI-compatible endpoint on loopback)")]
    NoModelUrl,
    #[error(transparent)]
    Judge(#[from] crate::cli::judge_args::JudgeArgsError),
    #[error(transparent)]
    View(#[from] crate::view::ViewError),
    #[error("the reference solution failed, so nothing was recorded: {0}")]
    SolutionFailed(String),
    #[error(transparent)]
    Synth(#[from] crate::synth::SynthError),
    #[error(
        "no environment at {0}: expected an environment directory (env.toml), a directory of environments, or an environment's name under --workspaces"
    )]
    NoEnvs(String),
}

// Large errors are boxed so that every `Result<_, Error>` stays small.
impl From<crate::spec::TaskError> for Error {
    fn from(e: crate::spec::TaskError) -> Self {
        Error::Task(Box::new(e))
    }
}

impl From<crate::image::PullError> for Error {
    fn from(e: crate::image::PullError) -> Self {
        Error::ImagePull(Box::new(e))
    }
}

impl From<crate::image::BuildError> for Error {
    fn from(e: crate::image::BuildError) -> Self {
        Error::ImageBuild(Box::new(e))
    }
}

impl From<crate::agent::AgentError> for Error {
    fn from(e: crate::agent::AgentError) -> Self {
        Error::Agent(Box::new(e))
    }
}

impl From<crate::session::SessionError> for Error {
    fn from(e: crate::session::SessionError) -> Self {
        Error::Session(Box::new(e))
    }
}
