//! Code checks: a grader command's output turned into a score, never an exception.
//!
//! A grader prints either a JSON object of named sub-scores in [0, 1] (the score is their
//! mean; `true`/`false` count as 1/0) or a number in [0, 1] on its last line (the ClawGym
//! convention). Anything else (no output, garbage, a number out of range, a crash, a timeout)
//! scores 0 with the reason recorded.

use std::collections::BTreeMap;

use serde::Serialize;

/// What a grader's run came to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandScore {
    /// In [0, 1].
    pub score: f64,
    /// The named sub-scores, when the grader printed an object.
    pub subscores: Option<BTreeMap<String, f64>>,
    /// Why the score is 0 when the grader did not give one.
    pub reason: Option<String>,
}

impl CommandScore {
    pub fn zero(reason: impl Into<String>) -> CommandScore {
        CommandScore {
            score: 0.0,
            subscores: None,
            reason: Some(reason.into()),
        }
    }
}

fn in_range(x: f64) -> bool {
    x.is_finite() && (0.0..=1.0).contains(&x)
}

/// The score in a grader's standard output.
pub fn parse(stdout: &str) -> CommandScore {
    let text = stdout.trim();
    if text.is_empty() {
        return CommandScore::zero("the grader printed nothing");
    }
    if text.starts_with('{')
        && let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(text)
    {
        let mut subscores = BTreeMap::new();
        for (name, value) in map {
            let x = match value {
                serde_json::Value::Bool(b) => f64::from(u8::from(b)),
                serde_json::Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
                other => {
                    return CommandScore::zero(format!(
                        "sub-score `{name}` is {other}, not a number in [0, 1]"
                    ));
                }
            };
            if !in_range(x) {
                return CommandScore::zero(format!("sub-score `{name}` is {x}, outside [0, 1]"));
            }
            subscores.insert(name, x);
        }
        if subscores.is_empty() {
            return CommandScore::zero("the grader printed an empty object");
        }
        let score = subscores.values().sum::<f64>() / subscores.len() as f64;
        return CommandScore {
            score,
            subscores: Some(subscores),
            reason: None,
        };
    }
    let last = text.lines().last().unwrap_or_default().trim();
    match last.parse::<f64>() {
        Ok(x) if in_range(x) => CommandScore {
            score: x,
            subscores: None,
            reason: None,
        },
        Ok(x) => CommandScore::zero(format!("the grader's score {x} is outside [0, 1]")),
        Err(_) => CommandScore::zero(format!(
            "the grader's last line is not a score: {:?}",
            last.chars().take(200).collect::<String>()
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn json_sub_scores_are_averaged() {
        let s = parse("{\"a\": 1.0, \"b\": 0.5, \"c\": false}\n");
        assert!((s.score - 0.5).abs() < 1e-12);
        assert_eq!(s.subscores.unwrap().len(), 3);
    }

    #[test]
    fn a_float_on_the_last_line_is_the_score() {
        assert_eq!(parse("checking...\nall good\n0.75\n").score, 0.75);
        assert_eq!(parse("1").score, 1.0);
    }

    #[test]
    fn garbage_nothing_and_out_of_range_score_zero_with_a_reason() {
        for out in [
            "",
            "   \n",
            "done",
            "{\"a\": 2}",
            "{\"a\": \"x\"}",
            "1.5",
            "-0.1",
            "{}",
            "NaN",
        ] {
            let s = parse(out);
            assert_eq!(s.score, 0.0, "{out:?}");
            assert!(s.reason.is_some(), "{out:?}");
        }
    }
}
