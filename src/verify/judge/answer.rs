//! Reading the judge's answer as PinchBench reads it: the JSON object in a ```json block, else
//! the last balanced `{...}` that parses (one with `scores` first), else a `total: 0.x` in
//! prose; then its scores (numbers, or `{"score": x}`), total (`total`, else `score`, else the
//! mean of the scores) and notes (`notes`, `justification` or `reasoning`).
//!
//! Unlike PinchBench, an answer with no total in [0, 1] is not a score of 0: it is no answer
//! ([`AnswerError`]), and the judge part is reported as not run.

use serde_json::{Map, Value};

/// The judge's verdict on one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgment {
    /// Per-criterion scores, by the judge's names for them, in its order.
    pub scores: Vec<(String, f64)>,
    /// The score, in [0, 1].
    pub total: f64,
    pub notes: String,
}

/// Why an answer is not a judgment.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnswerError {
    #[error("the judge's answer is empty")]
    Empty,
    #[error("the judge's answer has no JSON object and no total score: {excerpt:?}")]
    NoScore { excerpt: String },
    #[error("the judge's total is {total}, outside [0, 1]")]
    OutOfRange { total: f64 },
}

/// The characters of an unreadable answer quoted in its error.
const EXCERPT_CHARS: usize = 200;

/// Read `text`, the judge's reply.
pub fn parse(text: &str) -> Result<Judgment, AnswerError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(AnswerError::Empty);
    }
    let object = json_block(text)
        .or_else(|| balanced_objects(text, true))
        .or_else(|| balanced_objects(text, false));
    let judgment = match object {
        Some(object) => normalize(&object),
        None => prose_total(text).map(|total| Judgment {
            scores: Vec::new(),
            total,
            notes: "score read from prose (no JSON object)".into(),
        }),
    };
    let judgment = judgment.ok_or_else(|| AnswerError::NoScore {
        excerpt: text.chars().take(EXCERPT_CHARS).collect(),
    })?;
    if !(0.0..=1.0).contains(&judgment.total) {
        return Err(AnswerError::OutOfRange {
            total: judgment.total,
        });
    }
    Ok(judgment)
}

/// The object in the first ```json fenced block, if it parses as one.
fn json_block(text: &str) -> Option<Map<String, Value>> {
    let start = text.find("```json")? + "```json".len();
    let end = text[start..].find("```")? + start;
    match serde_json::from_str(text[start..end].trim()) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    }
}

/// The last top-level `{...}` of `text` that parses as an object (with `scores`, when
/// `with_scores`).
fn balanced_objects(text: &str, with_scores: bool) -> Option<Map<String, Value>> {
    let mut candidates = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '{' => {
                if depth == 0 {
                    start = i;
                }
                depth += 1;
            }
            '}' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    candidates.push(&text[start..=i]);
                }
            }
            _ => {}
        }
    }
    candidates.into_iter().rev().find_map(|candidate| {
        match serde_json::from_str::<Value>(candidate) {
            Ok(Value::Object(map)) if !with_scores || map.contains_key("scores") => Some(map),
            _ => None,
        }
    })
}

/// `total: 0.72`, `Overall score: 0.65`, `final 1.0` in prose.
fn prose_total(text: &str) -> Option<f64> {
    let pattern =
        regex::RegexBuilder::new(r"(?:total|overall|final)\s*(?:score)?[:\s]*(0\.\d+|1\.0+)")
            .case_insensitive(true)
            .build()
            .ok()?;
    let total: f64 = pattern.captures(text)?.get(1)?.as_str().parse().ok()?;
    (0.0..=1.0).contains(&total).then_some(total)
}

fn number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// The scores, total and notes of a parsed answer; `None` without any total.
fn normalize(answer: &Map<String, Value>) -> Option<Judgment> {
    let table = answer
        .get("scores")
        .or_else(|| answer.get("criteria_scores"))
        .and_then(Value::as_object);
    let mut scores = Vec::new();
    for (name, value) in table.into_iter().flatten() {
        let score = match value {
            Value::Object(inner) => inner.get("score").and_then(number),
            Value::Number(_) => number(value),
            _ => None,
        };
        if let Some(score) = score {
            scores.push((name.clone(), score));
        }
    }
    let total = match (answer.get("total"), answer.get("score")) {
        (Some(Value::Number(n)), _) => n.as_f64(),
        (Some(Value::Null) | None, Some(Value::Number(n))) => n.as_f64(),
        (Some(Value::Null) | None, _) if !scores.is_empty() => {
            Some(scores.iter().map(|(_, s)| s).sum::<f64>() / scores.len() as f64)
        }
        _ => None,
    }?;
    let notes = ["notes", "justification", "reasoning"]
        .iter()
        .find_map(|key| answer.get(*key))
        .map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .unwrap_or_default();
    Some(Judgment {
        scores,
        total,
        notes,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_answer_shapes_pinchbench_reads() {
        let plain = parse(r#"{"scores": {"accuracy": 0.8, "format": {"score": 0.6}}, "total": 0.7, "notes": "ok"}"#).unwrap();
        assert_eq!(plain.total, 0.7);
        assert_eq!(
            plain.scores,
            vec![("accuracy".into(), 0.8), ("format".into(), 0.6)]
        );
        assert_eq!(plain.notes, "ok");
        let fenced =
            parse("Here:\n```json\n{\"score\": 0.4, \"justification\": \"meh\"}\n```").unwrap();
        assert_eq!((fenced.total, fenced.notes.as_str()), (0.4, "meh"));
        // The last object with `scores` wins over a later one without.
        let two = parse(r#"{"scores": {"a": 1.0}, "total": 0.9} then {"x": 1}"#).unwrap();
        assert_eq!(two.total, 0.9);
        // No total: the mean of the scores.
        let mean = parse(r#"{"criteria_scores": {"a": 0.5, "b": {"score": 1.0}}}"#).unwrap();
        assert_eq!(mean.total, 0.75);
        let prose = parse("I would say the Overall score: 0.65 overall.").unwrap();
        assert_eq!(prose.total, 0.65);
    }

    #[test]
    fn an_unreadable_answer_is_no_score_not_zero() {
        assert_eq!(parse("  "), Err(AnswerError::Empty));
        assert!(matches!(
            parse("great job!"),
            Err(AnswerError::NoScore { .. })
        ));
        assert!(matches!(
            parse(r#"{"notes": "no number"}"#),
            Err(AnswerError::NoScore { .. })
        ));
        assert_eq!(
            parse(r#"{"total": 7}"#),
            Err(AnswerError::OutOfRange { total: 7.0 })
        );
    }
}
