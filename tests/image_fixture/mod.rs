//! Hand-made images for the image tests: tar layers written byte by byte (so that a test can
//! put in them what no well-behaved tar writer would: `..`, absolute paths, devices, sparse
//! files that claim a terabyte), and OCI layouts and docker-archives around them.

#![allow(dead_code)]

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Output;

use sha2::{Digest, Sha256};

pub fn sha256(bytes: &[u8]) -> String {
    let sum = Sha256::digest(bytes);
    let mut s = String::from("sha256:");
    for b in sum.iter() {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

fn octal(field: &mut [u8], value: u64) {
    let width = field.len() - 1;
    if value >= 1u64 << (3 * width) {
        // GNU's base-256 form for what octal cannot hold: high bit set, big-endian binary.
        field.fill(0);
        let bytes = value.to_be_bytes();
        let n = field.len();
        field[n - 8..].copy_from_slice(&bytes);
        field[0] |= 0x80;
        return;
    }
    let text = format!("{value:0width$o}");
    field[..width].copy_from_slice(&text.as_bytes()[text.len() - width..]);
    field[width] = 0;
}

/// A tar stream, entry by entry.
#[derive(Default, Clone)]
pub struct Tar(pub Vec<u8>);

impl Tar {
    pub fn new() -> Tar {
        Tar::default()
    }

    fn header(
        &mut self,
        name: &[u8],
        kind: u8,
        size: u64,
        mode: u32,
        link: &[u8],
        dev: (u32, u32),
    ) {
        if name.len() > 99 {
            let mut long = name.to_vec();
            long.push(0);
            self.raw(b"././@LongLink", b'L', &long, 0o644, b"", (0, 0));
        }
        if link.len() > 99 {
            let mut long = link.to_vec();
            long.push(0);
            self.raw(b"././@LongLink", b'K', &long, 0o644, b"", (0, 0));
        }
        let mut h = [0u8; 512];
        let n = name.len().min(99);
        h[..n].copy_from_slice(&name[..n]);
        octal(&mut h[100..108], u64::from(mode));
        octal(&mut h[108..116], 0);
        octal(&mut h[116..124], 0);
        octal(&mut h[124..136], size);
        octal(&mut h[136..148], 1_700_000_000);
        h[156] = kind;
        let l = link.len().min(99);
        h[157..157 + l].copy_from_slice(&link[..l]);
        h[257..263].copy_from_slice(b"ustar ");
        h[263..265].copy_from_slice(b" \0");
        octal(&mut h[329..337], u64::from(dev.0));
        octal(&mut h[337..345], u64::from(dev.1));
        h[148..156].copy_from_slice(b"        ");
        let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
        octal(&mut h[148..155], u64::from(sum));
        h[155] = b' ';
        self.0.extend_from_slice(&h);
    }

    fn data(&mut self, data: &[u8]) {
        self.0.extend_from_slice(data);
        let pad = (512 - data.len() % 512) % 512;
        self.0.extend(std::iter::repeat_n(0u8, pad));
    }

    fn raw(&mut self, name: &[u8], kind: u8, data: &[u8], mode: u32, link: &[u8], dev: (u32, u32)) {
        self.header(name, kind, data.len() as u64, mode, link, dev);
        self.data(data);
    }

    pub fn file(mut self, name: &str, data: &[u8]) -> Tar {
        self.raw(name.as_bytes(), b'0', data, 0o644, b"", (0, 0));
        self
    }
    pub fn file_mode(mut self, name: &str, data: &[u8], mode: u32) -> Tar {
        self.raw(name.as_bytes(), b'0', data, mode, b"", (0, 0));
        self
    }
    pub fn file_bytes(mut self, name: &[u8], data: &[u8]) -> Tar {
        self.raw(name, b'0', data, 0o644, b"", (0, 0));
        self
    }
    pub fn dir(mut self, name: &str) -> Tar {
        self.raw(name.as_bytes(), b'5', b"", 0o755, b"", (0, 0));
        self
    }
    pub fn dir_mode(mut self, name: &str, mode: u32) -> Tar {
        self.raw(name.as_bytes(), b'5', b"", mode, b"", (0, 0));
        self
    }
    pub fn symlink(mut self, name: &str, target: &str) -> Tar {
        self.raw(name.as_bytes(), b'2', b"", 0o777, target.as_bytes(), (0, 0));
        self
    }
    pub fn hardlink(mut self, name: &str, target: &str) -> Tar {
        self.raw(name.as_bytes(), b'1', b"", 0o644, target.as_bytes(), (0, 0));
        self
    }
    pub fn char_device(mut self, name: &str, major: u32, minor: u32) -> Tar {
        self.raw(name.as_bytes(), b'3', b"", 0o666, b"", (major, minor));
        self
    }
    /// A GNU sparse file of `real_size` bytes whose only data is its last 512 bytes.
    pub fn sparse(mut self, name: &str, real_size: u64) -> Tar {
        self.header(name.as_bytes(), b'S', 512, 0o644, b"", (0, 0));
        let at = self.0.len() - 512;
        let h = &mut self.0[at..at + 512];
        octal(&mut h[386..398], real_size - 512);
        octal(&mut h[398..410], 512);
        octal(&mut h[483..495], real_size);
        h[148..156].copy_from_slice(b"        ");
        let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
        octal(&mut h[148..155], u64::from(sum));
        h[155] = b' ';
        self.data(&[b'x'; 512]);
        self
    }
    pub fn finish(mut self) -> Vec<u8> {
        self.0.extend(std::iter::repeat_n(0u8, 1024));
        self.0
    }
}

pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

pub fn zstd(bytes: &[u8]) -> Vec<u8> {
    zstd::encode_all(bytes, 3).unwrap()
}

/// A layer: its tar (uncompressed) and the blob stored (maybe compressed).
pub struct Layer {
    pub tar: Vec<u8>,
    pub blob: Vec<u8>,
    pub media_type: &'static str,
}

impl Layer {
    pub fn plain(tar: Vec<u8>) -> Layer {
        Layer {
            blob: tar.clone(),
            tar,
            media_type: "application/vnd.oci.image.layer.v1.tar",
        }
    }
    pub fn gzip(tar: Vec<u8>) -> Layer {
        Layer {
            blob: gzip(&tar),
            tar,
            media_type: "application/vnd.oci.image.layer.v1.tar+gzip",
        }
    }
    pub fn zstd(tar: Vec<u8>) -> Layer {
        Layer {
            blob: zstd(&tar),
            tar,
            media_type: "application/vnd.oci.image.layer.v1.tar+zstd",
        }
    }
    pub fn digest(&self) -> String {
        sha256(&self.blob)
    }
    pub fn diff_id(&self) -> String {
        sha256(&self.tar)
    }
}

pub fn config_json(layers: &[Layer], env: &[&str]) -> Vec<u8> {
    let diff_ids: Vec<String> = layers.iter().map(Layer::diff_id).collect();
    serde_json::to_vec(&serde_json::json!({
        "architecture": host_arch(),
        "os": "linux",
        "config": {"Env": env, "WorkingDir": "/work", "User": "0"},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }))
    .unwrap()
}

pub fn host_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

fn put_blob(dir: &Path, bytes: &[u8]) -> String {
    let digest = sha256(bytes);
    let blobs = dir.join("blobs/sha256");
    fs::create_dir_all(&blobs).unwrap();
    fs::write(blobs.join(&digest[7..]), bytes).unwrap();
    digest
}

/// Write an OCI layout of `layers` at `dir`; returns the config digest (the image id).
pub fn oci_layout(dir: &Path, layers: &[Layer]) -> String {
    oci_layout_with(
        dir,
        layers,
        &config_json(layers, &["PATH=/usr/bin:/bin", "FROM_IMAGE=1"]),
    )
}

pub fn oci_layout_with(dir: &Path, layers: &[Layer], config: &[u8]) -> String {
    fs::create_dir_all(dir).unwrap();
    let config_digest = put_blob(dir, config);
    let layer_descs: Vec<serde_json::Value> = layers
        .iter()
        .map(|l| {
            let d = put_blob(dir, &l.blob);
            serde_json::json!({"mediaType": l.media_type, "digest": d, "size": l.blob.len()})
        })
        .collect();
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config.len()},
        "layers": layer_descs,
    }))
    .unwrap();
    let manifest_digest = put_blob(dir, &manifest);
    let index = serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": manifest_digest, "size": manifest.len(),
            "annotations": {"org.opencontainers.image.ref.name": "latest"}}],
    });
    fs::write(dir.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    config_digest
}

