//! A layer is untrusted input: every crafted entry is refused (or neutralised) with an error
//! naming the layer and the entry, nothing outside the layer's directory is written, and a
//! refused layer leaves nothing in the store. Each import runs through `contained`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "image_fixture/mod.rs"]
mod image_fixture;

use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;

use image_fixture::{Layer, Tar, image_cmd, layer_root, oci_layout, stderr, store_layers};

/// Import a one-layer image made of `tar` (gzip-compressed) and expect a refusal whose message
/// holds each of `needles`; the store must then hold no layer and no partial unpacking.
fn refused(tar: Vec<u8>, needles: &[&str]) -> Option<(tempfile::TempDir, String)> {
    if !common::sandbox_ready() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    let layer = Layer::gzip(tar);
    let digest = layer.digest();
    oci_layout(&layout, &[layer]);
    let state = dir.path().join("state");
    let out = image_cmd(
        &state,
        &["import", layout.to_str().unwrap(), "--name", "evil"],
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains(&digest), "the error names the layer: {err}");
    for n in needles {
        assert!(err.contains(n), "expected {n:?} in: {err}");
    }
    let left: Vec<_> = store_layers(&state)
        .into_iter()
        .filter(|p| !p.to_string_lossy().ends_with(".lock"))
        .collect();
    assert!(left.is_empty(), "a refused layer left {left:?}");
    let ls = image_cmd(&state, &["ls", "--json"]);
    assert_eq!(String::from_utf8_lossy(&ls.stdout).trim(), "[]");
    Some((dir, err))
}

#[test]
fn a_layer_entry_with_dot_dot_is_refused_and_nothing_lands_beside_the_store() {
    let Some((dir, _)) = refused(
        Tar::new()
            .file("ok", b"fine")
            .file("../../escaped", b"owned")
            .finish(),
        &["entry ../../escaped", "`..`"],
    ) else {
        return;
    };
    assert!(!dir.path().join("escaped").exists());
    assert!(!dir.path().join("state/escaped").exists());
    assert!(!dir.path().join("state/images/escaped").exists());
}

#[test]
fn a_layer_entry_with_an_absolute_path_is_refused() {
    let target = format!("/tmp/envcraft-abs-{}", common::unique_token());
    let Some(_) = refused(
        Tar::new().file(&target, b"owned").finish(),
        &[&format!("entry {target}"), "absolute"],
    ) else {
        return;
    };
    assert!(!Path::new(&target).exists());
}

#[test]
fn a_file_written_through_a_symlink_of_the_layer_is_refused() {
    let host = tempfile::tempdir().unwrap();
    let host_dir = host.path().to_str().unwrap().to_string();
    let Some(_) = refused(
        Tar::new()
            .symlink("out", &host_dir)
            .file("out/pwned", b"owned")
            .finish(),
        &["entry out/pwned", "symbolic link"],
    ) else {
        return;
    };
    assert!(!host.path().join("pwned").exists());
    assert_eq!(fs::read_dir(host.path()).unwrap().count(), 0);
}

#[test]
fn a_hard_link_to_a_host_file_is_refused() {
    let host = tempfile::tempdir().unwrap();
    let secret = host.path().join("secret");
    fs::write(&secret, "host secret").unwrap();
    let Some(_) = refused(
        Tar::new()
            .hardlink("copy", secret.to_str().unwrap())
            .finish(),
        &[
            "entry copy",
            "hard link",
            "not an earlier file of this layer",
        ],
    ) else {
        return;
    };
    assert_eq!(fs::metadata(&secret).unwrap().nlink(), 1);
    let Some(_) = refused(
        Tar::new()
            .hardlink("copy", "../../../../etc/passwd")
            .finish(),
        &["entry copy", "hard link"],
    ) else {
        return;
    };
}

#[test]
fn a_device_node_in_a_layer_is_refused() {
    refused(
        Tar::new().dir("usr").char_device("usr/mem", 1, 1).finish(),
        &["entry usr/mem", "device"],
    );
}

#[test]
fn a_sparse_file_claiming_a_terabyte_is_refused_before_it_is_written() {
    refused(
        Tar::new().sparse("huge", 1 << 40).finish(),
        &["entry huge", "1099511627776 bytes", "bound"],
    );
}

#[test]
fn a_path_longer_than_4096_bytes_is_refused() {
    let long = "d/".repeat(2100) + "f";
    refused(
        Tar::new().file(&long, b"x").finish(),
        &["4201 bytes", "4096"],
    );
}

