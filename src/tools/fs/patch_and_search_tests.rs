//! `apply_patch`, `ls`, `glob`, `grep`, FIFOs and sockets, and a read-only workspace.

use super::*;

#[test]
fn apply_patch_unified_multi_file() {
    let f = fixture();
    f.put("a.txt", "1\n2\n3\n");
    f.put("gone.txt", "bye\n");
    let patch = "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n 1\n-2\n+two\n 3\n\
                 --- /dev/null\n+++ b/new/dir/n.txt\n@@ -0,0 +1,2 @@\n+x\n+y\n\
                 --- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n";
    let r = f.ok("apply_patch", json!({"patch": patch}));
    assert_eq!(r["modified"], json!(["a.txt"]));
    assert_eq!(r["added"], json!(["new/dir/n.txt"]));
    assert_eq!(r["deleted"], json!(["gone.txt"]));
    for p in ["a.txt", "new/dir/n.txt", "new/dir", "new", ""] {
        assert_mtime_is_now(&f.ws().join(p));
    }
    assert_eq!(f.get("a.txt"), "1\ntwo\n3\n");
    assert_eq!(f.get("new/dir/n.txt"), "x\ny\n");
    assert!(!f.ws().join("gone.txt").exists());
    f.assert_no_temp_files();
}

#[test]
fn apply_patch_failing_hunk_changes_nothing() {
    let f = fixture();
    f.put("first.txt", "a\nb\n");
    f.put("second.txt", "c\nd\n");
    let before = std::fs::metadata(f.ws().join("first.txt")).unwrap();
    let patch = "--- a/first.txt\n+++ b/first.txt\n@@ -1,2 +1,2 @@\n-a\n+A\n b\n\
                 --- /dev/null\n+++ b/created/new.txt\n@@ -0,0 +1 @@\n+n\n\
                 --- a/second.txt\n+++ b/second.txt\n@@ -1,2 +1,2 @@\n c\n-NOT THERE\n+D\n";
    let e = f.err("apply_patch", json!({"patch": patch}));
    assert_eq!(e.category, ErrorCategory::NotFound);
    assert!(e.message.contains("`second.txt`") && e.message.contains("hunk 1"));
    assert_eq!(f.get("first.txt"), "a\nb\n");
    let after = std::fs::metadata(f.ws().join("first.txt")).unwrap();
    assert_eq!(
        (before.mtime(), before.mtime_nsec(), before.ino()),
        (after.mtime(), after.mtime_nsec(), after.ino())
    );
    assert!(!f.ws().join("created").exists());
    f.assert_no_temp_files();
}

#[test]
fn apply_patch_second_hunk_of_one_file_fails() {
    let f = fixture();
    f.put("one.txt", "a\nb\nc\nd\n");
    let patch = "--- a/one.txt\n+++ b/one.txt\n@@ -1 +1 @@\n-a\n+A\n@@ -4 +4 @@\n-zzz\n+Z\n";
    let e = f.err("apply_patch", json!({"patch": patch}));
    assert_eq!(e.category, ErrorCategory::NotFound);
    assert!(e.message.contains("hunk 2"), "{}", e.message);
    assert_eq!(f.get("one.txt"), "a\nb\nc\nd\n");
}

#[test]
fn apply_patch_begin_patch_format_with_input_alias() {
    let f = fixture();
    f.put("src/app.py", "def main():\n    return 1\n");
    f.put("old.txt", "x\n");
    let patch = "*** Begin Patch\n*** Add File: docs/new.md\n+# New\n\
                 *** Update File: src/app.py\n*** Move to: src/main.py\n@@ def main():\n-    return 1\n+    return 0\n\
                 *** Delete File: old.txt\n*** End Patch\n";
    let r = f.ok("apply_patch", json!({"input": patch}));
    assert_eq!(r["added"], json!(["docs/new.md", "src/main.py"]));
    assert_eq!(r["deleted"], json!(["old.txt", "src/app.py"]));
    assert_eq!(f.get("docs/new.md"), "# New\n");
    assert_eq!(f.get("src/main.py"), "def main():\n    return 0\n");
    assert!(!f.ws().join("src/app.py").exists() && !f.ws().join("old.txt").exists());
}

