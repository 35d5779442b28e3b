//! Tasks the server has loaded, kept while the files they were loaded from are unchanged: a
//! create of a task opened before reads the identity of eight paths (a `statx` each) instead of
//! reading and checking its task, environment and reference solution again (a fifth of an
//! idle create's time in the server).
//!
//! A task is loaded again when any of these changed (device, inode, size, modification or
//! change time, or whether it exists): the task's directory (whose change time moves when an
//! entry of it is made, removed or renamed), its `task.toml`, `solution.jsonl` and `files`,
//! and its environment's directory, `env.toml`, `docs.md` and `files`. The policy and skills
//! are read by each create itself (`Session::create`), and the files a verifier names when it
//! runs. An edit that keeps a file's size within the filesystem's timestamp granularity of the
//! last load can go unseen until the next change; an edited task is otherwise what a session
//! opened after the edit gets.
//!
//! Bounded: at most [`MOST`] tasks; past that the cache starts over.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::spec::task::{TaskError, TaskSpec};

/// The most tasks kept.
pub const MOST: usize = 4096;

/// What identifies one version of a path: `None` where nothing is there.
type Identity = Option<(u64, u64, u64, i64, i64, i64, i64)>;

struct Kept {
    task: TaskSpec,
    stamp: Vec<Identity>,
    /// Which load this is (the count of loads in this process when it was made).
    load: u64,
}

static LOADS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

static KEPT: Mutex<Option<HashMap<PathBuf, Kept>>> = Mutex::new(None);

fn identity(path: &Path) -> Identity {
    let m = std::fs::metadata(path).ok()?;
    Some((
        m.dev(),
        m.ino(),
        m.size(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
    ))
}

/// The paths whose identity stands for the task in `dir` (`ENV/tasks/ID`).
fn watched(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = ["", "task.toml", "solution.jsonl", "files"]
        .iter()
        .map(|name| dir.join(name))
        .collect();
    if let Some(env) = dir.parent().and_then(Path::parent) {
        paths.extend(
            ["", "env.toml", "docs.md", "files"]
                .iter()
                .map(|name| env.join(name)),
        );
    }
    paths
}

fn stamp(dir: &Path) -> Vec<Identity> {
    watched(dir).iter().map(|p| identity(p)).collect()
}

/// The task in `dir`, from the cache while its files are unchanged, else loaded (and kept when
/// it loads).
pub fn load(dir: &Path) -> Result<TaskSpec, TaskError> {
    let before = stamp(dir);
    {
        let kept = KEPT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(k) = kept.as_ref().and_then(|m| m.get(dir))
            && k.stamp == before
        {
            return Ok(k.task.clone());
        }
    }
    let task = TaskSpec::load(dir)?;
    let load = LOADS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // Kept only when nothing changed while it loaded: else the next create loads it again.
    if stamp(dir) == before {
        let mut kept = KEPT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let map = kept.get_or_insert_with(HashMap::new);
        if map.len() >= MOST && !map.contains_key(dir) {
            map.clear();
        }
        let replaced = map.insert(
            dir.to_path_buf(),
            Kept {
                task: task.clone(),
                stamp: before,
                load,
            },
        );
        if let Some(old) = replaced {
            tracing::debug!(task = %dir.display(), load, previous = old.load, "task loaded again: its files changed");
        }
    }
    Ok(task)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// Which load the kept task in `dir` came from.
    fn kept_load(dir: &Path) -> Option<u64> {
        let kept = KEPT.lock().unwrap();
        kept.as_ref().and_then(|m| m.get(dir)).map(|k| k.load)
    }

    /// A one-task environment under a fresh directory: (root, task dir).
    fn env(tag: &str) -> (tempfile::TempDir, PathBuf) {
        let root = tempfile::Builder::new().prefix(tag).tempdir().unwrap();
        let env = root.path().join("demo");
        std::fs::create_dir_all(env.join("files")).unwrap();
        std::fs::create_dir_all(env.join("tasks/one")).unwrap();
        std::fs::write(
            env.join("env.toml"),
            "name = \"demo\"\ndescription = \"d\"\npolicy = \"default\"\ntools = [\"read\"]\nbase_time = \"2026-03-02T09:00:00Z\"\n",
        )
        .unwrap();
        std::fs::write(env.join("docs.md"), "# Demo\n").unwrap();
        std::fs::write(env.join("tasks/one/task.toml"), task_toml("first")).unwrap();
        let dir = std::fs::canonicalize(env.join("tasks/one")).unwrap();
        (root, dir)
    }

    fn task_toml(prompt: &str) -> String {
        format!("prompt = \"{prompt}\"\n[verifier]\nkind = \"manifest\"\nextra = \"deny\"\n")
    }

    fn prompt(task: &TaskSpec) -> String {
        task.turns[0].clone()
    }

    #[test]
    fn an_unchanged_task_comes_from_the_cache_and_an_edited_one_is_loaded_again() {
        let (_root, dir) = env("envcraft-task-cache-edit");
        let first = load(&dir).unwrap();
        assert_eq!(prompt(&first), "first");
        let loaded = kept_load(&dir).expect("kept");
        // Kept: the same files give the same task, not loaded again.
        assert_eq!(prompt(&load(&dir).unwrap()), "first");
        assert_eq!(kept_load(&dir), Some(loaded));
        // An edit of another size, and one of the same size: both are seen (the change time
        // moves with each write).
        std::fs::write(dir.join("task.toml"), task_toml("second, longer")).unwrap();
        assert_eq!(prompt(&load(&dir).unwrap()), "second, longer");
        assert_ne!(kept_load(&dir), Some(loaded));
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(dir.join("task.toml"), task_toml("third!, longer")).unwrap();
        assert_eq!(prompt(&load(&dir).unwrap()), "third!, longer");
    }

    #[test]
    fn a_file_added_beside_the_task_or_an_environment_edit_loads_it_again() {
        let (_root, dir) = env("envcraft-task-cache-files");
        assert!(load(&dir).unwrap().files.is_none());
        std::fs::create_dir(dir.join("files")).unwrap();
        assert_eq!(load(&dir).unwrap().files, Some(dir.join("files")));
        let env_dir = dir.parent().and_then(Path::parent).unwrap().to_path_buf();
        std::fs::write(env_dir.join("docs.md"), "# Demo, edited\n").unwrap();
        assert_eq!(load(&dir).unwrap().env.docs, "# Demo, edited\n");
        // A broken edit is refused, and not kept: the next load refuses it too.
        std::fs::write(dir.join("task.toml"), "prompt = \n").unwrap();
        assert!(load(&dir).is_err());
        assert!(load(&dir).is_err());
        // Mended, it loads again.
        std::fs::write(dir.join("task.toml"), task_toml("mended")).unwrap();
        assert_eq!(prompt(&load(&dir).unwrap()), "mended");
    }
}