#[test]
fn a_path_300_directories_deep_is_refused() {
    let deep = "a/".repeat(300) + "f";
    refused(
        Tar::new().file(&deep, b"x").finish(),
        &["301 directories deep", "256"],
    );
}

#[test]
fn a_duplicate_entry_is_refused() {
    refused(
        Tar::new().file("f", b"one").file("f", b"two").finish(),
        &["entry f", "twice"],
    );
    refused(
        Tar::new()
            .file("f", b"one")
            .symlink("f", "/etc/shadow")
            .finish(),
        &["entry f", "twice"],
    );
}

#[test]
fn a_zstd_layer_expanding_over_a_thousand_times_is_refused_as_a_bomb() {
    if !common::sandbox_ready() {
        return;
    }
    let zeros = vec![0u8; 200 << 20];
    let tar = Tar::new().file("zeros", &zeros).finish();
    drop(zeros);
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    let layer = Layer::zstd(tar);
    assert!(
        layer.blob.len() < (200 << 20) / 1000,
        "zstd should compress zeros well"
    );
    let digest = layer.digest();
    oci_layout(&layout, &[layer]);
    let state = dir.path().join("state");
    let out = image_cmd(&state, &["import", layout.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(
        err.contains(&digest) && err.contains("decompression bomb"),
        "{err}"
    );
    let left: Vec<_> = store_layers(&state)
        .into_iter()
        .filter(|p| !p.to_string_lossy().ends_with(".lock"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn setuid_and_setgid_bits_and_dev_nodes_of_a_layer_never_reach_the_store() {
    if !common::sandbox_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    let layer = Layer::gzip(
        Tar::new()
            .dir("bin")
            .file_mode("bin/su", b"#!/bin/sh\n", 0o6755)
            .dir_mode("tmp", 0o1777)
            .dir("dev")
            .char_device("dev/mem", 1, 1)
            .finish(),
    );
    let diff_id = layer.diff_id();
    oci_layout(&layout, &[layer]);
    let state = dir.path().join("state");
    let out = image_cmd(&state, &["import", layout.to_str().unwrap(), "--name", "s"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let root = layer_root(&state, &diff_id);
    let su = fs::metadata(root.join("bin/su")).unwrap();
    assert_eq!(su.permissions().mode() & 0o7777, 0o755);
    let tmp = fs::metadata(root.join("tmp")).unwrap();
    assert_eq!(
        tmp.permissions().mode() & 0o7777,
        0o1777,
        "sticky dirs stay"
    );
}

#[test]
fn whiteouts_become_overlay_whiteouts_and_opaque_directories() {
    if !common::sandbox_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    let one = Layer::gzip(
        Tar::new()
            .dir("a")
            .file("a/keep", b"k")
            .file("a/gone", b"g")
            .dir("d")
            .file("d/old", b"o")
            .finish(),
    );
    let two = Layer::plain(
        Tar::new()
            .dir("a")
            .file("a/.wh.gone", b"")
            .dir("d")
            .file("d/.wh..wh..opq", b"")
            .file("d/new", b"n")
            .finish(),
    );
    let upper = two.diff_id();
    oci_layout(&layout, &[one, two]);
    let state = dir.path().join("state");
    let out = image_cmd(&state, &["import", layout.to_str().unwrap(), "--name", "w"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let root = layer_root(&state, &upper);
    let gone = fs::symlink_metadata(root.join("a/gone")).unwrap();
    assert!(
        gone.file_type().is_char_device() && gone.rdev() == 0,
        "a whiteout is 0/0"
    );
    assert!(!root.join("a/.wh.gone").exists());
    assert!(!root.join("d/.wh..wh..opq").exists());
    let opaque = xattr(&root.join("d"), "user.overlay.opaque");
    assert_eq!(opaque.as_deref(), Some(&b"y"[..]));
}

fn xattr(path: &Path, name: &str) -> Option<Vec<u8>> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let p = CString::new(path.as_os_str().as_bytes()).unwrap();
    let n = CString::new(name).unwrap();
    let mut buf = vec![0u8; 64];
    // SAFETY: valid NUL-terminated strings and a buffer of the given length.
    let len =
        unsafe { libc::lgetxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    (len >= 0).then(|| {
        buf.truncate(len as usize);
        buf
    })
}
