//! The frozen clock: `libenvcraft_clock.so`, a tiny C shared object (`shim/clock.c`, built by
//! `build.rs` and embedded here) that a sandbox preloads into every process so that the wall
//! clock reads `ENVCRAFT_NOW` (the session's `base_time + action_index × step`), never the
//! host's time; and the environment variables that turn it on.
//!
//! With `ENVCRAFT_NOW` set, `clock_gettime` (for `CLOCK_REALTIME`, `CLOCK_REALTIME_COARSE`,
//! `CLOCK_REALTIME_ALARM` and `CLOCK_TAI`), `timespec_get(TIME_UTC)`, `gettimeofday` and `time`
//! return that instant for the whole life of the process (`date`, Python's `time.time()` and
//! `datetime.now()`, Rust's `SystemTime::now()`, Node, the JVM...). Every other clock (monotonic,
//! boot time, CPU time) is the kernel's, so sleeps, timeouts and elapsed-time measurements still
//! work. Without `ENVCRAFT_NOW`, or with a malformed one, everything is the kernel's.
//!
//! What it cannot reach, where the wall clock stays the host's:
//! - programs that do not load it: statically linked binaries, binaries for another ABI (32-bit
//!   or musl), setuid programs run without `no_new_privs`, and anything started with a cleaned
//!   environment (`env -i`, a process that drops `LD_PRELOAD` or `ENVCRAFT_NOW`);
//! - programs that read the clock without calling libc's functions: the raw `clock_gettime`
//!   system call, the vDSO read directly, Go binaries (their runtime does both), and libc's own
//!   internal calls (`ftime`, `ntp_gettime`);
//! - the kernel's own clock: file timestamps (`touch`, new files, `ls -l`, `find -newer`), so a
//!   file just written looks years away from "now"; and absolute `CLOCK_REALTIME` deadlines
//!   given to the kernel (`pthread_cond_timedwait` with the default clock, `sem_timedwait`,
//!   `clock_nanosleep(TIMER_ABSTIME)`), which expire at once or much later than meant.
//!
//! It is a determinism aid, not a protection: a program that wants the host's time can get it.

/// The shim, built from `shim/clock.c` for the target: to be written to [`SHIM_PATH`] inside
/// the sandbox (readable, on a mount that allows executable mappings).
pub const SHIM: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libenvcraft_clock.so"));

/// Where the sandbox puts [`SHIM`], and what `LD_PRELOAD` names.
pub const SHIM_PATH: &str = "/.envcraft/libenvcraft_clock.so";

/// The latest instant the shim accepts, 9999-12-31T23:59:59Z (it refuses anything later).
pub const LATEST_UNIX_SECONDS: u64 = 253_402_300_799;

