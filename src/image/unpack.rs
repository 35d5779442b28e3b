//! The unpacking sandbox: a layer is unpacked by a child process of envcraft's own, never by
//! envcraft itself, and never as root of the host.
//!
//! The child, cloned into a new user namespace (where it is root over nothing the host owns,
//! mapped to the invoking uid only), closes every descriptor but the layer's, the destination
//! directory's and its report pipe, and restricts itself with Landlock (every filesystem
//! right handled, all of them granted beneath the destination directory only; all TCP, and
//! abstract sockets and signals out of it, denied), before it reads one byte of the layer.
//! It then runs [`super::layer::unpack`] (whose hashing thread, in a clone of a single-threaded
//! envcraft, is started after the restriction and is under it too) and writes its result, as
//! JSON, on the pipe. Where the kernel cannot give the user namespace or Landlock, nothing is
//! unpacked.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use super::layer::{Hashing, LayerError, Limits, Source, Unpacked};

#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    #[error("cannot start the unpacking sandbox: {op}")]
    Start {
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("the unpacking sandbox could not be set up ({op}: {message}); nothing was unpacked")]
    Confine { op: String, message: String },
    #[error("the unpacking sandbox ended without a report (wait status {status})")]
    Lost { status: String },
    #[error(transparent)]
    Layer(#[from] LayerError),
}

/// What the child reports.
#[derive(serde::Serialize, serde::Deserialize)]
enum Report {
    Done(Unpacked),
    Refused(LayerError),
    Confine { op: String, message: String },
}

/// Where a layer's bytes are: a file, or a member of a tar archive (from `offset`, `len` bytes),
/// or, with offset 0, a pipe.
pub struct LayerSource {
    pub file: File,
    pub offset: u64,
    pub len: Option<u64>,
}

/// Unpack `layer` into the empty directory `dest`, in a child confined to `dest`.
pub fn unpack_confined(
    layer: LayerSource,
    dest: &Path,
    limits: Limits,
) -> Result<Unpacked, UnpackError> {
    let LayerSource {
        file: layer,
        offset,
        len,
    } = layer;
    let start = |op| move |source| UnpackError::Start { op, source };
    let dest_fd = crate::workspace::tree::open_root(dest)
        .map_err(|e| io::Error::other(e.to_string()))
        .map_err(start("open the layer's directory"))?;
    let (read_end, write_end) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
        .map_err(io::Error::from)
        .map_err(start("make the report pipe"))?;
    // A clone of a multi-threaded process must not make threads (see `super::blob`).
    let hashing = if single_threaded() {
        Hashing::Thread
    } else {
        Hashing::Inline
    };
    let uid = nix::unistd::geteuid().as_raw();
    let gid = nix::unistd::getegid().as_raw();
    let dest_path = dest.to_path_buf();
    match crate::sys::clone_process(libc::CLONE_NEWUSER).map_err(start("clone"))? {
        crate::sys::Cloned::Child => {
            drop(read_end);
            let report = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                child(
                    layer,
                    (offset, len),
                    &dest_fd,
                    &dest_path,
                    &write_end,
                    (uid, gid),
                    (limits, hashing),
                )
            }))
            .unwrap_or_else(|_| Report::Confine {
                op: "unpack".into(),
                message: "the unpacker panicked".into(),
            });
            let mut out = File::from(write_end);
            let ok = serde_json::to_vec(&report)
                .ok()
                .is_some_and(|bytes| out.write_all(&bytes).is_ok());
            crate::sys::exit_now(if ok { 0 } else { 1 })
        }
        crate::sys::Cloned::Parent(pid) => {
            drop(write_end);
            drop(layer);
            parent(read_end, pid)
        }
    }
}

/// Whether this process runs one thread (counted in `/proc/self/task`; false when unknown).
fn single_threaded() -> bool {
    std::fs::read_dir("/proc/self/task").is_ok_and(|tasks| tasks.count() == 1)
}