#[test]
fn apply_patch_refusals() {
    let f = fixture();
    f.put("exists.txt", "x\n");
    let add = "--- /dev/null\n+++ b/exists.txt\n@@ -0,0 +1 @@\n+y\n";
    let e = f.err("apply_patch", json!({"patch": add}));
    assert_eq!(e.category, ErrorCategory::InvalidArgument);
    assert!(e.message.contains("already exists"));
    let upd = "--- a/missing.txt\n+++ b/missing.txt\n@@ -1 +1 @@\n-a\n+b\n";
    let e = f.err("apply_patch", json!({"patch": upd}));
    assert_eq!(e.category, ErrorCategory::NotFound);
    assert!(e.message.contains("`missing.txt`"));
    let e = f.err("apply_patch", json!({"patch": "not a patch"}));
    assert_eq!(e.category, ErrorCategory::InvalidArgument);
    let e = f.err("apply_patch", json!({}));
    assert_eq!(e.category, ErrorCategory::MissingField);
    assert!(e.message.contains("`patch`"));
    let del = "--- a/exists.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-other\n";
    let e = f.err("apply_patch", json!({"patch": del}));
    assert_eq!(e.category, ErrorCategory::NotFound);
    assert_eq!(f.get("exists.txt"), "x\n");
    f.assert_no_temp_files();
}

#[test]
fn apply_patch_keeps_mode_and_sees_its_own_earlier_changes() {
    let f = fixture();
    f.put("s.sh", "echo 1\n");
    std::fs::set_permissions(f.ws().join("s.sh"), std::fs::Permissions::from_mode(0o750)).unwrap();
    let patch = "--- a/s.sh\n+++ b/s.sh\n@@ -1 +1 @@\n-echo 1\n+echo 2\n\
                 --- a/s.sh\n+++ b/s.sh\n@@ -1 +1 @@\n-echo 2\n+echo 3\n";
    let r = f.ok("apply_patch", json!({"patch": patch}));
    assert_eq!(r["modified"], json!(["s.sh"]));
    assert_eq!(f.get("s.sh"), "echo 3\n");
    let m = std::fs::metadata(f.ws().join("s.sh")).unwrap();
    assert_eq!(m.permissions().mode() & 0o777, 0o750);
}

// --- ls, glob, grep -----------------------------------------------------------------------

#[test]
fn ls_lists_sorted_entries_with_types() {
    let f = fixture();
    f.put("b.txt", "12345");
    f.put("a/x", "");
    symlink("b.txt", f.ws().join("c")).unwrap();
    let r = f.ok("ls", json!({}));
    assert_eq!(r["path"], ".");
    assert_eq!(
        r["entries"],
        json!([{"name": "a", "type": "dir"},
               {"name": "b.txt", "type": "file", "size": 5},
               {"name": "c", "type": "symlink"}])
    );
    let r = f.ok("ls", json!({"path": "/workspace/a"}));
    assert_eq!(
        r["entries"],
        json!([{"name": "x", "type": "file", "size": 0}])
    );
    let e = f.err("ls", json!({"path": "b.txt"}));
    assert_eq!(e.category, ErrorCategory::InvalidArgument);
    let e = f.err("ls", json!({"path": "nope"}));
    assert_eq!(e.category, ErrorCategory::NotFound);
}

