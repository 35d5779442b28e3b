//! One OCI distribution registry, spoken to through the `oci-client` crate: the reference's
//! registry and repository, authentication (anonymous, basic, or a bearer token from the
//! realm a `WWW-Authenticate` challenge names), manifests checked against
//! `Docker-Content-Digest` and the reference's digest, and blobs streamed into a file that a
//! later call resumes with a `Range` request.
//!
//! Promises: every wait on the network is bounded (`timeout` per read, and per request); a
//! password is never formatted (errors carry the registry's words with the password, should
//! they hold it, replaced).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{DigestError, OciDistributionError, OciErrorCode};
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};

use super::credentials::Credentials;
use super::oci::{self, Digest};

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error(
        "{reference:?} is not an image reference: expected [REGISTRY/]REPOSITORY[:TAG][@sha256:HEX] ({reason})"
    )]
    Reference { reference: String, reason: String },
    #[error(
        "{registry} refused access to {repository}: {detail}; give credentials with --creds USER:PASS or an auth file (--authfile, $REGISTRY_AUTH_FILE, $XDG_RUNTIME_DIR/containers/auth.json, ~/.docker/config.json)"
    )]
    Auth {
        registry: String,
        repository: String,
        detail: String,
    },
    #[error("{registry} has no {what} in {repository} ({detail})")]
    NotFound {
        registry: String,
        repository: String,
        what: String,
        detail: String,
    },
    #[error("{registry} did not answer within {secs} s ({during})")]
    Timeout {
        registry: String,
        secs: u64,
        during: String,
    },
    #[error("cannot reach {registry} over {scheme} ({detail})")]
    Connect {
        registry: String,
        scheme: &'static str,
        detail: String,
    },
    #[error("{registry} failed while {during}: {detail}")]
    Protocol {
        registry: String,
        during: String,
        detail: String,
    },
    #[error(
        "{what} from {registry} has the digest {actual}, but {expected} was expected: the registry sent other bytes than it names"
    )]
    Digest {
        registry: String,
        what: String,
        expected: Digest,
        actual: Digest,
    },
    #[error("{what} from {registry} is larger than the {max} bytes it may be")]
    TooBig {
        registry: String,
        what: String,
        max: u64,
    },
    #[error("the unpacker stopped taking the layer's bytes")]
    Handover {
        #[source]
        source: std::io::Error,
    },
    #[error("cannot {op} {path}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// How to speak to a registry.
#[derive(Debug, Clone)]
pub struct Connection {
    pub credentials: Option<Credentials>,
    /// `false`: plain http (`--tls-verify=false`); loopback registries are always plain http.
    pub tls_verify: bool,
    /// The longest wait for any one answer.
    pub timeout: Duration,
}

