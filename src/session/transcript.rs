//! The transcript: one JSON object per line, in the shape of OpenClaw's session files (version
//! 3), so that graders and parsers written for OpenClaw (PinchBench's `grade(transcript,
//! workspace_path)`, Harbor's) read it as they are: a first line `{"type": "session", "version":
//! 3, "id", "timestamp", "cwd"}`, then entries, each with an `id` and the `parentId` of the one
//! before (`null` for the first): `{"type": "message", "message": {"role": "user" | "assistant"
//! | "toolResult", "content": [...]}}`, tool calls as `{"type": "toolCall", "id", "name",
//! "arguments"}` in an assistant message, results as a `toolResult` message naming the call, and
//! the model's own assistant messages (text, thinking, usage) when its client hands them over.
//!
//! Deterministic: the session's id in the header is derived from the task, the clock and the
//! seed, entry ids count entries (`00000001`, ...), and timestamps are the session clock's, so
//! the same trajectory gives the same transcript byte for byte (and a resume, which replays it,
//! writes it again the same).
//!
//! Bounded: a result's text is its JSON, with every string longer than [`FIELD_CAP`] bytes
//! (an `exec`'s streams, a `read`'s content, a skill's output) cut there and marked (the
//! message then says `"truncated": {"bytes", "sha256"}`: the whole result's size and digest,
//! which a resume checks its replay against). A call's arguments are kept whole (a resume
//! replays them). What a session may write in all is its policy's `limits.transcript_bytes`,
//! counted by [`super::store::SessionDir`].

use std::borrow::Cow;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::json;

/// The longest string of a result the transcript keeps (bytes, before escaping); the rest is
/// replaced by a note saying how much was left out.
pub const FIELD_CAP: usize = 16 * 1024;

/// The custom event that ends a transcript cut at its limit (after it, no call is recorded).
pub const TRUNCATED_EVENT: &str = "envcraft.transcript_truncated";

/// The transcript format's version, as the header says.
pub const VERSION: u64 = 3;

/// Where the next entry of a transcript goes: entries form one chain, each the child of the
/// one before.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chain {
    written: u64,
}

impl Chain {
    /// The id of the next entry and its parent's (the last written), counting it as written.
    pub fn advance(&mut self) -> (String, Option<String>) {
        let parent = self.last();
        self.written += 1;
        (entry_id(self.written), parent)
    }

    /// The id of the last entry written, if any.
    pub fn last(&self) -> Option<String> {
        (self.written > 0).then(|| entry_id(self.written))
    }
}

/// The id of entry `n` (from 1): eight hex digits, as OpenClaw's entry ids are.
pub fn entry_id(n: u64) -> String {
    format!("{n:08x}")
}

