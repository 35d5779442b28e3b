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

#[path = "escape_tests.rs"]
mod escape;
#[path = "patch_and_search_tests.rs"]
mod patch_and_search;
