//! `envcraft view RUN [-o FILE]`: one self-contained HTML page of a run kept with `run --keep
//! DIR`, of a `run --json` report, or of a `suite --json` report (see `crate::view`).

use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use crate::cli::error::Error;

#[derive(Debug, Args)]
pub struct ViewArgs {
    /// A directory kept by `run --keep`, or a file of `suite --json` or `run --json` output.
    #[arg(value_name = "RUN")]
    pub run: PathBuf,
    /// Write the page to this file instead of stdout (a suite's links to its kept runs are then
    /// relative to the file's directory; on stdout they are absolute).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

pub fn run(args: ViewArgs) -> Result<i32, Error> {
    let page_dir = args
        .output
        .as_ref()
        .map(|o| o.parent().map(PathBuf::from).unwrap_or_default());
    let page = crate::view::render(&args.run, page_dir.as_deref())?;
    match &args.output {
        Some(path) => std::fs::write(path, page).map_err(Error::Output)?,
        None => std::io::stdout()
            .lock()
            .write_all(page.as_bytes())
            .map_err(Error::Output)?,
    }
    Ok(0)
}
