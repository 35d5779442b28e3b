//! What runs after the clone, in the sandbox's own processes, in one documented order.
//!
//! With namespaces, the cloned process is the sandbox's *init* (PID 1 of the new PID
//! namespace). It builds the root, restricts itself, and starts each *command* process (see
//! [`super::spawn`]: sharing the init's memory until `execve`), which inherits every
//! restriction and executes the command:
//!
//! | # | who | step | why here |
//! |---|-----|------|----------|
//! | 1 | init | start the network namespace's helper ([`super::netns`]); reset ignored signals to their defaults; wait for `Start` (the plan and the state directory), set the hostname, compile the seccomp program, become uid/gid 0 of the namespace, drop supplementary groups | the init is cloned before envcraft plans the run ([`super::live::Prestart`]), so that the namespaces, the network one above all, are made while it plans; the parent writes the uid/gid maps before `Start`: only then do our credentials mean the mapped host user (the template's owner under root) rather than envcraft's. The helper is started on the guess that the plan wants a network namespace (the policy's network mode says so); a wrong guess is put right once the plan is here |
//! | 2 | init | make `/` private (recursive), before `Start` in step 1 | no mount made below may propagate to the host; it needs neither the plan nor a uid/gid map, so it overlaps the parent's planning |
//! | 3 | init | scratch tmpfs over the state dir: the mountpoints, a writable part bound on itself holding a directory each for the root, HOME, `/tmp`, `/dev` and `/dev/shm`, the masks (an empty file, an empty directory of mode 000), the files that name the machine with the policy's values (`/etc/hostname`, `/etc/hosts`, `/etc/machine-id`), then the rest read-only, nosuid, nodev, noexec; layer tmpfs (size = workspace limit) in it | the host sees one empty directory per run; upper/work live in memory owned by this sandbox: a disk fill hits ENOSPC here, never the host disk; a bind takes its source mount's flags, so the masks bound from the scratch are read-only without a remount each; two filesystems, not seven: each one on the machine costs every memory cgroup kernel memory (see `mounts::scratch_bytes`) |
//! | 4 | init | bind each template layer read-only at `lowerN` (or attach the idmapped tree envcraft made of it, see [`super::idmap`]); their union at `view` | the overlay's lower layers can never be written, whatever overlayfs does; the view is what changes are measured against; an idmapped layer shows its root-owned files as the sandbox's root's while the sandbox's root is no host root |
//! | 5 | init | the root bound from the scratch (or, from an image, a read-only bind of the store's layers and their overlay, see [`super::image_root`]) and the plan's mount steps | binds, masks, private directories, /dev, workspace overlay, aliases, /proc (last: needs the new PID namespace, and must precede pivot_root while the host's /proc is still visible to the kernel's check) |
//! | 6 | init | send the layer, workspace root and template view descriptors to the parent, keeping its own copies | the parent reads the upper layer after the sandbox is gone; a parent holding thousands of sandboxes gives its copies back and asks for them again (`HandOver`, see `handback`) |
//! | 7 | init | hostname (set in step 1, reported here); join the network namespace the helper made meanwhile, with loopback up (`setns`) | the helper needs neither the plan nor a uid/gid map: it overlaps the parent's planning and steps 1-6 (a network namespace costs more than the clone into all the others); joined before anything runs in the sandbox and before the init restricts itself (seccomp refuses setns) |
//! | 8 | init | pivot_root + detach the old root | afterwards no path leads to the host |
//! | 9 | init | remount `/` read-only; enter a cgroup namespace | nothing but the planned writable mounts can be written; /proc/self/cgroup shows only our cgroup |
//! | 10 | init | wait for `LimitsReady`, join the run's cgroup (keeping the way back to envcraft's); close every other fd (but the workspace's three of step 6, kept to hand over again: see `handback`); become non-dumpable | the parent makes the cgroup while steps 2–9 run; the init moves itself in (on cgroup v1 a process moving itself skips a global lock that costs an RCU grace period) before anything the agent controls starts; non-dumpable, with no capability left to the commands, the init lends nothing through /proc/1, and what it keeps is the sandbox's own (its layer, its workspace, its template's read-only union) |
//! | 11 | init | build and apply the Landlock ruleset (fail when a required part was not enforced) | the mounts are final; the init needs no path any more (it only holds descriptors it already has), and every command inherits the domain |
//! | 12 | init | no_new_privs, drop capabilities (bounding set, securebits, all sets), seccomp (one program: guard, then deny list) | the init needs none of them any more (it only forks, signals and reaps its commands); every command inherits them through fork, so they are paid once per sandbox, not once per command; seccomp last: it would refuse nothing above, but no_new_privs must precede it |
//! | 13 | command | an empty signal mask, setsid, stdio, chdir to the workspace | ignored signals were reset by the init (an ignored signal stays ignored across execve: envcraft ignores SIGPIPE); setsid detaches from the host's terminal (no TIOCSTI target) |
//! | 14 | command | rlimits | per command: the init itself must not be bound by the command's CPU-time and address-space limits |
//! | 15 | command | close every descriptor but stdio | nothing of the init's reaches the command |
//! | 16 | command | execve | |
//! | 17 | init | on `Shutdown` (or once the command sent with `last` has ended): kill and reap every other process, move back to envcraft's cgroups, report `Stopped`, exit | envcraft removes the run's cgroup and state as soon as the init reports, not after its exit (the kernel's teardown of its namespaces waits for an RCU grace period) |
//!
//! Without namespaces (the `portable` fallback) the cloned process is the command itself: it
//! runs steps 13–14, then 11 (Landlock) and 15, then 12 (no_new_privs, capabilities, seccomp)
//! for itself, over a copy of the workspace, and executes. The command side (steps 13–16, and
//! the no-namespace entry point) is [`super::command`].

