//! File transfer into and out of a session (`PUT` and `GET /v1/sessions/{id}/files`) under
//! attack: upload names that climb out (`..`, absolute), links leading out, device nodes, FIFOs,
//! hard links to outside, an upload directory that is an agent-made link, tar bombs, huge
//! trees to download, and a download racing an agent's swap loop. Each test asserts that the
//! request is refused with its structured error, that nothing of a refused upload is left in
//! the workspace, and that the host directory is untouched. The server runs through
//! `contained`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod escape_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use common::RunAs;
use escape_support::*;

/// `envcraft serve` through `contained` over a [`Tasks`] set; its process group killed on drop.
struct Served {
    child: Child,
    port: u16,
    _state: tempfile::TempDir,
    _tasks: Tasks,
}

impl Drop for Served {
    fn drop(&mut self) {
        for p in common::descendants(self.child.id()) {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(p as libc::pid_t, libc::SIGKILL) };
        }
        // SAFETY: as above; the child leads its own session and group.
        unsafe { libc::killpg(self.child.id() as libc::pid_t, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

struct Answer {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|_| {
            panic!(
                "not JSON ({}): {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }

    fn category(&self) -> String {
        self.json()["error"]["category"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// The bundled `default` policy with Harbor's mount points (`filesystem.workspace_mounts`).
fn mounts_policy() -> String {
    let default = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/default.toml"),
    )
    .unwrap();
    default.replace(
        "workspace_writable = true",
        "workspace_mounts = { \"/logs\" = \"logs\", \"/tests\" = \"tests\" }\nworkspace_writable = true",
    )
}

impl Served {
    fn start() -> Option<Served> {
        Served::start_with(None)
    }

    fn start_with(policy: Option<&str>) -> Option<Served> {
        if !ready(RunAs::Caller) {
            return None;
        }
        let tasks = Tasks::new(policy);
        let state = dir_for(RunAs::Caller);
        let mut command = Command::new("bash");
        command
            .arg(common::contained().unwrap())
            .arg(common::envcraft())
            .args(["serve", "--listen", "127.0.0.1:0", "--workspaces"])
            .arg(tasks.path())
            .arg("--state-dir")
            .arg(state.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0);
        let mut child = command.spawn().unwrap();
        let log = state.path().join("no-log");
        let port = common::listening_port(&mut child, &log);
        Some(Served {
            child,
            port,
            _state: state,
            _tasks: tasks,
        })
    }

    fn request(&self, method: &str, path: &str, content_type: &str, body: &[u8]) -> Answer {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(120)))
            .unwrap();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\
             Content-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
            self.port,
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        let _ = stream.write_all(body);
        let mut raw = Vec::new();
        let _ = stream.read_to_end(&mut raw);
        let at = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or_else(|| panic!("no HTTP answer: {:?}", String::from_utf8_lossy(&raw)));
        let head = String::from_utf8_lossy(&raw[..at]).into_owned();
        let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
        let mut body = raw[at + 4..].to_vec();
        if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            body = dechunk(&body);
        }
        Answer { status, head, body }
    }

    fn session(&self) -> String {
        let r = self.request(
            "POST",
            "/v1/sessions",
            "application/json",
            json!({"task": "sf/manifest"}).to_string().as_bytes(),
        );
        assert_eq!(r.status, 201, "{}", r.text());
        r.json()["session_id"].as_str().unwrap().to_string()
    }

    fn call(&self, id: &str, tool: &str, args: Value) -> Value {
        let r = self.request(
            "POST",
            &format!("/v1/sessions/{id}/call"),
            "application/json",
            json!({"tool": tool, "args": args}).to_string().as_bytes(),
        );
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()["result"].clone()
    }

    /// `sh -c COMMAND` in the session: its stdout (the call must succeed and exit 0).
    fn sh(&self, id: &str, command: &str) -> String {
        let result = self.call(id, "exec", json!({"command": command, "yieldMs": 120_000}));
        assert_eq!(result["exit_code"], json!(0), "{command}: {result}");
        result["stdout"].as_str().unwrap_or_default().to_string()
    }

    fn upload(&self, id: &str, path: &str, tar: &[u8]) -> Answer {
        self.request(
            "PUT",
            &format!("/v1/sessions/{id}/files?path={}", encode(path)),
            "application/x-tar",
            tar,
        )
    }

    fn download(&self, id: &str, path: &str) -> Answer {
        self.request(
            "GET",
            &format!("/v1/sessions/{id}/files?path={}", encode(path)),
            "application/json",
            b"",
        )
    }
}

fn encode(path: &str) -> String {
    path.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(at) = rest.windows(2).position(|w| w == b"\r\n") {
        let n = usize::from_str_radix(String::from_utf8_lossy(&rest[..at]).trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.extend_from_slice(&rest[at + 2..at + 2 + n]);
        rest = &rest[at + 4 + n..];
    }
    out
}

/// One tar entry written by hand (the `tar` crate refuses to write `..` and absolute names).
fn raw_entry(out: &mut Vec<u8>, kind: u8, name: &[u8], link: &[u8], data: &[u8]) {
    let mut header = tar::Header::new_ustar();
    header.set_entry_type(tar::EntryType::new(kind));
    header.set_mode(if kind == b'5' { 0o755 } else { 0o644 });
    header.set_size(data.len() as u64);
    header.set_mtime(1_700_000_000);
    if kind == b'3' || kind == b'4' {
        header.set_device_major(1).unwrap();
        header.set_device_minor(3).unwrap();
    }
    let old = header.as_old_mut();
    old.name = [0; 100];
    old.name[..name.len()].copy_from_slice(name);
    old.linkname = [0; 100];
    old.linkname[..link.len()].copy_from_slice(link);
    header.set_cksum();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
}

fn finish(mut out: Vec<u8>) -> Vec<u8> {
    out.extend_from_slice(&[0; 1024]);
    out
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

/// The names in a tar, with each file's data.
fn listing(tar: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut archive = tar::Archive::new(tar);
    archive
        .entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let name = String::from_utf8_lossy(&e.path_bytes()).into_owned();
            let mut data = Vec::new();
            e.read_to_end(&mut data).unwrap();
            (name, data)
        })
        .collect()
}

/// What the workspace holds (every name, recursively, not following links).
fn workspace_names(served: &Served, id: &str) -> String {
    served.sh(id, "find . -mindepth 1 | sort")
}

#[test]
fn an_upload_and_its_download_round_trip() {
    let Some(served) = Served::start() else {
        return;
    };
    let id = served.session();
    let mut tar = Vec::new();
    raw_entry(&mut tar, b'5', b"tests/", b"", b"");
    raw_entry(&mut tar, b'0', b"tests/a.txt", b"", b"alpha\n");
    raw_entry(&mut tar, b'2', b"tests/l", b"a.txt", b"");
    raw_entry(&mut tar, b'1', b"tests/h", b"tests/a.txt", b"");
    raw_entry(&mut tar, b'0', b"tests/deep/er/b.txt", b"", b"beta\n");
    let r = served.upload(&id, "/workspace/up", &gzip(&finish(tar)));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json(), json!({"path": "up", "entries": 5, "bytes": 11}));
    let seen = served.sh(
        &id,
        "cat up/tests/a.txt up/tests/l up/tests/h up/tests/deep/er/b.txt; \
         stat -c %h up/tests/a.txt; readlink up/tests/l",
    );
    assert_eq!(seen, "alpha\nalpha\nalpha\nbeta\n2\na.txt\n");
    let r = served.download(&id, "up");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.head
            .to_ascii_lowercase()
            .contains("x-envcraft-kind: directory")
    );
    let names: Vec<String> = listing(&r.body).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "tests/",
            "tests/a.txt",
            "tests/deep/",
            "tests/deep/er/",
            "tests/deep/er/b.txt",
            "tests/h",
            "tests/l"
        ]
    );
    let r = served.download(&id, "up/tests/a.txt");
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.head
            .to_ascii_lowercase()
            .contains("x-envcraft-kind: file")
    );
    assert_eq!(
        listing(&r.body),
        [("a.txt".to_string(), b"alpha\n".to_vec())]
    );
    // An upload over what is there replaces files, keeps directories.
    let mut tar = Vec::new();
    raw_entry(&mut tar, b'0', b"tests/a.txt", b"", b"again\n");
    let r = served.upload(&id, "up", &finish(tar));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        served.sh(&id, "cat up/tests/a.txt up/tests/deep/er/b.txt"),
        "again\nbeta\n"
    );
    assert_eq!(
        served.sh(&id, "ls -A up/tests | grep -c envcraft || true"),
        "0\n"
    );
}

