//! `envcraft image pull` through the real binary against a real registry: Debian's
//! `docker-registry` started here on 127.0.0.1 (its own config and storage in a tempdir), images
//! pushed to it with `skopeo`; a front the test runs before it where a test needs a token realm,
//! cut blob downloads, or request counts; and a listener that accepts and never answers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "image_fixture/mod.rs"]
mod image_fixture;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use image_fixture::{Layer, Tar, config_json, image_cmd, oci_layout, oci_layout_with, stderr};

const REGISTRY: &str = "/usr/bin/docker-registry";
const SKOPEO: &str = "/usr/bin/skopeo";

/// Whether the peers are installed (a loud skip otherwise) and attacks may run.
fn ready() -> bool {
    if !common::sandbox_ready() {
        return false;
    }
    for tool in [REGISTRY, SKOPEO] {
        if !Path::new(tool).is_file() {
            common::skip(&format!(
                "{tool} is missing (apt-get install docker-registry skopeo)"
            ));
            return false;
        }
    }
    true
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Wait (bounded) until something accepts connections on `port`.
fn wait_listening(port: u16, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "docker-registry exited before listening"
        );
        assert!(Instant::now() < deadline, "docker-registry never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A docker-registry on 127.0.0.1, stopped when dropped.
struct Registry {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Registry {
    fn start() -> Registry {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let config = dir.path().join("config.yml");
        fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
                dir.path().join("storage").display()
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
        wait_listening(port, &mut child);
        Registry {
            child,
            port,
            _dir: dir,
        }
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `skopeo copy` of the OCI layout `layout` (its image tagged `tag`) to `repo:dest_tag`.
    fn push(&self, layout: &Path, tag: &str, repo: &str, dest_tag: &str, all: bool) {
        let mut cmd = Command::new(SKOPEO);
        cmd.args(["copy", "--quiet", "--dest-tls-verify=false"]);
        if all {
            cmd.arg("--all");
        }
        let out = cmd
            .arg(format!("oci:{}:{tag}", layout.display()))
            .arg(format!("docker://{}/{repo}:{dest_tag}", self.host()))
            .output()
            .unwrap();
        assert!(out.status.success(), "skopeo: {}", stderr(&out));
    }
}

impl Registry {
    /// The manifest `repo:tag` has in the registry (as skopeo reads it).
    fn manifest(&self, repo: &str, tag: &str) -> serde_json::Value {
        let out = Command::new(SKOPEO)
            .args(["inspect", "--raw", "--tls-verify=false"])
            .arg(format!("docker://{}/{repo}:{tag}", self.host()))
            .output()
            .unwrap();
        assert!(out.status.success(), "skopeo: {}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the front in front of a registry does.
#[derive(Default)]
struct FrontRules {
    /// Demand `Authorization: Bearer TOKEN` on /v2/, where TOKEN comes from /token for
    /// Basic `USER:PASS`.
    token: Option<(String, String)>,
    /// Cut the answer to a GET of a blob whose path holds this, after that many body bytes,
    /// while `cuts` is above 0.
    cut: Option<(String, usize)>,
    /// Send a `Docker-Content-Digest` that is not the manifest's.
    lie_digest: bool,
}

/// An HTTP front on 127.0.0.1 that forwards to a registry (one request a connection) and logs
/// every request as `METHOD PATH [range]`.
struct Front {
    port: u16,
    log: Arc<Mutex<Vec<String>>>,
    cuts: Arc<AtomicUsize>,
}

const TOKEN: &str = "tok-3f9a";

impl Front {
    fn start(upstream: u16, rules: FrontRules) -> Front {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let cuts = Arc::new(AtomicUsize::new(0));
        let rules = Arc::new(rules);
        let (log2, cuts2) = (log.clone(), cuts.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let (log, cuts, rules) = (log2.clone(), cuts2.clone(), rules.clone());
                std::thread::spawn(move || {
                    let _ = serve(conn, upstream, port, &rules, &log, &cuts);
                });
            }
        });
        Front { port, log, cuts }
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn requests(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

fn respond(conn: &mut TcpStream, status: &str, headers: &str, body: &str) -> std::io::Result<()> {
    write!(
        conn,
        "HTTP/1.1 {status}\r\n{headers}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn serve(
    mut conn: TcpStream,
    upstream: u16,
    me: u16,
    rules: &FrontRules,
    log: &Mutex<Vec<String>>,
    cuts: &AtomicUsize,
) -> std::io::Result<()> {
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end().to_string();
        if line.is_empty() {
            break;
        }
        headers.push(line);
    }
    let mut parts = request_line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let path = parts.next().unwrap_or("").to_string();
    let header = |name: &str| {
        headers.iter().find_map(|h| {
            let (k, v) = h.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    let range = header("range");
    log.lock().unwrap().push(format!(
        "{method} {path}{}",
        range.as_ref().map(|r| format!(" {r}")).unwrap_or_default()
    ));
    if let Some((user, pass)) = &rules.token {
        if path.starts_with("/token") {
            let want = format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"))
            );
            return if header("authorization").as_deref() == Some(want.as_str()) {
                respond(
                    &mut conn,
                    "200 OK",
                    "",
                    &format!("{{\"token\": \"{TOKEN}\"}}"),
                )
            } else {
                respond(
                    &mut conn,
                    "401 Unauthorized",
                    "",
                    "{\"details\": \"incorrect username or password\"}",
                )
            };
        }
        if header("authorization").as_deref() != Some(&format!("Bearer {TOKEN}")) {
            return respond(
                &mut conn,
                "401 Unauthorized",
                &format!(
                    "WWW-Authenticate: Bearer realm=\"http://127.0.0.1:{me}/token\",service=\"envcraft-test\"\r\n"
                ),
                "{\"errors\": [{\"code\": \"UNAUTHORIZED\", \"message\": \"authentication required\"}]}",
            );
        }
    }
    let mut up = TcpStream::connect(("127.0.0.1", upstream))?;
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    for h in &headers {
        let name = h
            .split(':')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if name != "connection" && name != "authorization" {
            head.push_str(h);
            head.push_str("\r\n");
        }
    }
    head.push_str("Connection: close\r\n\r\n");
    up.write_all(head.as_bytes())?;
    let cut_here = match &rules.cut {
        Some((needle, after))
            if method == "GET" && path.contains("/blobs/") && path.contains(needle.as_str()) =>
        {
            let left = cuts.load(Ordering::SeqCst);
            (left > 0
                && cuts
                    .compare_exchange(left, left - 1, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok())
            .then_some(*after)
        }
        _ => None,
    };
    // The answer's head, whole (rewritten where a rule says), then its body.
    let mut buf = vec![0u8; 64 << 10];
    let mut seen = Vec::new();
    let end = loop {
        let n = up.read(&mut buf)?;
        if n == 0 {
            return conn.write_all(&seen);
        }
        seen.extend_from_slice(&buf[..n]);
        if let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
    };
    let mut head = String::from_utf8_lossy(&seen[..end]).into_owned();
    if rules.lie_digest && path.contains("/manifests/") {
        let lie = format!("Docker-Content-Digest: sha256:{}", "1".repeat(64));
        head = head
            .split("\r\n")
            .map(|l| {
                if l.to_ascii_lowercase().starts_with("docker-content-digest:") {
                    lie.clone()
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\r\n");
    }
    conn.write_all(head.as_bytes())?;
    let mut pending = seen[end..].to_vec();
    let mut sent = 0usize;
    loop {
        if !pending.is_empty() {
            match cut_here {
                Some(after) => {
                    let room = after.saturating_sub(sent).min(pending.len());
                    conn.write_all(&pending[..room])?;
                    sent += room;
                    if sent >= after {
                        conn.flush()?;
                        conn.shutdown(Shutdown::Both)?;
                        return Ok(());
                    }
                }
                None => {
                    conn.write_all(&pending)?;
                    sent += pending.len();
                }
            }
        }
        let n = up.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        pending = buf[..n].to_vec();
    }
}

/// A listener that accepts connections and never answers (the connections are held open).
fn silent_listener() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming() {
            held.push(conn);
        }
    });
    port
}

/// A two-layer image that can run `dash` and `cat` (the host's tools and libc) with files of
/// its own, gzip and zstd.
fn runnable_layers(marker: &str) -> Vec<Layer> {
    vec![
        Layer::gzip(
            image_fixture::host_tools_layer()
                .dir("etc")
                .file("etc/os-release", format!("ID={marker}\n").as_bytes())
                .dir("data")
                .file("data/old", b"old")
                .finish(),
        ),
        Layer::zstd(
            Tar::new()
                .dir("data")
                .file("data/.wh.old", b"")
                .file("data/new", b"new")
                .finish(),
        ),
    ]
}

fn pull(state: &Path, args: &[&str]) -> Output {
    let mut all = vec!["pull"];
    all.extend_from_slice(args);
    image_cmd(state, &all)
}

fn inspect(state: &Path, name: &str) -> serde_json::Value {
    let out = image_cmd(state, &["inspect", name]);
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn names(state: &Path) -> Vec<PathBuf> {
    fs::read_dir(state.join("images/names"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "json"))
                .collect()
        })
        .unwrap_or_default()
}

/// The layer directories of the store (not its locks or partial unpackings).
fn layer_dirs(state: &Path) -> Vec<PathBuf> {
    image_fixture::store_layers(state)
        .into_iter()
        .filter(|p| p.is_dir())
        .collect()
}

#[test]
fn a_pushed_image_pulls_as_the_id_its_import_has_and_exec_over_it_sees_its_files() {
    if !ready() {
        return;
    }
    let registry = Registry::start();
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    let id = oci_layout(&layout, &runnable_layers("pulled"));
    registry.push(&layout, "latest", "tools", "1", false);
    let state = dir.path().join("state");
    let reference = format!("{}/tools:1", registry.host());
    let out = pull(&state, &[&reference, "--name", "tools"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.starts_with(&format!("pulled tools ({id}, 2 layers")),
        "{text}"
    );
    let record = inspect(&state, "tools");
    assert_eq!(record["id"], serde_json::json!(id));
    assert_eq!(record["source"], serde_json::json!(reference));
    // Importing the same layout gives the same image.
    let imported = dir.path().join("imported");
    let out = image_cmd(
        &imported,
        &["import", layout.to_str().unwrap(), "--name", "tools"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(inspect(&imported, "tools")["id"], record["id"]);
    assert_eq!(inspect(&imported, "tools")["layers"], record["layers"]);
    // The pinned reference printed names the manifest by its digest, and pulls the same image.
    let pinned = text
        .lines()
        .find_map(|l| l.strip_prefix("pinned: "))
        .unwrap()
        .to_string();
    assert_eq!(
        pinned,
        format!(
            "{}/tools@{}",
            registry.host(),
            record["manifest"].as_str().unwrap()
        )
    );
    let out = image_fixture::exec_over(
        &state,
        "tools",
        "cat /etc/os-release; for f in /data/*; do echo \"$f\"; done; test -e /usr/bin/python3 && echo host-usr; true",
    );
    image_fixture::assert_ran(&out);
    assert_eq!(
        out.stdout.lines().collect::<Vec<_>>(),
        ["ID=pulled", "/data/new"]
    );
    // Nothing of the download is left.
    let downloads = state.join("images/downloads");
    let left: Vec<_> = fs::read_dir(&downloads)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".lock"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_multi_platform_index_gives_this_machines_image_and_another_platform_on_request() {
    if !ready() {
        return;
    }
    let registry = Registry::start();
    let dir = tempfile::tempdir().unwrap();
    // Two images in one layout, then an index over both, tagged `multi`.
    let layout = dir.path().join("layout");
    let ours = runnable_layers("ours");
    let other_arch = if image_fixture::host_arch() == "arm64" {
        "amd64"
    } else {
        "arm64"
    };
    let theirs = vec![Layer::gzip(
        Tar::new()
            .dir("etc")
            .file("etc/os-release", b"ID=theirs\n")
            .finish(),
    )];
    let mut their_config: serde_json::Value =
        serde_json::from_slice(&config_json(&theirs, &["PATH=/usr/bin:/bin"])).unwrap();
    their_config["architecture"] = serde_json::json!(other_arch);
    let their_id = oci_layout_with(
        &layout,
        &theirs,
        &serde_json::to_vec(&their_config).unwrap(),
    );
    let their_manifest = read_index_manifest(&layout);
    let our_id = oci_layout(&layout, &ours);
    let our_manifest = read_index_manifest(&layout);
    let index = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            with_platform(their_manifest, other_arch),
            with_platform(our_manifest, image_fixture::host_arch()),
        ],
    }))
    .unwrap();
    let index_digest = image_fixture::sha256(&index);
    fs::write(layout.join("blobs/sha256").join(&index_digest[7..]), &index).unwrap();
    fs::write(
        layout.join("index.json"),
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "manifests": [{"mediaType": "application/vnd.oci.image.index.v1+json",
                "digest": index_digest, "size": index.len(),
                "annotations": {"org.opencontainers.image.ref.name": "multi"}}],
        }))
        .unwrap(),
    )
    .unwrap();
    registry.push(&layout, "multi", "multi", "1", true);
    let state = dir.path().join("state");
    let reference = format!("{}/multi:1", registry.host());
    let out = pull(&state, &[&reference, "--name", "multi"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(inspect(&state, "multi")["id"], serde_json::json!(our_id));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // What is pinned is the index (so a pin pulls each machine its own platform).
    assert!(
        text.contains(&format!("pinned: {}/multi@{index_digest}", registry.host())),
        "{text}"
    );
    let out = pull(
        &state,
        &[
            &reference,
            "--name",
            "theirs",
            "--platform",
            &format!("linux/{other_arch}"),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(inspect(&state, "theirs")["id"], serde_json::json!(their_id));
    let out = pull(&state, &[&reference, "--platform", "linux/s390x"]);
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(
        err.contains("has no manifest for linux/s390x") && err.contains(other_arch),
        "{err}"
    );
}

fn read_index_manifest(layout: &Path) -> serde_json::Value {
    let index: serde_json::Value =
        serde_json::from_slice(&fs::read(layout.join("index.json")).unwrap()).unwrap();
    index["manifests"][0].clone()
}

fn with_platform(mut desc: serde_json::Value, arch: &str) -> serde_json::Value {
    desc.as_object_mut().unwrap().remove("annotations");
    desc["platform"] = serde_json::json!({"os": "linux", "architecture": arch});
    desc
}

#[test]
fn a_token_realm_refuses_a_pull_without_credentials_and_the_password_never_shows() {
    if !ready() {
        return;
    }
    let registry = Registry::start();
    let password = format!("pw-{}", common::unique_token());
    let front = Front::start(
        registry.port,
        FrontRules {
            token: Some(("puller".into(), password.clone())),
            ..FrontRules::default()
        },
    );
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    let id = oci_layout(&layout, &runnable_layers("secret"));
    registry.push(&layout, "latest", "private/tools", "1", false);
    let state = dir.path().join("state");
    let reference = format!("{}/private/tools:1", front.host());
    let shown = |out: &Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    // No credentials (and no auth file: HOME and the variables point at nothing).
    let out = pull(
        &state,
        &[
            &reference,
            "--authfile",
            dir.path().join("none.json").to_str().unwrap(),
        ],
    );
    assert!(!out.status.success());
    let out = image_cmd_env(&state, &["pull", &reference], dir.path());
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(
        err.contains(&format!("{} refused access to private/tools", front.host()))
            && err.contains("anonymous")
            && err.contains("--creds"),
        "{err}"
    );
    // Wrong credentials: refused, and neither password appears.
    let wrong = format!("puller:{password}-wrong");
    let out = pull(&state, &[&reference, "--creds", &wrong]);
    assert!(!out.status.success());
    let all = shown(&out);
    assert!(all.contains("refused the credentials given"), "{all}");
    assert!(!all.contains(&password), "{all}");
    assert!(names(&state).is_empty());
    // The token realm was asked, as the challenge said.
    assert!(
        front
            .requests()
            .iter()
            .any(|r| r.starts_with("GET /token?")),
        "{:?}",
        front.requests()
    );
    // Right credentials, from the flag and from an auth file.
    let out = pull(
        &state,
        &[
            &reference,
            "--creds",
            &format!("puller:{password}"),
            "--name",
            "a",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!shown(&out).contains(&password));
    assert_eq!(inspect(&state, "a")["id"], serde_json::json!(id));
    let authfile = dir.path().join("auth.json");
    fs::write(
        &authfile,
        serde_json::to_vec(&serde_json::json!({"auths": {front.host(): {"auth":
            base64::engine::general_purpose::STANDARD.encode(format!("puller:{password}"))}}}))
        .unwrap(),
    )
    .unwrap();
    let out = pull(
        &state,
        &[
            &reference,
            "--authfile",
            authfile.to_str().unwrap(),
            "--name",
            "b",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!shown(&out).contains(&password));
    assert_eq!(inspect(&state, "b")["id"], serde_json::json!(id));
}

/// `envcraft image ARGS --state-dir STATE` with HOME, XDG_RUNTIME_DIR and REGISTRY_AUTH_FILE
/// pointing into `home` (so no auth file of the machine's is read).
fn image_cmd_env(state: &Path, args: &[&str], home: &Path) -> Output {
    Command::new("bash")
        .arg(common::contained().unwrap())
        .arg(common::envcraft())
        .arg("image")
        .args(args)
        .arg("--state-dir")
        .arg(state)
        .env("HOME", home)
        .env("XDG_RUNTIME_DIR", home)
        .env_remove("REGISTRY_AUTH_FILE")
        .output()
        .unwrap()
}

#[test]
fn a_wrong_digest_a_missing_tag_and_a_silent_registry_are_each_a_clear_error() {
    if !ready() {
        return;
    }
    let registry = Registry::start();
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    oci_layout(&layout, &runnable_layers("x"));
    registry.push(&layout, "latest", "tools", "1", false);
    let state = dir.path().join("state");
    let zeros = format!("sha256:{}", "0".repeat(64));
    let out = pull(&state, &[&format!("{}/tools@{zeros}", registry.host())]);
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(
        err.contains(&format!("has no manifest {zeros} in tools")),
        "{err}"
    );
    let out = pull(&state, &[&format!("{}/tools:nope", registry.host())]);
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(err.contains("has no tag nope in tools"), "{err}");
    // A registry whose Docker-Content-Digest is not its manifest's.
    let liar = Front::start(
        registry.port,
        FrontRules {
            lie_digest: true,
            ..FrontRules::default()
        },
    );
    let out = pull(&state, &[&format!("{}/tools:1", liar.host())]);
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(
        err.contains(&format!("sha256:{}", "1".repeat(64)))
            && err.contains("the registry sent other bytes than it names"),
        "{err}"
    );
    let silent = silent_listener();
    let started = Instant::now();
    let out = pull(
        &state,
        &[&format!("127.0.0.1:{silent}/tools:1"), "--timeout", "2"],
    );
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(
        err.contains(&format!("127.0.0.1:{silent} did not answer within 2 s")),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert!(names(&state).is_empty() && layer_dirs(&state).is_empty());
}

#[test]
fn an_interrupted_blob_download_leaves_nothing_made_and_the_next_pull_resumes_it() {
    if !ready() {
        return;
    }
    let registry = Registry::start();
    let dir = tempfile::tempdir().unwrap();
    // A 6 MiB layer of incompressible bytes first, then the runnable layers.
    let mut noise = vec![0u8; 6 << 20];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for b in noise.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    let mut layers = vec![Layer::plain(
        Tar::new().dir("big").file("big/noise", &noise).finish(),
    )];
    layers.extend(runnable_layers("resumed"));
    let layout = dir.path().join("layout");
    let id = oci_layout(&layout, &layers);
    registry.push(&layout, "latest", "big", "1", false);
    // skopeo compresses a plain layer as it pushes: the blob to cut is the registry's.
    let manifest = registry.manifest("big", "1");
    let big = manifest["layers"][0]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    let size = manifest["layers"][0]["size"].as_u64().unwrap() as usize;
    assert!(size > 5 << 20, "{size}");
    const CUT: usize = 1 << 20;
    let front = Front::start(
        registry.port,
        FrontRules {
            cut: Some((big[7..].to_string(), CUT)),
            ..FrontRules::default()
        },
    );
    // Every answer for the big blob is cut after 1 MiB, more times than one pull asks.
    front.cuts.store(100, Ordering::SeqCst);
    let state = dir.path().join("state");
    let reference = format!("{}/big:1", front.host());
    let out = pull(&state, &[&reference, "--name", "big"]);
    let err = stderr(&out);
    assert!(!out.status.success(), "{:?}", front.requests());
    assert!(
        err.contains(&format!(
            "layer {big} of {reference} stopped arriving after"
        )) && err.contains("the next pull resumes from it"),
        "{err}"
    );
    // Nothing half-made: no record, no layer; the partial blob is kept.
    assert!(names(&state).is_empty(), "{:?}", names(&state));
    assert!(layer_dirs(&state).is_empty(), "{:?}", layer_dirs(&state));
    let partial = state.join("images/downloads").join(&big[7..]);
    let kept = fs::metadata(&partial).unwrap().len() as usize;
    assert!(kept >= CUT && kept < size, "{kept} of {size}");
    // Each attempt of that pull resumed where the last stopped.
    let asked: Vec<String> = front
        .requests()
        .into_iter()
        .filter(|r| r.contains(&big[7..]))
        .collect();
    assert_eq!(asked.len(), 4, "{asked:?}");
    assert!(asked[1].ends_with(&format!("bytes={CUT}-")), "{asked:?}");
    // The next pull asks only for the rest, and the image is whole.
    front.cuts.store(0, Ordering::SeqCst);
    let out = pull(&state, &[&reference, "--name", "big"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains(&format!("{kept} of them resumed from an earlier pull")),
        "{text}"
    );
    let last = front
        .requests()
        .into_iter()
        .rfind(|r| r.contains(&big[7..]))
        .unwrap();
    assert!(last.ends_with(&format!("bytes={kept}-")), "{last}");
    assert_eq!(inspect(&state, "big")["id"], serde_json::json!(id));
    assert!(!partial.exists());
    assert_eq!(
        fs::read(image_fixture::layer_root(&state, &layers[0].diff_id()).join("big/noise"))
            .unwrap(),
        noise
    );
    let out = image_fixture::exec_over(
        &state,
        "big",
        "test -s /big/noise && echo big; cat /etc/os-release",
    );
    image_fixture::assert_ran(&out);
    assert_eq!(
        out.stdout.lines().collect::<Vec<_>>(),
        ["big", "ID=resumed"]
    );
}

#[test]
fn an_environment_pinning_a_reference_pulls_it_once_on_first_use_and_a_tag_is_refused() {
    if !ready() {
        return;
    }
    let registry = Registry::start();
    let front = Front::start(registry.port, FrontRules::default());
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("layout");
    oci_layout(&layout, &runnable_layers("pinned"));
    registry.push(&layout, "latest", "tools", "1", false);
    // The digest to pin: what a pull prints (here from a store of its own).
    let scratch = dir.path().join("scratch");
    let out = pull(&scratch, &[&format!("{}/tools:1", registry.host())]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let digest = text.split('@').nth(1).unwrap().trim().to_string();
    let pinned = format!("{}/tools@{digest}", front.host());
    let env = dir.path().join("workspaces/on-image");
    fs::create_dir_all(env.join("files")).unwrap();
    fs::create_dir_all(env.join("tasks/os")).unwrap();
    let write_env = |image: &str| {
        fs::write(
            env.join("env.toml"),
            format!("name = \"on-image\"\ndescription = \"d\"\ntools = [\"exec\"]\nbase_time = \"2026-03-02T09:00:00Z\"\nimage = \"{image}\"\n"),
        )
        .unwrap()
    };
    write_env(&pinned);
    fs::write(env.join("docs.md"), "An image.\n").unwrap();
    fs::write(env.join("files/seed.txt"), "seed\n").unwrap();
    fs::write(
        env.join("tasks/os/task.toml"),
        "prompt = \"Copy /etc/os-release to os.txt\"\n[verifier]\nkind = \"command\"\ncommand = \"cat /etc/os-release /workspace/os.txt | { read a; read b; test \\\"$a$b\\\" = ID=pinnedID=pinned && echo 1 || echo 0; }\"\n",
    )
    .unwrap();
    let actions = dir.path().join("actions.jsonl");
    fs::write(
        &actions,
        "{\"tool\": \"exec\", \"args\": {\"command\": \"cat /etc/os-release > os.txt\"}}\n",
    )
    .unwrap();
    let state = dir.path().join("state");
    let run = || {
        Command::new("bash")
            .arg(common::contained().unwrap())
            .arg(common::envcraft())
            .args(["run", "on-image/os", "--json", "--workspaces"])
            .arg(dir.path().join("workspaces"))
            .arg("--actions")
            .arg(&actions)
            .arg("--state-dir")
            .arg(&state)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // Two first uses at once: both run over the image, which was pulled once.
    let (a, b) = (run(), run());
    for child in [a, b] {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["reward"], serde_json::json!(1.0), "{report}");
    }
    let manifests = front
        .requests()
        .into_iter()
        .filter(|r| r.starts_with("GET /v2/tools/manifests/"))
        .count();
    assert_eq!(manifests, 1, "{:?}", front.requests());
    assert_eq!(names(&state).len(), 1);
    // A tag alone is refused, saying to pin it.
    write_env(&format!("{}/tools:1", front.host()));
    let out = run().wait_with_output().unwrap();
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(err.contains("pin it by digest"), "{err}");
}
