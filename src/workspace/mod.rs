//! Copy-on-write workspaces: what changed, read from the overlay's upper layer, the copy used
//! where overlayfs is refused, and keeping changes for inspection.
//!
//! The upper layer *is* the diff (DESIGN.md, principle 3): a regular file, directory or symlink
//! there was added or modified; a character device 0/0 is a whiteout (the template's path was
//! deleted); a directory with the `user.overlay.opaque` xattr replaced the template's directory
//! of the same name (what is below it in the template but not in the upper layer was deleted).
//! Only the template paths the upper layer names are looked at, never the whole template.
//!
//! - [`tree`]: the one way to read and copy a tree the agent controls (descriptor-relative,
//!   no link followed, never blocking, bounded);
//! - [`diff`]: the change list (over [`tree`]'s opens, iterative, bounded);
//! - [`copy`]: copies of trees and of changed files (sparse-aware, never setuid on the host);
//! - [`name`]: how names that are not UTF-8 are written in change lists and manifests.

pub mod copy;
pub mod diff;
pub mod name;
pub mod state_root;
pub mod tree;

use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

pub use copy::{copy_tree, keep_bases, keep_changes};
pub use tree::TreeError;

/// Paths (relative to the workspace root, `/`-separated, sorted) that a run changed. Names
/// that are not UTF-8 are written as [`name`] says (injectively: `\xNN` per invalid byte).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Changes {
    pub added: Vec<String>,
    pub modified: Vec<String>,
    pub deleted: Vec<String>,
    /// Added directories deeper than [`diff::MAX_DEPTH`] levels, whose content is not listed.
    pub incomplete: Vec<String>,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.modified.is_empty()
            && self.deleted.is_empty()
            && self.incomplete.is_empty()
    }

    fn sort(&mut self) {
        for list in [
            &mut self.added,
            &mut self.modified,
            &mut self.deleted,
            &mut self.incomplete,
        ] {
            list.sort();
            list.dedup();
        }
    }
}

/// Why the workspace could not be read, copied or kept.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot copy {from} to {to}")]
    Copy {
        from: PathBuf,
        to: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("--keep-changes target {0} exists and is not an empty directory")]
    KeepTargetNotEmpty(PathBuf),
    #[error(transparent)]
    Tree(#[from] TreeError),
}

/// The changes recorded in an overlay upper layer over the template `lower`.
pub fn changes_from_upper(upper: &Path, lower: &Path) -> Result<Changes, WorkspaceError> {
    diff::changes(upper, lower, diff::Layer::Upper)
}

