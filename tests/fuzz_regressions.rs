//! The fuzz corpus on stable Rust: every file of `fuzz/seeds/<target>/` and
//! `fuzz/regressions/<target>/` (inputs that once crashed or hung a parser) runs through its
//! entry in `envcraft::fuzz_targets`, each on its own thread, and must return without a panic
//! within a time bound (libFuzzer's `-timeout`, which `make fuzz` passes, is the same).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use envcraft::fuzz_targets::{TARGETS, target};

/// The most one input may take (a debug build: the release fuzzers run it far faster).
const BOUND: Duration = Duration::from_secs(10);

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// The files of `fuzz/<kind>/<name>/`, sorted (none when the directory does not exist).
fn inputs(kind: &str, name: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(fuzz_dir().join(kind).join(name)) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Run `entry` on `data` on a thread: `Err` with what went wrong when it panics or takes
/// longer than `BOUND`.
fn run_bounded(entry: fn(&[u8]), data: Vec<u8>) -> Result<Duration, String> {
    let (done, finished) = mpsc::channel();
    let started = Instant::now();
    let worker = std::thread::spawn(move || {
        let outcome = std::panic::catch_unwind(|| entry(&data));
        let _ = done.send(outcome.is_ok());
    });
    match finished.recv_timeout(BOUND) {
        Ok(true) => {
            worker.join().unwrap();
            Ok(started.elapsed())
        }
        Ok(false) | Err(mpsc::RecvTimeoutError::Disconnected) => {
            let _ = worker.join();
            Err("panicked".into())
        }
        // The thread is left running: the test fails, and the process ends with it.
        Err(mpsc::RecvTimeoutError::Timeout) => Err(format!("took more than {BOUND:?}")),
    }
}

/// Every target's seeds and regressions, through its entry: none panics, none hangs.
fn replay(kind: &str) -> usize {
    let mut failures = Vec::new();
    let mut count = 0;
    for (name, entry) in TARGETS {
        for path in inputs(kind, name) {
            count += 1;
            let data = std::fs::read(&path).unwrap();
            if let Err(why) = run_bounded(*entry, data) {
                failures.push(format!("{}: {why}", path.display()));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "fuzz inputs that break a parser:\n{}",
        failures.join("\n")
    );
    count
}

#[test]
fn no_seed_of_any_target_panics_or_hangs() {
    for (name, _) in TARGETS {
        assert!(
            !inputs("seeds", name).is_empty(),
            "fuzz/seeds/{name}/ is empty: each target starts from real files (bench/fuzz_seeds.py)"
        );
    }
    assert!(replay("seeds") >= TARGETS.len());
}

#[test]
fn no_saved_crash_input_panics_or_hangs_again() {
    replay("regressions");
}

#[test]
fn every_corpus_directory_names_a_target_and_every_target_has_a_fuzzer() {
    for kind in ["seeds", "regressions"] {
        let Ok(entries) = std::fs::read_dir(fuzz_dir().join(kind)) else {
            continue;
        };
        for entry in entries {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            assert!(
                target(&name).is_some(),
                "fuzz/{kind}/{name}/ is no target of envcraft::fuzz_targets::TARGETS"
            );
        }
    }
    for (name, _) in TARGETS {
        let source = fuzz_dir().join("fuzz_targets").join(format!("{name}.rs"));
        let text = std::fs::read_to_string(&source)
            .unwrap_or_else(|e| panic!("{}: {e}", source.display()));
        assert!(
            text.contains(&format!("target(\"{name}\")")),
            "{} does not call its entry, target(\"{name}\")",
            source.display()
        );
    }
}

/// The harness itself: an entry that panics is caught and reported (so a
/// green run means the corpus was really replayed).
#[test]
fn a_panicking_entry_is_reported() {
    fn panics(_: &[u8]) {
        panic!("boom");
    }
    fn returns(_: &[u8]) {}
    assert_eq!(run_bounded(panics, vec![]), Err("panicked".to_string()));
    assert!(run_bounded(returns, vec![]).is_ok());
}