use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::unistd::{chdir, pivot_root};

use super::channel::{Channel, Report};
use super::landlock;
pub use super::mounts::{COMPAT_BIN, GRADER_PYTHON};
use super::mounts::{apply_mount, attach_dir_at, below, bind, lowerdir};
use super::netns;
use super::plan::{MountStep, Plan, RlimitKind, UidMapping, WorkspaceKind};
use super::seccomp::Program;
use super::serve::{Kept, OomScore, Workspace, serve, stop};
use crate::spec::policy::Protection;
use crate::sys;
use crate::workspace::tree::Setid;

/// A failed setup step: which one, and the OS error.
pub struct StepError {
    pub step: String,
    pub errno: i32,
    pub detail: String,
}

pub(super) trait Step<T> {
    fn step(self, name: &str) -> Result<T, StepError>;
}

impl<T, E: Into<io::Error>> Step<T> for Result<T, E> {
    fn step(self, name: &str) -> Result<T, StepError> {
        self.map_err(|e| {
            let e: io::Error = e.into();
            StepError {
                step: name.to_string(),
                errno: e.raw_os_error().unwrap_or(0),
                detail: e.to_string(),
            }
        })
    }
}

pub(super) fn fail(step: &str, detail: String) -> StepError {
    StepError {
        step: step.to_string(),
        errno: 0,
        detail,
    }
}

/// The state directory of one run: on the host an empty directory (mode 0700) made by the
/// parent; inside the sandbox's mount namespace a scratch tmpfs with the mountpoints below.
pub struct StateDirs {
    pub base: PathBuf,
}

impl StateDirs {
    pub fn layer(&self) -> PathBuf {
        self.base.join("layer")
    }
    /// Where template layer `i` is bound (read-only).
    pub fn lower(&self, i: usize) -> PathBuf {
        self.base.join(format!("lower{i}"))
    }
    /// The union of the template layers (read-only): what the workspace starts as.
    pub fn view(&self) -> PathBuf {
        self.base.join("view")
    }
    pub fn root(&self) -> PathBuf {
        self.base.join("root")
    }
    /// The scratch tmpfs's writable part, bound on itself before the scratch is made
    /// read-only: the sandbox's own root (without an image), the plan's private directories
    /// (HOME, `/tmp`), `/dev` and `/dev/shm`, each bound at its place (see
    /// [`super::mounts::scratch_bytes`]).
    pub fn writable(&self) -> PathBuf {
        self.base.join("rw")
    }
    /// Where the private directory of sandbox path `path` is kept (named as
    /// [`StateDirs::generated`] names its files), or that of the root (`/`).
    pub fn area(&self, path: &Path) -> PathBuf {
        let name = path.to_string_lossy().replace('/', "!");
        self.writable().join(format!("area{name}"))
    }
    /// The empty file bound over masked files.
    pub fn mask_file(&self) -> PathBuf {
        self.base.join("empty")
    }
    /// The empty directory (mode 000) bound over masked directories.
    pub fn mask_dir(&self) -> PathBuf {
        self.base.join("masked")
    }
    /// Where the file generated for sandbox path `path` is written (see
    /// [`MountStep::Generated`]): named after the path, `/` spelled `!`.
    pub fn generated(&self, path: &Path) -> PathBuf {
        let name = path.to_string_lossy().replace('/', "!");
        self.base.join(format!("generated{name}"))
    }
}

