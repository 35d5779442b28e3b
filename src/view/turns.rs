//! A run's turns, read from its transcript (OpenClaw's session format, see
//! `session::transcript`) or from the `actions` of `run --json`: each turn's prompt, what the
//! assistant said, and each tool call with its arguments, result and time.

use serde_json::Value;

/// One turn: the user's prompt and what followed it.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Turn {
    pub prompt: Option<String>,
    pub items: Vec<Item>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// The assistant's text.
    Say(String),
    /// The assistant's thinking.
    Thinking(String),
    Call(Call),
    /// An event of the transcript other than a message (its type).
    Event(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub id: String,
    pub tool: String,
    pub args: Value,
    /// The result as text (JSON, pretty-printed where it parses), if it came.
    pub result: Option<String>,
    pub failed: bool,
    pub duration_us: Option<u64>,
}

/// The text parts of a message's content (a string, or a list of `{"type": "text"}` parts).
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p["type"] == "text")
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A result's text, pretty-printed when it is JSON; whether it says `"ok": false`.
fn result_text(text: &str) -> (String, bool) {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => (
            serde_json::to_string_pretty(&v).unwrap_or_else(|_| text.to_string()),
            v["ok"] == Value::Bool(false),
        ),
        Err(_) => (text.to_string(), false),
    }
}

fn current(turns: &mut Vec<Turn>) -> &mut Turn {
    if turns.is_empty() {
        turns.push(Turn::default());
    }
    let last = turns.len() - 1;
    &mut turns[last]
}

/// The turns of a transcript (JSON lines; lines that are not JSON are shown as events).
pub fn from_transcript(text: &str) -> Vec<Turn> {
    let mut turns: Vec<Turn> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(entry) = serde_json::from_str::<Value>(line) else {
            current(&mut turns)
                .items
                .push(Item::Event("a line that is not JSON".into()));
            continue;
        };
        match entry["type"].as_str() {
            Some("session") => {}
            Some("message") => message(&mut turns, &entry["message"]),
            Some(other) => current(&mut turns)
                .items
                .push(Item::Event(other.to_string())),
            None => current(&mut turns)
                .items
                .push(Item::Event("an entry without a type".into())),
        }
    }
    turns
}

fn message(turns: &mut Vec<Turn>, message: &Value) {
    match message["role"].as_str() {
        Some("user") => turns.push(Turn {
            prompt: Some(content_text(&message["content"])),
            items: Vec::new(),
        }),
        Some("assistant") => {
            let turn = current(turns);
            let parts: &[Value] = match &message["content"] {
                Value::Array(parts) => parts,
                Value::String(s) => {
                    turn.items.push(Item::Say(s.clone()));
                    &[]
                }
                _ => &[],
            };
            for part in parts {
                match part["type"].as_str() {
                    Some("text") => turn
                        .items
                        .push(Item::Say(part["text"].as_str().unwrap_or("").to_string())),
                    Some("thinking") => turn.items.push(Item::Thinking(
                        part["thinking"].as_str().unwrap_or("").to_string(),
                    )),
                    Some("toolCall") => turn.items.push(Item::Call(Call {
                        id: part["id"].as_str().unwrap_or("").to_string(),
                        tool: part["name"].as_str().unwrap_or("?").to_string(),
                        args: part["arguments"].clone(),
                        result: None,
                        failed: false,
                        duration_us: None,
                    })),
                    _ => {}
                }
            }
        }
        Some("toolResult") => {
            let id = message["toolCallId"].as_str().unwrap_or("");
            let (text, not_ok) = result_text(&content_text(&message["content"]));
            let failed = not_ok || message["isError"] == Value::Bool(true);
            let found = turns
                .iter_mut()
                .rev()
                .flat_map(|t| t.items.iter_mut().rev())
                .find_map(|item| match item {
                    Item::Call(c) if c.id == id && c.result.is_none() => Some(c),
                    _ => None,
                });
            match found {
                Some(call) => {
                    call.result = Some(text);
                    call.failed = failed;
                }
                None => current(turns)
                    .items
                    .push(Item::Event("a result of no call".into())),
            }
        }
        _ => {}
    }
}

/// The turns of a `run --json` report's `actions` (replayed calls and `next_turn` prompts);
/// the first turn's prompt is not in them.
pub fn from_actions(actions: &[Value]) -> Vec<Turn> {
    let mut turns: Vec<Turn> = Vec::new();
    for (i, action) in actions.iter().enumerate() {
        if let Some(prompt) = action.get("next_turn") {
            turns.push(Turn {
                prompt: prompt.as_str().map(String::from),
                items: Vec::new(),
            });
            continue;
        }
        let result = &action["result"];
        current(&mut turns).items.push(Item::Call(Call {
            id: format!("action_{i}"),
            tool: action["tool"].as_str().unwrap_or("?").to_string(),
            args: action["args"].clone(),
            result: (!result.is_null())
                .then(|| serde_json::to_string_pretty(result).unwrap_or_default()),
            failed: result["ok"] == Value::Bool(false),
            duration_us: action["duration_us"].as_u64(),
        }));
    }
    turns
}

/// The calls of all turns, in order.
pub fn calls_mut(turns: &mut [Turn]) -> impl Iterator<Item = &mut Call> {
    turns
        .iter_mut()
        .flat_map(|t| t.items.iter_mut())
        .filter_map(|i| match i {
            Item::Call(c) => Some(c),
            _ => None,
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_transcript_gives_turns_calls_and_results() {
        let t = r#"{"type":"session","version":3}
{"type":"message","message":{"role":"user","content":[{"type":"text","text":"do it"}]}}
{"type":"message","message":{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"toolCall","id":"c0","name":"ls","arguments":{"path":"."}}]}}
{"type":"message","message":{"role":"toolResult","toolCallId":"c0","toolName":"ls","isError":false,"content":[{"type":"text","text":"{\"ok\":false,\"error\":{}}"}]}}
{"type":"custom","customType":"x"}
not json
{"type":"message","message":{"role":"user","content":"next"}}"#;
        let turns = from_transcript(t);
        assert_eq!(turns.len(), 2);
        assert_eq!(turns[0].prompt.as_deref(), Some("do it"));
        assert_eq!(turns[0].items[0], Item::Say("ok".into()));
        let Item::Call(c) = &turns[0].items[1] else {
            panic!()
        };
        assert_eq!(c.tool, "ls");
        assert!(c.failed, "ok: false is a failed call");
        assert!(c.result.as_deref().unwrap().contains("\"ok\": false"));
        assert_eq!(turns[0].items[2], Item::Event("custom".into()));
        assert_eq!(turns[1].prompt.as_deref(), Some("next"));
    }

    #[test]
    fn actions_give_turns_with_durations() {
        let actions: Vec<Value> = serde_json::from_str(
            r#"[{"tool":"ls","args":{},"result":{"ok":true},"duration_us":5},{"next_turn":"two"},{"tool":"exec","args":{"command":"x"},"result":{"ok":false},"duration_us":7}]"#,
        )
        .unwrap();
        let mut turns = from_actions(&actions);
        assert_eq!(turns.len(), 2);
        let calls: Vec<&mut Call> = calls_mut(&mut turns).collect();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].duration_us, Some(5));
        assert!(calls[1].failed);
    }
}
