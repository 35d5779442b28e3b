//! What killed builds leave (`image gc`): the builder's image `localhost/envcraft-build-*` in
//! the builder's storage (a build removes it as it ends; a killed one cannot), and its scratch
//! directory `STATE/images/builds/.build-*`.
//!
//! Promises: a build in progress is never touched. A build holds a lock on its scratch
//! directory until its image is removed (`Store::build_lock`): an image whose scratch
//! directory in this store is locked is kept, whatever its age. An image of no build of this
//! store (another state root's, say, whose lock cannot be seen) is removed only when it was
//! made more than [`GRACE`] ago: the builder tags the image as its last step, and the build
//! removes it once written out, seconds later. A scratch directory goes when its lock is free
//! and it is older than [`GRACE`] (a build makes it, then takes its lock).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::Store;
use super::build::{BUILDERS, TAG_PREFIX, installed};

/// How old a builder's image or scratch directory of no build in progress must be to be taken
/// for a killed build's.
pub const GRACE: Duration = Duration::from_secs(3600);

/// What was removed, and what could not be looked at.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Leftovers {
    /// The builder images removed (their names).
    pub build_images_removed: Vec<String>,
    /// The builder images kept: a build of this store holds them, or they are younger than
    /// the grace period.
    pub build_images_kept: Vec<String>,
    /// The scratch directories removed.
    pub build_dirs_removed: usize,
    /// Why a builder's storage could not be listed (the builder's words), if it could not.
    pub problems: Vec<String>,
}

/// Remove the leftovers of killed builds older than `grace` (see the module's text).
pub fn remove(store: &Store, grace: Duration) -> Leftovers {
    let mut out = Leftovers::default();
    let builds = store.builds_dir();
    let in_progress = |suffix: &str| -> bool {
        let Ok(entries) = std::fs::read_dir(&builds) else {
            return false;
        };
        entries.flatten().any(|e| {
            let name = e.file_name().to_string_lossy().to_lowercase();
            name.strip_prefix(".build-") == Some(suffix) && locked(&e.path().join("lock"))
        })
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut seen = std::collections::BTreeSet::new();
    for builder in BUILDERS {
        let Some(program) = installed(builder) else {
            continue;
        };
        let images = match list(&program) {
            Ok(images) => images,
            Err(why) => {
                out.problems
                    .push(format!("{} images: {why}", builder.program()));
                continue;
            }
        };
        for (name, created) in images {
            if !seen.insert(name.clone()) {
                continue;
            }
            // localhost/envcraft-build-PID-SUFFIX[:latest]
            let bare = name.strip_suffix(":latest").unwrap_or(&name);
            let suffix = bare[TAG_PREFIX.len()..]
                .split_once('-')
                .map(|(_, s)| s)
                .unwrap_or("");
            let old = now.saturating_sub(created) > grace.as_secs();
            if !old || in_progress(suffix) {
                out.build_images_kept.push(name);
                continue;
            }
            let removed = Command::new(&program)
                .args(["rmi", "-f", &name])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .output();
            match removed {
                Ok(o) if o.status.success() => out.build_images_removed.push(name),
                Ok(o) => out.problems.push(format!(
                    "{} rmi {name}: {}",
                    builder.program(),
                    String::from_utf8_lossy(&o.stderr).trim()
                )),
                Err(e) => out
                    .problems
                    .push(format!("cannot run {}: {e}", program.display())),
            }
        }
    }
    if let Ok(entries) = std::fs::read_dir(&builds) {
        for entry in entries.flatten() {
            let path = entry.path();
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > grace);
            let ours = entry.file_name().to_string_lossy().starts_with(".build-");
            if ours && old && !locked(&path.join("lock")) && std::fs::remove_dir_all(&path).is_ok()
            {
                out.build_dirs_removed += 1;
            }
        }
    }
    out
}

/// Whether `path` is a lock some process holds.
fn locked(path: &Path) -> bool {
    match std::fs::File::open(path) {
        Ok(file) => {
            nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).is_err()
        }
        Err(_) => false,
    }
}

/// The builder images in `program`'s storage: name, made when (Unix seconds). Podman says
/// `Names` and `Created`, Buildah `names` and `created`.
fn list(program: &Path) -> Result<Vec<(String, u64)>, String> {
    let json_flag = match program.file_name().and_then(|n| n.to_str()) {
        Some("buildah") => vec!["images", "--json"],
        _ => vec!["images", "--format", "json"],
    };
    let out = Command::new(program)
        .args(json_flag)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    if text.trim().is_empty() || text.trim() == "null" {
        return Ok(Vec::new());
    }
    let images: Vec<serde_json::Value> =
        serde_json::from_str(&text).map_err(|e| format!("unreadable list ({e})"))?;
    Ok(parse(&images))
}

fn parse(images: &[serde_json::Value]) -> Vec<(String, u64)> {
    let mut found = Vec::new();
    for image in images {
        let created = image
            .get("Created")
            .or_else(|| image.get("created"))
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0);
        let names = image
            .get("Names")
            .or_else(|| image.get("names"))
            .and_then(serde_json::Value::as_array);
        for name in names.into_iter().flatten().filter_map(|n| n.as_str()) {
            if name.starts_with(TAG_PREFIX) {
                found.push((name.to_string(), created));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn both_builders_lists_are_read_and_only_build_images_kept() {
        let podman: Vec<serde_json::Value> = serde_json::from_str(
            r#"[{"Names":["localhost/envcraft-build-7-ab:latest"],"Created":5},
                {"Names":["localhost/other:1"],"Created":0}]"#,
        )
        .unwrap();
        let buildah: Vec<serde_json::Value> = serde_json::from_str(
            r#"[{"names":["localhost/envcraft-build-8-cd:latest"],"created":9}]"#,
        )
        .unwrap();
        assert_eq!(
            parse(&podman),
            vec![("localhost/envcraft-build-7-ab:latest".to_string(), 5)]
        );
        assert_eq!(
            parse(&buildah),
            vec![("localhost/envcraft-build-8-cd:latest".to_string(), 9)]
        );
    }
}
