//! `envcraft serve` at the edge of its capacity: a server under a low descriptor limit
//! (`prlimit`) holds the sessions it said it could, refuses the next ones with `capacity` 503
//! naming descriptors (never a 500 blaming the task), keeps answering the sessions it holds,
//! and takes new ones once some close, with nothing left open.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const TASK: &str = "example/archive-read-mail";
/// The server's descriptor limit, soft and hard: some tens of sessions fit (an idle one keeps
/// one descriptor, its sandbox's channel; see `sandbox::handback`).
const NOFILE: u32 = 200;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Whether the default policy's sandbox and `prlimit` are here; skips loudly otherwise.
fn ready() -> bool {
    if !common::default_policy_runs() {
        return false;
    }
    let prlimit = Command::new("prlimit")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !prlimit {
        common::skip("no `prlimit` to start the server under a low descriptor limit");
    }
    prlimit
}

/// A running `envcraft serve` under `prlimit --nofile=NOFILE:NOFILE`; killed on drop.
struct Server {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let ws = root().join("workspaces");
        let log = dir.path().join("server.log");
        let mut child = Command::new("prlimit")
            .arg(format!("--nofile={NOFILE}:{NOFILE}"))
            .arg(common::envcraft())
            .args(["serve", "--listen", "127.0.0.1:0", "--max-connections", "8"])
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .arg("--workspaces")
            .arg(&ws)
            .arg("--skills")
            .arg(root().join("skills"))
            .current_dir(root())
            .env("ENVCRAFT_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let port = common::listening_port(&mut child, &log);
        Server {
            child,
            port,
            log,
            _dir: dir,
        }
    }

