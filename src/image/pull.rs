//! `envcraft image pull`: an image from an OCI distribution registry into the store.
//!
//! The index (or manifest list) gives this machine's manifest ([`oci::select`], or the
//! `--platform` asked for); the config and every layer are checked against their digests;
//! layers are downloaded into the store's download area (`images/downloads/HEX`, resumed with a
//! `Range` request when a pull stopped part way) and then unpacked by the store exactly as an
//! import unpacks them, so a pulled image has the id an import of the same image has.
//!
//! Promises: nothing is added to `layers/` or `names/` before it is whole and checked; what was
//! downloaded of a blob when a pull stopped stays in `downloads/` for the next pull (or `gc`).

use std::fs::File;
use std::io;
use std::time::Duration;

use oci_client::Reference;

use super::layer::Limits;
use super::oci::{self, Digest, Document, ImageConfig, OciError, Platform};
use super::registry::{Connection, Registry, RegistryError, Tee, parse_reference};
use super::store::{ImageRecord, Store, StoreError, check_name};
use super::unpack::LayerSource;

#[derive(Debug, thiserror::Error)]
pub enum PullError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Oci(#[from] OciError),
    #[error(transparent)]
    Credentials(#[from] super::credentials::CredentialsError),
    #[error("{reference} has no manifest for {platform} (it has: {offered})")]
    Platform {
        reference: String,
        platform: String,
        offered: String,
    },
    #[error("{reference}: {what}")]
    Image { reference: String, what: String },
    #[error(
        "layer {layer} of {reference} stopped arriving after {have} of {size} bytes ({attempts} attempts); what arrived is kept and the next pull resumes from it"
    )]
    Interrupted {
        reference: String,
        layer: Digest,
        have: u64,
        size: u64,
        attempts: u32,
        #[source]
        source: Box<RegistryError>,
    },
    #[error("--platform takes OS/ARCH or OS/ARCH/VARIANT (e.g. linux/amd64), not {given:?}")]
    PlatformFlag { given: String },
    #[error("cannot start the pull's network thread")]
    Thread(#[source] io::Error),
}

/// What a pull is asked to do.
#[derive(Debug, Clone)]
pub struct PullOptions {
    /// The name to give the image (default: the reference as given).
    pub name: Option<String>,
    /// The platform to pick from an index (default: this machine's).
    pub platform: Option<Platform>,
    pub connection: Connection,
    pub limits: Limits,
}

impl PullOptions {
    /// Defaults: this machine's platform, https (plain http for loopback registries), a
    /// minute's wait for any answer.
    pub fn new(credentials: Option<super::credentials::Credentials>) -> PullOptions {
        PullOptions {
            name: None,
            platform: None,
            connection: Connection {
                credentials,
                tls_verify: true,
                timeout: DEFAULT_TIMEOUT,
            },
            limits: Limits::default(),
        }
    }
}

/// How long any one answer of a registry is waited for, by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The largest document (index, manifest, config) read.
const MAX_DOCUMENT: u64 = 16 << 20;

/// How many times one blob is asked for in one pull (each resuming the last).
const ATTEMPTS: u32 = 4;

/// What a pull made.
#[derive(Debug, Clone)]
pub struct Pulled {
    pub record: ImageRecord,
    /// The reference pinned by the digest of what it pointed at (an index or a manifest):
    /// what `env.toml` names to pull this image on first use.
    pub pinned: String,
    /// Bytes of blobs downloaded now, and of those resumed from an earlier pull.
    pub downloaded: u64,
    pub resumed: u64,
}

/// Parse `--platform OS/ARCH[/VARIANT]`.
pub fn parse_platform(text: &str) -> Result<Platform, PullError> {
    let parts: Vec<&str> = text.split('/').collect();
    let ok = |s: &&str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric());
    match parts.as_slice() {
        [os, arch] if ok(os) && ok(arch) => Ok(Platform {
            os: os.to_string(),
            architecture: arch.to_string(),
            variant: None,
        }),
        [os, arch, variant] if ok(os) && ok(arch) && ok(variant) => Ok(Platform {
            os: os.to_string(),
            architecture: arch.to_string(),
            variant: Some(variant.to_string()),
        }),
        _ => Err(PullError::PlatformFlag {
            given: text.to_string(),
        }),
    }
}