#[test]
fn upload_entries_that_escape_are_refused_whole_and_leave_nothing() {
    let Some(served) = Served::start() else {
        return;
    };
    let host = host_dir();
    let id = served.session();
    served.sh(&id, "echo other > other.txt");
    let before = workspace_names(&served, &id);
    let abs = format!("{}/abs.txt", host.p());
    let secret = host.secret_path().display().to_string();
    let cases: Vec<(&str, u8, Vec<u8>, Vec<u8>)> = vec![
        (
            "dot-dot name",
            b'0',
            b"../../../escape.txt".to_vec(),
            vec![],
        ),
        (
            "dot-dot inside",
            b'0',
            b"x/../../escape.txt".to_vec(),
            vec![],
        ),
        ("absolute name", b'0', abs.clone().into_bytes(), vec![]),
        (
            "link to a host dir",
            b'2',
            b"l".to_vec(),
            host.p().into_bytes(),
        ),
        (
            "link climbing out",
            b'2',
            b"l".to_vec(),
            b"../../../..".to_vec(),
        ),
        (
            "hard link to a host file",
            b'1',
            b"h".to_vec(),
            secret.clone().into_bytes(),
        ),
        (
            "hard link climbing out",
            b'1',
            b"h".to_vec(),
            b"../keep.txt".to_vec(),
        ),
        (
            "hard link to the workspace",
            b'1',
            b"h".to_vec(),
            b"other.txt".to_vec(),
        ),
        ("character device", b'3', b"null".to_vec(), vec![]),
        ("block device", b'4', b"sda".to_vec(), vec![]),
        ("FIFO", b'6', b"fifo".to_vec(), vec![]),
    ];
    for (what, kind, name, link) in cases {
        let mut tar = Vec::new();
        // Good entries first: none of them may be left behind.
        raw_entry(&mut tar, b'0', b"good.txt", b"", b"good\n");
        raw_entry(&mut tar, b'0', b"keep.txt", b"", b"REPLACED\n");
        raw_entry(&mut tar, kind, &name, &link, b"");
        let r = served.upload(&id, "in", &finish(tar));
        assert_eq!(r.status, 403, "{what}: {}", r.text());
        assert_eq!(r.category(), "permission", "{what}: {}", r.text());
        assert_eq!(
            workspace_names(&served, &id),
            before,
            "{what}: something was left"
        );
        assert_eq!(served.sh(&id, "cat keep.txt"), "kept\n", "{what}");
        host.assert_unchanged();
    }
    assert!(!std::path::Path::new(&abs).exists());
}

