//! Copies: a template into a private workspace (the fallback without overlayfs), a session's
//! changes into a fork or a grader's stage, and a run's changed files out to the host
//! (`--keep-changes`). All of them go through [`super::tree`]: descriptor-relative on both
//! sides, no link followed, bounded.
//!
//! What the agent wrote is hostile input to the host: what reaches the host never keeps
//! setuid, setgid or sticky bits, holes stay holes (a 1 GiB sparse file costs the host what it
//! costs the sandbox), and what cannot be copied (too deep, past a bound, moved meanwhile) is
//! listed as not kept instead of failing the run.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::tree::{self, CopyOptions, CopyReport, Setid};
use super::{Changes, WorkspaceError};

fn copy_err(from: &Path, to: &Path) -> impl FnOnce(io::Error) -> WorkspaceError {
    let (from, to) = (from.to_path_buf(), to.to_path_buf());
    move |source| WorkspaceError::Copy { from, to, source }
}

fn read_err(path: &Path) -> impl FnOnce(io::Error) -> WorkspaceError {
    let path = path.to_path_buf();
    move |source| WorkspaceError::Read { path, source }
}

/// Make the destination directory `to` (it may exist, empty) and copy `from` into it.
fn copy_into(from: &Path, to: &Path, options: CopyOptions) -> Result<CopyReport, WorkspaceError> {
    fs::create_dir_all(to).map_err(copy_err(from, to))?;
    let src = tree::open_root(from)?;
    let dst = tree::open_root(to)?;
    let report = tree::copy(&src, &dst, options)?;
    if !report.skipped.is_empty() {
        tracing::warn!(
            from = %from.display(),
            skipped = report.skipped.len(),
            first = ?report.skipped.first(),
            "parts of the tree were not copied"
        );
    }
    Ok(report)
}

/// Copy a tree preserving file types, permission bits (setuid and setgid included) and
/// symlinks (not owners: the copy is the caller's): for a trusted template, or a copy that
/// stays inside a sandbox. Devices, sockets and FIFOs are not part of a workspace and are not
/// copied.
pub fn copy_tree(from: &Path, to: &Path) -> Result<(), WorkspaceError> {
    let options = CopyOptions {
        layer: false,
        setid: Setid::Keep,
        max_bytes: tree::DEFAULT_MAX_BYTES,
    };
    copy_into(from, to, options).map(|_| ())
}

/// [`copy_tree`] of a tree the agent made, to a place on the host: setuid, setgid and sticky
/// bits are dropped; at most `max_bytes` of file data.
pub fn copy_tree_to_host(
    from: &Path,
    to: &Path,
    max_bytes: u64,
) -> Result<CopyReport, WorkspaceError> {
    let options = CopyOptions {
        layer: false,
        setid: Setid::Drop,
        max_bytes,
    };
    copy_into(from, to, options)
}

/// Copy an overlay upper layer (or a workspace copy) into an empty directory, keeping what
/// overlayfs reads in it: file data (holes kept), permission bits, modification times,
/// symlinks, whiteouts (character devices 0/0) and opaque directories (`user.overlay.opaque`).
/// Used to start a session's fork from its parent's current state ([`Setid::Keep`]: the copy
/// stays inside a sandbox) and to stage the changes for a grader ([`Setid::Drop`]: the stage is
/// on the host). At most `max_bytes` of file data.
pub fn copy_layer(
    from: &Path,
    to: &Path,
    setid: Setid,
    max_bytes: u64,
) -> Result<CopyReport, WorkspaceError> {
    let options = CopyOptions {
        layer: true,
        setid,
        max_bytes,
    };
    copy_into(from, to, options)
}

/// What `keep_changes` wrote beside the files: the change list and what could not be kept.
#[derive(serde::Serialize)]
struct KeptList<'a> {
    #[serde(flatten)]
    changes: &'a Changes,
    /// Changed paths that were not copied (too deep to name, past a bound, or moved while
    /// they were copied), with the reason.
    not_kept: Vec<(String, String)>,
}

/// Copy the added and modified paths of a run (from its upper layer or copy at `source`) to
/// `out/files/`, and write `out/changes.json`. `out` must be new or empty. Nothing kept is
/// setuid, setgid or sticky; directories are kept writable by their owner.
pub fn keep_changes(source: &Path, changes: &Changes, out: &Path) -> Result<(), WorkspaceError> {
    if out.exists() && fs::read_dir(out).map_err(read_err(out))?.next().is_some() {
        return Err(WorkspaceError::KeepTargetNotEmpty(out.to_path_buf()));
    }
    let files = out.join("files");
    fs::create_dir_all(&files).map_err(read_err(out))?;
    let src = tree::open_root(source)?;
    let dst = tree::open_root(&files)?;
    let paths: Vec<String> = changes
        .added
        .iter()
        .chain(&changes.modified)
        .cloned()
        .collect();
    let options = CopyOptions {
        layer: false,
        setid: Setid::Drop,
        max_bytes: tree::DEFAULT_MAX_BYTES,
    };
    let report = tree::copy_paths(&src, &dst, &paths, options)?;
    let mut not_kept = report.skipped;
    not_kept.extend(changes.incomplete.iter().map(|p| {
        (
            p.clone(),
            format!("below the bound of {} levels", tree::MAX_DEPTH),
        )
    }));
    let list = KeptList { changes, not_kept };
    let json = serde_json::to_vec_pretty(&list).map_err(|e| WorkspaceError::Copy {
        from: source.to_path_buf(),
        to: out.join("changes.json"),
        source: io::Error::other(e),
    })?;
    let list_path: PathBuf = out.join("changes.json");
    fs::write(&list_path, json).map_err(copy_err(source, &list_path))?;
    Ok(())
}

/// The most bytes of original files [`keep_bases`] copies.
pub const BASES_MAX_BYTES: u64 = 256 << 20;

/// Copy the original versions of `paths` (the modified and deleted ones of a run) from the
/// template's layers (`layers`, the topmost first: a task's files, then its environment's) to
/// `out/base/`, so that a kept run can be shown as a diff without its template. A path is taken
/// from the first layer that has it; at most [`BASES_MAX_BYTES`] in all (the rest is not kept,
/// and the viewer then names the file without its old content).
pub fn keep_bases(layers: &[PathBuf], paths: &[String], out: &Path) -> Result<(), WorkspaceError> {
    let base = out.join("base");
    fs::create_dir_all(&base).map_err(read_err(out))?;
    let dst = tree::open_root(&base)?;
    let mut left: Vec<String> = paths.to_vec();
    let mut copied = 0u64;
    for layer in layers {
        if left.is_empty() || copied >= BASES_MAX_BYTES {
            break;
        }
        let src = tree::open_root(layer)?;
        let options = CopyOptions {
            layer: false,
            setid: Setid::Drop,
            max_bytes: BASES_MAX_BYTES - copied,
        };
        let report = tree::copy_paths(&src, &dst, &left, options)?;
        copied += report.bytes;
        let skipped: std::collections::BTreeSet<&String> =
            report.skipped.iter().map(|(p, _)| p).collect();
        left.retain(|p| skipped.contains(p));
    }
    Ok(())
}
