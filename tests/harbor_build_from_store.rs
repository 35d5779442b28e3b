//! A Dockerfile `FROM` an image that only envcraft's store holds, built by the real Podman and
//! Buildah: the image (a busybox root made here without network, then two layers over it, one
//! deleting a file of the other, and a config with `ENV`, `WORKDIR`) is built in a Podman storage
//! of the test's own, imported into envcraft's store, and removed from Podman's storage; `image
//! build` with each builder hands it over (a `RUN` reads its file, sees the deleted one gone and
//! its config), the built image has what the `RUN` wrote, and the builder's storage afterwards
//! holds neither the base nor the build's image; a Harbor task over such a Dockerfile scores
//! oracle 1.0 with `envcraft run`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const PODMAN: &str = common::PODMAN;
const BUILDAH: &str = "/usr/bin/buildah";
const BUSYBOX: &str = "/bin/busybox";

/// The image only envcraft's store holds (a short name: Podman gives it `localhost/`).
const ONLY: &str = "envcraft-test-only-store:1";

/// The Dockerfile of [`ONLY`]: a file to read, a file made and then deleted (a whiteout in the
/// store's layers), an `ENV` holding a `$` and quotes, a `WORKDIR`.
const ONLY_DOCKERFILE: &str = "FROM localhost/envcraft-test-busybox:1\n\
RUN echo only-in-store > /opt/only && echo gone > /opt/gone\n\
RUN rm /opt/gone\n\
ENV MARK='a $b \"c\"'\n\
WORKDIR /opt\n";

/// What a build over [`ONLY`] checks in a `RUN`.
const CHECKS: &str = "cat /opt/only > /opt/seen && test ! -e /opt/gone \
&& [ \"$MARK\" = 'a $b \"c\"' ] && [ \"$(pwd)\" = /opt ]";

fn ready() -> bool {
    if !common::sandbox_ready() {
        return false;
    }
    for tool in [PODMAN, BUILDAH, BUSYBOX] {
        if !Path::new(tool).is_file() {
            common::skip(&format!(
                "{tool} is missing (apt-get install runc podman buildah busybox-static)"
            ));
            return false;
        }
    }
    true
}

/// A Podman storage and a state root of the test's own; [`ONLY`] in envcraft's store only.
fn world() -> common::PodmanWorld {
    let world = common::PodmanWorld::new(BUSYBOX);
    let d = world.path().to_path_buf();
    let ctx = d.join("only-ctx");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(ctx.join("Dockerfile"), ONLY_DOCKERFILE).unwrap();
    world.podman_ok(&["build", "-t", ONLY, ctx.to_str().unwrap()]);
    let archive = d.join("only.tar");
    world.podman_ok(&[
        "save",
        "--format",
        "oci-archive",
        "-o",
        archive.to_str().unwrap(),
        ONLY,
    ]);
    let (code, out, err) = world.envcraft(
        &["image", "import", archive.to_str().unwrap(), "--name", ONLY],
        None,
    );
    assert_eq!(code, 0, "{out}\n{err}");
    world.podman_ok(&["rmi", "-f", ONLY, common::BUSYBOX_BASE]);
    assert!(!world.podman_has(ONLY), "{}", world.podman_images());
    world
}

