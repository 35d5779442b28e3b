//! Starting a command from the sandbox's init without copying the init's address space.
//!
//! The init is a clone of envcraft, and in the server envcraft holds every open session: a
//! plain fork of the init copied the page tables of all of it for each command (measured at
//! 1,000 open sessions: a third of the server's CPU went to `copy_page_range` and the teardown
//! of the copies), only for the child to throw them away at `execve`. As `posix_spawn` does, the
//! command is cloned with `CLONE_VM | CLONE_VFORK` onto a stack of its own: it shares the init's
//! memory and the init waits until it has executed (or failed). The child therefore runs only
//! raw system calls on data the init prepared before the clone: it allocates nothing, takes no
//! lock, runs no destructor, and reports a failure by writing the step and `errno` into memory
//! the init reads once it resumes.
//!
//! What the child does, in order: an empty signal mask (the init has set every ignored signal
//! back to its default: an ignored signal stays ignored across `execve`, and envcraft
//! ignores `SIGPIPE`), its own session (`setsid`: no way to the host's terminal), the
//! commands' memory cgroup where they have one (see `cgroup::COMMANDS`), stdio,
//! the workspace as working directory, the command's resource limits, every other descriptor
//! closed, `execve`. no_new_privs, capabilities, Landlock and seccomp are the init's already and
//! are inherited.

use std::ffi::{CString, c_void};
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};

/// What `execve` needs: the program, argv and environment as C strings with their pointer
/// arrays, built before anything starts (a NUL byte is refused here, not in the child).
pub struct Image {
    /// The resolved program; empty when it was not found (execve then fails with ENOENT).
    program: CString,
    _argv: Vec<CString>,
    argv_ptrs: Vec<*const libc::c_char>,
    _env: Vec<CString>,
    env_ptrs: Vec<*const libc::c_char>,
}

/// Why an [`Image`] or a [`Prepared`] command could not be built (a NUL byte where none may
/// be).
#[derive(Debug, PartialEq, Eq)]
pub struct NulByte(pub &'static str);

impl Image {
    /// `program` as resolved in the sandbox's PATH (`None`: not found), `argv` and `env` as
    /// given.
    pub fn new(
        program: Option<CString>,
        argv: &[String],
        env: &[(String, String)],
    ) -> Result<Image, NulByte> {
        let argv: Vec<CString> = argv
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<_, _>>()
            .map_err(|_| NulByte("an argument contains a NUL byte"))?;
        let env: Vec<CString> = env
            .iter()
            .map(|(k, v)| CString::new(format!("{k}={v}")))
            .collect::<Result<_, _>>()
            .map_err(|_| NulByte("an environment value contains a NUL byte"))?;
        let pointers = |strings: &[CString]| {
            let mut ptrs: Vec<*const libc::c_char> = strings.iter().map(|s| s.as_ptr()).collect();
            ptrs.push(std::ptr::null());
            ptrs
        };
        Ok(Image {
            program: program.unwrap_or_default(),
            argv_ptrs: pointers(&argv),
            _argv: argv,
            env_ptrs: pointers(&env),
            _env: env,
        })
    }

    /// Replace this process with the command; returns only on failure, with its `errno`.
    /// Raw system calls only: safe in the child of [`Spawner::spawn`].
    pub fn execve(&self) -> i32 {
        // SAFETY: every pointer is to a NUL-terminated string or a NULL-terminated array owned
        // by `self`, alive for the call; errno is read right after the failed call.
        unsafe {
            libc::execve(
                self.program.as_ptr(),
                self.argv_ptrs.as_ptr(),
                self.env_ptrs.as_ptr(),
            );
            *libc::__errno_location()
        }
    }
}

/// A command, ready to be started from the init: everything the child needs, built before
/// the clone.
pub struct Prepared {
    image: Image,
    workspace: CString,
    stdio: [RawFd; 3],
    rlimits: Vec<(libc::__rlimit_resource_t, libc::rlimit)>,
    /// A cgroup membership file the child writes `0` to, moving itself in.
    cgroup: Option<RawFd>,
}

impl Prepared {
    /// The command's [`Image`], the workspace to run it in, the three stdio descriptors,
    /// `(resource, soft, hard)` limits, and the membership file of a cgroup to join.
    pub fn new(
        image: Image,
        workspace: &std::path::Path,
        stdio: [RawFd; 3],
        rlimits: &[(libc::__rlimit_resource_t, u64, u64)],
        cgroup: Option<RawFd>,
    ) -> Result<Prepared, NulByte> {
        use std::os::unix::ffi::OsStrExt;
        let workspace = CString::new(workspace.as_os_str().as_bytes())
            .map_err(|_| NulByte("the workspace path contains a NUL byte"))?;
        Ok(Prepared {
            image,
            workspace,
            stdio,
            rlimits: rlimits
                .iter()
                .map(|&(resource, soft, hard)| {
                    (
                        resource,
                        libc::rlimit {
                            rlim_cur: soft,
                            rlim_max: hard,
                        },
                    )
                })
                .collect(),
            cgroup,
        })
    }
}

/// The exit code of a command whose `execve` failed with `errno`: 127 when there is no such
/// program, else 126 (as shells use them).
pub fn exec_exit_code(errno: i32) -> i32 {
    exit_code(EXECVE, errno)
}

/// The steps of the child, named for reports (index + 1 is what the child records).
const STEPS: &[&str] = &[
    "clear the signal mask",
    "setsid",
    "join the commands' cgroup",
    "set up stdio",
    "enter the workspace",
    "set rlimits",
    "close inherited descriptors",
    "execve",
];
const EXECVE: usize = STEPS.len() - 1;

/// How a started command failed before it ran: the step, the OS error, and the exit code the
/// child ended with (125 for a setup step, 126 or 127 for `execve`, as shells use them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub step: &'static str,
    pub errno: i32,
    pub exit_code: i32,
}