fn parent(read_end: OwnedFd, pid: libc::pid_t) -> Result<Unpacked, UnpackError> {
    let mut bytes = Vec::new();
    // A report is a few hundred bytes; a child that writes more is not ours to trust.
    let read = File::from(read_end).take(1 << 20).read_to_end(&mut bytes);
    let status = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
    let lost = || UnpackError::Lost {
        status: format!("{status:?}"),
    };
    read.map_err(|_| lost())?;
    match serde_json::from_slice::<Report>(&bytes).map_err(|_| lost())? {
        Report::Done(unpacked) => Ok(unpacked),
        Report::Refused(e) => Err(UnpackError::Layer(e)),
        Report::Confine { op, message } => Err(UnpackError::Confine { op, message }),
    }
}

/// The child's side: confine, then unpack. Runs in the cloned child only.
fn child(
    mut layer: File,
    (offset, len): (u64, Option<u64>),
    dest: &OwnedFd,
    dest_path: &Path,
    report: &OwnedFd,
    (uid, gid): (u32, u32),
    (limits, hashing): (Limits, Hashing),
) -> Report {
    if let Err((op, e)) = confine(&layer, dest, dest_path, report, uid, gid) {
        return Report::Confine {
            op: op.to_string(),
            message: e,
        };
    }
    use std::io::Seek;
    // A layer in a regular file is read at its chunks' offsets (by two threads, see
    // `super::blob`); one from its start may be a pipe (a pull hands the download over as it
    // arrives), read in order.
    let source = if layer.metadata().is_ok_and(|m| m.is_file()) {
        Source::File {
            file: layer,
            offset,
            len,
        }
    } else {
        if offset > 0
            && let Err(e) = layer.seek(io::SeekFrom::Start(offset))
        {
            return Report::Confine {
                op: "seek to the layer".into(),
                message: e.to_string(),
            };
        }
        Source::Stream(layer.take(len.unwrap_or(u64::MAX)))
    };
    match super::layer::unpack(source, dest, limits, hashing) {
        Ok(u) => Report::Done(u),
        Err(e) => Report::Refused(e),
    }
}

/// The confinement, in order: only our descriptors, identity in the new user namespace, then
/// Landlock (last: it would refuse the writes to `/proc/self` before it).
fn confine(
    layer: &File,
    dest: &OwnedFd,
    dest_path: &Path,
    report: &OwnedFd,
    uid: u32,
    gid: u32,
) -> Result<(), (&'static str, String)> {
    let fail = |op: &'static str| move |e: io::Error| (op, e.to_string());
    crate::sys::close_fds_except(
        3,
        &[layer.as_raw_fd(), dest.as_raw_fd(), report.as_raw_fd()],
    )
    .map_err(fail("close inherited descriptors"))?;
    let proc = PathBuf::from("/proc/self");
    std::fs::write(proc.join("setgroups"), "deny").map_err(fail("write setgroups"))?;
    std::fs::write(proc.join("uid_map"), format!("0 {uid} 1\n")).map_err(fail("write uid_map"))?;
    std::fs::write(proc.join("gid_map"), format!("0 {gid} 1\n")).map_err(fail("write gid_map"))?;
    crate::sys::become_namespace_root(false).map_err(fail("become the namespace's root"))?;
    landlock_to(dest_path).map_err(|e| ("restrict with Landlock", e))
}

fn landlock_to(dest: &Path) -> Result<(), String> {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
        RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
    };
    let abi = ABI::from(crate::sys::landlock_abi_version());
    let all = AccessFs::from_all(abi);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(|e| e.to_string())?;
    if crate::sys::landlock_abi_version() >= 4 {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(|e| e.to_string())?;
    }
    if crate::sys::landlock_abi_version() >= 6 {
        ruleset = ruleset
            .scope(Scope::from_all(abi))
            .map_err(|e| e.to_string())?;
    }
    let fd = PathFd::new(dest).map_err(|e| e.to_string())?;
    let status = ruleset
        .create()
        .and_then(|r| r.add_rule(PathBeneath::new(fd, all)))
        .and_then(|r| r.restrict_self())
        .map_err(|e| e.to_string())?;
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err(
            "this kernel enforces no Landlock ruleset: layers are not unpacked unconfined".into(),
        );
    }
    Ok(())
}
