//! The template's manifest, cached: verifying a session then costs its changed bytes, not a
//! rehash of the template.
//!
//! The cache key is a digest of the template layers' metadata as the kernel keeps it (path,
//! type, mode, size, inode, modification and change times of every entry). Any change to a
//! layer's content changes a size, a modification time or, at least, a change time (which no
//! user can set back), or an inode: a changed template can never be served a stale manifest.
//! Reading metadata costs a `stat` per entry; hashing would cost every byte.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{Manifest, VerifyError};

/// The cache key of `layers` (topmost first).
pub fn key(layers: &[PathBuf]) -> Result<String, VerifyError> {
    let mut hasher = Sha256::new();
    for layer in layers {
        hasher.update(layer.as_os_str().as_encoded_bytes());
        hasher.update([0]);
        for entry in walkdir::WalkDir::new(layer).sort_by_file_name() {
            let entry = entry.map_err(|e| VerifyError::Read {
                path: layer.clone(),
                source: e.into(),
            })?;
            let m = entry
                .path()
                .symlink_metadata()
                .map_err(|source| VerifyError::Read {
                    path: entry.path().to_path_buf(),
                    source,
                })?;
            let rel = entry.path().strip_prefix(layer).unwrap_or(entry.path());
            hasher.update(rel.as_os_str().as_encoded_bytes());
            for n in [
                u64::from(m.mode()),
                m.size(),
                m.ino(),
                m.dev(),
                m.mtime() as u64,
                m.mtime_nsec() as u64,
                m.ctime() as u64,
                m.ctime_nsec() as u64,
            ] {
                hasher.update(n.to_le_bytes());
            }
        }
        hasher.update([1]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// The manifest of the union of `layers`, read at `view`, from the cache in `cache_dir` when
/// it holds one for these layers as they are now; computed and stored otherwise.
pub fn template_manifest(
    layers: &[PathBuf],
    view: &Path,
    cache_dir: &Path,
) -> Result<Manifest, VerifyError> {
    let key = key(layers)?;
    let path = cache_dir.join(format!("{key}.json"));
    if let Ok(text) = fs::read_to_string(&path)
        && let Ok(manifest) = Manifest::from_json(&text)
    {
        return Ok(manifest);
    }
    let manifest = Manifest::of_dir(view)?;
    // Stored atomically; a failure to store only costs the next verify a rehash.
    if fs::create_dir_all(cache_dir).is_ok() {
        let temp = cache_dir.join(format!(".{key}.{}.tmp", std::process::id()));
        if fs::write(&temp, manifest.to_json()).is_ok() {
            let _ = fs::rename(&temp, &path);
        }
    }
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_changed_template_gets_a_new_key_and_a_fresh_manifest() {
        let dir = tempfile::tempdir().unwrap();
        let layer = dir.path().join("layer");
        let cache = dir.path().join("cache");
        fs::create_dir(&layer).unwrap();
        fs::write(layer.join("a.txt"), "one").unwrap();
        let layers = vec![layer.clone()];
        let first = template_manifest(&layers, &layer, &cache).unwrap();
        assert_eq!(fs::read_dir(&cache).unwrap().count(), 1);
        let again = template_manifest(&layers, &layer, &cache).unwrap();
        assert_eq!(first.entries(), again.entries());
        // Same size, content changed: the change time moves, so the key does.
        let k1 = key(&layers).unwrap();
        fs::write(layer.join("a.txt"), "two").unwrap();
        let k2 = key(&layers).unwrap();
        assert_ne!(k1, k2);
        let fresh = template_manifest(&layers, &layer, &cache).unwrap();
        assert_ne!(fresh.get("a.txt"), first.get("a.txt"));
    }
}
