//! What the judge is asked, in PinchBench's shape (its `lib_grading`): the task's prompt, the
//! expected behaviour, the transcript summarized as PinchBench summarizes it (`Tool:
//! name(arguments as JSON)`, `Result:` the first 200 characters of the result's first content
//! item as Python prints it, `User:` the first content item), the rubric, and the JSON answer
//! asked for. The summary is made from the session's transcript, which has the shape of
//! OpenClaw's session files that PinchBench reads.
//!
//! Optional workspace files (`[verifier.judge] files`) are appended after the rubric, each cut
//! at [`FILE_CHARS`] characters; tasks without them get PinchBench's prompt exactly.

use serde_json::Value;

/// The most characters of a workspace file shown to the judge.
pub const FILE_CHARS: usize = 16 * 1024;
/// How much of a tool result PinchBench shows (characters of its Python form).
const RESULT_PREVIEW_CHARS: usize = 200;

/// A workspace file shown to the judge: its path, and its text (or why there is none).
#[derive(Debug, Clone, PartialEq)]
pub struct ShownFile {
    pub path: String,
    pub text: Result<String, String>,
}

/// The judge's prompt.
pub fn build(
    task_prompt: &str,
    expected_behavior: &str,
    summary: &str,
    rubric: &str,
    files: &[ShownFile],
) -> String {
    let mut out = String::new();
    out.push_str(
        "You are a grading function. Your ONLY job is to output a single JSON object.\n\n",
    );
    out.push_str("CRITICAL RULES:\n");
    out.push_str("- Do NOT use any tools (no Read, Write, exec, or any other tool calls)\n");
    out.push_str("- Do NOT create files or run commands\n");
    out.push_str("- Do NOT write any prose, explanation, or commentary outside the JSON\n");
    out.push_str("- Respond with ONLY a JSON object \u{2014} nothing else\n\n");
    out.push_str(
        "Be a strict evaluator. Reserve 1.0 for genuinely excellent performance. \
         An average acceptable completion should score around 0.6-0.7. \
         Deduct points for unnecessary steps, verbose output, and inefficient tool usage.\n\n",
    );
    for (heading, body) in [
        ("Task", task_prompt),
        ("Expected Behavior", expected_behavior),
        ("Agent Transcript (summarized)", summary),
        ("Grading Rubric", rubric),
    ] {
        out.push_str("## ");
        out.push_str(heading);
        out.push('\n');
        out.push_str(body);
        out.push_str("\n\n");
    }
    if !files.is_empty() {
        out.push_str("## Workspace Files (final state)\n");
        for file in files {
            out.push_str("### ");
            out.push_str(&file.path);
            out.push('\n');
            match &file.text {
                Ok(text) => {
                    out.push_str(text);
                    out.push('\n');
                }
                Err(why) => {
                    out.push('(');
                    out.push_str(why);
                    out.push_str(")\n");
                }
            }
        }
        out.push('\n');
    }
    out.push_str("Score each criterion from 0.0 to 1.0.\n\n");
    out.push_str(
        "Respond with ONLY this JSON structure (no markdown, no code fences, no extra text):\n",
    );
    out.push_str(
        r#"{"scores": {"criterion_name": 0.0}, "total": 0.0, "notes": "brief justification"}"#,
    );
    out
}

/// PinchBench's summary of a transcript: the lines of its JSONL, each an event.
pub fn summarize(transcript_jsonl: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    for line in transcript_jsonl.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if event.get("type").and_then(Value::as_str) != Some("message") {
            continue;
        }
        let Some(message) = event.get("message") else {
            continue;
        };
        let content = message.get("content").and_then(Value::as_array);
        match message.get("role").and_then(Value::as_str) {
            Some("assistant") => {
                for item in content.into_iter().flatten() {
                    if item.get("type").and_then(Value::as_str) == Some("toolCall") {
                        let name = item
                            .get("name")
                            .map(py_str)
                            .unwrap_or_else(|| "None".into());
                        let args = item
                            .get("arguments")
                            .cloned()
                            .unwrap_or(Value::Object(Default::default()));
                        parts.push(format!("Tool: {name}({})", py_json_dumps(&args)));
                    }
                }
            }
            Some("toolResult") => {
                if let Some(first) = content.and_then(|c| c.first()) {
                    let preview: String =
                        py_repr(first).chars().take(RESULT_PREVIEW_CHARS).collect();
                    parts.push(format!("Result: {preview}"));
                }
            }
            Some("user") => {
                if let Some(first) = content.and_then(|c| c.first()) {
                    parts.push(format!("User: {}", py_str(first)));
                }
            }
            _ => {}
        }
    }
    parts.join("\n")
}

/// `str(value)` in Python for a value parsed from JSON.
fn py_str(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => py_repr(other),
    }
}

/// `repr(value)` in Python for a value parsed from JSON (dicts keep the order they have).
pub fn py_repr(value: &Value) -> String {
    let mut out = String::new();
    write_python(value, Form::Repr, &mut out);
    out
}

/// `json.dumps(value)` in Python: `", "` and `": "` separators, non-ASCII as `\uXXXX`.
pub fn py_json_dumps(value: &Value) -> String {
    let mut out = String::new();
    write_python(value, Form::Dumps, &mut out);
    out
}