/// Whether `registry` (`HOST[:PORT]`) is on this machine's loopback: spoken to over plain
/// http, as Docker treats `127.0.0.0/8` (there is nothing between the two ends to trust).
pub fn is_loopback(registry: &str) -> bool {
    let host = match registry.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => registry.rsplit_once(':').map_or(registry, |(h, _)| h),
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Parse an image reference (`debian:bookworm`, `127.0.0.1:5000/app@sha256:...`); Docker
/// Hub's short names are completed as Docker does (`docker.io/library/debian:bookworm`).
pub fn parse_reference(text: &str) -> Result<Reference, RegistryError> {
    text.parse::<Reference>()
        .map_err(|e| RegistryError::Reference {
            reference: text.to_string(),
            reason: e.to_string(),
        })
}

/// The media types a manifest may be sent as.
const MANIFEST_TYPES: [&str; 4] = [
    oci::MEDIA_INDEX,
    oci::MEDIA_MANIFEST,
    oci::MEDIA_DOCKER_LIST,
    oci::MEDIA_DOCKER_MANIFEST,
];

/// A registry and repository, authenticated.
pub struct Registry {
    client: Client,
    reference: Reference,
    auth: RegistryAuth,
    secret: Option<String>,
    timeout: Duration,
    /// Plain http, not https.
    plain: bool,
}

impl Registry {
    /// A client for `reference`'s registry (no request is made yet).
    pub fn new(reference: &Reference, connection: &Connection) -> Registry {
        // rustls needs its cryptography chosen once per process; a second call is a no-op.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let plain = !connection.tls_verify || is_loopback(reference.resolve_registry());
        let config = ClientConfig {
            protocol: if plain {
                ClientProtocol::Http
            } else {
                ClientProtocol::Https
            },
            platform_resolver: None,
            read_timeout: Some(connection.timeout),
            connect_timeout: Some(connection.timeout),
            user_agent: concat!("envcraft/", env!("CARGO_PKG_VERSION")),
            ..ClientConfig::default()
        };
        let (auth, secret) = match &connection.credentials {
            Some(c) => (
                RegistryAuth::Basic(c.user.clone(), c.password.clone()),
                Some(c.password.clone()),
            ),
            None => (RegistryAuth::Anonymous, None),
        };
        Registry {
            client: Client::new(config),
            reference: reference.clone(),
            auth,
            secret,
            timeout: connection.timeout,
            plain,
        }
    }

    fn registry(&self) -> String {
        self.reference.registry().to_string()
    }

    /// `text` with the password, should it appear, replaced.
    fn redact(&self, text: String) -> String {
        match &self.secret {
            Some(s) if !s.is_empty() => text.replace(s.as_str(), "<hidden>"),
            _ => text,
        }
    }

    /// What an error of the crate means here (`what`: the thing asked for).
    fn error(&self, during: &str, what: &str, e: OciDistributionError) -> RegistryError {
        let registry = self.registry();
        let repository = self.reference.repository().to_string();
        let auth = |detail: String| RegistryError::Auth {
            registry: registry.clone(),
            repository: repository.clone(),
            detail,
        };
        let not_found = |detail: String| RegistryError::NotFound {
            registry: registry.clone(),
            repository: repository.clone(),
            what: what.to_string(),
            detail,
        };
        match e {
            OciDistributionError::AuthenticationFailure(reason) => auth(self.redact(format!(
                "its token service refused {}: {}",
                if self.secret.is_some() {
                    "the credentials given"
                } else {
                    "an anonymous pull"
                },
                reason.trim()
            ))),
            OciDistributionError::UnauthorizedError { .. } => {
                auth("authentication required".into())
            }
            OciDistributionError::RegistryError { envelope, .. } => {
                let detail = self.redact(
                    envelope
                        .errors
                        .iter()
                        .map(|e| format!("{:?}: {}", e.code, e.message))
                        .collect::<Vec<_>>()
                        .join("; "),
                );
                let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
                if codes
                    .iter()
                    .any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied))
                {
                    auth(detail)
                } else if codes.iter().any(|c| {
                    matches!(
                        c,
                        OciErrorCode::ManifestUnknown
                            | OciErrorCode::BlobUnknown
                            | OciErrorCode::NameUnknown
                            | OciErrorCode::NotFound
                    )
                }) {
                    not_found(detail)
                } else {
                    RegistryError::Protocol {
                        registry,
                        during: during.to_string(),
                        detail,
                    }
                }
            }
            OciDistributionError::ServerError { code, message, .. } => match code {
                401 | 403 => auth(self.redact(format!("HTTP {code} {message}"))),
                404 => not_found(self.redact(format!("HTTP 404 {message}"))),
                _ => RegistryError::Protocol {
                    registry,
                    during: during.to_string(),
                    detail: self.redact(format!("HTTP {code} {message}")),
                },
            },
            OciDistributionError::RequestError(e) if e.is_timeout() => RegistryError::Timeout {
                registry,
                secs: self.timeout.as_secs(),
                during: during.to_string(),
            },
            OciDistributionError::RequestError(e) if e.is_connect() => RegistryError::Connect {
                registry,
                scheme: if self.plain { "http" } else { "https" },
                detail: self.redact(chain(&e)),
            },
            other => RegistryError::Protocol {
                registry,
                during: during.to_string(),
                detail: self.redact(chain(&other)),
            },
        }
    }

    fn timed_out(&self, during: &str) -> RegistryError {
        RegistryError::Timeout {
            registry: self.registry(),
            secs: self.timeout.as_secs(),
            during: during.to_string(),
        }
    }

    /// Authenticate for pulling: nothing when the registry asks for nothing, else basic
    /// credentials or a bearer token from its realm (anonymous when no credentials are given).
    pub async fn authenticate(&self) -> Result<(), RegistryError> {
        let during = "authenticating";
        let asked = self
            .client
            .auth(&self.reference, &self.auth, RegistryOperation::Pull);
        match tokio::time::timeout(self.timeout * 2, asked).await {
            Err(_) => Err(self.timed_out(during)),
            Ok(Err(e)) => Err(self.error(during, "access", e)),
            Ok(Ok(_)) => Ok(()),
        }
    }

    /// The manifest or index `reference` points at (a tag or a digest of this repository),
    /// with its digest: checked against the `Docker-Content-Digest` the registry sent and,
    /// for a digest reference, against that digest.
    pub async fn manifest(
        &self,
        reference: &Reference,
        max: u64,
    ) -> Result<(Vec<u8>, Digest), RegistryError> {
        let what = match (reference.digest(), reference.tag()) {
            (Some(d), _) => format!("manifest {d}"),
            (None, Some(t)) => format!("tag {t}"),
            (None, None) => "manifest".to_string(),
        };
        let during = format!("fetching {what}");
        let asked = self
            .client
            .pull_manifest_raw(reference, &self.auth, &MANIFEST_TYPES);
        let (bytes, _) = match tokio::time::timeout(self.timeout * 2, asked).await {
            Err(_) => return Err(self.timed_out(&during)),
            Ok(Err(OciDistributionError::DigestError(DigestError::VerificationError {
                expected,
                actual,
            }))) => {
                return Err(RegistryError::Digest {
                    registry: self.registry(),
                    what: format!("{what} (its Docker-Content-Digest, or the reference's)"),
                    expected: named_digest(&expected),
                    actual: named_digest(&actual),
                });
            }
            Ok(Err(e)) => return Err(self.error(&during, &what, e)),
            Ok(Ok(got)) => got,
        };
        if bytes.len() as u64 > max {
            return Err(RegistryError::TooBig {
                registry: self.registry(),
                what,
                max,
            });
        }
        let actual = Digest::of(&bytes);
        if let Some(expected) = reference.digest()
            && expected != actual.to_string()
        {
            return Err(RegistryError::Digest {
                registry: self.registry(),
                what,
                expected: named_digest(expected),
                actual,
            });
        }
        Ok((bytes.to_vec(), actual))
    }

    /// A small blob (a config), whole, checked against its digest.
    pub async fn blob_bytes(&self, digest: &Digest, max: u64) -> Result<Vec<u8>, RegistryError> {
        let what = format!("blob {digest}");
        let during = format!("fetching {what}");
        let descriptor = descriptor(digest, None);
        let asked = self.client.pull_blob_stream(&self.reference, &descriptor);
        let mut stream = match tokio::time::timeout(self.timeout * 2, asked).await {
            Err(_) => return Err(self.timed_out(&during)),
            Ok(Err(e)) => return Err(self.error(&during, &what, e)),
            Ok(Ok(s)) => s,
        };
        let mut bytes = Vec::new();
        loop {
            match tokio::time::timeout(self.timeout, stream.next()).await {
                Err(_) => return Err(self.timed_out(&during)),
                Ok(None) => break,
                Ok(Some(Err(e))) => {
                    return Err(self.error(&during, &what, OciDistributionError::IoError(e)));
                }
                Ok(Some(Ok(chunk))) => bytes.extend_from_slice(&chunk),
            }
            if bytes.len() as u64 > max {
                return Err(RegistryError::TooBig {
                    registry: self.registry(),
                    what,
                    max,
                });
            }
        }
        let actual = Digest::of(&bytes);
        if actual != *digest {
            return Err(RegistryError::Digest {
                registry: self.registry(),
                what,
                expected: digest.clone(),
                actual,
            });
        }
        Ok(bytes)
    }

    /// Download the blob `digest` of `size` bytes into `path`, continuing from what `path`
    /// holds already (a `Range` request; a registry that sends the whole blob instead is
    /// written from the start), and passing every byte of it, in order, to `tee` too (what the
    /// file held before first). Returns how many bytes were there before. The bytes are checked
    /// against the digest by whoever reads them (the store, as it unpacks them).
    pub async fn blob_to_file(
        &self,
        digest: &Digest,
        size: u64,
        path: &Path,
        tee: &mut Tee,
    ) -> Result<u64, RegistryError> {
        let what = format!("blob {digest}");
        let io = |op, source| RegistryError::Io {
            op,
            path: path.to_path_buf(),
            source,
        };
        let mut have = match std::fs::metadata(path) {
            Ok(m) => m.len(),
            Err(_) => 0,
        };
        if have > size {
            std::fs::remove_file(path).map_err(|e| io("remove", e))?;
            have = 0;
        }
        if have == size {
            tee.catch_up(path, have).map_err(|e| io("read", e))?;
            return Ok(have);
        }
        let during = format!("fetching {what} from byte {have}");
        let descriptor = descriptor(digest, Some(size));
        let asked = self
            .client
            .pull_blob_stream_partial(&self.reference, &descriptor, have, None);
        let response = match tokio::time::timeout(self.timeout * 2, asked).await {
            Err(_) => return Err(self.timed_out(&during)),
            Ok(Err(e)) => return Err(self.error(&during, &what, e)),
            Ok(Ok(r)) => r,
        };
        let (mut stream, resumed) = match response {
            oci_client::client::BlobResponse::Partial(s) => (s, have),
            oci_client::client::BlobResponse::Full(s) => (s, 0),
        };
        if resumed < tee.fed {
            // Bytes handed on cannot be taken back: the next pull starts this blob afresh.
            let _ = std::fs::remove_file(path);
            return Err(RegistryError::Protocol {
                registry: self.registry(),
                during,
                detail: "it sent the whole blob again, not the rest that was asked for".into(),
            });
        }
        tee.catch_up(path, resumed).map_err(|e| io("read", e))?;
        if let Some(sent) = stream.digest_header_value.as_deref()
            && sent != digest.to_string()
        {
            return Err(RegistryError::Digest {
                registry: self.registry(),
                what: format!("{what} (its Docker-Content-Digest)"),
                expected: digest.clone(),
                actual: named_digest(sent),
            });
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(resumed == 0)
            .append(resumed > 0)
            .open(path)
            .map_err(|e| io("open", e))?;
        let mut written = resumed;
        let result = loop {
            match tokio::time::timeout(self.timeout, stream.next()).await {
                Err(_) => break Err(self.timed_out(&during)),
                Ok(None) => break Ok(()),
                Ok(Some(Err(e))) => {
                    break Err(self.error(&during, &what, OciDistributionError::IoError(e)));
                }
                Ok(Some(Ok(chunk))) => {
                    written += chunk.len() as u64;
                    if written > size {
                        break Err(RegistryError::TooBig {
                            registry: self.registry(),
                            what: what.clone(),
                            max: size,
                        });
                    }
                    if let Err(e) = file.write_all(&chunk) {
                        break Err(io("write", e));
                    }
                    if let Err(e) = tee.feed(&chunk) {
                        break Err(RegistryError::Handover { source: e });
                    }
                }
            }
        };
        // What arrived is kept (synced) for the next attempt, even when this one failed.
        file.sync_data().map_err(|e| io("sync", e))?;
        result?;
        if written < size {
            return Err(RegistryError::Protocol {
                registry: self.registry(),
                during,
                detail: format!("the answer ended after {written} of {size} bytes"),
            });
        }
        Ok(have)
    }
}

