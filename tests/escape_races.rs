//! Swap races against the host-side walks not raced elsewhere (`escape_host_copies` races
//! `run --keep`, the grader's staging, a fork's copy and `:diff` as root): the manifest
//! verifier's walk, the final change list of a run, `exec --keep-changes` over a tree left
//! mid-swap, and `run --keep`, the grader's staging and a fork with envcraft run as `nobody`.
//! The agent's background loop exchanges a directory with a symlink to a host directory
//! (`renameat2(RENAME_EXCHANGE)`) while the host walks; each test asserts that no host file is
//! read into a result, a reward or a copy, and that the host directory is untouched. Every run
//! goes through `contained`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod escape_support;

use std::fs;
use std::time::Duration;

use serde_json::{Value, json};

use common::{Exec, RunAs, Template};
use escape_support::*;

/// The manifest expects the host directory's secret under both names the swap gives it: a walk
/// that followed the link (the directory's name now a link, or the link's now a directory)
/// would hash the host file and pass the check.
fn secret_manifest(tasks: &Tasks, host: &common::HostDir) {
    let digest = sha256(format!("{}\n", host.secret()).as_bytes());
    tasks.manifest(
        "secret",
        &json!({"d/secret.txt": {"sha256": digest}, "l/secret.txt": {"sha256": digest}}),
    );
}

fn manifest_verifier_race(who: RunAs) {
    if !ready(who) {
        return;
    }
    let tasks = Tasks::new(None);
    let host = host_dir();
    secret_manifest(&tasks, &host);
    for round in 0..ROUNDS {
        let calls = start_swapper(SWAP_DIR_WITH_LINK, &host.p());
        let ran = run_task(&tasks, "secret", &calls, &[], who, Duration::from_secs(60));
        assert_host_clean(&host, &ran);
        assert_eq!(ran.code, Some(0), "round {round}: {}", ran.describe());
        let report = ran.report();
        for check in report["checks"].as_array().unwrap() {
            assert_eq!(
                check["passed"],
                json!(false),
                "round {round}: the verifier hashed a host file through the link: {check}"
            );
        }
        assert_eq!(report["reward"], json!(0.0), "round {round}: {report}");
    }
}

#[test]
fn the_manifest_verifier_never_hashes_a_host_file_through_a_directory_swapped_with_a_link() {
    manifest_verifier_race(RunAs::Caller);
}

#[test]
fn the_manifest_verifier_never_hashes_a_host_file_through_a_swapped_link_as_nobody() {
    manifest_verifier_race(RunAs::Nobody);
}

/// Every name of a change list, as one list.
fn listed(changes: &Value) -> Vec<String> {
    ["added", "modified", "deleted", "incomplete"]
        .iter()
        .flat_map(|k| changes[k].as_array().cloned().unwrap_or_default())
        .map(|v| v.as_str().unwrap_or_default().to_string())
        .collect()
}

fn change_list_race(who: RunAs) {
    if !ready(who) {
        return;
    }
    let tasks = Tasks::new(None);
    let host = host_dir();
    for round in 0..ROUNDS {
        let calls = start_swapper(SWAP_DIR_WITH_LINK, &host.p());
        let ran = run_task(
            &tasks,
            "manifest",
            &calls,
            &[],
            who,
            Duration::from_secs(60),
        );
        assert_host_clean(&host, &ran);
        assert_eq!(ran.code, Some(0), "round {round}: {}", ran.describe());
        let names = listed(&ran.report()["changes"]);
        // Below `d` or `l` the agent made only f*, g* and inner/; host names mean the walk
        // went through the link into the host directory.
        let host_names: Vec<&String> = names
            .iter()
            .filter(|n| {
                n.contains("secret.txt") || n.contains("marker.txt") || n.contains("root-only")
            })
            .collect();
        assert!(
            host_names.is_empty(),
            "round {round}: the change list names host files: {host_names:?}"
        );
        assert!(
            names.iter().any(|n| n == "swap.py"),
            "round {round}: the change list is incomplete: {names:?}"
        );
    }
}

#[test]
fn the_final_change_list_never_names_host_files_through_a_directory_swapped_with_a_link() {
    change_list_race(RunAs::Caller);
}

#[test]
fn the_final_change_list_never_names_host_files_through_a_swapped_link_as_nobody() {
    change_list_race(RunAs::Nobody);
}