/// Entry point of the cloned init (namespaced mode), cloned before its plan was made: it
/// comes with `Start`. With `make_network`, the network namespace is begun at once, on the
/// guess that the plan will want one. Never returns.
pub fn init_main(channel: &Channel, make_network: bool) -> ! {
    match init_steps(channel, make_network) {
        Ok(code) => sys::exit_now(code),
        Err(e) => {
            let _ = channel.send(
                &Report::SetupFailed {
                    id: None,
                    step: e.step,
                    errno: e.errno,
                    detail: e.detail,
                },
                &[],
            );
            sys::exit_now(125)
        }
    }
}

/// Block until the parent sends anything; the report and its descriptors.
fn wait_for_any(channel: &Channel) -> Result<(Report, Vec<OwnedFd>), StepError> {
    channel
        .recv()
        .step("wait for the parent")?
        .ok_or_else(|| fail("wait for the parent", "parent went away".into()))
}

fn init_steps(channel: &Channel, make_network: bool) -> Result<i32, StepError> {
    // The rows of the table above, in order; each function's comment says why it comes where
    // it does.
    let network = start_network(make_network)?; // 1 (the network namespace's helper)
    make_root_private()?; // 2
    // The init's OOM score, kept open for `serve`: opened while the init is still envcraft's
    // user (the uid change below makes it non-dumpable, its /proc files root's).
    let oom_score = OomScore::open();
    let mut init = receive_plan(channel, network)?; // 1 (the plan, hostname, seccomp, uid 0)
    make_scratch(&init)?; // 3
    seed_from_parent(&init)?; // 3 (a fork's changes)
    bind_template(&mut init)?; // 4
    let kind = build_root(&mut init)?; // 5
    let workspace = hand_over_workspace(channel, &init, kind)?; // 6
    join_network(&mut init)?; // 7
    enter_root(&init)?; // 8
    seal_root(channel, &init)?; // 9
    let (home, commands_cgroup) = join_cgroup(channel, oom_score.as_ref(), &workspace)?; // 10
    let landlock = apply_landlock(&init)?; // 11
    restrict_current_process(&init.seccomp)?; // 12
    channel
        .send(&Report::Ready { landlock }, &[])
        .step("report ready")?;
    let kept = Kept {
        oom_score,
        commands_cgroup,
        workspace,
    };
    serve(landlock, &init.plan, channel, kept)?; // 13-16, per command
    stop(home, channel); // 17
    Ok(0)
}

/// What the init holds between its steps, once the plan has come.
struct Init {
    plan: Box<Plan>,
    dirs: StateDirs,
    /// The network namespace being made by the helper (joined at step 7).
    network: Option<netns::Making>,
    /// Setting our hostname, done as the plan arrives; reported at step 7.
    own_hostname: Result<(), StepError>,
    seccomp: Program,
    /// A fork's parent's changes: (its layer, what kind of workspace it had).
    seed: Option<(OwnedFd, WorkspaceKind)>,
    /// The idmapped trees envcraft made for us (see `idmap`): the layers, then the binds.
    trees: std::vec::IntoIter<OwnedFd>,
    /// How many trees came (0 without idmapping).
    idmapped: usize,
}

