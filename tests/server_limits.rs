//! `envcraft serve` against clients that hold its connections or its memory: slowloris heads,
//! one address opening every connection, a huge announced body, a slow body, and sessions whose
//! results would make the transcript grow without bound. The real binary on a free loopback
//! port, spoken to over raw TCP (a client can choose its source among 127.0.0.0/8: that is how
//! two peers are told apart here). Every server is killed when its guard drops.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs;
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A running `envcraft serve`; killed (SIGKILL) on drop.
struct Server {
    child: Child,
    port: u16,
    state: PathBuf,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    /// `envcraft serve --listen 127.0.0.1:0 --state-dir TMP EXTRA...`, once it announced its
    /// address (bounded).
    fn start(extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let log = dir.path().join("server.log");
        let (child, port) = spawn(&state, &log, extra);
        Server {
            child,
            port,
            state,
            log,
            _dir: dir,
        }
    }

    /// Kill the server with SIGKILL and start a new one on the same state directory.
    fn kill_and_restart(&mut self, extra: &[&str]) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let (child, port) = spawn(&self.state, &self.log, extra);
        self.child = child;
        self.port = port;
    }

    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// One request on a fresh connection from 127.0.0.1 (`Connection: close`).
    fn request(&self, method: &str, path: &str, body: &str) -> Answer {
        let mut stream = connect_from(Ipv4Addr::LOCALHOST, self.port);
        send(&mut stream, method, path, body);
        read_answer(&mut stream, Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("{method} {path}: no answer: {e}\n{}", self.log()))
    }
}

/// `envcraft serve` on a free loopback port, once it announced its address (bounded): the
/// child and its port.
fn spawn(state: &std::path::Path, log: &std::path::Path, extra: &[&str]) -> (Child, u16) {
    let mut child = Command::new(common::envcraft())
        .args(["serve", "--listen", "127.0.0.1:0", "--state-dir"])
        .arg(state)
        .args(extra)
        .current_dir(root())
        .env("ENVCRAFT_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(
            fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .unwrap(),
        )
        .spawn()
        .unwrap();
    let port = common::listening_port(&mut child, log);
    (child, port)
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A TCP connection to 127.0.0.1:`port` from `source` (any address of 127.0.0.0/8 is this
/// machine's loopback: a second peer without a second machine).
fn connect_from(source: Ipv4Addr, port: u16) -> TcpStream {
    use std::os::fd::{FromRawFd, OwnedFd};
    let sockaddr = |ip: Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: socket takes no pointers; the descriptor is owned right after.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(raw >= 0, "socket: {}", std::io::Error::last_os_error());
    // SAFETY: `raw` is a fresh descriptor no one else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let local = sockaddr(source, 0);
    // SAFETY: `local` is a valid sockaddr_in of `len` bytes for the duration of the call.
    let bound = unsafe { libc::bind(fd.as_raw_fd(), (&raw const local).cast(), len) };
    assert_eq!(
        bound,
        0,
        "bind {source}: {}",
        std::io::Error::last_os_error()
    );
    let remote = sockaddr(Ipv4Addr::LOCALHOST, port);
    // SAFETY: as for bind.
    let connected = unsafe { libc::connect(fd.as_raw_fd(), (&raw const remote).cast(), len) };
    assert_eq!(connected, 0, "connect: {}", std::io::Error::last_os_error());
    TcpStream::from(fd)
}

fn send(stream: &mut TcpStream, method: &str, path: &str, body: &str) {
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
}

#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {self:?}"))
    }

    fn category(&self) -> String {
        self.json()["error"]["category"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

/// The answer on `stream` (read to its end: the requests say `Connection: close`), within
/// `within`.
fn read_answer(stream: &mut TcpStream, within: Duration) -> Result<Answer, String> {
    stream.set_read_timeout(Some(within)).unwrap();
    let mut raw = Vec::new();
    if let Err(e) = stream.read_to_end(&mut raw)
        && raw.is_empty()
    {
        return Err(e.to_string());
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no HTTP answer: {text:?}"))?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status: {head:?}"))?;
    Ok(Answer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    })
}

/// How long until the server ends `stream` (end of file or reset), at most `within`; `None`
/// if it is still open then. `drip` sends one byte of a never-ending header every second
/// meanwhile (the slowloris client).
fn time_until_cut(mut stream: TcpStream, drip: bool, within: Duration) -> Option<Duration> {
    let started = Instant::now();
    if drip {
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            .unwrap();
    }
    let mut byte = [0u8; 1];
    while started.elapsed() < within {
        stream
            .set_read_timeout(Some(Duration::from_secs(1)))
            .unwrap();
        match stream.read(&mut byte) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return Some(started.elapsed()),
        }
        if drip && stream.write_all(b"a").is_err() {
            return Some(started.elapsed());
        }
    }
    None
}