#[test]
fn glob_returns_sorted_relative_paths() {
    let f = fixture();
    for p in [
        "z.txt",
        "a.txt",
        "sub/b.txt",
        "sub/deeper/c.txt",
        "sub/d.md",
    ] {
        f.put(p, "");
    }
    let r = f.ok("glob", json!({"pattern": "**/*.txt"}));
    assert_eq!(
        r["matches"],
        json!(["a.txt", "sub/b.txt", "sub/deeper/c.txt", "z.txt"])
    );
    assert_eq!(r["count"], 4);
    let r = f.ok("glob", json!({"pattern": "*.txt"}));
    assert_eq!(r["matches"], json!(["a.txt", "z.txt"]));
    let r = f.ok("glob", json!({"pattern": "/workspace/sub/*"}));
    assert_eq!(r["matches"], json!(["sub/b.txt", "sub/d.md", "sub/deeper"]));
    let r = f.ok("glob", json!({"pattern": "*.{md,txt}", "path": "sub"}));
    assert_eq!(r["matches"], json!(["sub/b.txt", "sub/d.md"]));
    let r = f.ok("glob", json!({"pattern": "sub/d.md"}));
    assert_eq!(r["matches"], json!(["sub/d.md"]));
    let r = f.ok("glob", json!({"pattern": "nothing/**/*.rs"}));
    assert_eq!(r["matches"], json!([]));
    let e = f.err("glob", json!({"pattern": "[unclosed"}));
    assert_eq!(e.category, ErrorCategory::InvalidArgument);
    let e = f.err("glob", json!({}));
    assert_eq!(e.category, ErrorCategory::MissingField);
}

#[test]
fn grep_returns_sorted_path_line_text() {
    let f = fixture();
    f.put("b.txt", "nothing\nneedle two\n");
    f.put("a/z.py", "needle one\nNEEDLE caps\n");
    f.put("a/y.txt", "x\r\nneedle crlf\r\n");
    f.put(".git/objects/x", "needle in git\n");
    std::fs::write(f.ws().join("bin"), b"needle\0").unwrap();
    let r = f.ok("grep", json!({"pattern": "needle"}));
    assert_eq!(
        r["matches"],
        json!([
            "a/y.txt:2:needle crlf",
            "a/z.py:1:needle one",
            "b.txt:2:needle two"
        ])
    );
    assert_eq!(r["truncated"], false);
    let r = f.ok(
        "grep",
        json!({"pattern": "needle", "glob": "*.py", "ignore_case": true}),
    );
    assert_eq!(
        r["matches"],
        json!(["a/z.py:1:needle one", "a/z.py:2:NEEDLE caps"])
    );
    let r = f.ok("grep", json!({"pattern": "needle", "glob": "a/*.txt"}));
    assert_eq!(r["matches"], json!(["a/y.txt:2:needle crlf"]));
    let r = f.ok("grep", json!({"pattern": "ne+dle", "path": "b.txt"}));
    assert_eq!(r["matches"], json!(["b.txt:2:needle two"]));
    let r = f.ok("grep", json!({"pattern": "needle", "limit": 1}));
    assert_eq!(r["matches"], json!(["a/y.txt:2:needle crlf"]));
    assert_eq!(r["truncated"], true);
    File::create(f.ws().join("huge.txt"))
        .unwrap()
        .set_len(MAX_FILE_BYTES + 1)
        .unwrap();
    let r = f.ok("grep", json!({"pattern": "absent"}));
    assert_eq!(r["matches"], json!([]));
    let e = f.err("grep", json!({"pattern": "("}));
    assert_eq!(e.category, ErrorCategory::InvalidArgument);
    let e = f.err("grep", json!({"pattern": "x", "path": "nope"}));
    assert_eq!(e.category, ErrorCategory::NotFound);
    let e = f.err("grep", json!({}));
    assert_eq!(e.category, ErrorCategory::MissingField);
}

#[test]
fn ls_caps_its_listing() {
    let f = fixture();
    for n in 0..LS_MAX_ENTRIES + 5 {
        std::fs::write(f.ws().join(format!("f{n:05}")), "").unwrap();
    }
    let r = f.ok("ls", json!({}));
    assert_eq!(r["entries"].as_array().unwrap().len(), LS_MAX_ENTRIES);
    assert_eq!(r["entries"][0]["name"], "f00000");
    assert_eq!(r["total"], LS_MAX_ENTRIES + 5);
    assert_eq!(r["truncated"], true);
}

