//! The model's own assistant messages, as a client hands them to a session (`POST
//! /v1/sessions/{id}/messages`, OpenEnv's `assistant_message`): checked here, pure, and turned
//! into the assistant message of OpenClaw's transcript (`{"role": "assistant", "content":
//! [{"type": "text", "text"} | {"type": "thinking", "thinking"}], "usage": {...}, "model",
//! "stopReason"}`), which [`super::Session::add_assistant_message`] records beside the tool calls.
//!
//! Accepted: `content` (text and thinking blocks), or the shorthands `text` and `thinking`
//! (`reasoning_content` as OpenAI-compatible servers name it); `usage` in OpenClaw's names
//! (`input`, `output`, `cacheRead`, `cacheWrite`, `totalTokens`) or OpenAI's (`prompt_tokens`,
//! `completion_tokens`, `total_tokens`); `model`; `stopReason`. Tool calls are not given here:
//! each is recorded by the call itself.

use serde_json::{Map, Value, json};

/// The most bytes of text and thinking one message may carry.
pub const MAX_TEXT_BYTES: usize = 4 << 20;

/// The stop reasons OpenClaw's messages carry.
pub const STOP_REASONS: [&str; 5] = ["stop", "length", "toolUse", "error", "aborted"];

/// What is wrong with an assistant message: the field, and what it must be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{field}`: {problem}")]
pub struct AssistantError {
    pub field: String,
    pub problem: String,
}

fn bad(field: impl Into<String>, problem: impl Into<String>) -> AssistantError {
    AssistantError {
        field: field.into(),
        problem: problem.into(),
    }
}

/// The usage keys, OpenClaw's name first, then the OpenAI name that maps to it.
const USAGE_KEYS: [(&str, Option<&str>); 5] = [
    ("input", Some("prompt_tokens")),
    ("output", Some("completion_tokens")),
    ("cacheRead", None),
    ("cacheWrite", None),
    ("totalTokens", Some("total_tokens")),
];

/// `body` checked and made the transcript's assistant message.
pub fn parse(body: &Value) -> Result<Value, AssistantError> {
    let Value::Object(obj) = body else {
        return Err(bad(
            "message",
            "must be a JSON object: {\"text\": ..., \"thinking\": ..., \"usage\": {...}}",
        ));
    };
    for key in obj.keys() {
        let known = [
            "role",
            "content",
            "text",
            "thinking",
            "reasoning_content",
            "usage",
            "model",
            "stopReason",
            "stop_reason",
        ];
        if !known.contains(&key.as_str()) {
            return Err(bad(
                key.chars().take(64).collect::<String>(),
                format!("unknown field: expected {}", known.join(", ")),
            ));
        }
    }
    match obj.get("role") {
        None | Some(Value::Null) => {}
        Some(Value::String(r)) if r == "assistant" => {}
        Some(_) => return Err(bad("role", "must be \"assistant\" (or left out)")),
    }
    let mut content = match obj.get("content") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![json!({"type": "text", "text": s})],
        Some(Value::Array(blocks)) => blocks
            .iter()
            .enumerate()
            .map(|(i, b)| block(i, b))
            .collect::<Result<_, _>>()?,
        Some(_) => {
            return Err(bad(
                "content",
                "must be an array of text or thinking blocks",
            ));
        }
    };
    for (field, kind) in [
        ("thinking", "thinking"),
        ("reasoning_content", "thinking"),
        ("text", "text"),
    ] {
        match obj.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => {
                // Thinking comes before the text it led to, as in OpenClaw's messages.
                let b = json!({"type": kind, kind: s});
                if kind == "thinking" {
                    content.insert(0, b);
                } else {
                    content.push(b);
                }
            }
            Some(_) => return Err(bad(field, "must be a string")),
        }
    }
    if content.is_empty() {
        return Err(bad(
            "content",
            "the message holds nothing: give `text`, `thinking` or `content` blocks",
        ));
    }
    let bytes: usize = content
        .iter()
        .map(|b| {
            b["text"]
                .as_str()
                .or(b["thinking"].as_str())
                .map_or(0, str::len)
        })
        .sum();
    if bytes > MAX_TEXT_BYTES {
        return Err(bad(
            "content",
            format!("{bytes} bytes of text: at most {MAX_TEXT_BYTES}"),
        ));
    }
    let mut message = json!({"role": "assistant", "content": content});
    match obj.get("usage") {
        None | Some(Value::Null) => {}
        Some(Value::Object(u)) => message["usage"] = usage(u)?,
        Some(_) => return Err(bad("usage", "must be an object of token counts")),
    }
    match obj.get("model") {
        None | Some(Value::Null) => {}
        Some(Value::String(m)) if !m.is_empty() && m.len() <= 256 => message["model"] = json!(m),
        Some(_) => {
            return Err(bad(
                "model",
                "must be a non-empty string of at most 256 bytes",
            ));
        }
    }
    match obj.get("stopReason").or_else(|| obj.get("stop_reason")) {
        None | Some(Value::Null) => {}
        Some(Value::String(r)) if STOP_REASONS.contains(&r.as_str()) => {
            message["stopReason"] = json!(r)
        }
        Some(_) => {
            return Err(bad(
                "stopReason",
                format!("must be one of {}", STOP_REASONS.join(", ")),
            ));
        }
    }
    Ok(message)
}

