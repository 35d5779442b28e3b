//! Flags shared by the subcommands that open a task (`run`, `shell`, `tools`, `record`,
//! `verify`), and how the task they name is opened.

use std::ops::Deref;
use std::path::{Path, PathBuf};

use clap::Args;

use crate::cli::error::Error;
use crate::session::SessionOptions;
use crate::spec::task::TaskSpec;
use crate::spec::time::Timestamp;

#[derive(Debug, Args)]
pub struct TaskArgs {
    /// A task directory, ENV/TASK_ID under --workspaces, a ClawGym task folder or a PinchBench
    /// task file (.md).
    #[arg(value_name = "TASK")]
    pub task: String,
    #[command(flatten)]
    pub workspaces: WorkspacesDir,
    #[command(flatten)]
    pub skills: SkillsDir,
}

/// `--skills DIR`: where skills are found, for every subcommand that runs a session.
#[derive(Debug, Args)]
pub struct SkillsDir {
    /// Where skills are found (skills/NAME/).
    #[arg(
        id = "skills",
        long = "skills",
        value_name = "DIR",
        env = "ENVCRAFT_SKILLS",
        default_value = "skills"
    )]
    pub path: PathBuf,
}

/// `--state-dir DIR`: where sessions and sandboxes keep their state, for every subcommand that
/// makes any (default: as for exec, see `workspace::state_root`).
#[derive(Debug, Args)]
pub struct StateDir {
    /// Where sessions' and sandboxes' state goes (default: as for exec).
    #[arg(
        id = "state_dir",
        long = "state-dir",
        value_name = "DIR",
        env = "ENVCRAFT_STATE_DIR"
    )]
    pub path: Option<PathBuf>,
}

/// `--workspaces DIR`: where ENV/TASK_ID is looked up.
#[derive(Debug, Args)]
pub struct WorkspacesDir {
    /// Where ENV/TASK_ID is looked up.
    #[arg(
        id = "workspaces",
        long = "workspaces",
        value_name = "DIR",
        env = "ENVCRAFT_WORKSPACES",
        default_value = "workspaces"
    )]
    pub path: PathBuf,
}

/// Flags of the subcommands that start a session.
#[derive(Debug, Args)]
pub struct SessionArgs {
    /// The session's start time (RFC 3339), overriding the task's.
    #[arg(long, value_name = "RFC3339")]
    pub base_time: Option<String>,
    #[command(flatten)]
    pub state_dir: StateDir,
}

/// A task ready to use: its spec, and for a task of another format (a ClawGym task folder, a
/// PinchBench `.md`) the temporary environment it was imported into, removed on drop.
pub struct OpenedTask {
    spec: TaskSpec,
    _imported: Option<tempfile::TempDir>,
}

impl Deref for OpenedTask {
    type Target = TaskSpec;
    fn deref(&self) -> &TaskSpec {
        &self.spec
    }
}

impl TaskArgs {
    /// The task named on the command line: an envcraft task directory or ENV/TASK_ID, else
    /// a foreign task imported on the fly (its prompt and grader unchanged).
    pub fn load(&self) -> Result<OpenedTask, Error> {
        let path = Path::new(&self.task);
        let foreign_task =
            !path.join("task.toml").is_file() && crate::import::single_task_format(path).is_some();
        if foreign_task {
            let (temp, task_dir) = crate::import::import_one_to_temp(path)?;
            return Ok(OpenedTask {
                spec: TaskSpec::load(&task_dir)?,
                _imported: Some(temp),
            });
        }
        Ok(OpenedTask {
            spec: TaskSpec::resolve(&self.task, &self.workspaces.path)?,
            _imported: None,
        })
    }
}

impl SessionArgs {
    pub fn options(&self, task: &TaskArgs) -> Result<SessionOptions, Error> {
        let base_time = match &self.base_time {
            Some(text) => Some(Timestamp::parse_rfc3339(text)?.unix_seconds()),
            None => None,
        };
        Ok(SessionOptions {
            state_root: crate::workspace::state_root::open(self.state_dir.path.clone())?,
            skills_root: task.skills.path.clone(),
            base_time,
            seed: None,
            origin: serde_json::Value::Null,
            policy: None,
            binds: Vec::new(),
            judge: None,
        })
    }
}