/// Slowloris: clients that send a header one byte a second took every connection for as
/// long as they kept dripping (the idle clock restarted at each byte), and everyone else
/// waited in the backlog. Now each is cut at the header deadline, and a normal client
/// queued behind them is served soon after.
#[test]
fn slowloris_heads_are_cut_at_the_header_deadline_and_others_get_served() {
    let server = Server::start(&[
        "--max-connections",
        "4",
        "--max-connections-per-peer",
        "4",
        "--header-timeout",
        "3",
    ]);
    let slow: Vec<_> = (0..4)
        .map(|_| {
            let stream = connect_from(Ipv4Addr::LOCALHOST, server.port);
            thread::spawn(move || time_until_cut(stream, true, Duration::from_secs(15)))
        })
        .collect();
    // The fifth client waits in the backlog behind them until one is cut.
    let started = Instant::now();
    let mut normal = connect_from(Ipv4Addr::LOCALHOST, server.port);
    send(&mut normal, "GET", "/healthz", "");
    let answer = read_answer(&mut normal, Duration::from_secs(12))
        .unwrap_or_else(|e| panic!("a normal client was not served: {e}\n{}", server.log()));
    assert_eq!(answer.status, 200, "{answer:?}");
    let served = started.elapsed();
    assert!(served < Duration::from_secs(8), "served after {served:?}");
    for client in slow {
        let cut = client.join().unwrap();
        let cut = cut.unwrap_or_else(|| panic!("a slowloris client kept its connection 15 s"));
        assert!(
            cut >= Duration::from_millis(2500) && cut < Duration::from_secs(7),
            "a dripping client was cut after {cut:?}, not at the 3 s header deadline"
        );
    }
}

/// One address opening connections could take every place (`--max-connections`), and the
/// others waited behind it. Now it gets at most `--max-connections-per-peer`: the next one is
/// answered 503 at once, another address is served at once, and a place given back is
/// usable again.
#[test]
fn one_address_cannot_take_every_connection() {
    let server = Server::start(&[
        "--max-connections",
        "8",
        "--max-connections-per-peer",
        "2",
        "--header-timeout",
        "30",
    ]);
    let mut held: Vec<TcpStream> = (0..2)
        .map(|_| connect_from(Ipv4Addr::LOCALHOST, server.port))
        .collect();
    // The server takes them in order: the third connection from this address is past its bound.
    let started = Instant::now();
    let mut third = connect_from(Ipv4Addr::LOCALHOST, server.port);
    send(&mut third, "GET", "/healthz", "");
    let refused = read_answer(&mut third, Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("the third connection got no answer: {e}\n{}", server.log()));
    assert_eq!(refused.status, 503, "{refused:?}");
    assert_eq!(refused.category(), "too_many_connections", "{refused:?}");
    assert!(
        refused.head.to_ascii_lowercase().contains("retry-after: 1"),
        "{refused:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    // Another peer is served at once: the bound is per address, not global.
    let mut other = connect_from(Ipv4Addr::new(127, 0, 0, 2), server.port);
    send(&mut other, "GET", "/healthz", "");
    let answer = read_answer(&mut other, Duration::from_secs(5)).unwrap();
    assert_eq!(answer.status, 200, "{answer:?}");
    // A place given back is this address's again (the server sees the close soon after).
    drop(held.pop());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let answer = server.request("GET", "/healthz", "");
        if answer.status == 200 {
            break;
        }
        assert_eq!(answer.category(), "too_many_connections", "{answer:?}");
        assert!(
            Instant::now() < deadline,
            "the closed connection's place never came back"
        );
        thread::sleep(Duration::from_millis(50));
    }
}