/// The variables to add to a sandboxed command's environment so that its clock reads
/// `now_unix` (Unix seconds, fractions kept to the nanosecond the shim can hold):
/// `LD_PRELOAD` (exactly [`SHIM_PATH`]; a caller that preloads more joins them with `:`),
/// `ENVCRAFT_NOW` (read by the shim) and `SOURCE_DATE_EPOCH` (whole seconds, read by build
/// tools that stamp dates: compilers, archivers, Python's `compileall`).
///
/// # Panics
///
/// When `now_unix` is not finite, is negative or is later than [`LATEST_UNIX_SECONDS`]: the
/// shim would refuse such a value and every process would silently see the host's clock, so a
/// caller must validate its base time and step before they get here.
pub fn env_for(now_unix: f64) -> Vec<(String, String)> {
    assert!(
        now_unix.is_finite() && now_unix >= 0.0 && now_unix < (LATEST_UNIX_SECONDS + 1) as f64,
        "clock_shim::env_for: {now_unix} is not a Unix time between 0 and {LATEST_UNIX_SECONDS}"
    );
    // `-0.0` would print as "-0", which the shim refuses.
    let now_unix = if now_unix == 0.0 { 0.0 } else { now_unix };
    vec![
        ("LD_PRELOAD".to_owned(), SHIM_PATH.to_owned()),
        // Display of an f64 is its shortest exact decimal form, never with an exponent:
        // `1700000000` or `1700000000.25`, the shim's grammar.
        ("ENVCRAFT_NOW".to_owned(), format!("{now_unix}")),
        (
            "SOURCE_DATE_EPOCH".to_owned(),
            format!("{}", now_unix.floor() as u64),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value<'a>(env: &'a [(String, String)], name: &str) -> &'a str {
        let found: Vec<_> = env.iter().filter(|(key, _)| key == name).collect();
        assert_eq!(found.len(), 1, "{name} in {env:?}");
        &found[0].1
    }

    /// The shim's grammar (shim/clock.c): digits, optionally `.` and digits.
    fn shim_accepts(text: &str) -> bool {
        let (whole, fraction) = match text.split_once('.') {
            Some((whole, fraction)) => (whole, Some(fraction)),
            None => (text, None),
        };
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        digits(whole)
            && fraction.is_none_or(digits)
            && whole.parse::<u64>().is_ok_and(|s| s <= LATEST_UNIX_SECONDS)
    }

    #[test]
    fn env_for_sets_exactly_the_three_variables() {
        let env = env_for(1_700_000_000.0);
        let names: Vec<_> = env.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["LD_PRELOAD", "ENVCRAFT_NOW", "SOURCE_DATE_EPOCH"]);
        assert_eq!(value(&env, "LD_PRELOAD"), SHIM_PATH);
    }

    #[test]
    fn env_for_whole_seconds_are_written_as_an_integer() {
        let env = env_for(1_700_000_000.0);
        assert_eq!(value(&env, "ENVCRAFT_NOW"), "1700000000");
        assert_eq!(value(&env, "SOURCE_DATE_EPOCH"), "1700000000");
    }

    #[test]
    fn env_for_keeps_the_fraction_and_floors_source_date_epoch() {
        let env = env_for(1_700_000_000.25);
        assert_eq!(value(&env, "ENVCRAFT_NOW"), "1700000000.25");
        assert_eq!(value(&env, "SOURCE_DATE_EPOCH"), "1700000000");
        let env = env_for(1_700_000_000.999);
        assert_eq!(value(&env, "ENVCRAFT_NOW"), "1700000000.999");
        assert_eq!(value(&env, "SOURCE_DATE_EPOCH"), "1700000000");
    }

    #[test]
    fn env_for_base_plus_steps_round_trips_through_the_text() {
        // What a session computes: base_time + action_index × step.
        let base = 1_699_833_600.0;
        for index in 0..1000u32 {
            let now = base + f64::from(index) * 0.1;
            let env = env_for(now);
            let text = value(&env, "ENVCRAFT_NOW");
            assert!(shim_accepts(text), "{text}");
            assert_eq!(text.parse::<f64>().ok(), Some(now), "{text}");
        }
    }

    #[test]
    fn env_for_values_are_always_in_the_shims_grammar() {
        let values = [
            0.0,
            -0.0,
            1e-10,
            0.1 + 0.2,
            1.0,
            86_400.5,
            1_700_000_000.000_000_1,
            4_102_444_800.0,
            LATEST_UNIX_SECONDS as f64,
            LATEST_UNIX_SECONDS as f64 + 0.5,
        ];
        for now in values {
            let env = env_for(now);
            let text = value(&env, "ENVCRAFT_NOW");
            assert!(shim_accepts(text), "{now} -> {text}");
            let whole = value(&env, "SOURCE_DATE_EPOCH");
            assert_eq!(whole, text.split('.').next().unwrap_or_default(), "{now}");
        }
    }

    #[test]
    #[should_panic(expected = "not a Unix time")]
    fn env_for_refuses_nan() {
        env_for(f64::NAN);
    }

    #[test]
    #[should_panic(expected = "not a Unix time")]
    fn env_for_refuses_infinity() {
        env_for(f64::INFINITY);
    }

    #[test]
    #[should_panic(expected = "not a Unix time")]
    fn env_for_refuses_times_before_the_epoch() {
        env_for(-1.0);
    }

    #[test]
    #[should_panic(expected = "not a Unix time")]
    fn env_for_refuses_times_after_the_year_9999() {
        env_for(LATEST_UNIX_SECONDS as f64 + 1.0);
    }

    #[test]
    fn shim_is_a_shared_object_for_the_target_architecture() {
        // ELF magic, 64-bit, ET_DYN, and e_machine of the target.
        assert_eq!(&SHIM[..4], b"\x7fELF");
        assert_eq!(SHIM[4], 2, "ELFCLASS64");
        assert_eq!(u16::from_le_bytes([SHIM[16], SHIM[17]]), 3, "ET_DYN");
        let machine = u16::from_le_bytes([SHIM[18], SHIM[19]]);
        let expected = match std::env::consts::ARCH {
            "x86_64" => 62,
            "aarch64" => 183,
            "riscv64" => 243,
            other => panic!("no ELF machine number known for {other}"),
        };
        assert_eq!(machine, expected);
    }
}
