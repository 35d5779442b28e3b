//! Shared fixtures for the integration tests: the `envcraft` binary, the
//! `contained` wrapper every attack runs through, the template and host
//! marker fixtures with their full snapshots, and a bounded `envcraft exec
//! --json` runner.
//!
//! Every attack test runs `bash contained envcraft exec ...` (optionally as
//! `nobody` through `setpriv`), so that a broken sandbox (a fork bomb, a
//! `kill -9 -1`, a memory bomb) cannot take the test machine down with it.
//! No helper here ever waits for an event without a deadline.

#![allow(dead_code)]

use std::collections::hash_map::RandomState;
use std::ffi::CString;
use std::fs::{self, File};
use std::hash::{BuildHasher, Hasher};
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The envcraft binary under test.
pub fn envcraft() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_envcraft"))
}

/// `<CARGO_MANIFEST_DIR>/../shared/tools/contained`, if it is there.
pub fn contained() -> Option<PathBuf> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/tools/contained");
    path.is_file().then_some(path)
}

/// Skip loudly: print `skipping: <why>`; with `ENVCRAFT_TEST_REQUIRE=all`,
/// fail instead.
pub fn skip(why: &str) {
    if std::env::var("ENVCRAFT_TEST_REQUIRE").as_deref() == Ok("all") {
        panic!("required but unavailable (ENVCRAFT_TEST_REQUIRE=all): {why}");
    }
    eprintln!("skipping: {why}");
}

/// Whether attacks can be run at all: `contained` exists and we are root
/// (it needs root to create its cgroup). Skips loudly otherwise.
pub fn sandbox_ready() -> bool {
    if contained().is_none() {
        skip("shared/tools/contained is missing; attacks must not run without it");
        return false;
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        skip("contained needs root to create its cgroup");
        return false;
    }
    true
}

/// Whether the attacks can also be run as `nobody` (needs `setpriv`).
pub fn nobody_ready() -> bool {
    if !sandbox_ready() {
        return false;
    }
    if !Path::new(SETPRIV).is_file() {
        skip("setpriv is missing: cannot run envcraft as nobody");
        return false;
    }
    true
}

/// Whether this kernel lets an unprivileged process create user namespaces
/// (otherwise an `unshare` attack proves nothing).
pub fn user_namespaces_available() -> bool {
    let max = fs::read_to_string("/proc/sys/user/max_user_namespaces")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0);
    let unpriv = fs::read_to_string("/proc/sys/kernel/unprivileged_userns_clone")
        .map(|s| s.trim() != "0")
        .unwrap_or(true);
    max > 0 && unpriv
}

/// A random token, unique per call, to name markers, secrets and processes.
pub fn unique_token() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    format!("{:016x}", h.finish())
}

/// Serializes the tests that use a lot of disk, memory or processes, so
/// their measurements do not see each other.
pub fn heavy_test_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

// ---------------------------------------------------------------------------
// Snapshots: the full content and metadata of a tree.

/// What kind of file an entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    Dir,
    File(Vec<u8>),
    Symlink(PathBuf),
    Other(u32),
}

/// One file of a snapshot: everything that a write, chmod, chown, link,
/// rename, xattr change or delete would change. (atime is left out: reading
/// is not a change.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: PathBuf,
    pub kind: EntryKind,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub nlink: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: (i64, i64),
    pub ctime_ns: (i64, i64),
    pub xattrs: Vec<(Vec<u8>, Vec<u8>)>,
}

/// A full snapshot of a tree, sorted by path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot(pub Vec<Entry>);

impl Snapshot {
    pub fn of(root: &Path) -> Snapshot {
        let mut entries = Vec::new();
        for item in walkdir::WalkDir::new(root)
            .follow_links(false)
            .sort_by_file_name()
        {
            let item = item.unwrap_or_else(|e| panic!("walking {}: {e}", root.display()));
            let path = item.path();
            let meta = fs::symlink_metadata(path)
                .unwrap_or_else(|e| panic!("lstat {}: {e}", path.display()));
            let ft = meta.file_type();
            let kind = if ft.is_dir() {
                EntryKind::Dir
            } else if ft.is_symlink() {
                EntryKind::Symlink(fs::read_link(path).expect("readlink"))
            } else if ft.is_file() {
                EntryKind::File(fs::read(path).expect("read template file"))
            } else {
                EntryKind::Other(meta.mode() & libc::S_IFMT)
            };
            entries.push(Entry {
                path: path.strip_prefix(root).expect("under root").to_path_buf(),
                kind,
                mode: meta.mode(),
                uid: meta.uid(),
                gid: meta.gid(),
                nlink: meta.nlink(),
                ino: meta.ino(),
                size: meta.size(),
                mtime_ns: (meta.mtime(), meta.mtime_nsec()),
                ctime_ns: (meta.ctime(), meta.ctime_nsec()),
                xattrs: xattrs_of(path),
            });
        }
        Snapshot(entries)
    }

