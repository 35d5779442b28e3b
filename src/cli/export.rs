//! `envcraft export harbor ENV DEST`: each task of an envcraft environment as a Harbor task
//! directory under DEST (see `crate::export::harbor`).

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::cli::error::Error;

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The format to write.
    #[arg(value_enum, value_name = "FORMAT")]
    pub format: ExportFormat,
    /// An environment directory (env.toml, files/, tasks/).
    #[arg(value_name = "ENV")]
    pub env: PathBuf,
    /// Where the tasks go (DEST/TASK_ID/); created when missing.
    #[arg(value_name = "DEST")]
    pub dest: PathBuf,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ExportFormat {
    Harbor,
}

/// Exit 0 when every task was exported, 1 when some were refused (each named, with why).
pub fn run(args: ExportArgs) -> Result<i32, Error> {
    let ExportFormat::Harbor = args.format;
    let outcome = crate::export::harbor::export(&args.env, &args.dest)?;
    let mut out = std::io::stdout().lock();
    for (dir, notes) in &outcome.exported {
        writeln!(out, "exported {}", dir.display()).map_err(Error::Output)?;
        for note in notes {
            writeln!(out, "  note: {note}").map_err(Error::Output)?;
        }
    }
    for (id, why) in &outcome.refused {
        writeln!(out, "refused {id}: {why}").map_err(Error::Output)?;
    }
    writeln!(
        out,
        "{} task(s) exported as Harbor tasks into {}, {} refused",
        outcome.exported.len(),
        args.dest.display(),
        outcome.refused.len()
    )
    .map_err(Error::Output)?;
    Ok(if outcome.refused.is_empty() { 0 } else { 1 })
}
