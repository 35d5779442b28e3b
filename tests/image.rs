//! The image store through the real binary: imports of OCI layouts and docker-archives,
//! digests checked, layers shared and unpacked once, `ls`/`inspect`/`rm`/`gc`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "image_fixture/mod.rs"]
mod image_fixture;

use std::fs;

use image_fixture::{
    Layer, Tar, config_json, docker_archive, image_cmd, layer_root, oci_layout, oci_layout_with,
    stderr, store_layers,
};

fn two_layers() -> Vec<Layer> {
    vec![
        Layer::gzip(
            Tar::new()
                .dir("etc")
                .file("etc/os-release", b"ID=handmade\n")
                .dir("data")
                .file("data/old", b"old")
                .finish(),
        ),
        Layer::zstd(
            Tar::new()
                .dir("data")
                .file("data/.wh..wh..opq", b"")
                .file("data/new", b"new")
                .finish(),
        ),
    ]
}

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", stderr(out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn an_oci_layout_and_a_docker_archive_of_one_image_import_as_one_image_sharing_layers() {
    if !common::sandbox_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let layers = two_layers();
    let config = config_json(&layers, &["PATH=/usr/bin:/bin"]);
    let layout = dir.path().join("layout");
    let id = oci_layout_with(&layout, &layers, &config);
    // The same layers uncompressed, as `docker save` writes them.
    let plain: Vec<Layer> = layers.iter().map(|l| Layer::plain(l.tar.clone())).collect();
    let archive = dir.path().join("image.tar");
    let archive_id = docker_archive(&archive, &plain, &config, "handmade:1");
    assert_eq!(id, archive_id);
    let state = dir.path().join("state");
    let out = image_cmd(
        &state,
        &["import", layout.to_str().unwrap(), "--name", "from-oci"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = image_cmd(&state, &["import", archive.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let a = json(&image_cmd(&state, &["inspect", "from-oci"]));
    let b = json(&image_cmd(&state, &["inspect", "handmade:1"]));
    assert_eq!(a["id"], serde_json::json!(id));
    assert_eq!(a["id"], b["id"]);
    assert_eq!(a["layers"], b["layers"]);
    assert_eq!(
        a["config"]["Env"],
        serde_json::json!(["PATH=/usr/bin:/bin"])
    );
    let dirs: Vec<_> = store_layers(&state)
        .into_iter()
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(dirs.len(), 2, "each layer is unpacked once: {dirs:?}");
    let root = layer_root(&state, &layers[0].diff_id());
    assert_eq!(
        fs::read(root.join("etc/os-release")).unwrap(),
        b"ID=handmade\n"
    );
    // An OCI archive (a tar of the layout) imports as the layout does.
    let oci_tar = dir.path().join("layout.tar");
    let status = std::process::Command::new("tar")
        .arg("-C")
        .arg(&layout)
        .arg("-cf")
        .arg(&oci_tar)
        .arg(".")
        .status()
        .unwrap();
    assert!(status.success());
    let out = image_cmd(
        &state,
        &["import", oci_tar.to_str().unwrap(), "--name", "from-tar"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let c = json(&image_cmd(&state, &["inspect", "from-tar"]));
    assert_eq!(c["id"], a["id"]);
    let ls = json(&image_cmd(&state, &["ls", "--json"]));
    let names: Vec<&str> = ls
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["from-oci", "from-tar", "handmade:1"]);
}

#[test]
fn a_layer_whose_bytes_do_not_match_the_manifest_digest_is_refused_and_not_kept() {
    if !common::sandbox_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    let layers = two_layers();
    oci_layout(&layout, &layers);
    // Swap the first layer's blob for another valid layer: same name, other bytes.
    let blob = layout.join("blobs/sha256").join(&layers[0].digest()[7..]);
    fs::write(
        &blob,
        image_fixture::gzip(&Tar::new().file("evil", b"x").finish()),
    )
    .unwrap();
    let state = dir.path().join("state");
    let out = image_cmd(&state, &["import", layout.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(
        err.contains(&layers[0].digest()) && err.contains("expected"),
        "{err}"
    );
    assert!(
        store_layers(&state).iter().all(|p| !p.is_dir()),
        "nothing kept"
    );
    // A diff id that does not match the config is refused the same way.
    let other = dir.path().join("other");
    let mut config: serde_json::Value = serde_json::from_slice(&config_json(&layers, &[])).unwrap();
    config["rootfs"]["diff_ids"][1] = serde_json::json!(format!("sha256:{}", "0".repeat(64)));
    oci_layout_with(&other, &layers, &serde_json::to_vec(&config).unwrap());
    let out = image_cmd(&state, &["import", other.to_str().unwrap()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(err.contains("diff id"), "{err}");
    let ls = json(&image_cmd(&state, &["ls", "--json"]));
    assert_eq!(ls, serde_json::json!([]));
}

#[test]
fn a_missing_blob_and_a_directory_that_is_no_image_are_named_in_the_error() {
    if !common::sandbox_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    let layers = two_layers();
    oci_layout(&layout, &layers);
    fs::remove_file(layout.join("blobs/sha256").join(&layers[1].digest()[7..])).unwrap();
    let state = dir.path().join("state");
    let out = image_cmd(&state, &["import", layout.to_str().unwrap()]);
    let err = stderr(&out);
    assert!(
        err.contains(&format!("has no blobs/sha256/{}", &layers[1].digest()[7..])),
        "{err}"
    );
    let empty = dir.path().join("empty");
    fs::create_dir(&empty).unwrap();
    let out = image_cmd(&state, &["import", empty.to_str().unwrap()]);
    let err = stderr(&out);
    assert!(err.contains("neither an OCI image layout"), "{err}");
    let out = image_cmd(&state, &["inspect", "nothing-here"]);
    assert!(stderr(&out).contains("no image named \"nothing-here\""));
    let out = image_cmd(
        &state,
        &["import", layout.to_str().unwrap(), "--name", "../x"],
    );
    assert!(
        stderr(&out).contains("is not an image name"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn concurrent_imports_of_one_image_unpack_each_layer_once_and_leave_no_partial() {
    if !common::sandbox_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    // A layer big enough that the imports overlap.
    let files: Vec<(String, Vec<u8>)> = (0..2000)
        .map(|i| (format!("f/{i}"), vec![b'x'; 4096]))
        .collect();
    let mut tar = Tar::new().dir("f");
    for (name, data) in &files {
        tar = tar.file(name, data);
    }
    let layers = vec![Layer::gzip(tar.finish())];
    oci_layout(&layout, &layers);
    let state = dir.path().join("state");
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let (state, layout) = (state.clone(), layout.clone());
            std::thread::spawn(move || {
                image_cmd(
                    &state,
                    &[
                        "import",
                        layout.to_str().unwrap(),
                        "--name",
                        &format!("c{i}"),
                    ],
                )
            })
        })
        .collect();
    for h in handles {
        let out = h.join().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let entries = store_layers(&state);
    let dirs: Vec<_> = entries.iter().filter(|p| p.is_dir()).collect();
    assert_eq!(dirs.len(), 1, "{entries:?}");
    assert!(
        entries
            .iter()
            .all(|p| !p.to_string_lossy().contains(".partial-")),
        "{entries:?}"
    );
    let root = layer_root(&state, &layers[0].diff_id());
    assert_eq!(fs::read_dir(root.join("f")).unwrap().count(), 2000);
}

#[test]
fn gc_removes_only_layers_no_image_holds_and_what_a_killed_import_left() {
    if !common::sandbox_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let layers = two_layers();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    oci_layout(&a, &layers);
    // b shares a's first layer only.
    oci_layout(&b, &[Layer::gzip(layers[0].tar.clone())]);
    let state = dir.path().join("state");
    for (p, n) in [(&a, "a"), (&b, "b")] {
        let out = image_cmd(&state, &["import", p.to_str().unwrap(), "--name", n]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    // What a killed import leaves: a partial directory, never used.
    let partial = state.join("images/layers/.partial-dead-1-2");
    fs::create_dir_all(partial.join("root/x")).unwrap();
    let out = image_cmd(&state, &["rm", "a"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report = json(&image_cmd(&state, &["gc", "--json"]));
    assert_eq!(report["layers_removed"], 1);
    assert_eq!(report["partial_removed"], 1);
    assert_eq!(report["layers_kept"], 1);
    assert!(layer_root(&state, &layers[0].diff_id()).is_dir());
    assert!(!layer_root(&state, &layers[1].diff_id()).exists());
    assert!(!partial.exists());
    let out = image_cmd(&state, &["rm", "a"]);
    assert!(stderr(&out).contains("no image named"));
}

/// A two-layer image that can run `dash` and `cat`: the host's tools and libc, then files.
fn runnable_image(dir: &std::path::Path, state: &std::path::Path, name: &str) -> Vec<Layer> {
    let layers = vec![
        Layer::gzip(
            image_fixture::host_tools_layer()
                .dir("etc")
                .file("etc/os-release", b"ID=handmade\n")
                .file("etc/shadow", b"image-secret\n")
                .dir("opt")
                .file("opt/tool.txt", b"from /opt\n")
                .dir("data")
                .file("data/old", b"old")
                .dir("a")
                .file("a/keep", b"k")
                .file("a/gone", b"g")
                .finish(),
        ),
        Layer::zstd(
            Tar::new()
                .dir("a")
                .file("a/.wh.gone", b"")
                .dir("data")
                .file("data/.wh..wh..opq", b"")
                .file("data/new", b"new")
                .finish(),
        ),
    ];
    let layout = dir.join(format!("layout-{name}"));
    oci_layout(&layout, &layers);
    let out = image_cmd(state, &["import", layout.to_str().unwrap(), "--name", name]);
    assert!(out.status.success(), "{}", stderr(&out));
    layers
}

#[test]
fn exec_over_an_image_sees_the_images_files_with_docker_whiteouts_and_not_the_hosts() {
    if !common::sandbox_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let layers = runnable_image(dir.path(), &state, "tools");
    let before = common::Snapshot::of(&state.join("images"));
    let workspace = common::Template::new();
    let script = "cat /etc/os-release; for f in /data/* /a/*; do echo \"$f\"; done; \
        test -e /etc/debian_version && echo host-etc; test -e /usr/bin/python3 && echo host-usr; \
        echo \"FROM_IMAGE=$FROM_IMAGE\"; echo \"PATH=$PATH\"; cat README.txt >/dev/null && echo workspace; \
        echo \"shadow=[$(cat /etc/shadow)]\"; cat /opt/tool.txt; echo changed > made-here";
    let out = common::Exec::new(workspace.path())
        .env("ENVCRAFT_STATE_DIR", state.to_str().unwrap())
        .args(&["--image", "tools"])
        .run(&["/bin/dash", "-c", script]);
    image_fixture::assert_ran(&out);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "ID=handmade",
            "/data/new",
            "/a/keep",
            "FROM_IMAGE=1",
            // The image's PATH first, then the policy's entries it lacks.
            "PATH=/usr/bin:/bin:/usr/local/bin:/.envcraft/bin",
            "workspace",
            // The policy's hidden paths are masked in an image as on the host.
            "shadow=[]",
            // All of the image is readable, not only the policy's system paths.
            "from /opt",
        ],
        "{}",
        out.stderr
    );
    let enforced = &out.json.as_ref().unwrap()["enforced"];
    let id = serde_json::from_slice::<serde_json::Value>(
        &image_cmd(&state, &["inspect", "tools"]).stdout,
    )
    .unwrap()["id"]
        .clone();
    assert_eq!(
        enforced["root"],
        serde_json::json!(format!("image tools@{}", id.as_str().unwrap()))
    );
    // The session's changes are its own: the store and the template are as they were.
    assert!(
        before
            .diff(&common::Snapshot::of(&state.join("images")))
            .is_empty()
    );
    workspace.assert_unchanged();
    assert!(
        layer_root(&state, &layers[1].diff_id())
            .join("data/new")
            .is_file()
    );
}

#[test]
fn an_environment_naming_an_image_runs_its_tools_and_its_grader_over_that_image() {
    if !common::sandbox_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    runnable_image(dir.path(), &state, "tools");
    let env = dir.path().join("workspaces/on-image");
    fs::create_dir_all(env.join("files")).unwrap();
    fs::create_dir_all(env.join("tasks/os")).unwrap();
    fs::write(
        env.join("env.toml"),
        "name = \"on-image\"\ndescription = \"d\"\ntools = [\"exec\"]\nbase_time = \"2026-03-02T09:00:00Z\"\nimage = \"tools\"\n",
    )
    .unwrap();
    fs::write(env.join("docs.md"), "An image.\n").unwrap();
    fs::write(env.join("files/seed.txt"), "seed\n").unwrap();
    // The grader scores 1 only over the image (its os-release) and with the agent's file.
    fs::write(
        env.join("tasks/os/task.toml"),
        "prompt = \"Copy /etc/os-release to os.txt\"\n[verifier]\nkind = \"command\"\ncommand = \"cat /etc/os-release /workspace/os.txt | { read a; read b; test \\\"$a$b\\\" = ID=handmadeID=handmade && echo 1 || echo 0; }\"\n",
    )
    .unwrap();
    let actions = dir.path().join("actions.jsonl");
    fs::write(
        &actions,
        "{\"tool\": \"exec\", \"args\": {\"command\": \"cat /etc/os-release > os.txt; cat os.txt\"}}\n",
    )
    .unwrap();
    let out = std::process::Command::new("bash")
        .arg(common::contained().unwrap())
        .arg(common::envcraft())
        .args(["run", "on-image/os", "--json", "--workspaces"])
        .arg(dir.path().join("workspaces"))
        .arg("--actions")
        .arg(&actions)
        .arg("--state-dir")
        .arg(&state)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let result = report["actions"][0]["result"].to_string();
    assert!(result.contains("ID=handmade"), "{report}");
    assert_eq!(report["reward"], serde_json::json!(1.0), "{report}");
    // An environment naming an image that is not there says which, and where to look.
    fs::write(
        env.join("env.toml"),
        "name = \"on-image\"\ndescription = \"d\"\ntools = [\"exec\"]\nbase_time = \"2026-03-02T09:00:00Z\"\nimage = \"absent\"\n",
    )
    .unwrap();
    let out = std::process::Command::new("bash")
        .arg(common::contained().unwrap())
        .arg(common::envcraft())
        .args(["run", "on-image/os", "--json", "--workspaces"])
        .arg(dir.path().join("workspaces"))
        .arg("--actions")
        .arg(&actions)
        .arg("--state-dir")
        .arg(&state)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(
        err.contains("environment on-image runs over image \"absent\"")
            && err.contains("envcraft image ls"),
        "{err}"
    );
}

#[test]
fn a_root_filesystem_tar_imports_as_a_one_layer_image_that_runs() {
    if !common::sandbox_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let rootfs = dir.path().join("rootfs.tar.zst");
    let tar = image_fixture::host_tools_layer()
        .dir("etc")
        .file("etc/os-release", b"ID=rootfs\n")
        .finish();
    fs::write(&rootfs, image_fixture::zstd(&tar)).unwrap();
    let state = dir.path().join("state");
    let out = image_cmd(&state, &["import", "--rootfs", rootfs.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let record = json(&image_cmd(&state, &["inspect", "rootfs"]));
    assert_eq!(
        record["layers"],
        serde_json::json!([image_fixture::sha256(&tar)])
    );
    let workspace = common::Template::new();
    let out = common::Exec::new(workspace.path())
        .env("ENVCRAFT_STATE_DIR", state.to_str().unwrap())
        .args(&["--image", "rootfs"])
        .run(&["cat", "/etc/os-release"]);
    assert_eq!(out.stdout, "ID=rootfs\n", "{}", out.envcraft_stderr);
    // The same tar again: the same id, its layer kept once.
    let out = image_cmd(
        &state,
        &[
            "import",
            "--rootfs",
            rootfs.to_str().unwrap(),
            "--name",
            "again",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let again = json(&image_cmd(&state, &["inspect", "again"]));
    assert_eq!(again["id"], record["id"]);
    assert_eq!(
        store_layers(&state).iter().filter(|p| p.is_dir()).count(),
        1
    );
    // A crafted root filesystem is refused like a crafted layer, naming the file.
    let evil = dir.path().join("evil.tar");
    fs::write(&evil, Tar::new().file("../x", b"x").finish()).unwrap();
    let out = image_cmd(&state, &["import", "--rootfs", evil.to_str().unwrap()]);
    let err = stderr(&out);
    assert!(
        err.contains("evil.tar") && err.contains("entry ../x"),
        "{err}"
    );
    assert!(
        store_layers(&state)
            .iter()
            .all(|p| !p.to_string_lossy().contains(".partial"))
    );
}

#[test]
fn an_images_root_only_files_are_the_sandbox_roots_when_envcraft_runs_as_root() {
    if !common::sandbox_ready() {
        return;
    }
    // Under host root the sandbox's root is an unused host id; the store's files belong to the
    // root that imported them, so without an idmapped view of the layers the image's root-only
    // files would be unreadable inside (shown as `nobody`), unlike in a container.
    if !nix::unistd::geteuid().is_root() {
        common::skip("needs root: only host root runs sandboxes as an unused id");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let layout = dir.path().join("layout");
    let layers = vec![Layer::gzip(
        image_fixture::host_tools_layer()
            .dir_mode("private", 0o700)
            .file_mode("private/key", b"only-root\n", 0o600)
            .dir("etc")
            .file_mode("etc/app.conf", b"mode 0640\n", 0o640)
            .finish(),
    )];
    oci_layout(&layout, &layers);
    let out = image_cmd(
        &state,
        &["import", layout.to_str().unwrap(), "--name", "private"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let script = "cat /private/key; cat /etc/app.conf; \
        (echo x > /private/new) 2>/dev/null && echo wrote || echo read-only";
    let out = image_fixture::exec_over(&state, "private", script);
    image_fixture::assert_ran(&out);
    assert_eq!(
        out.stdout.lines().collect::<Vec<_>>(),
        ["only-root", "mode 0640", "read-only"],
        "{}",
        out.stderr
    );
    let enforced = &out.json.as_ref().unwrap()["enforced"];
    assert_eq!(enforced["uid_mapping"], "idmapped", "{enforced}");
}
