//! The common `envcraft exec` line, read without clap.
//!
//! A one-shot sandbox start is measured against bubblewrap, and clap's first parse of even the
//! `exec`-only command costs a tenth of a millisecond there, mostly first-touch page faults in
//! clap's code. This reads the lines a script or a harness writes (`--flag VALUE`,
//! `--flag=VALUE`, `--json`, then `--` and the command; `--image NAME` too, which a run over an
//! image would otherwise pay clap's parse for) and declines everything else: help,
//! unknown or repeated flags, a value that looks like a flag, a malformed number, text that is
//! not UTF-8 where a string is expected. A declined line goes to clap, which accepts it or
//! explains what is wrong, so the fast path can only ever agree with clap (a test checks that
//! over accepted and declined lines alike).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use super::exec::ExecArgs;
use super::{Cli, Command};

/// `argv` (the program's name first) as clap would read it, when it is a plain `exec` line;
/// `None` when clap must read it.
pub fn read(argv: &[OsString]) -> Option<Cli> {
    let (first, rest) = argv.get(1..)?.split_first()?;
    if first != "exec" {
        return None;
    }
    let mut workspace: Option<PathBuf> = None;
    let mut policy: Option<String> = None;
    let mut timeout: Option<u64> = None;
    let mut json = false;
    let mut keep_changes: Option<PathBuf> = None;
    let mut log_format: Option<String> = None;
    let mut image: Option<String> = None;
    let mut args = rest.iter();
    loop {
        let arg = args.next()?;
        if arg == "--" {
            break;
        }
        let (name, inline) = split_flag(arg)?;
        if name == b"json" {
            if inline.is_some() || json {
                return None;
            }
            json = true;
            continue;
        }
        let value = match inline {
            Some(value) => value,
            None => {
                let next = args.next()?;
                if next.as_bytes().starts_with(b"-") {
                    return None;
                }
                next.as_os_str()
            }
        };
        match name {
            b"workspace" => set(&mut workspace, path(value)?)?,
            b"policy" => set(&mut policy, text(value)?)?,
            b"timeout" => set(&mut timeout, seconds(value)?)?,
            b"keep-changes" => set(&mut keep_changes, path(value)?)?,
            b"image" => set(&mut image, text(value).filter(|n| !n.is_empty())?)?,
            b"log-format" => {
                let format = text(value)?;
                if format != "text" && format != "json" {
                    return None;
                }
                set(&mut log_format, format)?
            }
            _ => return None,
        }
    }
    let command = args
        .map(|a| a.to_str().map(str::to_owned))
        .collect::<Option<Vec<String>>>()?;
    if command.is_empty() {
        return None;
    }
    Some(Cli {
        log_format: log_format.unwrap_or_else(|| "text".to_string()),
        command: Command::Exec(ExecArgs {
            workspace: workspace?,
            policy: policy.unwrap_or_else(|| "default".to_string()),
            timeout,
            json,
            keep_changes,
            image,
            command,
        }),
    })
}

/// `--name` or `--name=value`, as the name's bytes and the inline value.
fn split_flag(arg: &OsStr) -> Option<(&[u8], Option<&OsStr>)> {
    let body = arg.as_bytes().strip_prefix(b"--")?;
    match body.iter().position(|&b| b == b'=') {
        Some(eq) => Some((&body[..eq], Some(OsStr::from_bytes(&body[eq + 1..])))),
        None => Some((body, None)),
    }
}

/// A flag given once; `None` (decline) when it is given again.
fn set<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    if slot.is_some() {
        return None;
    }
    *slot = Some(value);
    Some(())
}

/// A non-empty path (clap refuses an empty one).
fn path(value: &OsStr) -> Option<PathBuf> {
    (!value.is_empty()).then(|| PathBuf::from(value))
}

fn text(value: &OsStr) -> Option<String> {
    value.to_str().map(str::to_owned)
}