    /// A readable list of differences, empty when equal.
    pub fn diff(&self, other: &Snapshot) -> Vec<String> {
        let mut out = Vec::new();
        for a in &self.0 {
            match other.0.iter().find(|b| b.path == a.path) {
                None => out.push(format!("removed: {}", a.path.display())),
                Some(b) if a != b => out.push(format!(
                    "changed: {}\n  before: {}\n  after:  {}",
                    a.path.display(),
                    short_entry(a),
                    short_entry(b)
                )),
                Some(_) => {}
            }
        }
        for b in &other.0 {
            if !self.0.iter().any(|a| a.path == b.path) {
                out.push(format!("added: {} ({})", b.path.display(), short_entry(b)));
            }
        }
        out
    }
}

fn short_entry(e: &Entry) -> String {
    let kind = match &e.kind {
        EntryKind::Dir => "dir".to_string(),
        EntryKind::File(bytes) => format!(
            "file {:?}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(80)])
        ),
        EntryKind::Symlink(t) => format!("symlink -> {}", t.display()),
        EntryKind::Other(t) => format!("special {t:o}"),
    };
    format!(
        "{kind} mode={:o} uid={} gid={} nlink={} ino={} size={} mtime={:?} ctime={:?} xattrs={}",
        e.mode,
        e.uid,
        e.gid,
        e.nlink,
        e.ino,
        e.size,
        e.mtime_ns,
        e.ctime_ns,
        e.xattrs.len()
    )
}

/// All extended attributes of `path` (not following symlinks), sorted.
fn xattrs_of(path: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let Ok(cpath) = CString::new(path.as_os_str().as_bytes()) else {
        return Vec::new();
    };
    let mut names = vec![0u8; 64 * 1024];
    // SAFETY: cpath is a valid NUL-terminated string and `names` is a
    // writable buffer of the length passed.
    let len = unsafe { libc::llistxattr(cpath.as_ptr(), names.as_mut_ptr().cast(), names.len()) };
    if len <= 0 {
        return Vec::new();
    }
    names.truncate(len as usize);
    let mut out = Vec::new();
    for name in names.split(|b| *b == 0).filter(|n| !n.is_empty()) {
        let Ok(cname) = CString::new(name) else {
            continue;
        };
        let mut value = vec![0u8; 64 * 1024];
        // SAFETY: both strings are NUL-terminated; `value` is writable for
        // the length passed.
        let vlen = unsafe {
            libc::lgetxattr(
                cpath.as_ptr(),
                cname.as_ptr(),
                value.as_mut_ptr().cast(),
                value.len(),
            )
        };
        value.truncate(vlen.max(0) as usize);
        out.push((name.to_vec(), value));
    }
    out.sort();
    out
}

/// Makes a tree readable (and its directories searchable) by everyone, so an
/// unprivileged run (as `nobody`) can use it. Symlinks are left alone.
pub fn make_world_readable(root: &Path) {
    for item in walkdir::WalkDir::new(root).follow_links(false) {
        let item = item.expect("walk");
        let meta = fs::symlink_metadata(item.path()).expect("lstat");
        if meta.file_type().is_symlink() {
            continue;
        }
        let extra = if meta.is_dir() { 0o555 } else { 0o444 };
        let mode = (meta.mode() & 0o7777) | extra;
        fs::set_permissions(item.path(), fs::Permissions::from_mode(mode)).expect("chmod a+rX");
    }
}

// ---------------------------------------------------------------------------
// The template (the workspace DIR) and host markers.

/// A workspace template: a temp dir (0755, under /tmp) with text files, a
/// subdirectory, an executable script and an internal symlink; its full
/// snapshot is taken at creation.
pub struct Template {
    dir: tempfile::TempDir,
    token: String,
    before: Snapshot,
}

/// The content of the template's README.txt starts with this.
pub const TEMPLATE_README_PREFIX: &str = "template readme ";

impl Template {
    pub fn new() -> Template {
        Template::build(|_| {})
    }

    /// The template a run as `who` uses: an unprivileged user runs envcraft
    /// on files of their own, so for `RunAs::Nobody` the whole tree is
    /// owned by nobody.
    pub fn for_user(who: RunAs) -> Template {
        Template::build_as(who, |_| {})
    }

    /// A template with the standard files plus whatever `plant` adds (a
    /// symlink pointing out, a hard link to a host file...). The snapshot is
    /// taken after `plant`.
    pub fn build(plant: impl FnOnce(&Path)) -> Template {
        Template::build_as(RunAs::Caller, plant)
    }

