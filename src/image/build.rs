//! `image build`: a Dockerfile built by an installed builder (Podman or Buildah), its result
//! brought into the store through [`super::import`] as an OCI archive, and the builder's own
//! copy removed. envcraft does not interpret Dockerfiles: the builder runs every step.
//!
//! The steps run under the builder's OCI isolation with `runc` when `runc` is installed (passed
//! by path: Debian 12's `crun` 1.8, Podman's default runtime, refuses a cgroup-v1 host), else
//! under its `chroot` isolation, which needs no OCI runtime. A failed build leaves nothing in
//! the store and reports the end of the builder's output.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::import::{ImportError, import};
use super::layer::Limits;
use super::store::{ImageRecord, Store, StoreError, check_name};

/// The builders looked for, in order of preference.
pub const BUILDERS: [Builder; 2] = [Builder::Podman, Builder::Buildah];

/// The most bytes of the builder's output quoted in an error.
const OUTPUT_TAIL: u64 = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Builder {
    Podman,
    Buildah,
}

impl Builder {
    pub fn program(self) -> &'static str {
        match self {
            Builder::Podman => "podman",
            Builder::Buildah => "buildah",
        }
    }
}

/// How the builder runs the steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Isolation {
    /// A container made by `runc` (the builder's `--isolation oci --runtime runc`).
    Oci,
    /// The builder's chroot (`--isolation chroot`): no OCI runtime needed.
    Chroot,
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(
        "no image builder is installed: looked for {looked} on PATH; install one (`apt-get install podman runc` or `apt-get install buildah`), or build the image elsewhere and bring it in with `envcraft image import FILE --name NAME`"
    )]
    NoBuilder { looked: String },
    #[error("{context} is not a directory (the build context, which holds the Dockerfile)")]
    Context { context: PathBuf },
    #[error("{path} does not exist: the Dockerfile to build (--file)")]
    NoDockerfile { path: PathBuf },
    #[error("cannot run {program}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{program} failed to {what} (exit status {status}); the end of its output:\n{tail}")]
    Failed {
        program: String,
        what: &'static str,
        status: String,
        tail: String,
    },
    #[error("cannot hand the image {name} from envcraft's store to the builder: cannot {what}")]
    HandOver {
        name: String,
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot make a scratch directory for the build")]
    Scratch(#[source] std::io::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the built image could not be imported")]
    Import(#[source] Box<ImportError>),
}

/// What to build and how.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// The Dockerfile (default: `CONTEXT/Dockerfile`).
    pub dockerfile: Option<PathBuf>,
    /// The name the image gets in the store.
    pub name: String,
    /// The builder to use (default: the first of [`BUILDERS`] on PATH).
    pub builder: Option<Builder>,
    /// How the steps run (default: OCI with runc when runc is installed, else chroot).
    pub isolation: Option<Isolation>,
    pub limits: Limits,
}

/// What a build made.
#[derive(Debug, Clone)]
pub struct Built {
    pub record: ImageRecord,
    pub builder: Builder,
    pub isolation: Isolation,
    /// The `FROM` images handed over from the store to the builder for the build, for people.
    pub handed_over: Vec<String>,
}

/// `builder` found on `PATH`.
pub(super) fn installed(builder: Builder) -> Option<PathBuf> {
    on_path(builder.program())
}

/// `program` found on `PATH`.
fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt;
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The builder to use: `choice` when it is installed, else the first of [`BUILDERS`] that is.
pub fn find_builder(choice: Option<Builder>) -> Result<(Builder, PathBuf), BuildError> {
    let wanted: Vec<Builder> = match choice {
        Some(b) => vec![b],
        None => BUILDERS.to_vec(),
    };
    wanted
        .iter()
        .find_map(|b| on_path(b.program()).map(|p| (*b, p)))
        .ok_or_else(|| BuildError::NoBuilder {
            looked: wanted
                .iter()
                .map(|b| b.program())
                .collect::<Vec<_>>()
                .join(" and "),
        })
}

/// Whether a builder is installed (what Harbor's import asks before handing a Dockerfile on).
pub fn builder_installed() -> bool {
    find_builder(None).is_ok()
}

/// The names of the builders looked for, for messages.
pub fn builders_looked_for() -> String {
    BUILDERS
        .iter()
        .map(|b| b.program())
        .collect::<Vec<_>>()
        .join(" and ")
}

/// The prefix of the builder's image of a build (`localhost/envcraft-build-PID-SCRATCH`,
/// SCRATCH the build's scratch directory's name after `.build-`, lowercased).
pub const TAG_PREFIX: &str = "localhost/envcraft-build-";

/// Build `context` with an installed builder and import the result into `store` as
/// `options.name`; the builder's image is removed whatever happens.
pub fn build(store: &Store, context: &Path, options: &BuildOptions) -> Result<Built, BuildError> {
    check_name(&options.name)?;
    if !context.is_dir() {
        return Err(BuildError::Context {
            context: context.to_path_buf(),
        });
    }
    let dockerfile = options
        .dockerfile
        .clone()
        .unwrap_or_else(|| context.join("Dockerfile"));
    if !dockerfile.is_file() {
        return Err(BuildError::NoDockerfile { path: dockerfile });
    }
    let (builder, program) = find_builder(options.builder)?;
    let runc = on_path("runc");
    let isolation = options.isolation.unwrap_or(match runc {
        Some(_) => Isolation::Oci,
        None => Isolation::Chroot,
    });
    let scratch = store.scratch_dir().map_err(BuildError::Scratch)?;
    // Held until the builder's image is removed: `gc` leaves this build alone.
    let _in_progress = store.build_lock(scratch.path())?;
    let tag = format!(
        "{TAG_PREFIX}{}-{}",
        std::process::id(),
        scratch
            .path()
            .file_name()
            .map(|n| n
                .to_string_lossy()
                .trim_start_matches(".build-")
                .to_lowercase())
            .unwrap_or_default()
    );
    let log = scratch.path().join("builder.log");
    // The store's images the builder lacks, given to it; removed when `given` is dropped,
    // on every path out of here.
    let mut given =
        super::handover::hand_over(store, builder, &program, &dockerfile, scratch.path(), &log)?;
    let mut build = Command::new(&program);
    build.args(build_args(
        builder,
        isolation,
        runc.as_deref(),
        &tag,
        &dockerfile,
        context,
    ));
    let built = run(&mut build, &log, builder.program(), "build the image");
    let archive = scratch.path().join("image.tar");
    let saved = built.and_then(|()| {
        let mut save = Command::new(&program);
        save.args(save_args(builder, &tag, &archive));
        run(&mut save, &log, builder.program(), "write the image out")
    });
    // The builder's own copy goes, built or not (a failed build may have tagged nothing).
    let _ = Command::new(&program)
        .args(["rmi", "-f", &tag])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let handed_over = std::mem::take(&mut given.notes);
    drop(given);
    saved?;
    let imported = import(store, &archive, Some(&options.name), options.limits)
        .map_err(|e| BuildError::Import(Box::new(e)))?;
    let mut record = imported.record;
    record.source = format!(
        "built from {} by {} ({} isolation)",
        dockerfile.display(),
        builder.program(),
        match isolation {
            Isolation::Oci => "oci",
            Isolation::Chroot => "chroot",
        }
    );
    store.save(&record)?;
    Ok(Built {
        record,
        builder,
        isolation,
        handed_over,
    })
}

/// The builder's arguments that build `dockerfile` in `context` as `tag`: no intermediate
/// images (`--layers=false`), the steps isolated as `isolation` says (with `runc` by path).
fn build_args(
    builder: Builder,
    isolation: Isolation,
    runc: Option<&Path>,
    tag: &str,
    dockerfile: &Path,
    context: &Path,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = vec![match builder {
        Builder::Podman => "build".into(),
        Builder::Buildah => "bud".into(),
    }];
    match (isolation, runc) {
        (Isolation::Oci, Some(runc)) => {
            args.extend(["--isolation=oci".into(), "--runtime".into(), runc.into()]);
        }
        (Isolation::Oci, None) => args.push("--isolation=oci".into()),
        (Isolation::Chroot, _) => args.push("--isolation=chroot".into()),
    }
    args.extend([
        "--layers=false".into(),
        "-t".into(),
        tag.into(),
        "-f".into(),
    ]);
    args.extend([dockerfile.into(), context.into()]);
    args
}

/// The builder's arguments that write the image `tag` to `archive` as an OCI archive.
fn save_args(builder: Builder, tag: &str, archive: &Path) -> Vec<OsString> {
    match builder {
        Builder::Podman => vec![
            "save".into(),
            "--format".into(),
            "oci-archive".into(),
            "-o".into(),
            archive.into(),
            tag.into(),
        ],
        Builder::Buildah => vec![
            "push".into(),
            tag.into(),
            format!("oci-archive:{}", archive.display()).into(),
        ],
    }
}

/// Run `command` with its output (both streams) appended to `log`; a failure quotes the end
/// of `log`.
pub(super) fn run(
    command: &mut Command,
    log: &Path,
    program: &str,
    what: &'static str,
) -> Result<(), BuildError> {
    run_fed(command, Stdio::null(), log, program, what)
}

/// [`run`] with `stdin` as the command's input.
pub(super) fn run_fed(
    command: &mut Command,
    stdin: Stdio,
    log: &Path,
    program: &str,
    what: &'static str,
) -> Result<(), BuildError> {
    let spawn_err = |source| BuildError::Spawn {
        program: program.to_string(),
        source,
    };
    let out = File::options()
        .create(true)
        .append(true)
        .open(log)
        .map_err(spawn_err)?;
    let err = out.try_clone().map_err(spawn_err)?;
    tracing::info!(?command, "running the image builder");
    let status = command
        .stdin(stdin)
        .stdout(out)
        .stderr(err)
        .status()
        .map_err(spawn_err)?;
    if status.success() {
        return Ok(());
    }
    Err(BuildError::Failed {
        program: program.to_string(),
        what,
        status: status
            .code()
            .map_or_else(|| "killed by a signal".to_string(), |c| c.to_string()),
        tail: tail(log),
    })
}

/// The last [`OUTPUT_TAIL`] bytes of `path`, from a line's start.
pub(super) fn tail(path: &Path) -> String {
    let mut text = Vec::new();
    if let Ok(mut file) = File::open(path) {
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = file.seek(SeekFrom::Start(len.saturating_sub(OUTPUT_TAIL)));
        let _ = file.read_to_end(&mut text);
        if len > OUTPUT_TAIL
            && let Some(at) = text.iter().position(|b| *b == b'\n')
        {
            text.drain(..=at);
        }
    }
    String::from_utf8_lossy(&text).trim_end().to_string()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn words(args: Vec<OsString>) -> Vec<String> {
        args.into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_builders_are_given_the_isolation_and_an_oci_archive_to_write() {
        let (df, ctx) = (Path::new("/c/Dockerfile"), Path::new("/c"));
        let runc = Path::new("/usr/sbin/runc");
        assert_eq!(
            words(build_args(
                Builder::Podman,
                Isolation::Oci,
                Some(runc),
                "t",
                df,
                ctx
            )),
            [
                "build",
                "--isolation=oci",
                "--runtime",
                "/usr/sbin/runc",
                "--layers=false",
                "-t",
                "t",
                "-f",
                "/c/Dockerfile",
                "/c"
            ]
        );
        assert_eq!(
            words(build_args(
                Builder::Buildah,
                Isolation::Chroot,
                Some(runc),
                "t",
                df,
                ctx
            ))[..2],
            ["bud", "--isolation=chroot"]
        );
        assert_eq!(
            words(save_args(Builder::Podman, "t", Path::new("/s/i.tar"))),
            ["save", "--format", "oci-archive", "-o", "/s/i.tar", "t"]
        );
        assert_eq!(
            words(save_args(Builder::Buildah, "t", Path::new("/s/i.tar"))),
            ["push", "t", "oci-archive:/s/i.tar"]
        );
    }

    #[test]
    fn the_tail_starts_at_a_line() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let long: String = (0..2000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&log, long).unwrap();
        let t = tail(&log);
        assert!(t.ends_with("line 1999"), "{t}");
        assert!(t.starts_with("line "), "{t}");
        assert!(t.len() <= OUTPUT_TAIL as usize);
    }
}
