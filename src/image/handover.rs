//! Base images handed to the builder: before a build, each `FROM` name of the Dockerfile that
//! the builder's storage lacks and envcraft's store holds is given to the builder under that
//! name, and removed from the builder's storage after the build, whatever happens.
//!
//! The image's tree is its store layers merged by a read-only overlay (the layers' whiteouts
//! and opaque directories are `user.overlay.*` ones, hence `userxattr`), mounted in a private
//! mount namespace of the `tar` child that reads it: the mount exists only while that child
//! lives and is never seen by the host. The tar is streamed into `podman import` with the
//! image's recorded config as `--change` instructions, or, for Buildah (whose `config --env`
//! expands `$`), written to the build's scratch directory and built `FROM scratch` with `ADD`
//! and the config as Dockerfile instructions (quoted, so nothing is expanded). The copy is
//! flat: one layer, owned by the unpacker (root), as the store keeps it.

use std::ffi::CString;
use std::fs::File;
use std::io::Write as _;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::build::{BuildError, Builder, run, run_fed};
use super::store::{ImageRecord, Store, StoreLock};

/// Transports a `FROM` can name an image through (`docker://`, `oci-archive:PATH`, ...): such
/// a name is the builder's to resolve, never handed over.
const TRANSPORTS: [&str; 10] = [
    "docker://",
    "docker-archive:",
    "docker-daemon:",
    "oci:",
    "oci-archive:",
    "containers-storage:",
    "dir:",
    "ostree:",
    "sif:",
    "tarball:",
];

/// The images given to the builder for one build; removed from its storage when dropped.
pub(super) struct HandedOver {
    program: PathBuf,
    names: Vec<String>,
    /// What was handed over, for people (also written to the build's log).
    pub notes: Vec<String>,
    /// Held until the copies are removed: a build handing over the same base waits.
    _locks: Vec<StoreLock>,
}

