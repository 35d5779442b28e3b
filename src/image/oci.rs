//! The OCI and Docker image formats envcraft reads: content digests, descriptors, indexes,
//! manifests, the image configuration and a docker-archive's `manifest.json`; each parsed with
//! serde from bytes whose digest was checked first ([`Digest::verify`]).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// Why a blob or a document of an image cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error("{text:?} is not a digest: expected `sha256:` and 64 lowercase hex digits")]
    BadDigest { text: String },
    #[error(
        "{what} has digest {actual}, but {expected} was expected: the content is corrupt or was changed"
    )]
    Mismatch {
        what: String,
        expected: Digest,
        actual: Digest,
    },
    #[error("{what} is not valid JSON of its kind: {source}")]
    Json {
        what: String,
        #[source]
        source: serde_json::Error,
    },
}

/// A `sha256:` content digest.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Digest(String);

impl Digest {
    /// Parse `sha256:HEX` (64 lowercase hex digits; no other algorithm is accepted).
    pub fn parse(text: &str) -> Result<Digest, OciError> {
        let hex = text.strip_prefix("sha256:").unwrap_or("");
        if hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            Ok(Digest(text.to_string()))
        } else {
            Err(OciError::BadDigest {
                text: text.chars().take(100).collect(),
            })
        }
    }

    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Digest {
        Digest::from_hasher(Sha256::new_with_prefix(bytes))
    }

    /// The digest a finished hasher holds.
    pub fn from_hasher(hasher: Sha256) -> Digest {
        let sum = hasher.finalize();
        let mut text = String::with_capacity(71);
        text.push_str("sha256:");
        for b in sum.iter() {
            text.push_str(&format!("{b:02x}"));
        }
        Digest(text)
    }

    /// The 64 hex digits: a safe file name.
    pub fn hex(&self) -> &str {
        &self.0[7..]
    }

    /// Check that `bytes` (named `what` in the error) have this digest.
    pub fn verify(&self, what: &str, bytes: &[u8]) -> Result<(), OciError> {
        self.matches(what, &Digest::of(bytes))
    }

    /// Check that `actual`, the digest of `what`, is this one.
    pub fn matches(&self, what: &str, actual: &Digest) -> Result<(), OciError> {
        if actual == self {
            Ok(())
        } else {
            Err(OciError::Mismatch {
                what: what.to_string(),
                expected: self.clone(),
                actual: actual.clone(),
            })
        }
    }
}

impl TryFrom<String> for Digest {
    type Error = OciError;
    fn try_from(text: String) -> Result<Digest, OciError> {
        Digest::parse(&text)
    }
}

impl From<Digest> for String {
    fn from(d: Digest) -> String {
        d.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

pub const MEDIA_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const MEDIA_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const MEDIA_DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const MEDIA_DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";

/// A platform of an index entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Platform {
    #[serde(default)]
    pub architecture: String,
    #[serde(default)]
    pub os: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

/// A content descriptor: what a document points at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    #[serde(default)]
    pub media_type: String,
    pub digest: Digest,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<Platform>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// An image index (or a Docker manifest list): manifests, one per platform.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Index {
    #[serde(default)]
    pub media_type: Option<String>,
    pub manifests: Vec<Descriptor>,
}

/// An image manifest: a configuration and its layers, lowest first.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    #[serde(default)]
    pub media_type: Option<String>,
    pub config: Descriptor,
    pub layers: Vec<Descriptor>,
}

/// A document that is either an index or a manifest: which one, by its media type or, where
/// none is given, by its fields.
pub enum Document {
    Index(Index),
    Manifest(Manifest),
}

/// Parse an index or a manifest (`what` names it in errors).
pub fn document(what: &str, bytes: &[u8]) -> Result<Document, OciError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Probe {
        #[serde(default)]
        media_type: Option<String>,
        #[serde(default)]
        manifests: Option<serde_json::Value>,
    }
    let json = |source| OciError::Json {
        what: what.to_string(),
        source,
    };
    let probe: Probe = serde_json::from_slice(bytes).map_err(json)?;
    let is_index = match probe.media_type.as_deref() {
        Some(MEDIA_INDEX | MEDIA_DOCKER_LIST) => true,
        Some(_) => false,
        None => probe.manifests.is_some(),
    };
    if is_index {
        serde_json::from_slice(bytes)
            .map(Document::Index)
            .map_err(json)
    } else {
        serde_json::from_slice(bytes)
            .map(Document::Manifest)
            .map_err(json)
    }
}

/// The runtime part of an image configuration that envcraft honours.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunConfig {
    #[serde(rename = "Env", default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<String>>,
    #[serde(
        rename = "WorkingDir",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub working_dir: Option<String>,
    #[serde(rename = "User", default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(
        rename = "Entrypoint",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub entrypoint: Option<Vec<String>>,
    #[serde(rename = "Cmd", default, skip_serializing_if = "Option::is_none")]
    pub cmd: Option<Vec<String>>,
}

/// The layers of an image by their uncompressed digests.
#[derive(Debug, Clone, Deserialize)]
pub struct RootFs {
    #[serde(default)]
    pub diff_ids: Vec<Digest>,
}

/// An image configuration (OCI, or Docker's, which has the same fields).
#[derive(Debug, Clone, Deserialize)]
pub struct ImageConfig {
    #[serde(default)]
    pub architecture: String,
    #[serde(default)]
    pub os: String,
    #[serde(default)]
    pub config: Option<RunConfig>,
    pub rootfs: RootFs,
}