/// A request announcing a body far over `--max-body` was waited for as long as its body took;
/// now it is refused with 413 from its head alone.
#[test]
fn a_huge_content_length_is_refused_before_its_body_arrives() {
    let server = Server::start(&["--max-body", "1000"]);
    let mut stream = connect_from(Ipv4Addr::LOCALHOST, server.port);
    stream
        .write_all(
            b"POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000000000\r\n\r\n{\"task\":",
        )
        .unwrap();
    let started = Instant::now();
    let answer = read_answer(&mut stream, Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("no answer without the body: {e}\n{}", server.log()));
    assert_eq!(answer.status, 413, "{answer:?}");
    assert_eq!(answer.category(), "payload_too_large", "{answer:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

/// A body sent slowly (or never finished) held its connection for the whole request
/// deadline; now the body has its own deadline, 408.
#[test]
fn a_body_that_stops_arriving_is_cut_at_the_body_deadline() {
    let server = Server::start(&["--body-timeout", "2"]);
    let mut stream = connect_from(Ipv4Addr::LOCALHOST, server.port);
    stream
        .write_all(
            b"POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"task\":",
        )
        .unwrap();
    let started = Instant::now();
    let answer = read_answer(&mut stream, Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("no answer to a stalled body: {e}\n{}", server.log()));
    let waited = started.elapsed();
    assert_eq!(answer.status, 408, "{answer:?}");
    assert_eq!(answer.category(), "timeout", "{answer:?}");
    assert!(
        waited >= Duration::from_millis(1500) && waited < Duration::from_secs(6),
        "answered after {waited:?}"
    );
    // A zero deadline would cut every connection: refused at start.
    let out = Command::new(common::envcraft())
        .args(["serve", "--listen", "127.0.0.1:0", "--header-timeout", "0"])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--header-timeout must be at least 1 s"),
        "{stderr}"
    );
}

impl Server {
    fn post(&self, path: &str, body: Value) -> Answer {
        self.request("POST", path, &body.to_string())
    }

    /// A new session of `task`: its id.
    fn session(&self, task: &str) -> String {
        let answer = self.post("/v1/sessions", json!({"task": task}));
        assert_eq!(answer.status, 201, "{answer:?}\n{}", self.log());
        answer.json()["session_id"].as_str().unwrap().to_string()
    }

    fn call(&self, id: &str, tool: &str, args: Value) -> Value {
        let answer = self.post(
            &format!("/v1/sessions/{id}/call"),
            json!({"tool": tool, "args": args}),
        );
        assert_eq!(answer.status, 200, "{answer:?}");
        answer.json()
    }

    fn transcript(&self, id: &str) -> PathBuf {
        self.state
            .join("sessions")
            .join(id)
            .join("transcript.jsonl")
    }
}

fn size(path: &std::path::Path) -> u64 {
    fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// The worst case for a transcript that stores a result's JSON as the text of a message:
/// characters that are escaped at each level (`"` becomes `\"`, then `\\\"`).
const MIB_PER_STREAM: &str =
    "head -c 1048576 /dev/zero | tr '\\0' '\"'; head -c 1048576 /dev/zero | tr '\\0' '\\\\' >&2";

/// One `exec` printing 1 MiB on each stream grew the session's transcript (host memory under
/// /dev/shm by default) by ~8 MiB: the result escaped twice. Now the streams are recorded
/// once, cut at the per-field cap with the whole result's digest, while the agent still gets
/// all of its output.
#[test]
fn an_exec_printing_a_mebibyte_per_stream_does_not_cost_the_transcript_eight() {
    if !common::default_policy_runs() {
        return;
    }
    let server = Server::start(&[]);
    let id = server.session("example/archive-read-mail");
    let before = size(&server.transcript(&id));
    let answer = server.call(&id, "exec", json!({"command": MIB_PER_STREAM}));
    let result = &answer["result"];
    assert_eq!(result["ok"], true, "{}", result["error"]);
    assert_eq!(result["stdout"].as_str().unwrap().len(), 1 << 20);
    assert_eq!(result["stderr"].as_str().unwrap().len(), 1 << 20);
    assert!(answer.get("transcript_truncated").is_none());
    let grown = size(&server.transcript(&id)) - before;
    eprintln!("transcript grew by {grown} bytes for 2 MiB of output");
    assert!(
        grown < 2 << 20,
        "the transcript grew by {grown} bytes for 2 MiB of output"
    );
    // The line says what was cut, and the whole result's digest.
    let text = fs::read_to_string(server.transcript(&id)).unwrap();
    let line: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let message = &line["message"];
    assert_eq!(message["role"], "toolResult");
    let whole = serde_json::to_vec(result).unwrap();
    assert_eq!(message["truncated"]["bytes"], whole.len());
    let recorded: Value =
        serde_json::from_str(message["content"][0]["text"].as_str().unwrap()).unwrap();
    let stdout = recorded["stdout"].as_str().unwrap();
    assert!(stdout.starts_with("\"\"\"") && stdout.contains("more bytes not recorded"));
    // A server killed and restarted resumes the session: the replayed result matches the
    // digest of the whole one.
    let mut server = server;
    server.kill_and_restart(&[]);
    let diff = server.request("GET", &format!("/v1/sessions/{id}/diff"), "");
    assert_eq!(diff.status, 200, "{diff:?}\n{}", server.log());
}

/// A session's transcript was charged to nobody's limit. Now the policy's
/// `limits.transcript_bytes` bounds it: past it, calls still run and answer in full, the
/// transcript ends with one truncation event and stops growing, and the server says so.
#[test]
fn past_the_policys_transcript_limit_calls_answer_and_the_transcript_stops() {
    if !common::default_policy_runs() {
        return;
    }
    let workspaces = tempfile::tempdir().unwrap();
    let env = workspaces.path().join("example");
    copy_tree(&root().join("workspaces/example"), &env);
    let policy = fs::read_to_string(root().join("policies/default.toml")).unwrap();
    assert!(policy.contains("transcript_bytes = \"64MiB\""));
    fs::write(
        env.join("small.toml"),
        policy.replace(
            "transcript_bytes = \"64MiB\"",
            "transcript_bytes = \"64KiB\"",
        ),
    )
    .unwrap();
    let manifest = fs::read_to_string(env.join("env.toml")).unwrap();
    fs::write(
        env.join("env.toml"),
        manifest.replace("policy = \"default\"", "policy = \"small.toml\""),
    )
    .unwrap();
    let server = Server::start(&["--workspaces", workspaces.path().to_str().unwrap()]);
    let id = server.session("example/archive-read-mail");
    let mut sizes = Vec::new();
    let mut cut_at = None;
    for i in 0..8 {
        let answer = server.call(
            &id,
            "exec",
            json!({"command": "head -c 30000 /dev/zero | tr '\\0' x"}),
        );
        assert_eq!(answer["result"]["ok"], true, "call {i}: {answer}");
        assert_eq!(answer["result"]["stdout"].as_str().unwrap().len(), 30000);
        if answer["transcript_truncated"] == true && cut_at.is_none() {
            cut_at = Some(i);
        }
        if cut_at.is_some() {
            assert_eq!(answer["transcript_truncated"], true, "call {i}");
        }
        sizes.push(size(&server.transcript(&id)));
    }
    let cut_at = cut_at.expect("the transcript never reached its 64 KiB limit");
    assert!((1..6).contains(&cut_at), "cut at call {cut_at}: {sizes:?}");
    let last = *sizes.last().unwrap();
    assert_eq!(
        sizes[cut_at], last,
        "the transcript grew after its cut: {sizes:?}"
    );
    assert!(last <= 64 * 1024 + 1024, "{last} bytes for a 64 KiB limit");
    let text = fs::read_to_string(server.transcript(&id)).unwrap();
    let end: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(end["type"], "custom", "{end}");
    assert_eq!(end["customType"], "envcraft.transcript_truncated");
    assert_eq!(end["data"]["from_action_index"], cut_at);
    assert_eq!(end["data"]["limit_bytes"], 64 * 1024);
    // Every line before it is a whole event (a grader reads them all).
    for line in text.lines() {
        serde_json::from_str::<Value>(line).unwrap();
    }
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}
