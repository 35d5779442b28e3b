//! The `envcraft` command line: clap definitions and one file per subcommand. Each subcommand
//! translates flags into a library call and the result into output and an exit code.

mod audit;
mod doctor;
mod exec;
mod import;
mod manifest;
mod record;
mod run;
mod serve;
mod shell;
mod suite;
mod task_args;
mod tools;
mod verify;

use clap::{Parser, Subcommand};

use crate::error::{Error, exit};

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
    /// Import another project's Claw tasks (ClawGym, PinchBench) as environments.
    Import(import::ImportArgs),
    /// Serve sessions over HTTP to rollout workers.
    Serve(serve::ServeArgs),
}

impl Cli {
    /// Parse the process's command line. `envcraft exec ...` is parsed by a command line that
    /// holds only `exec` (same name, flags and help): building every subcommand's definition
    /// first cost the sandbox's one-shot start a fifth of a millisecond (mostly first-touch page
    /// faults in clap's code for subcommands that were never used).
    pub fn parse_process_args() -> Cli {
        if std::env::args_os().nth(1).is_some_and(|a| a == "exec") {
            let ExecOnlyCli {
                log_format,
                command: ExecOnly::Exec(args),
            } = ExecOnlyCli::parse();
            return Cli {
                log_format,
                command: Command::Exec(args),
            };
        }
        Cli::parse()
    }
}

/// [`Cli`] with `exec` alone (see [`Cli::parse_process_args`]); the attributes repeat
/// [`Cli`]'s, and a test checks that both parse and explain `exec` alike.
#[derive(Debug, Parser)]
#[command(
    name = "envcraft",
    version,
    about = "Run agent tasks in isolated copy-on-write workspaces and score the result"
)]
struct ExecOnlyCli {
    /// Log format on stderr: `text` or `json` (level from ENVCRAFT_LOG, default `warn`).
    #[arg(long, global = true, default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    #[command(subcommand)]
    command: ExecOnly,
}

#[derive(Debug, Subcommand)]
enum ExecOnly {
    /// Run a command in a fresh sandbox over a copy-on-write view of a directory.
    Exec(exec::ExecArgs),
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
        Command::Import(args) => import::run(args),
        Command::Serve(args) => serve::run(args),
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

    use super::{Cli, Command, ExecOnly, ExecOnlyCli};

    /// clap's own consistency checks over every subcommand.
    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
        ExecOnlyCli::command().debug_assert();
    }

    /// The `exec`-only command line parses, refuses and explains `envcraft exec ...` exactly
    /// as the whole one does.
    #[test]
    fn the_exec_only_command_line_matches_the_whole_one() {
        let full = Cli::command();
        let only = ExecOnlyCli::command();
        for cmd in [&full, &only] {
            assert_eq!(cmd.get_name(), "envcraft");
        }
        let help = |cmd: &clap::Command| {
            cmd.clone()
                .find_subcommand_mut("exec")
                .unwrap()
                .render_long_help()
                .to_string()
        };
        assert_eq!(help(&full), help(&only));
        let argvs: &[&[&str]] = &[
            &["envcraft", "exec", "--workspace", "W", "--", "true"],
            &[
                "envcraft",
                "exec",
                "--workspace",
                "W",
                "--policy",
                "strict",
                "--timeout",
                "5",
                "--json",
                "--keep-changes",
                "OUT",
                "--log-format",
                "json",
                "--",
                "sh",
                "-c",
                "echo hi",
            ],
            &["envcraft", "exec", "--workspace", "W"],
            &["envcraft", "exec", "--", "true"],
            &[
                "envcraft",
                "exec",
                "--workspace",
                "W",
                "--timeout",
                "x",
                "--",
                "true",
            ],
            &[
                "envcraft",
                "exec",
                "--workspace",
                "W",
                "--log-format",
                "xml",
                "--",
                "true",
            ],
            &["envcraft", "exec", "--help"],
            &["envcraft", "exec", "--bogus"],
        ];
        for argv in argvs {
            let whole = Cli::try_parse_from(*argv).map(|c| format!("{c:?}"));
            let alone = ExecOnlyCli::try_parse_from(*argv).map(|c| {
                let ExecOnlyCli {
                    log_format,
                    command: ExecOnly::Exec(args),
                } = c;
                format!(
                    "{:?}",
                    Cli {
                        log_format,
                        command: Command::Exec(args)
                    }
                )
            });
            match (whole, alone) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{argv:?}"),
                (Err(a), Err(b)) => {
                    assert_eq!(a.kind(), b.kind(), "{argv:?}");
                    assert_eq!(a.to_string(), b.to_string(), "{argv:?}");
                }
                (a, b) => panic!("{argv:?}: {a:?} vs {b:?}"),
            }
        }
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
