//! Compiles the frozen-clock shim (`shim/clock.c`) into `$OUT_DIR/libenvcraft_clock.so`, which
//! `src/clock_shim.rs` embeds. The C compiler is invoked directly: the shim is one file with no
//! dependency beyond libc, so a build-dependency would add nothing.
//!
//! The compiler is the first of `CC_<target>`, `TARGET_CC` and `CC` that is set (the `cc`
//! crate's convention), else `cc`; when cross-compiling, one of them must be set, since `cc`
//! would build the shim for the wrong machine.
//!
//! It also links GCC's unwinder statically on glibc targets (see [`link_unwinder_statically`]).

use std::env;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

const SOURCE: &str = "shim/clock.c";
const OUTPUT: &str = "libenvcraft_clock.so";

fn main() -> ExitCode {
    link_unwinder_statically();
    match build_shim() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("envcraft build: {message}");
            ExitCode::FAILURE
        }
    }
}

fn build_shim() -> Result<(), String> {
    println!("cargo:rerun-if-changed={SOURCE}");
    let target = env::var("TARGET").map_err(|_| "TARGET is not set (run through cargo)")?;
    let host = env::var("HOST").map_err(|_| "HOST is not set (run through cargo)")?;
    let out_dir = env::var_os("OUT_DIR").ok_or("OUT_DIR is not set (run through cargo)")?;
    let output = PathBuf::from(out_dir).join(OUTPUT);

    let (compiler, from) = c_compiler(&target, &host)?;
    // `CC="ccache gcc"` and `CC="gcc -m64"` are common: the first word is the program.
    let mut words = compiler.split_whitespace();
    let program = words.next().unwrap_or("cc");
    let result = Command::new(program)
        .args(words)
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-o"])
        .arg(&output)
        .arg(SOURCE)
        .output();
    let result = match result {
        Ok(result) => result,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "no C compiler found: `{program}` ({from}) does not exist. envcraft embeds \
                 {SOURCE}, a small C shared object, and needs a C compiler to build it: install \
                 one (Debian/Ubuntu: `apt-get install gcc`) or set CC to one"
            ));
        }
        Err(err) => {
            return Err(format!(
                "could not run the C compiler `{compiler}` ({from}): {err}"
            ));
        }
    };
    let stderr = String::from_utf8_lossy(&result.stderr);
    if !result.status.success() {
        return Err(format!(
            "`{compiler}` ({from}) failed to compile {SOURCE} ({}):\n{stderr}",
            result.status
        ));
    }
    for line in stderr.lines() {
        println!("cargo:warning={SOURCE}: {line}");
    }
    Ok(())
}

/// Link GCC's unwinder (`libgcc_eh.a`) into every binary, so that `libgcc_s.so.1` is not loaded.
///
/// Rust's standard library takes `_Unwind_*` from `libgcc_s.so.1` on `*-linux-gnu`. Loading it
/// costs every start of envcraft (each `envcraft exec`, each CLI call) a library to map and
/// relocate and, above all, its constructor `__cpu_indicator_init`, whose CPUID instructions
/// trap to the hypervisor on virtual machines that fault on CPUID. This crate's native
/// libraries come before the standard library's on the link line, so the unwinder's symbols
/// are found in the archive first, and `--as-needed` (rustc's default) then leaves
/// `libgcc_s.so.1` out. Unwinding and backtraces work the same. Not with `crt-static`, where
/// the standard library links the archive itself.
fn link_unwinder_statically() {
    let target = env::var("TARGET").unwrap_or_default();
    let crt_static = env::var("CARGO_CFG_TARGET_FEATURE")
        .map(|features| features.split(',').any(|f| f == "crt-static"))
        .unwrap_or(false);
    if target.ends_with("-linux-gnu") && !crt_static {
        println!("cargo:rustc-link-lib=static:-bundle=gcc_eh");
    }
}

/// The compiler to use and where its name came from.
fn c_compiler(target: &str, host: &str) -> Result<(String, String), String> {
    let candidates = [
        format!("CC_{target}"),
        format!("CC_{}", target.replace('-', "_")),
        "TARGET_CC".to_owned(),
        "CC".to_owned(),
    ];
    for name in candidates {
        println!("cargo:rerun-if-env-changed={name}");
        if let Some(value) = env::var(&name)
            .ok()
            .filter(|value| !value.trim().is_empty())
        {
            return Ok((value.trim().to_owned(), format!("from ${name}")));
        }
    }
    if target != host {
        return Err(format!(
            "cross-compiling for {target} on {host}: set CC_{} (or TARGET_CC) to a C compiler \
             for {target}; plain `cc` would build {SOURCE} for {host}",
            target.replace('-', "_")
        ));
    }
    Ok(("cc".to_owned(), "the default; CC is not set".to_owned()))
}
