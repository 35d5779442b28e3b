//! Every file tool against paths that try to leave the workspace.

use super::*;

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
