//! The model endpoint OpenClaw is pointed at: an OpenAI-compatible base URL on the host's
//! loopback, the one address the sandbox may reach (see `docs/security.md`).

use std::fmt;

/// Why a model URL is refused.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ModelUrlError {
    #[error("model URL {url:?}: only http:// is supported (an endpoint on this host's loopback)")]
    Scheme { url: String },
    #[error(
        "model URL {url:?}: host {host:?} is not loopback; the sandbox may reach only 127.0.0.1 or localhost"
    )]
    NotLoopback { url: String, host: String },
    #[error("model URL {url:?}: {port:?} is not a TCP port (1-65535)")]
    Port { url: String, port: String },
    #[error("model URL {url:?}: user info, queries and fragments are not accepted")]
    Extra { url: String },
}

/// A parsed `http://127.0.0.1:PORT/PATH` (or `localhost`): what OpenClaw's provider `baseUrl`
/// is set to, and the one TCP port the sandbox may connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelUrl {
    pub port: u16,
    /// The path, without a trailing `/` (`/v1`, or empty).
    pub path: String,
}

impl ModelUrl {
    pub fn parse(url: &str) -> Result<ModelUrl, ModelUrlError> {
        let owned = || url.to_string();
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| ModelUrlError::Scheme { url: owned() })?;
        if rest.contains(['@', '?', '#']) {
            return Err(ModelUrlError::Extra { url: owned() });
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        };
        if !matches!(host, "127.0.0.1" | "localhost") {
            return Err(ModelUrlError::NotLoopback {
                url: owned(),
                host: host.to_string(),
            });
        }
        let port = match port {
            None => 80,
            Some(text) => match text.parse::<u16>() {
                Ok(p) if p > 0 && text.bytes().all(|b| b.is_ascii_digit()) => p,
                _ => {
                    return Err(ModelUrlError::Port {
                        url: owned(),
                        port: text.to_string(),
                    });
                }
            },
        };
        Ok(ModelUrl {
            port,
            path: path.trim_end_matches('/').to_string(),
        })
    }
}

impl fmt::Display for ModelUrl {
    /// The URL as OpenClaw inside the sandbox uses it: always `127.0.0.1` (the sandbox shares
    /// the host's loopback; `localhost` would need a resolver).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "http://127.0.0.1:{}{}", self.port, self.path)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn loopback_urls_parse_to_their_port_and_path() {
        let u = ModelUrl::parse("http://127.0.0.1:8000/v1/").unwrap();
        assert_eq!((u.port, u.path.as_str()), (8000, "/v1"));
        assert_eq!(u.to_string(), "http://127.0.0.1:8000/v1");
        let u = ModelUrl::parse("http://localhost").unwrap();
        assert_eq!((u.port, u.path.as_str()), (80, ""));
    }

    #[test]
    fn other_hosts_schemes_ports_and_extras_are_refused() {
        let err = |s| ModelUrl::parse(s).unwrap_err();
        assert!(matches!(
            err("https://127.0.0.1:1/v1"),
            ModelUrlError::Scheme { .. }
        ));
        assert!(matches!(
            err("http://10.0.0.1:80/v1"),
            ModelUrlError::NotLoopback { .. }
        ));
        assert!(matches!(
            err("http://[::1]:80/v1"),
            ModelUrlError::NotLoopback { .. }
        ));
        assert!(matches!(
            err("http://127.0.0.1:0/v1"),
            ModelUrlError::Port { .. }
        ));
        assert!(matches!(
            err("http://127.0.0.1:+80/v1"),
            ModelUrlError::Port { .. }
        ));
        assert!(matches!(
            err("http://127.0.0.1:99999"),
            ModelUrlError::Port { .. }
        ));
        assert!(matches!(
            err("http://u@127.0.0.1:80/"),
            ModelUrlError::Extra { .. }
        ));
        assert!(matches!(
            err("http://127.0.0.1:80/v1?x=1"),
            ModelUrlError::Extra { .. }
        ));
    }
}