    /// `build`, owned by `who`.
    pub fn build_as(who: RunAs, plant: impl FnOnce(&Path)) -> Template {
        let dir = tempfile::Builder::new()
            .prefix("ectest-tmpl-")
            .tempdir_in("/tmp")
            .expect("template tempdir");
        let root = dir.path();
        let token = unique_token();
        fs::write(
            root.join("README.txt"),
            format!("{TEMPLATE_README_PREFIX}{token}\n"),
        )
        .expect("write");
        fs::create_dir_all(root.join("sub/deeper")).expect("mkdir");
        fs::create_dir(root.join("empty-dir")).expect("mkdir");
        fs::write(root.join("sub/data.csv"), "a,b\n1,2\n").expect("write");
        fs::write(root.join("sub/deeper/note.md"), "# note\n\ndeep file\n").expect("write");
        fs::write(root.join("run.sh"), "#!/bin/sh\necho template-script\n").expect("write");
        fs::set_permissions(root.join("run.sh"), fs::Permissions::from_mode(0o755)).expect("chmod");
        fs::write(root.join("ro.txt"), "read only\n").expect("write");
        fs::set_permissions(root.join("ro.txt"), fs::Permissions::from_mode(0o444)).expect("chmod");
        std::os::unix::fs::symlink("README.txt", root.join("link-to-readme")).expect("symlink");
        plant(root);
        make_world_readable(root);
        fs::set_permissions(root, fs::Permissions::from_mode(0o755)).expect("chmod root");
        if who == RunAs::Nobody {
            for item in walkdir::WalkDir::new(root).follow_links(false) {
                let item = item.expect("walk");
                std::os::unix::fs::lchown(item.path(), Some(NOBODY), Some(NOBODY))
                    .expect("chown template to nobody");
            }
        }
        let before = Snapshot::of(root);
        Template { dir, token, before }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The unique token inside README.txt.
    pub fn token(&self) -> &str {
        &self.token
    }

    pub fn snapshot(&self) -> Snapshot {
        Snapshot::of(self.path())
    }

    /// Panics with the list of differences if anything in the template
    /// changed since it was built.
    pub fn assert_unchanged(&self) {
        let diff = self.before.diff(&self.snapshot());
        assert!(
            diff.is_empty(),
            "the template {} changed:\n{}",
            self.path().display(),
            diff.join("\n")
        );
    }
}

/// A host directory outside any workspace (under /tmp, world-writable so
/// that only the sandbox stands between an unprivileged run and it) holding
/// `secret.txt` (world-readable) and `marker.txt` (world-writable).
pub struct HostDir {
    dir: tempfile::TempDir,
    secret: String,
    before: Snapshot,
}

impl HostDir {
    pub fn new() -> HostDir {
        HostDir::build(|_| {})
    }