impl Failure {
    /// Whether `execve` itself failed (the command was not found or not executable).
    pub fn is_exec(&self) -> bool {
        self.step == STEPS[EXECVE]
    }
}

/// What the child writes for the init to read once it resumes.
struct Shared<'a> {
    command: &'a Prepared,
    /// 0 while nothing failed; else the index of the failed step + 1.
    failed: AtomicUsize,
    errno: AtomicI32,
}

/// Starts commands one at a time on a stack it keeps (the init waits for each child to
/// execute before it goes on, so one stack serves them all). The stack is a mapping of its own:
/// only the pages the child touches are ever made (a zeroed heap buffer cost the init 64 page
/// faults at its first command).
pub struct Spawner {
    stack: crate::sys::ChildStack,
}

/// The child's stack: what the few calls above need, with room to spare.
const STACK_BYTES: usize = 256 * 1024;

impl Spawner {
    pub fn new() -> io::Result<Spawner> {
        Ok(Spawner {
            // Used by one child at a time, each executed or exited before `spawn` returns.
            stack: crate::sys::ChildStack::new(STACK_BYTES)?,
        })
    }
}

impl Spawner {
    /// Start `command`: its pid, and how it failed if it did not get to run (it has exited
    /// then, and is reaped like any command).
    pub fn spawn(&mut self, command: &Prepared) -> io::Result<(libc::pid_t, Option<Failure>)> {
        let shared = Shared {
            command,
            failed: AtomicUsize::new(0),
            errno: AtomicI32::new(0),
        };
        // SAFETY: `child` only reads `shared` (which outlives the call: with CLONE_VFORK this
        // thread is suspended until the child has executed or exited) and makes raw system
        // calls; the stack is ours and used by nobody else meanwhile.
        let pid = unsafe {
            libc::clone(
                child,
                self.stack.top(),
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                &shared as *const Shared<'_> as *mut c_void,
            )
        };
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        let failure = match shared.failed.load(Ordering::SeqCst) {
            0 => None,
            n => Some(Failure {
                step: STEPS[n - 1],
                errno: shared.errno.load(Ordering::SeqCst),
                exit_code: exit_code(n - 1, shared.errno.load(Ordering::SeqCst)),
            }),
        };
        Ok((pid, failure))
    }
}

fn exit_code(step: usize, errno: i32) -> i32 {
    match (step, errno) {
        (EXECVE, libc::ENOENT) => 127,
        (EXECVE, _) => 126,
        _ => 125,
    }
}

