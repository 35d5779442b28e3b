//! The layer store under the state root (`STATE/images/`): layers unpacked once, by their
//! uncompressed digest, and images as named records over them.
//!
//! ```text
//! images/lock                       shared by imports, exclusive for rm and gc
//! images/layers/HEX/root/           a layer's tree (HEX: its diff id), read-only to sessions
//! images/layers/HEX/layer.json      what was unpacked (digests, sizes)
//! images/layers/HEX.lock            held while that layer is unpacked
//! images/layers/.partial-HEX-*      an unpacking under way (or killed): never used, swept
//! images/downloads/HEX              a blob being pulled (HEX: its digest), resumed from where
//!                                   it stopped; removed once unpacked, or by `gc`
//! images/downloads/HEX.lock         held while that blob is downloaded
//! images/names/KEY.json             one image record (KEY: the sha256 of its name)
//! ```
//!
//! Promises: a layer directory appears whole or not at all (unpacked into a partial directory,
//! checked against both digests, then renamed); two imports of one layer unpack it once (a
//! per-layer lock, and the check again under it); a record is written atomically; `gc` (under
//! the exclusive lock, so no import is under way) removes every layer no record names and
//! every partial directory.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::layer::{Limits, Unpacked};
use super::oci::{Digest, RunConfig};
use super::unpack::{LayerSource, UnpackError, unpack_confined};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot {op} {path}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} is held by another envcraft for more than {secs} s")]
    Busy { path: PathBuf, secs: u64 },
    #[error("layer {layer}")]
    Layer {
        layer: Digest,
        #[source]
        source: UnpackError,
    },
    #[error("the root filesystem {path}")]
    Rootfs {
        path: PathBuf,
        #[source]
        source: UnpackError,
    },
    #[error(
        "layer {layer}: unpacked, its {what} is {actual}, but {expected} was expected: the layer is corrupt or was changed"
    )]
    Mismatch {
        layer: Digest,
        what: &'static str,
        expected: Digest,
        actual: Digest,
    },
    #[error("no image named {name:?} (see `envcraft image ls`)")]
    NoImage { name: String },
    #[error(
        "{name:?} is not an image name: expected 1 to 255 characters of letters, digits and `._:/@+-`, starting with a letter or a digit"
    )]
    BadName { name: String },
    #[error(
        "{name:?} names a registry image by tag, which can change under it: pin it by digest ({name}@sha256:...; `envcraft image pull {name}` prints the pinned reference), or pull it and name it (`envcraft image pull {name} --name NAME`)"
    )]
    NotPinned { name: String },
    #[error("{name} could not be pulled on first use")]
    Pull {
        name: String,
        #[source]
        source: Box<super::pull::PullError>,
    },
    #[error("the image record {path} is unreadable")]
    Record {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

/// One image: its name, its id (the config's digest) and its layers, lowest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRecord {
    pub name: String,
    pub id: Digest,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<Digest>,
    pub layers: Vec<Digest>,
    pub config: RunConfig,
    pub platform: String,
    /// Where it came from (a path, a reference).
    pub source: String,
    /// The bytes of its unpacked layers' tar streams.
    pub bytes: u64,
}

/// What `gc` removed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GcReport {
    pub layers_removed: usize,
    pub partial_removed: usize,
    pub layers_kept: usize,
}

/// How long a lock is waited for.
const LOCK_WAIT: Duration = Duration::from_secs(600);

/// The store under a state root.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

/// A held lock (released when dropped).
pub struct StoreLock(#[allow(dead_code)] nix::fcntl::Flock<File>);

fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> StoreError + 'a {
    move |source| StoreError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

/// Check an image name.
pub fn check_name(name: &str) -> Result<(), StoreError> {
    let ok = !name.is_empty()
        && name.len() <= 255
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._:/@+-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(StoreError::BadName {
            name: name.chars().take(300).collect(),
        })
    }
}

fn mkdir(path: &Path) -> Result<(), StoreError> {
    match fs::DirBuilder::new().mode(0o711).create(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && path.is_dir() => Ok(()),
        Err(e) => Err(io_err("create", path)(e)),
    }
}

impl Store {
    /// The store of the state root `state_root` (already checked by `state_root::open`).
    pub fn open(state_root: &Path) -> Result<Store, StoreError> {
        let dir = state_root.join("images");
        mkdir(&dir)?;
        mkdir(&dir.join("layers"))?;
        mkdir(&dir.join("names"))?;
        Ok(Store { dir })
    }

    /// The store of `state_root` when there is one (made by an import), without making it.
    pub fn existing(state_root: &Path) -> Option<Store> {
        let dir = state_root.join("images");
        dir.join("names").is_dir().then_some(Store { dir })
    }

    fn layers(&self) -> PathBuf {
        self.dir.join("layers")
    }

