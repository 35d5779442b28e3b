//! The LLM judge's flags, shared by every command that verifies (`run`, `suite`, `verify`,
//! `audit`, `serve`): where the judge is, which model, the key, the limits of asking. Each
//! has an `ENVCRAFT_JUDGE_*` variable, so that one setting reaches every command.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;

use crate::cli::error::Error;
use crate::verify::judge::Endpoint;

#[derive(Debug, Clone, Args)]
pub struct JudgeArgs {
    /// The LLM judge of tasks with one: an OpenAI-compatible API's base URL
    /// (http://127.0.0.1:8000/v1, https://HOST/v1). Without it, judge parts are not run.
    #[arg(long, value_name = "URL", env = "ENVCRAFT_JUDGE_URL")]
    pub judge_url: Option<String>,
    /// The judge's model id, as the endpoint names it.
    #[arg(long, value_name = "NAME", env = "ENVCRAFT_JUDGE_MODEL")]
    pub judge_model: Option<String>,
    /// A file holding the endpoint's API key (sent as a bearer token).
    #[arg(long, value_name = "FILE", env = "ENVCRAFT_JUDGE_KEY_FILE")]
    pub judge_key_file: Option<PathBuf>,
    /// Seconds one request to the judge may take.
    #[arg(long, value_name = "SECS", default_value_t = 120, env = "ENVCRAFT_JUDGE_TIMEOUT",
          value_parser = clap::value_parser!(u64).range(1..=3_600))]
    pub judge_timeout: u64,
    /// How many times a request is made (connection errors, timeouts, 429, 5xx and unreadable
    /// answers are retried) before the judge part is reported as not run.
    #[arg(long, value_name = "N", default_value_t = 4, env = "ENVCRAFT_JUDGE_ATTEMPTS",
          value_parser = clap::value_parser!(u32).range(1..=20))]
    pub judge_attempts: u32,
    /// The seed sent with each request (temperature is always 0).
    #[arg(
        long,
        value_name = "N",
        default_value_t = 0,
        env = "ENVCRAFT_JUDGE_SEED"
    )]
    pub judge_seed: u64,
    /// Ask the judge every time instead of reusing the cached answer to the same request
    /// (kept under the state root's judge-cache/).
    #[arg(long)]
    pub judge_no_cache: bool,
}

/// Why the judge's flags do not make an endpoint.
#[derive(Debug, thiserror::Error)]
pub enum JudgeArgsError {
    #[error(
        "--judge-url {url:?}: expected an http:// or https:// URL (an OpenAI-compatible API's base, such as http://127.0.0.1:8000/v1)"
    )]
    Url { url: String },
    #[error(
        "--judge-url is set but --judge-model (or ENVCRAFT_JUDGE_MODEL) is not: name the judge's model"
    )]
    NoModel,
    #[error("--judge-model is set but --judge-url (or ENVCRAFT_JUDGE_URL) is not")]
    NoUrl,
    #[error("--judge-key-file {path}: {problem}")]
    Key { path: PathBuf, problem: String },
}

impl JudgeArgs {
    /// The endpoint these flags name (none without `--judge-url`), caching under
    /// `state_root/judge-cache/`.
    pub fn endpoint(&self, state_root: &Path) -> Result<Option<Endpoint>, Error> {
        let (url, model) = match (&self.judge_url, &self.judge_model) {
            (None, None) => return Ok(None),
            (None, Some(_)) => return Err(JudgeArgsError::NoUrl.into()),
            (Some(_), None) => return Err(JudgeArgsError::NoModel.into()),
            (Some(url), Some(model)) => (url, model),
        };
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"));
        if rest.is_none_or(|r| r.is_empty() || r.starts_with('/'))
            || reqwest::Url::parse(url).is_err()
        {
            return Err(JudgeArgsError::Url { url: url.clone() }.into());
        }
        let mut endpoint = Endpoint::new(url, model);
        endpoint.timeout = Duration::from_secs(self.judge_timeout);
        endpoint.attempts = self.judge_attempts;
        endpoint.seed = self.judge_seed;
        if !self.judge_no_cache {
            endpoint.cache_dir = Some(state_root.join("judge-cache"));
        }
        if let Some(path) = &self.judge_key_file {
            let key = std::fs::read_to_string(path).map_err(|e| JudgeArgsError::Key {
                path: path.clone(),
                problem: format!("cannot be read: {e}"),
            })?;
            let key = key.trim();
            if key.is_empty() || key.contains(['\n', '\r']) {
                return Err(JudgeArgsError::Key {
                    path: path.clone(),
                    problem: "expected one line holding the key".into(),
                }
                .into());
            }
            endpoint.key = Some(key.to_string());
        }
        Ok(Some(endpoint))
    }

    /// The same flags for a child `envcraft run` (a suite's).
    pub fn to_args(&self) -> Vec<OsString> {
        let mut out: Vec<OsString> = Vec::new();
        for (flag, value) in [
            ("--judge-url", self.judge_url.clone()),
            ("--judge-model", self.judge_model.clone()),
            (
                "--judge-key-file",
                self.judge_key_file
                    .as_ref()
                    .map(|p| p.display().to_string()),
            ),
        ] {
            if let Some(value) = value {
                out.extend([flag.into(), value.into()]);
            }
        }
        for (flag, value) in [
            ("--judge-timeout", self.judge_timeout.to_string()),
            ("--judge-attempts", self.judge_attempts.to_string()),
            ("--judge-seed", self.judge_seed.to_string()),
        ] {
            out.extend([flag.into(), value.into()]);
        }
        if self.judge_no_cache {
            out.push("--judge-no-cache".into());
        }
        out
    }
}
