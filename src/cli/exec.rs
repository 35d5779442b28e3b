//! `envcraft exec`: one command in a fresh sandbox.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::cli::error::Error;
use crate::sandbox::plan::Request;
use crate::sandbox::{self, OutputMode, RunOptions};
use crate::spec::policy::Policy;

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The directory to work on; it is never modified (the sandbox sees a copy-on-write view).
    #[arg(long, value_name = "DIR")]
    pub workspace: PathBuf,
    /// A bundled policy name (default, strict, verifier, portable) or a policy file.
    #[arg(long, value_name = "NAME|FILE", default_value = "default")]
    pub policy: String,
    /// Wall-clock limit in seconds (overrides the policy's).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
    /// Print one JSON object with the outcome instead of passing output through.
    #[arg(long)]
    pub json: bool,
    /// Copy the changed files out to this (new or empty) directory after the run.
    #[arg(long, value_name = "OUT")]
    pub keep_changes: Option<PathBuf>,
    /// Run over this image's root filesystem (see `envcraft image`) instead of the host's.
    #[arg(long, value_name = "NAME")]
    pub image: Option<String>,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

pub fn run(args: ExecArgs) -> Result<i32, Error> {
    let policy = Policy::load(&args.policy)?;
    let workspace = args.workspace.canonicalize().map_err(|source| {
        sandbox::SandboxError::WorkspaceMissing {
            path: args.workspace.clone(),
            source,
        }
    })?;
    let state_root = crate::workspace::state_root::open(None)?;
    let image = match &args.image {
        Some(name) => {
            let store = crate::image::Store::open(&state_root)?;
            let record = store.image(name)?;
            Some(sandbox::image_root::ImageRoot::of(&store, &record))
        }
        None => None,
    };
    let request = Request {
        layers: vec![workspace],
        binds: Vec::new(),
        argv: args.command,
        timeout_secs: args.timeout,
        host_env: std::env::vars().collect(),
        without_namespaces: false,
        image,
    };
    let options = RunOptions {
        output: if args.json {
            OutputMode::Capture
        } else {
            OutputMode::PassThrough
        },
        inherit_stdin: !args.json,
        keep_changes: args.keep_changes,
        // Only the JSON outcome shows them.
        read_changes: args.json,
        state_root,
    };
    let outcome = sandbox::execute(&policy, &request, &options)?;
    if args.json {
        let mut out = std::io::stdout().lock();
        serde_json::to_writer(&mut out, &outcome).map_err(|e| Error::Output(e.into()))?;
        writeln!(out).map_err(Error::Output)?;
        return Ok(0);
    }
    if outcome.timed_out {
        eprintln!(
            "envcraft: the command ran past its wall-clock limit and was killed with its whole process tree"
        );
    }
    Ok(outcome.cli_exit_code())
}
