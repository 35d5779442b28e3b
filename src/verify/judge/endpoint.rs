//! The judge's endpoint: an OpenAI-compatible chat-completions API (`URL/chat/completions`:
//! OpenAI, vLLM, SGLang, a trainer's proxy), asked at temperature 0 with a fixed seed, with
//! bounded retries (connection errors, timeouts, 429 and 5xx, honouring `Retry-After`; answers
//! that cannot be read as a score), and a cache of answers keyed by the exact request (the URL
//! and the request's bytes) so that verifying again is free and gives the same score.
//!
//! The cache holds one file per request, `SHA256.json` (the request and the answer's text),
//! written whole (a temporary file renamed in); only answers that read as a score are kept.

use std::io::Write;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};

use super::answer::{self, Judgment};

/// The longest a `Retry-After` is waited for.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);
/// The first pause between attempts; it doubles each time, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(8);
/// The most bytes of an endpoint's error body quoted.
const BODY_EXCERPT: usize = 300;

/// Where and how a judge is asked.
#[derive(Debug)]
pub struct Endpoint {
    /// The API's base URL (`http://127.0.0.1:8000/v1`), without the trailing `/`.
    pub url: String,
    pub model: String,
    /// A bearer token (read from `--judge-key-file`); never part of the cache's key.
    pub key: Option<String>,
    /// The time limit of one request.
    pub timeout: Duration,
    /// How many times a request is made before the judge is reported as not run.
    pub attempts: u32,
    /// Sent as `seed` (endpoints that take one sample reproducibly with it).
    pub seed: u64,
    /// Where answers are cached; `None`: no cache.
    pub cache_dir: Option<PathBuf>,
    /// The most one `ask` may take, attempts and pauses included (a server's request
    /// deadline); `None`: attempts × timeout and the pauses.
    pub budget: Option<Duration>,
    client: OnceLock<Result<reqwest::blocking::Client, String>>,
}

/// Why the judge gave no score.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EndpointError {
    #[error("the judge endpoint {url} could not be reached after {attempts} attempt(s): {last}")]
    Unreachable {
        url: String,
        attempts: u32,
        last: String,
    },
    #[error("the judge endpoint {url} refused the request with HTTP {status}: {body}")]
    Refused {
        url: String,
        status: u16,
        body: String,
    },
    #[error("the judge's answer could not be read as a score after {attempts} attempt(s): {last}")]
    Unreadable { attempts: u32, last: String },
    #[error("the judge's HTTP client could not be made: {0}")]
    Client(String),
}

/// An answer, read, and whether it came from the cache.
#[derive(Debug, Clone, PartialEq)]
pub struct Answered<T = Judgment> {
    pub judgment: T,
    pub cached: bool,
    /// The cache key: the SHA-256 of the URL and the request's bytes.
    pub request_sha256: String,
}

enum Attempt {
    Answer(String),
    /// Worth another try, after the pause given (if any).
    Retry(String, Option<Duration>),
    Fail(EndpointError),
}

impl Endpoint {
    pub fn new(url: &str, model: &str) -> Endpoint {
        Endpoint {
            url: url.trim_end_matches('/').to_string(),
            model: model.to_string(),
            key: None,
            timeout: Duration::from_secs(120),
            attempts: 4,
            seed: 0,
            cache_dir: None,
            budget: None,
            client: OnceLock::new(),
        }
    }

    fn completions_url(&self) -> String {
        format!("{}/chat/completions", self.url)
    }

    /// The request's body: the prompt as one user message, temperature 0, the seed.
    pub fn request_body(&self, prompt: &str) -> Vec<u8> {
        let body = json!({
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0,
            "seed": self.seed,
        });
        body.to_string().into_bytes()
    }

    /// Ask the judge about `prompt` (or take the cached answer to the same request), its
    /// answer read as PinchBench reads it.
    pub fn ask(&self, prompt: &str) -> Result<Answered, EndpointError> {
        self.ask_as(prompt, |text| {
            answer::parse(text).map_err(|e| e.to_string())
        })
    }