/// A session id for the header, in the UUID form OpenClaw's have, derived from `material`
/// (the task, the clock, the seed): the same inputs give the same id.
pub fn session_uuid(material: &str) -> String {
    let d = Sha256::digest(material.as_bytes());
    let mut b = [0u8; 16];
    b.copy_from_slice(&d[..16]);
    // Version 8 (custom), variant RFC 4122.
    b[6] = (b[6] & 0x0f) | 0x80;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// The first line: the session's id, when it started, and its working directory.
pub fn header(id: &str, timestamp: &str, cwd: &str) -> Value {
    json!({
        "type": "session",
        "version": VERSION,
        "id": id,
        "timestamp": timestamp,
        "cwd": cwd,
    })
}

/// `line` given the next place in `chain`.
fn placed(mut line: Value, chain: &mut Chain) -> Value {
    let (id, parent) = chain.advance();
    line["id"] = json!(id);
    line["parentId"] = json!(parent);
    line
}

/// The user's turn `text`.
pub fn user_message(text: &str, timestamp: &str, chain: &mut Chain) -> Value {
    placed(
        json!({
            "type": "message",
            "timestamp": timestamp,
            "message": {"role": "user", "content": [{"type": "text", "text": text}]},
        }),
        chain,
    )
}

/// The model's own assistant `message` (a `{"role": "assistant", "content": [...], ...}` made
/// by [`super::assistant`]).
pub fn assistant_message(message: &Value, timestamp: &str, chain: &mut Chain) -> Value {
    placed(
        json!({"type": "message", "timestamp": timestamp, "message": message}),
        chain,
    )
}

/// The agent's call of `tool` with `arguments`, numbered `index`: the first line
/// [`call_lines`] writes, as a value (the reference its tests compare with).
#[cfg(test)]
pub(crate) fn tool_call(
    index: u64,
    tool: &str,
    arguments: &Value,
    timestamp: &str,
    chain: &mut Chain,
) -> Value {
    let line = json!({
        "type": "message",
        "timestamp": timestamp,
        "message": {
            "role": "assistant",
            "content": [{
                "type": "toolCall",
                "id": call_id(index),
                "name": tool,
                "arguments": arguments,
            }],
        },
    });
    placed(line, chain)
}

/// The result of call `index` (the structured result, as text, as OpenClaw stores it): the
/// second line [`call_lines`] writes, as a value.
#[cfg(test)]
pub(crate) fn tool_result(
    index: u64,
    tool: &str,
    result: &Value,
    is_error: bool,
    timestamp: &str,
    chain: &mut Chain,
) -> Value {
    let (kept, cut) = recorded(result);
    let mut line = json!({
        "type": "message",
        "timestamp": timestamp,
        "message": {
            "role": "toolResult",
            "toolCallId": call_id(index),
            "toolName": tool,
            "content": [{"type": "text", "text": kept.to_string()}],
            "isError": is_error,
        },
    });
    if let Some(cut) = cut {
        line["message"]["truncated"] = json!({"bytes": cut.bytes, "sha256": cut.sha256});
    }
    placed(line, chain)
}

/// What a cut result was whole: its JSON's size and SHA-256 (hex).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    pub bytes: u64,
    pub sha256: String,
}

