//! Importing an image from where users keep one: an OCI image layout (a directory, or a tar
//! of one, as `skopeo copy ... oci-archive:` writes) or a docker-archive (`docker save`,
//! `podman save`, `skopeo copy ... docker-archive:`), as a file or unpacked in a directory.
//!
//! Every document is checked against its digest before it is parsed; every layer against its
//! digest (where the format gives one) and its diff id (always), by the store.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read, Seek};
use std::path::{Path, PathBuf};

use super::layer::Limits;
use super::oci::{self, Digest, Document, ImageConfig, OciError};
use super::store::{ImageRecord, Store, StoreError, check_name};
use super::unpack::LayerSource;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{path} is neither an OCI image layout (oci-layout and index.json) nor a docker-archive (manifest.json)"
    )]
    Format { path: PathBuf },
    #[error("{path} has no {member}")]
    Missing { path: PathBuf, member: String },
    #[error("{what} is {size} bytes; at most {max} are read")]
    TooBig { what: String, size: u64, max: u64 },
    #[error("{path}: {what}")]
    Image { path: PathBuf, what: String },
    #[error("{path} has no manifest for {platform} (it has: {offered})")]
    Platform {
        path: PathBuf,
        platform: String,
        offered: String,
    },
    #[error(transparent)]
    Oci(#[from] OciError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The largest document (index, manifest, config) read.
const MAX_DOCUMENT: u64 = 16 << 20;

/// An image's files: a directory, or the members of a tar file.
enum Source {
    Dir(PathBuf),
    Tar {
        path: PathBuf,
        members: HashMap<String, (u64, u64)>,
    },
}

fn clean(name: &str) -> String {
    name.trim_start_matches("./")
        .trim_start_matches('/')
        .to_string()
}

impl Source {
    fn open(path: &Path) -> Result<Source, ImportError> {
        let read = |source| ImportError::Read {
            path: path.to_path_buf(),
            source,
        };
        if path.is_dir() {
            return Ok(Source::Dir(path.to_path_buf()));
        }
        let file = File::open(path).map_err(read)?;
        let mut archive = tar::Archive::new(io::BufReader::new(file));
        let mut members = HashMap::new();
        let not_an_image = |_| ImportError::Format {
            path: path.to_path_buf(),
        };
        for entry in archive.entries().map_err(read)? {
            let entry = entry.map_err(not_an_image)?;
            if entry.header().entry_type().is_file() {
                let name = clean(&String::from_utf8_lossy(&entry.path_bytes()));
                members.insert(name, (entry.raw_file_position(), entry.size()));
            }
        }
        Ok(Source::Tar {
            path: path.to_path_buf(),
            members,
        })
    }

    fn path(&self) -> &Path {
        match self {
            Source::Dir(p) | Source::Tar { path: p, .. } => p,
        }
    }

    fn has(&self, member: &str) -> bool {
        match self {
            Source::Dir(p) => p.join(member).is_file(),
            Source::Tar { members, .. } => members.contains_key(member),
        }
    }

    fn missing(&self, member: &str) -> ImportError {
        ImportError::Missing {
            path: self.path().to_path_buf(),
            member: member.to_string(),
        }
    }

    /// A member's file, offset and length.
    fn layer(&self, member: &str) -> Result<LayerSource, ImportError> {
        let member = clean(member);
        if member.split('/').any(|c| c == "..") {
            return Err(self.missing(&member));
        }
        let read = |source| ImportError::Read {
            path: self.path().join(&member),
            source,
        };
        match self {
            Source::Dir(p) => {
                let file = File::open(p.join(&member)).map_err(|e| {
                    if e.kind() == io::ErrorKind::NotFound {
                        self.missing(&member)
                    } else {
                        read(e)
                    }
                })?;
                Ok(LayerSource {
                    file,
                    offset: 0,
                    len: None,
                })
            }
            Source::Tar { path, members } => {
                let (offset, len) = *members.get(&member).ok_or_else(|| self.missing(&member))?;
                let file = File::open(path).map_err(read)?;
                Ok(LayerSource {
                    file,
                    offset,
                    len: Some(len),
                })
            }
        }
    }

    /// A small member, whole.
    fn read(&self, member: &str) -> Result<Vec<u8>, ImportError> {
        let LayerSource {
            mut file,
            offset,
            len,
        } = self.layer(member)?;
        let read = |source| ImportError::Read {
            path: self.path().join(member),
            source,
        };
        file.seek(io::SeekFrom::Start(offset)).map_err(read)?;
        let size = match len {
            Some(l) => l,
            None => file.metadata().map_err(read)?.len(),
        };
        if size > MAX_DOCUMENT {
            return Err(ImportError::TooBig {
                what: member.to_string(),
                size,
                max: MAX_DOCUMENT,
            });
        }
        let mut bytes = Vec::new();
        file.take(size).read_to_end(&mut bytes).map_err(read)?;
        Ok(bytes)
    }

    fn blob(&self, digest: &Digest) -> Result<Vec<u8>, ImportError> {
        let member = format!("blobs/sha256/{}", digest.hex());
        let bytes = self.read(&member)?;
        digest.verify(&member, &bytes)?;
        Ok(bytes)
    }
}

/// What an import made.
#[derive(Debug, Clone)]
pub struct Imported {
    pub record: ImageRecord,
}

/// Import the image at `path` into `store`, named `name` (else the name the image carries,
/// else the file's name).
pub fn import(
    store: &Store,
    path: &Path,
    name: Option<&str>,
    limits: Limits,
) -> Result<Imported, ImportError> {
    if let Some(n) = name {
        check_name(n)?;
    }
    let source = Source::open(path)?;
    let _held = store.import_lock()?;
    let record = if source.has("index.json") {
        oci_layout(store, &source, name, limits)?
    } else if source.has("manifest.json") {
        docker_archive(store, &source, name, limits)?
    } else {
        return Err(ImportError::Format {
            path: path.to_path_buf(),
        });
    };
    store.save(&record)?;
    Ok(Imported { record })
}

/// Import a root filesystem's tar (plain, gzip or zstd; `mmdebstrap ... rootfs.tar` writes
/// one) as a one-layer image for this machine's platform, named `name` (else the file's
/// name). Its config is envcraft's: a Debian-style `PATH` in `Env`, nothing else.
pub fn import_rootfs(
    store: &Store,
    path: &Path,
    name: Option<&str>,
    limits: Limits,
) -> Result<Imported, ImportError> {
    if let Some(n) = name {
        check_name(n)?;
    }
    let read = |source| ImportError::Read {
        path: path.to_path_buf(),
        source,
    };
    if !path.is_file() {
        return Err(read(io::Error::new(
            io::ErrorKind::InvalidInput,
            "--rootfs takes a tar file (plain, gzip or zstd) of a root filesystem",
        )));
    }
    let _held = store.import_lock()?;
    let unpacked = store.add_layer(
        path,
        || {
            File::open(path).map(|file| LayerSource {
                file,
                offset: 0,
                len: None,
            })
        },
        limits,
    )?;
    let platform = oci::host_platform();
    let config = serde_json::json!({
        "architecture": platform.architecture,
        "os": platform.os,
        "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [unpacked.diff_id]},
    });
    let bytes = serde_json::to_vec(&config).unwrap_or_default();
    let parsed = ImageConfig::parse("the generated config", &bytes)?;
    let source = Source::Dir(path.to_path_buf());
    let name = name
        .map(str::to_string)
        .unwrap_or_else(|| default_name(&source));
    let record = record(
        &source,
        name,
        Digest::of(&bytes),
        None,
        &parsed,
        unpacked.tar_bytes,
    );
    store.save(&record)?;
    Ok(Imported { record })
}

fn default_name(source: &Source) -> String {
    let stem = source
        .path()
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = stem
        .trim_end_matches(".gz")
        .trim_end_matches(".zst")
        .trim_end_matches(".tar")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect::<String>();
    let stem = stem.trim_start_matches(['.', '-', '_']).to_string();
    if stem.is_empty() {
        "image".into()
    } else {
        stem
    }
}

fn oci_layout(
    store: &Store,
    source: &Source,
    name: Option<&str>,
    limits: Limits,
) -> Result<ImageRecord, ImportError> {
    let index_bytes = source.read("index.json")?;
    let platform = oci::host_platform();
    let mut doc = oci::document("index.json", &index_bytes)?;
    let mut ref_name = None;
    let mut manifest_digest = None;
    for _ in 0..4 {
        match doc {
            Document::Manifest(m) => {
                let manifest_digest = manifest_digest.ok_or_else(|| ImportError::Image {
                    path: source.path().to_path_buf(),
                    what: "index.json is a manifest, not an index".into(),
                })?;
                let name = name
                    .map(str::to_string)
                    .or(ref_name)
                    .unwrap_or_else(|| default_name(source));
                return image(store, source, name, Some(manifest_digest), m, limits);
            }
            Document::Index(index) => {
                let chosen =
                    oci::select(&index, &platform).ok_or_else(|| ImportError::Platform {
                        path: source.path().to_path_buf(),
                        platform: format!("{}/{}", platform.os, platform.architecture),
                        offered: offered(&index),
                    })?;
                if ref_name.is_none() {
                    ref_name = chosen
                        .annotations
                        .get("org.opencontainers.image.ref.name")
                        .filter(|n| check_name(n).is_ok())
                        .cloned();
                }
                let bytes = source.blob(&chosen.digest)?;
                manifest_digest = Some(chosen.digest.clone());
                doc = oci::document(&format!("manifest {}", chosen.digest), &bytes)?;
            }
        }
    }
    Err(ImportError::Image {
        path: source.path().to_path_buf(),
        what: "indexes nest more than 4 deep".into(),
    })
}

fn offered(index: &oci::Index) -> String {
    let list: Vec<String> = index
        .manifests
        .iter()
        .filter_map(|d| d.platform.as_ref())
        .map(|p| format!("{}/{}", p.os, p.architecture))
        .collect();
    if list.is_empty() {
        "no platforms named".into()
    } else {
        list.join(", ")
    }
}

fn image(
    store: &Store,
    source: &Source,
    name: String,
    manifest_digest: Option<Digest>,
    manifest: oci::Manifest,
    limits: Limits,
) -> Result<ImageRecord, ImportError> {
    let config_bytes = source.blob(&manifest.config.digest)?;
    let config = ImageConfig::parse("the image config", &config_bytes)?;
    if manifest.layers.is_empty() {
        return Err(ImportError::Image {
            path: source.path().to_path_buf(),
            what: "the image has no layers: there is no root filesystem to run over".into(),
        });
    }
    if config.rootfs.diff_ids.len() != manifest.layers.len() {
        return Err(ImportError::Image {
            path: source.path().to_path_buf(),
            what: format!(
                "the manifest lists {} layers but the config's rootfs {}",
                manifest.layers.len(),
                config.rootfs.diff_ids.len()
            ),
        });
    }
    let mut bytes = 0;
    for (layer, diff_id) in manifest.layers.iter().zip(&config.rootfs.diff_ids) {
        let member = format!("blobs/sha256/{}", layer.digest.hex());
        let u = store.ensure_layer(
            diff_id,
            Some(&layer.digest),
            || {
                source
                    .layer(&member)
                    .map_err(|e| io::Error::other(e.to_string()))
            },
            limits,
        )?;
        bytes += u.tar_bytes;
    }
    Ok(record(
        source,
        name,
        manifest.config.digest,
        manifest_digest,
        &config,
        bytes,
    ))
}

fn record(
    source: &Source,
    name: String,
    id: Digest,
    manifest: Option<Digest>,
    config: &ImageConfig,
    bytes: u64,
) -> ImageRecord {
    ImageRecord {
        name,
        id,
        manifest,
        layers: config.rootfs.diff_ids.clone(),
        config: config.config.clone().unwrap_or_default(),
        platform: format!("{}/{}", config.os, config.architecture),
        source: source.path().display().to_string(),
        bytes,
    }
}

fn docker_archive(
    store: &Store,
    source: &Source,
    name: Option<&str>,
    limits: Limits,
) -> Result<ImageRecord, ImportError> {
    let entries = oci::archive_manifest("manifest.json", &source.read("manifest.json")?)?;
    let [entry] = entries.as_slice() else {
        return Err(ImportError::Image {
            path: source.path().to_path_buf(),
            what: format!(
                "manifest.json lists {} images; exactly one is imported at a time",
                entries.len()
            ),
        });
    };
    let config_bytes = source.read(&entry.config)?;
    let id = Digest::of(&config_bytes);
    // The config's file is named by its digest (`HEX.json`, or `blobs/sha256/HEX`).
    let stem = entry
        .config
        .rsplit('/')
        .next()
        .unwrap_or("")
        .trim_end_matches(".json");
    if let Ok(named) = Digest::parse(&format!("sha256:{stem}")) {
        named.matches(&entry.config, &id)?;
    }
    let config = ImageConfig::parse(&entry.config, &config_bytes)?;
    if entry.layers.is_empty() {
        return Err(ImportError::Image {
            path: source.path().to_path_buf(),
            what: "the image has no layers: there is no root filesystem to run over".into(),
        });
    }
    if config.rootfs.diff_ids.len() != entry.layers.len() {
        return Err(ImportError::Image {
            path: source.path().to_path_buf(),
            what: format!(
                "manifest.json lists {} layers but the config's rootfs {}",
                entry.layers.len(),
                config.rootfs.diff_ids.len()
            ),
        });
    }
    let mut bytes = 0;
    for (member, diff_id) in entry.layers.iter().zip(&config.rootfs.diff_ids) {
        let u = store.ensure_layer(
            diff_id,
            None,
            || {
                source
                    .layer(member)
                    .map_err(|e| io::Error::other(e.to_string()))
            },
            limits,
        )?;
        bytes += u.tar_bytes;
    }
    let name = name
        .map(str::to_string)
        .or_else(|| {
            entry
                .repo_tags
                .as_ref()
                .and_then(|t| t.first())
                .filter(|n| check_name(n).is_ok())
                .cloned()
        })
        .unwrap_or_else(|| default_name(source));
    Ok(record(source, name, id, None, &config, bytes))
}
