//! The transcript: one JSON object per line, in the shape of OpenClaw's session files, so that
//! graders written for OpenClaw (PinchBench's `grade(transcript, workspace_path)`) read it as
//! they are: `{"type": "message", "message": {"role": "user" | "assistant" | "toolResult",
//! "content": [...]}}`, tool calls as `{"type": "toolCall", "id", "name", "arguments"}` in an
//! assistant message, results as a `toolResult` message naming the call.

use serde_json::{Value, json};

/// The user's turn `text`.
pub fn user_message(text: &str, timestamp: &str) -> Value {
    json!({
        "type": "message",
        "timestamp": timestamp,
        "message": {"role": "user", "content": [{"type": "text", "text": text}]},
    })
}

/// The agent's call of `tool` with `arguments`, numbered `index`.
pub fn tool_call(index: u64, tool: &str, arguments: &Value, timestamp: &str) -> Value {
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

/// The result of call `index` (the structured result, as text, as OpenClaw stores it).
pub fn tool_result(
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

/// The call `index` and its result as two lines, ready to append.
pub fn call_lines(
    index: u64,
    tool: &str,
    arguments: &Value,
    result: &Value,
    is_error: bool,
    timestamp: &str,
) -> Vec<u8> {
    let call = tool_call(index, tool, arguments, timestamp);
    let result = tool_result(index, tool, result, is_error, timestamp);
    let mut out = Vec::with_capacity(256);
    for line in [call, result] {
        // Writing a Value into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut out, &line);
        out.push(b'\n');
    }
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
}
