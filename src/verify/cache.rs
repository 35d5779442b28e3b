//! The template's manifest, cached: verifying a session then costs its changed bytes, not a
//! rehash of the template.
//!
//! The cache key is a digest of the template layers' metadata as the kernel keeps it (path,
//! type, mode, size, inode, modification and change times of every entry). Any change to a
//! layer's content changes a size, a modification time or, at least, a change time (which no
//! user can set back), or an inode: a changed template can never be served a stale manifest.
//! Reading metadata costs a `stat` per entry; hashing would cost every byte.
//!
//! An entry is trusted only when it is ours: the cache directory is private (made or checked
//! by [`state_root::prepare`]) and every entry is authenticated with an HMAC under a secret
//! kept in that directory, so an entry planted or edited by anyone else is recomputed, never
//! served.

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::{Manifest, VerifyError};
use crate::workspace::state_root;

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

/// The first line of a cache entry, before the entry's HMAC in hex; the manifest's JSON
/// follows on the next line.
const ENTRY_HEADER: &str = "envcraft-manifest-cache v1 hmac-sha256 ";
/// The cache's secret, made by the first verify that stores an entry: 32 random bytes, mode
/// 0600, in the cache directory (which [`state_root::prepare`] made private).
const SECRET_FILE: &str = "secret";
const SECRET_LEN: usize = 32;

/// The manifest of the union of `layers`, read at `view`, from the cache in `cache_dir` when
/// it holds an authentic entry for these layers as they are now; computed and stored
/// otherwise.
///
/// The cache directory is made (or checked to be ours and private) by
/// [`state_root::prepare`]; each entry carries an HMAC-SHA256, under the cache's own secret,
/// of its key and its manifest. An entry that fails the check (written by anyone but us, or
/// moved from another key) is never served: the manifest is recomputed and the entry
/// replaced, so a poisoned cache can cost a rehash, never a verdict.
pub fn template_manifest(
    layers: &[PathBuf],
    view: &Path,
    cache_dir: &Path,
) -> Result<Manifest, VerifyError> {
    let key = key(layers)?;
    state_root::prepare(cache_dir).map_err(|e| VerifyError::Read {
        path: cache_dir.to_path_buf(),
        source: io::Error::other(e),
    })?;
    let secret = secret(cache_dir).map_err(|source| VerifyError::Read {
        path: cache_dir.join(SECRET_FILE),
        source,
    })?;
    let path = cache_dir.join(format!("{key}.json"));
    if let Some(manifest) = load(&path, &key, &secret) {
        return Ok(manifest);
    }
    let manifest = Manifest::of_dir(view)?;
    // Stored atomically; a failure to store only costs the next verify a rehash.
    let json = manifest.to_json();
    let entry = format!(
        "{ENTRY_HEADER}{}\n{json}",
        hex(&mac(&secret, &key, json.as_bytes()))
    );
    let temp = cache_dir.join(format!(".{key}.{}.tmp", std::process::id()));
    if write_new(&temp, entry.as_bytes(), 0o600).is_ok() && fs::rename(&temp, &path).is_err() {
        let _ = fs::remove_file(&temp);
    }
    Ok(manifest)
}

/// The entry at `path` when it is there and authentic for `key`.
fn load(path: &Path, key: &str, secret: &[u8; SECRET_LEN]) -> Option<Manifest> {
    let mut text = String::new();
    open_private(path).ok()?.read_to_string(&mut text).ok()?;
    let (header, json) = text.split_once('\n')?;
    let claimed = header.strip_prefix(ENTRY_HEADER)?;
    let expected = hex(&mac(secret, key, json.as_bytes()));
    // Compared in full whatever differs first.
    let same = claimed.len() == expected.len()
        && claimed
            .bytes()
            .zip(expected.bytes())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0;
    if !same {
        tracing::warn!(entry = %path.display(), "manifest cache entry failed its check; recomputed");
        return None;
    }
    Manifest::from_json(json).ok()
}

