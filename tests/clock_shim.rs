//! The frozen-clock shim as programs see it, outside any sandbox: the embedded
//! `clock_shim::SHIM` is written to a file and preloaded into `date`, `python3` and small
//! programs, with and without `ENVCRAFT_NOW`. Nothing here attacks anything, so nothing runs
//! through `contained`; every child has a deadline.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use envcraft::clock_shim;

/// 2023-11-14T22:13:20Z, a Tuesday.
const TUESDAY: &str = "1700000000";
/// 2023-11-13T12:00:00Z, a Monday.
const MONDAY_NOON: &str = "1699876800";
/// How long any child may take before the test fails.
const CHILD_DEADLINE: Duration = Duration::from_secs(30);
/// How far "the real time" in a child may be from the test's own clock.
const REAL_TIME_SLACK_SECS: f64 = 5.0;

/// The embedded shim written to a file under the target directory (`/tmp` may be `noexec`,
/// which would stop the dynamic loader from mapping it).
struct ShimFile(tempfile::TempPath);

impl ShimFile {
    fn write() -> ShimFile {
        let mut file = tempfile::Builder::new()
            .prefix("libenvcraft_clock-")
            .suffix(".so")
            .tempfile_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        file.write_all(clock_shim::SHIM).unwrap();
        file.flush().unwrap();
        ShimFile(file.into_temp_path())
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

/// `argv` with only the shim preloaded, `ENVCRAFT_NOW` set when `now` is given, and a fixed
/// minimal environment (UTC, C locale) so that nothing from the test's environment leaks in.
fn command(shim: &ShimFile, now: Option<&str>, argv: &[&str]) -> Command {
    let mut cmd = Command::new(argv[0]);
    cmd.args(&argv[1..])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("TZ", "UTC")
        .env("LC_ALL", "C")
        .env("LD_PRELOAD", shim.path());
    if let Some(now) = now {
        cmd.env("ENVCRAFT_NOW", now);
    }
    cmd
}

/// Runs `cmd` to completion within [`CHILD_DEADLINE`] (killed and failed otherwise).
fn output_within_deadline(mut cmd: Command) -> Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("cannot start {cmd:?}: {err}"));
    let pid = child.id();
    let (done, finished) = mpsc::channel();
    thread::spawn(move || done.send(child.wait_with_output()));
    match finished.recv_timeout(CHILD_DEADLINE) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            // SAFETY: kill has no memory effects; `pid` is our unreaped child (the waiting
            // thread has not returned), so it cannot name another process.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            panic!("{cmd:?} did not finish within {CHILD_DEADLINE:?}");
        }
    }
}

/// Runs `argv` under the shim; asserts it succeeded with an empty stderr (the dynamic loader
/// complains there when it cannot preload the shim) and returns its stdout.
fn run(shim: &ShimFile, now: Option<&str>, argv: &[&str]) -> String {
    let output = output_within_deadline(command(shim, now, argv));
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stderr.is_empty(),
        "{argv:?} with ENVCRAFT_NOW={now:?}: {}\nstdout: {stdout}\nstderr: {stderr}",
        output.status
    );
    stdout
}

fn python(shim: &ShimFile, now: Option<&str>, script: &str) -> Vec<String> {
    run(shim, now, &["/usr/bin/python3", "-c", script])
        .lines()
        .map(str::to_owned)
        .collect()
}

fn date(shim: &ShimFile, now: Option<&str>, format: &str) -> String {
    run(shim, now, &["/bin/date", "-u", format])
        .trim_end()
        .to_owned()
}

fn real_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

fn assert_is_real_time(seen: f64, what: &str) {
    let real = real_now();
    assert!(
        (seen - real).abs() < REAL_TIME_SLACK_SECS,
        "{what}: the child saw {seen}, the real time is {real}"
    );
}

#[test]
fn date_prints_the_frozen_time() {
    let shim = ShimFile::write();
    assert_eq!(
        date(&shim, Some(TUESDAY), "+%Y-%m-%dT%H:%M:%S"),
        "2023-11-14T22:13:20"
    );
}

#[test]
fn python_time_and_datetime_read_the_frozen_time() {
    let shim = ShimFile::write();
    let lines = python(
        &shim,
        Some(TUESDAY),
        "import time,datetime; print(int(time.time())); \
         print(datetime.datetime.now(datetime.timezone.utc).isoformat())",
    );
    assert_eq!(lines, ["1700000000", "2023-11-14T22:13:20+00:00"]);
}