    pub fn build(plant: impl FnOnce(&Path)) -> HostDir {
        let dir = tempfile::Builder::new()
            .prefix("ectest-host-")
            .tempdir_in("/tmp")
            .expect("host tempdir");
        let secret = format!("ECTEST-SECRET-{}", unique_token());
        let root = dir.path();
        fs::write(root.join("secret.txt"), format!("{secret}\n")).expect("write");
        fs::set_permissions(root.join("secret.txt"), fs::Permissions::from_mode(0o644))
            .expect("chmod");
        fs::write(root.join("marker.txt"), format!("marker {secret}\n")).expect("write");
        fs::set_permissions(root.join("marker.txt"), fs::Permissions::from_mode(0o666))
            .expect("chmod");
        plant(root);
        fs::set_permissions(root, fs::Permissions::from_mode(0o777)).expect("chmod");
        let before = Snapshot::of(root);
        HostDir {
            dir,
            secret,
            before,
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `path` as a string, for building commands.
    pub fn p(&self) -> String {
        self.path().display().to_string()
    }

    pub fn secret(&self) -> &str {
        &self.secret
    }

    pub fn secret_path(&self) -> PathBuf {
        self.path().join("secret.txt")
    }

    pub fn marker_path(&self) -> PathBuf {
        self.path().join("marker.txt")
    }

    /// Takes the reference snapshot again (after the test bound a socket
    /// in it, or hard-linked one of its files into a template).
    pub fn rebaseline(&mut self) {
        self.before = Snapshot::of(self.path());
    }

    pub fn assert_unchanged(&self) {
        let diff = self.before.diff(&Snapshot::of(self.path()));
        assert!(
            diff.is_empty(),
            "the host directory {} changed:\n{}",
            self.path().display(),
            diff.join("\n")
        );
    }
}

/// Host paths that must not exist before or after an attack. `check` removes
/// any that appeared (so a hole does not leave litter) and panics naming them.
pub struct ForbiddenPaths(Vec<PathBuf>);

impl ForbiddenPaths {
    pub fn new<P: AsRef<Path>>(paths: &[P]) -> ForbiddenPaths {
        let paths: Vec<PathBuf> = paths.iter().map(|p| p.as_ref().to_path_buf()).collect();
        for p in &paths {
            assert!(
                fs::symlink_metadata(p).is_err(),
                "test setup: {} already exists on the host",
                p.display()
            );
        }
        ForbiddenPaths(paths)
    }

    pub fn check(&self) {
        let mut appeared = Vec::new();
        for p in &self.0 {
            if fs::symlink_metadata(p).is_ok() {
                appeared.push(p.display().to_string());
                let _ = fs::remove_file(p).or_else(|_| fs::remove_dir_all(p));
            }
        }
        assert!(
            appeared.is_empty(),
            "the sandbox created these host paths: {appeared:?}"
        );
    }
}

/// A digest of a host file (or None when it cannot be read), to assert a
/// system file is unchanged.
pub fn file_digest(path: &Path) -> Option<(u64, u64, (i64, i64))> {
    let bytes = fs::read(path).ok()?;
    let meta = fs::metadata(path).ok()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    h.write(&bytes);
    Some((h.finish(), meta.len(), (meta.mtime(), meta.mtime_nsec())))
}

/// Non-empty lines of a host file (e.g. /etc/shadow), empty if unreadable.
pub fn host_lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .map(|s| {
            s.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------
// Host processes.

/// Host pids whose command line contains `needle`.
pub fn host_pids_with_arg(needle: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(dir) = fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if let Ok(cmdline) = fs::read(format!("/proc/{pid}/cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(needle) && pid != std::process::id() {
                out.push(pid);
            }
        }
    }
    out
}

/// A host process the test started (e.g. `sleep 300.<token>`); killed and
/// reaped when dropped.
pub struct HostProcess(pub Child);

impl HostProcess {
    pub fn sleep(arg: &str) -> HostProcess {
        let child = Command::new("sleep")
            .arg(arg)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn host sleep");
        HostProcess(child)
    }

    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    pub fn is_alive(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(None))
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

/// All live descendants of `root` (host pids).
pub fn descendants(root: u32) -> Vec<u32> {
    let mut all = Vec::new();
    if let Ok(dir) = fs::read_dir("/proc") {
        for entry in dir.flatten() {
            if let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
                && let Some(ppid) = parent_of(pid)
            {
                all.push((pid, ppid));
            }
        }
    }
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for &(pid, ppid) in &all {
            if ppid == p && !out.contains(&pid) {
                out.push(pid);
                frontier.push(pid);
            }
        }
    }
    out
}

fn kill_tree(root: u32) {
    for _ in 0..3 {
        for pid in descendants(root) {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
    }
    // SAFETY: as above; the child is the leader of its own session/group.
    unsafe {
        libc::killpg(root as libc::pid_t, libc::SIGKILL);
        libc::kill(root as libc::pid_t, libc::SIGKILL);
    }
}

// ---------------------------------------------------------------------------
// Host resources.

/// Bytes available to unprivileged users on the filesystem holding `path`.
pub fn available_bytes(path: &Path) -> u64 {
    let cpath = CString::new(path.as_os_str().as_bytes()).expect("path");
    // SAFETY: statvfs is plain old data; zeroed is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: cpath is NUL-terminated and st is a valid out pointer.
    let rc = unsafe { libc::statvfs(cpath.as_ptr(), &mut st) };
    assert_eq!(rc, 0, "statvfs {}", path.display());
    st.f_bavail * st.f_frsize
}

/// Samples the free space of a filesystem every 20 ms in a thread, to see
/// the lowest point during a run.
pub struct FreeSpaceWatch {
    start: u64,
    min: Arc<Mutex<u64>>,
    stop: mpsc::Sender<()>,
    thread: thread::JoinHandle<()>,
    path: PathBuf,
}

/// What a `FreeSpaceWatch` saw.
#[derive(Debug, Clone, Copy)]
pub struct FreeSpaceReport {
    pub start: u64,
    pub min: u64,
    pub end: u64,
}

impl FreeSpaceReport {
    /// The largest drop in free space seen during the run.
    pub fn max_drop(&self) -> u64 {
        self.start.saturating_sub(self.min.min(self.end))
    }
}

impl FreeSpaceWatch {
    pub fn start(path: &Path) -> FreeSpaceWatch {
        let start = available_bytes(path);
        let min = Arc::new(Mutex::new(start));
        let (stop, rx) = mpsc::channel::<()>();
        let (min2, path2) = (Arc::clone(&min), path.to_path_buf());
        let thread = thread::spawn(move || {
            loop {
                let now = available_bytes(&path2);
                {
                    let mut m = min2.lock().unwrap_or_else(|p| p.into_inner());
                    *m = (*m).min(now);
                }
                match rx.recv_timeout(Duration::from_millis(20)) {
                    Err(mpsc::RecvTimeoutError::Timeout) => continue,
                    _ => break,
                }
            }
        });
        FreeSpaceWatch {
            start,
            min,
            stop,
            thread,
            path: path.to_path_buf(),
        }
    }

    pub fn stop(self) -> FreeSpaceReport {
        let _ = self.stop.send(());
        let _ = self.thread.join();
        let end = available_bytes(&self.path);
        let min = *self.min.lock().unwrap_or_else(|p| p.into_inner());
        FreeSpaceReport {
            start: self.start,
            min: min.min(end),
            end,
        }
    }
}

// ---------------------------------------------------------------------------
// Running `envcraft exec --json` inside `contained`.

const SETPRIV: &str = "/usr/bin/setpriv";
const NOBODY: u32 = 65534;
/// The harness kills a run that takes longer than this (the whole tree).
pub const HARNESS_DEADLINE: Duration = Duration::from_secs(60);
/// The most the harness keeps of envcraft's own stdout/stderr.
const READ_CAP: usize = 64 << 20;

/// Who runs envcraft.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAs {
    /// The test's own user (root).
    Caller,
    /// uid/gid 65534 with no supplementary groups, through `setpriv`.
    Nobody,
}

/// One bounded run of `bash contained [setpriv ...] envcraft exec --json`.
pub struct Exec<'a> {
    workspace: &'a Path,
    policy: Option<String>,
    args: Vec<String>,
    env: Vec<(String, String)>,
    run_as: RunAs,
    deadline: Duration,
    controlling_tty: Option<File>,
}

impl<'a> Exec<'a> {
    pub fn new(workspace: &'a Path) -> Exec<'a> {
        Exec {
            workspace,
            policy: None,
            args: Vec::new(),
            env: Vec::new(),
            run_as: RunAs::Caller,
            deadline: HARNESS_DEADLINE,
            controlling_tty: None,
        }
    }

    pub fn policy(mut self, policy: Option<&str>) -> Self {
        self.policy = policy.map(String::from);
        self
    }

    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|s| s.to_string()));
        self
    }

