//! Real agents as the agent of an envcraft session: today OpenClaw, unchanged, run inside the
//! session's sandbox and pointed at an OpenAI-compatible endpoint; its own transcript becomes
//! the session's, and the task's verifier scores what it left in the workspace.
//!
//! - [`install`]: where OpenClaw and its Node are on the host, and where the sandbox sees them;
//! - [`model_url`]: the endpoint, which must be on the host's loopback;
//! - [`policy`]: the environment's sandbox policy adjusted for OpenClaw (the model's port only);
//! - [`config`]: `openclaw.json`, as ClawGym-RL writes it;
//! - [`export`]: OpenClaw's session transcript out of its SQLite store, as JSONL;
//! - [`openclaw`]: one task's run: config, one `openclaw agent --local` per turn, transcript.

pub mod config;
pub mod export;
pub mod install;
pub mod model_url;
pub mod openclaw;
pub mod policy;

use std::path::PathBuf;

pub use self::install::Install;
pub use self::model_url::{ModelUrl, ModelUrlError};
pub use self::openclaw::{AgentRun, AttachedAgent, OpenClaw, TurnError, TurnReport};

/// Why an agent could not be set up or run.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(
        "OpenClaw is not installed (looked in {}): run `make openclaw`, or name an install with --openclaw-dir",
        looked.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    NotInstalled { looked: Vec<PathBuf> },
    #[error("cannot open the OpenClaw install at {path}")]
    Install {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    ModelUrl(#[from] ModelUrlError),
    #[error("model name {0:?}: expected 1-200 characters, none of them a control character")]
    ModelName(String),
    #[error(transparent)]
    Policy(#[from] crate::spec::policy::PolicyError),
    #[error(transparent)]
    Session(Box<crate::session::SessionError>),
    #[error("cannot write OpenClaw's config in the sandbox: {detail}")]
    Config { detail: String },
}

impl From<crate::session::SessionError> for AgentError {
    fn from(e: crate::session::SessionError) -> Self {
        AgentError::Session(Box::new(e))
    }
}
