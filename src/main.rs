//! The `envcraft` binary: parse the command line, set up logging, dispatch, exit.
//!
//! `main` is the C entry point, called by the C runtime without the Rust runtime's start-up
//! (`#![no_main]`). That start-up reads `/proc/self/maps` to find the main thread's stack and
//! installs a stack-overflow handler, a noticeable share of a one-shot `envcraft exec` measured
//! against bubblewrap. What of it matters is done here: the standard descriptors are made
//! valid and SIGPIPE is ignored (write errors are returned, not fatal), as the Rust runtime
//! does. A stack overflow still kills the process (the kernel's guard gap), without the
//! runtime's message. `std::env::args` and `std::process::exit` (which flushes stdout) work as
//! in any Rust program on glibc. (A test build keeps the harness's own `main`.)
#![cfg_attr(not(test), no_main)]

#[cfg(not(test))]
use std::ffi::{c_char, c_int};

use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;

/// Allocations pause while a sandbox is cloned, so the child never inherits a held allocator
/// lock (see `envcraft::sys::CloneSafeAlloc`).
#[global_allocator]
static ALLOCATOR: envcraft::sys::CloneSafeAlloc = envcraft::sys::CloneSafeAlloc;

#[cfg(not(test))]
#[unsafe(no_mangle)]
extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    envcraft::sys::start_process();
    envcraft::sys::keep_freed_heap(32 << 20);
    let cli = envcraft::cli::Cli::parse_process_args();
    init_logging(cli.log_format == "json");
    let code = match envcraft::cli::run(cli) {
        Ok(code) => code,
        Err(err) => envcraft::cli::report(&err),
    };
    std::process::exit(code);
}

#[cfg_attr(test, allow(dead_code))]
/// Logs go to stderr at the level ENVCRAFT_LOG names (a tracing filter), `warn` by default.
fn init_logging(json: bool) {
    let builder = tracing_subscriber::fmt().with_writer(std::io::stderr);
    if std::env::var_os("ENVCRAFT_LOG").is_none() {
        // The default needs no filter directives to parse.
        let builder = builder.with_max_level(LevelFilter::WARN);
        return if json {
            builder.json().init()
        } else {
            builder.init()
        };
    }
    let filter = EnvFilter::try_from_env("ENVCRAFT_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    let builder = builder.with_env_filter(filter);
    if json {
        builder.json().init()
    } else {
        builder.init()
    }
}
