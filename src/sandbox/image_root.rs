//! A sandbox root from an image: what the plan needs to know of it, and its pure parts.
//!
//! The image's layers (unpacked by [`crate::image`]) become the overlay lower layers of the
//! sandbox's root, in place of the binds of the host's system paths; everything else of the
//! root (`/tmp`, `/dev`, `/proc`, the workspace, the masks of the policy's `hidden` paths, the
//! clock shim, the skills) is mounted over it as over the host-root's tmpfs. The policy's
//! `read_only` paths are then Landlock grants on the image's own paths.
//!
//! Of the image's configuration, `Env` is honoured below the policy (the policy's own
//! variables win, except `PATH`, whose image entries come first so that the image's tools are
//! found); `WorkingDir` and `User` are recorded, not applied: the policy fixes the command's
//! directory (the workspace) and identity.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::plan::HostEntry;
use crate::image::{ImageRecord, Store};

/// The image a sandbox's root comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRoot {
    pub name: String,
    /// The image id (its config's digest).
    pub id: String,
    /// The store's layers directory (bound read-only in the init, see `child`).
    pub layers_dir: PathBuf,
    /// The layers' directory names below `layers_dir`, topmost first.
    pub layers: Vec<String>,
    pub env: Vec<String>,
    pub working_dir: Option<String>,
    pub user: Option<String>,
}

impl ImageRoot {
    /// The root of the image `record` of `store`.
    pub fn of(store: &Store, record: &ImageRecord) -> ImageRoot {
        let any = record.layers.first();
        let layers_dir = any
            .map(|d| store.layer_root(d))
            .and_then(|p| p.parent().and_then(Path::parent).map(Path::to_path_buf))
            .unwrap_or_default();
        ImageRoot {
            name: record.name.clone(),
            id: record.id.to_string(),
            layers_dir,
            layers: record
                .layers
                .iter()
                .rev()
                .map(|d| d.hex().to_string())
                .collect(),
            env: record.config.env.clone().unwrap_or_default(),
            working_dir: record.config.working_dir.clone(),
            user: record.config.user.clone(),
        }
    }

    /// The overlay `lowerdir` value, relative to the init's state directory, where the layers
    /// directory is bound at `image`.
    pub fn lowerdir(&self) -> String {
        self.layers
            .iter()
            .map(|hex| format!("image/{hex}/root"))
            .collect::<Vec<_>>()
            .join(":")
    }

    /// What is at `path` in the image's merged tree: the topmost layer that has it decides (a
    /// whiteout there means missing); a layer whose directory on the way is opaque hides the
    /// layers below it. Symbolic links on the way are not followed (reported as the link).
    pub fn stat(&self, path: &Path) -> HostEntry {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let rel = path.strip_prefix("/").unwrap_or(path);
        for hex in &self.layers {
            let root = self.layers_dir.join(hex).join("root");
            let Ok(meta) = root.join(rel).symlink_metadata() else {
                if opaque_on_the_way(&root, rel) {
                    return HostEntry::Missing;
                }
                continue;
            };
            let ft = meta.file_type();
            return if ft.is_char_device() && meta.rdev() == 0 {
                HostEntry::Missing
            } else if ft.is_dir() {
                HostEntry::Dir
            } else if ft.is_file() {
                HostEntry::File
            } else if ft.is_symlink() {
                std::fs::read_link(root.join(rel))
                    .map(HostEntry::Symlink)
                    .unwrap_or(HostEntry::Special)
            } else {
                HostEntry::Special
            };
        }
        HostEntry::Missing
    }
}

/// Whether a directory on the way to `rel` in this layer is opaque (hides lower layers).
fn opaque_on_the_way(root: &Path, rel: &Path) -> bool {
    let mut dir = root.to_path_buf();
    for c in rel.parent().into_iter().flat_map(Path::components) {
        dir.push(c);
        if xattr_is_y(&dir) {
            return true;
        }
    }
    false
}

fn xattr_is_y(dir: &Path) -> bool {
    std::fs::File::open(dir).is_ok_and(|f| {
        use std::os::fd::AsRawFd;
        matches!(
            crate::sys::fgetxattr(f.as_raw_fd(), c"user.overlay.opaque"),
            Ok(Some(v)) if v == b"y"
        )
    })
}

/// The plan's environment with the image's `Env` under it: keys the plan sets keep the plan's
/// value, except `PATH`, whose image entries go first (each once). Returns the search path.
pub fn merge_env(env: &mut Vec<(String, String)>, image: &ImageRoot) -> Option<Vec<PathBuf>> {
    let mut path = None;
    for entry in &image.env {
        let Some((key, value)) = entry.split_once('=') else {
            continue;
        };
        if key == "PATH" {
            let policy_path = env
                .iter()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| v.clone())
                .unwrap_or_default();
            let mut parts: Vec<&str> = Vec::new();
            for p in value.split(':').chain(policy_path.split(':')) {
                if !p.is_empty() && !parts.contains(&p) {
                    parts.push(p);
                }
            }
            let joined = parts.join(":");
            path = Some(parts.iter().map(PathBuf::from).collect());
            env.retain(|(k, _)| k != "PATH");
            env.push(("PATH".into(), joined));
        } else if !key.is_empty() && !env.iter().any(|(k, _)| k == key) {
            env.push((key.to_string(), value.to_string()));
        }
    }
    env.sort();
    path
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn image(env: &[&str]) -> ImageRoot {
        ImageRoot {
            name: "n".into(),
            id: "i".into(),
            layers_dir: PathBuf::from("/nonexistent"),
            layers: vec!["b".into(), "a".into()],
            env: env.iter().map(|s| s.to_string()).collect(),
            working_dir: None,
            user: None,
        }
    }

    #[test]
    fn the_images_env_goes_under_the_policys_and_its_path_first() {
        let mut env = vec![
            ("HOME".to_string(), "/root".to_string()),
            ("PATH".to_string(), "/usr/bin:/bin".to_string()),
        ];
        let path = merge_env(
            &mut env,
            &image(&[
                "PATH=/opt/venv/bin:/usr/bin",
                "HOME=/image",
                "LANGUAGE=x",
                "junk",
            ]),
        );
        assert_eq!(
            env,
            [
                ("HOME".to_string(), "/root".to_string()),
                ("LANGUAGE".to_string(), "x".to_string()),
                (
                    "PATH".to_string(),
                    "/opt/venv/bin:/usr/bin:/bin".to_string()
                ),
            ]
        );
        assert_eq!(path.unwrap().len(), 3);
    }

    #[test]
    fn the_lowerdir_lists_layers_topmost_first_below_the_bound_store() {
        assert_eq!(image(&[]).lowerdir(), "image/b/root:image/a/root");
    }
}
