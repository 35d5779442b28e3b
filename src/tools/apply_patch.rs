//! `apply_patch {patch}`: a unified diff or a `*** Begin Patch` patch, checked whole
//! before any file is written.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use nix::errno::Errno;
use nix::sys::time::TimeSpec;
use nix::unistd::{UnlinkatFlags, unlinkat};
use serde_json::{Value, json};

use super::fs::resolve::*;
use super::fs::writing::*;
use super::fs::*;
use super::patch::{self, FileChange, HunkError};
use super::registry::{Run, Tool, ToolSchema};
use super::skill::OfferedSkill;
use super::{Args, ToolError};
use std::borrow::Cow;

/// `apply_patch` in the registry.
pub(crate) const TOOL: Tool = Tool {
    name: "apply_patch",
    describe,
    run: Run::Files(run),
};

fn describe(_: &[OfferedSkill]) -> Option<ToolSchema> {
    Some(ToolSchema {
        name: "apply_patch",
        description: Cow::Borrowed(
            "Apply a patch to one or more files: a unified diff (`--- a/PATH`, \
                          `+++ b/PATH`, `@@ -l,n +l,n @@` hunks; /dev/null to add or delete) or \
                          the `*** Begin Patch` format (`*** Add File:`, `*** Update File:`, \
                          `*** Delete File:`, `*** End Patch`). Context lines must match \
                          exactly; if any hunk fails, no file is changed.",
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "patch": {"type": "string", "description": "The patch text"},
            },
            "required": ["patch"],
        }),
    })
}

fn run(root: &WorkspaceRoot, args: &Value, now: SystemTime) -> Result<Value, ToolError> {
    apply_patch(root, args, now)
}

/// One file's state while a patch is checked: what it held before and what it will hold.
#[derive(Debug)]
struct PatchedFile {
    /// The path as the patch named it, for messages and results.
    shown: String,
    before: Option<Vec<u8>>,
    after: Option<Vec<u8>>,
    mode: u32,
    /// Its directory does not exist yet (checked to be creatable).
    needs_dirs: bool,
}

/// Every file a patch touches, keyed by workspace-relative path, checked before anything is
/// written.
#[derive(Debug, Default)]
struct PatchPlan {
    files: std::collections::BTreeMap<PathBuf, PatchedFile>,
}

impl PatchPlan {
    /// Look `raw` up (once per patch; a symbolic link as its last component is followed, as
    /// for every file tool) and return its key: the path of the file it leads to.
    fn entry(&mut self, root: &WorkspaceRoot, raw: &str) -> Result<PathBuf, ToolError> {
        let path = parse_path(root, raw)?;
        if path.names_dir {
            return Err(ToolError::invalid_argument(format!(
                "`{}` names a directory: a patch changes files",
                path.raw
            )));
        }
        let write_err = |e| fs_error(e, &path.raw, Access::Write);
        match locate(root, &path.rel, true) {
            Ok(loc) => {
                if !self.files.contains_key(&loc.rel) {
                    let mode = existing_mode(&loc).map_err(write_err)?;
                    let before = match mode {
                        Some(_) => {
                            let target = AgentPath {
                                rel: loc.rel.clone(),
                                ..path.clone()
                            };
                            Some(load(root, &target, "apply_patch")?.1)
                        }
                        None => None,
                    };
                    self.files.insert(
                        loc.rel.clone(),
                        PatchedFile {
                            shown: path.shown(),
                            after: before.clone(),
                            before,
                            mode: mode.unwrap_or(0o644),
                            needs_dirs: false,
                        },
                    );
                }
                Ok(loc.rel)
            }
            Err(FsError::Os(Errno::ENOENT)) => {
                let (parent, _) = split_last(&path.rel).ok_or(write_err(Errno::EISDIR.into()))?;
                check_creatable(root, &parent).map_err(|e| write_err(e.into()))?;
                self.files
                    .entry(path.rel.clone())
                    .or_insert_with(|| PatchedFile {
                        shown: path.shown(),
                        before: None,
                        after: None,
                        mode: 0o644,
                        needs_dirs: true,
                    });
                Ok(path.rel)
            }
            Err(e) => Err(write_err(e)),
        }
    }

    fn file(&mut self, key: &Path) -> Result<&mut PatchedFile, ToolError> {
        self.files
            .get_mut(key)
            .ok_or_else(|| ToolError::internal("the patch plan lost a file"))
    }

    fn add(&mut self, root: &WorkspaceRoot, change: &FileChange) -> Result<(), ToolError> {
        match change {
            FileChange::Add { path, content } => {
                let key = self.entry(root, path)?;
                let f = self.file(&key)?;
                if f.after.is_some() {
                    return Err(ToolError::invalid_argument(format!(
                        "`{}` already exists: the patch adds it as a new file",
                        f.shown
                    )));
                }
                f.after = Some(content.clone());
            }
            FileChange::Delete { path, hunks } => {
                let key = self.entry(root, path)?;
                let f = self.file(&key)?;
                let Some(current) = &f.after else {
                    return Err(ToolError::not_found(format!(
                        "`{}` does not exist: the patch deletes it",
                        f.shown
                    )));
                };
                patch::check_delete(current, hunks).map_err(|e| hunk_error(&f.shown, e))?;
                f.after = None;
            }
            FileChange::Update {
                path,
                move_to,
                hunks,
            } => {
                let key = self.entry(root, path)?;
                let f = self.file(&key)?;
                let Some(current) = &f.after else {
                    return Err(ToolError::not_found(format!(
                        "`{}` does not exist: the patch updates it",
                        f.shown
                    )));
                };
                let updated =
                    patch::apply_hunks(current, hunks).map_err(|e| hunk_error(&f.shown, e))?;
                if updated.len() > WRITE_MAX_BYTES {
                    return Err(too_large_to_write(&f.shown, updated.len()));
                }
                let mode = f.mode;
                match move_to {
                    None => f.after = Some(updated),
                    Some(dest) => {
                        let dest_key = self.entry(root, dest)?;
                        if dest_key == key {
                            self.file(&key)?.after = Some(updated);
                            return Ok(());
                        }
                        let d = self.file(&dest_key)?;
                        if d.after.is_some() {
                            return Err(ToolError::invalid_argument(format!(
                                "`{}` already exists: the patch moves a file there",
                                d.shown
                            )));
                        }
                        d.after = Some(updated);
                        d.mode = mode;
                        self.file(&key)?.after = None;
                    }
                }
            }
        }
        Ok(())
    }

