//! Harbor tasks whose image needs a builder or a registry, through the real binary: `envcraft
//! image build` with the installed Podman (and Buildah), over a base image made here without
//! network (a root filesystem of Debian's static busybox, `podman import`ed into a Podman
//! storage of the test's own); a Harbor task whose Dockerfile `RUN`s a step, built on the fly
//! (oracle 1.0, no action 0.0, built once); a task whose `docker_image` is pushed with skopeo
//! into a real `docker-registry` on 127.0.0.1 and pulled on the fly, and so is the `FROM` of a
//! Dockerfile without builder steps; `verify` and `tools` of a task building its image as `run`
//! does; a failing `RUN` step; and, with a PATH lacking the builders, the refusal naming them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs;
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PODMAN: &str = common::PODMAN;
const BUILDAH: &str = "/usr/bin/buildah";
const BUSYBOX: &str = "/bin/busybox";
const REGISTRY: &str = "/usr/bin/docker-registry";
const SKOPEO: &str = "/usr/bin/skopeo";

/// Whether the builder test can run: root (for `contained`), Podman and busybox-static.
fn ready(also: &[&str]) -> bool {
    if !common::sandbox_ready() {
        return false;
    }
    for tool in [PODMAN, BUSYBOX].iter().chain(also) {
        if !Path::new(tool).is_file() {
            common::skip(&format!(
                "{tool} is missing (apt-get install runc podman buildah busybox-static docker-registry skopeo)"
            ));
            return false;
        }
    }
    true
}

/// A Podman storage and an envcraft state root of the test's own, and [`BASE`] in that storage.
type World = common::PodmanWorld;

const BASE: &str = common::BUSYBOX_BASE;

/// A directory that is an empty PATH (no builder on it).
fn no_builders(world: &World) -> PathBuf {
    let p = world.path().join("empty-path");
    fs::create_dir_all(&p).unwrap();
    p
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn reward(out: &str) -> Option<f64> {
    let v: serde_json::Value =
        serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));
    v["reward"].as_f64()
}