impl Drop for HandedOver {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = Command::new(&self.program)
                .args(["rmi", "-f", name])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// The image names the `FROM` lines of `dockerfile` name, in order, once each: without
/// `scratch`, the names of earlier stages (`AS NAME`), names through a transport, and names
/// holding a build argument (`$`), which only the builder can resolve.
pub(super) fn from_names(dockerfile: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut stages: Vec<String> = Vec::new();
    let mut line = String::new();
    for raw in dockerfile.lines() {
        let trimmed = raw.trim();
        if line.is_empty() && (trimmed.starts_with('#') || trimmed.is_empty()) {
            continue;
        }
        if let Some(head) = trimmed.strip_suffix('\\') {
            line.push_str(head);
            line.push(' ');
            continue;
        }
        line.push_str(trimmed);
        let words: Vec<&str> = line.split_whitespace().collect();
        if words
            .first()
            .is_some_and(|w| w.eq_ignore_ascii_case("FROM"))
        {
            let mut rest = words[1..].iter().filter(|w| !w.starts_with("--"));
            if let Some(name) = rest.next() {
                let taken = name.eq_ignore_ascii_case("scratch")
                    || name.contains('$')
                    || stages.iter().any(|s| s.eq_ignore_ascii_case(name))
                    || TRANSPORTS.iter().any(|t| name.starts_with(t))
                    || names.iter().any(|n| n == name);
                if !taken {
                    names.push((*name).to_string());
                }
                if rest.next().is_some_and(|w| w.eq_ignore_ascii_case("AS"))
                    && let Some(alias) = rest.next()
                {
                    stages.push((*alias).to_string());
                }
            }
        }
        line.clear();
    }
    names
}

/// Whether the builder's storage has the image `name`.
fn builder_has(builder: Builder, program: &Path, name: &str) -> bool {
    let mut cmd = Command::new(program);
    match builder {
        Builder::Podman => cmd.args(["image", "exists", name]),
        Builder::Buildah => cmd.args(["inspect", "--type", "image", name]),
    };
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Give the builder each `FROM` image of `dockerfile` that it lacks and `store` holds, under
/// its name; the work files go to `scratch`, the builder's output to `log`.
pub(super) fn hand_over(
    store: &Store,
    builder: Builder,
    program: &Path,
    dockerfile: &Path,
    scratch: &Path,
    log: &Path,
) -> Result<HandedOver, BuildError> {
    let text = std::fs::read_to_string(dockerfile).map_err(|source| BuildError::Spawn {
        program: format!("read {}", dockerfile.display()),
        source,
    })?;
    let mut held: Vec<(String, ImageRecord)> = from_names(&text)
        .into_iter()
        .filter_map(|name| store.record(&name).ok().map(|r| (name, r)))
        .collect();
    // Locks taken in one order: two builds over the same bases never wait on each other.
    held.sort_by(|a, b| a.0.cmp(&b.0));
    let mut given = HandedOver {
        program: program.to_path_buf(),
        names: Vec::new(),
        notes: Vec::new(),
        _locks: Vec::new(),
    };
    for (i, (name, record)) in held.iter().enumerate() {
        given
            ._locks
            .push(store.name_lock(&format!("builder-base {name}"))?);
        if builder_has(builder, program, name) {
            continue;
        }
        if name.contains('@') {
            given.notes.push(format!(
                "the FROM image `{name}` is in envcraft's image store but pinned by digest, which {b} cannot be given a copy under: left to {b}",
                b = builder.program()
            ));
            continue;
        }
        let work = scratch.join(format!("base-{i}"));
        for sub in ["merged", "empty"] {
            std::fs::create_dir_all(work.join(sub)).map_err(BuildError::Scratch)?;
        }
        let copy = Copy {
            store,
            record,
            name,
            work: &work,
            log,
        };
        // Pushed first: a copy half made is removed too.
        given.names.push(name.clone());
        match builder {
            Builder::Podman => copy.podman_import(program)?,
            Builder::Buildah => copy.buildah_bud(program)?,
        }
        let note = format!(
            "the FROM image `{name}` ({}, {} layer(s)) was handed over from envcraft's image store to {b} for the build, removed from {b}'s storage after it",
            record.id,
            record.layers.len(),
            b = builder.program()
        );
        append(log, &format!("envcraft: {note}\n"));
        given.notes.push(note);
    }
    Ok(given)
}

fn append(log: &Path, text: &str) {
    if let Ok(mut f) = File::options().create(true).append(true).open(log) {
        let _ = f.write_all(text.as_bytes());
    }
}

/// One image of the store being copied into the builder's storage.
struct Copy<'a> {
    store: &'a Store,
    record: &'a ImageRecord,
    name: &'a str,
    work: &'a Path,
    log: &'a Path,
}

impl Copy<'_> {
    /// `tar` of the image's merged tree on its stdout, the overlay mounted in its own mount
    /// namespace (gone with it).
    fn tar(&self) -> Result<Command, BuildError> {
        let failed = |what: &str, source: std::io::Error| BuildError::HandOver {
            name: self.name.to_string(),
            what: what.to_string(),
            source,
        };
        let merged = self.work.join("merged");
        let mut lower: Vec<String> = self
            .record
            .layers
            .iter()
            .rev()
            .map(|d| self.store.layer_root(d).display().to_string())
            .collect();
        // A lower layer more: overlay wants two without an upper one, and an image may have one.
        lower.push(self.work.join("empty").display().to_string());
        let opts = format!("lowerdir={},userxattr", lower.join(":"));
        if opts.len() > 4000 {
            return Err(failed(
                "merge its layers",
                std::io::Error::other(format!(
                    "{} layers are more than one overlay mount can name",
                    self.record.layers.len()
                )),
            ));
        }
        let cstr = |s: &[u8]| CString::new(s).map_err(|e| failed("name its layers", e.into()));
        let (target, opts) = (cstr(merged.as_os_str().as_bytes())?, cstr(opts.as_bytes())?);
        let mut tar = Command::new("tar");
        tar.arg("-C")
            .arg(&merged)
            .args(["--numeric-owner", "-cf", "-", "."])
            .stdin(Stdio::null());
        // SAFETY: only unshare(2) and mount(2) with strings made before the fork, which are
        // async-signal-safe; they change the child's own (new) mount namespace only.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut tar, move || {
                if libc::unshare(libc::CLONE_NEWNS) != 0
                    || libc::mount(
                        c"none".as_ptr(),
                        c"/".as_ptr(),
                        std::ptr::null(),
                        libc::MS_REC | libc::MS_PRIVATE,
                        std::ptr::null(),
                    ) != 0
                    || libc::mount(
                        c"envcraft-base".as_ptr(),
                        target.as_ptr(),
                        c"overlay".as_ptr(),
                        libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
                        opts.as_ptr().cast(),
                    ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Ok(tar)
    }

    fn log_file(&self) -> Result<File, BuildError> {
        File::options()
            .create(true)
            .append(true)
            .open(self.log)
            .map_err(|source| BuildError::Spawn {
                program: format!("open {}", self.log.display()),
                source,
            })
    }

    /// The tar's exit checked: a failure quotes the log.
    fn waited(&self, tar: &mut std::process::Child) -> Result<(), BuildError> {
        let status = tar.wait().map_err(|source| BuildError::HandOver {
            name: self.name.to_string(),
            what: "wait for tar".to_string(),
            source,
        })?;
        if status.success() {
            return Ok(());
        }
        Err(BuildError::HandOver {
            name: self.name.to_string(),
            what: "write its tree out with tar".to_string(),
            source: std::io::Error::other(format!(
                "tar ended with {status}; the end of the build's log:\n{}",
                super::build::tail(self.log)
            )),
        })
    }

    fn spawn_tar(&self, stdout: Stdio) -> Result<std::process::Child, BuildError> {
        let mut tar = self.tar()?;
        tar.stdout(stdout).stderr(self.log_file()?);
        tar.spawn().map_err(|source| BuildError::HandOver {
            name: self.name.to_string(),
            what: "mount its layers (a read-only overlay, as root) and run tar over them"
                .to_string(),
            source,
        })
    }

    /// `tar | podman import --change ... - NAME`.
    fn podman_import(&self, program: &Path) -> Result<(), BuildError> {
        let mut tar = self.spawn_tar(Stdio::piped())?;
        let Some(stream) = tar.stdout.take() else {
            let _ = tar.kill();
            let _ = tar.wait();
            return Err(BuildError::HandOver {
                name: self.name.to_string(),
                what: "read tar's output".to_string(),
                source: std::io::Error::other("no pipe"),
            });
        };
        let config = &self.record.config;
        let mut import = Command::new(program);
        import.arg("import");
        let mut change = |c: String| {
            import.arg("--change").arg(c);
        };
        for env in config.env.iter().flatten() {
            change(format!("ENV {env}"));
        }
        if let Some(dir) = &config.working_dir {
            change(format!("WORKDIR {dir}"));
        }
        if let Some(user) = &config.user {
            change(format!("USER {user}"));
        }
        if let Some(ep) = &config.entrypoint {
            change(format!("ENTRYPOINT {}", json(ep)));
        }
        if let Some(cmd) = &config.cmd {
            change(format!("CMD {}", json(cmd)));
        }
        import.args(["-", self.name]);
        let imported = run_fed(
            &mut import,
            Stdio::from(stream),
            self.log,
            "podman",
            "take in a base image from envcraft's store",
        );
        let tarred = self.waited(&mut tar);
        imported.and(tarred)
    }

    /// `tar > root.tar`, then `buildah bud` of `FROM scratch`, `ADD root.tar /` and the config.
    fn buildah_bud(&self, program: &Path) -> Result<(), BuildError> {
        let archive = self.work.join("root.tar");
        let out = File::create(&archive).map_err(BuildError::Scratch)?;
        let mut tar = self.spawn_tar(Stdio::from(out))?;
        self.waited(&mut tar)?;
        let config = &self.record.config;
        let mut df = String::from("FROM scratch\nADD root.tar /\n");
        for env in config.env.iter().flatten() {
            let (k, v) = env.split_once('=').unwrap_or((env, ""));
            df.push_str(&format!("ENV {k}={}\n", quoted(v)));
        }
        if let Some(dir) = &config.working_dir {
            df.push_str(&format!("WORKDIR {}\n", quoted(dir)));
        }
        if let Some(ep) = &config.entrypoint {
            df.push_str(&format!("ENTRYPOINT {}\n", json(ep)));
        }
        if let Some(cmd) = &config.cmd {
            df.push_str(&format!("CMD {}\n", json(cmd)));
        }
        if let Some(user) = &config.user {
            df.push_str(&format!("USER {}\n", quoted(user)));
        }
        let dockerfile = self.work.join("Dockerfile");
        std::fs::write(&dockerfile, df).map_err(BuildError::Scratch)?;
        let mut bud = Command::new(program);
        bud.args(["bud", "--layers=false", "-t", self.name, "-f"])
            .arg(&dockerfile)
            .arg(self.work);
        let built = run(
            &mut bud,
            self.log,
            "buildah",
            "take in a base image from envcraft's store",
        );
        let _ = std::fs::remove_file(&archive);
        built
    }
}

fn json(words: &[String]) -> String {
    serde_json::to_string(words).unwrap_or_else(|_| "[]".to_string())
}

/// `text` as a Dockerfile double-quoted word: `"`, `\` and `$` escaped, so the builder takes
/// it as it is.
fn quoted(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        if matches!(c, '"' | '\\' | '$') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_names_are_every_stage_s_base_once_without_aliases_scratch_or_transports() {
        let df = "# syntax\nARG V=1\nFROM --platform=linux/amd64 base:1 AS build\n\
                  RUN make\nfrom build as second\nFROM scratch\nFROM \\\n  other/img:2\n\
                  FROM base:1\nFROM docker://x/y\nFROM oci-archive:/t.tar\nFROM img:$V\n\
                  FROM localhost:5000/app\nRUN echo FROM nothing\n";
        assert_eq!(
            from_names(df),
            ["base:1", "other/img:2", "localhost:5000/app"]
        );
    }

    #[test]
    fn a_quoted_word_keeps_quotes_backslashes_and_dollars() {
        assert_eq!(quoted(r#"a "b" $HOME \z"#), r#""a \"b\" \$HOME \\z""#);
        assert_eq!(json(&["a b".into(), "\"".into()]), r#"["a b","\""]"#);
    }
}