/// Where a blob's bytes go besides its download file, in order: the unpacker's pipe (none: they
/// are only counted).
pub struct Tee {
    pub pipe: Option<std::fs::File>,
    /// How many bytes it has had.
    pub fed: u64,
}

impl Tee {
    fn feed(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if let Some(pipe) = &mut self.pipe {
            pipe.write_all(bytes)?;
        }
        self.fed += bytes.len() as u64;
        Ok(())
    }

    /// Hand on what `path` holds from the bytes already had up to `upto`.
    fn catch_up(&mut self, path: &Path, upto: u64) -> std::io::Result<()> {
        use std::io::{Read, Seek};
        if upto <= self.fed {
            return Ok(());
        }
        let mut file = std::fs::File::open(path)?;
        file.seek(std::io::SeekFrom::Start(self.fed))?;
        let mut left = file.take(upto - self.fed);
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = left.read(&mut buf)?;
            if n == 0 {
                break;
            }
            self.feed(&buf[..n])?;
        }
        Ok(())
    }
}

/// A digest a registry or a reference named: parsed where it is a sha256 one; any other
/// (sha512, or not a digest) is shown as the sha256 of its text, which matches nothing.
fn named_digest(text: &str) -> Digest {
    Digest::parse(text).unwrap_or_else(|_| Digest::of(text.as_bytes()))
}

