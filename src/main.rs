//! The `envcraft` binary: parse the command line, set up logging, dispatch, exit.

/// Allocations pause while a sandbox is cloned, so the child never inherits a held allocator
/// lock (see `envcraft::sys::CloneSafeAlloc`).
#[global_allocator]
static ALLOCATOR: envcraft::sys::CloneSafeAlloc = envcraft::sys::CloneSafeAlloc;

fn main() {
    envcraft::sys::keep_freed_heap(32 << 20);
    let cli = envcraft::cli::Cli::parse_process_args();
    let filter = tracing_subscriber::EnvFilter::try_from_env("ENVCRAFT_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if cli.log_format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
    let code = match envcraft::cli::run(cli) {
        Ok(code) => code,
        Err(err) => envcraft::cli::report(&err),
    };
    std::process::exit(code);
}
