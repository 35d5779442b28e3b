//! Hash manifests: every entry below a directory (path, kind, permission bits, SHA-256, size),
//! sorted by path, made with the CPU's SHA extensions on every core; and the manifest of a
//! session's final workspace computed from a cached manifest of its template plus the overlay's
//! upper layer, rehashing only what changed.
//!
//! Promises: symlinks are never followed (a symlink's hash is that of its target's bytes);
//! every file is opened beneath the root by the kernel (`openat2` with `RESOLVE_BENEATH` and
//! `RESOLVE_NO_SYMLINKS`, or a walk of `O_NOFOLLOW` opens), so a symlink swapped in cannot
//! send the hashing outside the tree; fifos, sockets and devices are listed as `other` and
//! never opened; no tree can make the walk hold more than [`MAX_DEPTH`] directory descriptors
//! (a directory at that depth is listed, and under `incomplete`, but not descended into).

use std::cmp::Reverse;
use std::ffi::{CStr, CString, OsStr};
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{
    AtFlags, OFlag, OpenHow, PosixFadviseAdvice, ResolveFlag, openat, openat2, posix_fadvise,
    readlinkat,
};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::VerifyError;
use crate::workspace::Changes;

/// The version written in, and required of, a manifest's JSON.
pub const VERSION: u32 = 1;

/// How many levels the walk descends: a directory whose path has this many components is
/// listed (and named in [`Manifest::incomplete`]) but its content is not. The same bound as
/// the workspace's change list, so that an incremental manifest and a full one agree.
pub const MAX_DEPTH: usize = crate::workspace::diff::MAX_DEPTH;

/// Read buffer per hashing thread: large enough to amortise the `read` calls, small enough to
/// stay in the L2 cache while it is hashed.
const READ_BUFFER: usize = 256 * 1024;

/// Below this many bytes to hash, a second thread costs more than it saves.
const PARALLEL_MIN_BYTES: u64 = 1 << 20;

/// Relative paths at least this long are opened one component at a time (`openat2` takes at
/// most PATH_MAX bytes).
const OPENAT2_MAX_PATH: usize = 4000;

/// What an entry is. `other` (fifo, socket, device) is listed so that it can be seen and
/// judged, but never opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    File,
    Dir,
    Symlink,
    Other,
}

impl EntryKind {
    pub fn name(self) -> &'static str {
        match self {
            EntryKind::File => "file",
            EntryKind::Dir => "dir",
            EntryKind::Symlink => "symlink",
            EntryKind::Other => "other",
        }
    }
}

impl std::fmt::Display for EntryKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One entry below the manifest's root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Relative to the root, `/`-separated; names that are not UTF-8 are written as
    /// [`crate::workspace::name`] says (injectively: `\xNN` per invalid byte).
    pub path: String,
    pub kind: EntryKind,
    /// Permission bits (`st_mode & 0o7777`); JSON: four octal digits, `"0644"`.
    #[serde(with = "octal_mode")]
    pub mode: u32,
    /// Lowercase hex SHA-256 of a file's content or of a symlink's target bytes; `null` for
    /// directories and `other` entries.
    pub sha256: Option<String>,
    /// Bytes hashed: a file's length, a symlink target's length; 0 for the others (a
    /// directory's `st_size` depends on the filesystem, so it is not recorded).
    pub size: u64,
}

impl Entry {
    /// Whether two entries hold the same state: kind, permission bits and content.
    pub fn same_state(&self, other: &Entry) -> bool {
        self.kind == other.kind && self.mode == other.mode && self.sha256 == other.sha256
    }
}

/// Permission bits as four octal digits in JSON (`"0644"`, `"4755"`).
pub mod octal_mode {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn format(mode: u32) -> String {
        format!("{mode:04o}")
    }

    /// `"0644"`, `"644"` or `"04755"`: octal digits, at most `0o7777`.
    pub fn parse(text: &str) -> Option<u32> {
        if text.is_empty() || text.len() > 5 || !text.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
            return None;
        }
        u32::from_str_radix(text, 8).ok().filter(|m| *m <= 0o7777)
    }

    pub fn serialize<S: Serializer>(mode: &u32, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format(*mode))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        let text = String::deserialize(d)?;
        parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "mode {text:?} is not octal permission bits like \"0644\""
            ))
        })
    }
}

/// Every entry below a directory, sorted by path (byte order of the UTF-8 paths).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "ManifestJson", into = "ManifestJson")]
pub struct Manifest {
    entries: Vec<Entry>,
    incomplete: Vec<String>,
}

/// The JSON form: `{"version": 1, "entries": [...]}`, plus `"incomplete": [...]` when the
/// walk stopped at [`MAX_DEPTH`] somewhere.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestJson {
    version: u32,
    entries: Vec<Entry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    incomplete: Vec<String>,
}

impl TryFrom<ManifestJson> for Manifest {
    type Error = String;

    fn try_from(json: ManifestJson) -> Result<Self, String> {
        if json.version != VERSION {
            return Err(format!(
                "manifest version {} is not supported (this envcraft reads version {VERSION})",
                json.version
            ));
        }
        let manifest = Manifest::from_entries(json.entries, json.incomplete);
        if let Some(w) = manifest.entries.windows(2).find(|w| w[0].path == w[1].path) {
            return Err(format!("path {:?} is listed twice", w[0].path));
        }
        Ok(manifest)
    }
}

impl From<Manifest> for ManifestJson {
    fn from(m: Manifest) -> Self {
        ManifestJson {
            version: VERSION,
            entries: m.entries,
            incomplete: m.incomplete,
        }
    }
}

impl Manifest {
    /// The manifest of every entry below `root` (the root itself is not an entry; a symlink
    /// given as `root` is followed, none below it is).
    pub fn of_dir(root: &Path) -> Result<Manifest, VerifyError> {
        let root_fd = open_root(root)?;
        let mut walk = Walk::new(root);
        let dir = Dir::from_fd(root_fd.try_clone().map_err(|e| walk.read_error(b"", e))?)
            .map_err(|e| walk.read_error(b"", e.into()))?;
        walk.descend(dir, String::new(), Vec::new(), 0)?;
        walk.finish(&root_fd)
    }

