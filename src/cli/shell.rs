//! `envcraft shell TASK`: a session to drive by hand. Each line is a tool call, as
//! `TOOL {JSON args}` or `{"tool": ..., "args": {...}}`; `:diff` shows the changes so far,
//! `:turn` moves to the next prompt, `:tools` lists the tools, `:fork` continues in a new
//! session started from this one's state, `:use N` goes back to session N, `:help`, `:quit`.

use std::io::{BufRead, Write};

use clap::Args;
use serde_json::Value;

use super::task_args::{SessionArgs, TaskArgs};
use crate::cli::error::Error;
use crate::session::Session;
use crate::session::trajectory::{self, Step};

#[derive(Debug, Args)]
pub struct ShellArgs {
    #[command(flatten)]
    pub task: TaskArgs,
    #[command(flatten)]
    pub session: SessionArgs,
}

const HELP: &str = "calls: TOOL {\"arg\": ...}  or  {\"tool\": TOOL, \"args\": {...}}\n\
commands: :diff  :turn  :tools  :fork  :use N  :help  :quit";

/// Parse one input line into a step.
fn parse_line(line: &str) -> Result<Step, String> {
    let line = line.trim();
    if line.starts_with('{') {
        let steps =
            trajectory::parse(std::path::Path::new("input"), line).map_err(|e| e.to_string())?;
        return steps
            .into_iter()
            .next()
            .ok_or_else(|| "empty input".to_string());
    }
    let (tool, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let args: Value = if rest.trim().is_empty() {
        Value::Object(Default::default())
    } else {
        serde_json::from_str(rest.trim()).map_err(|e| format!("the arguments are not JSON: {e}"))?
    };
    Ok(Step::Call {
        tool: tool.to_string(),
        args,
        turn: None,
    })
}

pub fn run(args: ShellArgs) -> Result<i32, Error> {
    let options = args.session.options(&args.task)?;
    let task = args.task.open(&options.state_root)?;
    let mut sessions = vec![Session::create(&task, &options)?];
    let mut current = 0;
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    let say = |out: &mut std::io::Stdout, text: &str| -> Result<(), Error> {
        writeln!(out, "{text}").map_err(Error::Output)?;
        out.flush().map_err(Error::Output)
    };
    say(
        &mut out,
        &format!(
            "task {}/{} (session {})",
            task.env.name,
            task.id,
            sessions[0].id()
        ),
    )?;
    say(&mut out, &format!("prompt: {}", sessions[0].prompt()))?;
    say(&mut out, HELP)?;
    let mut lines = stdin.lock().lines();
    loop {
        write!(out, "envcraft> ").map_err(Error::Output)?;
        out.flush().map_err(Error::Output)?;
        let Some(line) = lines.next() else { break };
        let line = line.map_err(Error::Output)?;
        let text = line.trim();
        let session = &mut sessions[current];
        match text {
            "" => continue,
            ":quit" | ":q" | ":exit" => break,
            ":help" => say(&mut out, HELP)?,
            ":diff" => {
                let changes = session.changes()?;
                say(
                    &mut out,
                    &serde_json::to_string_pretty(&changes).unwrap_or_default(),
                )?;
            }
            ":turn" => match session.next_turn()? {
                Some(prompt) => say(&mut out, &format!("prompt: {prompt}"))?,
                None => say(&mut out, "no more turns")?,
            },
            ":fork" => {
                let began = std::time::Instant::now();
                let fork = session.fork()?;
                let took = began.elapsed();
                sessions.push(fork);
                current = sessions.len() - 1;
                say(
                    &mut out,
                    &format!(
                        "now in session {current} (a fork, made in {:.1} ms)",
                        took.as_secs_f64() * 1000.0
                    ),
                )?;
            }
            _ if text.starts_with(":use") => match text[4..].trim().parse::<usize>() {
                Ok(n) if n < sessions.len() => {
                    current = n;
                    say(&mut out, &format!("now in session {n}"))?;
                }
                _ => say(
                    &mut out,
                    &format!("sessions are 0 to {}", sessions.len() - 1),
                )?,
            },
            ":tools" => {
                for (name, description, _) in session.tool_schemas() {
                    say(&mut out, &format!("{name}: {description}"))?;
                }
            }
            _ if text.starts_with(':') => {
                say(&mut out, &format!("unknown command {text}; {HELP}"))?
            }
            _ => match parse_line(text) {
                Ok(Step::Call { tool, args, .. }) => {
                    let result = session.call(&tool, &args);
                    say(
                        &mut out,
                        &serde_json::to_string_pretty(&result).unwrap_or_default(),
                    )?;
                }
                Ok(Step::NextTurn) => match session.next_turn()? {
                    Some(prompt) => say(&mut out, &format!("prompt: {prompt}"))?,
                    None => say(&mut out, "no more turns")?,
                },
                Err(problem) => say(&mut out, &problem)?,
            },
        }
    }
    for session in sessions {
        session.close();
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn both_line_forms_parse() {
        assert_eq!(
            parse_line("read {\"path\": \"a\"}").unwrap(),
            Step::Call {
                tool: "read".into(),
                args: serde_json::json!({"path": "a"}),
                turn: None,
            }
        );
        assert!(matches!(
            parse_line("{\"tool\": \"ls\"}").unwrap(),
            Step::Call { .. }
        ));
        assert!(parse_line("read {oops").is_err());
    }
}