/// The changes between the template `lower` and a full copy of it.
pub fn changes_between(lower: &Path, copy: &Path) -> Result<Changes, WorkspaceError> {
    diff::changes(copy, lower, diff::Layer::Copy)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn changes_between_a_template_and_its_copy() {
        let dir = tempfile::tempdir().unwrap();
        let (lower, copy) = (dir.path().join("lower"), dir.path().join("copy"));
        write(&lower.join("keep.txt"), "same");
        write(&lower.join("edit.txt"), "old");
        write(&lower.join("gone/a.txt"), "a");
        copy_tree(&lower, &copy).unwrap();
        assert!(changes_between(&lower, &copy).unwrap().is_empty());
        write(&copy.join("edit.txt"), "new");
        write(&copy.join("new/b.txt"), "b");
        fs::remove_dir_all(copy.join("gone")).unwrap();
        let changes = changes_between(&lower, &copy).unwrap();
        assert_eq!(changes.added, vec!["new", "new/b.txt"]);
        assert_eq!(changes.modified, vec!["edit.txt"]);
        assert_eq!(changes.deleted, vec!["gone", "gone/a.txt"]);
    }

    #[test]
    fn an_upper_file_with_the_lower_content_is_not_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let (lower, upper) = (dir.path().join("lower"), dir.path().join("upper"));
        write(&lower.join("a.txt"), "same");
        write(&upper.join("a.txt"), "same");
        write(&upper.join("b.txt"), "new");
        let changes = changes_from_upper(&upper, &lower).unwrap();
        assert_eq!(changes.added, vec!["b.txt"]);
        assert!(changes.modified.is_empty());
    }

    #[test]
    fn copy_tree_keeps_symlinks_and_modes() {
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (dir.path().join("from"), dir.path().join("to"));
        write(&from.join("x.sh"), "#!/bin/sh\n");
        fs::set_permissions(from.join("x.sh"), fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("x.sh", from.join("link")).unwrap();
        copy_tree(&from, &to).unwrap();
        assert_eq!(fs::read_link(to.join("link")).unwrap(), Path::new("x.sh"));
        let mode = fs::metadata(to.join("x.sh")).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
    }

    #[test]
    fn keep_changes_refuses_a_non_empty_target() {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join("out/x"), "x");
        let err = keep_changes(dir.path(), &Changes::default(), &dir.path().join("out"));
        assert!(matches!(err, Err(WorkspaceError::KeepTargetNotEmpty(_))));
    }

    #[test]
    fn keep_bases_takes_each_original_from_the_topmost_layer_that_has_it() {
        let dir = tempfile::tempdir().unwrap();
        let (task, env, out) = (
            dir.path().join("task"),
            dir.path().join("env"),
            dir.path().join("out"),
        );
        write(&task.join("a/over.txt"), "task's");
        write(&env.join("a/over.txt"), "env's");
        write(&env.join("b/only.txt"), "env only");
        let paths = ["a/over.txt", "b/only.txt", "gone.txt"].map(String::from);
        keep_bases(&[task, env], &paths, &out).unwrap();
        let read = |p: &str| fs::read_to_string(out.join("base").join(p)).unwrap();
        assert_eq!(read("a/over.txt"), "task's");
        assert_eq!(read("b/only.txt"), "env only");
        assert!(!out.join("base/gone.txt").exists());
    }

    /// Build `depth` nested directories below `root` by walking down with descriptors, as an
    /// agent can: the full path grows past PATH_MAX.
    fn deep_tree(root: &Path, depth: usize) {
        use nix::fcntl::{OFlag, openat};
        use nix::sys::stat::Mode;
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
    }

    #[test]
    fn a_tree_deeper_than_path_max_is_reported_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let (lower, upper) = (dir.path().join("lower"), dir.path().join("upper"));
        fs::create_dir_all(&lower).unwrap();
        fs::create_dir_all(&upper).unwrap();
        deep_tree(&upper, diff::MAX_DEPTH + 50);
        let changes = changes_from_upper(&upper, &lower).unwrap();
        assert_eq!(changes.added.len(), diff::MAX_DEPTH);
        assert_eq!(changes.incomplete.len(), 1);
        assert!(changes.incomplete[0].len() > 4096);
        let out = dir.path().join("kept");
        keep_changes(&upper, &changes, &out).unwrap();
        let listed = fs::read_to_string(out.join("changes.json")).unwrap();
        assert!(listed.contains("not_kept"));
    }

    #[test]
    fn whiteouts_are_deletions_when_the_kernel_lets_us_make_them() {
        let dir = tempfile::tempdir().unwrap();
        let (lower, upper) = (dir.path().join("lower"), dir.path().join("upper"));
        write(&lower.join("gone.txt"), "x");
        write(&lower.join("d/inner.txt"), "y");
        fs::create_dir_all(&upper).unwrap();
        let whiteout = |p: &Path| {
            nix::sys::stat::mknod(
                p,
                nix::sys::stat::SFlag::S_IFCHR,
                nix::sys::stat::Mode::empty(),
                0,
            )
        };
        if whiteout(&upper.join("gone.txt")).is_err() {
            eprintln!(
                "skipping: mknod of a whiteout needs CAP_MKNOD (the exec tests cover real overlays)"
            );
            return;
        }
        whiteout(&upper.join("d")).unwrap();
        let changes = changes_from_upper(&upper, &lower).unwrap();
        assert_eq!(changes.deleted, vec!["d", "d/inner.txt", "gone.txt"]);
        assert!(changes.added.is_empty() && changes.modified.is_empty());
    }

    #[test]
    fn kept_files_lose_setuid_bits_and_keep_their_holes() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        write(&src.join("suid"), "#!/bin/sh\n");
        fs::set_permissions(src.join("suid"), fs::Permissions::from_mode(0o6755)).unwrap();
        let sparse = fs::File::create(src.join("sparse")).unwrap();
        sparse.set_len(512 << 20).unwrap();
        let changes = Changes {
            added: vec!["sparse".into(), "suid".into()],
            ..Changes::default()
        };
        let out = dir.path().join("out");
        keep_changes(&src, &changes, &out).unwrap();
        let suid = fs::metadata(out.join("files/suid")).unwrap();
        assert_eq!(suid.permissions().mode() & 0o7777, 0o755);
        let kept = fs::metadata(out.join("files/sparse")).unwrap();
        assert_eq!(kept.len(), 512 << 20);
        assert!(
            kept.blocks() * 512 < 1 << 20,
            "the hole was filled: {} blocks",
            kept.blocks()
        );
    }
}
