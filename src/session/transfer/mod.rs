//! Files and directories into and out of a session's workspace as tar streams (the server's
//! `PUT` and `GET /v1/sessions/{id}/files`): what harnesses such as Harbor use to put tests in
//! and take logs out.
//!
//! What this module promises, whatever the client sends and whatever the agent made:
//!
//! - paths are the file tools' ([`crate::tools::fs`]): relative to the workspace or absolute
//!   under its mount point and aliases, every name opened beneath the workspace's descriptor by
//!   the kernel, never a host path;
//! - an upload ([`upload`]) is all or nothing: the whole tar is checked before anything is
//!   written (no `..`, no absolute name, no link leading out, no device node, FIFO or socket,
//!   no hard link to anything but an earlier file of the same tar, bounded in entries, bytes
//!   and depth), then written beside its targets under temporary names and swapped in at the
//!   end; a refusal at any step (a file where a directory must be, an agent's link on the way,
//!   a full workspace) undoes every step before it;
//! - a download ([`download`]) walks the tree one name at a time from descriptors
//!   ([`crate::workspace::tree`]: no link followed, what was opened judged by its own `fstat`),
//!   keeps links as links, leaves out sockets, FIFOs and devices (counted), drops setuid and
//!   setgid bits, and is refused whole (never cut short) past its bounds.
//!
//! Neither counts as an action of the agent: the clock does not move and the transcript does not
//! record them; a resumed session does not replay them (see docs/sessions.md).

mod check;
mod download;
mod upload;

use serde::Serialize;

use super::Session;
use crate::tools::ToolError;

/// Entries one transfer holds at most.
pub const MAX_ENTRIES: usize = 100_000;
/// Names deep (below the workspace root) one transfer reaches at most.
pub const MAX_DEPTH: usize = 64;
/// Bytes one transfer moves at most: an upload's tar once decompressed, a download's tar.
pub const MAX_BYTES: u64 = 256 << 20;

/// The bounds of one transfer; a refusal names the one passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferLimits {
    /// Bytes of tar: an upload's, decompressed (a bomb is stopped there); a download's.
    pub max_bytes: u64,
    pub max_entries: usize,
    pub max_depth: usize,
}

impl Default for TransferLimits {
    fn default() -> Self {
        TransferLimits {
            max_bytes: MAX_BYTES,
            max_entries: MAX_ENTRIES,
            max_depth: MAX_DEPTH,
        }
    }
}

/// What an upload made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Uploaded {
    /// The directory it was unpacked in, workspace-relative (`.` for the root).
    pub path: String,
    /// Entries of the tar written (directories, files and links).
    pub entries: usize,
    /// Bytes of file data written.
    pub bytes: u64,
}

/// A download: the tar and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Downloaded {
    pub tar: Vec<u8>,
    /// `file` or `directory`: what the path named.
    pub kind: &'static str,
    pub entries: usize,
    /// Sockets, FIFOs and device nodes left out.
    pub skipped: usize,
}

impl Session {
    /// The workspace root the transfers resolve beneath.
    fn workspace_root(&mut self) -> Result<&crate::tools::WorkspaceRoot, ToolError> {
        self.root.get_for_tool(&mut self.sandbox)
    }

    /// Unpack the tar `body` (plain, gzip or zstd) beneath the directory `path` of the
    /// workspace, made where missing; all or nothing (see the module's list). The bytes bound
    /// is never more than the policy's `workspace_bytes`.
    pub fn upload(
        &mut self,
        path: &str,
        body: &[u8],
        mut limits: TransferLimits,
    ) -> Result<Uploaded, ToolError> {
        limits.max_bytes = limits.max_bytes.min(self.policy().limits.workspace_bytes);
        // As the file tools do: checked, and owned, as the sandbox's root.
        let owner = self.root.owner();
        let root = self.workspace_root()?;
        crate::sys::with_fs_ids(owner, || upload::upload(root, path, body, limits))
    }

    /// A tar of `path` of the workspace: a directory's contents (names relative to it), or one
    /// file under its own name.
    pub fn download(
        &mut self,
        path: &str,
        limits: TransferLimits,
    ) -> Result<Downloaded, ToolError> {
        let owner = self.root.owner();
        let root = self.workspace_root()?;
        crate::sys::with_fs_ids(owner, || download::download(root, path, limits))
    }
}

/// An entry's name as messages show it: printable ASCII as it is, other bytes as `\xNN`
/// (the names are the client's or the agent's own, never a host path).
fn shown(name: &[u8]) -> String {
    let mut out = String::new();
    for &b in name.iter().take(200) {
        if b.is_ascii_graphic() && b != b'\\' || b == b' ' {
            out.push(b as char);
        } else {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    if name.len() > 200 {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_names_in_messages_escape_what_is_not_printable() {
        assert_eq!(shown(b"a b\nc\xff\\"), "a b\\x0ac\\xff\\x5c");
    }
}