    /// Ask about `prompt`, the answer read by `read` (an answer it refuses is asked again, and
    /// never cached).
    pub fn ask_as<T>(
        &self,
        prompt: &str,
        read: impl Fn(&str) -> Result<T, String>,
    ) -> Result<Answered<T>, EndpointError> {
        let body = self.request_body(prompt);
        let key =
            crate::verify::sha256_hex(&[self.completions_url().as_bytes(), b"\n", &body].concat());
        if let Some(judgment) = self.cached(&key, &read) {
            return Ok(Answered {
                judgment,
                cached: true,
                request_sha256: key,
            });
        }
        let client = self
            .client
            .get_or_init(|| {
                // rustls needs its cryptography chosen once per process; a second call is a no-op.
                let _ = rustls::crypto::ring::default_provider().install_default();
                reqwest::blocking::Client::builder()
                    .timeout(self.timeout)
                    .build()
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| EndpointError::Client(e.clone()))?;
        let mut backoff = FIRST_BACKOFF;
        let mut last_unreadable = None;
        let mut last_error = String::new();
        let started = std::time::Instant::now();
        let mut made = 0;
        for attempt in 1..=self.attempts.max(1) {
            let timeout = match self.budget {
                Some(budget) => match budget.checked_sub(started.elapsed()) {
                    Some(left) if !left.is_zero() => left.min(self.timeout),
                    _ => break,
                },
                None => self.timeout,
            };
            made = attempt;
            let pause = match self.attempt(client, &body, timeout) {
                Attempt::Answer(text) => match read(&text) {
                    Ok(judgment) => {
                        self.store(&key, &body, &text);
                        return Ok(Answered {
                            judgment,
                            cached: false,
                            request_sha256: key,
                        });
                    }
                    Err(e) => {
                        last_unreadable = Some(e);
                        None
                    }
                },
                Attempt::Retry(why, after) => {
                    last_unreadable = None;
                    last_error = why;
                    after
                }
                Attempt::Fail(e) => return Err(e),
            };
            if attempt < self.attempts {
                let pause = pause.unwrap_or(backoff).min(MAX_RETRY_AFTER);
                if self
                    .budget
                    .is_some_and(|budget| started.elapsed() + pause >= budget)
                {
                    break;
                }
                std::thread::sleep(pause);
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
        Err(match last_unreadable {
            Some(last) => EndpointError::Unreadable {
                attempts: made,
                last,
            },
            None => EndpointError::Unreachable {
                url: self.completions_url(),
                attempts: made,
                last: last_error,
            },
        })
    }

    fn attempt(
        &self,
        client: &reqwest::blocking::Client,
        body: &[u8],
        timeout: Duration,
    ) -> Attempt {
        let mut request = client
            .post(self.completions_url())
            .timeout(timeout)
            .header("content-type", "application/json")
            .body(body.to_vec());
        if let Some(key) = &self.key {
            request = request.bearer_auth(key);
        }
        let response = match request.send() {
            Ok(r) => r,
            Err(e) => return Attempt::Retry(error_chain(&e), None),
        };
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let text = match response.text() {
            Ok(t) => t,
            Err(e) => return Attempt::Retry(error_chain(&e), None),
        };
        if status == 429 || status >= 500 {
            return Attempt::Retry(format!("HTTP {status}: {}", excerpt(&text)), retry_after);
        }
        if status != 200 {
            return Attempt::Fail(EndpointError::Refused {
                url: self.completions_url(),
                status,
                body: excerpt(&text),
            });
        }
        match content_of(&text) {
            Some(content) => Attempt::Answer(content),
            None => Attempt::Retry(
                format!(
                    "HTTP 200 without choices[0].message.content: {}",
                    excerpt(&text)
                ),
                None,
            ),
        }
    }

    fn cache_path(&self, key: &str) -> Option<PathBuf> {
        self.cache_dir
            .as_ref()
            .map(|d| d.join(format!("{key}.json")))
    }

    fn cached<T>(&self, key: &str, read: impl Fn(&str) -> Result<T, String>) -> Option<T> {
        let text = std::fs::read_to_string(self.cache_path(key)?).ok()?;
        let entry: Value = serde_json::from_str(&text).ok()?;
        read(entry.get("answer")?.as_str()?).ok()
    }

    /// Keep an answer; a cache that cannot be written costs a request next time, nothing more.
    fn store(&self, key: &str, body: &[u8], answer_text: &str) {
        let (Some(dir), Some(path)) = (&self.cache_dir, self.cache_path(key)) else {
            return;
        };
        let entry = json!({
            "url": self.completions_url(),
            "request": serde_json::from_slice::<Value>(body).unwrap_or(Value::Null),
            "answer": answer_text,
        });
        let written = std::fs::create_dir_all(dir).and_then(|()| {
            let mut file = tempfile::NamedTempFile::new_in(dir)?;
            file.write_all(entry.to_string().as_bytes())?;
            file.persist(&path).map_err(|e| e.error)?;
            Ok(())
        });
        if let Err(e) = written {
            tracing::warn!(path = %path.display(), error = %e, "the judge's answer was not cached");
        }
    }
}

/// The text of a chat completion: `choices[0].message.content`, a string or a list of text
/// parts.
fn content_of(body: &str) -> Option<String> {
    let value: Value = serde_json::from_str(body).ok()?;
    let content = value
        .get("choices")?
        .get(0)?
        .get("message")?
        .get("content")?;
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => None,
    }
}

fn excerpt(text: &str) -> String {
    let mut cut: String = text.chars().take(BODY_EXCERPT).collect();
    if cut.len() < text.len() {
        cut.push('…');
    }
    cut
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