/// Step 1: Begin the network namespace at once, on the guess the clone was given: the longest of
/// the steps, it needs neither the plan nor a uid/gid map, so its helper makes it beside
/// everything up to step 7 (see `netns`). Also: the parent-death signal, and no signal ignored
/// by envcraft (or by whoever started it) passed on to the commands.
fn start_network(make_network: bool) -> Result<Option<netns::Making>, StepError> {
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
        .step("set parent-death signal")?;
    let network = if make_network {
        Some(netns::Making::start().step("start making the network namespace")?)
    } else {
        None
    };
    sys::reset_ignored_signals().step("reset ignored signals")?;
    Ok(network)
}

/// Step 2: Nothing below propagates to the host. Needs neither the plan nor a uid/gid map (the
/// mount namespace is ours from the clone on), so it is done while the parent plans.
fn make_root_private() -> Result<(), StepError> {
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .step("make / private")
}

/// Step 1: The plan (`Start`, sent once the parent has written our uid/gid maps): put right the
/// network guess (a namespace nobody wants goes, dropping it reaps the helper; a wanted one is
/// begun now), set the hostname, compile the seccomp program, take the descriptors that came
/// with it, and become uid and gid 0 of the namespace: only now do our credentials mean the
/// mapped host user.
fn receive_plan(channel: &Channel, network: Option<netns::Making>) -> Result<Init, StepError> {
    let (start, fds) = wait_for_any(channel)?;
    let Report::Start {
        plan,
        state_dir,
        seed: seed_kind,
    } = start
    else {
        return Err(fail(
            "wait for the parent",
            "unexpected first message".into(),
        ));
    };
    let network = match (plan.network_namespace, network) {
        (true, None) => Some(netns::Making::start().step("start making the network namespace")?),
        (false, Some(_)) => None,
        (_, network) => network,
    };
    let own_hostname = nix::unistd::sethostname(&plan.hostname).step("set the hostname");
    let seccomp = Program::compile(&plan.seccomp)
        .map_err(|e| fail("compile the seccomp program", crate::error::chain(&e)))?;
    let mut fds = fds.into_iter();
    let seed = match seed_kind {
        Some(kind) => fds.next().map(|fd| (fd, kind)),
        None => None,
    };
    let trees: Vec<OwnedFd> = fds.collect();
    let idmapped = match plan.uid_mapping {
        UidMapping::Idmapped => super::idmap::sources(&plan).len(),
        _ => 0,
    };
    if trees.len() != idmapped {
        return Err(fail(
            "receive the idmapped trees",
            format!("{} came, {idmapped} expected", trees.len()),
        ));
    }
    crate::sys::become_namespace_root(plan.invoker_is_root)
        .step("become uid and gid 0 of the namespace")?;
    Ok(Init {
        plan,
        dirs: StateDirs { base: state_dir },
        network,
        own_hostname,
        seccomp,
        seed,
        trees: trees.into_iter(),
        idmapped,
    })
}

