#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::Path;

fn options(layer: bool, setid: Setid) -> CopyOptions {
    CopyOptions {
        layer,
        setid,
        max_bytes: DEFAULT_MAX_BYTES,
    }
}

fn roots(dir: &Path) -> (OwnedFd, OwnedFd) {
    fs::create_dir_all(dir.join("from")).unwrap();
    fs::create_dir_all(dir.join("to")).unwrap();
    (
        open_root(&dir.join("from")).unwrap(),
        open_root(&dir.join("to")).unwrap(),
    )
}

#[test]
fn a_copy_keeps_links_as_links_skips_fifos_and_drops_setid_for_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let from = dir.path().join("from");
    fs::create_dir_all(from.join("sub")).unwrap();
    fs::write(from.join("sub/suid"), "x").unwrap();
    fs::set_permissions(from.join("sub/suid"), fs::Permissions::from_mode(0o6755)).unwrap();
    symlink("/etc", from.join("link")).unwrap();
    nix::unistd::mkfifo(&from.join("fifo"), Mode::S_IRWXU).unwrap();
    let (src, dst) = roots(dir.path());
    let report = copy(&src, &dst, options(false, Setid::Drop)).unwrap();
    let to = dir.path().join("to");
    assert_eq!(fs::read_link(to.join("link")).unwrap(), Path::new("/etc"));
    assert_eq!(
        fs::metadata(to.join("sub/suid")).unwrap().mode() & 0o7777,
        0o755
    );
    assert!(to.join("fifo").symlink_metadata().is_err());
    assert_eq!(report.skipped.len(), 1, "{report:?}");
    assert_eq!(report.skipped[0].0, "fifo");
    // Inside a sandbox the agent's bits are kept.
    let kept = dir.path().join("kept");
    fs::create_dir(&kept).unwrap();
    copy(&src, &open_root(&kept).unwrap(), options(true, Setid::Keep)).unwrap();
    assert_eq!(
        fs::metadata(kept.join("sub/suid")).unwrap().mode() & 0o7777,
        0o6755
    );
}

#[test]
fn opening_a_fifo_as_a_file_never_blocks_and_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    nix::unistd::mkfifo(&dir.path().join("p"), Mode::S_IRWXU).unwrap();
    let root = open_root(dir.path()).unwrap();
    let err = open_file(&root, c"p").unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
}

#[test]
fn no_child_is_opened_through_a_link() {
    let dir = tempfile::tempdir().unwrap();
    fs::create_dir(dir.path().join("real")).unwrap();
    fs::write(dir.path().join("real/f"), "x").unwrap();
    symlink("real", dir.path().join("dlink")).unwrap();
    symlink("real/f", dir.path().join("flink")).unwrap();
    let root = open_root(dir.path()).unwrap();
    assert!(open_dir(&root, c"dlink").is_err());
    assert!(open_file(&root, c"flink").is_err());
    assert!(open_dir(&root, c"..").is_err());
    assert!(open_dir(&root, c"real").is_ok());
}

#[test]
fn keeping_paths_skips_one_whose_directory_became_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let from = dir.path().join("from");
    let host = dir.path().join("host");
    fs::create_dir_all(&host).unwrap();
    fs::create_dir_all(from.join("ok")).unwrap();
    fs::write(from.join("ok/a"), "a").unwrap();
    // `d` was a directory when the change list was read; now it is a link to the host.
    symlink(&host, from.join("d")).unwrap();
    let (src, dst) = roots(dir.path());
    let paths: Vec<String> = ["d", "d/f", "ok", "ok/a"].map(String::from).to_vec();
    let report = copy_paths(&src, &dst, &paths, options(false, Setid::Drop)).unwrap();
    let to = dir.path().join("to");
    assert_eq!(fs::read_to_string(to.join("ok/a")).unwrap(), "a");
    assert!(to.join("d").symlink_metadata().unwrap().is_symlink());
    assert_eq!(
        fs::read_dir(&host).unwrap().count(),
        0,
        "wrote through the link"
    );
    assert!(report.skipped.iter().any(|(p, _)| p == "d/f"), "{report:?}");
}

#[test]
fn a_copy_past_the_byte_budget_skips_the_rest_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let from = dir.path().join("from");
    fs::create_dir_all(&from).unwrap();
    fs::write(from.join("a"), vec![1u8; 8192]).unwrap();
    fs::write(from.join("b"), vec![2u8; 8192]).unwrap();
    let (src, dst) = roots(dir.path());
    let budget = CopyOptions {
        max_bytes: 10_000,
        ..options(false, Setid::Drop)
    };
    let report = copy(&src, &dst, budget).unwrap();
    assert_eq!(report.bytes, 8192);
    assert_eq!(report.skipped.len(), 1, "{report:?}");
    assert!(report.skipped[0].1.contains("10000 bytes"));
}
