//! Trajectories: the tool calls of a session, one JSON object per line:
//! `{"tool": "write", "args": {"path": "out/a.txt", "content": "hi"}}`. In an intent sequence
//! a call may say which turn it answers (`"turn": 1`, counted from 0; calls of a later turn move
//! the session to it), or a line `{"next_turn": true}` moves to the next prompt.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// One step of a trajectory.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Call {
        tool: String,
        args: Value,
        /// The turn this call answers, when the trajectory says.
        turn: Option<usize>,
    },
    NextTurn,
}

/// Why a trajectory could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TrajectoryError {
    #[error("cannot read trajectory {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "trajectory {path}, line {line}: {problem}; expected {{\"tool\": NAME, \"args\": {{...}}}} or {{\"next_turn\": true}}"
    )]
    Line {
        path: PathBuf,
        line: usize,
        problem: String,
    },
}

/// Parse trajectory text (`path` names it in errors). Blank lines are skipped.
pub fn parse(path: &Path, text: &str) -> Result<Vec<Step>, TrajectoryError> {
    let mut steps = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let err = |problem: String| TrajectoryError::Line {
            path: path.to_path_buf(),
            line: i + 1,
            problem,
        };
        let value: Value =
            serde_json::from_str(line).map_err(|e| err(format!("not JSON ({e})")))?;
        let Some(obj) = value.as_object() else {
            return Err(err("not a JSON object".into()));
        };
        if obj.get("next_turn") == Some(&Value::Bool(true)) && obj.len() == 1 {
            steps.push(Step::NextTurn);
            continue;
        }
        let tool = match obj.get("tool") {
            Some(Value::String(t)) if !t.is_empty() => t.clone(),
            Some(_) => return Err(err("`tool` is not a non-empty string".into())),
            None => return Err(err("`tool` is missing".into())),
        };
        if let Some(key) = obj
            .keys()
            .find(|k| !matches!(k.as_str(), "tool" | "args" | "turn"))
        {
            return Err(err(format!("unknown key `{key}`")));
        }
        let turn = match obj.get("turn") {
            None => None,
            Some(v) => Some(
                v.as_u64()
                    .ok_or_else(|| err("`turn` is not a whole number".into()))?
                    as usize,
            ),
        };
        let args = obj
            .get("args")
            .cloned()
            .unwrap_or(Value::Object(Default::default()));
        steps.push(Step::Call { tool, args, turn });
    }
    Ok(steps)
}

/// Read and parse a trajectory file.
pub fn load(path: &Path) -> Result<Vec<Step>, TrajectoryError> {
    let text = std::fs::read_to_string(path).map_err(|source| TrajectoryError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(path, &text)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn calls_and_turns_parse_and_errors_name_the_line() {
        let text = "{\"tool\": \"read\", \"args\": {\"path\": \"a\"}}\n\n{\"next_turn\": true}\n{\"tool\": \"ls\", \"turn\": 1}\n";
        let steps = parse(Path::new("t.jsonl"), text).unwrap();
        assert_eq!(steps.len(), 3);
        assert_eq!(steps[1], Step::NextTurn);
        assert!(matches!(steps[2], Step::Call { turn: Some(1), .. }));
        let err = parse(
            Path::new("t.jsonl"),
            "{\"tool\": \"ls\"}\n{\"tol\": \"ls\"}\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("line 2"), "{err}");
        let err = parse(Path::new("t.jsonl"), "[1]\n").unwrap_err();
        assert!(
            err.to_string().contains("line 1") && err.to_string().contains("not a JSON object")
        );
    }
}