fn descriptor(digest: &Digest, size: Option<u64>) -> OciDescriptor {
    OciDescriptor {
        digest: digest.to_string(),
        size: size.map_or(0, |s| s as i64),
        ..OciDescriptor::default()
    }
}

/// An error and its sources, `: `-joined.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn loopback_registries_are_recognised_by_address_and_name() {
        for r in [
            "127.0.0.1:5000",
            "localhost",
            "localhost:80",
            "[::1]:5000",
            "127.9.0.1",
        ] {
            assert!(is_loopback(r), "{r}");
        }
        for r in [
            "registry.example:5000",
            "10.0.0.1:5000",
            "index.docker.io",
            "[2001:db8::1]:5000",
        ] {
            assert!(!is_loopback(r), "{r}");
        }
    }

    #[test]
    fn short_names_are_completed_as_docker_does() {
        let r = parse_reference("debian:bookworm").unwrap();
        assert_eq!(r.registry(), "docker.io");
        assert_eq!(r.repository(), "library/debian");
        let r = parse_reference(&format!("127.0.0.1:5000/a/b@sha256:{}", "0".repeat(64))).unwrap();
        assert_eq!(r.registry(), "127.0.0.1:5000");
        assert_eq!(r.repository(), "a/b");
        assert!(r.digest().is_some());
        assert!(parse_reference("app@sha256:short").is_err());
        assert!(parse_reference("").is_err());
    }
}
