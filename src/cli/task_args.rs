//! Flags shared by the subcommands that open a task (`run`, `shell`, `tools`, `record`,
//! `verify`, `mcp`), and how the task they name is opened: a foreign task imported on the fly,
//! a Harbor task's image pulled or built ([`TaskArgs::open`]).

use std::ops::Deref;
use std::path::{Path, PathBuf};

use clap::Args;

use crate::cli::error::Error;
use crate::session::SessionOptions;
use crate::spec::task::TaskSpec;
use crate::spec::time::Timestamp;

#[derive(Debug, Args)]
pub struct TaskArgs {
    /// A task directory, ENV/TASK_ID under --workspaces, a ClawGym task folder, a PinchBench
    /// task file (.md) or a Harbor task directory.
    #[arg(value_name = "TASK")]
    pub task: String,
    #[command(flatten)]
    pub base: BaseArg,
    #[command(flatten)]
    pub workspaces: WorkspacesDir,
    #[command(flatten)]
    pub skills: SkillsDir,
}

/// `--base host`: what stands for a Harbor task's image, for every subcommand that imports one.
#[derive(Debug, Args, Clone, Copy)]
pub struct BaseArg {
    /// `host`: a Harbor task's image (its Dockerfile's FROM, its docker_image) is stood in for
    /// by the host's read-only system paths, said in the output; without it the image must be
    /// in envcraft's image store (`envcraft image import|pull`).
    #[arg(long = "base", value_enum, value_name = "BASE")]
    pub base: Option<BaseKind>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BaseKind {
    Host,
}

impl BaseArg {
    /// The import's options for this choice.
    pub fn import_options(self) -> crate::import::ImportOptions {
        crate::import::ImportOptions {
            skip_unmet_needs: false,
            base: match self.base {
                Some(BaseKind::Host) => crate::import::harbor::Base::Host,
                None => crate::import::harbor::Base::Image,
            },
        }
    }

    /// The flags that give this choice to a child `envcraft`.
    pub fn to_args(self) -> Vec<String> {
        match self.base {
            Some(BaseKind::Host) => vec!["--base".into(), "host".into()],
            None => Vec::new(),
        }
    }
}

/// Bring an imported task's image into the store when it lacks it and the task says how (a
/// Harbor task's `docker_image` pulled, its Dockerfile built; said on stderr), then refuse,
/// before anything starts, a task whose image the store neither holds nor can pull.
pub fn check_image(
    imported: &mut crate::import::ImportedTask,
    state_root: &Path,
) -> Result<(), Error> {
    let Some(image) = imported.image.clone() else {
        return Ok(());
    };
    let said = crate::import::harbor::provide(imported, state_root)
        .map_err(|e| Error::Provide(Box::new(e)))?;
    for line in said {
        eprintln!("envcraft: {}: {line}", imported.env);
    }
    let image = imported.image.clone().unwrap_or(image);
    let found = crate::image::Store::open(state_root).and_then(|store| store.image(&image));
    found.map(|_| ()).map_err(|e| Error::NoBaseImage {
        task: imported.task.clone(),
        image: image.clone(),
        reason: crate::error::chain(&e),
    })
}

/// Say what an import of a Harbor task could not carry over exactly (`base=host` among it).
pub fn say_notes(imported: &crate::import::ImportedTask) {
    for note in &imported.notes {
        eprintln!("envcraft: {}: {note}", imported.env);
    }
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
    /// The task as imported, and the temporary tree it lives in.
    imported: Option<(tempfile::TempDir, crate::import::ImportedTask)>,
}

impl OpenedTask {
    /// Bring the task's image into the store, or refuse a task whose image the store neither
    /// holds nor can pull (see [`check_image`]); the task is read again when its environment
    /// changed (a pinned image, a built image's files).
    pub fn check_image(&mut self, state_root: &Path) -> Result<(), Error> {
        let Some((_, imported)) = &mut self.imported else {
            return Ok(());
        };
        let provides = imported.provision.is_some();
        check_image(imported, state_root)?;
        if provides {
            self.spec = TaskSpec::load(&imported.task_dir)?;
        }
        Ok(())
    }
}

impl Deref for OpenedTask {
    type Target = TaskSpec;
    fn deref(&self) -> &TaskSpec {
        &self.spec
    }
}

impl TaskArgs {
    /// The task named on the command line, its image brought into the store under
    /// `state_root` (a Harbor task's pulled or built) or refused when it cannot be: see
    /// [`OpenedTask::check_image`]. What every subcommand but `run` (which opens its agent's
    /// options between the two) uses.
    pub fn open(&self, state_root: &Path) -> Result<OpenedTask, Error> {
        let mut task = self.load()?;
        task.check_image(state_root)?;
        Ok(task)
    }

    /// The task named on the command line: an envcraft task directory or ENV/TASK_ID, else
    /// a foreign task imported on the fly (its prompt and grader unchanged).
    pub fn load(&self) -> Result<OpenedTask, Error> {
        use crate::import::{Format, single_task_format};
        let path = Path::new(&self.task);
        let foreign_task = match single_task_format(path) {
            Some(Format::Harbor) => true,
            Some(_) => !path.join("task.toml").is_file(),
            None => false,
        };
        if foreign_task {
            let (temp, imported) =
                crate::import::import_one_to_temp(path, &self.base.import_options())?;
            if single_task_format(path) == Some(Format::Harbor) {
                say_notes(&imported);
            }
            return Ok(OpenedTask {
                spec: TaskSpec::load(&imported.task_dir)?,
                imported: Some((temp, imported)),
            });
        }
        Ok(OpenedTask {
            spec: TaskSpec::resolve(&self.task, &self.workspaces.path)?,
            imported: None,
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
            base_time,
            ..SessionOptions::new(
                crate::workspace::state_root::open(self.state_dir.path.clone())?,
                task.skills.path.clone(),
            )
        })
    }
}
