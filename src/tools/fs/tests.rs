#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use crate::tools::fs::resolve::parse_path;
use crate::tools::fs::writing::timespec;
use crate::tools::read::{line_count, lines_window};
use crate::tools::{ErrorCategory, call as call_tool};
use crate::tools::{ToolError, ToolResult};
use nix::sys::stat::Mode;
use serde_json::Map;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::time::Duration;
use std::time::{SystemTime, UNIX_EPOCH};

const SENTINEL: &str = "SENTINEL-SECRET-7f3a\n";

#[test]
fn the_whole_file_shortcut_agrees_with_the_line_window() {
    let long = "line\n".repeat(40) + "end";
    for text in ["", "a", "a\n", "a\nb", "a\n\nb\n", "\n", "é\nü", &long] {
        let lines = line_count(text.as_bytes());
        assert_eq!(lines, text.split_inclusive('\n').count(), "{text:?}");
        let (out, end, cut) = lines_window(text, 0, READ_DEFAULT_LINES);
        assert_eq!((out.as_str(), end, cut), (text, lines, false));
    }
}

fn now() -> SystemTime {
    UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789)
}

/// A temp dir holding `ws/` (the workspace) and `outside/sentinel.txt` beside it.
struct Fixture {
    tmp: tempfile::TempDir,
    root: WorkspaceRoot,
}

fn fixture_with(writable: bool, owner: Option<(u32, u32)>) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("ws")).unwrap();
    std::fs::create_dir(tmp.path().join("outside")).unwrap();
    std::fs::write(tmp.path().join("outside/sentinel.txt"), SENTINEL).unwrap();
    let root = WorkspaceRoot::open(
        &tmp.path().join("ws"),
        "/workspace",
        vec![PathBuf::from("/root/.openclaw/workspace")],
        writable,
        owner,
    )
    .unwrap();
    Fixture { tmp, root }
}

fn fixture() -> Fixture {
    fixture_with(true, None)
}

impl Fixture {
    fn ws(&self) -> PathBuf {
        self.tmp.path().join("ws")
    }

