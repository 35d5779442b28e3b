//! The `envcraft` command line: clap definitions and one file per subcommand. Each subcommand
//! translates flags into a library call and the result into output and an exit code.

mod agent_args;
mod audit;
mod doctor;
pub mod error;
mod exec;
mod exec_line;
mod export;
mod image;
mod import;
mod judge_args;
mod manifest;
mod mcp;
mod record;
mod run;
mod serve;
mod shell;
mod suite;
mod synth;
mod task_args;
mod tools;
mod verify;
mod view;

use clap::{Parser, Subcommand};

use crate::cli::error::{Error, exit};

#[derive(Debug, Parser)]
#[command(
    name = "envcraft",
    version,
    about = "Run agent tasks in isolated copy-on-write workspaces and score the result"
)]
pub struct Cli {
    /// Log format on stderr: `text` or `json` (level from ENVCRAFT_LOG, default `warn`).
    #[arg(long, global = true, default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command in a fresh sandbox over a copy-on-write view of a directory.
    Exec(exec::ExecArgs),
    /// Say what this machine can enforce, and which bundled policies can run here.
    Doctor(doctor::DoctorArgs),
    /// Replay tool calls in a fresh session of a task and report what they did.
    Run(run::RunArgs),
    /// Drive a session of a task by hand: type tool calls, see results.
    Shell(shell::ShellArgs),
    /// Print the tool schemas an LLM is given for a task.
    Tools(tools::ToolsArgs),
    /// Run a task's reference solution and write its expected.json.
    Record(record::RecordArgs),
    /// Print the manifest (kind, mode, sha256, path) of a directory.
    Manifest(manifest::ManifestArgs),
    /// Score a final workspace (a directory) against a task.
    Verify(verify::VerifyArgs),
    /// Audit tasks: reference scores 1, untouched fails, deterministic, sensitive, template intact.
    Audit(audit::AuditArgs),
    /// Run every task (reference solutions, or no actions), verified, in parallel; a table per
    /// environment.
    Suite(suite::SuiteArgs),
    /// Synthesize tasks along environments' tool graphs, grounded by execution, kept by the audit
    Synth(synth::SynthArgs),
    /// Import another project's tasks (ClawGym, PinchBench, Harbor) as environments.
    Import(import::ImportArgs),
    /// Export an environment's tasks in another project's format (Harbor task directories).
    Export(export::ExportArgs),
    /// Serve sessions over HTTP to rollout workers.
    Serve(serve::ServeArgs),
    /// Serve one session of a task over MCP on stdin/stdout, for an agent harness.
    Mcp(mcp::McpArgs),
    /// Write one self-contained HTML page of a kept run (`run --keep`) or a suite's `--json`.
    View(view::ViewArgs),
    /// Manage the images a task's root filesystem can come from (import, ls, inspect, rm, gc).
    #[command(subcommand)]
    Image(image::ImageCommand),
}

impl Cli {
    /// Parse the process's command line. A plain `envcraft exec ...` line is read by hand (see
    /// [`exec_line`]); every other line, and any `exec` line it declines, goes to clap.
    pub fn parse_process_args() -> Cli {
        let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
        exec_line::read(&argv).unwrap_or_else(|| Cli::parse_from(argv))
    }
}

/// Run the parsed command line; returns the process exit code.
pub fn run(cli: Cli) -> Result<i32, Error> {
    match cli.command {
        Command::Exec(args) => exec::run(args),
        Command::Doctor(args) => doctor::run(args),
        Command::Run(args) => run::run(args),
        Command::Shell(args) => shell::run(args),
        Command::Tools(args) => tools::run(args),
        Command::Record(args) => record::run(args),
        Command::Manifest(args) => manifest::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Audit(args) => audit::run(args),
        Command::Suite(args) => suite::run(args),
        Command::Synth(args) => synth::run(args),
        Command::Import(args) => import::run(args),
        Command::Export(args) => export::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Mcp(args) => mcp::run(args),
        Command::View(args) => view::run(args),
        Command::Image(command) => image::run(command),
    }
}

/// Print an error with its whole chain, as `envcraft: a: b: c`.
pub fn report(err: &Error) -> i32 {
    eprintln!("envcraft: {}", crate::error::chain(err));
    exit::ENVCRAFT
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use clap::{CommandFactory, Parser};

    use super::{Cli, Command};

    /// clap's own consistency checks over every subcommand.
    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    /// The shared directory flags reach the subcommand each was given to (two flattened
    /// structs with a same-named field once made clap take them for one argument).
    #[test]
    fn skills_and_workspaces_flags_land_where_they_were_given() {
        let cli = Cli::try_parse_from([
            "envcraft",
            "run",
            "ENV/T",
            "--skills",
            "S",
            "--workspaces",
            "W",
        ])
        .unwrap();
        let Command::Run(args) = cli.command else {
            panic!("not run")
        };
        assert_eq!(args.task.skills.path, std::path::Path::new("S"));
        assert_eq!(args.task.workspaces.path, std::path::Path::new("W"));
        let cli = Cli::try_parse_from(["envcraft", "serve", "--skills", "S2"]).unwrap();
        let Command::Serve(args) = cli.command else {
            panic!("not serve")
        };
        assert_eq!(args.skills.path, std::path::Path::new("S2"));
        assert_eq!(args.workspaces.path, std::path::Path::new("workspaces"));
    }
}