/// Content block `i`: a text or a thinking block (a string is a text block).
fn block(i: usize, b: &Value) -> Result<Value, AssistantError> {
    let field = format!("content[{i}]");
    let text_of = |b: &Map<String, Value>, key: &str| match b.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(bad(&field, format!("a {key} block needs a string `{key}`"))),
    };
    match b {
        Value::String(s) => Ok(json!({"type": "text", "text": s})),
        Value::Object(o) => match o.get("type").and_then(Value::as_str) {
            Some("text") => Ok(json!({"type": "text", "text": text_of(o, "text")?})),
            Some("thinking") => {
                let mut out = json!({"type": "thinking", "thinking": text_of(o, "thinking")?});
                if let Some(Value::String(sig)) = o.get("thinkingSignature") {
                    out["thinkingSignature"] = json!(sig);
                }
                Ok(out)
            }
            Some("toolCall" | "tool_use" | "function") => Err(bad(
                field,
                "tool calls are not given here: each is recorded when the tool is called",
            )),
            _ => Err(bad(field, "`type` must be \"text\" or \"thinking\"")),
        },
        _ => Err(bad(field, "must be a text or thinking block")),
    }
}

/// Token counts in OpenClaw's names (`totalTokens` summed when not given).
fn usage(u: &Map<String, Value>) -> Result<Value, AssistantError> {
    let mut out = Map::new();
    for key in u.keys() {
        let known = USAGE_KEYS
            .iter()
            .any(|(k, alias)| k == key || alias.is_some_and(|a| a == key));
        if !known && key != "cost" {
            return Err(bad(
                format!("usage.{}", key.chars().take(64).collect::<String>()),
                "unknown token count: expected input, output, cacheRead, cacheWrite, \
                 totalTokens (or prompt_tokens, completion_tokens, total_tokens)",
            ));
        }
    }
    for (key, alias) in USAGE_KEYS {
        let given = u
            .get(key)
            .map(|v| (key, v))
            .or_else(|| alias.and_then(|a| u.get(a).map(|v| (a, v))));
        if let Some((name, v)) = given {
            match v.as_u64() {
                Some(n) => {
                    out.insert(key.into(), json!(n));
                }
                None => {
                    return Err(bad(
                        format!("usage.{name}"),
                        "must be a whole number of tokens, at least 0",
                    ));
                }
            }
        }
    }
    if !out.contains_key("totalTokens") {
        let sum: u64 = ["input", "output", "cacheRead", "cacheWrite"]
            .iter()
            .filter_map(|k| out.get(*k).and_then(Value::as_u64))
            .sum();
        out.insert("totalTokens".into(), json!(sum));
    }
    if let Some(cost) = u.get("cost") {
        let numbers = cost
            .as_object()
            .is_some_and(|c| c.values().all(|v| v.as_f64().is_some_and(|f| f >= 0.0)));
        if !numbers {
            return Err(bad(
                "usage.cost",
                "must be an object of non-negative numbers (input, output, ..., total)",
            ));
        }
        out.insert("cost".into(), cost.clone());
    }
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn shorthands_become_openclaw_blocks_with_thinking_first() {
        let m = parse(&json!({"text": "Done.", "thinking": "check the file",
                              "usage": {"prompt_tokens": 10, "completion_tokens": 3},
                              "model": "m", "stop_reason": "stop"}))
        .unwrap();
        assert_eq!(
            m,
            json!({"role": "assistant",
                   "content": [{"type": "thinking", "thinking": "check the file"},
                               {"type": "text", "text": "Done."}],
                   "usage": {"input": 10, "output": 3, "totalTokens": 13},
                   "model": "m", "stopReason": "stop"})
        );
    }

    #[test]
    fn content_blocks_are_kept_and_strings_are_text() {
        let m = parse(&json!({"role": "assistant", "content": [
            "plain", {"type": "thinking", "thinking": "t", "thinkingSignature": "s"},
            {"type": "text", "text": "x"}]}))
        .unwrap();
        assert_eq!(m["content"][0], json!({"type": "text", "text": "plain"}));
        assert_eq!(m["content"][1]["thinkingSignature"], "s");
        assert!(m.get("usage").is_none());
    }

    #[test]
    fn bad_messages_name_the_field() {
        for (body, field) in [
            (json!([1]), "message"),
            (json!({}), "content"),
            (json!({"text": 3}), "text"),
            (json!({"text": "a", "extra": 1}), "extra"),
            (json!({"role": "user", "text": "a"}), "role"),
            (json!({"content": [{"type": "toolCall"}]}), "content[0]"),
            (json!({"content": [{"type": "text"}]}), "content[0]"),
            (json!({"text": "a", "usage": {"input": -1}}), "usage.input"),
            (json!({"text": "a", "usage": {"tokens": 1}}), "usage.tokens"),
            (json!({"text": "a", "usage": 5}), "usage"),
            (json!({"text": "a", "stopReason": "done"}), "stopReason"),
            (json!({"text": "a", "model": ""}), "model"),
        ] {
            assert_eq!(parse(&body).unwrap_err().field, field, "{body}");
        }
    }
}
