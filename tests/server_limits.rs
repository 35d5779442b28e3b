//! `envcraft serve` against clients that hold its connections or its memory: slowloris heads,
//! one address opening every connection, a huge announced body, a slow body, and sessions whose
//! results would make the transcript grow without bound. The real binary on a free loopback
//! port, spoken to over raw TCP (a client can choose its source among 127.0.0.0/8: that is how
//! two peers are told apart here). Every server is killed when its guard drops.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
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
    #[allow(dead_code)]
    state: PathBuf,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    /// `envcraft serve --listen 127.0.0.1:0 --state-dir TMP EXTRA...`, once it announced its
    /// address (bounded).
    fn start(extra: &[&str]) -> Server {
        Server::start_with(extra, &[])
    }

    fn start_with(extra: &[&str], env: &[(&str, &str)]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let log = dir.path().join("server.log");
        let mut child = Command::new(common::envcraft())
            .args(["serve", "--listen", "127.0.0.1:0", "--state-dir"])
            .arg(&state)
            .args(extra)
            .envs(env.iter().copied())
            .current_dir(root())
            .env("ENVCRAFT_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let Ok(line) = rx.recv_timeout(Duration::from_secs(20)) else {
            let _ = child.kill();
            panic!(
                "the server printed no address within 20 s: {}",
                fs::read_to_string(&log).unwrap_or_default()
            );
        };
        let port = line
            .trim()
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"));
        Server {
            child,
            port,
            state,
            log,
            _dir: dir,
        }
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
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
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
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
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
            b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000000000\r\n\r\n{\"task\":",
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
            b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"task\":",
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

#[allow(dead_code)]
fn unused(_: Value) -> Value {
    json!(null)
}