/// The command process, on the spawner's stack, sharing the init's memory until `execve`.
extern "C" fn child(arg: *mut c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Shared` of `Spawner::spawn`, alive while the parent waits.
    let shared = unsafe { &*(arg as *const Shared<'_>) };
    let command = shared.command;
    let fail = |step: usize| -> libc::c_int {
        // SAFETY: errno is read right after the failed call, before any other call.
        let errno = unsafe { *libc::__errno_location() };
        shared.errno.store(errno, Ordering::SeqCst);
        shared.failed.store(step + 1, Ordering::SeqCst);
        // SAFETY: _exit ends this process at once; nothing of the parent's is touched.
        unsafe { libc::_exit(exit_code(step, errno)) }
    };
    // SAFETY: plain system calls on values owned by `command`, which outlives the child's use
    // of them (the parent is suspended until execve).
    unsafe {
        let mut empty: libc::sigset_t = std::mem::zeroed();
        if libc::sigemptyset(&mut empty) != 0
            || libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0
        {
            return fail(0);
        }
        if libc::setsid() < 0 {
            return fail(1);
        }
        // Before stdio is placed: the descriptor may be one of 0-2 (the init closed its own).
        if let Some(fd) = command.cgroup
            && libc::write(fd, c"0".as_ptr().cast(), 1) != 1
        {
            return fail(2);
        }
        // Out of the way first (above 10), so that placing one cannot clobber another.
        let mut moved = [0; 3];
        for (slot, &fd) in moved.iter_mut().zip(command.stdio.iter()) {
            *slot = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10);
            if *slot < 0 {
                return fail(3);
            }
        }
        for (target, &fd) in moved.iter().enumerate() {
            if libc::dup2(fd, target as libc::c_int) < 0 {
                return fail(3);
            }
        }
        if libc::chdir(command.workspace.as_ptr()) < 0 {
            return fail(4);
        }
        for (resource, limit) in &command.rlimits {
            if libc::setrlimit(*resource, limit) < 0 {
                return fail(5);
            }
        }
        if libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 0u32) < 0 {
            return fail(6);
        }
        command.image.execve();
        fail(EXECVE)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::io::Read;
    use std::os::fd::AsRawFd;

    fn run(program: Option<&str>, argv: &[&str]) -> (Option<Failure>, i32, String) {
        let (mut read, write) = std::io::pipe().unwrap();
        let null = std::fs::File::open("/dev/null").unwrap();
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        let image = Image::new(
            program.map(|p| CString::new(p).unwrap()),
            &argv,
            &[("PATH".into(), "/usr/bin:/bin".into())],
        )
        .unwrap();
        let command = Prepared::new(
            image,
            std::path::Path::new("/"),
            [null.as_raw_fd(), write.as_raw_fd(), write.as_raw_fd()],
            &[(libc::RLIMIT_CORE, 0, 0)],
            None,
        )
        .unwrap();
        let (pid, failure) = Spawner::new().unwrap().spawn(&command).unwrap();
        drop(write);
        let mut out = String::new();
        read.read_to_string(&mut out).unwrap();
        let mut status = 0;
        // SAFETY: waiting for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        (failure, libc::WEXITSTATUS(status), out)
    }

    #[test]
    fn a_command_runs_in_its_own_session_with_default_signals_and_only_stdio() {
        crate::sys::reset_ignored_signals().unwrap();
        let script = "read -r _ _ _ _ _ sid _ < /proc/$$/stat; test $sid = $$ || echo same-session; \
                      ign=$(awk '/^SigIgn/ {print $2}' /proc/self/status); \
                      [ $((0x$ign & 0x1000)) -eq 0 ] || echo sigpipe-ignored; \
                      ls /proc/self/fd | wc -l; pwd; ulimit -c";
        let (failure, code, out) = run(Some("/bin/sh"), &["sh", "-c", script]);
        assert_eq!(failure, None);
        assert_eq!(code, 0, "{out}");
        // 0, 1, 2 and the descriptor ls itself opens.
        assert_eq!(out, "4\n/\n0\n", "{out}");
    }

    #[test]
    fn a_missing_program_is_reported_with_127_and_a_bad_one_with_126() {
        let (failure, code, _) = run(None, &["nope"]);
        let failure = failure.unwrap();
        assert!(failure.is_exec());
        assert_eq!(
            (failure.errno, failure.exit_code, code),
            (libc::ENOENT, 127, 127)
        );
        let (failure, code, _) = run(Some("/"), &["root"]);
        let failure = failure.unwrap();
        assert!(failure.is_exec());
        assert_eq!((failure.errno, code), (libc::EACCES, 126));
    }

    #[test]
    fn nul_bytes_are_refused_before_anything_starts() {
        let image = Image::new(None, &["a\0b".into()], &[]);
        assert_eq!(
            image.err(),
            Some(NulByte("an argument contains a NUL byte"))
        );
    }
}
