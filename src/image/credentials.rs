//! Registry credentials: from `--creds USER:PASS`, or from the auth files Docker and Podman
//! write (`--authfile`, `$REGISTRY_AUTH_FILE`, `$XDG_RUNTIME_DIR/containers/auth.json`,
//! `~/.docker/config.json`, first found wins).
//!
//! Promise: a password is never formatted: [`Credentials`]'s `Debug` hides it, and errors name
//! the file and the registry, never an entry's value.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine;
use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("--creds takes USER:PASS (a user name, a colon, the password)")]
    Flag,
    #[error("cannot read the auth file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the auth file {path} is not an auth file: expected JSON {{\"auths\": {{\"REGISTRY\": {{\"auth\": \"BASE64(USER:PASS)\"}}}}}}"
    )]
    Format { path: PathBuf },
    #[error(
        "the auth file {path} has an entry for {registry} whose `auth` is not base64 of USER:PASS"
    )]
    Entry { path: PathBuf, registry: String },
}

/// A user name and a password for one registry.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub user: String,
    pub password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("password", &"<hidden>")
            .finish()
    }
}

impl Credentials {
    /// `USER:PASS` (the password may hold colons; the user may not).
    pub fn from_flag(text: &str) -> Result<Credentials, CredentialsError> {
        match text.split_once(':') {
            Some((user, password)) if !user.is_empty() && !password.is_empty() => Ok(Credentials {
                user: user.to_string(),
                password: password.to_string(),
            }),
            _ => Err(CredentialsError::Flag),
        }
    }
}

#[derive(Deserialize)]
struct AuthFile {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
}

#[derive(Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
}

/// The auth files looked at, in order: `explicit` (`--authfile`) alone when given, else
/// `$REGISTRY_AUTH_FILE`, `$XDG_RUNTIME_DIR/containers/auth.json`, `~/.docker/config.json`.
pub fn auth_files(explicit: Option<&Path>) -> Vec<PathBuf> {
    if let Some(p) = explicit {
        return vec![p.to_path_buf()];
    }
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let mut out = Vec::new();
    out.extend(env("REGISTRY_AUTH_FILE"));
    out.extend(env("XDG_RUNTIME_DIR").map(|d| d.join("containers/auth.json")));
    out.extend(env("HOME").map(|h| h.join(".docker/config.json")));
    out
}

/// The keys an auth file may file `registry`/`repository` under, most specific first: the
/// repository's paths (as Podman allows), the registry, and Docker Hub's historic names.
fn keys(registry: &str, repository: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut path = format!("{registry}/{repository}");
    loop {
        out.push(path.clone());
        match path.rfind('/') {
            Some(i) if i > registry.len() => path.truncate(i),
            _ => break,
        }
    }
    out.push(registry.to_string());
    if registry == "docker.io" || registry == "index.docker.io" {
        out.push("https://index.docker.io/v1/".into());
        out.push("index.docker.io".into());
        out.push("docker.io".into());
    }
    out
}

/// The key of `auths` without a scheme and a trailing slash.
fn normalise(key: &str) -> &str {
    key.trim_start_matches("https://")
        .trim_start_matches("http://")
        .trim_end_matches('/')
}

/// The credentials for `registry`/`repository` in the first of `files` that exists and has
/// an entry for it; `explicit` names a file that must exist.
pub fn lookup(
    files: &[PathBuf],
    explicit: bool,
    registry: &str,
    repository: &str,
) -> Result<Option<Credentials>, CredentialsError> {
    for path in files {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => continue,
            Err(source) => {
                return Err(CredentialsError::Read {
                    path: path.clone(),
                    source,
                });
            }
        };
        let file: AuthFile = serde_json::from_slice(&bytes)
            .map_err(|_| CredentialsError::Format { path: path.clone() })?;
        let wanted = keys(registry, repository);
        let found = wanted.iter().find_map(|w| {
            file.auths
                .iter()
                .find(|(k, _)| normalise(k) == normalise(w))
        });
        let Some((key, entry)) = found else { continue };
        let Some(auth) = entry.auth.as_deref().filter(|a| !a.is_empty()) else {
            // An entry without `auth` (a credential helper's): not ours to read.
            continue;
        };
        let bad = || CredentialsError::Entry {
            path: path.clone(),
            registry: key.clone(),
        };
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .map_err(|_| bad())?;
        let text = String::from_utf8(decoded).map_err(|_| bad())?;
        return Credentials::from_flag(&text).map(Some).map_err(|_| bad());
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_password_is_never_in_debug_output() {
        let c = Credentials::from_flag("me:se:cret").unwrap();
        assert_eq!(c.password, "se:cret");
        assert!(!format!("{c:?}").contains("se:cret"));
        assert!(Credentials::from_flag("nocolon").is_err());
        assert!(Credentials::from_flag(":pass").is_err());
    }

    #[test]
    fn an_auth_file_entry_is_found_by_repository_then_registry() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("auth.json");
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        std::fs::write(
            &file,
            format!(
                r#"{{"auths": {{"https://reg.example:5000": {{"auth": "{}"}}, "reg.example:5000/team/app": {{"auth": "{}"}}, "https://index.docker.io/v1/": {{"auth": "{}"}}}}}}"#,
                b64("any:one"),
                b64("team:two"),
                b64("hub:three")
            ),
        )
        .unwrap();
        let files = vec![file.clone()];
        let get = |r: &str, repo: &str| lookup(&files, true, r, repo).unwrap().map(|c| c.user);
        assert_eq!(get("reg.example:5000", "team/app").as_deref(), Some("team"));
        assert_eq!(get("reg.example:5000", "other").as_deref(), Some("any"));
        assert_eq!(get("docker.io", "library/debian").as_deref(), Some("hub"));
        assert_eq!(get("elsewhere", "x"), None);
        let missing = vec![dir.path().join("none.json")];
        assert!(lookup(&missing, true, "r", "x").is_err());
        assert!(lookup(&missing, false, "r", "x").unwrap().is_none());
    }
}
