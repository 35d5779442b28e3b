//! The mount helpers of the sandbox's init: binds, masks, tmpfs, `/dev`, and the plan's mount
//! steps applied below the new root (steps 4 and 5 of the table in [`super::child`]).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use nix::mount::{MsFlags, mount};

use super::child::{StateDirs, Step, StepError};
use super::plan::{DEVICES, MountStep};

/// The overlay `lowerdir` value for `n` layers bound at `lower0..`, relative to the state
/// directory (its own path may hold `,` or `:`).
pub(super) fn lowerdir(n: usize) -> String {
    (0..n)
        .map(|i| format!("lower{i}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// A directory of compatibility commands inside every sandbox (`python` → `python3`).
pub const COMPAT_BIN: &str = "/.envcraft/bin";
/// Where a grader's Python finds envcraft's `sitecustomize` (on the grader's `PYTHONPATH`).
pub const GRADER_PYTHON: &str = "/.envcraft/python";

/// Run by a grader's Python at start: the grader itself took no module from the workspace
/// (`PYTHONSAFEPATH`, already applied), and the programs it starts (the agent's, as the
/// task's harness runs them: `python -m app.cli`) get Python's default module path again.
const GRADER_SITECUSTOMIZE: &str = "# Written by envcraft (src/sandbox/mounts.rs): this grader's Python takes no module\n\
# from the workspace (PYTHONSAFEPATH); the Pythons it starts (the agent's programs) get the\n\
# default module path, as in the harness the task comes from.\n\
import os\n\
os.environ.pop(\"PYTHONSAFEPATH\", None)\n";

/// `root` + an absolute sandbox path.
pub(super) fn below(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// Flags of an existing mount that a user namespace may not clear (they are locked), to be
/// repeated when remounting.
pub(super) fn locked_flags(path: &Path) -> MsFlags {
    use nix::sys::statvfs::{FsFlags, statvfs};
    let mut flags = MsFlags::empty();
    if let Ok(st) = statvfs(path) {
        let f = st.flags();
        for (fs_flag, ms_flag) in [
            (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
            (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
            (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
            (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
            (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
            (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
        ] {
            if f.contains(fs_flag) {
                flags |= ms_flag;
            }
        }
    }
    flags
}

/// Bind `source` on `target` (non-recursive), read-only when asked.
pub(super) fn bind(source: &Path, target: &Path, read_only: bool) -> nix::Result<()> {
    mount(
        Some(source),
        target,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )?;
    if read_only {
        let flags = MsFlags::MS_REMOUNT
            | MsFlags::MS_BIND
            | MsFlags::MS_RDONLY
            | MsFlags::MS_NOSUID
            | MsFlags::MS_NODEV
            | locked_flags(source);
        mount(None::<&str>, target, None::<&str>, flags, None::<&str>)?;
    }
    Ok(())
}

/// Attach at `target` (made as a directory) a detached tree envcraft made (read-only already).
pub(super) fn attach_dir_at(
    tree: std::os::fd::BorrowedFd<'_>,
    target: &Path,
) -> Result<(), StepError> {
    fs::create_dir_all(target).step(&format!("create {}", target.display()))?;
    crate::sys::attach_tree(tree, target).step(&format!("attach the idmapped {}", target.display()))
}

pub(super) fn make_mountpoint(target: &Path, dir: bool) -> io::Result<()> {
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent)?;
    }
    if dir {
        fs::create_dir_all(target)
    } else if target.symlink_metadata().is_err() {
        fs::write(target, b"")
    } else {
        Ok(())
    }
}

/// What the sandbox's root holds without an image (the mountpoints and links of the plan).
const ROOT_BYTES: u64 = 1 << 20;
/// What the scratch's read-only part holds (the masks and the generated files).
const SCRATCH_BYTES: u64 = 1 << 20;
/// What `/dev` holds (device node mountpoints and links).
const DEV_BYTES: u64 = 64 << 10;

/// The size of the scratch tmpfs: its own files, the root's, and the room of each private
/// directory of the plan (HOME and `/tmp`, each [`MountStep::Tmpfs`]'s `bytes`), of `/dev` and
/// of `/dev/shm`. One filesystem, not one each: every filesystem instance on the machine costs
/// every memory cgroup a slot in its shrinkers' state, so that a session's filesystems cost
/// memory in proportion to the sessions the machine holds (see `bench/README.md`, "Ten
/// thousand sessions"). The private directories therefore share their room: one can hold
/// what the others leave (their total stays bounded, as the run's memory limit bounds them).
pub(super) fn scratch_bytes(plan: &super::plan::Plan) -> u64 {
    let root = if plan.image.is_none() { ROOT_BYTES } else { 0 };
    plan.mounts
        .iter()
        .map(|step| match step {
            MountStep::Tmpfs { bytes, .. } => *bytes,
            MountStep::Dev { shm_bytes } => DEV_BYTES.saturating_add(*shm_bytes),
            _ => 0,
        })
        .fold(SCRATCH_BYTES.saturating_add(root), u64::saturating_add)
}

/// Step 3: the scratch's writable part, bound on itself before the rest of the scratch is made
/// read-only (a bind keeps its own flags: read-write, nosuid, nodev), and in it a directory for
/// the root (without an image), each private directory (with its mode), `/dev` and `/dev/shm`.
pub(super) fn make_writable_areas(
    plan: &super::plan::Plan,
    dirs: &StateDirs,
) -> Result<(), StepError> {
    use std::os::unix::fs::PermissionsExt;
    let writable = dirs.writable();
    fs::create_dir(&writable).step("create the scratch's writable part")?;
    bind(&writable, &writable, false).step("bind the scratch's writable part")?;
    let mut areas: Vec<(PathBuf, u32)> = Vec::new();
    if plan.image.is_none() {
        areas.push((PathBuf::from("/"), 0o755));
    }
    for step in &plan.mounts {
        match step {
            MountStep::Tmpfs { path, mode, .. } => areas.push((path.clone(), *mode)),
            MountStep::Dev { .. } => {
                areas.push((PathBuf::from("/dev"), 0o755));
                areas.push((PathBuf::from("/dev/shm"), 0o1777));
            }
            _ => {}
        }
    }
    for (path, mode) in areas {
        let area = dirs.area(&path);
        fs::create_dir(&area).step(&format!("create the room of {}", path.display()))?;
        fs::set_permissions(&area, fs::Permissions::from_mode(mode))
            .step(&format!("set the mode of {}", path.display()))?;
    }
    Ok(())
}

/// Bind the room `area` of the scratch's writable part at `target` (made as a directory),
/// noexec where asked (a remount of the bind: the flag is this mount's own).
fn bind_area(area: &Path, target: &Path, noexec: bool) -> nix::Result<()> {
    bind(area, target, false)?;
    if noexec {
        let flags = MsFlags::MS_REMOUNT
            | MsFlags::MS_BIND
            | MsFlags::MS_NOSUID
            | MsFlags::MS_NODEV
            | MsFlags::MS_NOEXEC;
        mount(None::<&str>, target, None::<&str>, flags, None::<&str>)?;
    }
    Ok(())
}

pub(super) fn apply_mount(
    step: &MountStep,
    root: &Path,
    dirs: &StateDirs,
    workspace: &Path,
) -> Result<(), StepError> {
    match step {
        MountStep::BindReadOnly { path, dir } => {
            let target = below(root, path);
            make_mountpoint(&target, *dir).step(&format!("create {}", path.display()))?;
            bind(path, &target, true).step(&format!("bind {}", path.display()))
        }
        MountStep::BindDirAt { source, target } => {
            let at = below(root, target);
            fs::create_dir_all(&at).step(&format!("create {}", target.display()))?;
            bind(source, &at, true).step(&format!("bind {}", target.display()))
        }
        MountStep::Symlink { path, target } => {
            let link = below(root, path);
            if let Some(parent) = link.parent() {
                fs::create_dir_all(parent).step("create a symlink's parent")?;
            }
            std::os::unix::fs::symlink(target, &link).step(&format!("symlink {}", path.display()))
        }
        MountStep::Mask { path, dir } => {
            // An empty file, or an empty directory of mode 000, bound from the read-only
            // scratch tmpfs: read-only, nosuid, nodev and noexec as bound (see step 3).
            let source = if *dir {
                dirs.mask_dir()
            } else {
                dirs.mask_file()
            };
            let target = below(root, path);
            match bind(&source, &target, false) {
                // Gone from the host since the plan was made (a root-only file another
                // process removed meanwhile): there is nothing left to hide. A file made there
                // later is what a file made after the sandbox's start is: the plan's scan
                // never saw it either.
                Err(e) if e == nix::errno::Errno::ENOENT && target.symlink_metadata().is_err() => {
                    Ok(())
                }
                r => r.step(&format!("mask {}", path.display())),
            }
        }
        MountStep::Generated { path, .. } => {
            // Written in step 3, bound from the read-only scratch tmpfs like the masks.
            bind(&dirs.generated(path), &below(root, path), false)
                .step(&format!("show the policy's {}", path.display()))
        }
        MountStep::Tmpfs { path, .. } => {
            let target = below(root, path);
            fs::create_dir_all(&target).step(&format!("create {}", path.display()))?;
            bind_area(&dirs.area(path), &target, false)
                .step(&format!("bind the private {}", path.display()))
        }
        MountStep::Dev { .. } => mount_dev(root, dirs),
        MountStep::WorkspaceAlias { path } => {
            let target = below(root, path);
            fs::create_dir_all(&target).step(&format!("create {}", path.display()))?;
            let workspace = below(root, workspace);
            mount(
                Some(&workspace),
                &target,
                None::<&str>,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                None::<&str>,
            )
            .step(&format!("bind the workspace at {}", path.display()))
        }
        MountStep::WorkspaceDirAt { dir, path } => {
            let target = below(root, path);
            fs::create_dir_all(&target).step(&format!("create {}", path.display()))?;
            let source = workspace_dir(&below(root, workspace), dir)
                .step(&format!("open the workspace's {}", dir.display()))?;
            let source = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&source));
            mount(
                Some(source.as_str()),
                &target,
                None::<&str>,
                MsFlags::MS_BIND,
                None::<&str>,
            )
            .step(&format!(
                "bind the workspace's {} at {}",
                dir.display(),
                path.display()
            ))
        }
        MountStep::Proc => {
            let target = root.join("proc");
            fs::create_dir_all(&target).step("create /proc")?;
            mount(
                Some("proc"),
                &target,
                Some("proc"),
                MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
                None::<&str>,
            )
            .step("mount /proc")
        }
        MountStep::ClockShim => {
            use std::os::unix::fs::PermissionsExt;
            let path = below(root, Path::new(crate::clock_shim::SHIM_PATH));
            if let Some(dir) = path.parent() {
                fs::create_dir_all(dir).step("create the shim's directory")?;
            }
            fs::write(&path, crate::clock_shim::SHIM).step("install the clock shim")?;
            fs::set_permissions(&path, fs::Permissions::from_mode(0o555))
                .step("install the clock shim")?;
            // `python` for scripts that call it so (graders do, as often as `python3`), where
            // the system has only python3: /.envcraft/bin is on the verifier policy's PATH.
            let bin = below(root, Path::new(COMPAT_BIN));
            fs::create_dir_all(&bin).step("create /.envcraft/bin")?;
            // Judged in the new root (the host's binds, or an image), links not followed.
            let inside = |p: &str| below(root, Path::new(p)).symlink_metadata().is_ok();
            if !inside("/usr/bin/python") && inside("/usr/bin/python3") {
                std::os::unix::fs::symlink("/usr/bin/python3", bin.join("python"))
                    .step("link python to python3")?;
            }
            let python = below(root, Path::new(GRADER_PYTHON));
            fs::create_dir_all(&python).step("create /.envcraft/python")?;
            fs::write(python.join("sitecustomize.py"), GRADER_SITECUSTOMIZE)
                .step("write /.envcraft/python/sitecustomize.py")?;
            Ok(())
        }
        MountStep::Workspace { .. } => Ok(()), // handled by mount_workspace
    }
}

pub(super) fn mount_dev(root: &Path, dirs: &StateDirs) -> Result<(), StepError> {
    let dev = root.join("dev");
    fs::create_dir_all(&dev).step("create /dev")?;
    bind_area(&dirs.area(Path::new("/dev")), &dev, true).step("bind /dev")?;
    for name in DEVICES {
        let host = Path::new("/dev").join(name);
        if host.exists() {
            let target = dev.join(name);
            fs::write(&target, b"").step("create a device node mountpoint")?;
            mount(
                Some(&host),
                &target,
                None::<&str>,
                MsFlags::MS_BIND,
                None::<&str>,
            )
            .step(&format!("bind /dev/{name}"))?;
        }
    }
    for (link, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        std::os::unix::fs::symlink(target, dev.join(link)).step("create /dev symlinks")?;
    }
    let shm = dev.join("shm");
    fs::create_dir(&shm).step("create /dev/shm")?;
    bind_area(&dirs.area(Path::new("/dev/shm")), &shm, true).step("bind /dev/shm")
}

/// Step 5, from an image: the store's layers directory bound read-only at `image` in the state
/// directory (or, under host root, attached from the idmapped `tree` envcraft made of it,
/// read-only, nosuid and nodev, with the sandbox's root as the owner of root's files), and the root an overlay of the image's layers (topmost first) with an upper
/// layer of its own in the layer tmpfs (for the mountpoints; `/` is made read-only at step 9).
/// `userxattr`: the layers' whiteouts and opaque directories are the `user.overlay` ones the
/// unpacker made. Paths are relative to the state directory (the store's may hold `,` or `:`).
pub(super) fn mount_image_root(
    dirs: &StateDirs,
    image: &super::image_root::ImageRoot,
    tree: Option<std::os::fd::OwnedFd>,
) -> Result<(), StepError> {
    let lowerdir = image.lowerdir();
    if lowerdir.len() > 3900 {
        // mount(2) takes its options in one page.
        return Err(super::child::fail(
            "mount the image's root",
            format!(
                "image {} has {} layers, more than one overlay mount can name (about 50): flatten it (e.g. `skopeo copy` through a squashing tool) or rebuild it with fewer layers",
                image.name,
                image.layers.len()
            ),
        ));
    }
    match tree {
        Some(tree) => {
            crate::sys::attach_tree(std::os::fd::AsFd::as_fd(&tree), &dirs.base.join("image"))
                .step("attach the idmapped image layers")?
        }
        None => {
            bind(&image.layers_dir, &dirs.base.join("image"), true)
                .step("bind the image's layers")?;
        }
    }
    nix::unistd::chdir(&dirs.base).step("enter the state directory")?;
    let opts =
        format!("lowerdir={lowerdir},upperdir=layer/rootup,workdir=layer/rootwork,userxattr");
    let mounted = mount(
        Some("envcraft-image"),
        "root",
        Some("overlay"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(opts.as_str()),
    );
    nix::unistd::chdir("/").step("leave the state directory")?;
    mounted.step(&format!("mount the root of image {}", image.name))
}

/// The workspace's directory `dir`, made where missing, opened one name at a time with no link
/// followed (the host is still visible here, and a fork's workspace is the agent's: a name it
/// made a link must fail the step, never lead the bind out).
fn workspace_dir(workspace: &Path, dir: &Path) -> io::Result<std::os::fd::OwnedFd> {
    use nix::fcntl::OFlag;
    use std::os::unix::ffi::OsStrExt;
    let mut fd = nix::fcntl::open(
        workspace,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )?;
    for comp in dir.components() {
        let name = std::ffi::CString::new(comp.as_os_str().as_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        match nix::sys::stat::mkdirat(
            &fd,
            name.as_c_str(),
            nix::sys::stat::Mode::from_bits_truncate(0o755),
        ) {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
            Err(e) => return Err(e.into()),
        }
        fd = crate::workspace::tree::open_child(&fd, &name, OFlag::O_RDONLY | OFlag::O_DIRECTORY)?;
    }
    Ok(fd)
}