    /// Write everything: stage every new content beside its target, then rename them all,
    /// then delete. Nothing is renamed until every file is staged.
    fn commit(self, root: &WorkspaceRoot, now: &TimeSpec) -> Result<Value, ToolError> {
        let mut staged: Vec<Staged> = Vec::new();
        let mut deletes: Vec<Located> = Vec::new();
        let mut created: Vec<CreatedDir> = Vec::new();
        let (mut added, mut modified, mut deleted) = (Vec::new(), Vec::new(), Vec::new());
        let mut prepared = Ok(());
        for (key, f) in &self.files {
            if f.before == f.after {
                continue;
            }
            let step = (|| -> Result<(), FsError> {
                match &f.after {
                    Some(content) => {
                        if f.needs_dirs
                            && let Some((parent, _)) = split_last(key)
                        {
                            created.extend(create_dirs(root, &parent)?);
                        }
                        let loc = locate(root, key, false)?;
                        staged.push(stage(root, loc, content, f.mode, now)?);
                    }
                    None => deletes.push(locate(root, key, false)?),
                }
                Ok(())
            })();
            if let Err(e) = step {
                prepared = Err(fs_error(e, &f.shown, Access::Write));
                break;
            }
            match (&f.before, &f.after) {
                (None, Some(_)) => added.push(f.shown.clone()),
                (Some(_), Some(_)) => modified.push(f.shown.clone()),
                (Some(_), None) => deleted.push(f.shown.clone()),
                (None, None) => {}
            }
        }
        if let Err(e) = prepared {
            for s in &staged {
                s.discard();
            }
            remove_dirs(created);
            return Err(e);
        }
        for (n, s) in staged.iter().enumerate() {
            if let Err(e) = s.commit() {
                for rest in &staged[n..] {
                    rest.discard();
                }
                tracing::warn!(errno = %e, "apply_patch: a rename failed after others succeeded");
                return Err(ToolError::internal(format!(
                    "the patch was applied only in part: renaming a staged file failed ({})",
                    e.desc()
                )));
            }
            touch_dir(&s.dir, now);
        }
        for d in &deletes {
            if let Err(e) = unlinkat(&d.dir, d.name.as_os_str(), UnlinkatFlags::NoRemoveDir) {
                tracing::warn!(errno = %e, "apply_patch: a delete failed after the writes");
                return Err(ToolError::internal(format!(
                    "the patch was applied only in part: deleting `{}` failed ({})",
                    display(&d.rel),
                    e.desc()
                )));
            }
            touch_dir(&d.dir, now);
        }
        for c in &created {
            touch_dir(&c.fd, now);
            touch_dir(&c.parent, now);
        }
        added.sort();
        modified.sort();
        deleted.sort();
        Ok(json!({"added": added, "modified": modified, "deleted": deleted}))
    }
}

fn hunk_error(path: &str, e: HunkError) -> ToolError {
    match e {
        HunkError::NoMatch { hunk, what } => ToolError::not_found(format!(
            "hunk {hunk} of `{path}` does not apply: {what}; nothing was changed (read the file \
             and make the context lines match it exactly)"
        )),
        HunkError::DeleteMismatch => ToolError::not_found(format!(
            "`{path}` holds more than the patch deletes; nothing was changed"
        )),
    }
}

fn apply_patch(root: &WorkspaceRoot, args: &Value, now: SystemTime) -> Result<Value, ToolError> {
    let a = Args::new("apply_patch", args)?;
    let text = a.string(
        &["patch", "input"],
        "the patch: a unified diff (`--- a/PATH`, `+++ b/PATH`, `@@` hunks) or `*** Begin \
         Patch` ... `*** End Patch`",
    )?;
    require_writable(root, "the files of the patch")?;
    if text.len() > WRITE_MAX_BYTES {
        return Err(ToolError::too_large(format!(
            "the patch is {} bytes, over the {} MiB limit",
            text.len(),
            WRITE_MAX_BYTES >> 20
        )));
    }
    let changes = patch::parse(text).map_err(|e| {
        ToolError::invalid_argument(format!(
            "the patch cannot be read: {e}; nothing was changed"
        ))
    })?;
    if changes.len() > PATCH_MAX_FILES {
        return Err(ToolError::too_large(format!(
            "the patch changes {} files, over the limit of {PATCH_MAX_FILES}: split it",
            changes.len()
        )));
    }
    let mut plan = PatchPlan::default();
    for change in &changes {
        plan.add(root, change)?;
    }
    plan.commit(root, &timespec(now))
}
