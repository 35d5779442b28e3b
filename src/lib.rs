//! envcraft runs Claw-style agent tasks in isolated, copy-on-write workspaces and scores what
//! the agent left behind.
//!
//! # Layout
//!
//! - [`spec`]: the file formats (policies, environments, tasks, skills), parsed with serde and
//!   validated, with errors that name the file, the key, the line and what is expected.
//! - [`sandbox`]: one command in a fresh sandbox: a pure plan (mounts, Landlock rules, seccomp
//!   rules, limits) and the code that applies it in the cloned child, in one documented order;
//!   also the machine probe behind `envcraft doctor`.
//! - [`workspace`]: copy-on-write workspaces: the change list read from the overlay's upper
//!   layer, the copy used where overlayfs is refused, keeping changes for inspection; the one
//!   way to walk and copy a tree the agent made (`workspace::tree`).
//! - [`image`]: OCI images as a task's root filesystem: the content-addressed layer store
//!   under the state root, imports of OCI layouts and docker-archives, pulls, builds handed to
//!   an installed Podman or Buildah, and the unpacking of untrusted layers in a sandbox of its
//!   own.
//! - [`session`]: one live run of one task: its sandbox, clock, tool calls and transcript, and its
//!   files in and out as tar streams (`session::transfer`).
//! - [`tools`]: the built-in tools an agent calls (`read`, `write`, `edit`, `apply_patch`,
//!   `ls`, `glob`, `grep`, `exec`, `process`, `skill`), one file each and listed once
//!   (`tools::TOOLS`), their JSON schemas and structured results; every path resolved beneath
//!   the workspace by the kernel.
//! - [`verify`]: verifiers: hash manifests of trees (parallel SHA-256, incremental from the
//!   overlay's upper layer), `expected.json`, and the checks and reward of a final workspace.
//! - [`json`]: JSON text of values as `serde_json` writes it, strings scanned a word at a time
//!   (tool results hold whole files, and are written twice per call).
//! - [`sys`]: one-syscall wrappers, nearly all the `unsafe` (the rest: the raw children of
//!   `sandbox::spawn` and `sandbox::netns`, one `setrlimit` in `sandbox::child`, and the
//!   binary's C entry point).
//! - [`clock_shim`]: the frozen clock: a preloaded C shim (`shim/clock.c`, built by `build.rs`)
//!   that makes the wall clock read the session's time, and the variables that turn it on.
//! - [`import`]: importers of other projects' tasks (ClawGym, PinchBench, Harbor) into
//!   environments, prompts kept byte for byte, graders run unchanged, deterministic output; a
//!   Harbor task's image pulled or built into the store before it runs.
//! - [`export`]: envcraft environments as Harbor tasks (`envcraft export harbor`): a
//!   Dockerfile over the image, the files, a self-contained checker, `solve.sh` from the
//!   reference solution; what has no Harbor equivalent refused per task.
//! - [`agent`]: real agents as a session's agent: OpenClaw, unchanged, in the session's
//!   sandbox, pointed at an OpenAI-compatible endpoint on loopback; its transcript kept.
//! - [`audit`]: the quality gate: each task's reference solution, false positives,
//!   determinism, sensitivity and template integrity, with pass rates.
//! - [`synth`]: `envcraft synth`: tasks synthesized along an environment's tool graph,
//!   grounded by running each chain in a session, kept only when the audit passes them.
//! - [`mcp`]: MCP's JSON-RPC core over one session, shared by `envcraft mcp` (stdio) and the
//!   server's MCP and OpenEnv endpoints.
//! - [`server`]: `envcraft serve`, the HTTP API for rollout workers (a thin adapter over
//!   [`session`]): a registry of sessions, deadlines, auth, metrics, drain on SIGTERM.
//! - [`fuzz_targets`]: one entry per parser an outsider feeds (TOML, JSON, front matter,
//!   patches, request bodies), from bytes, shared by `fuzz/` and the regression corpus test.
//! - [`view`]: `envcraft view`: one self-contained HTML page of a kept run or a suite's report
//!   (turns, tool calls, the workspace diff, checks, timings), every string from the run
//!   escaped, every read bounded, nothing loaded.
//! - [`cli`]: the `envcraft` command line (a thin adapter over the modules above).
//! - [`error`]: a leaf: an error and its causes as one line (`chain`, and `Chain` for logs).
//!   The CLI's aggregate error and exit codes are `cli::error`'s.
//!
//! Dependencies point downward, floor by floor (a module imports only from floors below its
//! own; no cycle):
//!
//! ```text
//! cli, fuzz_targets
//! server
//! mcp, synth
//! agent, audit, import, export, view   (import: spec, sys and image; export: spec and
//!                                       verify; view: workspace only)
//! session
//! tools, verify
//! sandbox
//! image
//! workspace
//! spec, sys, json, clock_shim, error   (leaves: nothing of the crate)
//! ```

pub mod agent;
pub mod audit;
pub mod cli;
pub mod clock_shim;
pub mod error;
pub mod export;
pub mod fuzz_targets;
pub mod image;
pub mod import;
pub mod json;
pub mod mcp;
pub mod sandbox;
pub mod server;
pub mod session;
pub mod spec;
pub mod synth;
pub mod sys;
pub mod tools;
pub mod verify;
pub mod view;
pub mod workspace;

pub use cli::error::Error;
