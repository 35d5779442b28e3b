//! OpenEnv and MCP on the real binary, fed what no official client sends: malformed JSON-RPC,
//! unknown methods, wrong protocol versions, oversized lines and frames, and WebSocket clients
//! that vanish mid-step. Each is answered as its protocol says, and nothing is left behind
//! (sessions, their directories, their processes). The well-behaved side (the official
//! clients) is tests/python/test_openenv.py and test_mcp.py.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const TASK: &str = "example/archive-read-mail";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A running `envcraft serve`; killed on drop.
struct Server {
    child: Child,
    port: u16,
    state: PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let log = dir.path().join("server.log");
        let mut child = Command::new(common::envcraft())
            .args(["serve", "--listen", "127.0.0.1:0", "--state-dir"])
            .arg(&state)
            .args(extra)
            .current_dir(root())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let port = common::listening_port(&mut child, &log);
        Server {
            child,
            port,
            state,
            _dir: dir,
        }
    }

    /// One HTTP/1.1 request (Connection: close): status, head, body.
    fn http(
        &self,
        method: &str,
        path: &str,
        body: &str,
        headers: &[&str],
    ) -> (u16, String, String) {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut request = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
            body.len()
        );
        for h in headers {
            request.push_str(h);
            request.push_str("\r\n");
        }
        request.push_str("\r\n");
        stream.write_all(request.as_bytes()).unwrap();
        stream.write_all(body.as_bytes()).unwrap();
        let mut raw = Vec::new();
        let _ = stream.read_to_end(&mut raw);
        let text = String::from_utf8_lossy(&raw).into_owned();
        let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        (status, head.to_string(), rest.to_string())
    }

    fn sessions(&self) -> u64 {
        let (_, _, body) = self.http("GET", "/readyz", "", &[]);
        serde_json::from_str::<Value>(&body).unwrap()["sessions"]
            .as_u64()
            .unwrap()
    }

    /// Waits, at most `bound`, for the server to hold `count` sessions; the last count.
    fn wait_sessions(&self, count: u64, bound: Duration) -> u64 {
        let deadline = Instant::now() + bound;
        loop {
            let seen = self.sessions();
            if seen == count || Instant::now() > deadline {
                return seen;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Session directories left in the state root, once the closes under way are done (a
    /// session leaves the count of open ones before its close removes its directory): waits
    /// up to 20 s for none.
    fn sessions_on_disk(&self) -> usize {
        let count = || {
            fs::read_dir(self.state.join("sessions"))
                .map(|d| d.count())
                .unwrap_or(0)
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while count() > 0 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(20));
        }
        count()
    }

    fn websocket(&self) -> WebSocket {
        WebSocket::connect(self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A minimal WebSocket client: the handshake, masked frames out, frames in.
struct WebSocket(TcpStream);

impl WebSocket {
    fn connect(port: u16) -> WebSocket {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        stream
            .write_all(b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
            .unwrap();
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            stream.read_exact(&mut byte).unwrap();
            head.push(byte[0]);
        }
        assert!(
            head.starts_with(b"HTTP/1.1 101"),
            "{}",
            String::from_utf8_lossy(&head)
        );
        WebSocket(stream)
    }

    /// A masked text frame of `payload` (written even if the server stops reading).
    fn send_raw(&mut self, payload: &[u8]) -> std::io::Result<()> {
        let mut frame = vec![0x81u8];
        match payload.len() {
            n if n < 126 => frame.push(0x80 | n as u8),
            n if n < 65536 => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                frame.push(0x80 | 127);
                frame.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        let mask = [7u8, 1, 9, 3];
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.0.write_all(&frame)
    }

    fn send(&mut self, message: Value) {
        self.send_raw(message.to_string().as_bytes()).unwrap();
    }

    /// The next frame: (opcode, payload); `None` at end of stream.
    fn frame(&mut self) -> Option<(u8, Vec<u8>)> {
        let mut head = [0u8; 2];
        self.0.read_exact(&mut head).ok()?;
        let length = match head[1] & 0x7f {
            126 => {
                let mut n = [0u8; 2];
                self.0.read_exact(&mut n).ok()?;
                u16::from_be_bytes(n) as usize
            }
            127 => {
                let mut n = [0u8; 8];
                self.0.read_exact(&mut n).ok()?;
                u64::from_be_bytes(n) as usize
            }
            n => n as usize,
        };
        let mut payload = vec![0u8; length];
        self.0.read_exact(&mut payload).ok()?;
        Some((head[0] & 0x0f, payload))
    }

    /// The next text message, as JSON.
    fn receive(&mut self) -> Value {
        loop {
            let (opcode, payload) = self.frame().expect("the server closed the connection");
            if opcode == 1 {
                return serde_json::from_slice(&payload).unwrap();
            }
            assert_ne!(
                opcode,
                8,
                "the server closed: {}",
                String::from_utf8_lossy(&payload)
            );
        }
    }

    /// Whether the server ends the connection (a close frame or end of stream) before sending
    /// any other message.
    fn closed_by_server(&mut self) -> bool {
        loop {
            match self.frame() {
                None | Some((8, _)) => return true,
                Some((1, _)) => return false,
                Some(_) => continue,
            }
        }
    }
}

fn rpc(server: &Server, path: &str, body: &str, headers: &[&str]) -> (u16, Value) {
    let (status, _, body) = server.http("POST", path, body, headers);
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

#[test]
fn malformed_json_rpc_and_unknown_methods_get_their_codes_on_openenv_s_mcp() {
    let server = Server::start(&[]);
    for (body, code) in [
        ("{not json", -32700),
        ("[]", -32600),
        (r#"[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]"#, -32600),
        ("{}", -32600),
        (r#"{"jsonrpc": "1.0", "id": 1, "method": "ping"}"#, -32600),
        (
            r#"{"jsonrpc": "2.0", "id": {"no": 1}, "method": "ping"}"#,
            -32600,
        ),
        (r#"{"jsonrpc": "2.0", "id": 1, "method": 3}"#, -32600),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": "x"}"#,
            -32602,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe"}"#,
            -32601,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}"#,
            -32602,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "method": "openenv/session/close"}"#,
            -32602,
        ),
        (
            r#"{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"session_id": "nope"}}"#,
            -32000,
        ),
    ] {
        // OpenEnv's /mcp answers every message with a 200 and a JSON-RPC body.
        let (status, answer) = rpc(&server, "/mcp", body, &[]);
        assert_eq!(status, 200, "{body}: {answer}");
        assert_eq!(answer["jsonrpc"], "2.0", "{body}");
        assert_eq!(answer["error"]["code"], json!(code), "{body}: {answer}");
        assert!(!answer["error"]["message"].as_str().unwrap().is_empty());
    }
    let (status, answer) = rpc(
        &server,
        "/mcp",
        r#"{"jsonrpc": "2.0", "id": "p", "method": "ping"}"#,
        &[],
    );
    assert_eq!(
        (status, answer),
        (200, json!({"jsonrpc": "2.0", "id": "p", "result": {}}))
    );
}

#[test]
fn streamable_http_refuses_unknown_versions_unknown_sessions_and_sessionless_calls() {
    let server = Server::start(&[]);
    let initialize = r#"{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}"#;
    let (status, answer) = rpc(
        &server,
        "/v1/mcp?task=example/archive-read-mail",
        initialize,
        &["MCP-Protocol-Version: 1999-01-01"],
    );
    assert_eq!(status, 400);
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2025-11-25, 2025-06-18"),
        "{answer}"
    );
    let (status, _) = rpc(&server, "/v1/sessions/nope/mcp", initialize, &[]);
    assert_eq!(status, 404);
    let (status, _) = rpc(&server, "/v1/mcp", initialize, &["Mcp-Session-Id: nope"]);
    assert_eq!(status, 404);
    let (status, answer) = rpc(
        &server,
        "/v1/mcp?task=example/archive-read-mail",
        r#"{"jsonrpc": "2.0", "id": 4, "method": "tools/list"}"#,
        &[],
    );
    assert_eq!(
        (status, answer["error"]["code"].clone()),
        (400, json!(-32600)),
        "{answer}"
    );
    let (status, answer) = rpc(&server, "/v1/mcp", initialize, &[]);
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["category"], "missing_field");
    let (status, _) = rpc(
        &server,
        "/v1/mcp?task=example/archive-read-mail",
        "{oops",
        &[],
    );
    assert_eq!(status, 400);
    assert_eq!(server.sessions(), 0, "no refused request made a session");
}

#[test]
fn streamable_http_agrees_on_a_version_it_speaks_and_accepts_notifications() {
    let server = Server::start(&[]);
    if !common::default_policy_runs() {
        return;
    }
    for (asked, agreed) in [
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
        let (status, head, text) = server.http(
            "POST",
            &format!("/v1/mcp?task={TASK}&seed=4"),
            &body.to_string(),
            &[],
        );
        assert_eq!(status, 200, "{text}");
        let answer: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(answer["result"]["protocolVersion"], agreed, "{answer}");
        let id = head
            .lines()
            .find_map(|l| l.strip_prefix("mcp-session-id: "))
            .unwrap_or_else(|| panic!("no Mcp-Session-Id: {head}"))
            .to_string();
        let header = format!("Mcp-Session-Id: {id}");
        let note = r#"{"jsonrpc": "2.0", "method": "notifications/initialized"}"#;
        assert_eq!(server.http("POST", "/v1/mcp", note, &[&header]).0, 202);
        let (status, _, _) = server.http("DELETE", "/v1/mcp", "", &[&header]);
        assert_eq!(status, 200);
    }
    assert_eq!(server.sessions(), 0);
}

/// `envcraft mcp TASK`, spoken to line by line.
struct StdioMcp {
    child: Child,
    out: BufReader<std::process::ChildStdout>,
    _state: tempfile::TempDir,
}

impl StdioMcp {
    fn start() -> StdioMcp {
        StdioMcp::start_in(&root().join("workspaces"), TASK)
    }

    /// `envcraft mcp TASK` of the environments under `workspaces`.
    fn start_in(workspaces: &std::path::Path, task: &str) -> StdioMcp {
        let state = tempfile::tempdir().unwrap();
        let mut child = Command::new(common::envcraft())
            .args(["mcp", task, "--workspaces"])
            .arg(workspaces)
            .arg("--state-dir")
            .arg(state.path())
            .current_dir(root())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let out = BufReader::new(child.stdout.take().unwrap());
        StdioMcp {
            child,
            out,
            _state: state,
        }
    }

    fn send(&mut self, line: &[u8]) {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(line).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    fn receive(&mut self) -> Value {
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"))
    }
}

impl Drop for StdioMcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `verify` among a session's MCP tools only where its policy says `[agent] may_verify`.
#[test]
fn the_agent_is_offered_verify_only_where_the_policy_says_so() {
    if !common::default_policy_runs() {
        return;
    }
    let call = br#"{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "verify", "arguments": {}}}"#;
    let list = br#"{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}"#;
    let names = |listing: &Value| -> Vec<String> {
        listing["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    let mut plain = StdioMcp::start();
    plain.send(list);
    assert!(!names(&plain.receive()).contains(&"verify".to_string()));
    plain.send(call);
    let refused = plain.receive();
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    // The example environment under a policy that lets its agent grade itself.
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("example");
    let copied = Command::new("cp")
        .arg("-r")
        .arg(root().join("workspaces/example"))
        .arg(&env)
        .status()
        .unwrap();
    assert!(copied.success());
    let policy = fs::read_to_string(root().join("policies/default.toml")).unwrap();
    fs::write(
        env.join("grading.toml"),
        format!("{policy}\n[agent]\nmay_verify = true\n"),
    )
    .unwrap();
    let toml = fs::read_to_string(env.join("env.toml")).unwrap();
    fs::write(
        env.join("env.toml"),
        toml.replace("policy = \"default\"", "policy = \"grading.toml\""),
    )
    .unwrap();
    let mut graded = StdioMcp::start_in(dir.path(), TASK);
    graded.send(list);
    assert!(names(&graded.receive()).contains(&"verify".to_string()));
    graded.send(call);
    let verdict = graded.receive();
    let structured = &verdict["result"]["structuredContent"];
    assert_eq!(structured["ok"], true, "{verdict}");
    assert!(structured["reward"].as_f64().unwrap() < 1.0, "{verdict}");
    assert_eq!(structured["passed"], false);
    assert!(!structured["checks"].as_array().unwrap().is_empty());
    // A key the policy does not know is refused, naming it.
    fs::write(
        env.join("grading.toml"),
        format!("{policy}\n[agent]\nmay_grade = true\n"),
    )
    .unwrap();
    let out = Command::new(common::envcraft())
        .args(["tools", TASK, "--workspaces"])
        .arg(dir.path())
        .current_dir(root())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("may_grade"));
}

#[test]
fn stdio_answers_wrong_versions_bad_lines_and_oversized_lines_and_goes_on() {
    if !common::default_policy_runs() {
        return;
    }
    let mut mcp = StdioMcp::start();
    let initialize = |version: &str| {
        json!({"jsonrpc": "2.0", "id": version, "method": "initialize", "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).to_string()
    };
    mcp.send(initialize("1999-01-01").as_bytes());
    assert_eq!(mcp.receive()["result"]["protocolVersion"], "2025-11-25");
    mcp.send(initialize("2025-06-18").as_bytes());
    assert_eq!(mcp.receive()["result"]["protocolVersion"], "2025-06-18");
    mcp.send(br#"{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}"#);
    assert_eq!(mcp.receive()["error"]["code"], -32602);
    mcp.send(b"not json");
    assert_eq!(mcp.receive()["error"]["code"], -32700);
    mcp.send(br#"{"jsonrpc": "2.0", "id": 2, "method": "sampling/createMessage"}"#);
    assert_eq!(mcp.receive()["error"]["code"], -32601);
    mcp.send(br#"{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "read", "arguments": []}}"#);
    assert_eq!(mcp.receive()["error"]["code"], -32602);
    // A line past the 16 MiB bound is skipped whole and answered; the next is read.
    let mut huge = br#"{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "write", "arguments": {"path": "big", "content": ""#.to_vec();
    huge.resize(huge.len() + (17 << 20), b'a');
    huge.extend_from_slice(br#""}}}"#);
    mcp.send(&huge);
    let refused = mcp.receive();
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("longer than")
    );
    mcp.send(br#"{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "ls", "arguments": {}}}"#);
    let listing = mcp.receive();
    assert_eq!(listing["id"], 5);
    assert_eq!(listing["result"]["isError"], false, "{listing}");
    assert!(
        !listing.to_string().contains("\"big\""),
        "the skipped write did not run"
    );
    // End of input: the server closes its session and exits.
    drop(mcp.child.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(20);
    while mcp.child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "envcraft mcp did not exit at end of input"
        );
        thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<_> = fs::read_dir(mcp._state.path().join("sessions"))
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "sessions left: {left:?}");
}

#[test]
fn websocket_messages_outside_the_protocol_get_openenv_s_error_codes() {
    let server = Server::start(&[]);
    let mut ws = server.websocket();
    ws.send_raw(b"not json").unwrap();
    assert_eq!(ws.receive()["data"]["code"], "INVALID_JSON");
    ws.send(json!({"type": "dance"}));
    let unknown = ws.receive();
    assert_eq!(
        (unknown["type"].clone(), unknown["data"]["code"].clone()),
        (json!("error"), json!("UNKNOWN_TYPE"))
    );
    ws.send(json!({"type": "step", "data": {"type": "list_tools"}}));
    assert_eq!(
        ws.receive()["data"]["code"],
        "VALIDATION_ERROR",
        "a step before any reset"
    );
    ws.send(json!({"type": "reset", "data": {"task": "no/such-task"}}));
    let missing = ws.receive();
    assert_eq!(missing["data"]["code"], "VALIDATION_ERROR");
    assert_eq!(missing["data"]["category"], "task_not_found");
    ws.send(json!({"type": "reset", "data": {"task": TASK, "colour": "blue"}}));
    assert!(
        ws.receive()["data"]["message"]
            .as_str()
            .unwrap()
            .contains("`colour`")
    );
    ws.send(json!({"type": "mcp", "data": {"jsonrpc": "2.0", "id": 9, "method": "nothing/here"}}));
    let rpc = ws.receive();
    assert_eq!(
        (rpc["type"].clone(), rpc["data"]["error"]["code"].clone()),
        (json!("mcp"), json!(-32601))
    );
    ws.send(json!({"type": "state"}));
    assert_eq!(ws.receive()["data"]["step_count"], 0);
    ws.send(json!({"type": "close"}));
    assert!(ws.closed_by_server());
    assert_eq!(server.sessions(), 0);
}

#[test]
fn an_oversized_websocket_frame_ends_the_connection_and_its_session() {
    let server = Server::start(&["--max-body", "65536"]);
    if !common::default_policy_runs() {
        return;
    }
    let mut ws = server.websocket();
    ws.send(json!({"type": "reset", "data": {"task": TASK}}));
    assert_eq!(ws.receive()["type"], "observation");
    assert_eq!(server.sessions(), 1);
    let big = json!({"type": "step", "data": {"type": "call_tool", "tool_name": "write", "arguments": {"path": "x", "content": "a".repeat(100_000)}}});
    let _ = ws.send_raw(big.to_string().as_bytes());
    assert!(ws.closed_by_server(), "an oversized frame was answered");
    assert_eq!(server.wait_sessions(0, Duration::from_secs(20)), 0);
    assert_eq!(server.sessions_on_disk(), 0);
}

#[test]
fn a_websocket_client_that_vanishes_mid_step_leaves_no_session_directory_or_process() {
    let server = Server::start(&[]);
    if !common::default_policy_runs() {
        return;
    }
    let marker = format!(
        "3.{}",
        common::unique_token()
            .chars()
            .filter(char::is_ascii_digit)
            .take(6)
            .collect::<String>()
    );
    let mut ws = server.websocket();
    ws.send(json!({"type": "reset", "data": {"task": TASK}}));
    assert_eq!(ws.receive()["type"], "observation");
    ws.send(json!({"type": "step", "data": {"type": "call_tool", "tool_name": "exec", "arguments": {"command": format!("sleep {marker}")}}}));
    let deadline = Instant::now() + Duration::from_secs(20);
    while common::host_pids_with_arg(&format!("sleep {marker}")).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the step's command never started"
        );
        thread::sleep(Duration::from_millis(10));
    }
    // Gone without a close frame, while its step runs.
    ws.0.shutdown(std::net::Shutdown::Both).unwrap();
    drop(ws);
    assert_eq!(server.wait_sessions(0, Duration::from_secs(20)), 0);
    assert_eq!(server.sessions_on_disk(), 0);
    assert!(
        common::host_pids_with_arg(&format!("sleep {marker}")).is_empty(),
        "the step's process outlived its session"
    );
}

#[test]
fn the_token_guards_openenv_s_session_routes_but_not_its_descriptions() {
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    fs::write(&token, "proto-s3cret\n").unwrap();
    let server = Server::start(&["--token-file", token.to_str().unwrap()]);
    for (method, path) in [
        ("POST", "/reset"),
        ("POST", "/step"),
        ("GET", "/state"),
        ("POST", "/mcp"),
        ("GET", "/ws"),
        ("POST", "/v1/mcp"),
    ] {
        let (status, _, body) = server.http(method, path, "{}", &[]);
        assert_eq!(status, 401, "{method} {path}: {body}");
    }
    for path in ["/health", "/metadata", "/schema", "/openapi.json"] {
        assert_eq!(server.http("GET", path, "", &[]).0, 200, "{path}");
    }
    let (status, _, body) = server.http(
        "POST",
        "/mcp",
        r#"{"jsonrpc": "2.0", "id": 1, "method": "ping"}"#,
        &["Authorization: Bearer proto-s3cret"],
    );
    assert_eq!(status, 200, "{body}");
}

#[test]
fn a_websocket_quiet_past_the_header_timeout_is_not_cut() {
    // Frames are not request heads: the head deadline must not run on an upgraded connection.
    let server = Server::start(&["--header-timeout", "1"]);
    let mut ws = server.websocket();
    ws.send(json!({"type": "state"}));
    assert_eq!(ws.receive()["type"], "state");
    // A pause longer than --header-timeout between two messages (the interval under test).
    thread::sleep(Duration::from_millis(1500));
    ws.send(json!({"type": "state"}));
    assert_eq!(ws.receive()["type"], "state");
    ws.send(json!({"type": "state"}));
    thread::sleep(Duration::from_millis(1500));
    assert_eq!(ws.receive()["type"], "state");
}

#[test]
fn a_reset_without_a_task_takes_the_server_s_openenv_task() {
    let server = Server::start(&["--openenv-task", TASK]);
    if !common::default_policy_runs() {
        return;
    }
    let mut ws = server.websocket();
    ws.send(json!({"type": "reset", "data": {"seed": 11}}));
    let seen = ws.receive();
    assert_eq!(seen["data"]["observation"]["task"], TASK, "{seen}");
    assert_eq!(seen["data"]["observation"]["seed"], 11);
    ws.send(json!({"type": "close"}));
    assert!(ws.closed_by_server());
    assert_eq!(server.wait_sessions(0, Duration::from_secs(20)), 0);
}
