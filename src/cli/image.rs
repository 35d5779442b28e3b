//! `envcraft image import|pull|build|ls|inspect|rm|gc`: the image store under the state root.

use std::io::Write;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::error::Error;
use super::task_args::StateDir;
use crate::image::{Credentials, Limits, PullOptions, Store, credentials};

#[derive(Debug, Subcommand)]
pub enum ImageCommand {
    /// Import an OCI image layout (a directory or a tar of one) or a docker-archive.
    Import(ImportArgs),
    /// Pull an image from an OCI distribution registry (Docker Hub, GHCR, a local one).
    Pull(PullArgs),
    /// Build a Dockerfile with an installed builder (Podman or Buildah) into the store.
    Build(BuildArgs),
    /// List the images in the store.
    Ls(LsArgs),
    /// Print an image's record (id, layers, config) as JSON.
    Inspect(NameArgs),
    /// Remove an image's name (its layers stay until `gc`).
    Rm(NameArgs),
    /// Remove every layer no image uses, what interrupted imports left, and killed builds'
    /// builder images (`localhost/envcraft-build-*`, past a grace period, never a build in
    /// progress).
    Gc(LsArgs),
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The image: an OCI layout directory, an OCI archive, or a docker-archive (file or directory).
    pub source: PathBuf,
    /// The name to give it (default: the name the image carries, else the file's name).
    #[arg(long)]
    pub name: Option<String>,
    /// SOURCE is a tar (plain, gzip or zstd) of a root filesystem (`mmdebstrap ... rootfs.tar`),
    /// imported as a one-layer image.
    #[arg(long)]
    pub rootfs: bool,
    /// Refuse a layer that expands to more than this many bytes.
    #[arg(long, value_name = "BYTES")]
    pub max_layer_bytes: Option<u64>,
    #[command(flatten)]
    pub state_dir: StateDir,
}

#[derive(Debug, Args)]
pub struct PullArgs {
    /// The image: [REGISTRY/]REPOSITORY[:TAG][@sha256:DIGEST] (Docker Hub's short names as Docker
    /// reads them: `debian:bookworm` is `docker.io/library/debian:bookworm`).
    pub reference: String,
    /// The name to give it (default: REFERENCE as given).
    #[arg(long)]
    pub name: Option<String>,
    /// The registry's credentials (else from the auth file). Prefer an auth file: a flag is
    /// seen by other users of this machine in the process list.
    #[arg(long, value_name = "USER:PASS")]
    pub creds: Option<String>,
    /// The Docker/Podman auth file to read credentials from (default: $REGISTRY_AUTH_FILE,
    /// $XDG_RUNTIME_DIR/containers/auth.json, ~/.docker/config.json, the first that exists).
    #[arg(long, value_name = "FILE")]
    pub authfile: Option<PathBuf>,
    /// The platform to pick from a multi-platform image (default: this machine's).
    #[arg(long, value_name = "OS/ARCH[/VARIANT]")]
    pub platform: Option<String>,
    /// `false`: speak plain http to the registry (registries on 127.0.0.1, ::1 and localhost
    /// always are).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub tls_verify: bool,
    /// Give up on a registry that does not answer for this long.
    #[arg(long, value_name = "SECS", default_value_t = crate::image::pull::DEFAULT_TIMEOUT.as_secs())]
    pub timeout: u64,
    /// Refuse a layer that expands to more than this many bytes.
    #[arg(long, value_name = "BYTES")]
    pub max_layer_bytes: Option<u64>,
    #[command(flatten)]
    pub state_dir: StateDir,
}

#[derive(Debug, Args)]
pub struct BuildArgs {
    /// The build context: the directory the Dockerfile's COPY steps read from.
    pub context: PathBuf,
    /// The Dockerfile (default: CONTEXT/Dockerfile).
    #[arg(long, short = 'f', value_name = "DOCKERFILE")]
    pub file: Option<PathBuf>,
    /// The name to give the image (default: the context directory's name).
    #[arg(long)]
    pub name: Option<String>,
    /// The builder that runs the steps (default: podman, else buildah, whichever is on PATH).
    #[arg(long, value_enum)]
    pub builder: Option<crate::image::Builder>,
    /// How the builder isolates the steps (default: oci with runc when runc is installed,
    /// else chroot).
    #[arg(long, value_enum)]
    pub isolation: Option<crate::image::Isolation>,
    /// Refuse a layer that expands to more than this many bytes.
    #[arg(long, value_name = "BYTES")]
    pub max_layer_bytes: Option<u64>,
    #[command(flatten)]
    pub state_dir: StateDir,
}

#[derive(Debug, Args)]
pub struct LsArgs {
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub state_dir: StateDir,
}

#[derive(Debug, Args)]
pub struct NameArgs {
    /// The image's name.
    pub name: String,
    #[command(flatten)]
    pub state_dir: StateDir,
}

fn store(state_dir: &StateDir) -> Result<Store, Error> {
    let root = crate::workspace::state_root::open(state_dir.path.clone())?;
    Ok(Store::open(&root)?)
}

fn print(text: &str) -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(Error::Output)
}

fn json(value: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default() + "\n"
}