    fn put(&self, rel: &str, content: &str) {
        let p = self.ws().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    fn get(&self, rel: &str) -> String {
        std::fs::read_to_string(self.ws().join(rel)).unwrap()
    }

    fn run(&self, tool: &str, args: Value) -> ToolResult {
        call_tool(&self.root, tool, &args, now())
    }

    fn ok(&self, tool: &str, args: Value) -> Map<String, Value> {
        match self.run(tool, args.clone()) {
            ToolResult::Ok(fields) => fields,
            ToolResult::Err(e) => panic!("{tool} {args}: {e}"),
        }
    }

    fn err(&self, tool: &str, args: Value) -> ToolError {
        match self.run(tool, args.clone()) {
            ToolResult::Ok(fields) => panic!("{tool} {args} succeeded: {fields:?}"),
            ToolResult::Err(e) => e,
        }
    }

    /// Every file under the temp dir outside the workspace: content and mtime.
    fn outside(&self) -> BTreeMap<PathBuf, (Vec<u8>, i64, i64)> {
        walkdir::WalkDir::new(self.tmp.path().join("outside"))
            .into_iter()
            .map(|e| e.unwrap())
            .map(|e| {
                let m = std::fs::symlink_metadata(e.path()).unwrap();
                let content = if m.is_file() {
                    std::fs::read(e.path()).unwrap()
                } else {
                    Vec::new()
                };
                (e.path().to_path_buf(), (content, m.mtime(), m.mtime_nsec()))
            })
            .collect()
    }

    /// No temporary file of ours is left anywhere in the workspace.
    fn assert_no_temp_files(&self) {
        for e in walkdir::WalkDir::new(self.ws()) {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy();
            assert!(!name.starts_with(".envcraft-"), "left behind: {name}");
        }
    }
}

fn assert_mtime_is_now(path: &Path) {
    let m = std::fs::symlink_metadata(path).unwrap();
    let want = now().duration_since(UNIX_EPOCH).unwrap();
    assert_eq!(
        (m.mtime(), m.mtime_nsec()),
        (want.as_secs() as i64, want.subsec_nanos() as i64),
        "mtime of {}",
        path.display()
    );
    assert_eq!(
        (m.atime(), m.atime_nsec()),
        (want.as_secs() as i64, want.subsec_nanos() as i64),
        "atime of {}",
        path.display()
    );
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

// --- read ---------------------------------------------------------------------------------

#[test]
fn read_whole_file_with_line_count() {
    let f = fixture();
    f.put("a.txt", "one\ntwo\nthree\n");
    let r = f.ok("read", json!({"path": "a.txt"}));
    assert_eq!(r["content"], "one\ntwo\nthree\n");
    assert_eq!(r["total_lines"], 3);
    assert_eq!(r["lines"], 3);
    assert_eq!(r["truncated"], false);
    assert_eq!(r["path"], "a.txt");
    assert!(r.get("next_offset").is_none());
}

#[test]
fn read_offset_and_limit() {
    let f = fixture();
    let text: String = (1..=10).map(|n| format!("line {n}\n")).collect();
    f.put("n.txt", &text);
    let r = f.ok("read", json!({"path": "n.txt", "offset": 3, "limit": 2}));
    assert_eq!(r["content"], "line 3\nline 4\n");
    assert_eq!(r["offset"], 3);
    assert_eq!(r["lines"], 2);
    assert_eq!(r["total_lines"], 10);
    assert_eq!(r["truncated"], true);
    assert_eq!(r["next_offset"], 5);
    let r = f.ok("read", json!({"path": "n.txt", "offset": 9}));
    assert_eq!(r["content"], "line 9\nline 10\n");
    assert_eq!(r["truncated"], false);
    let e = f.err("read", json!({"path": "n.txt", "offset": 11}));
    assert_eq!(e.category, ErrorCategory::InvalidArgument);
    assert!(e.message.contains("10 line"), "{}", e.message);
    let e = f.err("read", json!({"path": "n.txt", "offset": 0}));
    assert_eq!(e.category, ErrorCategory::InvalidArgument);
    let e = f.err("read", json!({"path": "n.txt", "limit": 0}));
    assert_eq!(e.category, ErrorCategory::InvalidArgument);
}

#[test]
fn read_caps_output_bytes_on_a_line_boundary() {
    let f = fixture();
    let line = "x".repeat(999) + "\n";
    f.put("big.txt", &line.repeat(300));
    let r = f.ok("read", json!({"path": "big.txt"}));
    let content = r["content"].as_str().unwrap();
    assert!(content.len() <= READ_MAX_OUTPUT_BYTES && content.ends_with('\n'));
    assert_eq!(r["truncated"], true);
    let lines = r["lines"].as_u64().unwrap();
    assert_eq!(r["next_offset"], lines + 1);
    assert_eq!(r["total_lines"], 300);
}

#[test]
fn read_empty_file() {
    let f = fixture();
    f.put("empty", "");
    let r = f.ok("read", json!({"path": "empty"}));
    assert_eq!(r["content"], "");
    assert_eq!(r["total_lines"], 0);
    assert_eq!(r["truncated"], false);
}

#[test]
fn read_refuses_binary_large_directories_and_fifos() {
    let f = fixture();
    std::fs::write(f.ws().join("bin"), b"ab\0cd").unwrap();
    let e = f.err("read", json!({"path": "bin"}));
    assert_eq!(e.category, ErrorCategory::InvalidArgument);
    assert!(e.message.contains("binary"));

    let big = File::create(f.ws().join("huge")).unwrap();
    big.set_len(MAX_FILE_BYTES + 1).unwrap();
    let e = f.err("read", json!({"path": "huge"}));
    assert_eq!(e.category, ErrorCategory::TooLarge);
    assert!(e.message.contains("`huge`"));

    std::fs::create_dir(f.ws().join("d")).unwrap();
    let e = f.err("read", json!({"path": "d"}));
    assert_eq!(e.category, ErrorCategory::InvalidArgument);
    assert!(e.message.contains("directory"));

    nix::unistd::mkfifo(&f.ws().join("fifo"), Mode::from_bits_truncate(0o644)).unwrap();
    let e = f.err("read", json!({"path": "fifo"}));
    assert_eq!(e.category, ErrorCategory::InvalidArgument);
    assert!(e.message.contains("regular"));
}

#[test]
fn read_missing_file_and_missing_field() {
    let f = fixture();
    let e = f.err("read", json!({"path": "nope.txt"}));
    assert_eq!(e.category, ErrorCategory::NotFound);
    assert!(e.message.contains("`nope.txt`"));
    let e = f.err("read", json!({}));
    assert_eq!(e.category, ErrorCategory::MissingField);
    assert!(e.message.contains("`path`"));
    let e = f.err("read", json!({"path": 3}));
    assert_eq!(e.category, ErrorCategory::InvalidArgument);
}

#[test]
fn read_path_aliases_and_mount_paths() {
    let f = fixture();
    f.put("sub/a.txt", "hello\n");
    for args in [
        json!({"file_path": "sub/a.txt"}),
        json!({"file": "sub/a.txt"}),
        json!({"path": "/workspace/sub/a.txt"}),
        json!({"path": "/root/.openclaw/workspace/sub/a.txt"}),
        json!({"path": "./sub/./a.txt"}),
        json!({"path": "sub/../sub/a.txt"}),
    ] {
        let r = f.ok("read", args);
        assert_eq!(r["content"], "hello\n");
    }
    let r = f.ok("read", json!({"path": "/workspace/sub/a.txt"}));
    assert_eq!(r["path"], "sub/a.txt");
}

#[test]
fn read_follows_relative_symlinks_inside_the_workspace() {
    let f = fixture();
    f.put("real/a.txt", "via link\n");
    symlink("real/a.txt", f.ws().join("file_link")).unwrap();
    symlink("real", f.ws().join("dir_link")).unwrap();
    symlink("../a.txt", f.ws().join("real/up_link")).unwrap();
    for p in ["file_link", "dir_link/a.txt", "real/up_link"] {
        if p == "real/up_link" {
            f.put("a.txt", "via link\n");
        }
        assert_eq!(f.ok("read", json!({"path": p}))["content"], "via link\n");
    }
    symlink("loop_b", f.ws().join("loop_a")).unwrap();
    symlink("loop_a", f.ws().join("loop_b")).unwrap();
    let e = f.err("read", json!({"path": "loop_a"}));
    assert_eq!(e.category, ErrorCategory::Permission);
}

// --- write --------------------------------------------------------------------------------

#[test]
fn write_creates_parents_and_sets_times() {
    let f = fixture();
    let r = f.ok(
        "write",
        json!({"path": "new/deep/er/f.txt", "content": "hi\n"}),
    );
    assert_eq!(r["created"], true);
    assert_eq!(r["bytes"], 3);
    assert_eq!(r["path"], "new/deep/er/f.txt");
    for p in ["new/deep/er/f.txt", "new/deep/er", "new/deep", "new", ""] {
        assert_mtime_is_now(&f.ws().join(p));
    }
    assert_eq!(f.get("new/deep/er/f.txt"), "hi\n");
    let mode = std::fs::metadata(f.ws().join("new/deep/er/f.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o644);
    f.assert_no_temp_files();
}

#[test]
fn write_overwrites_keeping_the_mode() {
    let f = fixture();
    f.put("run.sh", "old\n");
    std::fs::set_permissions(
        f.ws().join("run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let r = f.ok(
        "write",
        json!({"file_path": "run.sh", "content": "#!/bin/sh\n"}),
    );
    assert_eq!(r["created"], false);
    assert_mtime_is_now(&f.ws().join("run.sh"));
    assert_eq!(f.get("run.sh"), "#!/bin/sh\n");
    let m = std::fs::metadata(f.ws().join("run.sh")).unwrap();
    assert_eq!(m.permissions().mode() & 0o777, 0o755);
    f.ok("write", json!({"file": "alias.txt", "content": ""}));
    assert_eq!(f.get("alias.txt"), "");
    f.assert_no_temp_files();
}

#[test]
fn write_through_an_inner_symlink_keeps_the_link() {
    let f = fixture();
    f.put("real.txt", "old\n");
    symlink("real.txt", f.ws().join("link.txt")).unwrap();
    f.ok("write", json!({"path": "link.txt", "content": "new\n"}));
    assert_eq!(f.get("real.txt"), "new\n");
    assert!(
        std::fs::symlink_metadata(f.ws().join("link.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn write_failures() {
    let f = fixture();
    std::fs::create_dir(f.ws().join("d")).unwrap();
    let e = f.err("write", json!({"path": "d", "content": "x"}));
    assert_eq!(e.category, ErrorCategory::InvalidArgument);
    assert!(e.message.contains("directory"));
    let e = f.err("write", json!({"path": "x/", "content": "x"}));
    assert_eq!(e.category, ErrorCategory::InvalidArgument);
    assert!(!f.ws().join("x").exists());
    let e = f.err("write", json!({"path": "", "content": "x"}));
    assert_eq!(e.category, ErrorCategory::InvalidArgument);
    f.put("file", "x");
    let e = f.err("write", json!({"path": "file/under", "content": "x"}));
    assert_eq!(e.category, ErrorCategory::InvalidArgument);
    let e = f.err("write", json!({"path": "a.txt"}));
    assert_eq!(e.category, ErrorCategory::MissingField);
    assert!(e.message.contains("`content`"));
    let e = f.err("write", json!({"content": "x"}));
    assert_eq!(e.category, ErrorCategory::MissingField);
    assert!(e.message.contains("`path`"));
    f.assert_no_temp_files();
}

#[test]
fn write_sets_the_owner() {
    let f = if is_root() {
        fixture_with(true, Some((12345, 23456)))
    } else {
        let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
        fixture_with(true, Some((uid.as_raw(), gid.as_raw())))
    };
    let (uid, gid) = f.root.owner().unwrap();
    // The tools act as the owner (the sandbox's root), who owns the workspace.
    std::os::unix::fs::chown(f.ws(), Some(uid), Some(gid)).unwrap();
    f.ok("write", json!({"path": "o/f.txt", "content": "x"}));
    f.put("e.txt", "a");
    f.ok(
        "edit",
        json!({"path": "e.txt", "old_string": "a", "new_string": "b"}),
    );
    for p in ["o", "o/f.txt", "e.txt"] {
        let m = std::fs::metadata(f.ws().join(p)).unwrap();
        assert_eq!((m.uid(), m.gid()), (uid, gid), "{p}");
    }
}

// --- edit ---------------------------------------------------------------------------------

#[test]
fn edit_replaces_a_unique_string() {
    let f = fixture();
    f.put("c.py", "def f():\n    return 1\n");
    let r = f.ok(
        "edit",
        json!({"path": "c.py", "old_string": "return 1", "new_string": "return 2"}),
    );
    assert_eq!(r["replacements"], 1);
    assert_mtime_is_now(&f.ws().join("c.py"));
    assert_eq!(f.get("c.py"), "def f():\n    return 2\n");
    f.assert_no_temp_files();
}

#[test]
fn edit_requires_uniqueness_unless_replace_all() {
    let f = fixture();
    f.put("r.txt", "a x a x a\n");
    let e = f.err(
        "edit",
        json!({"path": "r.txt", "old_string": "a", "new_string": "b"}),
    );
    assert_eq!(e.category, ErrorCategory::InvalidArgument);
    assert!(e.message.contains("3 times"), "{}", e.message);
    assert_eq!(f.get("r.txt"), "a x a x a\n");
    let r = f.ok(
        "edit",
        json!({"path": "r.txt", "old_string": "a", "new_string": "b", "replace_all": true}),
    );
    assert_eq!(r["replacements"], 3);
    assert_eq!(f.get("r.txt"), "b x b x b\n");
}

#[test]
fn edit_not_found_and_bad_arguments() {
    let f = fixture();
    f.put("r.txt", "hello\n");
    let e = f.err(
        "edit",
        json!({"path": "r.txt", "old_string": "bye", "new_string": "x"}),
    );
    assert_eq!(e.category, ErrorCategory::NotFound);
    assert!(e.message.contains("`old_string`") && e.message.contains("`r.txt`"));
    let e = f.err(
        "edit",
        json!({"path": "r.txt", "old_string": "", "new_string": "x"}),
    );
    assert_eq!(e.category, ErrorCategory::InvalidArgument);
    let e = f.err(
        "edit",
        json!({"path": "r.txt", "old_string": "hello", "new_string": "hello"}),
    );
    assert_eq!(e.category, ErrorCategory::InvalidArgument);
    let e = f.err(
        "edit",
        json!({"path": "nope", "old_string": "a", "new_string": "b"}),
    );
    assert_eq!(e.category, ErrorCategory::NotFound);
    let e = f.err("edit", json!({"path": "r.txt", "new_string": "b"}));
    assert_eq!(e.category, ErrorCategory::MissingField);
    assert!(e.message.contains("`old_string`"));
    let e = f.err("edit", json!({"path": "r.txt", "old_string": "b"}));
    assert_eq!(e.category, ErrorCategory::MissingField);
    assert!(e.message.contains("`new_string`"));
    assert_eq!(f.get("r.txt"), "hello\n");
}

#[test]
fn edit_accepts_every_alias() {
    let f = fixture();
    f.put("al.txt", "1 1\n");
    f.ok(
        "edit",
        json!({"file_path": "al.txt", "oldText": "1 1", "newText": "2 2"}),
    );
    f.ok(
        "edit",
        json!({"file": "al.txt", "old_str": "2 2", "new_str": "3 3"}),
    );
    f.ok(
        "edit",
        json!({"path": "al.txt", "old_string": "3", "new_string": "4", "replaceAll": true}),
    );
    assert_eq!(f.get("al.txt"), "4 4\n");
}

#[test]
fn edit_keeps_bytes_that_are_not_utf8() {
    let f = fixture();
    std::fs::write(f.ws().join("l1.txt"), b"caf\xe9 old\n").unwrap();
    f.ok(
        "edit",
        json!({"path": "l1.txt", "old_string": "old", "new_string": "new"}),
    );
    assert_eq!(
        std::fs::read(f.ws().join("l1.txt")).unwrap(),
        b"caf\xe9 new\n"
    );
}

// --- apply_patch --------------------------------------------------------------------------

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

/// Paths an agent might use to get out, each with a harmless probe name for creating.
fn escape_fixture() -> (Fixture, Vec<String>) {
    let f = fixture();
    let ws = f.ws();
    let tmp_name = f
        .tmp
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    symlink("/etc", ws.join("etc_link")).unwrap();
    symlink("../..", ws.join("up2")).unwrap();
    symlink("../outside", ws.join("out")).unwrap();
    symlink("../outside/sentinel.txt", ws.join("sentinel_link")).unwrap();
    symlink(
        f.tmp.path().join("outside/sentinel.txt"),
        ws.join("abs_sentinel"),
    )
    .unwrap();
    symlink("/proc/self/root", ws.join("proc_root")).unwrap();
    std::fs::create_dir_all(ws.join("a/b/c")).unwrap();
    symlink("../../../../outside", ws.join("a/b/c/deep")).unwrap();
    symlink(f.tmp.path().join("outside"), ws.join("a/b/c/abs")).unwrap();
    let paths = vec![
        "../outside/sentinel.txt".to_owned(),
        "/etc/passwd".to_owned(),
        "/workspace/../../etc/passwd".to_owned(),
        "/workspace/../outside/sentinel.txt".to_owned(),
        "/proc/self/root/etc/passwd".to_owned(),
        "etc_link/passwd".to_owned(),
        format!("up2/{tmp_name}/outside/sentinel.txt"),
        "out/sentinel.txt".to_owned(),
        "sentinel_link".to_owned(),
        "abs_sentinel".to_owned(),
        "proc_root/etc/passwd".to_owned(),
        "a/b/c/deep/sentinel.txt".to_owned(),
        "a/b/c/abs/sentinel.txt".to_owned(),
        "a/b/../../a/b/c/deep/sentinel.txt".to_owned(),
    ];
    (f, paths)
}

/// A name to create next to `path` (never an existing system file).
fn probe_beside(path: &str) -> String {
    match path.rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/envcraft-probe-{}", std::process::id()),
        None => format!("{path}/envcraft-probe-{}", std::process::id()),
    }
}

fn assert_refused(f: &Fixture, tool: &str, args: Value) {
    let r = f.run(tool, args.clone());
    let text = serde_json::to_string(&r).unwrap();
    let e = r
        .error()
        .unwrap_or_else(|| panic!("{tool} {args} succeeded: {text}"));
    assert_eq!(
        e.category,
        ErrorCategory::Permission,
        "{tool} {args}: {text}"
    );
    assert!(!text.contains("SENTINEL"), "{text}");
    assert!(!text.contains("root:x:"), "{text}");
    assert!(
        !text.contains(&*f.tmp.path().to_string_lossy()),
        "host path in {text}"
    );
}

fn assert_nothing_escaped(f: &Fixture, before: &BTreeMap<PathBuf, (Vec<u8>, i64, i64)>) {
    assert_eq!(
        &f.outside(),
        before,
        "something outside the workspace changed"
    );
    let probe = format!("envcraft-probe-{}", std::process::id());
    assert!(!Path::new("/etc").join(&probe).exists());
    assert!(!f.tmp.path().join("outside").join(&probe).exists());
    assert!(!f.tmp.path().join(&probe).exists());
    f.assert_no_temp_files();
}

#[test]
fn escapes_through_read() {
    let (f, paths) = escape_fixture();
    let before = f.outside();
    for p in &paths {
        assert_refused(&f, "read", json!({"path": p}));
        assert_refused(&f, "read", json!({"file_path": p}));
    }
    assert_nothing_escaped(&f, &before);
}

#[test]
fn escapes_through_write() {
    let (f, paths) = escape_fixture();
    let before = f.outside();
    for p in &paths {
        let target = if p.contains("sentinel") {
            p.clone()
        } else {
            probe_beside(p)
        };
        assert_refused(&f, "write", json!({"path": target, "content": "PWNED"}));
        let probe = probe_beside(p);
        assert_refused(&f, "write", json!({"path": probe, "content": "PWNED"}));
        let nested = format!("{}/x/y.txt", probe_beside(p));
        assert_refused(&f, "write", json!({"path": nested, "content": "PWNED"}));
    }
    assert_nothing_escaped(&f, &before);
}

#[test]
fn escapes_through_edit() {
    let (f, paths) = escape_fixture();
    let before = f.outside();
    for p in &paths {
        // On a system file, a string that is not there: even a broken check writes nothing.
        let old = if p.contains("sentinel") {
            "SENTINEL"
        } else {
            "envcraft-not-in-this-file"
        };
        assert_refused(
            &f,
            "edit",
            json!({"path": p, "old_string": old, "new_string": "PWNED"}),
        );
    }
    assert_nothing_escaped(&f, &before);
}

#[test]
fn escapes_through_apply_patch() {
    let (f, paths) = escape_fixture();
    let before = f.outside();
    for p in &paths {
        let update = if p.contains("sentinel") {
            format!(
                "--- {p}\n+++ {p}\n@@ -1 +1 @@\n-{}\n+PWNED\n",
                SENTINEL.trim_end()
            )
        } else {
            format!("--- {p}\n+++ {p}\n@@ -1 +1 @@\n-envcraft-not-there\n+PWNED\n")
        };
        assert_refused(&f, "apply_patch", json!({"patch": update}));
        let probe = probe_beside(p);
        let add = format!("--- /dev/null\n+++ {probe}\n@@ -0,0 +1 @@\n+PWNED\n");
        assert_refused(&f, "apply_patch", json!({"patch": add}));
        let add = format!("*** Begin Patch\n*** Add File: {probe}/n\n+PWNED\n*** End Patch\n");
        assert_refused(&f, "apply_patch", json!({"patch": add}));
        if p.contains("sentinel") {
            let del = format!("*** Begin Patch\n*** Delete File: {p}\n*** End Patch\n");
            assert_refused(&f, "apply_patch", json!({"patch": del}));
        }
        // A move out of the workspace.
        f.put("movable.txt", "m\n");
        let mv = format!(
            "*** Begin Patch\n*** Update File: movable.txt\n*** Move to: {probe}\n@@\n-m\n+PWNED\n*** End Patch\n"
        );
        assert_refused(&f, "apply_patch", json!({"patch": mv}));
        assert_eq!(f.get("movable.txt"), "m\n");
    }
    assert_nothing_escaped(&f, &before);
}

#[test]
fn escapes_through_ls_glob_grep() {
    let (f, paths) = escape_fixture();
    let before = f.outside();
    let dirs = [
        "..",
        "../outside",
        "/etc",
        "/workspace/../..",
        "/proc/self/root",
        "etc_link",
        "up2",
        "out",
        "proc_root",
        "a/b/c/deep",
        "a/b/c/abs",
    ];
    for d in dirs {
        assert_refused(&f, "ls", json!({"path": d}));
        assert_refused(&f, "glob", json!({"pattern": format!("{d}/*")}));
        assert_refused(&f, "glob", json!({"pattern": "*", "path": d}));
        assert_refused(&f, "grep", json!({"pattern": "SENTINEL|root:", "path": d}));
    }
    for p in &paths {
        assert_refused(&f, "grep", json!({"pattern": "SENTINEL|root:", "path": p}));
        // Globs through the links: refused, or only the links themselves (entries of the
        // workspace) found, never what lies beyond them.
        let r = f.run("glob", json!({"pattern": format!("{p}*")}));
        match r.category() {
            None => {
                let text = serde_json::to_string(&r).unwrap();
                assert!(
                    !text.contains("sentinel.txt") && !text.contains("passwd"),
                    "{text}"
                );
            }
            Some(c) => assert_eq!(c, ErrorCategory::Permission, "{p}"),
        }
    }
    // Searching the whole workspace never follows a link out.
    let r = f.ok("grep", json!({"pattern": "SENTINEL|root:"}));
    assert_eq!(r["matches"], json!([]));
    let r = f.ok("glob", json!({"pattern": "**/sentinel.txt"}));
    assert_eq!(r["matches"], json!([]));
    let r = f.ok("glob", json!({"pattern": "**/passwd"}));
    assert_eq!(r["matches"], json!([]));
    assert_nothing_escaped(&f, &before);
}

#[test]
fn magic_links_are_refused_at_any_depth() {
    // A root where magic links are reachable: /proc/self itself.
    let root =
        WorkspaceRoot::open(Path::new("/proc/self"), "/workspace", vec![], false, None).unwrap();
    for p in [
        "root/etc/passwd",
        "cwd/Cargo.toml",
        "fd/0",
        "exe",
        "task/../root/etc/hostname",
    ] {
        let r = call_tool(&root, "read", &json!({"path": p}), now());
        assert_eq!(r.category(), Some(ErrorCategory::Permission), "{p}: {r:?}");
        let r = call_tool(&root, "ls", &json!({"path": p}), now());
        assert_eq!(r.category(), Some(ErrorCategory::Permission), "{p}: {r:?}");
    }
}

#[test]
fn parse_path_rules() {
    let f = fixture();
    let p = parse_path(&f.root, "/workspace/./a/../b/").unwrap();
    assert_eq!(p.rel, PathBuf::from("a/../b"));
    assert!(p.names_dir);
    let p = parse_path(&f.root, "/root/.openclaw/workspace").unwrap();
    assert_eq!(p.shown(), ".");
    for outside in ["/workspacefoo/a", "/", "/root/.openclaw", "/tmp/x"] {
        let e = parse_path(&f.root, outside).unwrap_err();
        assert_eq!(e.category, ErrorCategory::Permission, "{outside}");
        assert!(e.message.contains("/workspace"));
    }
    assert!(parse_path(&f.root, "a\0b").is_err());
}

#[test]
fn timespec_handles_times_before_the_epoch() {
    let t = timespec(UNIX_EPOCH - Duration::new(1, 250_000_000));
    assert_eq!((t.tv_sec(), t.tv_nsec()), (-2, 750_000_000));
    let t = timespec(now());
    assert_eq!((t.tv_sec(), t.tv_nsec()), (1_700_000_000, 123_456_789));
}