    /// An extra variable in envcraft's own environment.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_string(), value.to_string()));
        self
    }

    pub fn run_as(mut self, run_as: RunAs) -> Self {
        self.run_as = run_as;
        self
    }

    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Run with this terminal (a pty slave) as stdin and as the controlling
    /// terminal of the whole tree.
    pub fn controlling_tty(mut self, tty: File) -> Self {
        self.controlling_tty = Some(tty);
        self
    }

    pub fn run(self, cmd: &[&str]) -> ExecOutcome {
        let contained = contained().expect("contained is missing: call sandbox_ready() first");
        let mut command = Command::new("bash");
        command.arg(contained);
        let mut nobody_home = None;
        if self.run_as == RunAs::Nobody {
            // An unprivileged user has a home of their own; give envcraft one.
            let home = tempfile::Builder::new()
                .prefix("ectest-nobody-home-")
                .tempdir_in("/tmp")
                .expect("home tempdir");
            std::os::unix::fs::chown(home.path(), Some(NOBODY), Some(NOBODY)).expect("chown");
            command.env("HOME", home.path());
            command.env("USER", "nobody");
            command.env("LOGNAME", "nobody");
            nobody_home = Some(home);
            command.args([
                SETPRIV,
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--",
            ]);
        }
        command.arg(envcraft());
        command.args(["exec", "--workspace"]);
        command.arg(self.workspace);
        command.arg("--json");
        if let Some(policy) = &self.policy {
            command.args(["--policy", policy]);
        }
        command.args(&self.args);
        command.arg("--");
        command.args(cmd);
        for (k, v) in &self.env {
            command.env(k, v);
        }
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        let with_tty = self.controlling_tty.is_some();
        match self.controlling_tty {
            Some(tty) => command.stdin(Stdio::from(tty)),
            None => command.stdin(Stdio::null()),
        };
        // SAFETY: the closure runs between fork and exec and only calls
        // async-signal-safe functions (setsid, ioctl).
        unsafe {
            command.pre_exec(move || {
                // Own session: the whole tree can be killed as a group, and
                // it never shares the terminal of whoever runs the tests.
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if with_tty && libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }

        let started = Instant::now();
        let mut child = command.spawn().expect("spawn bash contained envcraft");
        let stdout_rx = drain(child.stdout.take().expect("stdout"));
        let stderr_rx = drain(child.stderr.take().expect("stderr"));
        let deadline = started + self.deadline;
        let mut harness_killed = false;
        let status = loop {
            match child.try_wait().expect("try_wait") {
                Some(status) => break Some(status),
                None if Instant::now() >= deadline => {
                    harness_killed = true;
                    kill_tree(child.id());
                    let _ = child.wait();
                    break None;
                }
                None => thread::sleep(Duration::from_millis(10)),
            }
        };
        let wall = started.elapsed();
        // The pipes close when the last holder dies; bound the wait anyway.
        let (raw_stdout, stdout_held) = collect(&stdout_rx);
        let (envcraft_stderr, stderr_held) = collect(&stderr_rx);
        let pipes_held_open = stdout_held || stderr_held;
        if pipes_held_open {
            kill_tree(child.id());
        }
        drop(nobody_home);
        let outcome = ExecOutcome::parse(
            status,
            harness_killed,
            pipes_held_open,
            wall,
            raw_stdout,
            envcraft_stderr,
        );
        // ECTEST_VERBOSE=1 (with --nocapture) shows every run, passing or not.
        if std::env::var_os("ECTEST_VERBOSE").is_some() {
            eprintln!(
                "=== run {cmd:?} as {:?}\n{}",
                self.run_as,
                outcome.describe()
            );
        }
        outcome
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match pipe.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let room = READ_CAP.saturating_sub(kept.len());
                    kept.extend_from_slice(&buf[..n.min(room)]);
                }
            }
        }
        let _ = tx.send(kept);
    });
    rx
}