/// Decimal digits only; anything clap might read differently (`+5`, overflow) is declined.
fn seconds(value: &OsStr) -> Option<u64> {
    let bytes = value.as_bytes();
    if bytes.is_empty() || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    value.to_str()?.parse().ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;

    use clap::Parser;

    use super::read;
    use crate::cli::Cli;

    fn argv(words: &[&str]) -> Vec<OsString> {
        std::iter::once("envcraft")
            .chain(words.iter().copied())
            .map(OsString::from)
            .collect()
    }

    /// Every line the fast path reads, clap reads the same way.
    #[test]
    fn accepted_lines_read_as_clap_reads_them() {
        let lines: &[&[&str]] = &[
            &["exec", "--workspace", "W", "--", "true"],
            &["exec", "--workspace=W", "--", "true"],
            &[
                "exec",
                "--workspace",
                "W",
                "--",
                "sh",
                "-c",
                "echo hi",
                "--",
                "-x",
                "",
            ],
            &[
                "exec",
                "--json",
                "--workspace",
                "/a b/W",
                "--policy",
                "strict",
                "--timeout",
                "5",
                "--keep-changes",
                "OUT",
                "--log-format",
                "json",
                "--",
                "sh",
                "-c",
                "echo hi",
            ],
            &[
                "exec",
                "--image",
                "office",
                "--workspace",
                "W",
                "--",
                "true",
            ],
            &[
                "exec",
                "--workspace",
                "W",
                "--image=127.0.0.1:5000/app@sha256:0123",
                "--",
                "true",
            ],
            &[
                "exec",
                "--policy=./p.toml",
                "--timeout=0",
                "--keep-changes=O=1",
                "--log-format=text",
                "--workspace",
                "W",
                "--",
                "true",
            ],
            &[
                "exec",
                "--timeout",
                "18446744073709551615",
                "--workspace",
                "W",
                "--",
                "x",
            ],
        ];
        for words in lines {
            let line = argv(words);
            let fast = read(&line).unwrap_or_else(|| panic!("declined {words:?}"));
            let clap = Cli::try_parse_from(&line).unwrap();
            assert_eq!(format!("{fast:?}"), format!("{clap:?}"), "{words:?}");
        }
    }

    /// Whatever the fast path declines goes to clap: help, errors, unusual forms.
    #[test]
    fn unusual_lines_are_left_to_clap() {
        let lines: &[&[&str]] = &[
            &["exec", "--help"],
            &["exec", "-h"],
            &["exec", "--workspace", "W"],
            &["exec", "--", "true"],
            &["exec", "--workspace", "W", "--"],
            &["exec", "--workspace", "--", "true"],
            &["exec", "--workspace", "-W", "--", "true"],
            &["exec", "--workspace=", "--", "true"],
            &["exec", "--workspace", "W", "--workspace", "V", "--", "true"],
            &["exec", "--workspace", "W", "--json", "--json", "--", "true"],
            &["exec", "--workspace", "W", "--json=true", "--", "true"],
            &["exec", "--workspace", "W", "--image", "--", "true"],
            &["exec", "--workspace", "W", "--image", "-x", "--", "true"],
            &[
                "exec",
                "--image",
                "a",
                "--image",
                "b",
                "--workspace",
                "W",
                "--",
                "x",
            ],
            &["exec", "--workspace", "W", "--timeout", "x", "--", "true"],
            &["exec", "--workspace", "W", "--timeout", "+5", "--", "true"],
            &[
                "exec",
                "--workspace",
                "W",
                "--timeout",
                "18446744073709551616",
                "--",
                "x",
            ],
            &[
                "exec",
                "--workspace",
                "W",
                "--log-format",
                "xml",
                "--",
                "true",
            ],
            &["exec", "--workspace", "W", "--bogus", "--", "true"],
            &["exec", "--workspace", "W", "-j", "--", "true"],
            &["exec", "--workspace", "W", "true"],
            &[
                "--log-format",
                "json",
                "exec",
                "--workspace",
                "W",
                "--",
                "true",
            ],
            &["doctor"],
            &[],
        ];
        for words in lines {
            assert!(read(&argv(words)).is_none(), "read {words:?}");
        }
        // A command word that is not UTF-8 (clap refuses it for a `String`).
        let mut line = argv(&["exec", "--workspace", "W", "--"]);
        line.push(OsString::from_vec(vec![0xff, b'x']));
        assert!(read(&line).is_none());
    }

    /// What the fast path declines but clap accepts still parses, through clap.
    #[test]
    fn declined_lines_that_clap_accepts_still_run() {
        let line = argv(&["exec", "--workspace", "W", "--timeout", "+5", "--", "true"]);
        assert!(read(&line).is_none());
        assert!(Cli::try_parse_from(&line).is_ok());
    }
}
