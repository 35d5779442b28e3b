//! `envcraft mcp TASK`: one session of a task served over MCP on stdin/stdout (newline-delimited
//! JSON-RPC, as MCP's stdio transport says), for an agent harness on this machine (Claude
//! Code, Codex, an MCP inspector). A thin adapter over [`crate::mcp`]: a reader thread takes
//! lines (each bounded in size) and notes cancellations; the main thread answers requests in
//! order, drops the answer of one cancelled meanwhile, and closes the session at end of input.

use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use clap::Args;
use serde_json::Value;

use super::task_args::{SessionArgs, TaskArgs};
use crate::cli::error::Error;
use crate::mcp::{self, Incoming, RpcError};
use crate::sandbox::cancel::Cancel;
use crate::session::Session;

/// The largest message read from stdin (a line); a longer one is answered with an invalid
/// request and skipped.
const MAX_MESSAGE_BYTES: usize = 16 << 20;

#[derive(Debug, Args)]
pub struct McpArgs {
    #[command(flatten)]
    pub task: TaskArgs,
    #[command(flatten)]
    pub session: SessionArgs,
    /// Exported to the session's commands, skills and grader as ENVCRAFT_SEED.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
}

/// One line of stdin: a message, or one past [`MAX_MESSAGE_BYTES`].
enum Line {
    Message(Vec<u8>),
    TooLong,
}

/// Read one line of at most `max` bytes (the newline excluded); `None` at end of input.
fn read_line(input: &mut impl BufRead, max: usize) -> std::io::Result<Option<Line>> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let available = input.fill_buf()?;
        if available.is_empty() {
            return Ok(match (line.is_empty() && !too_long, too_long) {
                (true, _) => None,
                (false, true) => Some(Line::TooLong),
                (false, false) => Some(Line::Message(line)),
            });
        }
        let (chunk, done) = match memchr::memchr(b'\n', available) {
            Some(at) => (&available[..at], Some(at + 1)),
            None => (available, None),
        };
        if !too_long {
            if line.len() + chunk.len() > max {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = done.unwrap_or(available.len());
        input.consume(used);
        if done.is_some() {
            return Ok(Some(if too_long {
                Line::TooLong
            } else {
                Line::Message(line)
            }));
        }
    }
}

/// What the reader thread hands the main thread.
enum Read {
    Request {
        id: Value,
        method: String,
        params: serde_json::Map<String, Value>,
    },
    /// An answer to send as is (a message that could not be read).
    Answer(Value),
}

/// What the reader and the main thread share of cancellations: the ids cancelled, the request
/// running, and the handle that kills its command.
struct Cancellations {
    cancelled: Mutex<HashSet<String>>,
    running: Mutex<Option<String>>,
    cancel: Option<Arc<Cancel>>,
}

impl Cancellations {
    /// Note `id` cancelled; if it is the request running, kill its command.
    fn cancel(&self, id: String) {
        let running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if running.as_deref() == Some(id.as_str())
            && let Some(cancel) = &self.cancel
        {
            cancel.fire();
        }
        self.cancelled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id);
    }

    /// Whether `id` was cancelled (forgetting it).
    fn take(&self, id: &Value) -> bool {
        self.cancelled
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id.to_string())
    }

    /// Mark `id` running (`None`: none), forgetting any earlier firing of the handle.
    fn set_running(&self, id: Option<&Value>) {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        *running = id.map(Value::to_string);
        if let Some(cancel) = &self.cancel {
            cancel.reset();
            // Cancelled between the check before the call and now: kill it as it starts.
            let cancelled = self.cancelled.lock().unwrap_or_else(|p| p.into_inner());
            if running.as_ref().is_some_and(|id| cancelled.contains(id)) {
                cancel.fire();
            }
        }
    }
}