fn collect(rx: &mpsc::Receiver<Vec<u8>>) -> (String, bool) {
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(bytes) => (String::from_utf8_lossy(&bytes).into_owned(), false),
        Err(_) => (String::new(), true),
    }
}

/// `envcraft exec --workspace W --json [--policy P] extra... -- cmd...`,
/// through `contained`, as the caller.
pub fn exec_json(
    workspace: &Path,
    policy: Option<&str>,
    extra_args: &[&str],
    cmd: &[&str],
) -> ExecOutcome {
    exec_json_as(RunAs::Caller, workspace, policy, extra_args, cmd)
}

/// Same as `exec_json`, as `who`.
pub fn exec_json_as(
    who: RunAs,
    workspace: &Path,
    policy: Option<&str>,
    extra_args: &[&str],
    cmd: &[&str],
) -> ExecOutcome {
    Exec::new(workspace)
        .policy(policy)
        .args(extra_args)
        .run_as(who)
        .run(cmd)
}

/// Same as `exec_json`, as `nobody` (uid/gid 65534, no groups).
pub fn run_as_nobody(
    workspace: &Path,
    policy: Option<&str>,
    extra_args: &[&str],
    cmd: &[&str],
) -> ExecOutcome {
    exec_json_as(RunAs::Nobody, workspace, policy, extra_args, cmd)
}

/// What one run gave: envcraft's own status and stderr, and the fields of
/// its JSON report.
#[derive(Debug)]
pub struct ExecOutcome {
    /// envcraft's (through contained) exit status; None if the harness had
    /// to kill it at its deadline.
    pub status: Option<ExitStatus>,
    pub harness_killed: bool,
    /// The stdout/stderr pipes stayed open after envcraft exited (some
    /// process outlived it).
    pub pipes_held_open: bool,
    /// Wall time of the whole run, as the test saw it.
    pub wall: Duration,
    pub raw_stdout: String,
    /// envcraft's own stderr (messages), with contained's.
    pub envcraft_stderr: String,
    pub json: Option<Value>,
    pub exit_code: Option<i64>,
    pub signal: Option<i64>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub duration_ms: Option<u64>,
    pub changes: Option<Value>,
}

