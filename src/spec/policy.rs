//! Sandbox policies: what a sandbox may read, write, reach and spend.
//!
//! A policy is a TOML file (`policies/NAME.toml`). Parsing rejects unknown keys and wrong types
//! with the TOML line and column; validation rejects impossible values with the key, the line and
//! what is expected. The bundled policies are compiled into the binary so `--policy NAME` works
//! from any directory.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize};
use toml::Spanned;

use super::located::{TomlFile, key_part, line_col};

/// Policies shipped with envcraft, by name, with their TOML source.
pub const BUNDLED: &[(&str, &str)] = &[
    ("default", include_str!("../../policies/default.toml")),
    ("strict", include_str!("../../policies/strict.toml")),
    ("verifier", include_str!("../../policies/verifier.toml")),
    ("portable", include_str!("../../policies/portable.toml")),
];

/// Why a policy could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("unknown policy `{name}`: expected one of {known} or a path to a .toml file")]
    UnknownName { name: String, known: String },
    #[error("cannot read policy file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("policy {source_name}, line {line}, column {column}{}: {message}", key_part(.key))]
    Syntax {
        source_name: String,
        /// The key on the offending line, when there is one.
        key: Option<String>,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("policy {source_name}, line {line}: `{key}` {problem}; expected {expected}")]
    Invalid {
        source_name: String,
        key: String,
        line: usize,
        problem: String,
        expected: String,
    },
}

/// A protection the sandbox can apply; a policy classes each one as required or best effort.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protection {
    UserNamespace,
    MountNamespace,
    PidNamespace,
    NetworkNamespace,
    IpcNamespace,
    UtsNamespace,
    CgroupNamespace,
    OverlayWorkspace,
    LandlockFilesystem,
    LandlockNetwork,
    LandlockScope,
    Seccomp,
    NoNewPrivs,
    CapabilitiesDropped,
    Rlimits,
    CgroupLimits,
    WorkspaceSizeLimit,
}

impl Protection {
    pub const ALL: [Protection; 17] = [
        Protection::UserNamespace,
        Protection::MountNamespace,
        Protection::PidNamespace,
        Protection::NetworkNamespace,
        Protection::IpcNamespace,
        Protection::UtsNamespace,
        Protection::CgroupNamespace,
        Protection::OverlayWorkspace,
        Protection::LandlockFilesystem,
        Protection::LandlockNetwork,
        Protection::LandlockScope,
        Protection::Seccomp,
        Protection::NoNewPrivs,
        Protection::CapabilitiesDropped,
        Protection::Rlimits,
        Protection::CgroupLimits,
        Protection::WorkspaceSizeLimit,
    ];

    /// The snake_case name used in policy files and in `enforced`.
    pub fn name(self) -> &'static str {
        match self {
            Protection::UserNamespace => "user_namespace",
            Protection::MountNamespace => "mount_namespace",
            Protection::PidNamespace => "pid_namespace",
            Protection::NetworkNamespace => "network_namespace",
            Protection::IpcNamespace => "ipc_namespace",
            Protection::UtsNamespace => "uts_namespace",
            Protection::CgroupNamespace => "cgroup_namespace",
            Protection::OverlayWorkspace => "overlay_workspace",
            Protection::LandlockFilesystem => "landlock_filesystem",
            Protection::LandlockNetwork => "landlock_network",
            Protection::LandlockScope => "landlock_scope",
            Protection::Seccomp => "seccomp",
            Protection::NoNewPrivs => "no_new_privs",
            Protection::CapabilitiesDropped => "capabilities_dropped",
            Protection::Rlimits => "rlimits",
            Protection::CgroupLimits => "cgroup_limits",
            Protection::WorkspaceSizeLimit => "workspace_size_limit",
        }
    }

    /// True for the protections that only exist inside a user namespace sandbox.
    pub fn needs_namespaces(self) -> bool {
        matches!(
            self,
            Protection::UserNamespace
                | Protection::MountNamespace
                | Protection::PidNamespace
                | Protection::NetworkNamespace
                | Protection::IpcNamespace
                | Protection::UtsNamespace
                | Protection::CgroupNamespace
                | Protection::OverlayWorkspace
                | Protection::WorkspaceSizeLimit
        )
    }
}

