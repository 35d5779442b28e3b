//! The file formats of envcraft, parsed and validated. Each format rejects unknown keys and
//! reports errors with the file, the key, the line and what was expected.
//!
//! - [`policy`]: `policies/NAME.toml`, what a sandbox may read, write, reach and spend.
//! - [`env`]: `workspaces/ENV/` (`env.toml`, `docs.md`, `files/`), an environment.
//! - [`task`]: `workspaces/ENV/tasks/ID/` (`task.toml`, `files/`, `solution.jsonl`), a task.
//! - [`skill`]: `skills/NAME/` (`SKILL.md`, `skill.toml`, an executable), a skill; its
//!   [`skill_uses`], how task synthesis may call it.
//! - [`verifier`]: a task's `[verifier]`, its parts (manifest, command, judge) and weights.
//! - [`workspace_mounts`]: a policy's workspace directories shown at other absolute paths.
//! - [`time`]: [`Timestamp`], the RFC 3339 instants those files hold.
//!
//! Loading goes downward: a task loads its environment, an environment its policy and, on
//! request ([`EnvSpec::check_skills`]), its skills.

mod arg_schema;
mod byte_size;
pub mod env;
pub mod front_matter;
mod located;
pub mod policy;
pub mod skill;
pub mod skill_uses;
pub mod task;
pub mod time;
pub mod verifier;
pub mod workspace_mounts;

pub use env::{EnvError, EnvSpec};
pub use located::FileError;
pub(crate) use located::is_plain_name;
pub use skill::{SkillError, SkillSpec};
pub use task::{TaskError, TaskSpec};
pub use time::Timestamp;