impl ExecOutcome {
    fn parse(
        status: Option<ExitStatus>,
        harness_killed: bool,
        pipes_held_open: bool,
        wall: Duration,
        raw_stdout: String,
        envcraft_stderr: String,
    ) -> ExecOutcome {
        let json: Option<Value> = serde_json::from_str(raw_stdout.trim()).ok();
        let field = |k: &str| json.as_ref().and_then(|v| v.get(k));
        let string = |k: &str| {
            field(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let flag = |k: &str| field(k).and_then(Value::as_bool).unwrap_or(false);
        ExecOutcome {
            status,
            harness_killed,
            pipes_held_open,
            wall,
            exit_code: field("exit_code").and_then(Value::as_i64),
            signal: field("signal").and_then(Value::as_i64),
            timed_out: flag("timed_out"),
            stdout: string("stdout"),
            stderr: string("stderr"),
            stdout_truncated: flag("stdout_truncated"),
            stderr_truncated: flag("stderr_truncated"),
            duration_ms: field("duration_ms").and_then(Value::as_u64),
            changes: field("changes").cloned(),
            json,
            raw_stdout,
            envcraft_stderr,
        }
    }

    /// envcraft ran the sandbox and reported (exit 0 with a JSON object).
    pub fn ran(&self) -> bool {
        self.status.is_some_and(|s| s.code() == Some(0))
            && self
                .json
                .as_ref()
                .is_some_and(|v| v.get("timed_out").is_some())
    }

    /// Panics with the whole story unless the sandbox ran and reported.
    pub fn assert_ran(&self) -> &Self {
        assert!(
            self.ran(),
            "envcraft did not run the sandbox and report JSON\n{}",
            self.describe()
        );
        self
    }

    /// The command's stdout and stderr, joined.
    pub fn output(&self) -> String {
        format!("{}\n{}", self.stdout, self.stderr)
    }

    /// Asserts the command's output (stdout+stderr) contains `needle`:
    /// proof that the attack actually ran and reached the expected point.
    pub fn assert_saw(&self, needle: &str) -> &Self {
        assert!(
            self.output().contains(needle),
            "expected {needle:?} in the command's output\n{}",
            self.describe()
        );
        self
    }

    /// Asserts the command's output (stdout+stderr) lacks `needle`.
    pub fn assert_not_saw(&self, needle: &str, what: &str) -> &Self {
        assert!(
            !self.output().contains(needle),
            "{what}: found {needle:?} in the command's output\n{}",
            self.describe()
        );
        self
    }

    /// Paths listed under `changes.<kind>` ("added", "modified", "deleted").
    pub fn changed(&self, kind: &str) -> Vec<String> {
        self.changes
            .as_ref()
            .and_then(|c| c.get(kind))
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Everything about the run, for failure messages.
    pub fn describe(&self) -> String {
        format!(
            "--- envcraft status: {:?} (harness killed: {}, pipes held open: {}, wall: {:?})\n\
             --- report: exit_code={:?} signal={:?} timed_out={} duration_ms={:?} \
             stdout_truncated={} stderr_truncated={} changes={}\n\
             --- command stdout ({} bytes):\n{}\n--- command stderr ({} bytes):\n{}\n\
             --- envcraft stderr:\n{}\n--- envcraft raw stdout (when not JSON):\n{}",
            self.status,
            self.harness_killed,
            self.pipes_held_open,
            self.wall,
            self.exit_code,
            self.signal,
            self.timed_out,
            self.duration_ms,
            self.stdout_truncated,
            self.stderr_truncated,
            self.changes
                .as_ref()
                .map(Value::to_string)
                .unwrap_or_else(|| "-".into()),
            self.stdout.len(),
            clip(&self.stdout),
            self.stderr.len(),
            clip(&self.stderr),
            clip(&self.envcraft_stderr),
            if self.json.is_some() {
                String::new()
            } else {
                clip(&self.raw_stdout)
            },
        )
    }
}

fn clip(s: &str) -> String {
    const MAX: usize = 6000;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... [{} more bytes]", &s[..end], s.len() - end)
}

// ---------------------------------------------------------------------------
// A pseudo-terminal, for the TIOCSTI test.

/// A pty pair: the master stays with the test, the slave goes to the run.
pub struct Pty {
    pub master: File,
    pub slave_path: PathBuf,
}

impl Pty {
    pub fn open() -> std::io::Result<Pty> {
        use std::os::fd::FromRawFd;
        // SAFETY: posix_openpt returns a new fd or -1.
        let fd = unsafe { libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh, owned descriptor.
        let master = unsafe { File::from_raw_fd(fd) };
        let mut name = [0 as libc::c_char; 128];
        // SAFETY: fd is a pty master; name is writable for its length.
        let ok = unsafe {
            libc::grantpt(fd) == 0
                && libc::unlockpt(fd) == 0
                && libc::ptsname_r(fd, name.as_mut_ptr(), name.len()) == 0
        };
        if !ok {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: ptsname_r wrote a NUL-terminated string into name.
        let cname = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) };
        let slave_path = PathBuf::from(std::ffi::OsStr::from_bytes(cname.to_bytes()));
        Ok(Pty { master, slave_path })
    }

    /// Opens the slave side without making it our controlling terminal.
    pub fn open_slave(&self) -> std::io::Result<File> {
        use std::os::unix::fs::OpenOptionsExt;
        fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOCTTY)
            .open(&self.slave_path)
    }
}

/// Reads whatever is available on `file` without blocking.
pub fn read_available(file: &File) -> Vec<u8> {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a valid fd we own.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: buf is writable for its length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
        out.extend_from_slice(&buf[..n as usize]);
    }
    out
}

/// The port of an `envcraft serve` just spawned with its stdout piped: its first line
/// (`listening on http://ADDR:PORT`), waited for at most 20 s. On no line, the server is killed
/// and the test fails with its log.
pub fn listening_port(child: &mut std::process::Child, log: &Path) -> u16 {
    use std::io::{BufRead, BufReader};
    let stdout = child.stdout.take().expect("the server's stdout is piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let Ok(line) = rx.recv_timeout(Duration::from_secs(20)) else {
        let _ = child.kill();
        panic!(
            "the server printed no address within 20 s\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
    };
    line.trim()
        .strip_prefix("listening on http://")
        .and_then(|addr| addr.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
}

/// Whether this machine can run the `default` policy's sandbox (`envcraft doctor` exits 0, asked
/// once); skips loudly otherwise.
pub fn default_policy_runs() -> bool {
    static WORKS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let works = *WORKS.get_or_init(|| {
        Command::new(envcraft())
            .arg("doctor")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if !works {
        skip("`envcraft doctor` says the default policy cannot run here");
    }
    works
}

/// A policy file (in a temporary directory, kept as long as the handle) like the bundled
/// `verifier` but with a read-only workspace: what the read-only tests run under, now that the
/// verifier gives graders a writable view of their own.
pub fn read_only_policy() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let text =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/verifier.toml"))
            .unwrap()
            .replace("workspace_writable = true", "workspace_writable = false");
    assert!(text.contains("workspace_writable = false"));
    let path = dir.path().join("read-only.toml");
    fs::write(&path, text).unwrap();
    let shown = path.to_str().unwrap().to_string();
    (dir, shown)
}

/// The results of the tool calls in a `run --json` report, in order (its `next_turn` entries
/// left out).
pub fn action_results(report: &Value) -> Vec<Value> {
    report["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a.get("result").is_some())
        .map(|a| a["result"].clone())
        .collect()
}

/// Copy the tree `from` into `to` (made if missing), modes and links kept (`cp -a`).
pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    let status = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success());
}

/// The installed Podman the image-build suites drive.
pub const PODMAN: &str = "/usr/bin/podman";

/// The busybox base image a [`PodmanWorld`] holds.
pub const BUSYBOX_BASE: &str = "localhost/envcraft-test-busybox:1";

/// A Podman storage and an envcraft state root of a test's own, in a temporary directory, with
/// [`BUSYBOX_BASE`] in that storage: a root of the static `busybox` (`bin/` with it and a link
/// per applet, `tmp`, `etc`, `opt`), made without network and `podman import`ed.
pub struct PodmanWorld {
    dir: tempfile::TempDir,
}

impl PodmanWorld {
    pub fn new(busybox: &str) -> PodmanWorld {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        fs::write(
            d.join("storage.conf"),
            format!(
                "[storage]\ndriver = \"overlay\"\ngraphroot = \"{0}/graph\"\nrunroot = \"{0}/run\"\nrootless_storage_path = \"{0}/graph\"\n",
                d.display()
            ),
        )
        .unwrap();
        let rootfs = d.join("rootfs");
        for sub in ["bin", "tmp", "etc", "opt"] {
            fs::create_dir_all(rootfs.join(sub)).unwrap();
        }
        fs::copy(busybox, rootfs.join("bin/busybox")).unwrap();
        let list = Command::new(busybox).arg("--list").output().unwrap();
        for applet in String::from_utf8_lossy(&list.stdout).lines() {
            let link = rootfs.join("bin").join(applet);
            if !link.exists() {
                std::os::unix::fs::symlink("busybox", link).unwrap();
            }
        }
        let tar = d.join("rootfs.tar");
        let out = Command::new("tar")
            .arg("-C")
            .arg(&rootfs)
            .arg("-cf")
            .arg(&tar)
            .arg(".")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "tar: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let world = PodmanWorld { dir };
        world.podman_ok(&["import", tar.to_str().unwrap(), BUSYBOX_BASE]);
        world
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// envcraft's state root.
    pub fn state(&self) -> PathBuf {
        self.path().join("state")
    }

    /// Point `cmd` at this world's Podman storage and envcraft state root.
    pub fn env(&self, cmd: &mut Command) {
        cmd.env("CONTAINERS_STORAGE_CONF", self.path().join("storage.conf"))
            .env("ENVCRAFT_STATE_DIR", self.state());
    }

    pub fn podman(&self, args: &[&str]) -> std::process::Output {
        let mut cmd = Command::new(PODMAN);
        self.env(&mut cmd);
        cmd.args(args).output().unwrap()
    }

    /// `podman ARGS`, which must succeed.
    pub fn podman_ok(&self, args: &[&str]) {
        let out = self.podman(args);
        assert!(
            out.status.success(),
            "podman {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub fn podman_has(&self, name: &str) -> bool {
        self.podman(&["image", "exists", name]).status.success()
    }

    /// The names of every image in the storage, intermediate ones too, a line each.
    pub fn podman_images(&self) -> String {
        let out = self.podman(&["images", "-a", "--format", "{{.Repository}}:{{.Tag}}"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `envcraft ARGS` through `contained`, with `path` as its PATH when given: (exit code,
    /// stdout, stderr).
    pub fn envcraft(&self, args: &[&str], path: Option<&Path>) -> (i32, String, String) {
        let mut cmd = Command::new("bash");
        cmd.arg(contained().unwrap()).arg("/usr/bin/env");
        if let Some(p) = path {
            cmd.arg(format!("PATH={}", p.display()));
        }
        cmd.arg(envcraft()).args(args);
        self.env(&mut cmd);
        let out = cmd.output().unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}