#[test]
fn an_upload_refused_late_undoes_what_it_replaced() {
    let Some(served) = Served::start() else {
        return;
    };
    let id = served.session();
    served.sh(
        &id,
        "mkdir -p d/sub && echo x > d/sub/f && echo file > blocker",
    );
    let before = workspace_names(&served, &id);
    // The tar itself is sound; the workspace has a file where it needs a directory, and a
    // directory where it puts a file: found while writing, after `keep.txt` was staged.
    for (what, name) in [
        ("a file in the way", b"blocker/x".as_slice()),
        ("a directory in the way", b"d/sub".as_slice()),
    ] {
        let mut tar = Vec::new();
        raw_entry(&mut tar, b'0', b"keep.txt", b"", b"REPLACED\n");
        raw_entry(&mut tar, b'0', b"new/made.txt", b"", b"new\n");
        raw_entry(&mut tar, b'0', name, b"", b"late\n");
        let r = served.upload(&id, ".", &finish(tar));
        assert_eq!(r.status, 400, "{what}: {}", r.text());
        assert_eq!(r.category(), "invalid_argument", "{what}: {}", r.text());
        assert_eq!(
            served.sh(&id, "cat keep.txt blocker d/sub/f"),
            "kept\nfile\nx\n"
        );
        assert_eq!(
            workspace_names(&served, &id),
            before,
            "{what}: something was left"
        );
    }
}

