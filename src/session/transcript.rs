//! The transcript: one JSON object per line, in the shape of OpenClaw's session files, so that
//! graders written for OpenClaw (PinchBench's `grade(transcript, workspace_path)`) read it as
//! they are: `{"type": "message", "message": {"role": "user" | "assistant" | "toolResult",
//! "content": [...]}}`, tool calls as `{"type": "toolCall", "id", "name", "arguments"}` in an
//! assistant message, results as a `toolResult` message naming the call.

use serde_json::{Value, json};

use crate::json;

/// The user's turn `text`.
pub fn user_message(text: &str, timestamp: &str) -> Value {
    json!({
        "type": "message",
        "timestamp": timestamp,
        "message": {"role": "user", "content": [{"type": "text", "text": text}]},
    })
}

/// The agent's call of `tool` with `arguments`, numbered `index`: the first line
/// [`call_lines`] writes, as a value (the reference its tests compare with).
#[cfg(test)]
pub(crate) fn tool_call(index: u64, tool: &str, arguments: &Value, timestamp: &str) -> Value {
    json!({
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
    })
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
) -> Value {
    json!({
        "type": "message",
        "timestamp": timestamp,
        "message": {
            "role": "toolResult",
            "toolCallId": call_id(index),
            "toolName": tool,
            "content": [{"type": "text", "text": result.to_string()}],
            "isError": is_error,
        },
    })
}

/// The call `index` and its result as two lines, ready to append: the text of
/// [`tool_call`] and [`tool_result`] as `serde_json` writes them, written directly (the result
/// is escaped twice, once as JSON, once as the text of the message: see [`crate::json`]).
pub fn call_lines(
    index: u64,
    tool: &str,
    arguments: &Value,
    result: &Value,
    is_error: bool,
    timestamp: &str,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    let id = call_id(index);
    // The keys in the order serde_json writes `tool_call`'s and `tool_result`'s maps (sorted).
    out.extend_from_slice(br#"{"message":{"content":[{"arguments":"#);
    json::write_value(&mut out, arguments);
    out.extend_from_slice(br#","id":"#);
    json::write_str(&mut out, &id);
    out.extend_from_slice(br#","name":"#);
    json::write_str(&mut out, tool);
    out.extend_from_slice(br#","type":"toolCall"}],"role":"assistant"},"timestamp":"#);
    json::write_str(&mut out, timestamp);
    out.extend_from_slice(b",\"type\":\"message\"}\n");
    out.extend_from_slice(br#"{"message":{"content":[{"text":"#);
    // The result's text is its JSON: written escaped, in one pass.
    out.push(b'"');
    json::write_value_as_text(&mut out, result);
    out.push(b'"');
    out.extend_from_slice(br#","type":"text"}],"isError":"#);
    out.extend_from_slice(if is_error { b"true" } else { b"false" });
    out.extend_from_slice(br#","role":"toolResult","toolCallId":"#);
    json::write_str(&mut out, &id);
    out.extend_from_slice(br#","toolName":"#);
    json::write_str(&mut out, tool);
    out.extend_from_slice(br#"},"timestamp":"#);
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
        let call = tool_call(
            3,
            "write",
            &json!({"path": "a.txt"}),
            "2026-03-02T09:00:00Z",
        );
        let item = &call["message"]["content"][0];
        assert_eq!(call["type"], "message");
        assert_eq!(call["message"]["role"], "assistant");
        assert_eq!(item["type"], "toolCall");
        assert_eq!(item["name"], "write");
        assert_eq!(item["arguments"]["path"], "a.txt");
        let result = tool_result(3, "write", &json!({"ok": true}), false, "t");
        assert_eq!(result["message"]["toolCallId"], item["id"]);
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
        ] {
            let mut expected = Vec::new();
            for line in [
                tool_call(3, "read", &args, "2026-03-02T09:00:03Z"),
                tool_result(3, "read", &result, is_error, "2026-03-02T09:00:03Z"),
            ] {
                serde_json::to_writer(&mut expected, &line).unwrap();
                expected.push(b'\n');
            }
            let lines = call_lines(3, "read", &args, &result, is_error, "2026-03-02T09:00:03Z");
            assert_eq!(
                String::from_utf8(lines).unwrap(),
                String::from_utf8(expected).unwrap()
            );
        }
    }
}
