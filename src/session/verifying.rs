//! Scoring a session: its verifier's parts (manifest, grader command, judge) over the
//! workspace as the session left it.

use std::path::Path;

use super::{Session, SessionError};
use crate::sandbox::{self, SandboxError};
use crate::verify::command::CommandScore;
use crate::verify::{Check, Expected, Manifest, Verdict, judge};

impl Session {
    /// Score the workspace as the task's `[verifier]` says: the hash manifest against its
    /// `expected.json`, the grader command, the LLM judge (with the transcript), or several
    /// weighted (`hybrid`).
    pub fn verify(&mut self) -> Result<Verdict, SessionError> {
        let verifier = self.parts.task.verifier.clone();
        let manifest = match verifier.has_manifest() {
            true => Some(self.verify_manifest()?),
            false => None,
        };
        let grader = match verifier.command {
            Some(_) => Some(self.run_grader()?),
            None => None,
        };
        let workspace = match verifier.judge {
            Some(_) => Some(self.root.get(&mut self.sandbox)?.proc_path()),
            None => None,
        };
        let judge = verifier.judge.as_ref().map(|spec| {
            let transcript = self.dir.path.join("transcript.jsonl");
            let run = judge::Run {
                task: &self.parts.task,
                transcript: Some(&transcript),
                workspace: workspace.as_deref(),
            };
            judge::judge(self.parts.judge.as_deref(), spec, &run)
        });
        Ok(crate::verify::combine(
            &verifier,
            crate::verify::Parts {
                manifest,
                grader,
                judge,
            },
        ))
    }

    fn verify_manifest(&mut self) -> Result<Verdict, SessionError> {
        let path = self.parts.task.dir.join("expected.json");
        if !path.exists() {
            return Err(SessionError::NoExpected {
                task: self.task_name(),
            });
        }
        let expected = Expected::load(&path)?;
        if !expected.unchanged.is_empty() {
            // `unchanged` globs compare with the whole template: its (cached) manifest.
            let (initial, final_, root) = self.manifests()?;
            return Ok(crate::verify::verify(
                &expected,
                &initial,
                &final_,
                Some(&root),
            ));
        }
        // Only what the rules name and what changed matters: the template's entries for those
        // paths, and the changed ones from the upper layer. O(changed and checked bytes), no
        // walk of the template.
        let (initial, final_) = self.sandbox.frozen(|sandbox| {
            let changes = sandbox.changes()?;
            let paths = sandbox.state_paths()?;
            let mut relevant: Vec<String> = expected.files.keys().cloned().collect();
            relevant.extend(expected.absent.iter().cloned());
            relevant.extend(changes.modified.iter().cloned());
            relevant.extend(changes.deleted.iter().cloned());
            let initial = Manifest::of_paths(&paths.view, &relevant)?;
            let final_ = match &paths.changes {
                Some(source) => initial.apply_changes(source, &changes)?,
                None => initial.clone(),
            };
            Ok::<_, SessionError>((initial, final_))
        })?;
        let root = self.root.get(&mut self.sandbox)?.proc_path();
        Ok(crate::verify::verify(
            &expected,
            &initial,
            &final_,
            Some(&root),
        ))
    }

    /// Run the task's grader on the workspace as this session left it (see
    /// [`crate::verify::command::run_grader`]). The session's changes live in its own mount
    /// namespace, which another sandbox cannot bind from: they are copied, whiteouts and opaque
    /// directories included, which costs the changed bytes.
    fn run_grader(&mut self) -> Result<(CommandScore, Check), SessionError> {
        let paths = self.sandbox.state_paths()?;
        let plan = self.sandbox.plan().clone();
        let state_root = self
            .parts
            .sessions_root
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(std::env::temp_dir);
        let stage = tempfile::Builder::new()
            .prefix("envcraft-changes-")
            .tempdir_in(&state_root)
            .map_err(|source| SandboxError::Os {
                what: "stage the workspace for the grader",
                source,
            })?;
        let mut layers = Vec::new();
        match paths.changes {
            Some(source) => {
                let changes = stage.path().join("changes");
                // On the host: no setuid or setgid bit survives the copy; the session's
                // processes are frozen while it is made.
                self.sandbox.frozen(|_| {
                    crate::workspace::copy::copy_layer(
                        &source,
                        &changes,
                        crate::workspace::tree::Setid::Drop,
                        plan.workspace_bytes,
                    )
                    .map_err(SandboxError::from)
                })?;
                layers.push(changes);
                if self.sandbox.workspace_kind() == sandbox::plan::WorkspaceKind::Overlay {
                    layers.extend(plan.lowers.iter().cloned());
                }
            }
            None => layers.extend(plan.lowers.iter().cloned()),
        }
        let transcript = self.dir.path.join("transcript.jsonl");
        Ok(crate::verify::command::run_grader(
            &self.parts.task,
            layers,
            Some(&transcript),
            self.parts.command_env(self.action_index),
            &state_root,
        )?)
    }
}
