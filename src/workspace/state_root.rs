//! The state root: where per-run and per-session state and the caches under it live.
//!
//! Promises: the default is a directory of our own, never a shared place itself
//! (`$XDG_RUNTIME_DIR/envcraft`, which is private to the user, else `/dev/shm/envcraft-UID`,
//! else `TMPDIR/envcraft-UID`); every directory of state ([`prepare`]: the root, `sessions/`,
//! `manifests/`) is made by our own `mkdir` with mode 0711 (only we can list or write it; the
//! execute bit lets a sandbox whose root is an unprivileged host uid reach its own run
//! directory, whose random name it is given), and one that already exists is
//! accepted only when it is a real directory (not a link), owned by the invoking uid and
//! writable by no group or other user. Anything else is refused, naming the directory, its
//! owner and mode and what is expected: someone else's directory could feed us poisoned
//! caches or swap what we write.

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Why a state directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StateRootError {
    #[error("cannot create the state directory {path}")]
    Create {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "the state directory {path} is owned by uid {owner} with mode {mode:04o}; expected a directory owned by uid {uid} that no group or other user can write (remove it, or choose another with --state-dir or ENVCRAFT_STATE_DIR)"
    )]
    NotPrivate {
        path: PathBuf,
        owner: u32,
        mode: u32,
        uid: u32,
    },
    #[error(
        "the state directory {path} is {what}; expected a directory owned by uid {uid} (remove it, or choose another with --state-dir or ENVCRAFT_STATE_DIR)"
    )]
    NotADirectory {
        path: PathBuf,
        what: &'static str,
        uid: u32,
    },
}

/// The state root to use: `explicit` (`--state-dir`), else `ENVCRAFT_STATE_DIR`, else the
/// default of [`default_root`]; made or checked by [`prepare`].
pub fn open(explicit: Option<PathBuf>) -> Result<PathBuf, StateRootError> {
    let root = explicit.unwrap_or_else(default_root);
    prepare(&root)?;
    Ok(root)
}

/// Where state goes when nobody said: `ENVCRAFT_STATE_DIR`, else `envcraft` in the user's
/// runtime directory (`XDG_RUNTIME_DIR`), else `/dev/shm/envcraft-UID`, else the system temp
/// dir's `envcraft-UID`. A memory-backed place keeps a run's one mkdir/rmdir cheap (ext4 with
/// online discard makes an rmdir wait for the disk). Not created here: see [`prepare`].
pub fn default_root() -> PathBuf {
    let writable_dir = |p: &Path| {
        p.is_dir()
            && nix::unistd::access(
                p,
                nix::unistd::AccessFlags::W_OK | nix::unistd::AccessFlags::X_OK,
            )
            .is_ok()
    };
    let uid = nix::unistd::geteuid().as_raw();
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && writable_dir(p))
        .filter(|p| {
            use std::os::unix::fs::MetadataExt;
            p.metadata().is_ok_and(|m| runtime_dir_fits(uid, m.mode()))
        });
    let shm = Path::new("/dev/shm");
    choose(
        std::env::var_os("ENVCRAFT_STATE_DIR").map(PathBuf::from),
        runtime,
        writable_dir(shm).then(|| shm.to_path_buf()),
        std::env::temp_dir(),
        uid,
    )
}

/// Whether a runtime directory of mode `mode` can hold the state root of `uid`: for root, only
/// one others may search, since a sandbox's root is then an unprivileged host uid that must
/// reach its run directory below it (`/run/user/0` is 0700: the run would lose its idmapped
/// template); for anyone else, whatever it is (their sandboxes run as themselves).
fn runtime_dir_fits(uid: u32, mode: u32) -> bool {
    uid != 0 || mode & 0o001 != 0
}

/// The choice of [`default_root`], from what the environment offers.
fn choose(
    state_dir: Option<PathBuf>,
    runtime: Option<PathBuf>,
    shm: Option<PathBuf>,
    temp: PathBuf,
    uid: u32,
) -> PathBuf {
    if let Some(dir) = state_dir.filter(|d| !d.as_os_str().is_empty()) {
        return dir;
    }
    if let Some(runtime) = runtime {
        return runtime.join("envcraft");
    }
    shm.unwrap_or(temp).join(format!("envcraft-{uid}"))
}