/// Pull `reference` into `store`. Blocking: the network is spoken on a thread of its own (so
/// this may be called from inside an async runtime as well as from the command line).
pub fn pull(store: &Store, reference: &str, options: &PullOptions) -> Result<Pulled, PullError> {
    let name = options
        .name
        .clone()
        .unwrap_or_else(|| reference.to_string());
    check_name(&name)?;
    let parsed = parse_reference(reference)?;
    let _held = store.import_lock()?;
    std::thread::scope(|scope| {
        let worker = std::thread::Builder::new()
            .name("envcraft-pull".into())
            .spawn_scoped(scope, || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(PullError::Thread)?;
                runtime.block_on(pull_in(store, reference, &parsed, name, options))
            })
            .map_err(PullError::Thread)?;
        worker.join().unwrap_or_else(|_| {
            Err(PullError::Thread(io::Error::other(
                "the pull's network thread panicked",
            )))
        })
    })
}

async fn pull_in(
    store: &Store,
    text: &str,
    reference: &Reference,
    name: String,
    options: &PullOptions,
) -> Result<Pulled, PullError> {
    let registry = Registry::new(reference, &options.connection);
    registry.authenticate().await?;
    let platform = options.platform.clone().unwrap_or_else(oci::host_platform);
    let (bytes, top) = registry.manifest(reference, MAX_DOCUMENT).await?;
    let pinned = Reference::with_digest(
        reference.registry().to_string(),
        reference.repository().to_string(),
        top.to_string(),
    )
    .whole();
    let mut doc = oci::document(&format!("manifest {top}"), &bytes)?;
    let mut manifest_digest = top;
    for _ in 0..4 {
        match doc {
            Document::Manifest(manifest) => {
                let mut pulled = image(store, &registry, text, manifest, options).await?;
                pulled.record.name = name;
                pulled.record.manifest = Some(manifest_digest);
                store.save(&pulled.record)?;
                pulled.pinned = pinned;
                return Ok(pulled);
            }
            Document::Index(index) => {
                let chosen = oci::select(&index, &platform).ok_or_else(|| PullError::Platform {
                    reference: text.to_string(),
                    platform: format!("{}/{}", platform.os, platform.architecture),
                    offered: offered(&index),
                })?;
                let at = reference.clone_with_digest(chosen.digest.to_string());
                let (bytes, digest) = registry.manifest(&at, MAX_DOCUMENT).await?;
                doc = oci::document(&format!("manifest {digest}"), &bytes)?;
                manifest_digest = digest;
            }
        }
    }
    Err(PullError::Image {
        reference: text.to_string(),
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

/// The config and layers of one manifest, into the store (the record is not saved here).
async fn image(
    store: &Store,
    registry: &Registry,
    text: &str,
    manifest: oci::Manifest,
    options: &PullOptions,
) -> Result<Pulled, PullError> {
    let bad = |what: String| PullError::Image {
        reference: text.to_string(),
        what,
    };
    let config_bytes = registry
        .blob_bytes(&manifest.config.digest, MAX_DOCUMENT)
        .await?;
    let config = ImageConfig::parse("the image config", &config_bytes)?;
    if manifest.layers.is_empty() {
        return Err(bad(
            "the image has no layers: there is no root filesystem to run over".into(),
        ));
    }
    if config.rootfs.diff_ids.len() != manifest.layers.len() {
        return Err(bad(format!(
            "the manifest lists {} layers but the config's rootfs {}",
            manifest.layers.len(),
            config.rootfs.diff_ids.len()
        )));
    }
    let mut pulled = Pulled {
        record: ImageRecord {
            name: String::new(),
            id: manifest.config.digest.clone(),
            manifest: None,
            layers: config.rootfs.diff_ids.clone(),
            config: config.config.clone().unwrap_or_default(),
            platform: format!("{}/{}", config.os, config.architecture),
            source: text.to_string(),
            bytes: 0,
        },
        pinned: String::new(),
        downloaded: 0,
        resumed: 0,
    };
    for (layer, diff_id) in manifest.layers.iter().zip(&config.rootfs.diff_ids) {
        if let Some(u) = store.layer(diff_id) {
            pulled.record.bytes += u.tar_bytes;
            continue;
        }
        let (path, _downloading) = store.download(&layer.digest)?;
        // Another pull may have unpacked it while this one waited for the download's lock.
        if let Some(u) = store.layer(diff_id) {
            pulled.record.bytes += u.tar_bytes;
            continue;
        }
        // The unpacker takes the bytes as they arrive (a pipe), while they are also kept in
        // the download file for a later pull to resume from.
        let (read_end, write_end) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| PullError::Thread(e.into()))?;
        let _ = nix::fcntl::fcntl(&write_end, nix::fcntl::FcntlArg::F_SETPIPE_SZ(1 << 20));
        let unpacker = {
            let (store, diff_id, digest) = (store.clone(), diff_id.clone(), layer.digest.clone());
            let limits = options.limits;
            tokio::task::spawn_blocking(move || {
                store.ensure_layer(
                    &diff_id,
                    Some(&digest),
                    move || {
                        Ok(LayerSource {
                            file: File::from(read_end),
                            offset: 0,
                            len: None,
                        })
                    },
                    limits,
                )
            })
        };
        let mut tee = Tee {
            pipe: Some(File::from(write_end)),
            fed: 0,
        };
        let downloaded = download(registry, text, layer, &path, &mut tee).await;
        drop(tee);
        let unpacked = unpacker
            .await
            .map_err(|_| PullError::Thread(io::Error::other("the unpacking thread panicked")))?;
        match (unpacked, downloaded) {
            (Ok(u), downloaded) => {
                // Whole and checked: the download is done with.
                let _ = std::fs::remove_file(&path);
                if let Ok(had) = downloaded {
                    pulled.resumed += had;
                    pulled.downloaded += layer.size - had;
                }
                pulled.record.bytes += u.tar_bytes;
            }
            // The download stopped (the unpacker saw its input end early, and kept nothing):
            // what arrived stays for the next pull.
            (Err(_), Err(e))
                if !matches!(e, PullError::Registry(RegistryError::Handover { .. })) =>
            {
                return Err(e);
            }
            (Err(e), _) => {
                // Refused (not the blob it should be, or a layer that is not unpacked): the
                // download is done with. A store that could not be written (a full disk, a
                // lock held) keeps it for the next pull.
                if !matches!(e, StoreError::Io { .. } | StoreError::Busy { .. }) {
                    let _ = std::fs::remove_file(&path);
                }
                return Err(e.into());
            }
        }
    }
    Ok(pulled)
}

/// Download one layer into `path` (and `tee`), resuming, asking again while each answer brings
/// bytes. Returns how many bytes an earlier pull had left.
async fn download(
    registry: &Registry,
    text: &str,
    layer: &oci::Descriptor,
    path: &std::path::Path,
    tee: &mut Tee,
) -> Result<u64, PullError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let before = std::fs::metadata(path).map_or(0, |m| m.len());
        match registry
            .blob_to_file(&layer.digest, layer.size, path, tee)
            .await
        {
            Ok(had) => return Ok(had),
            Err(e @ (RegistryError::Protocol { .. } | RegistryError::Timeout { .. })) => {
                let have = std::fs::metadata(path).map_or(0, |m| m.len());
                if attempt >= ATTEMPTS || have <= before {
                    return Err(PullError::Interrupted {
                        reference: text.to_string(),
                        layer: layer.digest.clone(),
                        have,
                        size: layer.size,
                        attempts: attempt,
                        source: Box::new(e),
                    });
                }
                tracing::debug!(layer = %layer.digest, have, "blob download stopped; resuming");
            }
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_platform_flag_is_os_arch_and_an_optional_variant() {
        let p = parse_platform("linux/arm/v7").unwrap();
        assert_eq!((p.os.as_str(), p.architecture.as_str()), ("linux", "arm"));
        assert_eq!(p.variant.as_deref(), Some("v7"));
        assert!(parse_platform("linux/amd64").unwrap().variant.is_none());
        for bad in [
            "linux",
            "linux/",
            "/amd64",
            "linux/amd64/v1/x",
            "linux/am d64",
        ] {
            assert!(parse_platform(bad).is_err(), "{bad}");
        }
    }
}