#[test]
fn an_upload_never_passes_an_agent_made_link() {
    let Some(served) = Served::start() else {
        return;
    };
    let host = host_dir();
    let id = served.session();
    served.sh(
        &id,
        &format!(
            "mkdir sub && ln -s {} out && ln -s sub inner && ln -s ../../.. up",
            host.p()
        ),
    );
    let before = workspace_names(&served, &id);
    let mut tar = Vec::new();
    raw_entry(&mut tar, b'0', b"planted.txt", b"", b"planted\n");
    let tar = finish(tar);
    for dir in ["out", "out/x", "inner", "inner/x", "up", "up/tmp"] {
        let r = served.upload(&id, dir, &tar);
        assert_eq!(r.status, 403, "{dir}: {}", r.text());
        assert_eq!(r.category(), "permission", "{dir}: {}", r.text());
        host.assert_unchanged();
        assert_eq!(
            workspace_names(&served, &id),
            before,
            "{dir}: something was left"
        );
    }
    // Through a link inside the tar's own directory: `inner/x` as an entry of `.`.
    let mut tar = Vec::new();
    raw_entry(&mut tar, b'0', b"inner/x.txt", b"", b"x\n");
    raw_entry(&mut tar, b'0', b"out/x.txt", b"", b"x\n");
    let r = served.upload(&id, ".", &finish(tar));
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(workspace_names(&served, &id), before);
    host.assert_unchanged();
}

#[test]
fn a_download_racing_a_swap_loop_never_reads_a_host_file() {
    let Some(served) = Served::start() else {
        return;
    };
    let host = host_dir();
    let id = served.session();
    for call in start_swapper(SWAP_DIR_WITH_LINK, &host.p()) {
        let result = served.call(&id, call["tool"].as_str().unwrap(), call["args"].clone());
        assert_ne!(result["ok"], json!(false), "{result}");
    }
    let secret = host.secret().as_bytes().to_vec();
    let mut answered = 0;
    for round in 0..40 {
        for path in [".", "d", "l", "d/inner", "l/inner", "d/f00", "l/secret.txt"] {
            let r = served.download(&id, path);
            assert!(
                !r.body.windows(secret.len()).any(|w| w == secret),
                "round {round}: the download of {path} holds the host's secret"
            );
            if r.status == 200 {
                answered += 1;
                for (name, data) in listing(&r.body) {
                    assert!(!name.contains("secret"), "round {round}: {name} was read");
                    assert!(!data.windows(secret.len()).any(|w| w == secret));
                }
            } else {
                assert!(
                    matches!(r.status, 400 | 403 | 404),
                    "{}: {}",
                    r.status,
                    r.text()
                );
            }
        }
    }
    assert!(answered > 0, "no download succeeded");
    host.assert_unchanged();
}

#[test]
fn tar_bombs_are_refused_naming_their_bound() {
    let Some(served) = Served::start() else {
        return;
    };
    let id = served.session();
    let before = workspace_names(&served, &id);
    // 300 MiB of zeros in one file, gzip'ed to well under a MiB.
    let bytes_bomb = {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let mut header = tar::Header::new_gnu();
        header.set_path("zeros").unwrap();
        header.set_size(300 << 20);
        header.set_mode(0o644);
        header.set_cksum();
        enc.write_all(header.as_bytes()).unwrap();
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..300 {
            enc.write_all(&zeros).unwrap();
        }
        enc.write_all(&[0; 1024]).unwrap();
        enc.finish().unwrap()
    };
    let entries_bomb = {
        let mut tar = Vec::new();
        for i in 0..100_001 {
            raw_entry(&mut tar, b'0', format!("f{i}").as_bytes(), b"", b"");
        }
        gzip(&finish(tar))
    };
    // 65 names deep below `bomb` (a GNU long name).
    let depth_bomb = {
        let mut builder = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_size(0);
        h.set_mode(0o644);
        builder
            .append_data(&mut h, vec!["d"; 65].join("/"), &[][..])
            .unwrap();
        builder.into_inner().unwrap()
    };
    for (what, tar, bound) in [
        ("bytes", bytes_bomb, "bytes bound"),
        ("entries", entries_bomb, "entry bound"),
        ("depth", depth_bomb, "depth bound"),
    ] {
        let r = served.upload(&id, "bomb", &tar);
        assert_eq!(r.status, 413, "{what}: {}", r.text());
        assert_eq!(r.category(), "too_large", "{what}: {}", r.text());
        assert!(r.text().contains(bound), "{what}: {}", r.text());
        assert_eq!(
            workspace_names(&served, &id),
            before,
            "{what}: something was left"
        );
    }
}

