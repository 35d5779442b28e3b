//! OpenClaw's own transcript of a session, as JSONL: this version keeps it in SQLite
//! (`transcript_events` of `agents/main/agent/openclaw-agent.sqlite` under its state dir, each
//! event's JSON as text or zstd), so a small script run by OpenClaw's own Node inside the
//! sandbox (`node:sqlite`, `node:zlib`) reads the session's events in order and prints one per
//! line: the session JSONL OpenClaw's graders and parsers read (header, ids, parent ids).

/// The script (CommonJS, for `node -e`): argv[1] the database, argv[2] the session id.
pub const SCRIPT: &str = r#"
const { DatabaseSync } = require('node:sqlite');
const zlib = require('node:zlib');
const [db_path, session] = process.argv.slice(1);
const db = new DatabaseSync(db_path, { readOnly: true });
const rows = db.prepare(
  'SELECT event_json, event_zstd FROM transcript_events WHERE session_id = ? ORDER BY seq'
).all(session);
const out = [];
for (const row of rows) {
  const text = row.event_json !== null && row.event_json !== undefined
    ? row.event_json
    : zlib.zstdDecompressSync(Buffer.from(row.event_zstd)).toString('utf8');
  out.push(JSON.stringify(JSON.parse(text)));
}
process.stdout.write(out.length ? out.join('\n') + '\n' : '');
"#;

/// The per-agent database, relative to OpenClaw's state dir.
pub const DATABASE: &str = "agents/main/agent/openclaw-agent.sqlite";

/// Check what the script printed: every line a JSON object, the first OpenClaw's session
/// header. The number of events, or why the output is not a transcript.
pub fn check(jsonl: &[u8]) -> Result<usize, String> {
    let text = std::str::from_utf8(jsonl).map_err(|_| "not UTF-8".to_string())?;
    let mut count = 0;
    for (i, line) in text.lines().enumerate() {
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("line {}: {e}", i + 1))?;
        if !value.is_object() {
            return Err(format!("line {}: not a JSON object", i + 1));
        }
        if i == 0 && value["type"] != "session" {
            return Err("the first event is not the session header".into());
        }
        count += 1;
    }
    if count == 0 {
        return Err("no events".into());
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transcript_starts_with_the_session_header_and_holds_objects() {
        let good = b"{\"type\":\"session\",\"version\":4,\"id\":\"s\"}\n{\"type\":\"message\"}\n";
        assert_eq!(check(good), Ok(2));
        assert!(check(b"").is_err());
        assert!(check(b"{\"type\":\"message\"}\n").is_err());
        assert!(check(b"{\"type\":\"session\"}\n[1]\n").is_err());
        assert!(check(b"{\"type\":\"session\"}\nnot json\n").is_err());
    }
}
