//! `envcraft exec` as a user sees it: the JSON report, exit codes, the copy-on-write workspace
//! and its change list, policies, errors, determinism, unprivileged runs and the fallback
//! without user namespaces. Every run goes through `contained`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{Exec, RunAs, Template, exec_json, host_pids_with_arg, sandbox_ready};

/// `bash contained envcraft ARGS...` without --json: status, stdout, stderr.
fn envcraft_plain(args: &[&str]) -> (i32, String, String) {
    let out = Command::new("bash")
        .arg(common::contained().unwrap())
        .arg(common::envcraft())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn json_report_has_every_documented_field() {
    if !sandbox_ready() {
        return;
    }
    let t = Template::new();
    let r = exec_json(
        t.path(),
        None,
        &[],
        &["sh", "-c", "echo out; echo err >&2; exit 7"],
    );
    r.assert_ran();
    let json = r.json.as_ref().unwrap();
    for key in [
        "exit_code",
        "signal",
        "timed_out",
        "stdout",
        "stderr",
        "stdout_truncated",
        "stderr_truncated",
        "duration_ms",
        "enforced",
        "changes",
    ] {
        assert!(json.get(key).is_some(), "missing {key}: {json}");
    }
    assert_eq!(r.exit_code, Some(7));
    assert_eq!(r.stdout, "out\n");
    assert_eq!(r.stderr, "err\n");
    let enforced = &json["enforced"];
    for p in [
        "user_namespace",
        "pid_namespace",
        "landlock_filesystem",
        "seccomp",
    ] {
        assert_eq!(enforced[p], true, "{p} not enforced: {enforced}");
    }
    assert_eq!(enforced["workspace"], "overlay");
    t.assert_unchanged();
}

#[test]
fn plain_mode_passes_output_and_exit_code_through() {
    if !sandbox_ready() {
        return;
    }
    let t = Template::new();
    let ws = t.path().to_str().unwrap();
    let (code, out, err) = envcraft_plain(&[
        "exec",
        "--workspace",
        ws,
        "--",
        "sh",
        "-c",
        "echo visible; echo problem >&2; exit 3",
    ]);
    assert_eq!(code, 3);
    assert_eq!(out, "visible\n");
    assert!(err.contains("problem"), "{err}");
    let (code, _, err) = envcraft_plain(&[
        "exec",
        "--workspace",
        ws,
        "--timeout",
        "1",
        "--",
        "sleep",
        "30",
    ]);
    assert_eq!(code, 124, "{err}");
    let (code, _, err) = envcraft_plain(&["exec", "--workspace", ws, "--", "no-such-command-here"]);
    assert_eq!(code, 127);
    assert!(err.contains("command not found"), "{err}");
    let (code, _, err) =
        envcraft_plain(&["exec", "--workspace", ws, "--", "/workspace/README.txt"]);
    assert_eq!(code, 126, "{err}");
    let (code, _, _) =
        envcraft_plain(&["exec", "--workspace", ws, "--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(code, 128 + 15);
    t.assert_unchanged();
}

#[test]
fn python_runs_as_python3_where_the_system_has_only_python3() {
    // Claw harnesses' containers have both; tasks and their scripts call either.
    if !sandbox_ready() {
        return;
    }
    let t = Template::new();
    let ws = t.path().to_str().unwrap();
    let host_has_python = Path::new("/usr/bin/python").exists();
    for policy in ["default", "portable", "strict"] {
        let (code, out, err) = envcraft_plain(&[
            "exec",
            "--workspace",
            ws,
            "--policy",
            policy,
            "--",
            "sh",
            "-c",
            "python -c 'import sys; print(sys.version_info[0])'; command -v python",
        ]);
        assert_eq!(code, 0, "{policy}: {err}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.first(), Some(&"3"), "{policy}: {out} {err}");
        if !host_has_python {
            assert_eq!(
                lines.get(1),
                Some(&"/.envcraft/bin/python"),
                "{policy}: {out}"
            );
        }
    }
    t.assert_unchanged();
}

#[test]
fn changes_list_added_modified_and_deleted_paths_from_the_upper_layer() {
    if !sandbox_ready() {
        return;
    }
    let t = Template::new();
    let script = "echo new > added.txt; echo more >> sub/data.csv; rm sub/deeper/note.md; \
                  rm -r empty-dir; mkdir -p fresh/dir; echo x > fresh/dir/f; \
                  cat README.txt > /dev/null; chmod 600 run.sh";
    let r = exec_json(t.path(), None, &[], &["sh", "-c", script]);
    r.assert_ran();
    assert_eq!(r.exit_code, Some(0), "{}", r.describe());
    assert_eq!(
        r.changed("added"),
        vec!["added.txt", "fresh", "fresh/dir", "fresh/dir/f"]
    );
    assert_eq!(r.changed("modified"), vec!["run.sh", "sub/data.csv"]);
    assert_eq!(
        r.changed("deleted"),
        vec!["empty-dir", "sub/deeper/note.md"]
    );
    t.assert_unchanged();
}

#[test]
fn a_directory_removed_and_recreated_reports_its_old_content_deleted() {
    if !sandbox_ready() {
        return;
    }
    let t = Template::new();
    let r = exec_json(
        t.path(),
        None,
        &[],
        &[
            "sh",
            "-c",
            "rm -r sub && mkdir sub && echo fresh > sub/only.txt",
        ],
    );
    r.assert_ran();
    assert_eq!(r.changed("added"), vec!["sub/only.txt"]);
    assert_eq!(
        r.changed("deleted"),
        vec!["sub/data.csv", "sub/deeper", "sub/deeper/note.md"]
    );
    t.assert_unchanged();
}

#[test]
fn the_same_command_on_the_same_template_gives_the_same_changes() {
    if !sandbox_ready() {
        return;
    }
    let t = Template::new();
    let cmd = [
        "sh",
        "-c",
        "seq 1 100 > n.txt; rm ro.txt; echo edit >> README.txt; mkdir d; touch d/e",
    ];
    let a = exec_json(t.path(), None, &[], &cmd);
    let b = exec_json(t.path(), None, &[], &cmd);
    a.assert_ran();
    b.assert_ran();
    assert_eq!(a.changes, b.changes);
    assert_eq!(a.stdout, b.stdout);
    t.assert_unchanged();
}

#[test]
fn the_workspace_is_also_at_the_claw_alias_and_is_the_working_directory() {
    if !sandbox_ready() {
        return;
    }
    let t = Template::new();
    let r = exec_json(
        t.path(),
        None,
        &[],
        &[
            "sh",
            "-c",
            "pwd; echo via-alias > /root/.openclaw/workspace/alias.txt; cat /workspace/alias.txt",
        ],
    );
    r.assert_ran();
    assert_eq!(r.stdout, "/workspace\nvia-alias\n");
    assert_eq!(r.changed("added"), vec!["alias.txt"]);
    t.assert_unchanged();
}

#[test]
fn keep_changes_copies_the_changed_files_out() {
    if !sandbox_ready() {
        return;
    }
    let t = Template::new();
    let out = tempfile::tempdir().unwrap();
    let keep = out.path().join("kept");
    let r = exec_json(
        t.path(),
        None,
        &["--keep-changes", keep.to_str().unwrap()],
        &[
            "sh",
            "-c",
            "mkdir -p a/b && echo kept > a/b/c.txt && rm ro.txt",
        ],
    );
    r.assert_ran();
    assert_eq!(
        fs::read_to_string(keep.join("files/a/b/c.txt")).unwrap(),
        "kept\n"
    );
    let listed: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(keep.join("changes.json")).unwrap()).unwrap();
    assert_eq!(listed["deleted"], serde_json::json!(["ro.txt"]));
    // An existing, non-empty target is refused, not overwritten.
    let again = Exec::new(t.path())
        .args(&["--keep-changes", keep.to_str().unwrap()])
        .run(&["true"]);
    assert_eq!(
        again.status.and_then(|s| s.code()),
        Some(125),
        "{}",
        again.describe()
    );
    assert!(again.envcraft_stderr.contains("not an empty directory"));
    assert_eq!(
        fs::read_to_string(keep.join("files/a/b/c.txt")).unwrap(),
        "kept\n"
    );
    t.assert_unchanged();
}

#[test]
fn output_past_the_cap_is_truncated_and_flagged() {
    if !sandbox_ready() {
        return;
    }
    let t = Template::new();
    let r = exec_json(
        t.path(),
        None,
        &[],
        &["sh", "-c", "head -c 3000000 /dev/zero | tr '\\0' a"],
    );
    r.assert_ran();
    assert!(r.stdout_truncated);
    assert_eq!(r.stdout.len(), 1 << 20);
    assert!(!r.stderr_truncated);
    assert_eq!(r.exit_code, Some(0));
}

#[test]
fn a_long_command_line_reaches_the_command_whole() {
    if !sandbox_ready() {
        return;
    }
    let t = Template::new();
    // Past the 4 KiB that once cut the request to the sandbox short; past the size sent in the
    // channel's message itself; and 1 MB in ten arguments (the kernel's most for one is 128 KiB).
    for (args, len) in [(1, 5_000), (1, 100_000), (10, 100_000)] {
        let arg = "x".repeat(len);
        let mut cmd = vec![
            "sh",
            "-c",
            r#"for a in "$@"; do printf %s "$a"; done | wc -c"#,
            "sh",
        ];
        cmd.extend(std::iter::repeat_n(arg.as_str(), args));
        let r = exec_json(t.path(), None, &[], &cmd);
        r.assert_ran();
        assert_eq!(r.exit_code, Some(0), "{args} x {len}: {}", r.stderr);
        assert_eq!(r.stdout.trim(), (args * len).to_string(), "{args} x {len}");
    }
}

#[test]
fn a_read_only_workspace_policy_keeps_the_workspace_read_only() {
    if !sandbox_ready() {
        return;
    }
    let (_policy_dir, policy) = common::read_only_policy();
    let t = Template::new();
    let r = exec_json(
        t.path(),
        Some(&policy),
        &[],
        &[
            "sh",
            "-c",
            "cat README.txt; echo x > new.txt; echo $PYTHONDONTWRITEBYTECODE",
        ],
    );
    r.assert_ran();
    assert!(r.stdout.starts_with(common::TEMPLATE_README_PREFIX));
    assert!(
        r.stderr.contains("Read-only file system"),
        "{}",
        r.describe()
    );
    assert!(r.stdout.ends_with("1\n"));
    assert!(r.changed("added").is_empty());
    t.assert_unchanged();
}

#[test]
fn a_policy_file_with_a_typo_is_refused_with_key_and_line() {
    if !sandbox_ready() {
        return;
    }
    let t = Template::new();
    let dir = tempfile::tempdir().unwrap();
    let text =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/default.toml"))
            .unwrap()
            .replace("open_files = 1024", "open_file = 1024");
    let line = text
        .lines()
        .position(|l| l.starts_with("open_file "))
        .unwrap()
        + 1;
    let policy = dir.path().join("typo.toml");
    fs::write(&policy, text).unwrap();
    let (code, _, err) = envcraft_plain(&[
        "exec",
        "--workspace",
        t.path().to_str().unwrap(),
        "--policy",
        policy.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert_eq!(code, 125);
    assert!(
        err.contains("open_file") && err.contains(&format!("line {line}")),
        "{err}"
    );
    let (code, _, err) = envcraft_plain(&[
        "exec",
        "--workspace",
        t.path().to_str().unwrap(),
        "--policy",
        "no-such-policy",
        "--",
        "true",
    ]);
    assert_eq!(code, 125);
    assert!(
        err.contains("unknown policy") && err.contains("`default`"),
        "{err}"
    );
}

#[test]
fn a_missing_workspace_is_a_clear_error() {
    if !sandbox_ready() {
        return;
    }
    let (code, _, err) = envcraft_plain(&["exec", "--workspace", "/nonexistent/ws", "--", "true"]);
    assert_eq!(code, 125);
    assert!(
        err.contains("/nonexistent/ws") && err.contains("not a readable directory"),
        "{err}"
    );
    let (code, _, _) = envcraft_plain(&["exec", "--workspace", "/tmp"]);
    assert_eq!(code, 2, "a missing command is a usage error");
}

#[test]
fn no_state_directory_is_left_behind() {
    if !sandbox_ready() {
        return;
    }
    let t = Template::new();
    let state = tempfile::tempdir().unwrap();
    let r = Exec::new(t.path())
        .env("ENVCRAFT_STATE_DIR", state.path().to_str().unwrap())
        .run(&["sh", "-c", "echo x > y; sleep 0.1"]);
    r.assert_ran();
    let left: Vec<_> = fs::read_dir(state.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    let timed = Exec::new(t.path())
        .env("ENVCRAFT_STATE_DIR", state.path().to_str().unwrap())
        .args(&["--timeout", "1"])
        .run(&["sleep", "30"]);
    assert!(timed.timed_out);
    assert!(fs::read_dir(state.path()).unwrap().next().is_none());
}

#[test]
fn the_command_runs_without_capabilities_under_one_seccomp_program() {
    if !sandbox_ready() {
        return;
    }
    let t = Template::new();
    let r = Exec::new(t.path()).run(&[
        "sh",
        "-c",
        "grep -E '^(Cap|NoNewPrivs|Seccomp)' /proc/self/status",
    ]);
    r.assert_ran();
    let zero = "0000000000000000";
    let expected = format!(
        "CapInh:\t{zero}\nCapPrm:\t{zero}\nCapEff:\t{zero}\nCapBnd:\t{zero}\nCapAmb:\t{zero}\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\n"
    );
    assert_eq!(r.stdout, expected, "{}", r.describe());
    let enforced = &r.json.as_ref().unwrap()["enforced"];
    for p in ["seccomp", "no_new_privs", "capabilities_dropped"] {
        assert_eq!(enforced[p], true, "{p}");
    }
}

/// What the policy hides is masked by read-only, nosuid, nodev, noexec mounts (an empty file,
/// an empty directory of mode 000) that the command can neither write nor list.
#[test]
fn masks_are_read_only_empty_and_unlistable() {
    if !sandbox_ready() {
        return;
    }
    let t = Template::new();
    let script = r#"for m in /etc/shadow /etc/ssh; do
  awk -v m="$m" '$5 == m { print m, $6 }' /proc/self/mountinfo
done
stat -c '%n %s %a' /etc/shadow
stat -c '%n %a' /etc/ssh
ls /etc/ssh >/dev/null 2>&1 && echo LISTED
: > /etc/shadow 2>/dev/null && echo WROTE
mkdir /etc/ssh/x 2>/dev/null && echo MADE
exit 0"#;
    let r = Exec::new(t.path()).run(&["sh", "-c", script]);
    r.assert_ran();
    for mask in ["/etc/shadow", "/etc/ssh"] {
        let line = r
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("{mask} ")) && l.contains(','))
            .unwrap_or_else(|| panic!("{mask} is not a mount: {}", r.describe()));
        let flags: Vec<&str> = line.split_whitespace().nth(1).unwrap().split(',').collect();
        for flag in ["ro", "nosuid", "nodev", "noexec"] {
            assert!(flags.contains(&flag), "{mask}: {flag} missing in {line}");
        }
    }
    assert!(r.stdout.contains("/etc/shadow 0 "), "{}", r.describe());
    assert!(r.stdout.contains("/etc/ssh 0\n"), "{}", r.describe());
    for bad in ["LISTED", "WROTE", "MADE"] {
        assert!(!r.stdout.contains(bad), "{bad}: {}", r.describe());
    }
}

/// Commands start as on any system: SIGPIPE at its default (envcraft's runtime ignores it, and
/// an ignored signal would stay ignored across execve), nothing blocked, no descriptor of the
/// sandbox's init beyond stdio.
#[test]
fn commands_start_with_default_signals_and_only_stdio() {
    if !sandbox_ready() {
        return;
    }
    let t = Template::new();
    let r = Exec::new(t.path()).run(&[
        "sh",
        "-c",
        "yes | head -1; grep -E '^Sig(Ign|Blk)' /proc/self/status; ls /proc/self/fd | wc -l",
    ]);
    r.assert_ran();
    let zero = "0000000000000000";
    // 0, 1, 2 and the directory ls reads.
    assert_eq!(
        r.stdout,
        format!("y\nSigBlk:\t{zero}\nSigIgn:\t{zero}\n4\n"),
        "{}",
        r.describe()
    );
    assert_eq!(r.stderr, "", "{}", r.describe());
}

/// The sandbox has a network namespace of its own (the init makes it beside its other setup
/// and joins it before the command starts) holding only loopback, which is up: 127.0.0.1 is
/// in the local routing table only then.
#[test]
fn the_command_runs_in_a_network_namespace_of_its_own_with_loopback_up() {
    if !sandbox_ready() {
        return;
    }
    let t = Template::new();
    let r = Exec::new(t.path()).run(&[
        "sh",
        "-c",
        "readlink /proc/self/ns/net; grep -c 'lo:' /proc/net/dev; wc -l < /proc/net/dev; \
         grep -c '127.0.0.1' /proc/net/fib_trie",
    ]);
    r.assert_ran();
    let host = fs::read_link("/proc/self/ns/net").unwrap();
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", r.describe());
    assert!(lines[0].starts_with("net:["), "{}", r.describe());
    assert_ne!(lines[0], host.to_string_lossy(), "{}", r.describe());
    // Two header lines and loopback: no other interface.
    assert_eq!(&lines[1..3], ["1", "3"], "{}", r.describe());
    assert_ne!(lines[3], "0", "loopback is down: {}", r.describe());
}

/// `envcraft exec ... | head -1` ends when the reader goes away, as the command alone would:
/// its next write fails (SIGPIPE) instead of running to the wall-clock limit.
#[test]
fn passed_through_output_ends_the_command_when_the_reader_goes_away() {
    if !sandbox_ready() {
        return;
    }
    let t = Template::new();
    let mut child = Command::new(common::envcraft())
        .args(["exec", "--timeout", "60", "--workspace"])
        .arg(t.path())
        .args(["--", "yes"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 2];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    assert_eq!(&first, b"y\n");
    // The read end is closed here (the pipe was moved out and dropped).
    let begin = std::time::Instant::now();
    let status = child.wait_with_output().unwrap();
    assert!(
        begin.elapsed() < std::time::Duration::from_secs(30),
        "ran on for {:?}",
        begin.elapsed()
    );
    assert_eq!(
        status.status.code(),
        Some(128 + libc::SIGPIPE),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
}

#[test]
fn what_the_command_leaves_running_is_dead_when_exec_returns() {
    // envcraft does not wait for the init's own exit, but the init kills and reaps every
    // other process first: a daemon in its own session and a plain background job are gone.
    if !sandbox_ready() {
        return;
    }
    let t = Template::new();
    let r = Exec::new(t.path()).run(&[
        "sh",
        "-c",
        "setsid sleep 6071 > /dev/null 2>&1 & sleep 6072 > /dev/null 2>&1 & echo started",
    ]);
    r.assert_ran();
    assert_eq!(r.stdout, "started\n", "{}", r.describe());
    for needle in ["sleep 6071", "sleep 6072"] {
        assert_eq!(
            host_pids_with_arg(needle),
            Vec::<u32>::new(),
            "{needle} survived"
        );
    }
}

#[test]
fn an_unprivileged_user_gets_the_same_sandbox() {
    if !common::nobody_ready() {
        return;
    }
    let t = Template::for_user(RunAs::Nobody);
    let r = Exec::new(t.path()).run_as(RunAs::Nobody).run(&[
        "sh",
        "-c",
        "id -u; echo more >> README.txt; echo new > n; grep Cap /proc/self/status",
    ]);
    r.assert_ran();
    assert!(r.stdout.starts_with("0\n"), "{}", r.describe());
    assert!(r.stdout.contains("CapEff:\t0000000000000000"));
    assert_eq!(r.changed("added"), vec!["n"]);
    assert_eq!(r.changed("modified"), vec!["README.txt"]);
    let enforced = &r.json.as_ref().unwrap()["enforced"];
    assert_eq!(enforced["invoker"], "unprivileged");
    assert_eq!(enforced["user_namespace"], true);
    assert_eq!(enforced["landlock_filesystem"], true);
    assert_eq!(enforced["template_owner_mapped"], true);
    t.assert_unchanged();
}

#[test]
fn under_root_the_sandbox_user_is_the_templates_owner() {
    if !sandbox_ready() {
        return;
    }
    let t = Template::for_user(RunAs::Nobody);
    let r = exec_json(
        t.path(),
        None,
        &[],
        &["sh", "-c", "echo more >> README.txt && echo ok"],
    );
    r.assert_ran();
    assert_eq!(r.stdout, "ok\n", "{}", r.describe());
    assert_eq!(
        r.json.as_ref().unwrap()["enforced"]["sandbox_uid_maps_to"],
        65534
    );
    t.assert_unchanged();
}

/// A policy like `default` that also shows envcraft's own binary, for runs of envcraft inside
/// envcraft: the outer sandbox's seccomp filter refuses new user namespaces, as some container
/// platforms do, so the inner envcraft meets a machine without them.
fn nested_policy(dir: &Path) -> String {
    let bin_dir = common::envcraft().parent().unwrap().to_path_buf();
    let text =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/default.toml"))
            .unwrap()
            .replace(
                "read_only = [\"/usr\"",
                &format!("read_only = [\"{}\", \"/usr\"", bin_dir.display()),
            );
    let path = dir.join("outer.toml");
    fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn without_user_namespaces_portable_falls_back_and_default_refuses() {
    if !sandbox_ready() {
        return;
    }
    let t = Template::new();
    let dir = tempfile::tempdir().unwrap();
    let outer = nested_policy(dir.path());
    let bin = common::envcraft();
    let inner = format!(
        "{bin} exec --workspace /workspace --policy portable --json -- sh -c \
         'echo made > inner.txt; cat /etc/shadow; python3 -c \"import socket; socket.socket()\"'; \
         echo portable-rc=$?; {bin} exec --workspace /workspace -- true; echo default-rc=$?",
        bin = bin.display()
    );
    let r = exec_json(t.path(), Some(&outer), &[], &["sh", "-c", &inner]);
    r.assert_ran();
    assert!(r.stdout.contains("portable-rc=0"), "{}", r.describe());
    assert!(r.stdout.contains("default-rc=125"), "{}", r.describe());
    assert!(
        r.stderr.contains("requires user_namespace"),
        "{}",
        r.describe()
    );
    let inner_json: serde_json::Value =
        serde_json::from_str(r.stdout.lines().next().unwrap()).unwrap();
    let enforced = &inner_json["enforced"];
    assert_eq!(enforced["user_namespace"], false);
    assert_eq!(enforced["workspace"], "copy");
    assert_eq!(enforced["landlock_filesystem"], true);
    assert_eq!(enforced["seccomp"], true);
    assert_eq!(enforced["process_tree_kill"], "process_group");
    assert_eq!(
        inner_json["changes"]["added"],
        serde_json::json!(["inner.txt"])
    );
    let inner_err = inner_json["stderr"].as_str().unwrap();
    assert!(
        inner_err.contains("/etc/shadow: Permission denied"),
        "{inner_err}"
    );
    assert!(
        inner_err.contains("Operation not permitted"),
        "IP sockets must be refused: {inner_err}"
    );
    // The inner run worked on a copy of the outer workspace: the outer one saw no change.
    assert!(r.changed("added").is_empty(), "{}", r.describe());
    t.assert_unchanged();
}

#[test]
fn a_required_protection_the_kernel_cannot_give_refuses_the_run() {
    if !sandbox_ready() {
        return;
    }
    // Inside an outer sandbox there is no cgroup to make; a policy requiring cgroup limits
    // must refuse instead of running weaker.
    let t = Template::new();
    let dir = tempfile::tempdir().unwrap();
    let outer = nested_policy(dir.path());
    let strictest =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/strict.toml"))
            .unwrap()
            .replace(
                "best_effort = [\"overlay_workspace\", \"cgroup_limits\"]",
                "best_effort = [\"overlay_workspace\"]",
            )
            .replace(
                "\"workspace_size_limit\"]",
                "\"workspace_size_limit\", \"cgroup_limits\"]",
            );
    fs::write(t.path().join("cg.toml"), &strictest).unwrap();
    let inner = format!(
        "{} exec --workspace /workspace --policy /workspace/cg.toml -- true; echo rc=$?",
        common::envcraft().display()
    );
    let r = exec_json(t.path(), Some(&outer), &[], &["sh", "-c", &inner]);
    r.assert_ran();
    assert!(r.stdout.contains("rc=125"), "{}", r.describe());
    assert!(r.stderr.contains("cgroup_limits"), "{}", r.describe());
}

#[test]
fn doctor_says_what_this_machine_enforces_and_which_policies_run() {
    if !sandbox_ready() {
        return;
    }
    let (code, out, err) = envcraft_plain(&["doctor", "--json"]);
    let report: serde_json::Value =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out} {err}"));
    for key in [
        "kernel",
        "landlock_abi",
        "user_namespaces",
        "overlay_in_user_namespace",
        "seccomp",
        "cgroup_limits",
        "policies",
    ] {
        assert!(report.get(key).is_some(), "missing {key}: {report}");
    }
    let names: Vec<&str> = report["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "strict", "verifier", "portable"]);
    let default_runs = report["policies"][0]["can_run"].as_bool().unwrap();
    assert_eq!(code, if default_runs { 0 } else { 1 });
    if report["user_namespaces"] != true || report["landlock_abi"].as_i64().unwrap_or(0) < 1 {
        common::skip(
            "this machine lacks user namespaces or Landlock: doctor's verdict cannot be checked against a run",
        );
        return;
    }
    assert!(default_runs, "{report}");
    let (code, text, _) = envcraft_plain(&["doctor"]);
    assert_eq!(code, 0);
    assert!(
        text.contains("landlock") && text.contains("default"),
        "{text}"
    );
}

#[test]
fn the_clock_shim_freezes_the_wall_clock_of_programs_in_the_sandbox() {
    if !sandbox_ready() {
        return;
    }
    // A policy that turns the shim on for every command: 2023-11-13T12:00:00Z, a Monday.
    let t = Template::new();
    let dir = tempfile::tempdir().unwrap();
    let text = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/default.toml"))
        .unwrap()
        .replace(
            "pass = []",
            "pass = []\nset = { ENVCRAFT_NOW = \"1699876800\", LD_PRELOAD = \"/.envcraft/libenvcraft_clock.so\" }",
        );
    let policy = dir.path().join("clock.toml");
    fs::write(&policy, text).unwrap();
    let r = exec_json(
        t.path(),
        Some(policy.to_str().unwrap()),
        &[],
        &[
            "sh",
            "-c",
            "date -u +%A; python3 -c 'import time, datetime; print(int(time.time())); print(datetime.datetime.now(datetime.timezone.utc).date())'",
        ],
    );
    r.assert_ran();
    assert_eq!(
        r.stdout,
        "Monday\n1699876800\n2023-11-13\n",
        "{}",
        r.describe()
    );
    assert_eq!(
        r.stderr,
        "",
        "the loader must find the shim: {}",
        r.describe()
    );
}

#[test]
fn a_hard_descriptor_limit_below_the_policys_failed_every_sandbox_setup() {
    if !sandbox_ready() {
        return;
    }
    // envcraft started under a hard limit of 512 open files, the policy asking for 1,024: the
    // command gets the limit in force (stricter), not a setup that fails with EPERM.
    let out = Command::new("bash")
        .arg(common::contained().unwrap())
        .arg("prlimit")
        .arg("--nofile=512:512")
        .arg(common::envcraft())
        .args(["exec", "--workspace"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("workspaces/hello"))
        .args(["--", "sh", "-c", "ulimit -n; ulimit -Hn"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "512\n512\n");
}