/// Write a docker-archive tar of `layers` (uncompressed, as `docker save` does) at `file`.
pub fn docker_archive(file: &Path, layers: &[Layer], config: &[u8], tag: &str) -> String {
    let config_digest = sha256(config);
    let mut tar = Tar::new().file(&format!("{}.json", &config_digest[7..]), config);
    let mut names = Vec::new();
    for l in layers {
        let name = format!("{}/layer.tar", &l.diff_id()[7..]);
        tar = tar.file(&name, &l.tar);
        names.push(name);
    }
    let manifest = serde_json::to_vec(&serde_json::json!([{
        "Config": format!("{}.json", &config_digest[7..]),
        "RepoTags": [tag],
        "Layers": names,
    }]))
    .unwrap();
    fs::write(file, tar.file("manifest.json", &manifest).finish()).unwrap();
    config_digest
}

/// `envcraft image ARGS... --state-dir STATE` through `contained` (falls back to no wrapper
/// only where the caller already skipped).
pub fn image_cmd(state: &Path, args: &[&str]) -> Output {
    let mut cmd = std::process::Command::new("bash");
    cmd.arg(super::common::contained().unwrap())
        .arg(super::common::envcraft())
        .arg("image")
        .args(args)
        .arg("--state-dir")
        .arg(state);
    cmd.output().unwrap()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Every path under the store's layers directory (to check that nothing was left).
pub fn store_layers(state: &Path) -> Vec<PathBuf> {
    let dir = state.join("images/layers");
    let mut out: Vec<PathBuf> = fs::read_dir(&dir)
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    out.sort();
    out
}

/// The unpacked tree of a layer in the store.
pub fn layer_root(state: &Path, diff_id: &str) -> PathBuf {
    state.join("images/layers").join(&diff_id[7..]).join("root")
}

/// The host files a small image needs to run `dash`, `cat` and `true` (the dynamic loader and libc,
/// found by `ldd`), as a tar under the same paths, with `bin` and `lib` as links into `usr`
/// as Debian has them.
pub fn host_tools_layer() -> Tar {
    let mut tar = Tar::new()
        .dir("usr")
        .dir("usr/bin")
        .symlink("bin", "usr/bin")
        .symlink("usr/bin/sh", "dash");
    let mut seen = std::collections::BTreeSet::new();
    let mut dirs = std::collections::BTreeSet::new();
    for tool in ["/usr/bin/dash", "/usr/bin/cat", "/usr/bin/true"] {
        let out = std::process::Command::new("ldd")
            .arg(tool)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut files = vec![tool.to_string()];
        for line in text.lines() {
            let path = line
                .split_whitespace()
                .find(|w| w.starts_with('/'))
                .map(str::to_string);
            files.extend(path);
        }
        for f in files {
            let real = fs::canonicalize(&f).unwrap();
            for (name, source) in [(f.clone(), real.clone())] {
                // Keep the path as asked (/lib64/ld-linux...), through usr where Debian links.
                let name = name
                    .strip_prefix("/lib/")
                    .map(|r| format!("/usr/lib/{r}"))
                    .unwrap_or(name);
                if !seen.insert(name.clone()) {
                    continue;
                }
                let rel = name.trim_start_matches('/').to_string();
                let mut parent = Path::new(&rel).parent();
                let mut chain = Vec::new();
                while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
                    chain.push(p.to_string_lossy().into_owned());
                    parent = p.parent();
                }
                for d in chain.into_iter().rev() {
                    if d != "usr" && d != "usr/bin" && dirs.insert(d.clone()) {
                        tar = tar.dir(&d);
                    }
                }
                tar = tar.file_mode(&rel, &fs::read(&source).unwrap(), 0o755);
            }
        }
    }
    if !seen.iter().any(|s| s.starts_with("/usr/lib/")) {
        return tar;
    }
    tar.symlink("lib", "usr/lib")
}

/// `envcraft exec --image IMAGE` (through `contained`) of `/bin/dash -c SCRIPT` over a new
/// template, with `state` as the state root.
pub fn exec_over(state: &Path, image: &str, script: &str) -> crate::common::ExecOutcome {
    let workspace = crate::common::Template::new();
    crate::common::Exec::new(workspace.path())
        .env("ENVCRAFT_STATE_DIR", state.to_str().unwrap())
        .args(&["--image", image])
        .run(&["/bin/dash", "-c", script])
}

/// `out` exited 0, or the test fails showing both its and envcraft's stderr.
pub fn assert_ran(out: &crate::common::ExecOutcome) {
    assert_eq!(
        out.exit_code,
        Some(0),
        "{} {}",
        out.stderr,
        out.envcraft_stderr
    );
}
