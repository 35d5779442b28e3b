#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};

/// A small deterministic PRNG (splitmix64) for randomized tests.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub(crate) fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    pub(crate) fn fill(&mut self, bytes: &mut [u8]) {
        for chunk in bytes.chunks_mut(8) {
            let word = self.next().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

/// Write `text` at `root/rel`, making parent directories.
pub(crate) fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

pub(crate) fn chmod(root: &Path, rel: &str, mode: u32) {
    fs::set_permissions(root.join(rel), fs::Permissions::from_mode(mode)).unwrap();
}

/// Copy a tree with modes and symlinks (special bits kept, unlike the workspace copies).
pub(crate) fn copy_all(from: &Path, to: &Path) {
    fs::create_dir(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let meta = fs::symlink_metadata(&src).unwrap();
        if meta.is_dir() {
            copy_all(&src, &dst);
        } else if meta.file_type().is_symlink() {
            symlink(fs::read_link(&src).unwrap(), &dst).unwrap();
        } else {
            fs::copy(&src, &dst).unwrap();
        }
        fs::set_permissions(&dst, meta.permissions()).ok();
    }
}

/// Skip loudly; with ENVCRAFT_TEST_REQUIRE=all, fail instead.
pub(crate) fn skip(why: &str) {
    if std::env::var("ENVCRAFT_TEST_REQUIRE").as_deref() == Ok("all") {
        panic!("required but unavailable: {why}");
    }
    eprintln!("skipping: {why}");
}

fn sha(text: &str) -> String {
    sha256_hex(text.as_bytes())
}

fn manifest(root: &Path) -> Manifest {
    Manifest::of_dir(root).unwrap()
}

/// An initial and a final tree in one temp dir.
struct Trees {
    _dir: tempfile::TempDir,
    initial: PathBuf,
    final_: PathBuf,
}

fn trees(initial: &[(&str, &str)], final_: &[(&str, &str)]) -> Trees {
    let dir = tempfile::tempdir().unwrap();
    let (i, f) = (dir.path().join("initial"), dir.path().join("final"));
    fs::create_dir(&i).unwrap();
    fs::create_dir(&f).unwrap();
    for (path, text) in initial {
        write(&i, path, text);
    }
    for (path, text) in final_ {
        write(&f, path, text);
    }
    Trees {
        _dir: dir,
        initial: i,
        final_: f,
    }
}

impl Trees {
    fn verify(&self, expected: &Expected) -> Verdict {
        verify(
            expected,
            &manifest(&self.initial),
            &manifest(&self.final_),
            Some(&self.final_),
        )
    }
}

fn files(rules: &[(&str, FileRule)]) -> Expected {
    Expected {
        files: rules
            .iter()
            .map(|(p, r)| (p.to_string(), r.clone()))
            .collect(),
        ..Expected::default()
    }
}

fn globs(texts: &[&str]) -> Vec<Glob> {
    texts.iter().map(|t| Glob::new(t).unwrap()).collect()
}

#[test]
fn a_file_rule_passes_on_the_expected_content() {
    let t = trees(&[], &[("out/report.md", "done\n")]);
    let v = t.verify(&files(&[("out/report.md", FileRule::file(sha("done\n")))]));
    assert_eq!(
        (v.reward_or_zero(), v.passed, v.checks.len()),
        (1.0, true, 1)
    );
    let c = &v.checks[0];
    assert_eq!(
        (c.kind, c.name.as_str(), c.path.as_str()),
        (CheckKind::File, "file out/report.md", "out/report.md")
    );
    assert_eq!(c.diff, None);
}

#[test]
fn a_failed_file_check_shows_both_hashes_and_the_first_forty_lines_of_text() {
    let text: String = (1..=100).map(|i| format!("line {i}\n")).collect();
    let t = trees(&[], &[("report.md", &text)]);
    let want = sha("the right answer\n");
    let v = t.verify(&files(&[("report.md", FileRule::file(&want))]));
    assert_eq!((v.reward_or_zero(), v.passed), (0.0, false));
    let c = &v.checks[0];
    assert_eq!(c.expected, format!("file sha256 {want}"));
    assert_eq!(c.actual, format!("file mode 0644 sha256 {}", sha(&text)));
    let diff = c.diff.as_deref().unwrap();
    assert!(diff.starts_with("--- expected report.md"), "{diff}");
    let added: Vec<&str> = diff
        .lines()
        .filter(|l| l.starts_with('+') && !l.starts_with("+++"))
        .collect();
    assert_eq!(added.len(), DIFF_LINES);
    assert_eq!(added[0], "+line 1");
    assert!(diff.contains("more lines not shown"));
    // Without the final tree there is nothing to show.
    let v = verify(
        &files(&[("report.md", FileRule::file(&want))]),
        &Manifest::default(),
        &manifest(&t.final_),
        None,
    );
    assert_eq!(v.checks[0].diff, None);
}

#[test]
fn a_failed_check_on_a_binary_file_has_no_diff() {
    let t = trees(&[], &[]);
    fs::write(t.final_.join("blob"), [0u8, 159, 146, 150]).unwrap();
    let v = t.verify(&files(&[("blob", FileRule::file(sha("x")))]));
    assert!(!v.passed);
    assert_eq!(v.checks[0].diff, None);
}

#[test]
fn a_missing_file_fails_its_rule() {
    let t = trees(&[], &[]);
    let v = t.verify(&files(&[("a.txt", FileRule::file(sha("a")))]));
    assert_eq!(v.checks[0].actual, "missing");
    assert!(!v.passed);
}

#[test]
fn absent_passes_when_the_path_is_gone_and_fails_when_it_is_there() {
    let t = trees(&[("tmp/x", "x"), ("keep", "k")], &[("keep", "k")]);
    let expected = Expected {
        absent: vec!["tmp/x".into(), "tmp".into(), "keep".into()],
        ..Expected::default()
    };
    let v = t.verify(&expected);
    let outcome: Vec<(&str, bool)> = v
        .checks
        .iter()
        .map(|c| (c.path.as_str(), c.passed))
        .collect();
    assert_eq!(outcome, [("tmp/x", true), ("tmp", true), ("keep", false)]);
    assert!(v.checks.iter().all(|c| c.kind == CheckKind::Absent));
    assert_eq!(
        v.checks[2].actual,
        format!("file mode 0644 sha256 {}", sha("k"))
    );
    assert!((v.reward_or_zero() - 2.0 / 3.0).abs() < 1e-9);
}

#[test]
fn unchanged_compares_every_matching_entry_with_the_initial_state() {
    let initial = [("src/a.rs", "a"), ("src/b.rs", "b"), ("docs/x.md", "x")];
    let t = trees(
        &initial,
        &[("src/a.rs", "A"), ("src/c.rs", "c"), ("docs/x.md", "x")],
    );
    let expected = Expected {
        unchanged: globs(&["src/**", "docs", "nothing/**"]),
        ..Expected::default()
    };
    let v = t.verify(&expected);
    let [src, docs, nothing] = &v.checks[..] else {
        panic!("{v:?}")
    };
    assert_eq!((src.kind, src.passed), (CheckKind::Unchanged, false));
    let diff = src.diff.as_deref().unwrap();
    assert!(
        diff.contains(&format!(
            "changed src/a.rs: file mode 0644 sha256 {} -> file mode 0644 sha256 {}",
            sha("a"),
            sha("A")
        )),
        "{diff}"
    );
    assert!(diff.contains("missing src/b.rs"), "{diff}");
    assert!(diff.contains("added src/c.rs"), "{diff}");
    assert_eq!(src.actual, "3 of the matching entries differ");
    assert!(docs.passed, "{docs:?}");
    assert_eq!(docs.actual, "2 entries unchanged");
    assert!(nothing.passed);
}

#[test]
fn extra_deny_fails_each_added_path_no_rule_names() {
    let t = trees(
        &[("README", "r")],
        &[
            ("README", "r"),
            ("out/result.txt", "42"),
            ("junk.txt", "j"),
            ("cache/x", "x"),
            ("src/new.rs", "n"),
        ],
    );
    let mut expected = files(&[("out/result.txt", FileRule::file(sha("42")))]);
    expected.extra = Extra::Deny;
    expected.ignore = globs(&["cache"]);
    expected.unchanged = globs(&["src/**"]);
    let v = t.verify(&expected);
    let extra: Vec<&str> = v
        .checks
        .iter()
        .filter(|c| c.kind == CheckKind::Extra)
        .map(|c| c.path.as_str())
        .collect();
    // `out` holds a required file, `cache` is ignored, `src/new.rs` is judged by
    // `unchanged` (and `src`, new as well, only by extra).
    assert_eq!(extra, ["junk.txt", "src"]);
    let junk = v.checks.iter().find(|c| c.path == "junk.txt").unwrap();
    assert_eq!((junk.name.as_str(), junk.passed), ("extra junk.txt", false));
    assert_eq!(v.checks.len(), 4);
    expected.extra = Extra::Allow;
    let v = t.verify(&expected);
    assert!(v.checks.iter().all(|c| c.kind != CheckKind::Extra));
}

#[test]
fn ignored_paths_are_left_out_of_every_check() {
    let t = trees(
        &[("src/m.py", "m")],
        &[
            ("src/m.py", "m"),
            ("src/__pycache__/m.pyc", "c"),
            ("x.swp", "s"),
        ],
    );
    let expected = Expected {
        files: [("x.swp".to_string(), FileRule::file(sha("other")))].into(),
        absent: vec!["src/__pycache__/m.pyc".into()],
        unchanged: globs(&["src/**"]),
        ignore: globs(&["**/__pycache__", "*.swp"]),
        extra: Extra::Deny,
        all_or_nothing: false,
    };
    let v = t.verify(&expected);
    assert_eq!(v.checks.len(), 1, "{v:?}");
    assert_eq!(
        (v.checks[0].kind, v.checks[0].passed),
        (CheckKind::Unchanged, true)
    );
    assert_eq!(v.reward_or_zero(), 1.0);
}

#[test]
fn all_or_nothing_makes_the_reward_zero_or_one() {
    let t = trees(&[], &[("a", "a"), ("b", "wrong")]);
    let mut expected = files(&[
        ("a", FileRule::file(sha("a"))),
        ("b", FileRule::file(sha("b"))),
    ]);
    assert_eq!(t.verify(&expected).reward_or_zero(), 0.5);
    expected.all_or_nothing = true;
    let v = t.verify(&expected);
    assert_eq!((v.reward_or_zero(), v.passed), (0.0, false));
    fs::write(t.final_.join("b"), "b").unwrap();
    let v = t.verify(&expected);
    assert_eq!((v.reward_or_zero(), v.passed), (1.0, true));
}

#[test]
fn no_rules_give_reward_one_unless_extra_paths_are_denied() {
    let t = trees(&[("a", "a")], &[("a", "a"), ("new", "n")]);
    let v = t.verify(&Expected::default());
    assert_eq!(
        (v.reward_or_zero(), v.passed, v.checks.len()),
        (1.0, true, 0)
    );
    let deny = Expected {
        extra: Extra::Deny,
        ..Expected::default()
    };
    let v = t.verify(&deny);
    assert_eq!(
        (v.reward_or_zero(), v.passed, v.checks.len()),
        (0.0, false, 1)
    );
}

#[test]
fn symlinks_are_judged_by_their_target_never_followed() {
    let t = trees(&[], &[("data.txt", "data")]);
    symlink("data.txt", t.final_.join("latest")).unwrap();
    // A file whose content is the link's target text, and a link whose target text is
    // the expected file content: neither passes for the other.
    write(&t.final_, "fake-link", "data.txt");
    symlink("data", t.final_.join("fake-file")).unwrap();
    let link_rule = FileRule {
        kind: EntryKind::Symlink,
        sha256: Some(sha("data.txt")),
        mode: None,
    };
    let expected = files(&[
        ("latest", link_rule.clone()),
        ("fake-link", link_rule.clone()),
        ("fake-file", FileRule::file(sha("data"))),
    ]);
    let v = t.verify(&expected);
    let outcome: Vec<(&str, bool)> = v
        .checks
        .iter()
        .map(|c| (c.path.as_str(), c.passed))
        .collect();
    assert_eq!(
        outcome,
        [("fake-file", false), ("fake-link", false), ("latest", true)]
    );
    // Retargeting the link fails its rule.
    fs::remove_file(t.final_.join("latest")).unwrap();
    symlink("/etc/passwd", t.final_.join("latest")).unwrap();
    let v = t.verify(&files(&[("latest", link_rule)]));
    assert!(!v.passed);
    assert_eq!(
        v.checks[0].actual,
        format!("symlink mode 0777 sha256 {}", sha("/etc/passwd"))
    );
}

#[test]
fn a_mode_is_checked_only_where_the_rule_gives_one() {
    let t = trees(&[], &[("run.sh", "#!/bin/sh\n")]);
    let content = sha("#!/bin/sh\n");
    let with_mode = FileRule {
        mode: Some(0o755),
        ..FileRule::file(&content)
    };
    let v = t.verify(&files(&[("run.sh", with_mode.clone())]));
    assert!(!v.passed);
    assert_eq!(
        v.checks[0].expected,
        format!("file mode 0755 sha256 {content}")
    );
    assert!(v.checks[0].actual.starts_with("file mode 0644"));
    assert!(
        t.verify(&files(&[("run.sh", FileRule::file(&content))]))
            .passed
    );
    chmod(&t.final_, "run.sh", 0o755);
    assert!(t.verify(&files(&[("run.sh", with_mode)])).passed);
}

#[test]
fn a_directory_replaced_by_a_file_and_back_is_seen() {
    let t = trees(&[("d/a", "a")], &[("d", "now a file")]);
    let dir_rule = FileRule {
        kind: EntryKind::Dir,
        sha256: None,
        mode: None,
    };
    let expected = Expected {
        files: [("d".to_string(), dir_rule)].into(),
        absent: vec!["d/a".into()],
        ..Expected::default()
    };
    let v = t.verify(&expected);
    assert_eq!(
        v.checks[0].actual,
        format!("file mode 0644 sha256 {}", sha("now a file"))
    );
    assert_eq!((v.checks[0].passed, v.checks[1].passed), (false, true));
    fs::remove_file(t.final_.join("d")).unwrap();
    write(&t.final_, "d/a", "a");
    let v = t.verify(&expected);
    assert_eq!((v.checks[0].passed, v.checks[1].passed), (true, false));
    // And a file rule on a path that became a directory fails.
    let v = t.verify(&files(&[("d", FileRule::file(sha("now a file")))]));
    assert!(v.checks[0].actual.starts_with("dir mode"));
    assert!(!v.passed);
}

#[test]
fn rules_combined_give_the_fraction_passed() {
    let t = trees(
        &[
            ("src/lib.rs", "lib"),
            ("notes.txt", "n"),
            ("tmp/scratch", "s"),
        ],
        &[
            ("src/lib.rs", "lib"),
            ("notes.txt", "n"),
            ("out/a.txt", "a"),
            ("out/b.txt", "wrong"),
            ("stray", "s"),
        ],
    );
    let expected = Expected {
        files: [
            ("out/a.txt".to_string(), FileRule::file(sha("a"))),
            ("out/b.txt".to_string(), FileRule::file(sha("b"))),
        ]
        .into(),
        absent: vec!["tmp".into()],
        unchanged: globs(&["src/**", "notes.txt"]),
        ignore: vec![],
        extra: Extra::Deny,
        all_or_nothing: false,
    };
    let v = t.verify(&expected);
    let outcome: Vec<(&str, bool)> = v
        .checks
        .iter()
        .map(|c| (c.name.as_str(), c.passed))
        .collect();
    assert_eq!(
        outcome,
        [
            ("file out/a.txt", true),
            ("file out/b.txt", false),
            ("absent tmp", true),
            ("unchanged src/**", true),
            ("unchanged notes.txt", true),
            ("extra stray", false),
        ]
    );
    assert!((v.reward_or_zero() - 4.0 / 6.0).abs() < 1e-9);
    assert_eq!(v.failed().count(), 2);
    let json = serde_json::to_value(&v).unwrap();
    assert_eq!(json["checks"][1]["kind"], "file");
    assert_eq!(json["checks"][5]["kind"], "extra");
    assert_eq!(json["passed"], false);
}

#[test]
fn paths_below_a_directory_too_deep_to_list_never_pass() {
    let deep = "d/".repeat(manifest::MAX_DEPTH);
    let deepest = deep.trim_end_matches('/').to_string();
    let final_ = Manifest::from_entries(vec![], vec![deepest.clone()]);
    let below = format!("{deepest}/x");
    let expected = Expected {
        files: [(below.clone(), FileRule::file(sha("x")))].into(),
        absent: vec![format!("{deepest}/y")],
        ..Expected::default()
    };
    let v = verify(&expected, &Manifest::default(), &final_, None);
    assert!(
        v.checks.iter().all(|c| !c.passed && c.actual == UNKNOWN),
        "{v:?}"
    );
}

/// A reference solution's result recorded as expected state: it passes, the untouched
/// initial state does not, and a flipped byte in any checked file fails.
#[test]
fn expected_from_records_what_the_solution_changed() {
    let initial = [
        ("keep.txt", "k"),
        ("edit.txt", "old"),
        ("gone/a", "a"),
        ("gone/b/c", "c"),
        ("script.sh", "#!/bin/sh\n"),
        ("d/x", "x"),
    ];
    let t = trees(&initial, &[]);
    fs::remove_dir(&t.final_).unwrap();
    copy_all(&t.initial, &t.final_);
    // The reference solution:
    write(&t.final_, "edit.txt", "new");
    fs::remove_dir_all(t.final_.join("gone")).unwrap();
    write(&t.final_, "out/report.md", "report");
    write(&t.final_, "bin/tool", "#!/bin/sh\necho\n");
    chmod(&t.final_, "bin/tool", 0o755);
    chmod(&t.final_, "script.sh", 0o755);
    fs::create_dir(t.final_.join("empty")).unwrap();
    symlink("out/report.md", t.final_.join("latest")).unwrap();
    chmod(&t.final_, "d", 0o700);
    let (before, after) = (manifest(&t.initial), manifest(&t.final_));
    let expected = expected_from(&before, &after, Extra::Deny);
    let rules: Vec<(&str, String)> = expected
        .files
        .iter()
        .map(|(p, r)| (p.as_str(), r.describe()))
        .collect();
    assert_eq!(
        rules,
        [
            (
                "bin/tool",
                format!("file mode 0755 sha256 {}", sha("#!/bin/sh\necho\n"))
            ),
            ("d", "dir mode 0700".to_string()),
            ("edit.txt", format!("file sha256 {}", sha("new"))),
            ("empty", "dir".to_string()),
            ("latest", format!("symlink sha256 {}", sha("out/report.md"))),
            ("out/report.md", format!("file sha256 {}", sha("report"))),
            (
                "script.sh",
                format!("file mode 0755 sha256 {}", sha("#!/bin/sh\n"))
            ),
        ]
    );
    assert_eq!(expected.absent, ["gone"]);
    assert_eq!(expected.extra, Extra::Deny);
    let reread = Expected::from_json(&expected.to_json()).unwrap();
    assert_eq!(reread, expected);
    let v = verify(&reread, &before, &after, Some(&t.final_));
    assert_eq!((v.reward_or_zero(), v.passed), (1.0, true), "{v:?}");
    let untouched = verify(&reread, &before, &before, None);
    assert!(
        !untouched.passed && untouched.reward_or_zero() < 0.5,
        "{untouched:?}"
    );
    for (path, rule) in &reread.files {
        if rule.kind != EntryKind::File {
            continue;
        }
        let original = fs::read(t.final_.join(path)).unwrap();
        let mut flipped = original.clone();
        flipped[0] ^= 1;
        fs::write(t.final_.join(path), &flipped).unwrap();
        let v = verify(&reread, &before, &manifest(&t.final_), None);
        assert!(!v.passed, "flipping a byte of {path} went unseen");
        fs::write(t.final_.join(path), &original).unwrap();
    }
}
