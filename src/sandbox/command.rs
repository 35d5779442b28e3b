//! The command side of a sandbox (steps 13–16 of the table in [`super::child`]): the steps a
//! command process runs before `execve`, and, without namespaces, the entry point of a command
//! cloned by envcraft itself, which applies every restriction to itself.

use std::ffi::CString;
use std::io;
use std::os::fd::BorrowedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::unistd::chdir;

use super::channel::{Channel, Report};
use super::child::{
    Step, StepError, command_rlimits, fail, restrict_current_process, restrict_landlock,
};
use super::landlock;
use super::plan::Plan;
use super::seccomp::Program;
use super::spawn;
use crate::sys;

/// The standard streams the command gets.
#[derive(Clone, Copy)]
pub struct Stdio<'a> {
    pub stdin: BorrowedFd<'a>,
    pub stdout: BorrowedFd<'a>,
    pub stderr: BorrowedFd<'a>,
}

/// One command to run: its id (for reports), argv and whole environment.
pub struct CommandSpec<'a> {
    pub id: u64,
    pub argv: &'a [String],
    pub env: &'a [(String, String)],
}

/// Entry point of a command cloned by envcraft itself (no namespaces): it applies every
/// restriction to itself (steps 13–16, then 11–12). Never returns.
pub fn command_main(
    plan: &Plan,
    seccomp: &Program,
    rules: &landlock::Prepared,
    channel: &Channel,
    stdio: Stdio<'_>,
    command: &CommandSpec<'_>,
    workspace: &Path,
) -> ! {
    let code = match command_steps(plan, seccomp, rules, channel, stdio, command, workspace) {
        Ok(never) => match never {},
        Err((e, code)) => {
            // 126/127 were reported as ExecFailed already; anything else is a setup failure.
            if code == 125 {
                let _ = channel.send(
                    &Report::SetupFailed {
                        id: Some(command.id),
                        step: e.step,
                        errno: e.errno,
                        detail: e.detail,
                    },
                    &[],
                );
            }
            code
        }
    };
    sys::exit_now(code)
}

enum Never {}

fn command_steps(
    plan: &Plan,
    seccomp: &Program,
    rules: &landlock::Prepared,
    channel: &Channel,
    stdio: Stdio<'_>,
    command: &CommandSpec<'_>,
    workspace: &Path,
) -> Result<Never, (StepError, i32)> {
    let setup = |e: StepError| (e, 125);
    // 13. No ignored signal passed on (see `sys::reset_ignored_signals`), own session, the
    // planned stdio, the workspace as working directory.
    sys::reset_ignored_signals()
        .step("reset ignored signals")
        .map_err(setup)?;
    nix::unistd::setsid().step("setsid").map_err(setup)?;
    set_stdio(stdio).step("set up stdio").map_err(setup)?;
    chdir(workspace)
        .step("enter the workspace")
        .map_err(setup)?;

    let Some(name) = command.argv.first() else {
        return Err((fail("prepare argv", "no command given".into()), 125));
    };
    let program = resolve(name, &plan.search_path);
    let found = program.is_some();
    let image = spawn::Image::new(program, command.argv, command.env)
        .map_err(|spawn::NulByte(what)| (fail("prepare the command", what.into()), 125))?;

    // 14. Resource limits.
    for (resource, soft, hard) in command_rlimits(plan) {
        let limit = libc::rlimit {
            rlim_cur: soft,
            rlim_max: hard,
        };
        // SAFETY: a plain system call on a value we own.
        if unsafe { libc::setrlimit(resource, &limit) } < 0 {
            return Err(io::Error::last_os_error())
                .step("set rlimits")
                .map_err(setup);
        }
    }

    // 15. Landlock (required protections checked), then every descriptor but stdio and the
    // channel closed (the ruleset's among them); then step 12 for itself.
    let outcome = restrict_landlock(rules, plan).map_err(setup)?;
    sys::close_fds_except(3, &[channel.raw_fd()])
        .step("close inherited descriptors")
        .map_err(setup)?;
    restrict_current_process(seccomp).map_err(setup)?;

    // 16. Exec.
    if !found {
        let _ = channel.send(
            &Report::ExecFailed {
                id: command.id,
                errno: libc::ENOENT,
                exit_code: 127,
            },
            &[],
        );
        return Err((
            fail("find the command", format!("{name}: command not found")),
            127,
        ));
    }
    let _ = channel.send(
        &Report::CommandReady {
            id: command.id,
            landlock: outcome,
            capabilities_dropped: true,
            seccomp: true,
            no_new_privs: true,
        },
        &[],
    );
    let errno = image.execve();
    let exit_code = spawn::exec_exit_code(errno);
    let _ = channel.send(
        &Report::ExecFailed {
            id: command.id,
            errno,
            exit_code,
        },
        &[],
    );
    Err((
        fail(
            "execve",
            format!("{name}: {}", io::Error::from_raw_os_error(errno)),
        ),
        exit_code,
    ))
}

/// Put the planned descriptors at 0, 1 and 2, without close-on-exec. A descriptor already in
/// place (received descriptors take the lowest free numbers) only loses its close-on-exec
/// flag: dup2 onto itself would keep it.
fn set_stdio(stdio: Stdio<'_>) -> std::io::Result<()> {
    // Move all three out of the way first, so that placing one cannot clobber another and no
    // dup2 is a no-op.
    let stdin = sys::dup_above(stdio.stdin, 10)?;
    let stdout = sys::dup_above(stdio.stdout, 10)?;
    let stderr = sys::dup_above(stdio.stderr, 10)?;
    nix::unistd::dup2_stdin(&stdin)?;
    nix::unistd::dup2_stdout(&stdout)?;
    nix::unistd::dup2_stderr(&stderr)?;
    Ok(())
}

/// Find the program as `execvp` would, in the sandbox's PATH.
pub(super) fn resolve(name: &str, search_path: &[PathBuf]) -> Option<CString> {
    if name.contains('/') {
        return CString::new(name.as_bytes()).ok();
    }
    search_path
        .iter()
        .map(|dir| dir.join(name))
        .find(|p| {
            p.metadata()
                .map(|m| {
                    m.is_file()
                        && nix::unistd::access(p.as_path(), nix::unistd::AccessFlags::X_OK).is_ok()
                })
                .unwrap_or(false)
        })
        .and_then(|p| CString::new(p.as_os_str().as_bytes()).ok())
}
