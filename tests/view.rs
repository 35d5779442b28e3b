//! `envcraft view`: the page of a real run, opened in headless Chromium (Debian's `chromium`):
//! its DOM holds every tool call and every check, nothing it holds from the agent became
//! markup, and it makes no request (Chromium's net log, with a control page that does make one,
//! so that the check can fail). Without Chromium these tests skip loudly (a failure under
//! `ENVCRAFT_TEST_REQUIRE=all`); `ENVCRAFT_CHROMIUM` names another binary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The Chromium to open pages with, or a loud skip.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("ENVCRAFT_CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    if path.is_file() {
        return Some(path);
    }
    common::skip(&format!(
        "{} is missing: install Debian's chromium (.ci/run does)",
        path.display()
    ));
    None
}

/// What Chromium made of a page: the DOM after load, and the URLs the page asked for (the
/// net log's requests started for a page, not those the browser makes for itself).
struct Opened {
    dom: String,
    page_requests: Vec<String>,
}

fn open(chromium: &Path, page: &Path) -> Opened {
    let work = tempfile::tempdir().unwrap();
    let net_log = work.path().join("net.json");
    // Bounded: `timeout` ends a Chromium that hangs.
    let out = Command::new("timeout")
        .arg("120")
        .arg(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-default-apps",
            "--no-first-run",
        ])
        .arg(format!(
            "--user-data-dir={}",
            work.path().join("profile").display()
        ))
        .arg(format!("--log-net-log={}", net_log.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let log: Value = serde_json::from_slice(&fs::read(&net_log).unwrap()).unwrap();
    let start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"].clone();
    assert!(start_job.is_u64(), "the net log names its event types");
    let page_requests = log["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == start_job && e["params"]["url"].is_string())
        .filter(|e| {
            // The browser's own requests have no initiating origin; a page's have one (`null`
            // for a file:// page) and the page's network isolation key.
            let p = &e["params"];
            p["initiator"] != "not an origin"
                || p["network_isolation_key"]
                    .as_str()
                    .is_some_and(|k| k.starts_with("file://"))
        })
        .map(|e| e["params"]["url"].as_str().unwrap_or("").to_string())
        .collect();
    Opened {
        dom: String::from_utf8(out.stdout).unwrap(),
        page_requests,
    }
}

fn envcraft(args: &[&str], state: &Path) -> Output {
    Command::new(common::envcraft())
        .args(args)
        .current_dir(root())
        .env("ENVCRAFT_STATE_DIR", state)
        .output()
        .unwrap()
}

fn escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The calls of a `run --json` report, as (tool) in order.
fn tools_called(report: &Value) -> Vec<String> {
    report["actions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["tool"].as_str().map(String::from))
        .collect()
}

#[test]
fn a_kept_runs_page_shows_every_call_and_check_and_loads_nothing() {
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let kept = dir.path().join("kept");
    let out = envcraft(
        &[
            "run",
            "infra-ops/fix-payments-config",
            "--json",
            "--keep",
            kept.to_str().unwrap(),
        ],
        &dir.path().join("state"),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["reward"], 1.0);
    let tools = tools_called(&report);
    let checks = report["checks"].as_array().unwrap();
    assert!(tools.len() >= 5 && checks.len() >= 3);
    // run --keep wrote the page; `envcraft view` of the same directory writes it again, the same.
    let page = dir.path().join("page.html");
    let out = envcraft(
        &["view", kept.to_str().unwrap(), "-o", page.to_str().unwrap()],
        &dir.path().join("state"),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        fs::read(&page).unwrap(),
        fs::read(kept.join("view.html")).unwrap()
    );

    let opened = open(&chromium, &page);
    let dom = &opened.dom;
    for (i, tool) in tools.iter().enumerate() {
        let call = format!("id=\"call-{}\" data-tool=\"{tool}\"", i + 1);
        assert!(
            dom.contains(&call),
            "call {} ({tool}) is not in the DOM",
            i + 1
        );
    }
    assert_eq!(dom.matches("class=\"call").count(), tools.len());
    for c in checks {
        let row = format!(
            "<tr class=\"check\" data-passed=\"pass\"><td>{}</td>",
            escaped(c["name"].as_str().unwrap())
        );
        assert!(dom.contains(&row), "check {} is not in the DOM", c["name"]);
    }
    assert_eq!(dom.matches("<tr class=\"check\"").count(), checks.len());
    // The edit's diff, inline, from the kept original.
    assert!(dom.contains("<span class=\"del\">-  port: 5433</span>"));
    assert!(dom.contains("<span class=\"add\">+  port: 5432</span>"));
    assert!(dom.contains("Content-Security-Policy"));
    assert_eq!(opened.page_requests, Vec::<String>::new());

    // The check of requests can fail: the same page with an image from loopback in its body
    // asks for it once its policy is gone, and not while the policy is there.
    let text = fs::read_to_string(&page).unwrap();
    let leak = "http://127.0.0.1:9/leak.png";
    let with_image = text.replacen("<body>", &format!("<body><img src=\"{leak}\">"), 1);
    let guarded = dir.path().join("guarded.html");
    fs::write(&guarded, &with_image).unwrap();
    assert_eq!(
        open(&chromium, &guarded).page_requests,
        Vec::<String>::new()
    );
    let csp_start = with_image
        .find("<meta http-equiv=\"Content-Security-Policy\"")
        .unwrap();
    let csp_end = csp_start + with_image[csp_start..].find('>').unwrap() + 1;
    let unguarded = dir.path().join("unguarded.html");
    fs::write(
        &unguarded,
        format!("{}{}", &with_image[..csp_start], &with_image[csp_end..]),
    )
    .unwrap();
    assert_eq!(
        open(&chromium, &unguarded).page_requests,
        vec![leak.to_string()]
    );
}

#[test]
fn agent_written_markup_names_and_bytes_show_as_text() {
    if !common::sandbox_ready() {
        return;
    }
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let kept = dir.path().join("kept");
    let payload = "</pre><script>document.title='owned'</script><img src=x onerror=alert(1)>";
    let calls = [
        serde_json::json!({"tool": "write", "args": {"path": "<script>alert(1)</script>", "content": payload}}),
        serde_json::json!({"tool": "write", "args": {"path": "notes.txt", "content": format!("line\n{payload}\n")}}),
        serde_json::json!({"tool": "exec", "args": {"command": format!(
            "printf '%s' \"{}\"; printf '\\377\\000bin' > blob.bin; printf x > \"$(printf 'bad\\377name')\"",
            payload.replace('"', "\\\"")
        )}}),
        serde_json::json!({"tool": "exec", "args": {"command": "ln -s /etc/passwd link-to-host"}}),
    ];
    let traj = dir.path().join("agent.jsonl");
    let text: String = calls.iter().map(|c| format!("{c}\n")).collect();
    fs::write(&traj, text).unwrap();
    let out = Command::new("bash")
        .arg(common::contained().unwrap())
        .arg(common::envcraft())
        .args(["run", "example/archive-read-mail", "--actions"])
        .arg(&traj)
        .arg("--keep")
        .arg(&kept)
        .current_dir(root())
        .env("ENVCRAFT_STATE_DIR", dir.path().join("state"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let opened = open(&chromium, &kept.join("view.html"));
    let dom = &opened.dom;
    // Nothing of the agent's became an element: the page itself has no script and no image.
    assert_eq!(
        dom.matches("<script").count(),
        0,
        "a script element in the DOM"
    );
    assert_eq!(
        dom.matches("<img").count(),
        0,
        "an image element in the DOM"
    );
    assert!(dom.contains("<title>envcraft: example/archive-read-mail</title>"));
    // ... and all of it is there as text: the call's arguments, the file's content (as a diff),
    // the command's output, the file name.
    let shown = escaped(payload);
    assert!(
        dom.matches(shown.as_str()).count() >= 3,
        "the payload as text"
    );
    assert!(dom.contains("<span class=\"add\">+&lt;/pre&gt;&lt;script&gt;"));
    assert!(dom.contains("data-path=\"&lt;script&gt;alert(1)&lt;/script&gt;\""));
    // A binary file is named with its size; a name that is not UTF-8 shows its byte.
    assert!(dom.contains("blob.bin"));
    assert!(dom.contains("binary or not UTF-8: file, 5 B"));
    assert!(dom.contains("bad\\xffname"));
    // A link the agent made is named with its target, never read.
    assert!(dom.contains("symbolic link to /etc/passwd"));
    assert!(!dom.contains("root:x:0:0"));
    assert_eq!(opened.page_requests, Vec::<String>::new());
}

#[test]
fn a_suites_page_links_each_task_to_its_kept_page_or_its_entry() {
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let keep = dir.path().join("runs");
    let reports = dir.path().join("reports");
    fs::create_dir(&reports).unwrap();
    let suite_page = reports.join("suite.html");
    let out = envcraft(
        &[
            "suite",
            "workspaces/example",
            "--json",
            "--keep",
            keep.to_str().unwrap(),
            "--report",
            suite_page.to_str().unwrap(),
        ],
        &state,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tasks = report["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2);
    let opened = open(&chromium, &suite_page);
    for t in tasks {
        let name = t["task"].as_str().unwrap();
        let href = format!("./../runs/{name}/view.html");
        assert!(
            opened
                .dom
                .contains(&format!("<a href=\"{href}\">{name}</a>")),
            "no link to {name}'s page"
        );
        assert!(reports.join(&href).is_file(), "{href} is not there");
    }
    assert_eq!(
        opened
            .dom
            .matches("<tr class=\"task\" data-passed=\"pass\"")
            .count(),
        2
    );
    assert_eq!(opened.page_requests, Vec::<String>::new());

    // Not kept: the links go to the task's entry in the same page.
    let json = dir.path().join("noop.json");
    let out = envcraft(
        &["suite", "workspaces/example", "--agent", "noop", "--json"],
        &state,
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    fs::write(&json, &out.stdout).unwrap();
    let out = envcraft(&["view", json.to_str().unwrap()], &state);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = String::from_utf8(out.stdout).unwrap();
    for id in [
        "task-example.2farchive-read-mail",
        "task-example.2fextract-todos",
    ] {
        assert!(page.contains(&format!("href=\"#{id}\"")));
        assert!(page.contains(&format!("id=\"{id}\"")));
    }
    assert_eq!(page.matches("data-passed=\"fail\"").count(), 2);
}

#[test]
fn viewing_something_that_is_not_a_run_says_what_it_expected() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let out = envcraft(&["view", dir.path().to_str().unwrap()], &state);
    assert_eq!(out.status.code(), Some(125));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is not a run: expected a directory kept by `envcraft run --keep`"),
        "{err}"
    );
    let json = dir.path().join("x.json");
    fs::write(&json, "{\"tasks\": 3}").unwrap();
    let out = envcraft(&["view", json.to_str().unwrap()], &state);
    assert_eq!(out.status.code(), Some(125));
    fs::write(&json, "not json").unwrap();
    let out = envcraft(&["view", json.to_str().unwrap()], &state);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not JSON"), "{err}");
}