/// Step 3: A scratch tmpfs over the (empty) state directory holds the mountpoints below, so the host
/// sees one directory made and removed per run; the layer tmpfs in it (sized by the workspace
/// limit) holds the overlay's upper and work directories (or the copy): a disk fill ends in
/// ENOSPC there, never on the host's disk. The scratch also holds, in its writable part, the
/// sandbox's root, HOME, `/tmp`, `/dev` and `/dev/shm` (one filesystem for all of them: see
/// [`super::mounts::scratch_bytes`]). Then the masks and the generated files, and the rest of
/// the scratch becomes read-only, nosuid, nodev and noexec: a bind mount takes the flags of the
/// mount it comes from, so what is bound from it needs no remount of its own.
fn make_scratch(init: &Init) -> Result<(), StepError> {
    let (plan, dirs) = (&*init.plan, &init.dirs);
    let opts = format!("size={},mode=0700", super::mounts::scratch_bytes(plan));
    mount(
        Some("envcraft-scratch"),
        &dirs.base,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(opts.as_str()),
    )
    .step("mount the scratch tmpfs")?;
    for dir in [dirs.layer(), dirs.view(), dirs.root()]
        .into_iter()
        .chain((0..plan.lowers.len()).map(|i| dirs.lower(i)))
    {
        fs::create_dir(&dir).step("create the mountpoints")?;
    }
    super::mounts::make_writable_areas(plan, dirs)?;
    let layer = dirs.layer();
    let layer_opts = format!("size={},mode=0700", plan.workspace_bytes);
    mount(
        Some("envcraft-layer"),
        &layer,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(layer_opts.as_str()),
    )
    .step("mount the layer tmpfs")?;
    for d in ["upper", "work"] {
        fs::create_dir(layer.join(d)).step("create the upper layer")?;
    }
    if plan.image.is_some() {
        // The image root's own upper layer (its mountpoints only: `/` is read-only from step
        // 9 on), and where the store's layers are bound.
        for d in ["rootup", "rootwork"] {
            fs::create_dir(layer.join(d)).step("create the image root's layer")?;
        }
        fs::create_dir(dirs.base.join("image")).step("create the mountpoints")?;
    }
    fs::write(dirs.mask_file(), b"").step("create the mask file")?;
    fs::DirBuilder::new()
        .mode(0o000)
        .create(dirs.mask_dir())
        .step("create the mask directory")?;
    for step in &plan.mounts {
        if let MountStep::Generated { path, content } = step {
            write_read_only(&dirs.generated(path), content.as_bytes())
                .step(&format!("write the sandbox's {}", path.display()))?;
        }
    }
    mount(
        None::<&str>,
        &dirs.base,
        None::<&str>,
        MsFlags::MS_REMOUNT
            | MsFlags::MS_BIND
            | MsFlags::MS_RDONLY
            | MsFlags::MS_NOSUID
            | MsFlags::MS_NODEV
            | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .step("make the scratch tmpfs read-only")
}

/// Where a fork's parent's layer is read from: its descriptor, by `/proc/self/fd`.
fn seed_path(init: &Init) -> Option<(PathBuf, WorkspaceKind)> {
    init.seed.as_ref().map(|(fd, kind)| {
        (
            PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd())),
            *kind,
        )
    })
}

/// Step 3: A fork starts from its parent's changes: an upper layer (whiteouts and opaque
/// directories included) copied into ours before the overlay is mounted over it (a copy
/// workspace is copied at step 5).
fn seed_from_parent(init: &Init) -> Result<(), StepError> {
    if let Some((from, WorkspaceKind::Overlay)) = seed_path(init) {
        let upper = init.dirs.layer().join("upper");
        crate::workspace::copy::copy_layer(&from, &upper, Setid::Keep, init.plan.workspace_bytes)
            .map_err(|e| fail("copy the parent's changes", crate::error::chain(&e)))?;
    }
    Ok(())
}

/// Step 4: The template's layers, read-only, as the lower layers (attached from the idmapped trees
/// envcraft made, or bound), and their union: the view the changes are measured against. The
/// overlay's lower layers can never be written, whatever overlayfs does.
fn bind_template(init: &mut Init) -> Result<(), StepError> {
    let (plan, dirs) = (&*init.plan, &init.dirs);
    for (i, layer) in plan.lowers.iter().enumerate() {
        match init.trees.next() {
            // Made read-only, nosuid and nodev by envcraft, with the sandbox's root as owner.
            Some(tree) => sys::attach_tree(tree.as_fd(), &dirs.lower(i))
                .step("attach the idmapped template")?,
            None => bind(layer, &dirs.lower(i), true).step("bind the template read-only")?,
        }
    }
    if plan.lowers.len() == 1 {
        // A bind of the read-only lower0 is read-only as it is (it takes lower0's flags).
        return bind(&dirs.lower(0), &dirs.view(), false).step("bind the template view");
    }
    chdir(&dirs.base).step("enter the state directory")?;
    let opts = format!("lowerdir={},userxattr", lowerdir(plan.lowers.len()));
    let merged = mount(
        Some("envcraft-view"),
        "view",
        Some("overlay"),
        MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(opts.as_str()),
    );
    chdir("/").step("leave the state directory")?;
    merged.step("merge the template layers")
}