#[test]
fn date_of_a_monday_base_time_prints_monday() {
    let shim = ShimFile::write();
    assert_eq!(
        date(&shim, Some(MONDAY_NOON), "+%A %F"),
        "Monday 2023-11-13"
    );
}

#[test]
fn date_next_tuesday_is_computed_from_the_frozen_clock() {
    // What graders do: "next Tuesday" relative to now. From Monday 2023-11-13 it is the 14th,
    // whatever the host's date.
    let shim = ShimFile::write();
    let next = run(
        &shim,
        Some(MONDAY_NOON),
        &["/bin/date", "-u", "-d", "next tuesday", "+%F"],
    );
    assert_eq!(next.trim_end(), "2023-11-14");
}

#[test]
fn python_time_keeps_the_fraction_of_a_fractional_now() {
    let shim = ShimFile::write();
    // Through env_for, as a session sets it.
    let env = clock_shim::env_for(1_700_000_000.25);
    let now = env
        .iter()
        .find(|(name, _)| name == "ENVCRAFT_NOW")
        .map(|(_, value)| value.as_str());
    assert_eq!(now, Some("1700000000.25"));
    let lines = python(
        &shim,
        now,
        "import time; print(time.time()); print(time.time_ns())",
    );
    let seconds: f64 = lines[0].parse().unwrap();
    assert!(
        (seconds - 1_700_000_000.25).abs() < 1e-6,
        "time.time() = {}",
        lines[0]
    );
    assert_eq!(lines[1], "1700000000250000000");
}

#[test]
fn envcraft_now_keeps_nanoseconds_and_accepts_the_range_edges() {
    let shim = ShimFile::write();
    let ns = python(
        &shim,
        Some("1700000000.123456789999"),
        "import time; print(time.time_ns())",
    );
    assert_eq!(ns, ["1700000000123456789"]);
    assert_eq!(
        date(&shim, Some("0"), "+%Y-%m-%dT%H:%M:%S"),
        "1970-01-01T00:00:00"
    );
    assert_eq!(
        date(&shim, Some("253402300799"), "+%Y-%m-%dT%H:%M:%S"),
        "9999-12-31T23:59:59"
    );
}

#[test]
fn every_libc_wall_clock_entry_point_is_frozen() {
    // Each function called directly through ctypes, so that none hides behind another (glibc's
    // time() and gettimeofday() read the vDSO without calling clock_gettime).
    let shim = ShimFile::write();
    let script = r#"
import ctypes
libc = ctypes.CDLL(None)
class Timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_int64), ("nsec", ctypes.c_long)]
class Timeval(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_int64), ("usec", ctypes.c_long)]
for name, clock in (("CLOCK_REALTIME", 0), ("CLOCK_REALTIME_COARSE", 5),
                    ("CLOCK_REALTIME_ALARM", 8), ("CLOCK_TAI", 11)):
    ts = Timespec()
    print(name, libc.clock_gettime(clock, ctypes.byref(ts)), ts.sec, ts.nsec)
ts = Timespec()
print("timespec_get(TIME_UTC)", libc.timespec_get(ctypes.byref(ts), 1) - 1, ts.sec, ts.nsec)
tv = Timeval()
print("gettimeofday", libc.gettimeofday(ctypes.byref(tv), None), tv.sec, tv.usec * 1000)
libc.time.restype = ctypes.c_int64
stored = ctypes.c_int64()
returned = libc.time(ctypes.byref(stored))
print("time", 0 if returned == stored.value else -1, returned, 0)
"#;
    let lines = python(&shim, Some("1700000000.25"), script);
    let expected = [
        "CLOCK_REALTIME 0 1700000000 250000000",
        "CLOCK_REALTIME_COARSE 0 1700000000 250000000",
        "CLOCK_REALTIME_ALARM 0 1700000000 250000000",
        "CLOCK_TAI 0 1700000000 250000000",
        "timespec_get(TIME_UTC) 0 1700000000 250000000",
        "gettimeofday 0 1700000000 250000000",
        "time 0 1700000000 0",
    ];
    assert_eq!(lines, expected);
}

#[test]
fn gettimeofday_with_a_null_timeval_does_not_crash() {
    // glibc declares the timeval nonnull, the kernel accepts NULL: the shim must not
    // dereference it (and zeroes the obsolete timezone, as glibc does).
    let shim = ShimFile::write();
    let script = r#"
import ctypes
libc = ctypes.CDLL(None)
tz = (ctypes.c_int * 2)(7, 7)
print(libc.gettimeofday(None, tz), tz[0], tz[1])
"#;
    for now in [Some(TUESDAY), None] {
        assert_eq!(
            python(&shim, now, script),
            ["0 0 0"],
            "ENVCRAFT_NOW={now:?}"
        );
    }
}