    /// A manifest of the given entries (sorted here) and incomplete directories.
    pub fn from_entries(mut entries: Vec<Entry>, mut incomplete: Vec<String>) -> Manifest {
        entries.sort_by(|a, b| a.path.cmp(&b.path));
        incomplete.sort();
        incomplete.dedup();
        Manifest {
            entries,
            incomplete,
        }
    }

    /// The entries, sorted by path.
    /// The manifest of only `paths` below `root` (those that exist; a directory as one entry,
    /// without what is below it): what a verification needs of a template when its rules name
    /// a few paths, without listing the rest.
    pub fn of_paths(root: &Path, paths: &[String]) -> Result<Manifest, VerifyError> {
        let root_fd = open_root(root)?;
        let mut walk = Walk::new(root);
        let mut sorted: Vec<&String> = paths.iter().collect();
        sorted.sort();
        sorted.dedup();
        for path in sorted {
            let decoded = crate::workspace::name::decode(path);
            let raw: &[u8] = &decoded;
            let (parent, name) = match raw.iter().rposition(|b| *b == b'/') {
                Some(i) => (&raw[..i], &raw[i + 1..]),
                None => (&b""[..], raw),
            };
            let Ok(name) = CString::new(name) else {
                continue;
            };
            let parent_fd = if parent.is_empty() {
                None
            } else {
                match open_beneath(&root_fd, parent, OFlag::O_RDONLY | OFlag::O_DIRECTORY) {
                    Ok(fd) => Some(fd),
                    Err(_) => continue, // the parent is not there: neither is the path
                }
            };
            let dir: &OwnedFd = parent_fd.as_ref().unwrap_or(&root_fd);
            if nix::sys::stat::fstatat(
                dir,
                name.as_c_str(),
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            )
            .is_err()
            {
                continue;
            }
            walk.visit(dir, &name, path.clone(), raw.to_vec())?;
        }
        walk.finish(&root_fd)
    }

