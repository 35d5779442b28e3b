//! A Harbor task's image brought into envcraft's store before its session starts: task.toml's
//! `docker_image`, or the `FROM` of a Dockerfile without builder steps, pulled from its
//! registry (the environment then names it pinned by the digest pulled), or a Dockerfile with
//! builder steps built by an installed builder (Podman,
//! Buildah) under a name holding a hash of `environment/`, so that an unchanged environment
//! is built once. A built image's working directory becomes the workspace's files (the
//! workspace is mounted there and would hide it).

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use super::super::source::SourceRoot;
use super::super::{ImportError, ImportedTask};
use crate::image::{Store, StoreError};

/// How a task's image gets into the store when the store lacks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Provision {
    /// An image pulled from its registry: task.toml's `docker_image`, or the `FROM` of a
    /// Dockerfile that runs without a builder (`what` says which, for people).
    Pull {
        reference: String,
        what: &'static str,
    },
    /// `environment/` (absolute) built by an installed builder; its image's files at the
    /// working directory `workdir` become the workspace's.
    Build { context: PathBuf, workdir: String },
}

/// Why a task's image could not be brought in.
#[derive(Debug, thiserror::Error)]
pub enum ProvideError {
    #[error(
        "task {task}: its {what} `{reference}` is not in envcraft's image store and could not be pulled (import it under that name, `envcraft image import FILE --name {reference}`, or pass `--base host` to run it over the host's read-only system paths instead)"
    )]
    Pull {
        task: String,
        what: &'static str,
        reference: String,
        #[source]
        source: Box<StoreError>,
    },
    #[error("task {task}: its environment/Dockerfile could not be built")]
    Build {
        task: String,
        #[source]
        source: Box<crate::image::BuildError>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Import(#[from] ImportError),
}

/// The name of the image built from a task's `environment/`: `harbor-ID:` and the first 16
/// hex digits of a hash over its files (paths, modes and bytes), so that a changed
/// environment is built again.
pub(super) fn build_name(
    root: &SourceRoot,
    task: &str,
    env_dir: &Path,
) -> Result<String, ImportError> {
    let mut found = Vec::new();
    root.walk_files(task, env_dir, Path::new(""), &mut found)?;
    found.sort_by(|a, b| a.0.cmp(&b.0));
    let mut hash = Sha256::new();
    for (rel, file) in &found {
        let (mut f, st) = root.open_file(task, &file.rel)?;
        hash.update(rel.as_os_str().as_encoded_bytes());
        hash.update([0]);
        hash.update((st.st_mode & 0o777).to_le_bytes());
        hash.update(st.st_size.to_le_bytes());
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = f.read(&mut buf).map_err(|source| ImportError::Read {
                path: root.display(&file.rel),
                source,
            })?;
            if n == 0 {
                break;
            }
            hash.update(&buf[..n]);
        }
    }
    let hex: String = hash
        .finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect();
    Ok(format!("harbor-{task}:{hex}"))
}

/// Bring the image of `imported` into the store under `state_root` when the store lacks it,
/// rewriting its environment where the image's name or files change. Returns what was done,
/// for people; nothing when the task has nothing to provide or the store holds the image.
pub fn provide(
    imported: &mut ImportedTask,
    state_root: &Path,
) -> Result<Vec<String>, ProvideError> {
    let (Some(image), Some(provision)) = (imported.image.clone(), imported.provision.clone())
    else {
        return Ok(Vec::new());
    };
    let store = Store::open(state_root)?;
    let env_dir = imported
        .task_dir
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    // Two first uses at once (a suite's children, two runs) bring the image in once.
    let _first_use = store.name_lock(&image)?;
    let held = store.record(&image);
    let mut said = Vec::new();
    match provision {
        Provision::Pull { reference, what } => {
            if held.is_ok() {
                return Ok(said);
            }
            let pulled = store
                .pull_by_reference(&reference)
                .map_err(|e| ProvideError::Pull {
                    task: imported.task.clone(),
                    what,
                    reference: reference.clone(),
                    source: Box::new(e),
                })?;
            let mut pinned = pulled.record.clone();
            pinned.name = pulled.pinned.clone();
            store.save(&pinned)?;
            rename_image(&env_dir, &image, &pulled.pinned)?;
            said.push(format!(
                "{what} `{reference}` pulled into envcraft's image store; the environment names it pinned: {}",
                pulled.pinned
            ));
            imported.image = Some(pulled.pinned);
        }
        Provision::Build { context, workdir } => {
            let record = match held {
                Ok(record) => {
                    said.push(format!(
                        "environment/ is unchanged since it was built: the image `{image}` is used again"
                    ));
                    record
                }
                Err(_) => {
                    let options = crate::image::BuildOptions {
                        dockerfile: None,
                        name: image.clone(),
                        builder: None,
                        isolation: None,
                        limits: crate::image::Limits::default(),
                    };
                    let built = crate::image::build(&store, &context, &options).map_err(|e| {
                        ProvideError::Build {
                            task: imported.task.clone(),
                            source: Box::new(e),
                        }
                    })?;
                    said.extend(built.handed_over.iter().cloned());
                    said.push(format!(
                        "environment/Dockerfile built by {} into the image `{image}`",
                        built.builder.program()
                    ));
                    built.record
                }
            };
            let tree = store.files_under(&record, &workdir);
            let files = env_dir.join("files");
            if files.exists() {
                std::fs::remove_dir_all(&files).map_err(|source| ImportError::Write {
                    path: files.clone(),
                    source,
                })?;
            }
            // The environment's workspace directory, empty when the image has no files there.
            std::fs::create_dir_all(&files).map_err(|source| ImportError::Write {
                path: files.clone(),
                source,
            })?;
            for (rel, file) in &tree.files {
                let target = files.join(rel);
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent).map_err(|source| ImportError::Write {
                        path: parent.to_path_buf(),
                        source,
                    })?;
                }
                let source = super::super::source::SourceFile {
                    root: file.layer_root.clone(),
                    rel: file.path_in_layer.clone(),
                };
                source.copy_to(&imported.task, &target)?;
            }
            if !tree.files.is_empty() {
                said.push(format!(
                    "the image's {} file(s) at {workdir} are the workspace's files at start",
                    tree.files.len()
                ));
            }
            if !tree.left_out.is_empty() {
                let list: Vec<String> = tree
                    .left_out
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect();
                said.push(format!(
                    "left out of the workspace (links and special files of the image at {workdir}): {}",
                    list.join(", ")
                ));
            }
        }
    }
    imported.notes.extend(said.iter().cloned());
    Ok(said)
}

/// `env.toml`'s `image = "OLD"` made `image = "NEW"`.
fn rename_image(env_dir: &Path, old: &str, new: &str) -> Result<(), ImportError> {
    let path = env_dir.join("env.toml");
    let text = std::fs::read_to_string(&path).map_err(|source| ImportError::Read {
        path: path.clone(),
        source,
    })?;
    let line = |name: &str| format!("image = {}\n", super::super::toml_string(name));
    let text = text.replace(&line(old), &line(new));
    std::fs::write(&path, text).map_err(|source| ImportError::Write { path, source })
}
