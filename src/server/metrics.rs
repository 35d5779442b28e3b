//! The server's counters, rendered in the Prometheus text format at `GET /metrics`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A summary without quantiles: count and sum of seconds.
#[derive(Default)]
struct Summary {
    count: AtomicU64,
    micros: AtomicU64,
}

impl Summary {
    fn observe(&self, took: Duration) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.micros
            .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    }
}

/// Everything `/metrics` reports (the open-sessions gauge is read from the registry).
#[derive(Default)]
pub struct Metrics {
    sessions_created: AtomicU64,
    /// Sessions a restarted server found: resumed, and dropped.
    sessions_resumed: AtomicU64,
    sessions_not_resumed: AtomicU64,
    /// (tool, outcome) → calls.
    tool_calls: Mutex<BTreeMap<(String, &'static str), u64>>,
    tool_call_seconds: Summary,
    verify_seconds: Summary,
    /// HTTP status → responses.
    http_requests: Mutex<BTreeMap<u16, u64>>,
}

impl Metrics {
    pub fn session_created(&self) {
        self.sessions_created.fetch_add(1, Ordering::Relaxed);
    }

    /// A killed server's session was resumed (`true`) or dropped.
    pub fn session_resumed(&self, resumed: bool) {
        let counter = if resumed {
            &self.sessions_resumed
        } else {
            &self.sessions_not_resumed
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A tool call finished; `tool` is a name the session offers or `unknown` (labels stay few).
    pub fn tool_call(&self, tool: &str, ok: bool, took: Duration) {
        let outcome = if ok { "ok" } else { "error" };
        if let Ok(mut map) = self.tool_calls.lock() {
            *map.entry((tool.to_string(), outcome)).or_default() += 1;
        }
        self.tool_call_seconds.observe(took);
    }

    pub fn verified(&self, took: Duration) {
        self.verify_seconds.observe(took);
    }

    pub fn http_response(&self, status: u16) {
        if let Ok(mut map) = self.http_requests.lock() {
            *map.entry(status).or_default() += 1;
        }
    }

    /// The Prometheus text exposition.
    pub fn render(&self, sessions_open: usize) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP envcraft_sessions_open Sessions currently open.\n\
             # TYPE envcraft_sessions_open gauge\n\
             envcraft_sessions_open {sessions_open}"
        );
        let [inits, inits_networked] = crate::sandbox::warm::ready();
        let _ = writeln!(
            out,
            "# HELP envcraft_sandboxes_ready Sandboxes made ahead of creates, waiting (see --warm-sandboxes).\n\
             # TYPE envcraft_sandboxes_ready gauge\n\
             envcraft_sandboxes_ready{{kind=\"init\"}} {}\n\
             envcraft_sandboxes_ready{{kind=\"plan\"}} {}",
            inits + inits_networked,
            crate::sandbox::pool::ready()
        );
        let (sandboxes, holding) = crate::sandbox::handback::counts();
        let _ = writeln!(
            out,
            "# HELP envcraft_sandboxes_live Sandboxes with an init (sessions, forks, graders, made ahead).\n\
             # TYPE envcraft_sandboxes_live gauge\n\
             envcraft_sandboxes_live {sandboxes}\n\
             # HELP envcraft_sandboxes_holding_descriptors Of them, those keeping their workspace's descriptors between calls (the others ask their init again).\n\
             # TYPE envcraft_sandboxes_holding_descriptors gauge\n\
             envcraft_sandboxes_holding_descriptors {holding}"
        );
        let _ = writeln!(
            out,
            "# HELP envcraft_sessions_created_total Sessions created (forks included).\n\
             # TYPE envcraft_sessions_created_total counter\n\
             envcraft_sessions_created_total {}",
            self.sessions_created.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP envcraft_sessions_resumed_total Sessions of a killed server, by whether this one resumed them.\n\
             # TYPE envcraft_sessions_resumed_total counter\n\
             envcraft_sessions_resumed_total{{outcome=\"resumed\"}} {}\n\
             envcraft_sessions_resumed_total{{outcome=\"dropped\"}} {}",
            self.sessions_resumed.load(Ordering::Relaxed),
            self.sessions_not_resumed.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "# HELP envcraft_tool_calls_total Tool calls by tool and outcome.\n\
             # TYPE envcraft_tool_calls_total counter"
        );
        if let Ok(map) = self.tool_calls.lock() {
            for ((tool, outcome), n) in map.iter() {
                let _ = writeln!(
                    out,
                    "envcraft_tool_calls_total{{tool=\"{}\",outcome=\"{outcome}\"}} {n}",
                    escape(tool)
                );
            }
        }
        summary(
            &mut out,
            "envcraft_tool_call_seconds",
            "Time spent in tool calls.",
            &self.tool_call_seconds,
        );
        summary(
            &mut out,
            "envcraft_verify_seconds",
            "Time spent verifying sessions.",
            &self.verify_seconds,
        );
        let _ = writeln!(
            out,
            "# HELP envcraft_http_requests_total HTTP responses by status.\n\
             # TYPE envcraft_http_requests_total counter"
        );
        if let Ok(map) = self.http_requests.lock() {
            for (status, n) in map.iter() {
                let _ = writeln!(
                    out,
                    "envcraft_http_requests_total{{status=\"{status}\"}} {n}"
                );
            }
        }
        out
    }
}

fn summary(out: &mut String, name: &str, help: &str, s: &Summary) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} summary\n{name}_sum {:.6}\n{name}_count {}",
        s.micros.load(Ordering::Relaxed) as f64 / 1e6,
        s.count.load(Ordering::Relaxed)
    );
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_summaries() {
        let m = Metrics::default();
        m.session_created();
        m.tool_call("read", true, Duration::from_millis(2));
        m.tool_call("read", false, Duration::from_millis(1));
        m.http_response(200);
        let text = m.render(1);
        assert!(text.contains("envcraft_sessions_open 1\n"));
        assert!(text.contains("envcraft_sessions_created_total 1\n"));
        assert!(text.contains("envcraft_tool_calls_total{tool=\"read\",outcome=\"ok\"} 1\n"));
        assert!(text.contains("envcraft_tool_calls_total{tool=\"read\",outcome=\"error\"} 1\n"));
        assert!(text.contains("envcraft_tool_call_seconds_count 2\n"));
        assert!(text.contains("envcraft_verify_seconds_count 0\n"));
        assert!(text.contains("envcraft_http_requests_total{status=\"200\"} 1\n"));
    }
}
