//! `envcraft import clawgym|pinchbench|harbor SRC DEST [--skip-unmet-needs] [--base host]`: turn
//! another project's tasks into envcraft environments, one per task, under DEST.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::cli::error::Error;
use crate::import::{self, Format, ImportOptions};

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The source's format.
    #[arg(value_enum, value_name = "FORMAT")]
    pub format: FormatArg,
    /// A ClawGym dataset folder (task_NNNN/...) or one task folder; a PinchBench checkout
    /// (tasks/*.md, assets/), a folder of task files, or one .md; a Harbor task directory or a
    /// dataset directory of them.
    #[arg(value_name = "SRC")]
    pub src: PathBuf,
    /// Where the environments go (DEST/FORMAT-ID/); created when missing.
    #[arg(value_name = "DEST")]
    pub dest: PathBuf,
    /// Skip the tasks that need what the sandbox does not give (the web, a container
    /// runtime) instead of importing them with a note.
    #[arg(long)]
    pub skip_unmet_needs: bool,
    #[command(flatten)]
    pub base: super::task_args::BaseArg,
    /// Where a Harbor task's image is pulled or built into (its image store).
    #[command(flatten)]
    pub state_dir: super::task_args::StateDir,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FormatArg {
    Clawgym,
    Pinchbench,
    Harbor,
}

/// Exit 0 when every task was imported, 1 when some were refused or skipped (each named,
/// with why).
pub fn run(args: ImportArgs) -> Result<i32, Error> {
    let format = match args.format {
        FormatArg::Clawgym => Format::ClawGym,
        FormatArg::Pinchbench => Format::PinchBench,
        FormatArg::Harbor => Format::Harbor,
    };
    let options = ImportOptions {
        skip_unmet_needs: args.skip_unmet_needs,
        ..args.base.import_options()
    };
    let mut outcome = import::import(format, &args.src, &args.dest, &options)?;
    provide_images(&mut outcome, &args)?;
    let mut out = std::io::stdout().lock();
    for task in &outcome.imported {
        writeln!(out, "imported {}", task.task_dir.display()).map_err(Error::Output)?;
        for note in &task.notes {
            writeln!(out, "  note: {note}").map_err(Error::Output)?;
        }
    }
    for (id, why) in &outcome.skipped {
        writeln!(out, "skipped {id}: {why}").map_err(Error::Output)?;
    }
    writeln!(
        out,
        "{} {} task(s) imported into {}, {} skipped",
        outcome.imported.len(),
        format.name(),
        args.dest.display(),
        outcome.skipped.len()
    )
    .map_err(Error::Output)?;
    Ok(if outcome.skipped.is_empty() { 0 } else { 1 })
}

/// Bring each imported Harbor task's image into the store (pulled or built, see
/// [`crate::import::harbor::provide`], said in its notes); a task whose image cannot be
/// brought in is removed from DEST and listed as skipped, with why.
fn provide_images(outcome: &mut import::ImportOutcome, args: &ImportArgs) -> Result<(), Error> {
    if !outcome.imported.iter().any(|t| t.provision.is_some()) {
        return Ok(());
    }
    let state_root = crate::workspace::state_root::open(args.state_dir.path.clone())?;
    let mut kept = Vec::new();
    for mut task in std::mem::take(&mut outcome.imported) {
        if task.provision.is_none() {
            kept.push(task);
            continue;
        }
        match crate::import::harbor::provide(&mut task, &state_root) {
            Ok(_) => kept.push(task),
            Err(e) => {
                if let Some(env_dir) = task.task_dir.parent().and_then(std::path::Path::parent) {
                    let _ = std::fs::remove_dir_all(env_dir);
                }
                outcome
                    .skipped
                    .push((task.task.clone(), crate::error::chain(&e)));
            }
        }
    }
    outcome.imported = kept;
    Ok(())
}
