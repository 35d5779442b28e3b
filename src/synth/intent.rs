//! A candidate's intent: the prompt an agent is given. Without a model it is the chain's goal
//! from the templates; with one (any OpenAI-compatible chat-completions endpoint) it is the
//! model's rewrite of that goal as an implicit request in the environment's own terms,
//! optionally as a sequence of turns. Either way the prompt must not name a tool and must
//! keep every workspace path and value the goal quotes; a rewrite that breaks a rule is asked
//! again (a bounded number of times), then the candidate is dropped with the reason.

use serde::Deserialize;

use super::chain::Chain;
use crate::verify::judge::Endpoint;

/// The most characters a prompt (all turns together) may have.
const MAX_PROMPT_CHARS: usize = 4000;

/// What the prompt of a candidate is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intent {
    /// One prompt per turn (one, without a model).
    pub turns: Vec<String>,
}

/// The tool names `prompt` mentions as words (`read`, `csv-stats`): a word is a run of
/// letters, digits, `_` and `-`, and a path (holding `/` or `.` inside) is not a word.
pub fn named_tools<'t>(prompt: &str, tools: &'t [String]) -> Vec<&'t str> {
    let words: Vec<String> = prompt
        .split(|c: char| c.is_whitespace() || ",;:!?()[]{}\"'“”‘’*`".contains(c))
        .map(|w| w.trim_end_matches('.').to_lowercase())
        .filter(|w| !w.contains('/') && !w.contains('.'))
        .collect();
    tools
        .iter()
        .filter(|t| words.iter().any(|w| w == &t.to_lowercase()))
        .map(String::as_str)
        .collect()
}

/// The `` `quoted` `` parts of a goal: what any rewrite must keep.
pub fn literals(goal: &str) -> Vec<String> {
    goal.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .filter(|s| !s.is_empty())
        .collect()
}

/// Check a prompt against the rules; on failure, why.
pub fn check(turns: &[String], goal: &str, tools: &[String]) -> Result<(), String> {
    if turns.is_empty() || turns.iter().any(|t| t.trim().is_empty()) {
        return Err("an empty prompt".into());
    }
    let all = turns.join("\n");
    if all.chars().count() > MAX_PROMPT_CHARS {
        return Err(format!("a prompt over {MAX_PROMPT_CHARS} characters"));
    }
    let named = named_tools(&all, tools);
    if !named.is_empty() {
        return Err(format!("the prompt names the tool(s) {}", named.join(", ")));
    }
    let missing: Vec<String> = literals(goal)
        .into_iter()
        .filter(|l| !all.contains(l.as_str()))
        .collect();
    if !missing.is_empty() {
        return Err(format!("the prompt drops {}", missing.join(", ")));
    }
    Ok(())
}

/// What the model is asked for.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Rewrite {
    #[serde(default)]
    prompt: Option<String>,
    #[serde(default)]
    turns: Option<Vec<String>>,
}

/// The request to the model: the environment, what the chain did and found, the goal, and the
/// rules a rewrite must keep.
pub fn request(env_description: &str, chain: &Chain, multi_turn: bool) -> String {
    let shape = if multi_turn {
        r#"{"turns": ["first message", "follow-up message", ...]} (two or three messages of a user who reveals the goal over a conversation; together they must say everything the goal says)"#
    } else {
        r#"{"prompt": "the message"}"#
    };
    format!(
        "You write tasks for an assistant working in a workspace of files.\n\
         The workspace: {env_description}\n\n\
         A reference solution did this, step by step (the assistant will not see it):\n{}\n\n\
         The goal it reached, said plainly:\n{}\n\n\
         Rewrite the goal as the request a person in this setting would make: an implicit goal in \
         the workspace's own terms, not a list of steps. Keep every text in backticks exactly as \
         it is (paths, file names, values), and keep every condition of the goal, so that there \
         is exactly one right result. Never name a tool, a command or a program.\n\
         Answer with JSON only: {shape}",
        chain.found.join("\n"),
        chain.goal
    )
}

/// The template intent, or the model's rewrite when an endpoint is given.
pub fn write(
    chain: &Chain,
    env_description: &str,
    tools: &[String],
    endpoint: Option<&Endpoint>,
    multi_turn: bool,
) -> Result<Intent, String> {
    let Some(endpoint) = endpoint else {
        let turns = vec![chain.goal.clone()];
        check(&turns, &chain.goal, tools)?;
        return Ok(Intent { turns });
    };
    let prompt = request(env_description, chain, multi_turn);
    let read = |text: &str| -> Result<Vec<String>, String> {
        let body = text
            .trim()
            .trim_start_matches("```json")
            .trim_start_matches("```")
            .trim_end_matches("```")
            .trim();
        let rewrite: Rewrite = serde_json::from_str(body)
            .map_err(|e| format!("the answer is not the JSON asked for: {e}"))?;
        let turns = match (rewrite.prompt, rewrite.turns) {
            (Some(p), None) => vec![p],
            (None, Some(t)) => t,
            _ => return Err("the answer holds neither `prompt` nor `turns` alone".into()),
        };
        check(&turns, &chain.goal, tools)?;
        Ok(turns)
    };
    endpoint
        .ask_as(&prompt, read)
        .map(|answered| Intent {
            turns: answered.judgment,
        })
        .map_err(|e| crate::error::chain(&e))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn tools() -> Vec<String> {
        ["read", "write", "ls", "word-count", "mailbox"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    }

    #[test]
    fn tool_names_are_words_not_paths() {
        assert_eq!(
            named_tools("Please read `notes/a.md`.", &tools()),
            vec!["read"]
        );
        assert_eq!(
            named_tools("Use word-count on it", &tools()),
            vec!["word-count"]
        );
        assert!(named_tools("Look in `mailbox/inbox/` and `read.me`", &tools()).is_empty());
        assert!(named_tools("The readme, written", &tools()).is_empty());
    }

    #[test]
    fn a_rewrite_keeps_every_quoted_literal() {
        let goal = "Move `a.txt` into `archive/`.";
        assert_eq!(literals(goal), vec!["a.txt", "archive/"]);
        assert!(
            check(
                &["Tidy up: `a.txt` belongs in `archive/`".into()],
                goal,
                &tools()
            )
            .is_ok()
        );
        let err = check(&["Tidy up `a.txt`".into()], goal, &tools()).unwrap_err();
        assert!(err.contains("archive/"), "{err}");
        assert!(check(&[" ".into()], goal, &tools()).is_err());
    }
}
