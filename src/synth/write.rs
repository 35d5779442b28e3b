//! The files of a synthesized task, and the places they go: a staging copy of the environment
//! while candidates are made and audited, then `OUT/ENV/tasks/synth-NNNN/` (or the
//! environment's own `tasks/`) for the ones kept. Every file is written whole and named by
//! what it is, never by a time or a path of this machine, so the same run writes the same
//! bytes.

use std::io;
use std::path::{Path, PathBuf};

use super::chain::Chain;
use super::intent::Intent;
use crate::import::{prompt_toml, toml_string};

/// The license written in a synthesized task's `[source]`: the task is made from the
/// environment, under whatever license the environment has.
pub const LICENSE: &str = "LicenseRef-same-as-environment";

/// A candidate's `task.toml`.
pub fn task_toml(env: &str, seed: u64, index: usize, chain: &Chain, intent: &Intent) -> String {
    let nodes: Vec<String> = chain.nodes.iter().map(|n| toml_string(n)).collect();
    format!(
        "# Synthesized by `envcraft synth` (seed {seed}): a chain of {} call(s) along the tool\n\
         # graph, run in a session of the environment; expected.json records the state it left.\n\
         {}\n\
         [verifier]\n\
         kind = \"manifest\"\n\
         extra = \"deny\"\n\
         all_or_nothing = true\n\
         \n\
         [source]\n\
         origin = \"synth\"\n\
         id = {}\n\
         license = {}\n\
         seed = {seed}\n\
         chain = [{}]\n",
        chain.nodes.len(),
        prompt_toml(&intent.turns).trim_end(),
        toml_string(&format!("{env}/seed-{seed}/candidate-{index}")),
        toml_string(LICENSE),
        nodes.join(", "),
    )
}

/// The `task.toml` a candidate runs under while its chain is sampled (the prompt is not yet
/// known; nothing reads it).
pub const PROVISIONAL_TASK: &str =
    "prompt = \"(being synthesized)\"\n\n[verifier]\nkind = \"manifest\"\nextra = \"deny\"\n";

/// Write `text` to `path` whole: a temporary file beside it, renamed over it.
pub fn write_whole(path: &Path, text: &str) -> io::Result<()> {
    let tmp = path.with_extension("tmp-synth");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// Copy an environment's directory (everything but `tasks/`) to `dest`, which must not exist.
pub fn copy_env(env_dir: &Path, dest: &Path) -> Result<(), String> {
    let fail = |what: &str, e: &dyn std::fmt::Display| format!("{what}: {e}");
    std::fs::create_dir_all(dest).map_err(|e| fail(&dest.display().to_string(), &e))?;
    let mut entries: Vec<_> = std::fs::read_dir(env_dir)
        .map_err(|e| fail(&env_dir.display().to_string(), &e))?
        .collect::<Result<_, _>>()
        .map_err(|e| fail(&env_dir.display().to_string(), &e))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        if entry.file_name() == "tasks" {
            continue;
        }
        let from = entry.path();
        let to = dest.join(entry.file_name());
        let meta =
            std::fs::symlink_metadata(&from).map_err(|e| fail(&from.display().to_string(), &e))?;
        if meta.is_dir() {
            crate::workspace::copy::copy_tree(&from, &to)
                .map_err(|e| fail(&from.display().to_string(), &crate::error::chain(&e)))?;
        } else if meta.is_file() {
            std::fs::copy(&from, &to).map_err(|e| fail(&from.display().to_string(), &e))?;
        }
    }
    std::fs::create_dir_all(dest.join("tasks")).map_err(|e| fail("tasks", &e))?;
    Ok(())
}

/// The first free `synth-NNNN` numbers in `tasks_dir`: one past the highest there.
pub fn next_number(tasks_dir: &Path) -> usize {
    std::fs::read_dir(tasks_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_prefix("synth-")?
                .parse::<usize>()
                .ok()
        })
        .max()
        .map_or(1, |n| n + 1)
}

/// Where a kept task goes.
pub fn kept_dir(tasks_dir: &Path, number: usize) -> PathBuf {
    tasks_dir.join(format!("synth-{number:04}"))
}