/// Step 5: The root (without an image, a directory of the scratch's writable part) and the
/// plan's mount steps: binds, masks, private directories, /dev, the workspace (overlay, copy or
/// read-only) and its aliases, /proc last (it needs the new PID namespace, and must precede
/// pivot_root while the host's /proc is still visible to the kernel's check).
fn build_root(init: &mut Init) -> Result<WorkspaceKind, StepError> {
    let root = init.dirs.root();
    match &init.plan.image {
        Some(image) => {
            // Idmapped, the layers' tree follows the template's (see `idmap::sources`).
            let tree = if init.idmapped > 0 {
                Some(
                    init.trees
                        .next()
                        .ok_or_else(|| fail("attach the image's layers", "no tree came".into()))?,
                )
            } else {
                None
            };
            super::mounts::mount_image_root(&init.dirs, image, tree)?
        }
        None => bind(&init.dirs.area(Path::new("/")), &root, false).step("bind the root")?,
    }
    let seed = seed_path(init);
    let seed = seed.as_ref().map(|(path, kind)| (path.as_path(), *kind));
    let (plan, dirs) = (&*init.plan, &init.dirs);
    let mut kind = WorkspaceKind::Overlay;
    for step in &plan.mounts {
        match step {
            MountStep::Workspace { path, writable } => {
                kind = mount_workspace(plan, dirs, &below(&root, path), *writable, seed)?;
            }
            MountStep::BindDirAt { target, .. } if init.idmapped > 0 => {
                let tree = init
                    .trees
                    .next()
                    .ok_or_else(|| fail("attach a bound directory", "no tree came".into()))?;
                attach_dir_at(tree.as_fd(), &below(&root, target))?;
            }
            _ => apply_mount(step, &root, dirs, &plan.workspace)?,
        }
    }
    Ok(kind)
}

/// Step 6: Hand the layer, the workspace root and the template view to the parent: it reads the
/// changes from the first after the sandbox is gone, and serves file tools through the second
/// (resolving beneath it). The init keeps its own copies, to hand them over again to a parent
/// that gave its copies back (see `handback`).
fn hand_over_workspace(
    channel: &Channel,
    init: &Init,
    kind: WorkspaceKind,
) -> Result<Workspace, StepError> {
    let root = init.dirs.root();
    let workspace = Workspace {
        kind,
        fds: [
            fs::File::open(init.dirs.layer()).step("open the layer")?,
            fs::File::open(below(&root, &init.plan.workspace)).step("open the workspace")?,
            fs::File::open(init.dirs.view()).step("open the template view")?,
        ],
    };
    workspace.send(channel).step("send the layer")?;
    Ok(workspace)
}

/// Step 7: Our own hostname (set in step 1), and the network namespace the helper made meanwhile,
/// with loopback up: joined before anything runs here and before the init restricts itself
/// (seccomp refuses setns).
fn join_network(init: &mut Init) -> Result<(), StepError> {
    std::mem::replace(&mut init.own_hostname, Ok(()))?;
    if let Some(network) = init.network.take() {
        network.join().map_err(|f| StepError {
            step: f.step.to_string(),
            errno: f.errno,
            detail: io::Error::from_raw_os_error(f.errno).to_string(),
        })?;
    }
    Ok(())
}

/// Step 8: Enter the new root; the host's tree is detached: afterwards no path leads to the host.
fn enter_root(init: &Init) -> Result<(), StepError> {
    chdir(&init.dirs.root()).step("enter the new root")?;
    pivot_root(".", ".").step("pivot_root")?;
    umount2(".", MntFlags::MNT_DETACH).step("detach the old root")?;
    chdir("/").step("chdir /")
}

/// Step 9: The root itself becomes read-only (nothing but the planned writable mounts can be
/// written); a cgroup namespace hides the host's cgroup paths.
fn seal_root(channel: &Channel, init: &Init) -> Result<(), StepError> {
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REMOUNT
            | MsFlags::MS_BIND
            | MsFlags::MS_RDONLY
            | MsFlags::MS_NOSUID
            | MsFlags::MS_NODEV,
        None::<&str>,
    )
    .step("remount / read-only")?;
    let entered = nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWCGROUP).is_ok();
    let _ = channel.send(&Report::CgroupNamespace { entered }, &[]);
    if !entered && init.plan.required.contains(&Protection::CgroupNamespace) {
        return Err(fail(
            "enter a cgroup namespace",
            "refused by the kernel".into(),
        ));
    }
    Ok(())
}