#[test]
fn downloads_past_a_bound_are_refused_whole() {
    let Some(served) = Served::start() else {
        return;
    };
    let id = served.session();
    served.sh(
        &id,
        "mkdir -p deep/$(seq -s / 1 70) big many && truncate -s 300M big/zeros && \
         cd many && seq 1 100001 | xargs touch",
    );
    for (path, bound) in [
        ("deep", "depth bound"),
        ("big", "bytes bound"),
        ("many", "entry bound"),
        (".", "bound"),
    ] {
        let r = served.download(&id, path);
        assert_eq!(r.status, 413, "{path}: {}", r.text());
        assert_eq!(r.category(), "too_large", "{path}: {}", r.text());
        assert!(r.text().contains(bound), "{path}: {}", r.text());
        assert!(r.head.contains("application/json"), "{path}: {}", r.head);
    }
    // A part of it is fine.
    let r = served.download(&id, "deep/1/2/3/4/5/6/7/8/9/10");
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn transfers_reach_a_policys_mount_points_and_nothing_past_them() {
    let policy = mounts_policy();
    let Some(served) = Served::start_with(Some(&policy)) else {
        return;
    };
    let host = host_dir();
    let id = served.session();
    let mut tar = Vec::new();
    raw_entry(
        &mut tar,
        b'0',
        b"test.sh",
        b"",
        b"echo 1 > /logs/verifier/reward.txt\n",
    );
    let r = served.upload(&id, "/tests", &finish(tar));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["path"], json!("tests"));
    served.sh(&id, "mkdir -p /logs/verifier && sh /tests/test.sh");
    let r = served.download(&id, "/logs/verifier");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        listing(&r.body),
        [("reward.txt".to_string(), b"1\n".to_vec())]
    );
    // The agent swaps a mount point's directory for a link to a host directory: transfers by
    // the mount point's path refuse to pass it, and a fork's sandbox never binds through it.
    served.sh(
        &id,
        &format!("rm -rf logs/verifier && ln -s {} logs/verifier", host.p()),
    );
    let r = served.download(&id, "/logs/verifier/secret.txt");
    assert!(matches!(r.status, 400 | 403), "{}: {}", r.status, r.text());
    let mut tar = Vec::new();
    raw_entry(&mut tar, b'0', b"planted.txt", b"", b"planted\n");
    let r = served.upload(&id, "/logs/verifier", &finish(tar));
    assert_eq!(r.status, 403, "{}", r.text());
    served.sh(
        &id,
        &format!("rm -rf /workspace/logs && ln -s {} logs", host.p()),
    );
    let r = served.request(
        "POST",
        &format!("/v1/sessions/{id}/fork"),
        "application/json",
        b"{}",
    );
    // Today the fork's sandbox setup fails closed (500, the step named in the server's log).
    if r.status == 201 {
        let fork = r.json()["session_id"].as_str().unwrap().to_string();
        let seen = served.call(
            &fork,
            "exec",
            json!({"command": "cat /logs/secret.txt; ls /logs"}),
        );
        let out = seen["stdout"].as_str().unwrap_or_default();
        assert!(
            !out.contains(host.secret()),
            "the fork's /logs shows the host: {seen}"
        );
    }
    host.assert_unchanged();
}