/// The cache's secret: read when it is there (a regular file of ours, mode 0600, of the right
/// length), else made.
fn secret(cache_dir: &Path) -> io::Result<[u8; SECRET_LEN]> {
    let path = cache_dir.join(SECRET_FILE);
    for _ in 0..2 {
        match open_private(&path) {
            Ok(mut file) => {
                let mut secret = [0u8; SECRET_LEN];
                file.read_exact(&mut secret)?;
                return Ok(secret);
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let mut secret = [0u8; SECRET_LEN];
                fs::File::open("/dev/urandom")?.read_exact(&mut secret)?;
                let temp = cache_dir.join(format!(".{SECRET_FILE}.{}.tmp", std::process::id()));
                let _ = fs::remove_file(&temp);
                write_new(&temp, &secret, 0o600)?;
                // A hard link never replaces: when another process made one first, its
                // secret is the one read on the next turn.
                let linked = fs::hard_link(&temp, &path);
                let _ = fs::remove_file(&temp);
                match linked {
                    Ok(()) => return Ok(secret),
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::other(format!(
        "{} keeps changing; expected the cache's secret",
        path.display()
    )))
}

/// Open `path` for reading when it is a regular file (not a link) of ours that nobody else
/// can read or write.
fn open_private(path: &Path) -> io::Result<fs::File> {
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    let uid = nix::unistd::geteuid().as_raw();
    if !meta.is_file() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(io::Error::other(format!(
            "{} is owned by uid {} with mode {:04o}; expected a regular file of uid {uid} with mode 0600",
            path.display(),
            meta.uid(),
            meta.mode() & 0o7777
        )));
    }
    Ok(file)
}

fn write_new(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)?;
    file.write_all(bytes)
}

/// HMAC-SHA256 (RFC 2104) under `secret` of the entry's key and its manifest's JSON.
fn mac(secret: &[u8; SECRET_LEN], key: &str, json: &[u8]) -> [u8; 32] {
    let mut inner_pad = [0x36u8; 64];
    let mut outer_pad = [0x5cu8; 64];
    for (i, b) in secret.iter().enumerate() {
        inner_pad[i] ^= b;
        outer_pad[i] ^= b;
    }
    let mut inner = Sha256::new();
    inner.update(inner_pad);
    inner.update(key.as_bytes());
    inner.update([0]);
    inner.update(json);
    let mut outer = Sha256::new();
    outer.update(outer_pad);
    outer.update(inner.finalize());
    outer.finalize().into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
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
        // The entry and the cache's secret.
        assert_eq!(fs::read_dir(&cache).unwrap().count(), 2);
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

    #[test]
    fn a_planted_or_edited_entry_is_recomputed_never_served() {
        let dir = tempfile::tempdir().unwrap();
        let layer = dir.path().join("layer");
        let cache = dir.path().join("cache");
        fs::create_dir(&layer).unwrap();
        fs::write(layer.join("a.txt"), "one").unwrap();
        let layers = vec![layer.clone()];
        let truth = template_manifest(&layers, &layer, &cache).unwrap();
        // What an attacker would serve: the manifest of another tree.
        let other = dir.path().join("other");
        fs::create_dir(&other).unwrap();
        fs::write(other.join("a.txt"), "forged").unwrap();
        let forged = Manifest::of_dir(&other).unwrap().to_json();
        let entry = cache.join(format!("{}.json", key(&layers).unwrap()));
        let signed = fs::read_to_string(&entry).unwrap();
        let header = signed.lines().next().unwrap().to_string();
        for planted in [forged.clone(), format!("{header}\n{forged}")] {
            fs::write(&entry, planted).unwrap();
            let served = template_manifest(&layers, &layer, &cache).unwrap();
            assert_eq!(served.get("a.txt"), truth.get("a.txt"));
            // And the entry was replaced by an authentic one.
            assert_eq!(fs::read_to_string(&entry).unwrap(), signed);
        }
    }
}