/// Which of Python's two printed forms of a value.
#[derive(Clone, Copy, PartialEq)]
enum Form {
    Repr,
    Dumps,
}

fn write_python(value: &Value, form: Form, out: &mut String) {
    let string = |s: &str, out: &mut String| match form {
        Form::Repr => write_str_repr(s, out),
        Form::Dumps => write_dumps_str(s, out),
    };
    match (value, form) {
        (Value::Null, Form::Repr) => out.push_str("None"),
        (Value::Null, Form::Dumps) => out.push_str("null"),
        (Value::Bool(b), Form::Repr) => out.push_str(if *b { "True" } else { "False" }),
        (Value::Bool(b), Form::Dumps) => out.push_str(if *b { "true" } else { "false" }),
        (Value::Number(n), _) => out.push_str(&py_number(n)),
        (Value::String(s), _) => string(s, out),
        (Value::Array(items), _) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_python(item, form, out);
            }
            out.push(']');
        }
        (Value::Object(map), _) => {
            out.push('{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                string(key, out);
                out.push_str(": ");
                write_python(item, form, out);
            }
            out.push('}');
        }
    }
}

/// A JSON number as Python prints it: integers as they are, floats in `repr` form (`1.0`,
/// `0.5`, `1e+20`).
fn py_number(n: &serde_json::Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    let x = n.as_f64().unwrap_or(0.0);
    let abs = x.abs();
    if abs != 0.0 && !(1e-4..1e16).contains(&abs) {
        let s = format!("{x:e}");
        // Rust writes `1e20` and `1.5e-5`; Python `1e+20` and `1.5e-05`.
        let (mantissa, exp) = s.split_once('e').unwrap_or((&s, "0"));
        let (sign, digits) = match exp.strip_prefix('-') {
            Some(d) => ('-', d),
            None => ('+', exp),
        };
        return format!("{mantissa}e{sign}{digits:0>2}");
    }
    let s = format!("{x}");
    if s.contains('.') { s } else { format!("{s}.0") }
}

/// A string as Python's `repr` writes it: single quotes unless it holds `'` and no `"`.
fn write_str_repr(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if (0x80..0xa0).contains(&(c as u32)) => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

fn write_dumps_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn python_forms_of_json_values() {
        assert_eq!(
            py_repr(
                &json!({"type": "text", "text": "it's \"x\"\n", "n": 1, "f": 1.0, "b": true, "z": null})
            ),
            r#"{'b': True, 'f': 1.0, 'n': 1, 'text': 'it\'s "x"\n', 'type': 'text', 'z': None}"#
        );
        assert_eq!(py_repr(&json!("it's")), r#""it's""#);
        assert_eq!(py_repr(&json!(1e20)), "1e+20");
        assert_eq!(py_repr(&json!(0.00001)), "1e-05");
        assert_eq!(
            py_json_dumps(&json!({"path": "caf\u{e9}/\u{1F600}", "n": [1, 2.5]})),
            r#"{"n": [1, 2.5], "path": "caf\u00e9/\ud83d\ude00"}"#
        );
    }

    #[test]
    fn a_transcript_is_summarized_as_pinchbench_does() {
        let lines = [
            json!({"type": "session", "version": 3}),
            json!({"type": "message", "message": {"role": "user", "content": [{"type": "text", "text": "Sort it"}]}}),
            json!({"type": "message", "message": {"role": "assistant", "content": [
                {"type": "text", "text": "ok"},
                {"type": "toolCall", "id": "c1", "name": "write", "arguments": {"path": "a.txt", "content": "x"}}]}}),
            json!({"type": "message", "message": {"role": "toolResult", "toolCallId": "c1", "content": [{"type": "text", "text": "y".repeat(300)}]}}),
        ];
        let text: Vec<String> = lines.iter().map(Value::to_string).collect();
        let summary = summarize(&(text.join("\n") + "\nnot json\n"));
        let got: Vec<&str> = summary.lines().collect();
        assert_eq!(got[0], "User: {'text': 'Sort it', 'type': 'text'}");
        assert_eq!(got[1], r#"Tool: write({"content": "x", "path": "a.txt"})"#);
        assert!(got[2].starts_with("Result: {'text': 'yyy"));
        assert_eq!(got[2].chars().count(), "Result: ".len() + 200);
        assert_eq!(got.len(), 3);
    }

    #[test]
    fn the_prompt_has_pinchbench_sections_and_files_only_when_asked() {
        let plain = build("Do X", "X done", "Tool: ls({})", "- criterion", &[]);
        assert!(plain.contains("## Task\nDo X\n\n## Expected Behavior\nX done\n\n"));
        assert!(plain.ends_with(r#""total": 0.0, "notes": "brief justification"}"#));
        assert!(!plain.contains("Workspace Files"));
        let files = [ShownFile {
            path: "out.md".into(),
            text: Err("missing".into()),
        }];
        let with = build("Do X", "", "", "r", &files);
        assert!(with.contains("## Workspace Files (final state)\n### out.md\n(missing)\n"));
    }
}
