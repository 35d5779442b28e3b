//! The workspace root a session's file tools resolve beneath, held while the session may keep
//! its sandbox's workspace descriptors and opened again from the sandbox when a call needs it
//! after they were given back (see [`crate::sandbox::handback`]).

use std::path::Path;

use super::SessionError;
use crate::sandbox::Sandbox;
use crate::tools::ToolError;
use crate::tools::fs::{RootShape, WorkspaceRoot};

/// A session's workspace root: how it is shown, and its descriptor when held.
#[derive(Debug)]
pub(super) struct SessionRoot {
    held: Option<WorkspaceRoot>,
    shape: RootShape,
}

impl SessionRoot {
    pub(super) fn new(root: WorkspaceRoot) -> SessionRoot {
        SessionRoot {
            shape: root.shape().clone(),
            held: Some(root),
        }
    }

    /// The root, asked for again from `sandbox` if it was given back.
    pub(super) fn get(&mut self, sandbox: &mut Sandbox) -> Result<&WorkspaceRoot, SessionError> {
        if self.held.is_none() {
            let fd = sandbox
                .take_workspace_root()?
                .ok_or(SessionError::NoWorkspace)?;
            self.held = Some(WorkspaceRoot::reopened(fd, self.shape.clone()));
        }
        self.held.as_ref().ok_or(SessionError::NoWorkspace)
    }

    /// [`SessionRoot::get`] for a tool or a transfer: a root that cannot be had again is the
    /// caller's `internal` error (the cause logged).
    pub(super) fn get_for_tool(
        &mut self,
        sandbox: &mut Sandbox,
    ) -> Result<&WorkspaceRoot, ToolError> {
        self.get(sandbox).map_err(|e| {
            tracing::error!(error = %crate::error::chain(&e), "the workspace's descriptors");
            ToolError::internal("the sandbox's workspace cannot be reached")
        })
    }

    /// Where the sandbox mounts the workspace.
    pub(super) fn mount(&self) -> &Path {
        self.shape.mount()
    }

    /// The uid and gid the file tools give what they create.
    pub(super) fn owner(&self) -> Option<(u32, u32)> {
        self.shape.owner()
    }

    /// Give the root and the sandbox's other workspace descriptors back, to be asked for again
    /// by [`SessionRoot::get`]; whether they were (not without an init to ask). Also when the
    /// root was not taken again: a fork or a change list asks the sandbox for the others alone.
    pub(super) fn give_back(&mut self, sandbox: &mut Sandbox) -> bool {
        if !sandbox.can_give_back() {
            return false;
        }
        self.held = None;
        sandbox.give_back_descriptors()
    }
}