/// The SHA-256 (hex) of `result`'s JSON, as a cut result records it.
pub fn result_digest(result: &Value) -> String {
    let bytes = serde_json::to_vec(result).unwrap_or_default();
    hex(&Sha256::digest(&bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `result` as the transcript keeps it: unchanged when no string in it is longer than
/// [`FIELD_CAP`]; else with those strings cut, and what the whole was.
pub fn recorded(result: &Value) -> (Cow<'_, Value>, Option<Cut>) {
    if !has_long_string(result) {
        return (Cow::Borrowed(result), None);
    }
    let whole = serde_json::to_vec(result).unwrap_or_default();
    let cut = Cut {
        bytes: whole.len() as u64,
        sha256: hex(&Sha256::digest(&whole)),
    };
    (Cow::Owned(cut_strings(result)), Some(cut))
}

fn has_long_string(value: &Value) -> bool {
    match value {
        Value::String(s) => s.len() > FIELD_CAP,
        Value::Array(items) => items.iter().any(has_long_string),
        Value::Object(map) => map.values().any(has_long_string),
        _ => false,
    }
}

fn cut_strings(value: &Value) -> Value {
    match value {
        Value::String(s) if s.len() > FIELD_CAP => {
            let mut end = FIELD_CAP;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            Value::String(format!(
                "{}\n[envcraft: {} more bytes not recorded in the transcript]",
                &s[..end],
                s.len() - end
            ))
        }
        Value::Array(items) => Value::Array(items.iter().map(cut_strings).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), cut_strings(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The event that ends a transcript cut at `limit` bytes: from call `index` on, nothing is
/// recorded.
pub fn truncated_line(index: u64, limit: u64, timestamp: &str, chain: &mut Chain) -> Vec<u8> {
    let event = json!({
        "type": "custom",
        "customType": TRUNCATED_EVENT,
        "timestamp": timestamp,
        "data": {
            "from_action_index": index,
            "limit_bytes": limit,
            "message": format!(
                "the transcript reached its policy's limit (limits.transcript_bytes = {limit}): calls from action {index} on are not recorded"
            ),
        },
    });
    let mut line = json::to_vec(&placed(event, chain));
    line.push(b'\n');
    line
}

/// The call `index` and its result as two lines, ready to append: the text of
/// [`tool_call`] and [`tool_result`] as `serde_json` writes them, written directly (the result,
/// cut as [`recorded`] says, is written as the escaped text of its JSON in one pass: see
/// [`crate::json`]).
pub fn call_lines(
    index: u64,
    tool: &str,
    arguments: &Value,
    result: &Value,
    is_error: bool,
    timestamp: &str,
    chain: &mut Chain,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    let id = call_id(index);
    let place = |out: &mut Vec<u8>, parent: Option<String>| {
        out.extend_from_slice(br#","parentId":"#);
        match parent {
            Some(p) => json::write_str(out, &p),
            None => out.extend_from_slice(b"null"),
        }
    };
    // The keys in the order serde_json writes `tool_call`'s and `tool_result`'s maps (sorted).
    let (entry, parent) = chain.advance();
    out.extend_from_slice(br#"{"id":"#);
    json::write_str(&mut out, &entry);
    out.extend_from_slice(br#","message":{"content":[{"arguments":"#);
    json::write_value(&mut out, arguments);
    out.extend_from_slice(br#","id":"#);
    json::write_str(&mut out, &id);
    out.extend_from_slice(br#","name":"#);
    json::write_str(&mut out, tool);
    out.extend_from_slice(br#","type":"toolCall"}],"role":"assistant"}"#);
    place(&mut out, parent);
    out.extend_from_slice(br#","timestamp":"#);
    json::write_str(&mut out, timestamp);
    out.extend_from_slice(b",\"type\":\"message\"}\n");
    let (entry, parent) = chain.advance();
    out.extend_from_slice(br#"{"id":"#);
    json::write_str(&mut out, &entry);
    out.extend_from_slice(br#","message":{"content":[{"text":"#);
    // The result's text is its JSON: written escaped, in one pass.
    let (kept, cut) = recorded(result);
    out.push(b'"');
    json::write_value_as_text(&mut out, &kept);
    out.push(b'"');
    out.extend_from_slice(br#","type":"text"}],"isError":"#);
    out.extend_from_slice(if is_error { b"true" } else { b"false" });
    out.extend_from_slice(br#","role":"toolResult","toolCallId":"#);
    json::write_str(&mut out, &id);
    out.extend_from_slice(br#","toolName":"#);
    json::write_str(&mut out, tool);
    if let Some(cut) = cut {
        out.extend_from_slice(br#","truncated":{"bytes":"#);
        out.extend_from_slice(cut.bytes.to_string().as_bytes());
        out.extend_from_slice(br#","sha256":"#);
        json::write_str(&mut out, &cut.sha256);
        out.push(b'}');
    }
    out.push(b'}');
    place(&mut out, parent);
    out.extend_from_slice(br#","timestamp":"#);
    json::write_str(&mut out, timestamp);
    out.extend_from_slice(b",\"type\":\"message\"}\n");
    out
}

fn call_id(index: u64) -> String {
    format!("call_{index}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn tool_calls_have_the_openclaw_shape_graders_read() {
        let mut chain = Chain::default();
        let call = tool_call(
            3,
            "write",
            &json!({"path": "a.txt"}),
            "2026-03-02T09:00:00Z",
            &mut chain,
        );
        let item = &call["message"]["content"][0];
        assert_eq!(call["type"], "message");
        assert_eq!(call["message"]["role"], "assistant");
        assert_eq!(item["type"], "toolCall");
        assert_eq!(item["name"], "write");
        assert_eq!(item["arguments"]["path"], "a.txt");
        let result = tool_result(3, "write", &json!({"ok": true}), false, "t", &mut chain);
        assert_eq!(result["message"]["toolCallId"], item["id"]);
        // Entries chain: the call is the first (no parent), the result its child.
        assert_eq!(call["id"], "00000001");
        assert_eq!(call["parentId"], Value::Null);
        assert_eq!(result["id"], "00000002");
        assert_eq!(result["parentId"], "00000001");
        assert_eq!(result["message"]["role"], "toolResult");
    }

    #[test]
    fn call_lines_are_the_messages_as_serde_json_writes_them() {
        let args = json!({"path": "a \"b\".txt", "content": "x\ny\t\u{1}é"});
        for (result, is_error) in [
            (
                json!({"ok": true, "content": "line\n\"q\" \\", "action_index": 3}),
                false,
            ),
            (
                json!({"ok": false, "error": {"category": "not_found"}}),
                true,
            ),
            (
                json!({"ok": true, "stdout": "\"é".repeat(FIELD_CAP), "stderr": "x", "action_index": 3}),
                false,
            ),
        ] {
            let mut expected = Vec::new();
            // After one entry (a user message), as in a session.
            let mut chain = Chain::default();
            chain.advance();
            let mut again = chain.clone();
            for line in [
                tool_call(3, "read", &args, "2026-03-02T09:00:03Z", &mut chain),
                tool_result(
                    3,
                    "read",
                    &result,
                    is_error,
                    "2026-03-02T09:00:03Z",
                    &mut chain,
                ),
            ] {
                serde_json::to_writer(&mut expected, &line).unwrap();
                expected.push(b'\n');
            }
            let lines = call_lines(
                3,
                "read",
                &args,
                &result,
                is_error,
                "2026-03-02T09:00:03Z",
                &mut again,
            );
            assert_eq!(again, chain);
            assert_eq!(
                String::from_utf8(lines).unwrap(),
                String::from_utf8(expected).unwrap()
            );
        }
    }

    #[test]
    fn long_strings_are_cut_once_with_the_whole_results_digest() {
        let stdout = "é".repeat(FIELD_CAP); // 2 bytes each: the cut falls inside one
        let result = json!({"ok": true, "stdout": stdout, "nested": [{"output": "y".repeat(FIELD_CAP + 5)}], "action_index": 0});
        let line = tool_result(0, "exec", &result, false, "t", &mut Chain::default());
        let text = line["message"]["content"][0]["text"].as_str().unwrap();
        let kept: Value = serde_json::from_str(text).unwrap();
        let kept_out = kept["stdout"].as_str().unwrap();
        assert!(kept_out.len() < FIELD_CAP + 100, "{}", kept_out.len());
        assert!(kept_out.ends_with(&format!(
            "[envcraft: {} more bytes not recorded in the transcript]",
            FIELD_CAP
        )));
        assert!(
            kept["nested"][0]["output"]
                .as_str()
                .unwrap()
                .contains("5 more bytes")
        );
        let cut = &line["message"]["truncated"];
        assert_eq!(cut["sha256"], result_digest(&result));
        assert_eq!(cut["bytes"], serde_json::to_vec(&result).unwrap().len());
        // A short result is kept as it is, with no note.
        let short = tool_result(
            0,
            "exec",
            &json!({"ok": true, "stdout": "hi"}),
            false,
            "t",
            &mut Chain::default(),
        );
        assert!(short["message"].get("truncated").is_none());
    }

    #[test]
    fn the_truncation_event_is_one_json_line_graders_skip() {
        let line = truncated_line(7, 1024, "t", &mut Chain::default());
        let text = String::from_utf8(line).unwrap();
        assert!(text.ends_with('\n') && text.matches('\n').count() == 1);
        let event: Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(event["type"], "custom");
        assert_eq!(event["customType"], TRUNCATED_EVENT);
        assert_eq!(event["data"]["from_action_index"], 7);
        assert_eq!(event["id"], "00000001");
    }

    #[test]
    fn the_header_is_openclaws_v3_and_its_id_depends_only_on_its_inputs() {
        let id = session_uuid("task example/a; clock 0+60; seed 1");
        assert_eq!(id, session_uuid("task example/a; clock 0+60; seed 1"));
        assert_ne!(id, session_uuid("task example/a; clock 0+60; seed 2"));
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('8'), "{id}");
        let h = header(&id, "2026-03-02T09:00:00Z", "/workspace");
        assert_eq!(h["type"], "session");
        assert_eq!(h["version"], 3);
        assert_eq!(h["cwd"], "/workspace");
        assert!(h.get("parentId").is_none());
    }
}
