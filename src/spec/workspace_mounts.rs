//! A policy's `filesystem.workspace_mounts`: directories of the workspace shown, read-write, at
//! absolute paths of their own in the sandbox (Harbor's `/logs`, `/tests`, `/solution`), so that
//! a task's scripts may write where their harness expects and the file tools and the server's
//! transfers reach them by those paths. Each is part of the workspace (its changes, its size
//! limit, its copy on fork): a mount point, not a new place to write.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use toml::Spanned;

/// One mount point: `path` in the sandbox shows the workspace's directory `dir`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceMount {
    /// Absolute, in the sandbox.
    pub path: PathBuf,
    /// Relative to the workspace root: plain names only.
    pub dir: PathBuf,
}

/// Why a mount point is refused: the span of the value, what it is, what was expected.
#[derive(Debug)]
pub struct Refusal {
    pub span: Option<Range<usize>>,
    pub problem: String,
    pub expected: &'static str,
}

/// Paths the sandbox makes itself, which a mount point may not be, hold or lie below.
const RESERVED: &[&str] = &["/proc", "/dev", "/tmp", "/.envcraft"];

/// Checks `raw` (mount point → workspace directory) against the workspace's own paths
/// (`workspace` and its aliases) and HOME; the mount points sorted.
pub fn validate(
    raw: &BTreeMap<String, Spanned<String>>,
    workspace: &[&Path],
    home: &Path,
) -> Result<Vec<WorkspaceMount>, Refusal> {
    let mut out = Vec::new();
    for (key, dir) in raw {
        let path = PathBuf::from(key);
        let clean = |p: &Path| p.components().all(|c| !matches!(c, Component::ParentDir));
        if !path.is_absolute() || !clean(&path) || path == Path::new("/") || key.contains('\0') {
            return Err(Refusal {
                span: Some(dir.span()),
                problem: format!("mounts at `{key}`"),
                expected: "an absolute path below `/` without `..`, such as `/logs`",
            });
        }
        let clash = workspace
            .iter()
            .copied()
            .chain(RESERVED.iter().map(Path::new))
            .chain(std::iter::once(home))
            .find(|p| path.starts_with(p) || p.starts_with(&path));
        if let Some(other) = clash {
            return Err(Refusal {
                span: Some(dir.span()),
                problem: format!("mounts at `{key}`, which overlaps `{}`", other.display()),
                expected: "a path apart from the workspace, its aliases, HOME, /tmp, /proc, /dev",
            });
        }
        let rel = PathBuf::from(dir.get_ref());
        if rel.as_os_str().is_empty()
            || !rel.components().all(|c| matches!(c, Component::Normal(_)))
        {
            return Err(Refusal {
                span: Some(dir.span()),
                problem: format!("shows `{}` of the workspace", dir.get_ref()),
                expected: "a directory of the workspace, relative to it (plain names: `logs`)",
            });
        }
        out.push(WorkspaceMount { path, dir: rel });
    }
    for pair in out.windows(2) {
        if pair[1].path.starts_with(&pair[0].path) {
            return Err(Refusal {
                span: None,
                problem: format!(
                    "mounts `{}` inside `{}`",
                    pair[1].path.display(),
                    pair[0].path.display()
                ),
                expected: "mount points apart from each other",
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn check(pairs: &[(&str, &str)]) -> Result<Vec<WorkspaceMount>, Refusal> {
        let raw: BTreeMap<String, Spanned<String>> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Spanned::new(0..1, v.to_string())))
            .collect();
        validate(&raw, &[Path::new("/workspace")], Path::new("/root"))
    }

    #[test]
    fn harbors_mount_points_are_accepted_and_sorted() {
        let got = check(&[
            ("/tests", "tests"),
            ("/logs", "logs"),
            ("/solution", "solution"),
        ])
        .unwrap();
        let paths: Vec<_> = got.iter().map(|m| m.path.display().to_string()).collect();
        assert_eq!(paths, ["/logs", "/solution", "/tests"]);
    }

    #[test]
    fn mount_points_that_overlap_or_climb_are_refused() {
        for bad in [
            ("/", "x"),
            ("logs", "logs"),
            ("/workspace/logs", "logs"),
            ("/tmp/logs", "logs"),
            ("/root/logs", "logs"),
            ("/a/../b", "b"),
            ("/logs", "../up"),
            ("/logs", "/abs"),
            ("/logs", ""),
        ] {
            assert!(check(&[bad]).is_err(), "{bad:?}");
        }
        assert!(check(&[("/logs", "logs"), ("/logs/agent", "agent")]).is_err());
    }
}