#[test]
fn without_envcraft_now_the_clock_is_the_real_time() {
    let shim = ShimFile::write();
    let script = "import sys,time; \
                  print(any(sys.argv[1] in line for line in open('/proc/self/maps'))); \
                  print(time.time())";
    let shim_path = shim.path().to_str().unwrap();
    let lines = run(&shim, None, &["/usr/bin/python3", "-c", script, shim_path]);
    let lines: Vec<_> = lines.lines().collect();
    assert_eq!(
        lines[0], "True",
        "the shim was not loaded, so this proves nothing"
    );
    assert_is_real_time(lines[1].parse().unwrap(), "python time.time()");
    let seen: f64 = date(&shim, None, "+%s").parse().unwrap();
    assert_is_real_time(seen, "date +%s");
}

#[test]
fn malformed_envcraft_now_leaves_the_real_time() {
    let shim = ShimFile::write();
    let malformed = [
        "",
        "abc",
        "1700000000x",
        "-1700000000",
        "+1700000000",
        " 1700000000",
        "1700000000 ",
        "1700000000.",
        ".5",
        "1.7e9",
        "1700000000.5.5",
        "253402300800",
        "99999999999999999999999999",
    ];
    for value in malformed {
        let seen: f64 = date(&shim, Some(value), "+%s").parse().unwrap();
        assert_is_real_time(seen, &format!("ENVCRAFT_NOW={value:?}"));
    }
}

#[test]
fn monotonic_clock_still_advances_while_the_wall_clock_is_frozen() {
    // The sleep is what is measured here, not a wait for an event.
    let shim = ShimFile::write();
    let lines = python(
        &shim,
        Some(TUESDAY),
        "import time; w0, m0 = time.time(), time.monotonic(); time.sleep(0.2); \
         w1, m1 = time.time(), time.monotonic(); print(w0 == w1 == 1700000000.0); print(m1 - m0)",
    );
    assert_eq!(lines[0], "True", "the wall clock moved: {lines:?}");
    let elapsed: f64 = lines[1].parse().unwrap();
    assert!(
        (0.15..10.0).contains(&elapsed),
        "monotonic advanced by {elapsed} s across a 0.2 s sleep"
    );
}

#[test]
fn a_library_constructor_that_runs_before_the_shims_sees_the_frozen_clock() {
    // glibc initialises a program's own libraries before preloaded ones, so a library that
    // reads the clock in its constructor asks before the shim's constructor has run; the shim
    // then reads ENVCRAFT_NOW on that first call.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let lib_c = dir.path().join("early.c");
    let main_c = dir.path().join("main.c");
    fs::write(
        &lib_c,
        "#include <stdio.h>\n#include <time.h>\n\
         __attribute__((constructor)) static void early(void) {\n\
           struct timespec ts; clock_gettime(CLOCK_REALTIME, &ts);\n\
           printf(\"constructor %ld %ld\\n\", (long)time(NULL), (long)ts.tv_sec);\n\
         }\n\
         void early_linked(void) {}\n",
    )
    .unwrap();
    fs::write(
        &main_c,
        "#include <stdio.h>\n#include <time.h>\nvoid early_linked(void);\n\
         int main(void) { early_linked(); printf(\"main %ld\\n\", (long)time(NULL)); return 0; }\n",
    )
    .unwrap();
    let lib = dir.path().join("libearly.so");
    let program = dir.path().join("early_clock");
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let builds: [Vec<PathBuf>; 2] = [
        vec![
            "-shared".into(),
            "-fPIC".into(),
            "-o".into(),
            lib.clone(),
            lib_c,
        ],
        vec![
            "-o".into(),
            program.clone(),
            main_c,
            format!("-L{}", dir.path().display()).into(),
            "-learly".into(),
            format!("-Wl,-rpath,{}", dir.path().display()).into(),
        ],
    ];
    for args in builds {
        let mut build = Command::new(&compiler);
        build.args(&args);
        let output = match build.output() {
            Ok(output) => output,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                common::skip(&format!(
                    "no C compiler `{compiler}` to build the test program"
                ));
                return;
            }
            Err(err) => panic!("{build:?}: {err}"),
        };
        assert!(
            output.status.success(),
            "{build:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let shim = ShimFile::write();
    let out = run(&shim, Some(TUESDAY), &[program.to_str().unwrap()]);
    assert_eq!(out, "constructor 1700000000 1700000000\nmain 1700000000\n");
}
