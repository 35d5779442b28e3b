//! The page of one run: its outcome, each turn with its prompt and tool calls (arguments,
//! result, time), the workspace diff, the verifier's checks with expected and actual, the
//! timings and what the sandbox enforced.

use serde_json::Value;

use super::changes;
use super::html::{self, Html};
use super::kept::Kept;
use super::page;
use super::turns::{Item, Turn};

/// The most bytes of one call's arguments, or of one result, shown.
pub const CALL_BYTES: usize = 32 * 1024;
/// The most bytes of one prompt or one assistant message shown.
pub const MESSAGE_BYTES: usize = 32 * 1024;
/// The most tool calls shown in full (the rest are counted).
pub const CALLS: usize = 2000;

/// What a run's page is made of.
pub struct Run<'a> {
    /// The run's report (`run --json`'s object, or `report.json` of a kept run); `Null` when
    /// there is none.
    pub report: &'a Value,
    pub turns: &'a [Turn],
    /// The change list (`changes.json`, or the report's `changes`).
    pub changes: &'a Value,
    /// The kept directory, for the files' contents.
    pub kept: Option<&'a Kept>,
}

fn outcome(passed: &Value) -> (&'static str, &'static str) {
    match passed.as_bool() {
        Some(true) => ("pass", "passed"),
        Some(false) => ("fail", "failed"),
        None => ("none", "not verified"),
    }
}

fn micros(us: Option<u64>) -> String {
    match us {
        Some(us) if us >= 10_000 => format!("{:.1} ms", us as f64 / 1000.0),
        Some(us) => format!("{:.2} ms", us as f64 / 1000.0),
        None => "-".into(),
    }
}

/// The whole page.
pub fn page(run: &Run) -> String {
    let task = run.report["task"].as_str().unwrap_or("a run");
    let mut body = Html::new();
    body.raw("<h1>").text(task).raw("</h1>");
    body.append(&summary(run));
    body.append(&turns(run.turns));
    body.append(&changes::section(run.changes, run.kept));
    body.append(&checks(run.report));
    body.append(&timings(run.report, run.turns));
    body.append(&enforced(&run.report["enforced"]));
    page::document(&format!("envcraft: {task}"), &body)
}