    fn downloads(&self) -> PathBuf {
        self.dir.join("downloads")
    }

    /// Where the blob `digest` is downloaded to (kept there, partial, when a pull stops), and
    /// the lock held while it is: made on demand. Call with [`Store::import_lock`] held.
    pub fn download(&self, digest: &Digest) -> Result<(PathBuf, StoreLock), StoreError> {
        let dir = self.downloads();
        mkdir(&dir)?;
        let held = self.lock(&dir.join(format!("{}.lock", digest.hex())), true)?;
        Ok((dir.join(digest.hex()), held))
    }

    /// A new directory for a build's archive and log, beside the layers (the same file
    /// system, not the memory-backed temporary directory), removed when dropped.
    pub fn scratch_dir(&self) -> io::Result<tempfile::TempDir> {
        let dir = self.builds_dir();
        mkdir(&dir).map_err(|e| io::Error::other(crate::error::chain(&e)))?;
        tempfile::Builder::new().prefix(".build-").tempdir_in(dir)
    }

    /// Where builds' scratch directories are (`images/builds/.build-*`).
    pub fn builds_dir(&self) -> PathBuf {
        self.dir.join("builds")
    }

    /// The lock a build holds on its scratch directory `scratch` while it runs (`SCRATCH/lock`),
    /// so that `gc` never takes a build in progress for a killed one's leftovers.
    pub fn build_lock(&self, scratch: &Path) -> Result<StoreLock, StoreError> {
        self.lock(&scratch.join("lock"), true)
    }

    /// The lock held while the image `name` is pulled on first use, so that two first uses
    /// pull it once.
    pub fn name_lock(&self, name: &str) -> Result<StoreLock, StoreError> {
        let key = Digest::of(name.as_bytes());
        self.lock(
            &self.dir.join("names").join(format!("{}.lock", key.hex())),
            true,
        )
    }

    /// The tree of the layer `diff_id` (present or not).
    pub fn layer_root(&self, diff_id: &Digest) -> PathBuf {
        self.layers().join(diff_id.hex()).join("root")
    }

    fn lock(&self, path: &Path, exclusive: bool) -> Result<StoreLock, StoreError> {
        use nix::fcntl::{Flock, FlockArg};
        let arg = if exclusive {
            FlockArg::LockExclusiveNonblock
        } else {
            FlockArg::LockSharedNonblock
        };
        let deadline = Instant::now() + LOCK_WAIT;
        let mut file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(io_err("open the lock", path))?;
        loop {
            match Flock::lock(file, arg) {
                Ok(held) => return Ok(StoreLock(held)),
                Err((back, nix::errno::Errno::EWOULDBLOCK)) if Instant::now() < deadline => {
                    file = back;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                    return Err(StoreError::Busy {
                        path: path.to_path_buf(),
                        secs: LOCK_WAIT.as_secs(),
                    });
                }
                Err((_, e)) => return Err(io_err("lock", path)(e.into())),
            }
        }
    }

    /// The lock an import holds while it adds layers and its record (`gc` waits for it).
    pub fn import_lock(&self) -> Result<StoreLock, StoreError> {
        self.lock(&self.dir.join("lock"), false)
    }

    /// Make sure the layer `diff_id` is unpacked: done already, or unpacked now from
    /// `source` (whose bytes must have the digest `digest` when one is given) and checked.
    /// Returns what it holds. Call with [`Store::import_lock`] held.
    pub fn ensure_layer(
        &self,
        diff_id: &Digest,
        digest: Option<&Digest>,
        source: impl FnOnce() -> io::Result<LayerSource>,
        limits: Limits,
    ) -> Result<Unpacked, StoreError> {
        let done = self.layers().join(diff_id.hex());
        if let Some(u) = self.read_layer(&done) {
            return Ok(u);
        }
        let lock_path = self.layers().join(format!("{}.lock", diff_id.hex()));
        let _held = self.lock(&lock_path, true)?;
        if let Some(u) = self.read_layer(&done) {
            return Ok(u);
        }
        self.sweep_partials(Some(diff_id.hex()))?;
        let partial = self.layers().join(format!(
            ".partial-{}-{}-{}",
            diff_id.hex(),
            std::process::id(),
            nanos()
        ));
        let result = self.unpack_into(&partial, diff_id, digest, source, limits);
        if result.is_err() {
            let _ = remove_tree(&partial);
        }
        let unpacked = result?;
        match fs::rename(&partial, &done) {
            Ok(()) => {}
            Err(e) if done.is_dir() => {
                // Made by another store user meanwhile (one that did not take the lock).
                let _ = remove_tree(&partial);
                tracing::debug!(layer = %diff_id, error = %e, "layer already present");
            }
            Err(e) => {
                let _ = remove_tree(&partial);
                return Err(io_err("rename into place", &done)(e));
            }
        }
        File::open(self.layers())
            .and_then(|d| d.sync_all())
            .map_err(io_err("sync", &self.layers()))?;
        Ok(unpacked)
    }