    /// This manifest with `upper`'s entries laid over it (a task's files over an
    /// environment's): an entry of `upper` replaces the one at its path.
    pub fn overlaid_with(&self, upper: &Manifest) -> Manifest {
        let mut by_path: std::collections::BTreeMap<String, Entry> = self
            .entries
            .iter()
            .map(|e| (e.path.clone(), e.clone()))
            .collect();
        for e in &upper.entries {
            by_path.insert(e.path.clone(), e.clone());
        }
        let mut incomplete = self.incomplete.clone();
        incomplete.extend(upper.incomplete.iter().cloned());
        Manifest::from_entries(by_path.into_values().collect(), incomplete)
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Directories [`MAX_DEPTH`] levels down whose content is not listed.
    pub fn incomplete(&self) -> &[String] {
        &self.incomplete
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry at `path`, if any.
    pub fn get(&self, path: &str) -> Option<&Entry> {
        self.entries
            .binary_search_by(|e| e.path.as_str().cmp(path))
            .ok()
            .map(|i| &self.entries[i])
    }

    /// Whether `path` lies below a directory whose content this manifest does not list, so
    /// that whether it exists is unknown.
    pub fn is_unknown(&self, path: &str) -> bool {
        self.incomplete.iter().any(|dir| is_below(path, dir))
    }

    /// The JSON form, pretty-printed.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Read the JSON form (unknown keys, another version or a path listed twice are refused).
    pub fn from_json(text: &str) -> Result<Manifest, VerifyError> {
        serde_json::from_str(text).map_err(VerifyError::ManifestJson)
    }

    /// The manifest of a session's final workspace: this manifest (of the template, the
    /// overlay's lower layer) with `changes` applied, reading only the added and modified
    /// paths, from `upper` (the overlay's upper layer, or any tree holding them at the same
    /// paths). Deleted paths (and anything below them) are dropped; a path that is no longer
    /// a directory loses what was below it; `changes.incomplete` is carried over.
    ///
    /// Costs O(changed bytes) to hash, O(log n) per changed path to place it, and one pass
    /// over the entries to build the result.
    pub fn apply_changes(&self, upper: &Path, changes: &Changes) -> Result<Manifest, VerifyError> {
        let mut keep = vec![true; self.entries.len()];
        let drop_below = |keep: &mut [bool], path: &str| {
            // Entries below `path` sort between "path/" and "path0" ('0' follows '/').
            let (low, high) = (format!("{path}/"), format!("{path}0"));
            let from = self.entries.partition_point(|e| e.path < low);
            let to = self.entries.partition_point(|e| e.path < high);
            keep[from..to].fill(false);
        };
        for path in &changes.deleted {
            if let Ok(i) = self.entries.binary_search_by(|e| e.path.as_str().cmp(path)) {
                keep[i] = false;
            }
            drop_below(&mut keep, path);
        }
        let mut changed: Vec<&String> = changes.added.iter().chain(&changes.modified).collect();
        changed.sort();
        changed.dedup();
        let upper_fd = open_root(upper)?;
        let mut walk = Walk::new(upper);
        let mut incomplete: Vec<String> = self.incomplete.clone();
        for path in changed {
            // The change list writes names that are not UTF-8 escaped: open the real bytes.
            let decoded = crate::workspace::name::decode(path);
            let raw: &[u8] = &decoded;
            let (parent, name) = match raw.iter().rposition(|b| *b == b'/') {
                Some(i) => (&raw[..i], &raw[i + 1..]),
                None => (&b""[..], raw),
            };
            let name = CString::new(name).map_err(|_| {
                walk.read_error(raw, std::io::Error::from(std::io::ErrorKind::InvalidInput))
            })?;
            let parent_fd = if parent.is_empty() {
                None
            } else {
                let fd = open_beneath(&upper_fd, parent, OFlag::O_RDONLY | OFlag::O_DIRECTORY)
                    .map_err(|e| walk.read_error(raw, e.into()))?;
                Some(fd)
            };
            let dir: &OwnedFd = parent_fd.as_ref().unwrap_or(&upper_fd);
            if walk.visit(dir, &name, path.clone(), raw.to_vec())? != EntryKind::Dir {
                drop_below(&mut keep, path);
                incomplete.retain(|d| d != path && !is_below(d, path));
            }
        }
        incomplete.retain(|d| {
            !changes
                .deleted
                .iter()
                .any(|gone| gone == d || is_below(d, gone))
        });
        incomplete.extend(changes.incomplete.iter().cloned());
        let fresh = walk.finish(&upper_fd)?.entries;
        // Merge the kept entries and the fresh ones, both sorted; a fresh one replaces an old
        // one at the same path.
        let mut entries = Vec::with_capacity(self.entries.len() + fresh.len());
        let mut old = self
            .entries
            .iter()
            .zip(&keep)
            .filter(|(_, k)| **k)
            .map(|(e, _)| e)
            .peekable();
        for entry in fresh {
            while let Some(e) = old.next_if(|e| e.path < entry.path) {
                entries.push(e.clone());
            }
            old.next_if(|e| e.path == entry.path);
            entries.push(entry);
        }
        entries.extend(old.cloned());
        incomplete.sort();
        incomplete.dedup();
        Ok(Manifest {
            entries,
            incomplete,
        })
    }
}

/// Whether `path` is strictly below `dir`.
pub(crate) fn is_below(path: &str, dir: &str) -> bool {
    path.len() > dir.len() && path.starts_with(dir) && path.as_bytes()[dir.len()] == b'/'
}

/// The lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

fn open_root(path: &Path) -> Result<OwnedFd, VerifyError> {
    nix::fcntl::open(
        path,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| VerifyError::Read {
        path: path.to_path_buf(),
        source: e.into(),
    })
}

fn open_dir<P: ?Sized + nix::NixPath>(parent: impl AsFd, name: &P) -> nix::Result<OwnedFd> {
    openat(
        parent,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// Open `rel` (a `/`-separated relative path) beneath `root` without following any symlink
/// on the way or at the end: `openat2` confined to the root, or, where that is refused or the
/// path is too long for it, one `O_NOFOLLOW` open per component.
pub(crate) fn open_beneath(root: &OwnedFd, rel: &[u8], flags: OFlag) -> nix::Result<OwnedFd> {
    let flags = flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    if rel.len() < OPENAT2_MAX_PATH {
        let how = OpenHow::new().flags(flags).resolve(
            ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS,
        );
        match openat2(root, OsStr::from_bytes(rel), how) {
            // Older kernels, seccomp filters that refuse it, or a path over PATH_MAX.
            Err(Errno::ENOSYS | Errno::EPERM | Errno::E2BIG | Errno::ENAMETOOLONG) => {}
            done => return done,
        }
    }
    let mut parts = rel.split(|b| *b == b'/');
    let last = parts.next_back().unwrap_or_default();
    let mut dir: Option<OwnedFd> = None;
    for part in parts {
        if part.is_empty() || part == b"." || part == b".." {
            return Err(Errno::EINVAL);
        }
        let parent: &OwnedFd = dir.as_ref().unwrap_or(root);
        dir = Some(open_dir(parent, OsStr::from_bytes(part))?);
    }
    if last.is_empty() || last == b"." || last == b".." {
        return Err(Errno::EINVAL);
    }
    let parent: &OwnedFd = dir.as_ref().unwrap_or(root);
    openat(parent, OsStr::from_bytes(last), flags, Mode::empty())
}

fn file_type(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT
}

/// A regular file found by the walk, to be hashed.
struct FileJob {
    /// Index in `Walk::entries`.
    entry: usize,
    /// The path's bytes as found (names that are not UTF-8 included), to open it.
    raw: Vec<u8>,
    dev: u64,
    ino: u64,
    size: u64,
}

/// An open directory being listed: its descriptor and its sorted names.
struct Level {
    dir: Dir,
    names: Vec<CString>,
    next: usize,
    rel: String,
    raw: Vec<u8>,
    depth: usize,
}

/// Entries found so far and the files still to hash.
struct Walk<'a> {
    root: &'a Path,
    entries: Vec<Entry>,
    jobs: Vec<FileJob>,
    incomplete: Vec<String>,
}

/// `prefix/name`, the name written as the change list writes it (see
/// [`crate::workspace::name`]), so that a manifest's paths and a change list's agree.
fn join_rel(prefix: &str, name: &CStr) -> String {
    crate::workspace::name::join(prefix, name.to_bytes())
}

fn join_raw(prefix: &[u8], name: &CStr) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefix.len() + 1 + name.to_bytes().len());
    if !prefix.is_empty() {
        out.extend_from_slice(prefix);
        out.push(b'/');
    }
    out.extend_from_slice(name.to_bytes());
    out
}

fn sorted_names(dir: &mut Dir) -> nix::Result<Vec<CString>> {
    let mut names = Vec::new();
    for entry in dir.iter() {
        let name = entry?.file_name().to_owned();
        if name.as_bytes() != b"." && name.as_bytes() != b".." {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

impl<'a> Walk<'a> {
    fn new(root: &'a Path) -> Walk<'a> {
        Walk {
            root,
            entries: Vec::new(),
            jobs: Vec::new(),
            incomplete: Vec::new(),
        }
    }

    fn read_error(&self, raw: &[u8], source: std::io::Error) -> VerifyError {
        VerifyError::Read {
            path: display_path(self.root, raw),
            source,
        }
    }

    /// Record the entry `name` in `dir` (at `rel`); returns its kind. Files are queued for
    /// hashing, symlinks are read here.
    fn visit(
        &mut self,
        dir: &impl AsFd,
        name: &CStr,
        rel: String,
        raw: Vec<u8>,
    ) -> Result<EntryKind, VerifyError> {
        let st = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)
            .map_err(|e| self.read_error(&raw, e.into()))?;
        let mode = st.st_mode & 0o7777;
        let (kind, sha256, size) = match file_type(&st) {
            SFlag::S_IFDIR => (EntryKind::Dir, None, 0),
            SFlag::S_IFLNK => {
                let target = readlinkat(dir, name).map_err(|e| self.read_error(&raw, e.into()))?;
                let bytes = target.as_bytes();
                (
                    EntryKind::Symlink,
                    Some(sha256_hex(bytes)),
                    bytes.len() as u64,
                )
            }
            SFlag::S_IFREG => {
                self.jobs.push(FileJob {
                    entry: self.entries.len(),
                    raw,
                    dev: st.st_dev,
                    ino: st.st_ino,
                    size: u64::try_from(st.st_size).unwrap_or(0),
                });
                (EntryKind::File, None, 0)
            }
            _ => (EntryKind::Other, None, 0),
        };
        self.entries.push(Entry {
            path: rel,
            kind,
            mode,
            sha256,
            size,
        });
        Ok(kind)
    }

    /// Walk everything below `dir` depth-first, holding one descriptor per level.
    fn descend(
        &mut self,
        mut dir: Dir,
        rel: String,
        raw: Vec<u8>,
        depth: usize,
    ) -> Result<(), VerifyError> {
        let names = sorted_names(&mut dir).map_err(|e| self.read_error(&raw, e.into()))?;
        let mut stack = vec![Level {
            dir,
            names,
            next: 0,
            rel,
            raw,
            depth,
        }];
        while let Some(top) = stack.last_mut() {
            let Some(name) = top.names.get(top.next).cloned() else {
                stack.pop();
                continue;
            };
            top.next += 1;
            let rel = join_rel(&top.rel, &name);
            let raw = join_raw(&top.raw, &name);
            let depth = top.depth + 1;
            let kind = {
                let dir = &top.dir;
                // Borrow juggling: `visit` needs `&mut self` and the level's descriptor.
                let fd = dir.as_fd();
                self.visit(&fd, &name, rel.clone(), raw.clone())?
            };
            if kind != EntryKind::Dir {
                continue;
            }
            if depth >= MAX_DEPTH {
                self.incomplete.push(rel);
                continue;
            }
            let Some(top) = stack.last() else { break };
            let sub = open_dir(top.dir.as_fd(), name.as_c_str())
                .and_then(Dir::from_fd)
                .map_err(|e| self.read_error(&raw, e.into()))?;
            let mut sub = sub;
            let names = sorted_names(&mut sub).map_err(|e| self.read_error(&raw, e.into()))?;
            stack.push(Level {
                dir: sub,
                names,
                next: 0,
                rel,
                raw,
                depth,
            });
        }
        Ok(())
    }

    /// Hash the queued files (in parallel) and return the sorted manifest.
    fn finish(mut self, root: &OwnedFd) -> Result<Manifest, VerifyError> {
        let hashed = hash_files(root, self.root, &self.jobs)?;
        for (job, (sha256, size)) in self.jobs.iter().zip(hashed) {
            let entry = &mut self.entries[job.entry];
            entry.sha256 = Some(sha256);
            entry.size = size;
        }
        Ok(Manifest::from_entries(self.entries, self.incomplete))
    }
}

fn display_path(root: &Path, raw: &[u8]) -> PathBuf {
    if raw.is_empty() {
        root.to_path_buf()
    } else {
        root.join(OsStr::from_bytes(raw))
    }
}

/// Hash every job's file; the result is in the order of `jobs`. Files are handed out largest
/// first to one worker per core (the calling thread is one of them), each with its own
/// buffer; on the first error the others stop taking work.
fn hash_files(
    root: &OwnedFd,
    root_path: &Path,
    jobs: &[FileJob],
) -> Result<Vec<(String, u64)>, VerifyError> {
    let total: u64 = jobs.iter().map(|j| j.size).sum();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = if jobs.len() < 2 || total < PARALLEL_MIN_BYTES {
        1
    } else {
        cores.min(jobs.len())
    };
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| Reverse(jobs[i].size));
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    type Done = Vec<(usize, Result<(String, u64), VerifyError>)>;
    let work = || -> Done {
        let mut buffer = vec![0u8; READ_BUFFER];
        let mut done = Vec::new();
        while !failed.load(Ordering::Relaxed) {
            let k = next.fetch_add(1, Ordering::Relaxed);
            let Some(&i) = order.get(k) else { break };
            let result = hash_file(root, root_path, &jobs[i], &mut buffer);
            if result.is_err() {
                failed.store(true, Ordering::Relaxed);
            }
            done.push((i, result));
        }
        done
    };
    let done: Done = if workers == 1 {
        work()
    } else {
        std::thread::scope(|s| {
            let helpers: Vec<_> = (1..workers).map(|_| s.spawn(work)).collect();
            let mut done = work();
            for helper in helpers {
                match helper.join() {
                    Ok(more) => done.extend(more),
                    // No code of ours panics; pass on whatever did.
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            done
        })
    };
    let mut results: Vec<Option<(String, u64)>> = vec![None; jobs.len()];
    let mut first_error: Option<(usize, VerifyError)> = None;
    for (i, result) in done {
        match result {
            Ok(hash) => results[i] = Some(hash),
            Err(e) => {
                if first_error.as_ref().is_none_or(|(j, _)| i < *j) {
                    first_error = Some((i, e));
                }
            }
        }
    }
    if let Some((_, e)) = first_error {
        return Err(e);
    }
    results
        .into_iter()
        .zip(jobs)
        .map(|(r, job)| {
            r.ok_or_else(|| VerifyError::Read {
                path: display_path(root_path, &job.raw),
                source: std::io::Error::other("not hashed"),
            })
        })
        .collect()
}

/// The SHA-256 and length of one file, opened beneath the root; it must still be the regular
/// file the walk saw.
fn hash_file(
    root: &OwnedFd,
    root_path: &Path,
    job: &FileJob,
    buffer: &mut [u8],
) -> Result<(String, u64), VerifyError> {
    let read_error = |source: std::io::Error| VerifyError::Read {
        path: display_path(root_path, &job.raw),
        source,
    };
    let fd = open_beneath(
        root,
        &job.raw,
        OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY,
    )
    .map_err(|e| read_error(e.into()))?;
    let st = fstat(&fd).map_err(|e| read_error(e.into()))?;
    if file_type(&st) != SFlag::S_IFREG || st.st_dev != job.dev || st.st_ino != job.ino {
        return Err(VerifyError::Changed {
            path: display_path(root_path, &job.raw),
        });
    }
    // Only a hint to read ahead further; hashing is correct without it.
    let _ = posix_fadvise(&fd, 0, 0, PosixFadviseAdvice::POSIX_FADV_SEQUENTIAL);
    let mut file = File::from(fd);
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    loop {
        match file.read(buffer) {
            Ok(0) => break,
            Ok(n) => {
                hasher.update(&buffer[..n]);
                size += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(read_error(e)),
        }
    }
    Ok((hex(&hasher.finalize()), size))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::verify::tests::{Rng, chmod, write};
    use std::collections::BTreeMap;
    use std::fs;
    use std::os::unix::fs::{PermissionsExt, symlink};

    const HELLO_SHA: &str = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03";

    #[test]
    fn of_dir_lists_files_dirs_and_symlinks_with_their_modes_sorted() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(root, "a.txt", "hello\n");
        write(root, "bin/run.sh", "#!/bin/sh\n");
        chmod(root, "bin/run.sh", 0o4755);
        chmod(root, "bin", 0o750);
        symlink("missing/target", root.join("a")).unwrap();
        let m = Manifest::of_dir(root).unwrap();
        let paths: Vec<&str> = m.entries().iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["a", "a.txt", "bin", "bin/run.sh"]);
        let a = m.get("a.txt").unwrap();
        assert_eq!((a.kind, a.mode, a.size), (EntryKind::File, 0o644, 6));
        assert_eq!(a.sha256.as_deref(), Some(HELLO_SHA));
        let link = m.get("a").unwrap();
        assert_eq!(link.kind, EntryKind::Symlink);
        assert_eq!(link.sha256, Some(sha256_hex(b"missing/target")));
        assert_eq!(link.size, 14);
        let bin = m.get("bin").unwrap();
        assert_eq!(
            (bin.kind, bin.mode, bin.size, &bin.sha256),
            (EntryKind::Dir, 0o750, 0, &None)
        );
        assert_eq!(m.get("bin/run.sh").unwrap().mode, 0o4755);
        assert!(m.get("nope").is_none());
        assert!(m.incomplete().is_empty());
    }

    #[test]
    fn symlinks_to_directories_are_listed_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "outside/secret.txt", "secret");
        let root = dir.path().join("root");
        fs::create_dir(&root).unwrap();
        symlink(dir.path().join("outside"), root.join("out")).unwrap();
        symlink("/etc", root.join("etc")).unwrap();
        let m = Manifest::of_dir(&root).unwrap();
        let paths: Vec<&str> = m.entries().iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["etc", "out"]);
        assert!(m.entries().iter().all(|e| e.kind == EntryKind::Symlink));
    }

    #[test]
    fn a_fifo_is_listed_as_other_and_never_opened() {
        let dir = tempfile::tempdir().unwrap();
        nix::unistd::mkfifo(&dir.path().join("pipe"), Mode::from_bits_truncate(0o600)).unwrap();
        let m = Manifest::of_dir(dir.path()).unwrap();
        let e = m.get("pipe").unwrap();
        assert_eq!(
            (e.kind, e.mode, &e.sha256),
            (EntryKind::Other, 0o600, &None)
        );
    }

    #[test]
    fn a_missing_root_is_a_read_error_naming_it() {
        let err = Manifest::of_dir(Path::new("/nonexistent/envcraft")).unwrap_err();
        assert!(
            matches!(&err, VerifyError::Read { path, .. } if path.ends_with("nonexistent/envcraft"))
        );
    }

    #[test]
    fn json_round_trips_and_refuses_other_versions_and_keys() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "d/x", "hello\n");
        symlink("x", dir.path().join("d/l")).unwrap();
        let m = Manifest::of_dir(dir.path()).unwrap();
        let json = m.to_json();
        assert!(json.contains("\"version\": 1"), "{json}");
        assert!(json.contains("\"mode\": \"0644\""), "{json}");
        assert!(!json.contains("incomplete"), "{json}");
        assert_eq!(Manifest::from_json(&json).unwrap(), m);
        let v2 = json.replace("\"version\": 1", "\"version\": 2");
        assert!(crate::error::chain(&Manifest::from_json(&v2).unwrap_err()).contains("version 2"));
        let extra = json.replace("\"version\": 1", "\"version\": 1, \"extra\": 0");
        assert!(crate::error::chain(&Manifest::from_json(&extra).unwrap_err()).contains("extra"));
        let bad_mode = json.replace("\"0644\"", "\"0999\"");
        assert!(crate::error::chain(&Manifest::from_json(&bad_mode).unwrap_err()).contains("0999"));
    }

    /// Build `depth` nested directories below `root` by walking down with descriptors (the
    /// full path grows past PATH_MAX), with a file at the bottom.
    fn deep_tree(root: &Path, depth: usize) {
        let name = "d".repeat(40);
        let mut dir =
            nix::fcntl::open(root, OFlag::O_RDONLY | OFlag::O_DIRECTORY, Mode::empty()).unwrap();
        for _ in 0..depth {
            nix::sys::stat::mkdirat(&dir, name.as_str(), Mode::S_IRWXU).unwrap();
            dir = openat(
                &dir,
                name.as_str(),
                OFlag::O_RDONLY | OFlag::O_DIRECTORY,
                Mode::empty(),
            )
            .unwrap();
        }
        let fd = openat(
            &dir,
            "bottom.txt",
            OFlag::O_WRONLY | OFlag::O_CREAT,
            Mode::S_IRWXU,
        )
        .unwrap();
        nix::unistd::write(&fd, b"deep").unwrap();
    }

    #[test]
    fn a_tree_deeper_than_max_depth_is_listed_to_that_depth_and_marked_incomplete() {
        let dir = tempfile::tempdir().unwrap();
        deep_tree(dir.path(), MAX_DEPTH + 20);
        write(dir.path(), "top.txt", "hello\n");
        let m = Manifest::of_dir(dir.path()).unwrap();
        assert_eq!(m.len(), MAX_DEPTH + 1);
        assert_eq!(m.incomplete().len(), 1);
        let deepest = &m.incomplete()[0];
        assert_eq!(deepest.split('/').count(), MAX_DEPTH);
        assert!(m.get(deepest).is_some());
        assert!(m.is_unknown(&format!("{deepest}/anything")));
        assert!(!m.is_unknown(deepest) && !m.is_unknown("top.txt"));
        // Files beside the long paths are hashed (opened one component at a time).
        let mid = deepest.split('/').take(120).collect::<Vec<_>>().join("/");
        assert!(mid.len() > 4000);
        assert!(m.get(&mid).is_some());
    }

    #[test]
    fn a_file_beyond_path_max_is_hashed() {
        let dir = tempfile::tempdir().unwrap();
        deep_tree(dir.path(), 110);
        let m = Manifest::of_dir(dir.path()).unwrap();
        let bottom = m
            .entries()
            .iter()
            .find(|e| e.path.ends_with("bottom.txt"))
            .unwrap();
        assert!(bottom.path.len() > 4096);
        assert_eq!(bottom.sha256, Some(sha256_hex(b"deep")));
    }

    /// 1,000 files, small and large, across directories: the manifest's hashes are exactly
    /// those coreutils' `sha256sum` prints.
    #[test]
    fn a_thousand_file_tree_hashes_as_sha256sum_does() {
        let sha256sum = Path::new("/usr/bin/sha256sum");
        if !sha256sum.exists() {
            crate::verify::tests::skip("/usr/bin/sha256sum is not installed");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut rng = Rng::new(1000);
        let mut names = Vec::new();
        for i in 0..1000 {
            let size = match i % 100 {
                0 => 3 << 20,
                1..=9 => rng.below(512 << 10),
                _ => rng.below(8 << 10),
            };
            let name = format!("d{}/s{}/f{i}.bin", i % 7, i % 3);
            let mut bytes = vec![0u8; size];
            rng.fill(&mut bytes);
            fs::create_dir_all(dir.path().join(&name).parent().unwrap()).unwrap();
            fs::write(dir.path().join(&name), &bytes).unwrap();
            names.push(name);
        }
        let m = Manifest::of_dir(dir.path()).unwrap();
        let out = std::process::Command::new(sha256sum)
            .args(&names)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success());
        let theirs: BTreeMap<String, String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                let (hash, path) = l.split_once("  ").unwrap();
                (path.to_string(), hash.to_string())
            })
            .collect();
        assert_eq!(theirs.len(), 1000);
        let ours: BTreeMap<String, String> = m
            .entries()
            .iter()
            .filter(|e| e.kind == EntryKind::File)
            .map(|e| (e.path.clone(), e.sha256.clone().unwrap()))
            .collect();
        assert_eq!(ours, theirs);
        let sizes: u64 = m.entries().iter().map(|e| e.size).sum();
        let on_disk: u64 = names
            .iter()
            .map(|n| fs::metadata(dir.path().join(n)).unwrap().len())
            .sum();
        assert_eq!(sizes, on_disk);
    }

    #[test]
    fn apply_changes_refuses_a_changed_path_missing_from_the_upper_layer() {
        let dir = tempfile::tempdir().unwrap();
        let upper = dir.path().join("upper");
        fs::create_dir(&upper).unwrap();
        let changes = Changes {
            added: vec!["gone/x.txt".into()],
            ..Changes::default()
        };
        let err = Manifest::default()
            .apply_changes(&upper, &changes)
            .unwrap_err();
        assert!(
            matches!(&err, VerifyError::Read { path, .. } if path.ends_with("gone/x.txt")),
            "{err:?}"
        );
    }

    #[test]
    fn apply_changes_turns_a_directory_into_a_file_and_back() {
        let dir = tempfile::tempdir().unwrap();
        let (lower, upper1, upper2) = (
            dir.path().join("lower"),
            dir.path().join("u1"),
            dir.path().join("u2"),
        );
        write(&lower, "d/a.txt", "a");
        write(&lower, "d/sub/b.txt", "b");
        write(&lower, "keep.txt", "k");
        let initial = Manifest::of_dir(&lower).unwrap();
        write(&upper1, "d", "now a file");
        let to_file = Changes {
            modified: vec!["d".into()],
            deleted: vec!["d/a.txt".into(), "d/sub".into(), "d/sub/b.txt".into()],
            ..Changes::default()
        };
        let as_file = initial.apply_changes(&upper1, &to_file).unwrap();
        let paths: Vec<&str> = as_file.entries().iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["d", "keep.txt"]);
        assert_eq!(
            as_file.get("d").unwrap().sha256,
            Some(sha256_hex(b"now a file"))
        );
        write(&upper2, "d/c.txt", "c");
        let to_dir = Changes {
            added: vec!["d/c.txt".into()],
            modified: vec!["d".into()],
            ..Changes::default()
        };
        let as_dir = as_file.apply_changes(&upper2, &to_dir).unwrap();
        assert_eq!(
            as_dir,
            Manifest::of_dir(&upper2)
                .map(|m| {
                    let mut entries = m.entries().to_vec();
                    entries.push(initial.get("keep.txt").unwrap().clone());
                    Manifest::from_entries(entries, vec![])
                })
                .unwrap()
        );
    }

    /// What the oracle knows of one path: kind, mode, content or link target.
    #[derive(PartialEq)]
    struct State {
        kind: EntryKind,
        mode: u32,
        bytes: Vec<u8>,
    }

    /// Every path below `root` and its state, read with std::fs alone (independent of the
    /// manifest code).
    fn states(root: &Path) -> BTreeMap<String, State> {
        let mut out = BTreeMap::new();
        let mut stack = vec![String::new()];
        while let Some(rel) = stack.pop() {
            for entry in fs::read_dir(root.join(&rel)).unwrap() {
                let entry = entry.unwrap();
                let name = entry.file_name().into_string().unwrap();
                let path = if rel.is_empty() {
                    name
                } else {
                    format!("{rel}/{name}")
                };
                let meta = fs::symlink_metadata(root.join(&path)).unwrap();
                let mode = meta.permissions().mode() & 0o7777;
                let state = if meta.is_dir() {
                    stack.push(path.clone());
                    State {
                        kind: EntryKind::Dir,
                        mode,
                        bytes: vec![],
                    }
                } else if meta.file_type().is_symlink() {
                    let target = fs::read_link(root.join(&path)).unwrap();
                    State {
                        kind: EntryKind::Symlink,
                        mode,
                        bytes: target.into_os_string().into_encoded_bytes(),
                    }
                } else {
                    State {
                        kind: EntryKind::File,
                        mode,
                        bytes: fs::read(root.join(&path)).unwrap(),
                    }
                };
                out.insert(path, state);
            }
        }
        out
    }

    /// The change list between two trees, as the overlay's upper layer would give it, and an
    /// upper-style tree holding exactly the added and modified paths (their parent
    /// directories copied up with the final modes).
    fn upper_of(initial: &Path, final_: &Path, upper: &Path) -> Changes {
        let (before, after) = (states(initial), states(final_));
        let mut changes = Changes::default();
        for (path, state) in &after {
            match before.get(path) {
                None => changes.added.push(path.clone()),
                Some(old) if old != state => changes.modified.push(path.clone()),
                Some(_) => {}
            }
        }
        changes.deleted = before
            .keys()
            .filter(|p| !after.contains_key(*p))
            .cloned()
            .collect();
        fs::create_dir_all(upper).unwrap();
        let mut changed: Vec<&String> = changes.added.iter().chain(&changes.modified).collect();
        changed.sort();
        for path in changed {
            let mut prefix = String::new();
            for part in path.split('/') {
                if !prefix.is_empty() {
                    if !upper.join(&prefix).exists() {
                        fs::create_dir(upper.join(&prefix)).unwrap();
                        chmod(upper, &prefix, after[&prefix].mode);
                    }
                    prefix.push('/');
                }
                prefix.push_str(part);
            }
            let state = &after[path];
            let target = upper.join(path);
            match state.kind {
                EntryKind::Dir => {
                    if !target.exists() {
                        fs::create_dir(&target).unwrap();
                    }
                    chmod(upper, path, state.mode);
                }
                EntryKind::Symlink => {
                    symlink(std::ffi::OsStr::from_bytes(&state.bytes), &target).unwrap();
                }
                _ => {
                    fs::write(&target, &state.bytes).unwrap();
                    chmod(upper, path, state.mode);
                }
            }
        }
        changes
    }

    /// A random tree: files of random content and modes, directories, symlinks.
    fn random_tree(rng: &mut Rng, root: &Path) {
        fs::create_dir_all(root).unwrap();
        let mut dirs = vec![String::new()];
        for i in 0..rng.below(30) + 1 {
            let parent = dirs[rng.below(dirs.len())].clone();
            let path = if parent.is_empty() {
                format!("n{i}")
            } else {
                format!("{parent}/n{i}")
            };
            match rng.below(10) {
                0..=5 => random_file(rng, root, &path),
                6..=8 => {
                    fs::create_dir(root.join(&path)).unwrap();
                    chmod(root, &path, rng.pick(&[0o755, 0o700, 0o750, 0o775]));
                    dirs.push(path);
                }
                _ => symlink(format!("../t{}", rng.below(5)), root.join(&path)).unwrap(),
            }
        }
    }

    fn random_file(rng: &mut Rng, root: &Path, path: &str) {
        let mut bytes = vec![0u8; rng.pick(&[0, 1, 17, 4096, 70_000])];
        rng.fill(&mut bytes);
        fs::write(root.join(path), &bytes).unwrap();
        chmod(
            root,
            path,
            rng.pick(&[0o644, 0o600, 0o755, 0o444, 0o4755, 0o1777]),
        );
    }

    /// Paths of one kind below `root`.
    fn of_kind(root: &Path, kind: EntryKind) -> Vec<String> {
        states(root)
            .into_iter()
            .filter(|(_, s)| s.kind == kind)
            .map(|(p, _)| p)
            .collect()
    }

    /// One random change to the tree at `root`; with `dir_modes`, directories' permission
    /// bits may change too.
    fn random_change(rng: &mut Rng, root: &Path, step: usize, dir_modes: bool) {
        let files = of_kind(root, EntryKind::File);
        let mut dirs = of_kind(root, EntryKind::Dir);
        let links = of_kind(root, EntryKind::Symlink);
        let new_name = |dirs: &[String], rng: &mut Rng| {
            let parent = if dirs.is_empty() || rng.below(3) == 0 {
                String::new()
            } else {
                dirs[rng.below(dirs.len())].clone()
            };
            if parent.is_empty() {
                format!("c{step}")
            } else {
                format!("{parent}/c{step}")
            }
        };
        match rng.below(12) {
            0 if !files.is_empty() => {
                let f = &files[rng.below(files.len())];
                if rng.below(4) == 0 {
                    // Rewritten with the same content: not a change.
                    let same = fs::read(root.join(f)).unwrap();
                    fs::write(root.join(f), same).unwrap();
                } else {
                    let mode = fs::symlink_metadata(root.join(f))
                        .unwrap()
                        .permissions()
                        .mode();
                    random_file(rng, root, f);
                    chmod(root, f, mode & 0o7777);
                }
            }
            1 if !files.is_empty() => {
                let f = &files[rng.below(files.len())];
                chmod(root, f, rng.pick(&[0o644, 0o600, 0o755, 0o2755]));
            }
            2 if dir_modes && !dirs.is_empty() => {
                let d = &dirs[rng.below(dirs.len())];
                chmod(root, d, rng.pick(&[0o755, 0o700, 0o750, 0o1777]));
            }
            3 => {
                let name = new_name(&dirs, rng);
                random_file(rng, root, &name);
            }
            4 => {
                let d = new_name(&dirs, rng);
                fs::create_dir(root.join(&d)).unwrap();
                dirs.push(d.clone());
                for k in 0..rng.below(3) {
                    random_file(rng, root, &format!("{d}/f{k}"));
                }
            }
            5 if !files.is_empty() || !links.is_empty() => {
                let all: Vec<&String> = files.iter().chain(&links).collect();
                fs::remove_file(root.join(all[rng.below(all.len())])).unwrap();
            }
            6 if !dirs.is_empty() => {
                fs::remove_dir_all(root.join(&dirs[rng.below(dirs.len())])).unwrap();
            }
            7 if !files.is_empty() => {
                let f = &files[rng.below(files.len())];
                fs::remove_file(root.join(f)).unwrap();
                fs::create_dir(root.join(f)).unwrap();
                random_file(rng, root, &format!("{f}/inside"));
            }
            8 if !dirs.is_empty() => {
                let d = &dirs[rng.below(dirs.len())];
                fs::remove_dir_all(root.join(d)).unwrap();
                random_file(rng, root, d);
            }
            9 if !files.is_empty() || !links.is_empty() => {
                let all: Vec<&String> = files.iter().chain(&links).collect();
                let p = all[rng.below(all.len())];
                fs::remove_file(root.join(p)).unwrap();
                symlink(format!("target-{}", rng.below(3)), root.join(p)).unwrap();
            }
            10 => symlink("somewhere", root.join(new_name(&dirs, rng))).unwrap(),
            _ if !dirs.is_empty() => {
                // A directory removed and made again (an opaque directory in an overlay).
                let d = &dirs[rng.below(dirs.len())];
                let mode = fs::symlink_metadata(root.join(d))
                    .unwrap()
                    .permissions()
                    .mode();
                fs::remove_dir_all(root.join(d)).unwrap();
                fs::create_dir(root.join(d)).unwrap();
                if !dir_modes {
                    chmod(root, d, mode & 0o7777);
                }
                random_file(rng, root, &format!("{d}/again"));
            }
            _ => {
                let name = new_name(&dirs, rng);
                random_file(rng, root, &name);
            }
        }
    }

    /// Property: for random templates and random change sets, the template's manifest with
    /// the upper layer's changes applied equals a full rehash of the final tree.
    #[test]
    fn apply_changes_equals_a_full_rehash_on_random_change_sets() {
        for seed in 0..150 {
            let mut rng = Rng::new(seed);
            let dir = tempfile::tempdir().unwrap();
            let (initial, final_, upper) = (
                dir.path().join("initial"),
                dir.path().join("final"),
                dir.path().join("upper"),
            );
            random_tree(&mut rng, &initial);
            crate::verify::tests::copy_all(&initial, &final_);
            for step in 0..rng.below(8) + 1 {
                random_change(&mut rng, &final_, step, true);
            }
            let changes = upper_of(&initial, &final_, &upper);
            let incremental = Manifest::of_dir(&initial)
                .unwrap()
                .apply_changes(&upper, &changes)
                .unwrap();
            let full = Manifest::of_dir(&final_).unwrap();
            assert_eq!(incremental, full, "seed {seed}, changes {changes:?}");
        }
    }

    /// The same property with the change list the workspace module computes (between a
    /// template and a changed full copy, which serves as the upper layer), directory mode
    /// changes included.
    /// Verifying with only the template entries the rules name and the changes touch
    /// (`of_paths`) gives the verdict full manifests give, for random references and random
    /// attempts.
    #[test]
    fn verifying_with_the_relevant_paths_only_equals_verifying_with_full_manifests() {
        for seed in 2000..2080 {
            let mut rng = Rng::new(seed);
            let dir = tempfile::tempdir().unwrap();
            let initial = dir.path().join("initial");
            let reference = dir.path().join("reference");
            let attempt = dir.path().join("attempt");
            random_tree(&mut rng, &initial);
            crate::verify::tests::copy_all(&initial, &reference);
            crate::verify::tests::copy_all(&initial, &attempt);
            for step in 0..rng.below(6) + 1 {
                random_change(&mut rng, &reference, step, true);
            }
            for step in 0..rng.below(6) + 1 {
                random_change(&mut rng, &attempt, step + 100, true);
            }
            let full_initial = Manifest::of_dir(&initial).unwrap();
            let expected = crate::verify::expected_from(
                &full_initial,
                &Manifest::of_dir(&reference).unwrap(),
                if seed % 2 == 0 {
                    crate::verify::Extra::Deny
                } else {
                    crate::verify::Extra::Allow
                },
            );
            let full = crate::verify::verify(
                &expected,
                &full_initial,
                &Manifest::of_dir(&attempt).unwrap(),
                None,
            );
            let changes = crate::workspace::changes_between(&initial, &attempt).unwrap();
            let mut relevant: Vec<String> = expected.files.keys().cloned().collect();
            relevant.extend(expected.absent.iter().cloned());
            relevant.extend(changes.modified.iter().cloned());
            relevant.extend(changes.deleted.iter().cloned());
            let partial_initial = Manifest::of_paths(&initial, &relevant).unwrap();
            let partial_final = partial_initial.apply_changes(&attempt, &changes).unwrap();
            let partial = crate::verify::verify(&expected, &partial_initial, &partial_final, None);
            assert_eq!(
                (partial.reward, partial.passed),
                (full.reward, full.passed),
                "seed {seed}: {:?}\nvs {:?}",
                partial.checks,
                full.checks
            );
        }
    }

    #[test]
    fn apply_changes_with_the_workspace_change_list_equals_a_full_rehash() {
        for seed in 1000..1060 {
            let mut rng = Rng::new(seed);
            let dir = tempfile::tempdir().unwrap();
            let (initial, final_) = (dir.path().join("initial"), dir.path().join("final"));
            random_tree(&mut rng, &initial);
            crate::verify::tests::copy_all(&initial, &final_);
            for step in 0..rng.below(8) + 1 {
                random_change(&mut rng, &final_, step, true);
            }
            let changes = crate::workspace::changes_between(&initial, &final_).unwrap();
            let incremental = Manifest::of_dir(&initial)
                .unwrap()
                .apply_changes(&final_, &changes)
                .unwrap();
            let full = Manifest::of_dir(&final_).unwrap();
            assert_eq!(incremental, full, "seed {seed}, changes {changes:?}");
        }
    }

    /// Names that are not UTF-8, two of them differing only in an invalid byte: both listed,
    /// both hashed, and the incremental manifest equals a full one (it errored before).
    #[test]
    fn names_that_are_not_utf8_are_listed_apart_and_hashed() {
        let dir = tempfile::tempdir().unwrap();
        let (initial, final_) = (dir.path().join("initial"), dir.path().join("final"));
        write(&initial, "keep.txt", "same");
        crate::verify::tests::copy_all(&initial, &final_);
        let name = |b: &[u8]| final_.join(OsStr::from_bytes(b));
        fs::write(name(b"bad\xfe"), "one").unwrap();
        fs::write(name(b"bad\xff"), "two").unwrap();
        fs::create_dir(name(b"d\x80")).unwrap();
        fs::write(name(b"d\x80/in\\x41"), "three").unwrap();
        let changes = crate::workspace::changes_between(&initial, &final_).unwrap();
        assert_eq!(
            changes.added,
            vec!["bad\\xfe", "bad\\xff", "d\\x80", "d\\x80/in\\\\x41"]
        );
        let incremental = Manifest::of_dir(&initial)
            .unwrap()
            .apply_changes(&final_, &changes)
            .unwrap();
        assert_eq!(incremental, Manifest::of_dir(&final_).unwrap());
        assert_eq!(
            incremental.get("bad\\xff").unwrap().sha256.as_deref(),
            Some(sha256_hex(b"two").as_str())
        );
    }
}