pub fn run(command: ImageCommand) -> Result<i32, Error> {
    match command {
        ImageCommand::Import(args) => {
            let store = store(&args.state_dir)?;
            let mut limits = Limits::default();
            if let Some(max) = args.max_layer_bytes {
                limits.max_bytes = max;
            }
            let import = if args.rootfs {
                crate::image::import_rootfs
            } else {
                crate::image::import
            };
            let imported = import(&store, &args.source, args.name.as_deref(), limits)?;
            let r = &imported.record;
            print(&format!(
                "imported {} ({}, {} layers, {} bytes)\n",
                r.name,
                r.id,
                r.layers.len(),
                r.bytes
            ))?;
        }
        ImageCommand::Pull(args) => pull(args)?,
        ImageCommand::Build(args) => build(args)?,
        ImageCommand::Ls(args) => {
            let images = store(&args.state_dir)?.list()?;
            if args.json {
                print(&json(&images))?;
            } else {
                let mut text = format!(
                    "{:<32} {:<19} {:>6} {:>12}\n",
                    "NAME", "ID", "LAYERS", "BYTES"
                );
                for r in &images {
                    text.push_str(&format!(
                        "{:<32} {:<19} {:>6} {:>12}\n",
                        r.name,
                        &r.id.to_string()[..19],
                        r.layers.len(),
                        r.bytes
                    ));
                }
                print(&text)?;
            }
        }
        ImageCommand::Inspect(args) => {
            let record = store(&args.state_dir)?.record(&args.name)?;
            print(&json(&record))?;
        }
        ImageCommand::Rm(args) => {
            let record = store(&args.state_dir)?.remove(&args.name)?;
            print(&format!("removed {} ({})\n", record.name, record.id))?;
        }
        ImageCommand::Gc(args) => {
            let store = store(&args.state_dir)?;
            let report = store.gc()?;
            let left = crate::image::leftovers::remove(&store, crate::image::leftovers::GRACE);
            if args.json {
                let mut doc = serde_json::to_value(&report).unwrap_or_default();
                if let (Some(doc), Ok(serde_json::Value::Object(more))) =
                    (doc.as_object_mut(), serde_json::to_value(&left))
                {
                    doc.extend(more);
                }
                print(&json(&doc))?;
            } else {
                print(&format!(
                    "removed {} layers and {} partial imports; {} layers kept\n",
                    report.layers_removed, report.partial_removed, report.layers_kept
                ))?;
                print(&format!(
                    "removed {} builder images and {} build directories left by killed builds; {} builder images kept (a build in progress, or made less than {} min ago)\n",
                    left.build_images_removed.len(),
                    left.build_dirs_removed,
                    left.build_images_kept.len(),
                    crate::image::leftovers::GRACE.as_secs() / 60
                ))?;
                for problem in &left.problems {
                    eprintln!("envcraft: image gc: {problem}");
                }
            }
        }
    }
    Ok(0)
}

fn pull(args: PullArgs) -> Result<(), Error> {
    let store = store(&args.state_dir)?;
    let reference = crate::image::registry::parse_reference(&args.reference)
        .map_err(crate::image::PullError::from)?;
    let creds = match &args.creds {
        Some(text) => Some(Credentials::from_flag(text)?),
        None => {
            let files = credentials::auth_files(args.authfile.as_deref());
            credentials::lookup(
                &files,
                args.authfile.is_some(),
                reference.registry(),
                reference.repository(),
            )?
        }
    };
    let mut options = PullOptions::new(creds);
    options.name = args.name.clone();
    options.platform = args
        .platform
        .as_deref()
        .map(crate::image::pull::parse_platform)
        .transpose()?;
    options.connection.tls_verify = args.tls_verify;
    options.connection.timeout = std::time::Duration::from_secs(args.timeout.max(1));
    if let Some(max) = args.max_layer_bytes {
        options.limits.max_bytes = max;
    }
    let pulled = crate::image::pull(&store, &args.reference, &options)?;
    let r = &pulled.record;
    let resumed = if pulled.resumed > 0 {
        format!(", {} of them resumed from an earlier pull", pulled.resumed)
    } else {
        String::new()
    };
    print(&format!(
        "pulled {} ({}, {} layers, {} bytes; {} bytes downloaded{})\npinned: {}\n",
        r.name,
        r.id,
        r.layers.len(),
        r.bytes,
        pulled.downloaded + pulled.resumed,
        resumed,
        pulled.pinned
    ))
}

fn build(args: BuildArgs) -> Result<(), Error> {
    let store = store(&args.state_dir)?;
    let name = match &args.name {
        Some(name) => name.clone(),
        None => std::path::absolute(&args.context)
            .ok()
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().to_lowercase()))
            .unwrap_or_default(),
    };
    let mut options = crate::image::BuildOptions {
        dockerfile: args.file.clone(),
        name,
        builder: args.builder,
        isolation: args.isolation,
        limits: Limits::default(),
    };
    if let Some(max) = args.max_layer_bytes {
        options.limits.max_bytes = max;
    }
    let built = crate::image::build(&store, &args.context, &options)?;
    for note in &built.handed_over {
        eprintln!("envcraft: {note}");
    }
    let r = &built.record;
    print(&format!(
        "built {} ({}, {} layers, {} bytes) with {}\n",
        r.name,
        r.id,
        r.layers.len(),
        r.bytes,
        built.builder.program()
    ))
}