/// `envcraft run TASK` with no actions: it runs and scores 0.0; its stderr.
fn no_actions_score_nothing(world: &World, task: &str) -> String {
    let empty = world.path().join("none.jsonl");
    fs::write(&empty, "").unwrap();
    let (code, out, err) = world.envcraft(
        &["run", task, "--json", "--actions", empty.to_str().unwrap()],
        None,
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(reward(&out), Some(0.0), "{out}\n{err}");
    err
}

/// A Harbor task at `dir`: `environment/` from `files` (path, text), task.toml's
/// `[environment]` lines `env_lines`; the test checks `/opt/x` holds `built` and that the
/// agent wrote `done` to `/app/answer`.
fn write_task(dir: &Path, env_lines: &str, files: &[(&str, &str)]) -> PathBuf {
    for d in ["tests", "solution", "environment"] {
        fs::create_dir_all(dir.join(d)).unwrap();
    }
    fs::write(
        dir.join("task.toml"),
        format!(
            "schema_version = \"1.4\"\n\n[environment]\nnetwork_mode = \"no-network\"\n{env_lines}"
        ),
    )
    .unwrap();
    fs::write(dir.join("instruction.md"), "Write done to /app/answer.\n").unwrap();
    for (path, text) in files {
        fs::write(dir.join("environment").join(path), text).unwrap();
    }
    let test_sh = "#!/bin/sh\nok=1\n[ \"$(cat /opt/x)\" = built ] || ok=0\n\
                   [ \"$(cat /app/answer 2>/dev/null)\" = done ] || ok=0\n\
                   [ -z \"$SEED\" ] || [ \"$(cat /app/seed.txt)\" = \"$SEED\" ] || ok=0\n\
                   echo $ok > /logs/verifier/reward.txt\n";
    for (path, text) in [
        ("tests/test.sh", test_sh),
        ("solution/solve.sh", "#!/bin/sh\necho done > /app/answer\n"),
    ] {
        fs::write(dir.join(path), text).unwrap();
        fs::set_permissions(dir.join(path), fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir.to_path_buf()
}

const BUILT_DOCKERFILE: &str = "FROM localhost/envcraft-test-busybox:1\nWORKDIR /app\n\
COPY seed.txt ./\nRUN echo built > /opt/x\n";

/// A task at `dir` whose Dockerfile ([`BUILT_DOCKERFILE`]) needs a builder.
fn built_task(dir: &Path) -> PathBuf {
    write_task(
        dir,
        "",
        &[("Dockerfile", BUILT_DOCKERFILE), ("seed.txt", "seed\n")],
    )
}

#[test]
fn image_build_brings_the_builders_image_into_the_store_and_removes_its_own() {
    if !ready(&[]) {
        return;
    }
    let world = World::new(BUSYBOX);
    let ctx = world.path().join("ctx");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(
        ctx.join("Dockerfile"),
        "FROM localhost/envcraft-test-busybox:1\nRUN echo built > /opt/x\n",
    )
    .unwrap();
    let ctx_arg = ctx.to_str().unwrap();
    let mut builders = vec!["podman"];
    if Path::new(BUILDAH).is_file() {
        builders.push("buildah");
    } else {
        common::skip("buildah is missing (apt-get install buildah): only podman is tried");
    }
    for builder in builders {
        for isolation in ["oci", "chroot"] {
            let name = format!("built-{builder}-{isolation}");
            let (code, out, err) = world.envcraft(
                &[
                    "image",
                    "build",
                    ctx_arg,
                    "--name",
                    &name,
                    "--builder",
                    builder,
                    "--isolation",
                    isolation,
                ],
                None,
            );
            assert_eq!(code, 0, "{builder} {isolation}: {out}\n{err}");
            assert!(out.starts_with(&format!("built {name} (sha256:")), "{out}");
            let (code, out, err) = world.envcraft(&["image", "inspect", &name], None);
            assert_eq!(code, 0, "{err}");
            let record: serde_json::Value = serde_json::from_str(&out).unwrap();
            assert_eq!(record["layers"].as_array().unwrap().len(), 2, "{record}");
            assert!(
                record["source"]
                    .as_str()
                    .unwrap()
                    .contains(&format!("by {builder} ({isolation} isolation)")),
                "{record}"
            );
        }
    }
    assert!(
        !world.podman_images().contains("envcraft-build"),
        "the builder's image was left: {}",
        world.podman_images()
    );

    // A failing step: the builder's words, nothing in the store, nothing left in the builder.
    fs::write(
        ctx.join("Dockerfile.bad"),
        "FROM localhost/envcraft-test-busybox:1\nRUN echo about to fail && nosuchcmd --now\n",
    )
    .unwrap();
    let bad = ctx.join("Dockerfile.bad");
    let (code, out, err) = world.envcraft(
        &[
            "image",
            "build",
            ctx_arg,
            "-f",
            bad.to_str().unwrap(),
            "--name",
            "bad",
        ],
        None,
    );
    assert_eq!(code, 125, "{out}\n{err}");
    for words in [
        "podman failed to build the image",
        "nosuchcmd: not found",
        "about to fail",
    ] {
        assert!(err.contains(words), "{words:?} not in: {err}");
    }
    let (code, _, err) = world.envcraft(&["image", "inspect", "bad"], None);
    assert_ne!(code, 0);
    assert!(err.contains("no image named \"bad\""), "{err}");
    assert!(!world.podman_images().contains("envcraft-build"));
    let builds = world.state().join("images/builds");
    assert_eq!(
        fs::read_dir(&builds).unwrap().count(),
        0,
        "scratch left in {}",
        builds.display()
    );

    // No builder on PATH: which ones were looked for, and how to bring an image in otherwise.
    let (code, _, err) = world.envcraft(
        &["image", "build", ctx_arg, "--name", "none"],
        Some(&no_builders(&world)),
    );
    assert_eq!(code, 125, "{err}");
    for words in [
        "no image builder is installed",
        "podman and buildah",
        "envcraft image import",
    ] {
        assert!(err.contains(words), "{words:?} not in: {err}");
    }
}

#[test]
fn a_harbor_task_with_a_run_step_is_built_once_oracle_one_nop_zero() {
    if !ready(&[]) {
        return;
    }
    let world = World::new(BUSYBOX);
    let task = built_task(&world.path().join("ds/built"));
    // The test also checks the workspace's seed.txt, which only the built image has.
    fs::write(
        task.join("task.toml"),
        "schema_version = \"1.4\"\n\n[environment]\nnetwork_mode = \"no-network\"\n\n[verifier.env]\nSEED = \"seed\"\n",
    )
    .unwrap();
    let t = task.to_str().unwrap();
    let (code, out, err) = world.envcraft(&["run", t, "--json"], None);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(reward(&out), Some(1.0), "{out}\n{err}");
    assert!(
        err.contains("needs a builder: the Dockerfile is built by podman"),
        "{err}"
    );
    assert!(
        err.contains("built by podman into the image `harbor-built:"),
        "{err}"
    );
    assert!(
        err.contains("file(s) at /app are the workspace's files"),
        "{err}"
    );

    let err = no_actions_score_nothing(&world, t);
    assert!(
        err.contains("is unchanged since it was built"),
        "built again: {err}"
    );

    // `import harbor` names the built image and writes the image's working directory.
    let dest = world.path().join("imported");
    let (code, out, err) = world.envcraft(&["import", "harbor", t, dest.to_str().unwrap()], None);
    assert_eq!(code, 0, "{out}\n{err}");
    let env = fs::read_to_string(dest.join("harbor-built/env.toml")).unwrap();
    assert!(env.contains("image = \"harbor-built:"), "{env}");
    let seed = fs::read_to_string(dest.join("harbor-built/files/seed.txt")).unwrap();
    assert_eq!(seed, "seed\n");

    // `audit` and `suite` of the dataset use the same image.
    let ds = world.path().join("ds");
    let (code, out, err) = world.envcraft(&["audit", t, "--json"], None);
    assert!(code == 0 || code == 1, "{out}\n{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    // The reference over the built image (its `sensitive` check flips bytes with python3, which
    // the busybox image lacks: the audit as a whole does not pass, exit 1).
    let reference = &report["tasks"][0]["checks"][1];
    assert_eq!(reference["name"], "reference", "{report}");
    assert_eq!(reference["detail"], "reward 1.0", "{report}\n{err}");
    let (code, out, err) = world.envcraft(&["suite", ds.to_str().unwrap(), "--json"], None);
    assert_eq!(code, 0, "{out}\n{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        report["totals"]["mean_reward"].as_f64(),
        Some(1.0),
        "{report}\n{err}"
    );
    assert!(!err.contains("built by podman into"), "built again: {err}");

    // A changed environment/ is built again, under another name.
    fs::write(task.join("environment/seed.txt"), "seed two\n").unwrap();
    let (_, out, err) = world.envcraft(&["run", t, "--json"], None);
    assert_eq!(
        reward(&out),
        Some(0.0),
        "the test wants the old seed: {out}\n{err}"
    );
    assert!(
        err.contains("built by podman into the image"),
        "not built again: {err}"
    );
    assert!(!world.podman_images().contains("envcraft-build"));

    // No RUN, but a COPY outside the working directory: built too.
    fs::write(task.join("environment/seed.txt"), "seed\n").unwrap();
    fs::write(task.join("environment/x.txt"), "built\n").unwrap();
    fs::write(
        task.join("environment/Dockerfile"),
        "FROM localhost/envcraft-test-busybox:1\nWORKDIR /app\nCOPY seed.txt ./\nCOPY x.txt /opt/x\n",
    )
    .unwrap();
    let (code, out, err) = world.envcraft(&["run", t, "--json"], None);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(reward(&out), Some(1.0), "{out}\n{err}");
    assert!(err.contains("outside the working directory /app"), "{err}");
    assert!(err.contains("built by podman into the image"), "{err}");

    // A failing RUN step: the builder's words, before anything starts.
    fs::write(
        task.join("environment/Dockerfile"),
        "FROM localhost/envcraft-test-busybox:1\nRUN nosuchcmd --now\n",
    )
    .unwrap();
    let (code, out, err) = world.envcraft(&["run", t, "--json"], None);
    assert_eq!(code, 125, "{out}\n{err}");
    for words in [
        "could not be built",
        "podman failed to build the image",
        "nosuchcmd: not found",
    ] {
        assert!(err.contains(words), "{words:?} not in: {err}");
    }
    assert!(out.is_empty(), "a session ran: {out}");
}

#[test]
fn verify_and_tools_of_a_harbor_task_build_its_image_as_run_does() {
    if !ready(&[]) {
        return;
    }
    let world = World::new(BUSYBOX);
    let task = built_task(&world.path().join("built"));
    let t = task.to_str().unwrap();
    // The final workspace of an agent that did the task: its grader (tests/test.sh) passes only
    // over the built image, which alone has /opt/x.
    let ws = world.path().join("ws");
    fs::create_dir_all(&ws).unwrap();
    fs::write(ws.join("answer"), "done\n").unwrap();
    let ws_arg = ws.to_str().unwrap();
    let (code, out, err) = world.envcraft(&["verify", t, "--workspace", ws_arg, "--json"], None);
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(reward(&out), Some(1.0), "{out}\n{err}");
    assert!(
        err.contains("built by podman into the image `harbor-built:"),
        "{err}"
    );
    fs::remove_file(ws.join("answer")).unwrap();
    let (_, out, err) = world.envcraft(&["verify", t, "--workspace", ws_arg, "--json"], None);
    assert_eq!(reward(&out), Some(0.0), "{out}\n{err}");
    assert!(err.contains("is unchanged since it was built"), "{err}");

    let (code, out, err) = world.envcraft(&["tools", t, "--format", "json"], None);
    assert_eq!(code, 0, "{out}\n{err}");
    let tools: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        tools
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "exec"),
        "{tools}"
    );
    assert!(err.contains("is unchanged since it was built"), "{err}");

    // Without a builder and with an empty store, `tools` refuses as `run` does.
    let fresh = world.path().join("fresh-state");
    let (code, out, err) = world.envcraft(
        &["tools", t, "--state-dir", fresh.to_str().unwrap()],
        Some(&no_builders(&world)),
    );
    assert_ne!(code, 0, "{out}\n{err}");
    assert!(err.contains("no image builder is installed"), "{err}");
}

#[test]
fn without_a_builder_a_run_step_is_refused_naming_the_builders() {
    if !ready(&[]) {
        return;
    }
    let world = World::new(BUSYBOX);
    let task = built_task(&world.path().join("built"));
    let t = task.to_str().unwrap();
    let dest = world.path().join("out");
    for args in [
        vec!["run", t],
        vec!["import", "harbor", t, dest.to_str().unwrap()],
    ] {
        let (code, out, err) = world.envcraft(&args, Some(&no_builders(&world)));
        let said = format!("{out}{err}");
        assert_ne!(code, 0, "{said}");
        for words in [
            "line 4",
            "RUN echo built > /opt/x",
            "needs a builder",
            "no image builder is installed to run it (looked for podman and buildah on PATH)",
        ] {
            assert!(said.contains(words), "{args:?}: {words:?} not in: {said}");
        }
    }
    assert!(!dest.join("harbor-built").exists());
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A docker-registry on 127.0.0.1 (its config and storage under `dir`), stopped when dropped.
struct Registry {
    child: Child,
    port: u16,
}

impl Registry {
    fn start(dir: &Path) -> Registry {
        let port = free_port();
        let config = dir.join("registry.yml");
        fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
                dir.join("registry").display()
            ),
        )
        .unwrap();
        let mut child = Command::new(REGISTRY)
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                child.try_wait().unwrap().is_none(),
                "docker-registry exited"
            );
            assert!(Instant::now() < deadline, "docker-registry never listened");
            std::thread::sleep(Duration::from_millis(20));
        }
        Registry { child, port }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_docker_image_the_store_lacks_is_pulled_on_the_fly_and_pinned() {
    if !ready(&[REGISTRY, SKOPEO]) {
        return;
    }
    let world = World::new(BUSYBOX);
    let registry = Registry::start(world.path());
    // The image: the base with /opt/x, built by Podman and pushed with skopeo.
    let ctx = world.path().join("ctx");
    fs::create_dir_all(&ctx).unwrap();
    fs::write(
        ctx.join("Dockerfile"),
        "FROM localhost/envcraft-test-busybox:1\nRUN echo built > /opt/x\n",
    )
    .unwrap();
    let out = world.podman(&["build", "-t", "localhost/pushed", ctx.to_str().unwrap()]);
    assert!(out.status.success(), "podman build: {}", stderr(&out));
    let archive = world.path().join("pushed.tar");
    let out = world.podman(&[
        "save",
        "--format",
        "oci-archive",
        "-o",
        archive.to_str().unwrap(),
        "localhost/pushed",
    ]);
    assert!(out.status.success(), "podman save: {}", stderr(&out));
    let reference = format!("127.0.0.1:{}/harbor/app:1", registry.port);
    let out = Command::new(SKOPEO)
        .args(["copy", "--quiet", "--dest-tls-verify=false"])
        .arg(format!("oci-archive:{}", archive.display()))
        .arg(format!("docker://{reference}"))
        .output()
        .unwrap();
    assert!(out.status.success(), "skopeo: {}", stderr(&out));

    let task = write_task(
        &world.path().join("pulled"),
        &format!("docker_image = \"{reference}\"\nworkdir = \"/app\"\n"),
        &[],
    );
    let t = task.to_str().unwrap();
    let (code, out, err) = world.envcraft(&["run", t, "--json"], Some(&no_builders(&world)));
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(reward(&out), Some(1.0), "{out}\n{err}");
    let pinned = format!("127.0.0.1:{}/harbor/app@sha256:", registry.port);
    assert!(
        err.contains(&format!(
            "pulled into envcraft's image store; the environment names it pinned: {pinned}"
        )),
        "{err}"
    );
    let (_, list, _) = world.envcraft(&["image", "ls"], None);
    assert!(
        list.contains(&reference) && list.contains(&pinned),
        "{list}"
    );

    let err = no_actions_score_nothing(&world, t);
    assert!(!err.contains("pulled into"), "pulled again: {err}");

    // A Dockerfile without builder steps over an image the store lacks: its FROM pulled as
    // docker_image is, the COPY steps' files in the workspace, no builder needed.
    let plain = write_task(
        &world.path().join("plain"),
        "",
        &[
            (
                "Dockerfile",
                &format!("FROM {reference}\nWORKDIR /app\nCOPY seed.txt ./\nENV GREETING=hi\n"),
            ),
            ("seed.txt", "seed\n"),
        ],
    );
    fs::write(
        plain.join("task.toml"),
        "schema_version = \"1.4\"\n\n[environment]\nnetwork_mode = \"no-network\"\n\n[verifier.env]\nSEED = \"seed\"\n",
    )
    .unwrap();
    let fresh = world.path().join("plain-state");
    let p = plain.to_str().unwrap();
    let state_arg = fresh.to_str().unwrap();
    let (code, out, err) = world.envcraft(
        &["run", p, "--json", "--state-dir", state_arg],
        Some(&no_builders(&world)),
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(reward(&out), Some(1.0), "{out}\n{err}");
    assert!(
        err.contains(&format!(
            "Dockerfile's FROM image `{reference}` pulled into envcraft's image store; the environment names it pinned: {pinned}"
        )),
        "{err}"
    );
    let (code, out, err) = world.envcraft(
        &[
            "run",
            p,
            "--json",
            "--state-dir",
            state_arg,
            "--actions",
            world.path().join("none.jsonl").to_str().unwrap(),
        ],
        Some(&no_builders(&world)),
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(reward(&out), Some(0.0), "{out}\n{err}");
    assert!(!err.contains("pulled into"), "pulled again: {err}");

    // A tag the registry lacks: a clear error before start, naming the registry's answer.
    let missing = world.path().join("missing");
    write_task(
        &missing,
        &format!(
            "docker_image = \"127.0.0.1:{}/harbor/app:nosuch\"\n",
            registry.port
        ),
        &[],
    );
    let (code, out, err) = world.envcraft(&["run", missing.to_str().unwrap(), "--json"], None);
    assert_eq!(code, 125, "{out}\n{err}");
    for words in ["could not be pulled", "has no tag nosuch", "--base host"] {
        assert!(err.contains(words), "{words:?} not in: {err}");
    }
    assert!(out.is_empty(), "a session ran: {out}");
    // `--base host` still stands in for it, as before.
    let (code, out, err) = world.envcraft(
        &["run", missing.to_str().unwrap(), "--json", "--base", "host"],
        None,
    );
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("base=host"), "{err}");
}

#[test]
fn gc_removes_killed_builds_leftovers_past_the_grace_and_never_a_build_in_progress() {
    if !ready(&[]) {
        return;
    }
    let world = World::new(BUSYBOX);
    // Builder images as killed builds leave them: two made long ago (`--timestamp 0`), one of
    // them a build in progress (its scratch directory's lock held), and one made just now.
    let ctx = world.path().join("ctx");
    fs::create_dir_all(&ctx).unwrap();
    for (tag, step) in [
        ("localhost/envcraft-build-1-old", "echo old"),
        ("localhost/envcraft-build-3-busy", "echo busy"),
    ] {
        fs::write(ctx.join("Dockerfile"), format!("FROM {BASE}\nRUN {step}\n")).unwrap();
        let out = world.podman(&[
            "build",
            "--timestamp",
            "0",
            "-t",
            tag,
            ctx.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "podman build: {}", stderr(&out));
    }
    let out = world.podman(&["tag", BASE, "localhost/envcraft-build-2-young"]);
    assert!(out.status.success(), "podman tag: {}", stderr(&out));
    let builds = world.state().join("images/builds");
    for dir in [".build-Busy", ".build-dead", ".build-fresh"] {
        fs::create_dir_all(builds.join(dir)).unwrap();
    }
    let lock = fs::File::create(builds.join(".build-Busy/lock")).unwrap();
    // SAFETY: flock on a descriptor this test owns; released when `lock` is dropped.
    let held = unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX) };
    assert_eq!(held, 0, "flock: {}", std::io::Error::last_os_error());
    let out = Command::new("touch")
        .args(["-d", "3 hours ago"])
        .arg(builds.join(".build-dead"))
        .arg(builds.join(".build-Busy"))
        .output()
        .unwrap();
    assert!(out.status.success(), "touch: {}", stderr(&out));
    let (code, out, err) = world.envcraft(&["image", "gc", "--json"], None);
    drop(lock);
    assert_eq!(code, 0, "{out}\n{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        report["build_images_removed"],
        serde_json::json!(["localhost/envcraft-build-1-old:latest"]),
        "{report}"
    );
    let kept = report["build_images_kept"].to_string();
    for name in ["envcraft-build-2-young", "envcraft-build-3-busy"] {
        assert!(kept.contains(name), "{name} not kept: {report}");
    }
    assert_eq!(report["build_dirs_removed"], 1, "{report}");
    assert_eq!(report["problems"], serde_json::json!([]), "{report}");
    let images = world.podman_images();
    assert!(!images.contains("envcraft-build-1-old"), "{images}");
    assert!(images.contains("envcraft-build-2-young") && images.contains("envcraft-build-3-busy"));
    assert!(!builds.join(".build-dead").exists());
    assert!(builds.join(".build-Busy").exists() && builds.join(".build-fresh").exists());
    // The base image, not a build's, is never looked at.
    assert!(images.contains("envcraft-test-busybox"), "{images}");

    // With the lock free, the busy one is a killed build's too; the young one stays.
    let (code, out, err) = world.envcraft(&["image", "gc"], None);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(
        out.contains("removed 1 builder images and 1 build directories left by killed builds; 1 builder images kept"),
        "{out}"
    );
    assert!(!world.podman_images().contains("envcraft-build-3-busy"));
}