    /// The server's log, without the terminal colours.
    fn log(&self) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let mut plain = String::with_capacity(text.len());
        let mut chars = text.chars();
        while let Some(c) = chars.next() {
            if c == '\u{1b}' {
                chars.by_ref().find(|c| c.is_ascii_alphabetic());
            } else {
                plain.push(c);
            }
        }
        plain
    }

    fn open_descriptors(&self) -> usize {
        fs::read_dir(format!("/proc/{}/fd", self.child.id()))
            .unwrap()
            .count()
    }

    fn create(&self) -> Response {
        http(
            self.port,
            "POST",
            "/v1/sessions",
            &json!({"task": TASK}).to_string(),
        )
    }

    fn close(&self, id: &str) {
        let r = http(self.port, "DELETE", &format!("/v1/sessions/{id}"), "");
        assert_eq!(r.status, 200, "{}", r.body);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Response {
    status: u16,
    head: String,
    body: String,
}

impl Response {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// One HTTP/1.1 request (Connection: close), with a deadline.
fn http(port: u16, method: &str, path: &str, body: &str) -> Response {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP response: {text:?}"));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap();
    Response {
        status,
        head: head.to_ascii_lowercase(),
        body: body.to_string(),
    }
}

/// The sessions the start log says this server can hold, bounded by descriptors.
fn planned_sessions(log: &str) -> usize {
    let line = log
        .lines()
        .find(|l| l.contains("capacity: this machine can hold"))
        .unwrap_or_else(|| panic!("no capacity line in the start log:\n{log}"));
    assert!(
        line.contains("bounded by descriptors"),
        "under a limit of {NOFILE} descriptors bound the sessions: {line}"
    );
    assert!(
        line.contains(&format!("descriptor_limit={NOFILE}")),
        "{line}"
    );
    assert!(
        log.contains("exceeds the") && log.contains("--max-sessions 1024"),
        "the log says --max-sessions asks for more than the descriptors allow:\n{log}"
    );
    line.split("can hold ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {line}"))
}

/// Close every session of `ids`; asserts the server is back to the `idle_fds` it had before any.
fn close_all_leaving_nothing_open(server: &Server, ids: &[String], idle_fds: usize) {
    for id in ids {
        server.close(id);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.open_descriptors() > idle_fds && Instant::now() < deadline {
        thread::yield_now();
    }
    assert!(
        server.open_descriptors() <= idle_fds,
        "{} descriptors open after closing every session, {idle_fds} before any",
        server.open_descriptors()
    );
}

/// Asserts `r` is the descriptors refusal: 503 `capacity` with Retry-After, naming the
/// descriptors and their limit, not blaming the task.
fn assert_descriptors_refusal(r: &Response) {
    assert_eq!(r.status, 503, "{}", r.body);
    let error = &r.json()["error"];
    assert_eq!(error["category"], "capacity", "{}", r.body);
    let message = error["message"].as_str().unwrap();
    assert!(
        message.starts_with("no descriptors left for another session (")
            && message.contains(&format!("of a limit of {NOFILE})")),
        "{message}"
    );
    assert!(!message.contains("task"), "blames the task: {message}");
    assert!(r.head.contains("retry-after: "), "{}", r.head);
}

#[test]
fn creates_past_the_descriptor_limit_answered_500_blaming_the_task() {
    if !ready() {
        return;
    }
    let _heavy = common::heavy_test_lock();
    let server = Server::start();
    let planned = planned_sessions(&server.log());
    assert!(
        (1..=150).contains(&planned),
        "{planned} sessions planned under {NOFILE} descriptors"
    );
    let idle_fds = server.open_descriptors();

    // Fill it: every create up to the plan succeeds, the next ones are refused.
    let mut ids = Vec::new();
    let refused = loop {
        let r = server.create();
        if r.status != 201 {
            break r;
        }
        ids.push(r.json()["session_id"].as_str().unwrap().to_string());
        assert!(
            ids.len() <= planned,
            "more sessions than planned: {}",
            ids.len()
        );
    };
    assert_eq!(ids.len(), planned, "{}\n{}", refused.body, server.log());
    assert_descriptors_refusal(&refused);
    assert_descriptors_refusal(&server.create());
    // A fork needs a session's descriptors as well.
    let fork = http(
        server.port,
        "POST",
        &format!("/v1/sessions/{}/fork", ids[0]),
        "",
    );
    assert_descriptors_refusal(&fork);

    // The sessions it holds still answer tool calls.
    for id in &ids {
        let r = http(
            server.port,
            "POST",
            &format!("/v1/sessions/{id}/call"),
            &json!({"tool": "ls", "args": {"path": "inbox"}}).to_string(),
        );
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.json()["result"]["ok"], true, "{}", r.body);
    }

    // Closing some makes room again.
    for id in ids.drain(..2) {
        server.close(&id);
    }
    for _ in 0..2 {
        let r = server.create();
        assert_eq!(r.status, 201, "{}\n{}", r.body, server.log());
        ids.push(r.json()["session_id"].as_str().unwrap().to_string());
    }
    assert_descriptors_refusal(&server.create());

    // Closed, they leave no descriptor behind.
    close_all_leaving_nothing_open(&server, &ids, idle_fds);
    assert!(
        !server.log().contains("does not load"),
        "a capacity refusal was logged as a task that does not load:\n{}",
        server.log()
    );
}

/// POST `body` to `/v1/sessions/{id}/call` with `tool`: the result object, asserted ok.
fn call_ok(server: &Server, id: &str, tool: &str, args: Value) -> Value {
    let r = http(
        server.port,
        "POST",
        &format!("/v1/sessions/{id}/call"),
        &json!({"tool": tool, "args": args}).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let result = r.json()["result"].clone();
    assert_eq!(result["ok"], true, "{tool} in {id}: {result}");
    result
}

#[test]
fn sessions_past_the_room_keep_one_descriptor_and_answer_as_before() {
    if !ready() {
        return;
    }
    let _heavy = common::heavy_test_lock();
    let server = Server::start();
    let planned = planned_sessions(&server.log());
    let log = server.log();
    assert!(
        log.contains("descriptors_per_session=4")
            && log.contains("descriptors_kept_per_idle_session=1"),
        "a session holds its channel and its workspace's three descriptors, and keeps the channel idle:\n{log}"
    );
    let idle_fds = server.open_descriptors();
    let mut ids = Vec::new();
    while ids.len() < planned {
        let r = server.create();
        assert_eq!(r.status, 201, "{}\n{}", r.body, server.log());
        ids.push(r.json()["session_id"].as_str().unwrap().to_string());
    }
    // Full: every session gave its workspace descriptors back, and keeps its channel.
    let held = server.open_descriptors() - idle_fds;
    assert!(
        held <= ids.len() + 8,
        "{} sessions hold {held} descriptors",
        ids.len()
    );
    // Each one's files are its own, through the file tools and through its commands, although
    // every call asks the sandbox for the workspace again.
    for id in &ids {
        call_ok(
            &server,
            id,
            "write",
            json!({"path": "note.txt", "content": id}),
        );
    }
    for id in &ids {
        let read = call_ok(&server, id, "read", json!({"path": "note.txt"}));
        assert!(read.to_string().contains(id.as_str()), "{id}: {read}");
        let cat = call_ok(&server, id, "exec", json!({"command": "cat note.txt"}));
        assert!(cat.to_string().contains(id.as_str()), "{id}: {cat}");
        let r = http(
            server.port,
            "POST",
            &format!("/v1/sessions/{id}/verify"),
            "",
        );
        assert_eq!(r.status, 200, "{}", r.body);
    }
    // A change list asks the sandbox for its descriptors without the file tools' root: they
    // are given back all the same.
    for id in &ids {
        let r = http(server.port, "GET", &format!("/v1/sessions/{id}/diff"), "");
        assert_eq!(r.status, 200, "{}", r.body);
    }
    assert!(
        server.open_descriptors() - idle_fds <= ids.len() + 8,
        "{} sessions hold {} descriptors after their calls",
        ids.len(),
        server.open_descriptors() - idle_fds
    );
    // A fork of a session that gave its descriptors back starts from its workspace.
    server.close(&ids.pop().unwrap());
    let parent = ids[0].clone();
    let r = http(
        server.port,
        "POST",
        &format!("/v1/sessions/{parent}/fork"),
        "",
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let fork = r.json()["session_id"].as_str().unwrap().to_string();
    let read = call_ok(&server, &fork, "read", json!({"path": "note.txt"}));
    assert!(read.to_string().contains(parent.as_str()), "{read}");
    ids.push(fork);
    close_all_leaving_nothing_open(&server, &ids, idle_fds);
}

/// An idle session's run cgroups outlive another envcraft's sweep of killed runs' leftovers. On
/// cgroup v1 an idle session's memory cgroup holds no process (its init stays out of it): the
/// sweep judged it a killed run's once older than its grace, removed it, and the session's
/// commands could no longer start. Here the session's cgroups are made to look old (their
/// mtime an hour back) and a second envcraft process (`exec`) sweeps; the session's `exec`
/// still runs, in its own memory cgroup.
#[test]
fn an_idle_sessions_cgroups_outlive_another_processs_sweep() {
    if !ready() {
        return;
    }
    let memory = Path::new("/sys/fs/cgroup/memory/envcraft");
    if !Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists() {
        common::skip("no cgroup v1 memory hierarchy: the init shares its run's cgroup there");
        return;
    }
    let _heavy = common::heavy_test_lock();
    let server = Server::start();
    let r = server.create();
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.json()["session_id"].as_str().unwrap().to_string();
    let before = call_ok(
        &server,
        &id,
        "exec",
        json!({"command": "grep :memory: /proc/self/cgroup"}),
    );
    let run = before["stdout"]
        .as_str()
        .unwrap()
        .trim()
        .rsplit('/')
        .next()
        .unwrap()
        .to_string();
    assert!(run.starts_with("envcraft-"), "{before}");
    let long_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    for hierarchy in [memory, Path::new("/sys/fs/cgroup/pids/envcraft")] {
        fs::File::open(hierarchy.join(&run))
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
    }
    // Another process's first sandbox sweeps what killed runs left.
    let ws = tempfile::tempdir().unwrap();
    let swept = Command::new(common::envcraft())
        .args(["exec", "--workspace"])
        .arg(ws.path())
        .args(["--", "true"])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        swept.status.success(),
        "{}",
        String::from_utf8_lossy(&swept.stderr)
    );
    assert!(
        memory.join(&run).exists(),
        "the idle session's memory cgroup was swept"
    );
    let after = call_ok(
        &server,
        &id,
        "exec",
        json!({"command": "grep :memory: /proc/self/cgroup"}),
    );
    assert_eq!(after["stdout"], before["stdout"], "{after}");
    server.close(&id);
}