fn summary(run: &Run) -> Html {
    let r = run.report;
    let (class, word) = outcome(&r["passed"]);
    let calls = run
        .turns
        .iter()
        .flat_map(|t| &t.items)
        .filter(|i| matches!(i, Item::Call(_)))
        .count();
    let mut h = Html::new();
    h.raw("<p class=\"summary\"><span id=\"outcome\" class=\"")
        .raw(class)
        .raw("\">")
        .text(word)
        .raw("</span><span>reward ")
        .text(&match (r["reward"].as_f64(), r["not_run"].as_array()) {
            (Some(x), _) => format!("{x:.3}"),
            (None, Some(parts)) if !parts.is_empty() => format!(
                "none: not scored ({} not run)",
                parts
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            (None, _) => "none".into(),
        })
        .raw("</span><span>")
        .text(&format!(
            "{} turn{}, {calls} tool call{}",
            run.turns.len(),
            if run.turns.len() == 1 { "" } else { "s" },
            if calls == 1 { "" } else { "s" }
        ))
        .raw("</span>");
    if let Some(s) = r["session"].as_str() {
        h.raw("<span>session ").text(s).raw("</span>");
    }
    h.raw("</p>");
    if let Some(e) = r["verifier_error"].as_str() {
        h.raw("<p class=\"fail\">verifier error: ")
            .text(e)
            .raw("</p>");
    }
    if r["transcript_truncated"] == Value::Bool(true) {
        h.raw("<p class=\"note\">The transcript reached its policy's limit: later calls are not in it.</p>");
    }
    if r.is_null() {
        h.raw(
            "<p class=\"note\">No report.json in this directory: no checks or timings to show.</p>",
        );
    }
    h
}

fn turns(turns: &[Turn]) -> Html {
    let mut h = Html::new();
    h.raw("<h2 id=\"turns\">Turns</h2>");
    if turns.is_empty() {
        h.raw("<p class=\"note\">No transcript.</p>");
    }
    let mut n = 0usize;
    let mut left_out = 0usize;
    for (t, turn) in turns.iter().enumerate() {
        h.raw(&format!(
            "<section class=\"turn\" id=\"turn-{}\"><h3>Turn {}</h3>",
            t + 1,
            t + 1
        ));
        if let Some(p) = &turn.prompt {
            h.append(&html::pre("prompt", p, MESSAGE_BYTES));
        }
        for item in &turn.items {
            match item {
                Item::Say(text) => {
                    h.append(&html::pre("say", text, MESSAGE_BYTES));
                }
                Item::Thinking(text) => {
                    h.raw("<details class=\"thinking\"><summary>thinking</summary>")
                        .append(&html::pre("thinking", text, MESSAGE_BYTES))
                        .raw("</details>");
                }
                Item::Event(kind) => {
                    h.raw("<p class=\"note\">event: ").text(kind).raw("</p>");
                }
                Item::Call(call) => {
                    n += 1;
                    if n > CALLS {
                        left_out += 1;
                        continue;
                    }
                    let args = serde_json::to_string_pretty(&call.args).unwrap_or_default();
                    let status = match (&call.result, call.failed) {
                        (None, _) => "no result",
                        (Some(_), true) => "failed",
                        (Some(_), false) => "ok",
                    };
                    h.raw(&format!(
                        "<details open class=\"call{}\" id=\"call-{n}\" data-tool=\"",
                        if call.failed { " failed" } else { "" }
                    ))
                    .text(&call.tool)
                    .raw("\"><summary>")
                    .text(&format!("#{n} "))
                    .raw("<span class=\"tool\">")
                    .text(&call.tool)
                    .raw("</span> ")
                    .text(&format!("{status}, {}", micros(call.duration_us)))
                    .raw("</summary><p class=\"label\">arguments</p>")
                    .append(&json_block("args", &args))
                    .raw("<p class=\"label\">result</p>");
                    match &call.result {
                        Some(r) => h.append(&json_block("result", r)),
                        None => h.raw("<p class=\"note\">no result recorded</p>"),
                    };
                    h.raw("</details>");
                }
            }
        }
        h.raw("</section>");
    }
    if left_out > 0 {
        h.raw("<p class=\"cut\">")
            .text(&format!("… {left_out} more tool calls not shown"))
            .raw("</p>");
    }
    h
}

/// A call's arguments or result: its JSON, with each multi-line string (a file's content, a
/// command's output) taken out and shown as text beneath it, under its key.
fn json_block(class: &str, text: &str) -> Html {
    let Ok(Value::Object(mut map)) = serde_json::from_str::<Value>(text) else {
        return html::pre(class, text, CALL_BYTES);
    };
    let mut blocks = Vec::new();
    for (key, value) in map.iter_mut() {
        if let Value::String(s) = value
            && s.contains('\n')
        {
            let note = format!("({} bytes, below)", s.len());
            blocks.push((key.clone(), std::mem::replace(s, note)));
        }
    }
    let shown = serde_json::to_string_pretty(&map).unwrap_or_default();
    let mut h = html::pre(class, &shown, CALL_BYTES);
    for (key, s) in blocks {
        h.raw("<p class=\"label\">")
            .text(&key)
            .raw("</p>")
            .append(&html::pre(&format!("{class} text"), &s, CALL_BYTES));
    }
    h
}

fn checks(report: &Value) -> Html {
    let mut h = Html::new();
    h.raw("<h2 id=\"checks\">Checks</h2>");
    let list = report["checks"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    if list.is_empty() {
        h.raw("<p class=\"note\">No checks.</p>");
        return h;
    }
    h.raw("<table><thead><tr><th>check</th><th>result</th><th>expected</th><th>actual</th></tr></thead><tbody>");
    for c in list {
        let (class, word) = outcome(&c["passed"]);
        h.raw("<tr class=\"check\" data-passed=\"")
            .raw(class)
            .raw("\"><td>")
            .text(c["name"].as_str().unwrap_or(""))
            .raw("</td><td class=\"")
            .raw(class)
            .raw("\">")
            .text(word)
            .raw("</td><td>")
            .append(&html::pre(
                "expected",
                c["expected"].as_str().unwrap_or(""),
                CALL_BYTES,
            ))
            .raw("</td><td>")
            .append(&html::pre(
                "actual",
                c["actual"].as_str().unwrap_or(""),
                CALL_BYTES,
            ));
        if let Some(d) = c["diff"].as_str() {
            h.raw("<p class=\"label\">actual content</p>")
                .append(&html::pre("diff", d, CALL_BYTES));
        }
        h.raw("</td></tr>");
    }
    h.raw("</tbody></table>");
    h
}

fn timings(report: &Value, turns: &[Turn]) -> Html {
    let mut h = Html::new();
    h.raw("<h2 id=\"timings\">Timings</h2><table><tbody>");
    let calls_us: u64 = turns
        .iter()
        .flat_map(|t| &t.items)
        .filter_map(|i| match i {
            Item::Call(c) => c.duration_us,
            _ => None,
        })
        .sum();
    let rows = [
        ("session created", report["create_us"].as_u64()),
        ("tool calls (sum)", Some(calls_us).filter(|us| *us > 0)),
        ("verify", report["verify_us"].as_u64()),
        ("cleanup", report["cleanup_us"].as_u64()),
        (
            "whole run",
            report["duration_ms"].as_u64().map(|ms| ms * 1000),
        ),
    ];
    for (name, us) in rows {
        h.raw("<tr><th>")
            .text(name)
            .raw("</th><td class=\"num\">")
            .text(&micros(us))
            .raw("</td></tr>");
    }
    h.raw("</tbody></table>");
    h
}

fn enforced(enforced: &Value) -> Html {
    let mut h = Html::new();
    let Some(map) = enforced.as_object() else {
        return h;
    };
    h.raw("<h2 id=\"enforced\">Sandbox</h2><details><summary>what was enforced</summary><table><tbody>");
    for (k, v) in map {
        let v = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        h.raw("<tr><th>")
            .text(k)
            .raw("</th><td>")
            .text(&v)
            .raw("</td></tr>");
    }
    h.raw("</tbody></table></details>");
    h
}
