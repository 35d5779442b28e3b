//! The pages as a whole, from kept directories made here: nothing of the run becomes markup,
//! what is large is cut with a note, links are relative to the page.

#![allow(clippy::unwrap_used)]

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::json;

use super::*;

const PAYLOAD: &str = "</pre><script>alert(1)</script><img src=x onerror=alert(2)>";

/// A kept run: a transcript with one call whose arguments and result hold `result`, a change
/// list, and the files given as (path under the kept dir, bytes).
fn kept_run(
    result: &str,
    files: &[(&str, &[u8])],
    changes: serde_json::Value,
) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let lines = [
        json!({"type": "session", "version": 3}),
        json!({"type": "message", "message": {"role": "user", "content": [{"type": "text", "text": PAYLOAD}]}}),
        json!({"type": "message", "message": {"role": "assistant", "content": [
            {"type": "text", "text": PAYLOAD},
            {"type": "toolCall", "id": "c0", "name": PAYLOAD, "arguments": {"path": PAYLOAD}}]}}),
        json!({"type": "message", "message": {"role": "toolResult", "toolCallId": "c0",
            "content": [{"type": "text", "text": result}]}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    fs::write(dir.path().join("transcript.jsonl"), text).unwrap();
    fs::write(dir.path().join("changes.json"), changes.to_string()).unwrap();
    let report = json!({"task": PAYLOAD, "reward": 0.5, "passed": false, "call_us": [1234],
        "checks": [{"name": PAYLOAD, "kind": "file", "path": "x", "passed": false,
                    "expected": PAYLOAD, "actual": "absent", "diff": PAYLOAD}]});
    fs::write(dir.path().join("report.json"), report.to_string()).unwrap();
    for (path, bytes) in files {
        let p = dir.path().join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, bytes).unwrap();
    }
    dir
}

#[test]
fn nothing_of_a_run_becomes_markup() {
    let changes = json!({"added": ["<b>x</b>", "bin"], "modified": ["m.txt"], "deleted": []});
    let dir = kept_run(
        &json!({"ok": true, "content": format!("a\n{PAYLOAD}\n")}).to_string(),
        &[
            ("files/<b>x</b>", PAYLOAD.as_bytes()),
            ("files/bin", b"\x00\xff\x01"),
            ("base/m.txt", b"one\ntwo\n"),
            ("files/m.txt", format!("one\n{PAYLOAD}\n").as_bytes()),
        ],
        changes,
    );
    let page = kept_page(dir.path()).unwrap();
    assert!(!page.contains("<script"), "a script element");
    assert!(!page.contains("<img"), "an image element");
    assert!(!page.contains("<b>"));
    let shown = html::text(PAYLOAD);
    // Prompt, reply, tool name (twice), arguments, result, title, heading, check (name,
    // expected, diff), the added file and the modified one.
    assert!(page.matches(shown.as_str()).count() >= 12, "{page}");
    assert!(page.contains(&format!("<span class=\"add\">+{shown}</span>")));
    assert!(page.contains("<span class=\"del\">-two</span>"));
    assert!(page.contains("binary or not UTF-8: file, 3 B"));
    assert!(page.contains("1.23 ms"), "the call's time from call_us");
}

#[test]
fn large_results_and_files_are_cut_with_a_note() {
    let big = "x".repeat(session::CALL_BYTES * 3);
    let long: String = (0..2000).map(|i| format!("line {i}\n")).collect();
    let many: Vec<String> = (0..changes::PATHS + 7).map(|i| format!("f{i}")).collect();
    let mut files: Vec<(String, Vec<u8>)> = vec![("files/f0".into(), long.clone().into_bytes())];
    files.push(("files/huge".into(), vec![b'y'; changes::FILE_BYTES * 2]));
    let mut added = many.clone();
    added.insert(0, "huge".into());
    let refs: Vec<(&str, &[u8])> = files
        .iter()
        .map(|(p, b)| (p.as_str(), b.as_slice()))
        .collect();
    let dir = kept_run(
        &json!({"ok": true, "stdout": big}).to_string(),
        &refs,
        json!({"added": added, "modified": [], "deleted": []}),
    );
    let page = kept_page(dir.path()).unwrap();
    assert!(page.contains("more bytes not shown"));
    assert!(
        page.len() < 2 << 20,
        "the page is bounded: {} bytes",
        page.len()
    );
    assert!(page.contains(&format!("… diff cut at {} lines", changes::FILE_LINES)));
    assert!(page.contains("… only the first 256.0 KiB of the file compared"));
    assert!(page.contains("… 8 more changed paths not shown"));
}

#[test]
fn a_kept_link_is_named_and_never_read() {
    let dir = kept_run(
        "{}",
        &[],
        json!({"added": ["l"], "modified": [], "deleted": []}),
    );
    fs::create_dir_all(dir.path().join("files")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.path().join("files/l")).unwrap();
    let page = kept_page(dir.path()).unwrap();
    assert!(page.contains("symbolic link to /etc/passwd"));
    assert!(!page.contains("root:x:0:0"));
}

#[test]
fn a_suites_links_are_relative_to_the_page_and_cannot_be_scripts() {
    let report = json!({
        "agent": "reference",
        "kept": "/runs",
        "totals": {"tasks": 2, "passed": 1},
        "tasks": [
            {"task": "e/a", "env": "e", "reward": 1.0, "passed": true, "kept": "e/a"},
            {"task": "e/javascript:alert(1)", "env": "e", "reward": 0.0, "passed": false,
             "kept": "javascript:alert(1)", "failed_checks": [PAYLOAD]},
            {"task": "e/c", "env": "e", "reward": null, "passed": false, "error": PAYLOAD},
        ]
    });
    let page = suite_page(
        &report,
        Some(Path::new("/runs")),
        Some(&PathBuf::from("/out")),
    );
    assert!(page.contains("<a href=\"./../runs/e/a/view.html\">e/a</a>"));
    assert!(page.contains("href=\"./../runs/javascript%3Aalert%281%29/view.html\""));
    assert!(page.contains("<a href=\"#task-e.2fc\">e/c</a>"));
    assert!(page.contains("id=\"task-e.2fc\""));
    assert!(!page.contains("<script"));
    assert!(
        page.contains("data-passed=\"none\""),
        "no reward is neither pass nor fail"
    );
}

#[test]
fn a_relative_link_climbs_out_of_the_pages_directory() {
    assert_eq!(
        relative(Path::new("/a/b/out"), Path::new("/a/b/kept/e/t/view.html")),
        PathBuf::from("../kept/e/t/view.html")
    );
    assert_eq!(
        relative(Path::new("/a"), Path::new("/a/x.html")),
        PathBuf::from("x.html")
    );
    assert_eq!(absolute(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
}

#[test]
fn a_directory_that_is_no_run_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(kept_page(dir.path()), Err(ViewError::NotARun(_))));
    fs::write(dir.path().join("report.json"), "{").unwrap();
    assert!(matches!(kept_page(dir.path()), Err(ViewError::Json { .. })));
}

#[test]
fn a_run_json_file_is_shown_from_its_actions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    let report = json!({
        "task": "e/t", "reward": 1.0, "passed": true, "checks": [],
        "changes": {"added": ["a.txt"], "modified": [], "deleted": []},
        "actions": [
            {"tool": "write", "args": {"path": "a.txt", "content": PAYLOAD}, "result": {"ok": true}, "duration_us": 40},
            {"next_turn": "again"},
            {"tool": "exec", "args": {"command": "false"}, "result": {"ok": false}, "duration_us": 9},
        ]
    });
    fs::write(&path, report.to_string()).unwrap();
    let page = render(&path, None).unwrap();
    assert!(page.contains("id=\"call-1\" data-tool=\"write\""));
    assert!(page.contains("class=\"call failed\" id=\"call-2\" data-tool=\"exec\""));
    assert!(page.contains("2 turns, 2 tool calls"));
    assert!(page.contains("a.txt"));
    assert!(!page.contains("<script"));
    fs::write(&path, json!({"tasks": 1}).to_string()).unwrap();
    assert!(matches!(render(&path, None), Err(ViewError::NotARun(_))));
}