impl fmt::Display for Protection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How the sandbox reaches the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkMode {
    /// Own network namespace with only a loopback interface: nothing outside the sandbox is
    /// reachable; Landlock further limits TCP to the listed ports.
    None,
    /// The host's network namespace, with TCP bind/connect limited by Landlock to the listed ports.
    /// UDP and other protocols are not covered: use only for trusted tasks.
    Host,
}

/// A validated policy: every value is in range and every path is absolute.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Policy {
    pub name: String,
    pub description: String,
    pub filesystem: Filesystem,
    pub network: Network,
    pub limits: Limits,
    pub environment: Environment,
    pub protections: Protections,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Filesystem {
    /// Host paths shown read-only inside at the same place (symlinks are recreated as symlinks).
    pub read_only: Vec<PathBuf>,
    /// Paths masked inside: an empty directory or an empty file over them.
    pub hidden: Vec<PathBuf>,
    /// Where the workspace is mounted; also the working directory of the command.
    pub workspace: PathBuf,
    /// Further places where the same workspace is visible.
    pub workspace_aliases: Vec<PathBuf>,
    pub workspace_writable: bool,
    /// Size of the private /tmp (and of HOME, which is a private tmpfs too).
    pub tmp_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Network {
    pub mode: NetworkMode,
    pub allow_tcp_bind: Vec<u16>,
    pub allow_tcp_connect: Vec<u16>,
    /// Whether AF_NETLINK sockets may be created (needed by `ip`, not by ordinary programs).
    pub allow_netlink: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Limits {
    pub wall_time_secs: u64,
    pub cpu_secs: u64,
    pub memory_bytes: u64,
    pub processes: u64,
    pub file_size_bytes: u64,
    pub open_files: u64,
    pub output_bytes: u64,
    /// Bytes the workspace may grow by (the size of the upper layer).
    pub workspace_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Environment {
    pub path: String,
    pub home: PathBuf,
    pub tz: String,
    pub lang: String,
    pub hostname: String,
    /// Host variables passed through when set (by name).
    pub pass: Vec<String>,
    /// Fixed extra variables.
    pub set: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Protections {
    pub required: Vec<Protection>,
    pub best_effort: Vec<Protection>,
}

impl Protections {
    pub fn is_required(&self, protection: Protection) -> bool {
        self.required.contains(&protection)
    }
}

impl Policy {
    /// Load a bundled policy by name, or a policy file by path (anything containing `/` or
    /// ending in `.toml`).
    pub fn load(name_or_path: &str) -> Result<Policy, PolicyError> {
        if name_or_path.contains('/') || name_or_path.ends_with(".toml") {
            let path = Path::new(name_or_path);
            let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
                path: path.to_path_buf(),
                source,
            })?;
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| name_or_path.to_string());
            return Policy::parse(&name, &path.display().to_string(), &text);
        }
        Policy::bundled(name_or_path)
    }

    /// A bundled policy by name.
    pub fn bundled(name: &str) -> Result<Policy, PolicyError> {
        let (_, text) =
            BUNDLED
                .iter()
                .find(|(n, _)| *n == name)
                .ok_or_else(|| PolicyError::UnknownName {
                    name: name.to_string(),
                    known: BUNDLED
                        .iter()
                        .map(|(n, _)| format!("`{n}`"))
                        .collect::<Vec<_>>()
                        .join(", "),
                })?;
        Policy::parse(name, &format!("policies/{name}.toml"), text)
    }

    /// Parse and validate policy TOML. `source_name` is used in error messages.
    pub fn parse(name: &str, source_name: &str, text: &str) -> Result<Policy, PolicyError> {
        let file = TomlFile {
            path: Path::new(source_name),
            text,
        };
        let raw: RawPolicy = file.parse().map_err(|p| PolicyError::Syntax {
            source_name: source_name.to_string(),
            key: p.key,
            line: p.line,
            column: p.column,
            message: p.message,
        })?;
        Validator { source_name, text }.policy(name, raw)
    }
}

/// A byte count written either as an integer or as a string with a unit (`"256MiB"`, `"1G"`).
#[derive(Debug, Clone, Copy, PartialEq)]
struct ByteSize(u64);

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Int(i64),
            Text(String),
        }
        match Repr::deserialize(deserializer).map_err(|_| {
            serde::de::Error::custom(
                "expected a byte count: an integer or a string such as \"256MiB\", \"2GiB\", \"512K\"",
            )
        })? {
            Repr::Int(n) if n >= 0 => Ok(ByteSize(n as u64)),
            Repr::Int(n) => Err(serde::de::Error::custom(format!(
                "byte count {n} is negative; expected a non-negative size"
            ))),
            Repr::Text(s) => parse_byte_size(&s).map(ByteSize).ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "`{s}` is not a byte count; expected an integer or a number with a unit (B, K, KiB, M, MiB, G, GiB)"
                ))
            }),
        }
    }
}