/// Step 10: Into the run's cgroup (the parent made it while we built the root), keeping the way back
/// (envcraft's own cgroups) for the end, before anything the agent controls starts; every other
/// descriptor closed, and non-dumpable: no command can borrow what the init keeps (its OOM
/// score and the commands' cgroup, for `serve`; the workspace's descriptors, which are the
/// sandbox's own) through /proc/1. Returns the way back, and the commands' cgroup's membership
/// file where they have one of their own.
fn join_cgroup(
    channel: &Channel,
    oom_score: Option<&OomScore>,
    workspace: &Workspace,
) -> Result<(Vec<OwnedFd>, Option<OwnedFd>), StepError> {
    let (limits, mut membership) = wait_for_any(channel)?;
    let Report::LimitsReady { join, commands } = limits else {
        return Err(fail("wait for the parent", "unexpected message".into()));
    };
    let mut home = membership.split_off(join.min(membership.len()));
    let commands_cgroup = (commands && !home.is_empty()).then(|| home.remove(0));
    super::cgroup::join_self(membership).step("join the run's cgroup")?;
    let mut keep: Vec<i32> = home.iter().map(AsRawFd::as_raw_fd).collect();
    keep.push(channel.raw_fd());
    keep.extend(oom_score.map(OomScore::raw_fd));
    keep.extend(commands_cgroup.as_ref().map(AsRawFd::as_raw_fd));
    keep.extend(workspace.fds.iter().map(AsRawFd::as_raw_fd));
    sys::close_fds_except(0, &keep).step("close inherited descriptors")?;
    nix::sys::prctl::set_dumpable(false).step("become non-dumpable")?;
    Ok((home, commands_cgroup))
}

/// Step 11: Landlock, built where the commands' mounts are and applied to the init itself: the
/// mounts are final, the init needs no path any more, and every command inherits the domain.
fn apply_landlock(init: &Init) -> Result<landlock::LandlockOutcome, StepError> {
    let rules = landlock::Prepared::build(&init.plan.landlock, sys::landlock_abi_version())
        .map_err(|e| fail("build the Landlock ruleset", crate::error::chain(&e)))?;
    restrict_landlock(&rules, &init.plan)
}

/// no_new_privs, every capability dropped, then the seccomp program. Scope: the process that
/// runs the commands or forks them (the init, or a command without namespaces), once its last
/// privileged step is done.
pub(super) fn restrict_current_process(seccomp: &Program) -> Result<(), StepError> {
    nix::sys::prctl::set_no_new_privs().step("set no_new_privs")?;
    drop_capabilities()?;
    seccomp
        .apply_to_current_thread()
        .map_err(|e| fail("seccomp", crate::error::chain(&e)))
}

/// Apply the Landlock ruleset to the calling thread; what it enforced, or an error when a
/// protection the policy requires was not.
pub(super) fn restrict_landlock(
    rules: &landlock::Prepared,
    plan: &Plan,
) -> Result<landlock::LandlockOutcome, StepError> {
    let outcome = rules
        .restrict_current_thread()
        .map_err(|e| fail("landlock", crate::error::chain(&e)))?;
    for (protection, ok) in [
        (Protection::LandlockFilesystem, outcome.filesystem),
        (Protection::LandlockNetwork, outcome.network),
        (Protection::LandlockScope, outcome.scope),
    ] {
        if !ok && plan.required.contains(&protection) {
            return Err(fail(
                "landlock",
                format!(
                    "{protection} is required but the kernel (Landlock ABI {}) did not enforce it",
                    outcome.abi
                ),
            ));
        }
    }
    Ok(outcome)
}