#[test]
fn image_build_hands_a_base_only_the_store_holds_to_each_builder_and_takes_it_back() {
    if !ready() {
        return;
    }
    let world = world();
    let ctx = world.path().join("ctx");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(
        ctx.join("Dockerfile"),
        format!("FROM {ONLY} AS first\nRUN {CHECKS}\nFROM first\nRUN cat /opt/seen\n"),
    )
    .unwrap();
    let ws = world.path().join("ws");
    fs::create_dir_all(&ws).unwrap();
    for builder in ["podman", "buildah"] {
        let name = format!("over-store-{builder}");
        let (code, out, err) = world.envcraft(
            &[
                "image",
                "build",
                ctx.to_str().unwrap(),
                "--name",
                &name,
                "--builder",
                builder,
            ],
            None,
        );
        assert_eq!(code, 0, "{builder}: {out}\n{err}");
        assert!(
            err.contains(&format!("the FROM image `{ONLY}` (sha256:"))
                && err.contains(&format!(
                    "handed over from envcraft's image store to {builder}"
                )),
            "{err}"
        );
        // The built image has what the RUN wrote from the base's file.
        let (code, out, err) = world.envcraft(
            &[
                "exec",
                "--workspace",
                ws.to_str().unwrap(),
                "--image",
                &name,
                "--",
                "/bin/cat",
                "/opt/seen",
            ],
            None,
        );
        assert_eq!(code, 0, "{out}\n{err}");
        assert_eq!(out, "only-in-store\n", "{err}");
        let images = world.podman_images();
        assert!(!world.podman_has(ONLY), "{builder} kept the base: {images}");
        assert!(!images.contains("envcraft-build"), "{builder}: {images}");
        assert!(images.trim().is_empty(), "{builder} left: {images}");
    }

    // A failing step after the handover: the base is taken back all the same.
    fs::write(
        ctx.join("Dockerfile"),
        format!("FROM {ONLY}\nRUN cat /opt/only && nosuchcmd\n"),
    )
    .unwrap();
    let (code, out, err) = world.envcraft(
        &["image", "build", ctx.to_str().unwrap(), "--name", "bad"],
        None,
    );
    assert_eq!(code, 125, "{out}\n{err}");
    for words in [
        "handed over from envcraft's image store",
        "nosuchcmd: not found",
        "only-in-store",
    ] {
        assert!(err.contains(words), "{words:?} not in: {err}");
    }
    assert!(
        world.podman_images().trim().is_empty(),
        "{}",
        world.podman_images()
    );

    // A FROM neither holds: the builder's own error names it, nothing handed over.
    fs::write(
        ctx.join("Dockerfile"),
        "FROM localhost/envcraft-test-nowhere:1\n",
    )
    .unwrap();
    let (code, out, err) = world.envcraft(
        &["image", "build", ctx.to_str().unwrap(), "--name", "nowhere"],
        None,
    );
    assert_eq!(code, 125, "{out}\n{err}");
    assert!(err.contains("envcraft-test-nowhere"), "{err}");
    assert!(!err.contains("handed over"), "{err}");
}

#[test]
fn a_harbor_task_over_a_base_only_the_store_holds_scores_oracle_one() {
    if !ready() {
        return;
    }
    let world = world();
    let task: PathBuf = world.path().join("over-store");
    for d in ["tests", "solution", "environment"] {
        fs::create_dir_all(task.join(d)).unwrap();
    }
    fs::write(task.join("instruction.md"), "Write done to /app/answer.\n").unwrap();
    fs::write(
        task.join("task.toml"),
        "schema_version = \"1.4\"\n\n[environment]\nnetwork_mode = \"no-network\"\n",
    )
    .unwrap();
    fs::write(
        task.join("environment/Dockerfile"),
        format!("FROM {ONLY}\nRUN {CHECKS}\nWORKDIR /app\n"),
    )
    .unwrap();
    let test_sh = "#!/bin/sh\nok=1\n[ \"$(cat /opt/seen)\" = only-in-store ] || ok=0\n\
                   [ \"$(cat /app/answer 2>/dev/null)\" = done ] || ok=0\n\
                   echo $ok > /logs/verifier/reward.txt\n";
    for (path, text) in [
        ("tests/test.sh", test_sh),
        ("solution/solve.sh", "#!/bin/sh\necho done > /app/answer\n"),
    ] {
        fs::write(task.join(path), text).unwrap();
        fs::set_permissions(task.join(path), fs::Permissions::from_mode(0o755)).unwrap();
    }
    let (code, out, err) = world.envcraft(&["run", task.to_str().unwrap(), "--json"], None);
    assert_eq!(code, 0, "{out}\n{err}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["reward"].as_f64(), Some(1.0), "{out}\n{err}");
    assert!(
        err.contains("handed over from envcraft's image store to podman"),
        "{err}"
    );
    assert!(
        err.contains("built by podman into the image `harbor-over-store:"),
        "{err}"
    );
    assert!(
        world.podman_images().trim().is_empty(),
        "{}",
        world.podman_images()
    );
}