/// Parse `"256MiB"`, `"1G"`, `"4096"`. Units are binary (K = KiB).
fn parse_byte_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let value: u64 = digits.parse().ok()?;
    let multiplier: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "KB" | "KiB" => 1 << 10,
        "M" | "MB" | "MiB" => 1 << 20,
        "G" | "GB" | "GiB" => 1 << 30,
        "T" | "TB" | "TiB" => 1 << 40,
        _ => return None,
    };
    value.checked_mul(multiplier)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    #[serde(default)]
    description: String,
    filesystem: RawFilesystem,
    #[serde(default)]
    network: RawNetwork,
    limits: RawLimits,
    environment: RawEnvironment,
    protections: RawProtections,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFilesystem {
    read_only: Vec<Spanned<String>>,
    #[serde(default)]
    hidden: Vec<Spanned<String>>,
    workspace: Spanned<String>,
    #[serde(default)]
    workspace_aliases: Vec<Spanned<String>>,
    workspace_writable: bool,
    tmp_size: Spanned<ByteSize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNetwork {
    mode: NetworkMode,
    #[serde(default)]
    allow_tcp_bind: Vec<Spanned<i64>>,
    #[serde(default)]
    allow_tcp_connect: Vec<Spanned<i64>>,
    #[serde(default)]
    allow_netlink: bool,
}

impl Default for RawNetwork {
    fn default() -> Self {
        RawNetwork {
            mode: NetworkMode::None,
            allow_tcp_bind: Vec::new(),
            allow_tcp_connect: Vec::new(),
            allow_netlink: false,
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    wall_time_secs: Spanned<i64>,
    cpu_secs: Spanned<i64>,
    memory: Spanned<ByteSize>,
    processes: Spanned<i64>,
    file_size: Spanned<ByteSize>,
    open_files: Spanned<i64>,
    output_bytes: Spanned<ByteSize>,
    workspace_size: Spanned<ByteSize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEnvironment {
    path: Spanned<String>,
    home: Spanned<String>,
    tz: String,
    lang: String,
    hostname: Spanned<String>,
    #[serde(default)]
    pass: Vec<Spanned<String>>,
    #[serde(default)]
    set: BTreeMap<String, Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProtections {
    required: Spanned<Vec<Protection>>,
    #[serde(default)]
    best_effort: Vec<Protection>,
}

/// Names an environment variable may have (also what `pass` and `set` accept).
fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Variables the sandbox sets itself; a policy may not pass or override them.
const RESERVED_ENV: &[&str] = &["PATH", "HOME", "TZ", "LANG", "HOSTNAME", "PWD"];

struct Validator<'a> {
    source_name: &'a str,
    text: &'a str,
}

impl Validator<'_> {
    fn invalid(
        &self,
        key: &str,
        span: Range<usize>,
        problem: String,
        expected: &str,
    ) -> PolicyError {
        PolicyError::Invalid {
            source_name: self.source_name.to_string(),
            key: key.to_string(),
            line: line_col(self.text, span.start).0,
            problem,
            expected: expected.to_string(),
        }
    }

    fn absolute(&self, key: &str, value: &Spanned<String>) -> Result<PathBuf, PolicyError> {
        let path = Path::new(value.get_ref());
        let clean = path.is_absolute()
            && path
                .components()
                .all(|c| !matches!(c, std::path::Component::ParentDir));
        if !clean || value.get_ref().contains('\0') {
            return Err(self.invalid(
                key,
                value.span(),
                format!("is `{}`", value.get_ref()),
                "an absolute path without `..`",
            ));
        }
        Ok(path.to_path_buf())
    }

    fn in_range(
        &self,
        key: &str,
        value: &Spanned<i64>,
        min: i64,
        max: i64,
    ) -> Result<u64, PolicyError> {
        let v = *value.get_ref();
        if v < min || v > max {
            return Err(self.invalid(
                key,
                value.span(),
                format!("is {v}"),
                &format!("an integer from {min} to {max}"),
            ));
        }
        Ok(v as u64)
    }

    fn bytes_in_range(
        &self,
        key: &str,
        value: &Spanned<ByteSize>,
        min: u64,
        max: u64,
    ) -> Result<u64, PolicyError> {
        let v = value.get_ref().0;
        if v < min || v > max {
            return Err(self.invalid(
                key,
                value.span(),
                format!("is {v} bytes"),
                &format!("a size from {min} to {max} bytes"),
            ));
        }
        Ok(v)
    }

    fn ports(&self, key: &str, values: &[Spanned<i64>]) -> Result<Vec<u16>, PolicyError> {
        let mut ports = values
            .iter()
            .map(|v| self.in_range(key, v, 1, 65535).map(|p| p as u16))
            .collect::<Result<Vec<_>, _>>()?;
        ports.sort_unstable();
        ports.dedup();
        Ok(ports)
    }

    fn policy(&self, name: &str, raw: RawPolicy) -> Result<Policy, PolicyError> {
        const GIB: u64 = 1 << 30;
        const MIB: u64 = 1 << 20;
        let fs = &raw.filesystem;
        let read_only = fs
            .read_only
            .iter()
            .map(|p| self.absolute("filesystem.read_only", p))
            .collect::<Result<Vec<_>, _>>()?;
        let hidden = fs
            .hidden
            .iter()
            .map(|p| self.absolute("filesystem.hidden", p))
            .collect::<Result<Vec<_>, _>>()?;
        let workspace = self.absolute("filesystem.workspace", &fs.workspace)?;
        if workspace == Path::new("/") {
            return Err(self.invalid(
                "filesystem.workspace",
                fs.workspace.span(),
                "is `/`".into(),
                "a directory below `/`, such as `/workspace`",
            ));
        }
        let mut workspace_aliases = Vec::new();
        for alias in &fs.workspace_aliases {
            let path = self.absolute("filesystem.workspace_aliases", alias)?;
            if path == workspace || path == Path::new("/") {
                return Err(self.invalid(
                    "filesystem.workspace_aliases",
                    alias.span(),
                    format!("repeats `{}`", path.display()),
                    "a path other than `/` and the workspace itself",
                ));
            }
            workspace_aliases.push(path);
        }
        for hole in &fs.hidden {
            let path = Path::new(hole.get_ref());
            if path.starts_with(&workspace) {
                return Err(self.invalid(
                    "filesystem.hidden",
                    hole.span(),
                    format!("hides `{}` inside the workspace", path.display()),
                    "paths outside the workspace (use a task's files to shape the workspace)",
                ));
            }
        }
        let tmp_bytes = self.bytes_in_range("filesystem.tmp_size", &fs.tmp_size, MIB, 64 * GIB)?;

        let network = Network {
            mode: raw.network.mode,
            allow_tcp_bind: self.ports("network.allow_tcp_bind", &raw.network.allow_tcp_bind)?,
            allow_tcp_connect: self
                .ports("network.allow_tcp_connect", &raw.network.allow_tcp_connect)?,
            allow_netlink: raw.network.allow_netlink,
        };

        let l = &raw.limits;
        let limits = Limits {
            wall_time_secs: self.in_range("limits.wall_time_secs", &l.wall_time_secs, 1, 86_400)?,
            cpu_secs: self.in_range("limits.cpu_secs", &l.cpu_secs, 1, 86_400)?,
            memory_bytes: self.bytes_in_range("limits.memory", &l.memory, 16 * MIB, 1 << 40)?,
            processes: self.in_range("limits.processes", &l.processes, 2, 1_000_000)?,
            file_size_bytes: self.bytes_in_range("limits.file_size", &l.file_size, 1, 1 << 40)?,
            open_files: self.in_range("limits.open_files", &l.open_files, 16, 1 << 20)?,
            output_bytes: self.bytes_in_range("limits.output_bytes", &l.output_bytes, 1, GIB)?,
            workspace_bytes: self.bytes_in_range(
                "limits.workspace_size",
                &l.workspace_size,
                MIB,
                1 << 40,
            )?,
        };

        let e = &raw.environment;
        if !e.path.get_ref().split(':').all(|p| p.starts_with('/')) {
            return Err(self.invalid(
                "environment.path",
                e.path.span(),
                format!("is `{}`", e.path.get_ref()),
                "a `:`-separated list of absolute directories",
            ));
        }
        let hostname = e.hostname.get_ref();
        if hostname.is_empty()
            || hostname.len() > 64
            || !hostname
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
        {
            return Err(self.invalid(
                "environment.hostname",
                e.hostname.span(),
                format!("is `{hostname}`"),
                "1 to 64 letters, digits, `-` or `.`",
            ));
        }
        let mut pass = Vec::new();
        for var in &e.pass {
            let name = var.get_ref();
            if !is_env_name(name) || RESERVED_ENV.contains(&name.as_str()) {
                return Err(self.invalid(
                    "environment.pass",
                    var.span(),
                    format!("names `{name}`"),
                    "a variable name (letters, digits, `_`) other than PATH, HOME, TZ, LANG, HOSTNAME, PWD",
                ));
            }
            pass.push(name.clone());
        }
        let mut set = BTreeMap::new();
        for (key, value) in &e.set {
            if !is_env_name(key) || RESERVED_ENV.contains(&key.as_str()) {
                return Err(self.invalid(
                    &format!("environment.set.{key}"),
                    value.span(),
                    "is not a settable variable".into(),
                    "a variable name (letters, digits, `_`) other than PATH, HOME, TZ, LANG, HOSTNAME, PWD",
                ));
            }
            set.insert(key.clone(), value.get_ref().clone());
        }
        let environment = Environment {
            path: e.path.get_ref().clone(),
            home: self.absolute("environment.home", &e.home)?,
            tz: e.tz.clone(),
            lang: e.lang.clone(),
            hostname: hostname.clone(),
            pass,
            set,
        };

        let required = raw.protections.required.get_ref().clone();
        let best_effort = raw.protections.best_effort.clone();
        if let Some(both) = required.iter().find(|p| best_effort.contains(p)) {
            return Err(self.invalid(
                "protections",
                raw.protections.required.span(),
                format!("lists `{both}` as both required and best_effort"),
                "each protection in at most one list",
            ));
        }
        if let Some(missing) = Protection::ALL
            .iter()
            .find(|p| !required.contains(p) && !best_effort.contains(p))
        {
            return Err(self.invalid(
                "protections",
                raw.protections.required.span(),
                format!("does not class `{missing}`"),
                "every protection listed as required or best_effort (unlisted would be ambiguous)",
            ));
        }

        Ok(Policy {
            name: name.to_string(),
            description: raw.description,
            filesystem: Filesystem {
                read_only,
                hidden,
                workspace,
                workspace_aliases,
                workspace_writable: fs.workspace_writable,
                tmp_bytes,
            },
            network,
            limits,
            environment,
            protections: Protections {
                required,
                best_effort,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn default_text() -> &'static str {
        BUNDLED[0].1
    }

    #[test]
    fn every_bundled_policy_parses() {
        for (name, _) in BUNDLED {
            let policy = Policy::bundled(name).unwrap();
            assert_eq!(&policy.name, name);
        }
    }

    #[test]
    fn default_policy_has_no_network_and_a_writable_workspace() {
        let p = Policy::bundled("default").unwrap();
        assert_eq!(p.network.mode, NetworkMode::None);
        assert!(p.network.allow_tcp_connect.is_empty());
        assert!(p.filesystem.workspace_writable);
        assert_eq!(p.filesystem.workspace, Path::new("/workspace"));
        assert!(
            p.filesystem
                .workspace_aliases
                .contains(&PathBuf::from("/root/.openclaw/workspace"))
        );
        assert_eq!(p.environment.tz, "UTC");
    }

    #[test]
    fn verifier_policy_has_a_read_only_workspace() {
        assert!(
            !Policy::bundled("verifier")
                .unwrap()
                .filesystem
                .workspace_writable
        );
    }

    #[test]
    fn strict_is_tighter_than_default() {
        let d = Policy::bundled("default").unwrap();
        let s = Policy::bundled("strict").unwrap();
        assert!(s.limits.memory_bytes < d.limits.memory_bytes);
        assert!(s.limits.processes < d.limits.processes);
        assert!(s.limits.wall_time_secs < d.limits.wall_time_secs);
        assert!(s.filesystem.hidden.len() > d.filesystem.hidden.len());
        assert!(
            d.filesystem
                .hidden
                .iter()
                .all(|h| s.filesystem.hidden.contains(h))
        );
    }

    #[test]
    fn typo_in_a_key_names_the_key_and_the_line() {
        let text = default_text().replace("cpu_secs", "cpu_sec");
        let err = Policy::parse("t", "t.toml", &text).unwrap_err();
        let line = text.lines().position(|l| l.starts_with("cpu_sec")).unwrap() + 1;
        let msg = err.to_string();
        assert!(msg.contains("cpu_sec"), "{msg}");
        assert!(msg.contains(&format!("line {line}")), "{msg}");
        assert!(msg.contains("expected"), "{msg}");
    }

    #[test]
    fn wrong_type_names_the_line_and_what_is_expected() {
        let text = default_text().replace("processes = 256", "processes = \"many\"");
        let err = Policy::parse("t", "t.toml", &text).unwrap_err();
        let line = text
            .lines()
            .position(|l| l.starts_with("processes"))
            .unwrap()
            + 1;
        let msg = err.to_string();
        assert!(msg.contains(&format!("line {line}")), "{msg}");
        assert!(msg.contains("integer"), "{msg}");
    }

    #[test]
    fn impossible_value_names_the_key_the_line_and_the_range() {
        let text = default_text().replace("processes = 256", "processes = 0");
        let err = Policy::parse("t", "t.toml", &text).unwrap_err();
        let line = text
            .lines()
            .position(|l| l.starts_with("processes"))
            .unwrap()
            + 1;
        match err {
            PolicyError::Invalid {
                key,
                line: l,
                expected,
                ..
            } => {
                assert_eq!(key, "limits.processes");
                assert_eq!(l, line);
                assert!(expected.contains("from 2"));
            }
            other => panic!("unexpected {other}"),
        }
    }

    #[test]
    fn bad_byte_size_is_explained() {
        let text = default_text().replace("memory = \"2GiB\"", "memory = \"2 lots\"");
        let msg = Policy::parse("t", "t.toml", &text).unwrap_err().to_string();
        assert!(msg.contains("not a byte count"), "{msg}");
    }

    #[test]
    fn relative_paths_and_dotdot_are_refused() {
        let text = default_text().replace("workspace = \"/workspace\"", "workspace = \"ws\"");
        let err = Policy::parse("t", "t.toml", &text).unwrap_err();
        assert!(
            matches!(err, PolicyError::Invalid { ref key, .. } if key == "filesystem.workspace")
        );
        let text = default_text().replace("\"/usr\"", "\"/usr/../etc\"");
        let err = Policy::parse("t", "t.toml", &text).unwrap_err();
        assert!(
            matches!(err, PolicyError::Invalid { ref key, .. } if key == "filesystem.read_only")
        );
    }

    #[test]
    fn ports_out_of_range_are_refused() {
        let text = default_text().replace("allow_tcp_bind = []", "allow_tcp_bind = [70000]");
        let err = Policy::parse("t", "t.toml", &text).unwrap_err();
        assert!(
            matches!(err, PolicyError::Invalid { ref key, .. } if key == "network.allow_tcp_bind")
        );
    }

    #[test]
    fn a_protection_in_both_lists_is_refused() {
        let text = default_text().replace("best_effort = [", "best_effort = [\"seccomp\", ");
        let msg = Policy::parse("t", "t.toml", &text).unwrap_err().to_string();
        assert!(msg.contains("both required and best_effort"), "{msg}");
    }

    #[test]
    fn reserved_environment_variables_cannot_be_passed() {
        let text = default_text().replace("pass = []", "pass = [\"PATH\"]");
        let err = Policy::parse("t", "t.toml", &text).unwrap_err();
        assert!(matches!(err, PolicyError::Invalid { ref key, .. } if key == "environment.pass"));
    }

    #[test]
    fn unknown_bundled_name_lists_the_known_ones() {
        let msg = Policy::load("defualt").unwrap_err().to_string();
        assert!(
            msg.contains("`default`") && msg.contains("`strict`"),
            "{msg}"
        );
    }

    #[test]
    fn byte_sizes_parse_with_binary_units() {
        assert_eq!(parse_byte_size("256MiB"), Some(256 << 20));
        assert_eq!(parse_byte_size("1G"), Some(1 << 30));
        assert_eq!(parse_byte_size("4096"), Some(4096));
        assert_eq!(parse_byte_size("12 parsecs"), None);
        assert_eq!(parse_byte_size("99999999999T"), None);
    }
}