/// The (resource, soft, hard) limits every command gets.
pub(super) fn command_rlimits(plan: &Plan) -> Vec<(libc::__rlimit_resource_t, u64, u64)> {
    use nix::sys::resource::{Resource, getrlimit};
    plan.rlimits
        .iter()
        .map(|limit| {
            let (resource, current) = match limit.resource {
                RlimitKind::Cpu => (libc::RLIMIT_CPU, Resource::RLIMIT_CPU),
                RlimitKind::AddressSpace => (libc::RLIMIT_AS, Resource::RLIMIT_AS),
                RlimitKind::Processes => (libc::RLIMIT_NPROC, Resource::RLIMIT_NPROC),
                RlimitKind::FileSize => (libc::RLIMIT_FSIZE, Resource::RLIMIT_FSIZE),
                RlimitKind::OpenFiles => (libc::RLIMIT_NOFILE, Resource::RLIMIT_NOFILE),
                RlimitKind::Core => (libc::RLIMIT_CORE, Resource::RLIMIT_CORE),
            };
            // A hard limit can only be lowered: under a hard limit already below the policy's
            // (a server started with a small descriptor limit), the command gets the one in
            // force, which is stricter, rather than a setup that fails with EPERM.
            let in_force = getrlimit(current).map(|(_, hard)| hard).unwrap_or(u64::MAX);
            let hard = limit.hard.min(in_force);
            (resource, limit.soft.min(hard), hard)
        })
        .collect()
}

/// Clear the bounding set, lock the securebits so uid 0 gains nothing at exec, then clear
/// every capability set (the `caps` crate; once per sandbox, in the init). A process with no
/// capabilities at all (an unprivileged run without namespaces) has nothing to drop;
/// no_new_privs already keeps setuid binaries inert.
fn drop_capabilities() -> Result<(), StepError> {
    use caps::CapSet;
    let permitted = caps::read(None, CapSet::Permitted)
        .map_err(|e| fail("read capabilities", e.to_string()))?;
    if !permitted.is_empty() {
        caps::clear(None, CapSet::Bounding)
            .map_err(|e| fail("clear the bounding set", e.to_string()))?;
        sys::lock_securebits_noroot().step("lock securebits")?;
    }
    for set in [
        CapSet::Ambient,
        CapSet::Inheritable,
        CapSet::Effective,
        CapSet::Permitted,
    ] {
        caps::clear(None, set).map_err(|e| fail("drop capabilities", e.to_string()))?;
    }
    Ok(())
}

/// Write a new file of mode 0444.
fn write_read_only(path: &Path, content: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o444)
        .open(path)?;
    file.write_all(content)
}

/// Mount the workspace: the template bound read-only when the policy wants no writes; else an
/// overlay over it, or a copy where overlayfs is refused and the policy allows it.
fn mount_workspace(
    plan: &Plan,
    dirs: &StateDirs,
    target: &Path,
    writable: bool,
    seed: Option<(&Path, WorkspaceKind)>,
) -> Result<WorkspaceKind, StepError> {
    fs::create_dir_all(target).step("create the workspace mountpoint")?;
    if !writable {
        bind(&dirs.view(), target, true).step("bind the workspace read-only")?;
        return Ok(WorkspaceKind::ReadOnly);
    }
    if let Some((from, WorkspaceKind::Copy)) = seed {
        // The parent worked on a copy: so does its fork, starting from the parent's.
        let copy = dirs.layer().join("copy");
        crate::workspace::copy_tree(from, &copy)
            .map_err(|e| fail("copy the parent's workspace", crate::error::chain(&e)))?;
        bind(&copy, target, false).step("bind the workspace copy")?;
        return Ok(WorkspaceKind::Copy);
    }
    // Relative option paths: the state directory's own path may hold `,` or `:`.
    chdir(&dirs.base).step("enter the state directory")?;
    let opts = format!(
        "lowerdir={},upperdir=layer/upper,workdir=layer/work,userxattr",
        lowerdir(plan.lowers.len())
    );
    let result = mount(
        Some("envcraft-workspace"),
        target,
        Some("overlay"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(opts.as_str()),
    );
    chdir("/").step("leave the state directory")?;
    match result {
        Ok(()) => Ok(WorkspaceKind::Overlay),
        Err(e) if !plan.required.contains(&Protection::OverlayWorkspace) && seed.is_none() => {
            tracing::debug!(error = %e, "overlayfs refused; copying the workspace");
            let copy = dirs.layer().join("copy");
            crate::workspace::copy_tree(&dirs.view(), &copy)
                .map_err(|e| fail("copy the workspace", crate::error::chain(&e)))?;
            bind(&copy, target, false).step("bind the workspace copy")?;
            Ok(WorkspaceKind::Copy)
        }
        Err(e) => Err(e).step("mount the overlay workspace"),
    }
}