    /// Unpack a layer whose diff id is not known beforehand (a root filesystem's tar): into a
    /// partial directory of its own, then, under the lock of the diff id it turned out to
    /// have, renamed into place (or dropped, when that layer is there already).
    pub fn add_layer(
        &self,
        named: &Path,
        source: impl FnOnce() -> io::Result<LayerSource>,
        limits: Limits,
    ) -> Result<Unpacked, StoreError> {
        let partial =
            self.layers()
                .join(format!(".partial-new-{}-{}", std::process::id(), nanos()));
        let result = (|| {
            mkdir(&partial)?;
            let root = partial.join("root");
            fs::DirBuilder::new()
                .mode(0o755)
                .create(&root)
                .map_err(io_err("create", &root))?;
            let layer = source().map_err(|source| StoreError::Rootfs {
                path: named.to_path_buf(),
                source: UnpackError::Start {
                    op: "open the layer",
                    source,
                },
            })?;
            unpack_confined(layer, &root, limits).map_err(|source| StoreError::Rootfs {
                path: named.to_path_buf(),
                source,
            })
        })();
        let unpacked = match result {
            Ok(u) => u,
            Err(e) => {
                let _ = remove_tree(&partial);
                return Err(e);
            }
        };
        let done = self.layers().join(unpacked.diff_id.hex());
        let lock_path = self
            .layers()
            .join(format!("{}.lock", unpacked.diff_id.hex()));
        let _held = self.lock(&lock_path, true)?;
        if self.read_layer(&done).is_some() {
            let _ = remove_tree(&partial);
            return Ok(unpacked);
        }
        let finish = (|| {
            write_atomic(
                &partial.join("layer.json"),
                &serde_json::to_vec_pretty(&unpacked).unwrap_or_default(),
            )?;
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&partial, fs::Permissions::from_mode(0o755))
                .map_err(io_err("set the mode of", &partial))?;
            fs::rename(&partial, &done).map_err(io_err("rename into place", &done))
        })();
        if finish.is_err() {
            let _ = remove_tree(&partial);
        }
        finish?;
        Ok(unpacked)
    }

    fn unpack_into(
        &self,
        partial: &Path,
        diff_id: &Digest,
        digest: Option<&Digest>,
        source: impl FnOnce() -> io::Result<LayerSource>,
        limits: Limits,
    ) -> Result<Unpacked, StoreError> {
        mkdir(partial)?;
        let root = partial.join("root");
        fs::DirBuilder::new()
            .mode(0o755)
            .create(&root)
            .map_err(io_err("create", &root))?;
        let named = digest.unwrap_or(diff_id).clone();
        let layer = source().map_err(|source| StoreError::Layer {
            layer: named.clone(),
            source: UnpackError::Start {
                op: "open the layer",
                source,
            },
        })?;
        let unpacked =
            unpack_confined(layer, &root, limits).map_err(|source| StoreError::Layer {
                layer: named.clone(),
                source,
            })?;
        let mismatch = |what, expected: &Digest, actual: &Digest| StoreError::Mismatch {
            layer: named.clone(),
            what,
            expected: expected.clone(),
            actual: actual.clone(),
        };
        if let Some(d) = digest
            && *d != unpacked.digest
        {
            return Err(mismatch("digest", d, &unpacked.digest));
        }
        if unpacked.diff_id != *diff_id {
            return Err(mismatch("diff id", diff_id, &unpacked.diff_id));
        }
        let meta = partial.join("layer.json");
        write_atomic(
            &meta,
            &serde_json::to_vec_pretty(&unpacked).unwrap_or_default(),
        )?;
        // Entries of the layer are the unpacker's to set; the root is read by sessions.
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(partial, fs::Permissions::from_mode(0o755))
            .map_err(io_err("set the mode of", partial))?;
        Ok(unpacked)
    }

    /// What the store holds of the layer `diff_id`, when it holds it whole.
    pub fn layer(&self, diff_id: &Digest) -> Option<Unpacked> {
        self.read_layer(&self.layers().join(diff_id.hex()))
    }

    fn read_layer(&self, dir: &Path) -> Option<Unpacked> {
        let bytes = fs::read(dir.join("layer.json")).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    fn record_path(&self, name: &str) -> PathBuf {
        let key = Digest::of(name.as_bytes());
        self.dir.join("names").join(format!("{}.json", key.hex()))
    }

    /// Save (or replace) an image record; its layers must be in the store.
    pub fn save(&self, record: &ImageRecord) -> Result<(), StoreError> {
        check_name(&record.name)?;
        let bytes = serde_json::to_vec_pretty(record).unwrap_or_default();
        write_atomic(&self.record_path(&record.name), &bytes)
    }

    /// The record of the image named `name`, as it is (no pull: see [`Store::image`]).
    pub fn record(&self, name: &str) -> Result<ImageRecord, StoreError> {
        check_name(name)?;
        let path = self.record_path(name);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(StoreError::NoImage {
                    name: name.to_string(),
                });
            }
            Err(e) => return Err(io_err("read", &path)(e)),
        };
        serde_json::from_slice(&bytes).map_err(|source| StoreError::Record { path, source })
    }

    /// Every image, sorted by name.
    pub fn list(&self) -> Result<Vec<ImageRecord>, StoreError> {
        let names = self.dir.join("names");
        let mut out = Vec::new();
        for entry in fs::read_dir(&names).map_err(io_err("list", &names))? {
            let path = entry.map_err(io_err("list", &names))?.path();
            if path.extension().is_some_and(|e| e == "json") {
                let bytes = fs::read(&path).map_err(io_err("read", &path))?;
                let record = serde_json::from_slice(&bytes)
                    .map_err(|source| StoreError::Record { path, source })?;
                out.push(record);
            }
        }
        out.sort_by(|a: &ImageRecord, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Remove the record of `name` (its layers stay until `gc`).
    pub fn remove(&self, name: &str) -> Result<ImageRecord, StoreError> {
        let _held = self.lock(&self.dir.join("lock"), true)?;
        let record = self.record(name)?;
        let path = self.record_path(name);
        fs::remove_file(&path).map_err(io_err("remove", &path))?;
        Ok(record)
    }

    /// Remove every layer no image names, and every partial unpacking.
    pub fn gc(&self) -> Result<GcReport, StoreError> {
        let _held = self.lock(&self.dir.join("lock"), true)?;
        let held: std::collections::HashSet<String> = self
            .list()?
            .into_iter()
            .flat_map(|r| r.layers.into_iter().map(|d| d.hex().to_string()))
            .collect();
        let mut report = GcReport {
            partial_removed: self.sweep_partials(None)?,
            ..GcReport::default()
        };
        // Downloads that a pull left (stopped, or killed): no pull is under way now.
        let downloads = self.downloads();
        if downloads.is_dir() {
            for entry in fs::read_dir(&downloads).map_err(io_err("list", &downloads))? {
                let path = entry.map_err(io_err("list", &downloads))?.path();
                fs::remove_file(&path).map_err(io_err("remove", &path))?;
                report.partial_removed += usize::from(path.extension().is_none());
            }
        }
        let layers = self.layers();
        for entry in fs::read_dir(&layers).map_err(io_err("list", &layers))? {
            let entry = entry.map_err(io_err("list", &layers))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let hex = name.strip_suffix(".lock").unwrap_or(&name);
            if hex.starts_with('.') || held.contains(hex) {
                report.layers_kept += usize::from(!name.ends_with(".lock"));
                continue;
            }
            let path = entry.path();
            if name.ends_with(".lock") {
                fs::remove_file(&path).map_err(io_err("remove", &path))?;
            } else {
                remove_tree(&path).map_err(io_err("remove", &path))?;
                report.layers_removed += 1;
            }
        }
        Ok(report)
    }

    /// Remove partial unpackings (of one layer, or all): call with that layer's lock, or the
    /// exclusive store lock, held.
    fn sweep_partials(&self, hex: Option<&str>) -> Result<usize, StoreError> {
        let layers = self.layers();
        let prefix = match hex {
            Some(h) => format!(".partial-{h}-"),
            None => ".partial-".to_string(),
        };
        let mut n = 0;
        for entry in fs::read_dir(&layers).map_err(io_err("list", &layers))? {
            let entry = entry.map_err(io_err("list", &layers))?;
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                remove_tree(&entry.path()).map_err(io_err("remove", &entry.path()))?;
                n += 1;
            }
        }
        Ok(n)
    }
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// Write `path` whole or not at all: a temporary file beside it, synced, renamed.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io_err("create a file in", dir))?;
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(io_err("write", path))?;
    tmp.persist(path)
        .map_err(|e| io_err("write", path)(e.error))?;
    Ok(())
}

/// Remove a tree of the store, first making its directories writable (a layer may hold
/// read-only ones). Links are never followed.
fn remove_tree(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if !path.exists() {
        return Ok(());
    }
    for entry in walkdir::WalkDir::new(path).follow_links(false) {
        let Ok(entry) = entry else { continue };
        if entry.file_type().is_dir()
            && let Ok(meta) = entry.metadata()
        {
            let mode = meta.permissions().mode();
            if mode & 0o700 != 0o700 {
                let _ = fs::set_permissions(entry.path(), fs::Permissions::from_mode(mode | 0o700));
            }
        }
    }
    fs::remove_dir_all(path)
}
