//! The regular files an image has below one directory, as its layers stack them: the upper
//! layer's file wins, a whiteout (a character device 0/0) removes a path from the layers
//! below, an opaque directory (`user.overlay.opaque`) hides what they have there. What a
//! Harbor task's image built with `COPY`/`RUN` steps has at its working directory becomes the
//! workspace's files, which would otherwise hide it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use super::store::{ImageRecord, Store};

/// One file of the tree: the layer tree that holds it and its path there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeFile {
    pub layer_root: PathBuf,
    pub path_in_layer: PathBuf,
}

/// What the directory holds: regular files by their path below it, and the paths left out
/// (symbolic links and special files, which a workspace's initial files cannot be).
#[derive(Debug, Default)]
pub struct Tree {
    pub files: BTreeMap<PathBuf, TreeFile>,
    pub left_out: Vec<PathBuf>,
}

fn is_whiteout(meta: &fs::Metadata) -> bool {
    meta.file_type().is_char_device() && {
        use std::os::unix::fs::MetadataExt;
        meta.rdev() == 0
    }
}

fn is_opaque(dir: &Path) -> bool {
    fs::File::open(dir)
        .ok()
        .and_then(|f| crate::sys::fgetxattr(f.as_raw_fd(), c"user.overlay.opaque").ok())
        .flatten()
        .is_some_and(|v| v == b"y")
}

impl Store {
    /// The files `record` has below the absolute directory `dir`.
    pub fn files_under(&self, record: &ImageRecord, dir: &str) -> Tree {
        let dir = Path::new(dir.trim_start_matches('/'));
        let mut tree = Tree::default();
        // Paths (below `dir`) an upper layer decided: a file, a whiteout, a link.
        let mut decided: BTreeSet<PathBuf> = BTreeSet::new();
        // Paths below which lower layers are hidden.
        let mut hidden: Vec<PathBuf> = Vec::new();
        for diff_id in record.layers.iter().rev() {
            let root = self.layer_root(diff_id);
            // The directory itself, or one on the way to it, removed or opaque here.
            let mut ancestor = PathBuf::new();
            let mut cut = false;
            for part in dir.components() {
                ancestor.push(part);
                match fs::symlink_metadata(root.join(&ancestor)) {
                    Ok(m) if m.is_dir() => cut |= is_opaque(&root.join(&ancestor)),
                    Ok(_) => cut = true,
                    Err(_) => {}
                }
            }
            if root.join(dir).is_dir() {
                walk(
                    &root,
                    dir,
                    Path::new(""),
                    &mut decided,
                    &mut hidden,
                    &mut tree,
                );
            }
            if cut {
                break;
            }
        }
        tree
    }
}

/// One layer's part of the tree below `dir/rel`.
fn walk(
    root: &Path,
    dir: &Path,
    rel: &Path,
    decided: &mut BTreeSet<PathBuf>,
    hidden: &mut Vec<PathBuf>,
    tree: &mut Tree,
) {
    let here = root.join(dir).join(rel);
    let Ok(entries) = fs::read_dir(&here) else {
        return;
    };
    let mut names: Vec<_> = entries.flatten().map(|e| e.file_name()).collect();
    names.sort();
    let mut opaque_here = Vec::new();
    for name in names {
        let path = rel.join(&name);
        if hidden.iter().any(|h| path.starts_with(h)) {
            continue;
        }
        let Ok(meta) = fs::symlink_metadata(here.join(&name)) else {
            continue;
        };
        if meta.is_dir() {
            if decided.contains(&path) {
                continue;
            }
            walk(root, dir, &path, decided, hidden, tree);
            if is_opaque(&here.join(&name)) {
                opaque_here.push(path);
            }
            continue;
        }
        if !decided.insert(path.clone()) {
            continue;
        }
        if is_whiteout(&meta) {
            opaque_here.push(path);
        } else if meta.is_file() {
            tree.files.insert(
                path.clone(),
                TreeFile {
                    layer_root: root.to_path_buf(),
                    path_in_layer: dir.join(&path),
                },
            );
        } else {
            tree.left_out.push(path);
        }
    }
    // Hidden from the layers below only: this layer's own entries were walked above.
    hidden.extend(opaque_here);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::image::oci::{Digest, RunConfig};

    fn record(layers: Vec<Digest>) -> ImageRecord {
        ImageRecord {
            name: "t".into(),
            id: Digest::of(b"t"),
            manifest: None,
            layers,
            config: RunConfig::default(),
            platform: "linux/amd64".into(),
            source: "test".into(),
            bytes: 0,
        }
    }

    #[test]
    fn upper_layers_win_and_whiteouts_and_opaque_directories_hide_the_lower() {
        let state = tempfile::tempdir().unwrap();
        let store = Store::open(state.path()).unwrap();
        let (low, high) = (Digest::of(b"low"), Digest::of(b"high"));
        let put = |layer: &Digest, rel: &str, text: &str| {
            let path = store.layer_root(layer).join(rel);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        };
        put(&low, "app/kept.txt", "low");
        put(&low, "app/replaced.txt", "low");
        put(&low, "app/removed.txt", "low");
        put(&low, "app/old/inside.txt", "low");
        put(&low, "etc/outside.txt", "low");
        put(&high, "app/replaced.txt", "high");
        put(&high, "app/old/new.txt", "high");
        let whiteout = store.layer_root(&high).join("app/removed.txt");
        nix::sys::stat::mknod(
            &whiteout,
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o600),
            0,
        )
        .unwrap();
        let opaque = fs::File::open(store.layer_root(&high).join("app/old")).unwrap();
        crate::sys::fsetxattr(opaque.as_raw_fd(), c"user.overlay.opaque", b"y").unwrap();

        let tree = store.files_under(&record(vec![low.clone(), high.clone()]), "/app");
        let got: Vec<(String, PathBuf)> = tree
            .files
            .iter()
            .map(|(rel, f)| (rel.display().to_string(), f.layer_root.clone()))
            .collect();
        let (lo, hi) = (store.layer_root(&low), store.layer_root(&high));
        assert_eq!(
            got,
            [
                ("kept.txt".to_string(), lo),
                ("old/new.txt".to_string(), hi.clone()),
                ("replaced.txt".to_string(), hi),
            ]
        );
        assert!(tree.left_out.is_empty(), "{:?}", tree.left_out);
    }
}
