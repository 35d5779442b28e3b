//! A live sandbox's workspace descriptors given back to its init and asked for again (see
//! [`crate::sandbox::handback`]): the process keeps one descriptor per sandbox, its channel,
//! where it holds more sandboxes than it has room for their three.

use super::*;

impl Sandbox {
    /// Whether this sandbox could give its workspace descriptors back now and have them again
    /// later: it has an init, which is ready and still running, and holds them.
    pub fn can_give_back(&self) -> bool {
        let Backend::Namespaced { init, .. } = &self.backend else {
            return false;
        };
        self.ready
            && !self.handback.given_back()
            && self.layer.is_some()
            && !self
                .pending
                .iter()
                .any(|r| matches!(r, Report::Stopped { .. }))
            && start::still_running(*init)
    }

    /// Close this process's copies of the workspace descriptors (the caller closes the
    /// workspace root it took, see [`Sandbox::take_workspace_root`]); they are asked for
    /// again from the init when next needed. False, and nothing closed, where
    /// [`Sandbox::can_give_back`] says no.
    pub fn give_back_descriptors(&mut self) -> bool {
        if !self.can_give_back() {
            return false;
        }
        self.layer = None;
        self.workspace_root = None;
        self.view = None;
        self.handback.gave_back();
        true
    }

    /// Be ready, with the workspace descriptors here: asked for again from the init (one round
    /// trip) if they were given back. Reports about commands read meanwhile are kept for their
    /// readers.
    pub(super) fn descriptors(&mut self) -> Result<(), SandboxError> {
        self.wait_ready()?;
        if !self.handback.given_back() {
            return Ok(());
        }
        let Backend::Namespaced { channel, .. } = &self.backend else {
            return Ok(());
        };
        channel
            .send(&Report::HandOver, &[])
            .map_err(os("ask the sandbox for its workspace"))?;
        while self.handback.given_back() {
            let Backend::Namespaced { channel, .. } = &self.backend else {
                return Err(SandboxError::Lost);
            };
            match channel.recv().map_err(os("read the sandbox's workspace"))? {
                Some((report, fds)) => {
                    if let Some(other) = self.absorb(report, fds)? {
                        self.pending.push(other);
                    }
                }
                None => return Err(SandboxError::Lost),
            }
        }
        Ok(())
    }
}
