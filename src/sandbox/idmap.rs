//! The sandbox's root is not host root: the template's layers (and the directories bound for
//! the run) are shown through idmapped mounts made by envcraft, as root, for the sandbox's own
//! user namespace (see [`super::plan::UidMapping::Idmapped`]).
//!
//! The init cannot make them: setting an idmapping needs CAP_SYS_ADMIN over the filesystem's
//! user namespace (the host's). envcraft clones each tree (`open_tree`), idmaps it through the
//! init's user namespace once its maps are written, and hands the detached trees to the init
//! with `Start`; the init attaches them (`move_mount`) where it would have bound the paths.

use std::fs;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::unistd::Pid;

use super::SandboxError;
use super::plan::{MountStep, Plan};
use crate::sys;

/// The host paths to idmap for `plan`, in the order the init attaches them: the template's
/// layers (at `lowerN`), the image's layers directory when the root is an image's (the store's
/// files belong to the host root that imported them: shown through the same mapping, the
/// image's root-only files are the sandbox root's, as in a container), then the sources of the
/// plan's `BindDirAt` steps, in plan order.
pub fn sources(plan: &Plan) -> Vec<PathBuf> {
    let binds = plan.mounts.iter().filter_map(|m| match m {
        MountStep::BindDirAt { source, .. } => Some(source.clone()),
        _ => None,
    });
    let image = plan.image.iter().map(|i| i.layers_dir.clone());
    plan.lowers
        .iter()
        .cloned()
        .chain(image)
        .chain(binds)
        .collect()
}

/// Detached, read-only, nosuid, nodev copies of the [`sources`] of `plan`, idmapped through the
/// user namespace of `init` (its maps written). A path whose filesystem refuses idmapped
/// mounts fails with [`SandboxError::IdmapRefused`], so that the run can be planned again
/// without them.
pub fn trees_for(init: Pid, plan: &Plan) -> Result<Vec<OwnedFd>, SandboxError> {
    let userns = fs::File::open(format!("/proc/{}/ns/user", init.as_raw()))
        .map_err(super::os("open the sandbox's user namespace"))?;
    let attrs = sys::MOUNT_ATTR_RDONLY | sys::MOUNT_ATTR_NOSUID | sys::MOUNT_ATTR_NODEV;
    let sources = sources(plan);
    // One message carries them all, with a seed: past that, the run is planned without them.
    if let Some(past) = sources.get(super::channel::MAX_FDS - 1) {
        return Err(SandboxError::IdmapRefused {
            path: past.clone(),
            source: std::io::Error::from_raw_os_error(libc::E2BIG),
        });
    }
    sources
        .iter()
        .map(|path| tree(path, userns.as_fd(), attrs))
        .collect()
}

fn tree(
    path: &Path,
    userns: std::os::fd::BorrowedFd<'_>,
    attrs: u64,
) -> Result<OwnedFd, SandboxError> {
    let refused = |source| SandboxError::IdmapRefused {
        path: path.to_path_buf(),
        source,
    };
    let tree = sys::open_tree_clone(path).map_err(refused)?;
    sys::idmap_tree(tree.as_fd(), userns, attrs).map_err(refused)?;
    Ok(tree)
}

/// Whether this process is host root: uid 0 of the initial user namespace (whose uid map is the
/// identity over every id), the only one that may idmap a host filesystem. Root of a user
/// namespace (envcraft run inside another sandbox) is not.
pub fn host_root(euid: u32) -> bool {
    euid == 0
        && fs::read_to_string("/proc/self/uid_map")
            .is_ok_and(|map| map.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"])
}

/// Whether a sandbox whose root is not host root can reach a state directory under
/// `state_root`: every directory on the way must let others search it (the init makes its
/// mounts there by path, as the sandbox's root).
pub fn reachable(state_root: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Ok(root) = state_root.canonicalize() else {
        return false;
    };
    root.ancestors().all(|dir| {
        fs::metadata(dir)
            .map(|m| m.permissions().mode() & 0o001 != 0)
            .unwrap_or(false)
    })
}
