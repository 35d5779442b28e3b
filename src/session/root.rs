//! The workspace root a session's file tools resolve beneath, held while the session may keep
//! its sandbox's workspace descriptors and made again from the sandbox when a call needs it
//! after they were given back (see [`crate::sandbox::handback`]).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use super::SessionError;
use crate::sandbox::Sandbox;
use crate::tools::fs::WorkspaceRoot;

/// How the session's workspace root is shown to the file tools, and its descriptor when held.
#[derive(Debug)]
pub(super) struct SessionRoot {
    held: Option<WorkspaceRoot>,
    mount: PathBuf,
    aliases: Vec<PathBuf>,
    mounts: Vec<(PathBuf, PathBuf)>,
    writable: bool,
    owner: Option<(u32, u32)>,
}

impl SessionRoot {
    /// `fd` is the workspace root the sandbox handed over; the rest as [`WorkspaceRoot::new`]
    /// and [`WorkspaceRoot::with_mounts`] take them.
    pub(super) fn new(
        fd: OwnedFd,
        mount: PathBuf,
        aliases: Vec<PathBuf>,
        mounts: Vec<(PathBuf, PathBuf)>,
        writable: bool,
        owner: Option<(u32, u32)>,
    ) -> SessionRoot {
        let mut root = SessionRoot {
            held: None,
            mount,
            aliases,
            mounts,
            writable,
            owner,
        };
        root.held = Some(root.made(fd));
        root
    }

    fn made(&self, fd: OwnedFd) -> WorkspaceRoot {
        WorkspaceRoot::new(
            fd,
            self.mount.clone(),
            self.aliases.clone(),
            self.writable,
            self.owner,
        )
        .with_mounts(self.mounts.clone())
    }

    /// The root, asked for again from `sandbox` if it was given back.
    pub(super) fn get(&mut self, sandbox: &mut Sandbox) -> Result<&WorkspaceRoot, SessionError> {
        if self.held.is_none() {
            let fd = sandbox
                .take_workspace_root()?
                .ok_or(SessionError::NoWorkspace)?;
            self.held = Some(self.made(fd));
        }
        self.held.as_ref().ok_or(SessionError::NoWorkspace)
    }

    /// Where the sandbox mounts the workspace.
    pub(super) fn mount(&self) -> &Path {
        &self.mount
    }

    /// The uid and gid the file tools give what they create.
    pub(super) fn owner(&self) -> Option<(u32, u32)> {
        self.owner
    }

    /// Give the root and the sandbox's other workspace descriptors back, to be asked for again
    /// by [`SessionRoot::get`]; whether they were (not without an init to ask).
    pub(super) fn give_back(&mut self, sandbox: &mut Sandbox) -> bool {
        if self.held.is_none() || !sandbox.can_give_back() {
            return false;
        }
        self.held = None;
        sandbox.give_back_descriptors()
    }
}