/// The reader: lines to messages; cancellations noted at once (so that a request still queued
/// is skipped, and one running has its command killed and its answer dropped).
fn read_input(sender: mpsc::Sender<Read>, cancellations: Arc<Cancellations>) {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    loop {
        let read = match read_line(&mut input, MAX_MESSAGE_BYTES) {
            Ok(Some(Line::Message(bytes))) if bytes.iter().all(u8::is_ascii_whitespace) => continue,
            Ok(Some(Line::Message(bytes))) => match mcp::parse(&bytes) {
                Ok(Incoming::Request { id, method, params }) => {
                    Read::Request { id, method, params }
                }
                Ok(Incoming::Notification { method, params }) => {
                    if method == "notifications/cancelled"
                        && let Some(id) = params.get("requestId")
                    {
                        cancellations.cancel(id.to_string());
                    }
                    continue;
                }
                Ok(Incoming::Response) => continue,
                Err(answer) => Read::Answer(answer),
            },
            Ok(Some(Line::TooLong)) => Read::Answer(mcp::error_response(
                &Value::Null,
                &RpcError::new(
                    mcp::code::INVALID_REQUEST,
                    format!("the message is longer than {MAX_MESSAGE_BYTES} bytes: it was skipped"),
                ),
            )),
            Ok(None) | Err(_) => return,
        };
        if sender.send(read).is_err() {
            return;
        }
    }
}

fn write_message(out: &mut impl Write, message: &Value) -> Result<(), Error> {
    let mut bytes = crate::json::to_vec(message);
    bytes.push(b'\n');
    out.write_all(&bytes).map_err(Error::Output)?;
    out.flush().map_err(Error::Output)
}

pub fn run(args: McpArgs) -> Result<i32, Error> {
    let mut options = args.session.options(&args.task)?;
    let task = args.task.open(&options.state_root)?;
    options.seed = args.seed;
    let mut session = Session::create(&task, &options)?;
    tracing::info!(session = %session.id(), task = %format!("{}/{}", task.env.name, task.id), "serving MCP on stdio");
    let cancel = session
        .canceller()
        .map_err(|e| tracing::warn!(error = %e, "cancelled calls will run to their end"))
        .ok();
    let cancellations = Arc::new(Cancellations {
        cancelled: Mutex::new(HashSet::new()),
        running: Mutex::new(None),
        cancel,
    });
    let (sender, receiver) = mpsc::channel();
    let reader = cancellations.clone();
    // Not joined: it may be blocked on stdin when the main thread ends.
    std::thread::spawn(move || read_input(sender, reader));
    let mut out = std::io::stdout().lock();
    let is_cancelled = |id: &Value| cancellations.take(id);
    let outcome = (|| -> Result<(), Error> {
        for read in receiver {
            match read {
                Read::Answer(answer) => write_message(&mut out, &answer)?,
                Read::Request { id, method, params } => {
                    if is_cancelled(&id) {
                        continue;
                    }
                    cancellations.set_running(Some(&id));
                    let result = mcp::answer(&mut session, &method, &params);
                    cancellations.set_running(None);
                    if is_cancelled(&id) {
                        continue;
                    }
                    write_message(&mut out, &mcp::response(&id, result))?;
                }
            }
        }
        Ok(())
    })();
    session.close();
    outcome.map(|()| 0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn lines(input: &[u8], max: usize) -> Vec<Option<Vec<u8>>> {
        let mut reader = std::io::BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        while let Some(line) = read_line(&mut reader, max).unwrap() {
            out.push(match line {
                Line::Message(bytes) => Some(bytes),
                Line::TooLong => None,
            });
        }
        out
    }

    #[test]
    fn a_line_past_the_bound_is_skipped_whole_and_the_next_is_read() {
        let got = lines(b"short\nthis one is too long\nok\nlast", 8);
        assert_eq!(
            got,
            vec![
                Some(b"short".to_vec()),
                None,
                Some(b"ok".to_vec()),
                Some(b"last".to_vec())
            ]
        );
    }
}