/// Make `dir` (mode 0711, its missing parents as `mkdir -p` would) or, when it exists, check
/// that it is ours: a directory (not a link) owned by the invoking uid that no group or
/// other user can write.
pub fn prepare(dir: &Path) -> Result<(), StateRootError> {
    let create_err = |source| StateRootError::Create {
        path: dir.to_path_buf(),
        source,
    };
    let mkdir = || std::fs::DirBuilder::new().mode(0o711).create(dir);
    match mkdir() {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(parent) = dir.parent() {
                std::fs::create_dir_all(parent).map_err(create_err)?;
            }
            match mkdir() {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(create_err(e)),
            }
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(create_err(e)),
    }
    check_ours(dir)
}

/// Refuse `dir` unless it is a directory (not a link) of the invoking uid that no group or
/// other user can write.
pub fn check_ours(dir: &Path) -> Result<(), StateRootError> {
    let uid = nix::unistd::geteuid().as_raw();
    let meta = dir
        .symlink_metadata()
        .map_err(|source| StateRootError::Create {
            path: dir.to_path_buf(),
            source,
        })?;
    if meta.file_type().is_symlink() {
        return Err(StateRootError::NotADirectory {
            path: dir.to_path_buf(),
            what: "a symbolic link",
            uid,
        });
    }
    if !meta.is_dir() {
        return Err(StateRootError::NotADirectory {
            path: dir.to_path_buf(),
            what: "not a directory",
            uid,
        });
    }
    if meta.uid() != uid || meta.mode() & 0o022 != 0 {
        return Err(StateRootError::NotPrivate {
            path: dir.to_path_buf(),
            owner: meta.uid(),
            mode: meta.mode() & 0o7777,
            uid,
        });
    }
    if meta.mode() & 0o011 != 0o011 {
        // Ours, but made private by an earlier envcraft (0700): open the way to the run
        // directories for a sandbox's unprivileged uid, nothing more.
        use std::os::unix::fs::PermissionsExt;
        let mode = (meta.mode() & 0o7777) | 0o011;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).map_err(|source| {
            StateRootError::Create {
                path: dir.to_path_buf(),
                source,
            }
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn roots_state_root_skips_a_runtime_directory_others_cannot_search() {
        assert!(!super::runtime_dir_fits(0, 0o40700));
        assert!(super::runtime_dir_fits(0, 0o41777));
        assert!(super::runtime_dir_fits(1000, 0o40700));
    }

    #[test]
    fn the_default_is_a_directory_of_our_own_not_the_shared_place_itself() {
        let tmp = PathBuf::from("/tmp");
        let shm = Some(PathBuf::from("/dev/shm"));
        let run = Some(PathBuf::from("/run/user/1000"));
        assert_eq!(
            choose(None, run.clone(), shm.clone(), tmp.clone(), 1000),
            Path::new("/run/user/1000/envcraft")
        );
        assert_eq!(
            choose(None, None, shm.clone(), tmp.clone(), 0),
            Path::new("/dev/shm/envcraft-0")
        );
        assert_eq!(
            choose(None, None, None, tmp.clone(), 7),
            Path::new("/tmp/envcraft-7")
        );
        assert_eq!(choose(Some("/x".into()), run, shm, tmp, 7), Path::new("/x"));
    }

    #[test]
    fn a_state_directory_is_made_private_and_one_writable_by_others_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("a/b/state");
        prepare(&root).unwrap();
        let mode = root.metadata().unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o711);
        // Ours already: accepted again.
        prepare(&root).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = prepare(&root).unwrap_err().to_string();
        assert!(
            err.contains("mode 0777") && err.contains("no group or other"),
            "{err}"
        );
        // A link to a private directory of ours is still refused: the link is what is named.
        let target = dir.path().join("target");
        prepare(&target).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = prepare(&link).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
    }
}