/// The swap loop ends at a moment of its own choosing (`timeout` with a different bound per
/// round), so `d` is left a directory or a link to the host directory; `--keep-changes` copies
/// what is left, and must copy a link as a link.
fn keep_changes_mid_swap(who: RunAs) {
    if !ready(who) {
        return;
    }
    let host = host_dir();
    let template = Template::for_user(who);
    for round in 0..ROUNDS * 2 {
        let out = dir_for(who);
        let keep = out.path().join("kept");
        let script = format!(
            "cat > swap.py <<'EOF'\n{SWAP_DIR_WITH_LINK}\nEOF\n\
             timeout -s KILL 0.{} python3 swap.py {} ; echo SWAPPED",
            3 + round,
            host.p()
        );
        let outcome = Exec::new(template.path())
            .run_as(who)
            .args(&["--keep-changes", keep.to_str().unwrap()])
            .run(&["sh", "-c", &script]);
        assert!(
            outcome.stdout.contains("SWAPPED"),
            "round {round}: {}",
            outcome.describe()
        );
        let planted = setid_files(host.path());
        assert!(
            planted.is_empty(),
            "round {round}: set-id files on the host: {planted:?}"
        );
        host.assert_unchanged();
        template.assert_unchanged();
        let setid = setid_files(&keep);
        assert!(
            setid.is_empty(),
            "round {round}: kept set-id files: {setid:?}"
        );
        for item in walkdir::WalkDir::new(&keep).follow_links(false) {
            let item = item.unwrap();
            if item.file_type().is_file() {
                let text = fs::read_to_string(item.path()).unwrap_or_default();
                assert!(
                    !text.contains(host.secret()) && !text.contains("ROOT-ONLY-SECRET"),
                    "round {round}: a host file was copied into {}",
                    item.path().display()
                );
            }
        }
    }
}

#[test]
fn exec_keep_changes_never_copies_a_host_file_through_a_link_left_mid_swap() {
    keep_changes_mid_swap(RunAs::Caller);
}

#[test]
fn exec_keep_changes_never_copies_a_host_file_through_a_link_left_mid_swap_as_nobody() {
    keep_changes_mid_swap(RunAs::Nobody);
}

#[test]
fn run_keep_never_writes_through_a_directory_swapped_with_a_host_link_as_nobody() {
    let who = RunAs::Nobody;
    if !ready(who) {
        return;
    }
    let tasks = Tasks::new(None);
    let host = host_dir();
    for round in 0..ROUNDS {
        let out = dir_for(who);
        let keep = out.path().join("kept");
        let calls = start_swapper(SWAP_DIR_WITH_LINK, &host.p());
        let ran = run_task(
            &tasks,
            "manifest",
            &calls,
            &["--keep", keep.to_str().unwrap()],
            who,
            Duration::from_secs(60),
        );
        assert_host_clean(&host, &ran);
        assert_eq!(ran.code, Some(0), "round {round}: {}", ran.describe());
        let setid = setid_files(&keep);
        assert!(
            setid.is_empty(),
            "round {round}: kept set-id files: {setid:?}"
        );
        let kept = fs::read_to_string(keep.join("changes.json")).unwrap_or_default();
        assert!(!kept.contains("ROOT-ONLY-SECRET") && !kept.contains(host.secret()));
    }
}

#[test]
fn the_graders_staging_copy_never_reads_a_host_file_through_a_swapped_link_as_nobody() {
    let who = RunAs::Nobody;
    if !ready(who) {
        return;
    }
    let tasks = Tasks::new(None);
    let host = host_dir();
    // The grader scores 1.0 only if the host secret never shows in its view of the workspace
    // (its own directory, which names the secret, left out; links not followed).
    let check = format!(
        "import os\nfound = False\nfor top, dirs, files in os.walk('/workspace', followlinks=False):\n\
         \x20   dirs[:] = [d for d in dirs if os.path.join(top, d) != '/workspace/grader']\n\
         \x20   for f in files:\n\
         \x20       p = os.path.join(top, f)\n\
         \x20       if os.path.islink(p) or not os.path.isfile(p):\n\
         \x20           continue\n\
         \x20       found |= '{}' in open(p, errors='replace').read()\n\
         print(0.0 if found else 1.0)\n",
        host.secret()
    );
    tasks.graded("graded", "python3 grader/check.py", &[("check.py", &check)]);
    for round in 0..ROUNDS {
        let calls = start_swapper(SWAP_DIR_WITH_LINK, &host.p());
        let ran = run_task(&tasks, "graded", &calls, &[], who, Duration::from_secs(60));
        assert_host_clean(&host, &ran);
        assert_eq!(ran.code, Some(0), "round {round}: {}", ran.describe());
        let report = ran.report();
        assert_eq!(report["reward"], json!(1.0), "round {round}: {report}");
    }
}

#[test]
fn a_fork_never_reads_a_host_file_through_a_directory_swapped_with_a_host_link_as_nobody() {
    let who = RunAs::Nobody;
    if !ready(who) {
        return;
    }
    let tasks = Tasks::new(None);
    let host = host_dir();
    let mut input = String::new();
    for line in start_swapper(SWAP_DIR_WITH_LINK, &host.p()) {
        input.push_str(&format!("{line}\n"));
    }
    for _ in 0..ROUNDS {
        input.push_str(":fork\n");
        let look = "cat d/* d/inner/* l/* 2>/dev/null; grep -r ECTEST-SECRET . ; echo LOOKED";
        input.push_str(&format!("{}\n:use 0\n", exec(look)));
    }
    input.push_str(":quit\n");
    let ran = shell(&tasks, &input, who, Duration::from_secs(90));
    assert_host_clean(&host, &ran);
    assert_eq!(ran.code, Some(0), "{}", ran.describe());
    assert_eq!(
        ran.stdout.matches("LOOKED").count(),
        ROUNDS,
        "not every fork answered:\n{}",
        ran.describe()
    );
    assert!(
        !ran.stdout.contains(host.secret()) && !ran.stdout.contains("ROOT-ONLY-SECRET"),
        "a host file reached the fork:\n{}",
        ran.describe()
    );
}
