//! The page of a suite run (`suite --json`'s object): the totals, a table per environment
//! (task, reward, pass or fail, time) whose task names link to the task's own page when the
//! suite kept it, else to the task's entry further down the same page (its failed checks and
//! error).

use std::collections::BTreeMap;

use serde_json::Value;

use super::html::{self, Html};
use super::page;

/// The most tasks listed (the rest are counted).
pub const TASKS: usize = 20_000;

/// The page; `link` gives the href of a task's kept page (from its `kept` entry), if any.
pub fn page(report: &Value, link: &dyn Fn(&Value) -> Option<String>) -> String {
    let agent = report["agent"].as_str().unwrap_or("?");
    let tasks = report["tasks"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let mut body = Html::new();
    body.raw("<h1>")
        .text(&format!("envcraft suite ({agent} agent)"))
        .raw("</h1>");
    body.append(&totals(&report["totals"]));
    let mut by_env: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for t in tasks.iter().take(TASKS) {
        by_env
            .entry(t["env"].as_str().unwrap_or(""))
            .or_default()
            .push(t);
    }
    for (env, list) in &by_env {
        body.append(&env_table(env, list, link));
    }
    if tasks.len() > TASKS {
        body.raw("<p class=\"cut\">")
            .text(&format!("… {} more tasks not shown", tasks.len() - TASKS))
            .raw("</p>");
    }
    body.raw("<h2 id=\"details\">Tasks</h2>");
    for t in tasks.iter().take(TASKS) {
        body.append(&details(t, link));
    }
    page::document(&format!("envcraft suite ({agent} agent)"), &body)
}

fn number(v: &Value, digits: usize) -> String {
    match v.as_f64() {
        Some(x) => format!("{x:.digits$}"),
        None => "-".into(),
    }
}

fn totals(t: &Value) -> Html {
    let mut h = Html::new();
    h.raw("<p class=\"summary\" id=\"totals\">");
    let items = [
        ("tasks", number(&t["tasks"], 0)),
        ("passed", number(&t["passed"], 0)),
        ("mean reward", number(&t["mean_reward"], 3)),
        ("wall", format!("{} s", number(&t["wall_s"], 1))),
        ("tasks/s", number(&t["tasks_per_s"], 1)),
    ];
    for (k, v) in items {
        h.raw("<span>").text(&format!("{k}: {v}")).raw("</span>");
    }
    h.raw("</p><p class=\"note\">")
        .text(&format!(
            "per task: session {} ms, calls {} ms, verify {} ms, cleanup {} ms",
            number(&t["mean_create_ms"], 1),
            number(&t["mean_calls_ms"], 1),
            number(&t["mean_verify_ms"], 1),
            number(&t["mean_cleanup_ms"], 1)
        ))
        .raw("</p>");
    h
}

fn outcome(t: &Value) -> (&'static str, &'static str) {
    let not_run = t["not_run"]
        .as_array()
        .is_some_and(|parts| !parts.is_empty());
    if t["reward"].is_null() && not_run {
        ("none", "not scored")
    } else if t["reward"].is_null() {
        ("none", "no reward")
    } else if t["passed"] == Value::Bool(true) {
        ("pass", "pass")
    } else {
        ("fail", "fail")
    }
}

fn task_link(t: &Value, link: &dyn Fn(&Value) -> Option<String>) -> String {
    link(t).unwrap_or_else(|| {
        format!(
            "#{}",
            html::anchor("task", t["task"].as_str().unwrap_or(""))
        )
    })
}

fn env_table(env: &str, list: &[&Value], link: &dyn Fn(&Value) -> Option<String>) -> Html {
    let mut h = Html::new();
    let passed = list
        .iter()
        .filter(|t| t["passed"] == Value::Bool(true))
        .count();
    h.raw("<h2 id=\"")
        .raw(&html::anchor("env", env))
        .raw("\">")
        .text(env)
        .raw("</h2><p class=\"note\">")
        .text(&format!("{passed} of {} passed", list.len()))
        .raw("</p><table class=\"env\"><thead><tr><th>task</th><th>reward</th><th>result</th><th>time (ms)</th></tr></thead><tbody>");
    for t in list {
        let (class, word) = outcome(t);
        h.raw("<tr class=\"task\" data-passed=\"")
            .raw(class)
            .raw("\"><td><a href=\"")
            .text(&task_link(t, link))
            .raw("\">")
            .text(t["task"].as_str().unwrap_or(""))
            .raw("</a></td><td class=\"num\">")
            .text(&number(&t["reward"], 3))
            .raw("</td><td class=\"")
            .raw(class)
            .raw("\">")
            .text(word)
            .raw("</td><td class=\"num\">")
            .text(&number(&t["duration_ms"], 0))
            .raw("</td></tr>");
    }
    h.raw("</tbody></table>");
    h
}

fn details(t: &Value, link: &dyn Fn(&Value) -> Option<String>) -> Html {
    let name = t["task"].as_str().unwrap_or("");
    let (class, word) = outcome(t);
    let mut h = Html::new();
    h.raw("<section class=\"task-detail\" id=\"")
        .raw(&html::anchor("task", name))
        .raw("\"><h3>")
        .text(name)
        .raw(" <span class=\"")
        .raw(class)
        .raw("\">")
        .text(word)
        .raw("</span></h3><p class=\"note\">")
        .text(&format!(
            "reward {}; {} ms (session {} ms, calls {} ms, verify {} ms, cleanup {} ms)",
            number(&t["reward"], 3),
            number(&t["duration_ms"], 0),
            number(&t["create_ms"], 1),
            number(&t["calls_ms"], 1),
            number(&t["verify_ms"], 1),
            number(&t["cleanup_ms"], 1)
        ))
        .raw("</p>");
    if let Some(href) = link(t) {
        h.raw("<p><a href=\"")
            .text(&href)
            .raw("\">the run's page</a></p>");
    }
    if let Some(e) = t["error"].as_str() {
        h.raw("<p class=\"fail\">error: ").text(e).raw("</p>");
    }
    let failed: Vec<&str> = t["failed_checks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if !failed.is_empty() {
        h.raw("<ul class=\"failed-checks\">");
        for c in failed.iter().take(200) {
            h.raw("<li>").text(c).raw("</li>");
        }
        h.raw("</ul>");
    }
    h.raw("</section>");
    h
}