#[test]
fn fifos_and_sockets_never_block_a_tool() {
    let f = fixture();
    nix::unistd::mkfifo(&f.ws().join("fifo"), Mode::from_bits_truncate(0o644)).unwrap();
    let _listener = std::os::unix::net::UnixListener::bind(f.ws().join("sock")).unwrap();
    for p in ["fifo", "sock"] {
        let e = f.err("read", json!({"path": p}));
        assert_eq!(e.category, ErrorCategory::InvalidArgument, "{p}");
        let e = f.err(
            "edit",
            json!({"path": p, "old_string": "a", "new_string": "b"}),
        );
        assert_eq!(e.category, ErrorCategory::InvalidArgument, "{p}");
        let e = f.err("write", json!({"path": p, "content": "x"}));
        assert_eq!(e.category, ErrorCategory::InvalidArgument, "{p}");
        let patch = format!("--- a/{p}\n+++ b/{p}\n@@ -1 +1 @@\n-a\n+b\n");
        let e = f.err("apply_patch", json!({"patch": patch}));
        assert_eq!(e.category, ErrorCategory::InvalidArgument, "{p}");
        let e = f.err("grep", json!({"pattern": "x", "path": p}));
        assert_eq!(e.category, ErrorCategory::InvalidArgument, "{p}");
    }
    let r = f.ok("grep", json!({"pattern": "x"}));
    assert_eq!(r["matches"], json!([]));
    let r = f.ok("ls", json!({}));
    assert_eq!(r["entries"][0]["type"], "fifo");
    assert_eq!(r["entries"][1]["type"], "socket");
}

#[test]
fn reading_a_fifo_never_opens_it() {
    // A writer blocked opening the FIFO would be released by any open for reading (and then
    // get EPIPE): the tools look at the type first.
    let f = fixture();
    let fifo = f.ws().join("fifo");
    nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o644)).unwrap();
    let (opened, seen) = std::sync::mpsc::channel();
    let writer_path = fifo.clone();
    let writer = std::thread::spawn(move || {
        let file = std::fs::OpenOptions::new().write(true).open(&writer_path);
        let _ = opened.send(());
        file
    });
    for path in ["fifo", "./fifo", "/workspace/fifo"] {
        let e = f.err("read", json!({"path": path}));
        assert_eq!(e.category, ErrorCategory::InvalidArgument, "{path}");
    }
    assert!(
        seen.recv_timeout(Duration::from_millis(200)).is_err(),
        "read opened the FIFO"
    );
    // Release the writer.
    use std::os::unix::fs::OpenOptionsExt;
    let _reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    assert!(writer.join().unwrap().is_ok());
}

// --- read-only workspaces -----------------------------------------------------------------

#[test]
fn read_only_workspace_refuses_every_write_tool() {
    let f = fixture_with(false, None);
    f.put("a.txt", "a\n");
    let attempts = [
        ("write", json!({"path": "a.txt", "content": "x"})),
        ("write", json!({"path": "new.txt", "content": "x"})),
        (
            "edit",
            json!({"path": "a.txt", "old_string": "a", "new_string": "b"}),
        ),
        (
            "apply_patch",
            json!({"patch": "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+b\n"}),
        ),
    ];
    for (tool, args) in attempts {
        let e = f.err(tool, args);
        assert_eq!(e.category, ErrorCategory::Permission, "{tool}");
        assert!(e.message.contains("write permission"), "{}", e.message);
    }
    assert_eq!(f.get("a.txt"), "a\n");
    assert!(!f.ws().join("new.txt").exists());
    f.ok("read", json!({"path": "a.txt"}));
    f.ok("ls", json!({}));
    f.ok("glob", json!({"pattern": "*"}));
    f.ok("grep", json!({"pattern": "a"}));
}

// --- escapes ------------------------------------------------------------------------------