impl ImageConfig {
    pub fn parse(what: &str, bytes: &[u8]) -> Result<ImageConfig, OciError> {
        serde_json::from_slice(bytes).map_err(|source| OciError::Json {
            what: what.to_string(),
            source,
        })
    }
}

/// One image of a docker-archive's `manifest.json`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct ArchiveEntry {
    pub config: String,
    #[serde(default)]
    pub repo_tags: Option<Vec<String>>,
    pub layers: Vec<String>,
}

pub fn archive_manifest(what: &str, bytes: &[u8]) -> Result<Vec<ArchiveEntry>, OciError> {
    serde_json::from_slice(bytes).map_err(|source| OciError::Json {
        what: what.to_string(),
        source,
    })
}

/// The platform this machine runs, in OCI's words.
pub fn host_platform() -> Platform {
    let architecture = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    };
    Platform {
        architecture: architecture.to_string(),
        os: "linux".to_string(),
        variant: None,
    }
}

/// The entry of `index` for `platform`: the only one, else the one whose os and architecture
/// match (attestation manifests, whose platform is `unknown`, never match).
pub fn select<'a>(index: &'a Index, platform: &Platform) -> Option<&'a Descriptor> {
    let manifests: Vec<&Descriptor> = index
        .manifests
        .iter()
        .filter(|d| {
            d.annotations
                .get("vnd.docker.reference.type")
                .is_none_or(|t| t != "attestation-manifest")
        })
        .collect();
    if let [only] = manifests.as_slice() {
        return Some(only);
    }
    let fits: Vec<&Descriptor> = manifests
        .into_iter()
        .filter(|d| {
            d.platform
                .as_ref()
                .is_some_and(|p| p.os == platform.os && p.architecture == platform.architecture)
        })
        .collect();
    // A variant asked for (`linux/arm/v7`) picks its own entry where the index has one.
    let variant = platform.variant.as_deref();
    fits.iter()
        .find(|d| {
            variant.is_some() && d.platform.as_ref().and_then(|p| p.variant.as_deref()) == variant
        })
        .or(fits.first())
        .copied()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_digest_is_sha256_and_64_lowercase_hex_only() {
        let good = format!("sha256:{}", "a".repeat(64));
        assert!(Digest::parse(&good).is_ok());
        for bad in [
            "sha256:abc".to_string(),
            format!("sha512:{}", "a".repeat(64)),
            format!("sha256:{}", "A".repeat(64)),
            format!("sha256:../{}", "a".repeat(61)),
        ] {
            assert!(Digest::parse(&bad).is_err(), "{bad}");
        }
        let d = Digest::of(b"");
        assert_eq!(
            d.hex(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert!(d.verify("empty", b"x").is_err());
    }

    #[test]
    fn an_index_selects_the_hosts_platform_and_skips_attestations() {
        let doc = format!(
            r#"{{"manifests":[
            {{"mediaType":"{MEDIA_MANIFEST}","digest":"sha256:{a}","size":1,"platform":{{"os":"linux","architecture":"arm64"}}}},
            {{"mediaType":"{MEDIA_MANIFEST}","digest":"sha256:{b}","size":1,"platform":{{"os":"linux","architecture":"amd64"}}}},
            {{"mediaType":"{MEDIA_MANIFEST}","digest":"sha256:{c}","size":1,"platform":{{"os":"unknown","architecture":"unknown"}},"annotations":{{"vnd.docker.reference.type":"attestation-manifest"}}}}]}}"#,
            a = "a".repeat(64),
            b = "b".repeat(64),
            c = "c".repeat(64)
        );
        let Document::Index(index) = document("index", doc.as_bytes()).unwrap() else {
            panic!("not an index")
        };
        let amd = Platform {
            architecture: "amd64".into(),
            os: "linux".into(),
            variant: None,
        };
        assert_eq!(select(&index, &amd).unwrap().digest.hex(), "b".repeat(64));
        let riscv = Platform {
            architecture: "riscv64".into(),
            ..amd
        };
        assert!(select(&index, &riscv).is_none());
    }

    #[test]
    fn a_variant_asked_for_picks_its_own_entry_else_the_first_of_the_architecture() {
        let doc = format!(
            r#"{{"manifests":[
            {{"mediaType":"{MEDIA_MANIFEST}","digest":"sha256:{a}","size":1,"platform":{{"os":"linux","architecture":"arm","variant":"v6"}}}},
            {{"mediaType":"{MEDIA_MANIFEST}","digest":"sha256:{b}","size":1,"platform":{{"os":"linux","architecture":"arm","variant":"v7"}}}}]}}"#,
            a = "a".repeat(64),
            b = "b".repeat(64)
        );
        let Document::Index(index) = document("index", doc.as_bytes()).unwrap() else {
            panic!("not an index")
        };
        let arm = |variant: Option<&str>| Platform {
            architecture: "arm".into(),
            os: "linux".into(),
            variant: variant.map(str::to_string),
        };
        assert_eq!(
            select(&index, &arm(Some("v7"))).unwrap().digest.hex(),
            "b".repeat(64)
        );
        assert_eq!(
            select(&index, &arm(None)).unwrap().digest.hex(),
            "a".repeat(64)
        );
        assert_eq!(
            select(&index, &arm(Some("v8"))).unwrap().digest.hex(),
            "a".repeat(64)
        );
    }
}
