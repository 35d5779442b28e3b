//! The texts an imported Harbor task is written with: `env.toml`, `policy.toml` (checked to
//! load), `task.toml` (Harbor's verifier as the command), `docs.md`, `source.json`.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};

use super::super::{Content, ImportError, PlannedFile, prompt_toml, source_table, toml_string};
use super::config::Config;
use super::{MOUNTS, ORIGIN, TESTS_DIR, VERIFY};
use crate::spec::env::BUILTIN_TOOLS;

pub(super) fn env_toml(env: &str, id: &str, image: Option<&str>) -> String {
    let tools: Vec<String> = BUILTIN_TOOLS.iter().map(|t| toml_string(t)).collect();
    let mut text = format!(
        "# Imported by `envcraft import harbor`; the clock is fixed (Harbor has none).\n\
         name = {}\n\
         description = {}\n\
         policy = \"policy.toml\"\n\
         tools = [{}]\n\
         base_time = {}\n\
         time_step_secs = 0\n",
        toml_string(env),
        toml_string(&format!("Harbor task {id}, imported unchanged")),
        tools.join(", "),
        toml_string(super::super::IMPORT_BASE_TIME),
    );
    if let Some(image) = image {
        text.push_str(&format!("image = {}\n", toml_string(image)));
    }
    text
}

/// The policy of an imported task: the `default` policy's sandbox, the workspace at
/// `workdir` with Harbor's mount points, the task's variables and limits.
pub(super) fn policy_toml<'a>(
    workdir: &str,
    c: &Config,
    vars: impl Iterator<Item = &'a (String, String)>,
) -> String {
    let mut path = "/usr/local/bin:/usr/bin:/bin:/.envcraft/bin".to_string();
    let mut set = BTreeMap::new();
    for (name, value) in vars {
        match name.as_str() {
            "PATH" => path = value.replace("$PATH", &path),
            _ => {
                set.insert(name.clone(), value.clone());
            }
        }
    }
    let set: Vec<String> = set
        .iter()
        .map(|(k, v)| format!("{} = {}", toml_string(k), toml_string(v)))
        .collect();
    let mounts: Vec<String> = MOUNTS
        .iter()
        .map(|(at, dir)| format!("{} = {}", toml_string(at), toml_string(dir)))
        .collect();
    let storage = c
        .storage_mb
        .map(|m| format!("{m}MiB"))
        .unwrap_or("4GiB".into());
    let wall = c.agent_timeout.unwrap_or(0).clamp(1800, 86_400);
    format!(
        "# A Harbor task's sandbox (`envcraft import harbor`): the default policy's, the workspace at\n\
         # the task's working directory, Harbor's /logs and /solution as workspace mount points.\n\
         description = \"A Harbor task: no network; the workspace and Harbor's paths read-write\"\n\n\
         [filesystem]\n\
         read_only = [\"/usr\", \"/bin\", \"/sbin\", \"/lib\", \"/lib32\", \"/lib64\", \"/etc\"]\n\
         hidden = [\"/etc/shadow\", \"/etc/shadow-\", \"/etc/gshadow\", \"/etc/gshadow-\", \"/etc/sudoers\", \"/etc/sudoers.d\", \"/etc/ssh\", \"/etc/ssl/private\", \"/etc/security/opasswd\"]\n\
         workspace = {}\n\
         workspace_mounts = {{ {} }}\n\
         workspace_writable = true\n\
         tmp_size = \"1GiB\"\n\n\
         [network]\nmode = \"none\"\nallow_tcp_bind = []\nallow_tcp_connect = []\nallow_netlink = false\n\n\
         [limits]\n\
         wall_time_secs = {wall}\ncpu_secs = {wall}\nmemory = \"{}\"\nprocesses = 1024\nfile_size = \"{storage}\"\n\
         open_files = 4096\noutput_bytes = \"8MiB\"\nworkspace_size = \"{storage}\"\ntranscript_bytes = \"256MiB\"\n\n\
         [environment]\npath = {}\nhome = \"/root\"\ntz = \"UTC\"\nlang = \"C.UTF-8\"\nhostname = \"envcraft\"\npass = []\n\
         set = {{ {} }}\n\n\
         [protections]\n\
         required = [\"user_namespace\", \"mount_namespace\", \"pid_namespace\", \"network_namespace\", \"ipc_namespace\", \"uts_namespace\", \"landlock_filesystem\", \"seccomp\", \"no_new_privs\", \"capabilities_dropped\", \"rlimits\", \"workspace_size_limit\"]\n\
         best_effort = [\"cgroup_namespace\", \"overlay_workspace\", \"landlock_network\", \"landlock_scope\", \"cgroup_limits\"]\n",
        toml_string(workdir),
        mounts.join(", "),
        c.memory_mb
            .map(|m| format!("{m}MiB"))
            .unwrap_or("2GiB".into()),
        toml_string(&path),
        set.join(", "),
    )
}

/// Refuse the task now when its policy does not load (a variable the policy owns, say).
pub(super) fn check_policy(file: &PlannedFile, task: &Path) -> Result<(), ImportError> {
    if let Content::Text(text) = &file.content {
        crate::spec::policy::Policy::parse("policy", "policy.toml", text).map_err(|e| {
            ImportError::Unrepresentable {
                path: task.to_path_buf(),
                reason: format!(
                    "its sandbox policy does not load: {}",
                    crate::error::chain(&e)
                ),
            }
        })?;
    }
    Ok(())
}

/// `task.toml`: the instruction as it is, Harbor's verifier as the command.
pub(super) fn task_toml(prompt: &str, id: &str, c: &Config) -> String {
    let exports: String = c
        .verifier_env
        .iter()
        .map(|(k, v)| format!("export {k}='{}'; ", v.replace('\'', "'\\''")))
        .collect();
    format!(
        "{}\n[verifier]\n\
         # Harbor's verifier: tests/test.sh (at /tests) after the agent, the reward it writes to\n\
         # /logs/verifier/reward.json or reward.txt.\n\
         kind = \"command\"\n\
         command = {}\n\
         grader_dir = {}\n\
         timeout_secs = {}\n{}",
        prompt_toml(&[prompt.to_string()]),
        toml_string(&format!("{exports}{VERIFY}")),
        toml_string(TESTS_DIR),
        c.verifier_timeout,
        source_table(ORIGIN, id, "see the task's source"),
    )
}

pub(super) fn docs_md(id: &str, workdir: &str, notes: &[String]) -> String {
    let mut docs = format!(
        "# Harbor task {id}\n\n\
         Imported from Harbor by `envcraft import`. Your working directory is {workdir} (the \
         workspace); /logs/agent is yours for logs. There is no network.\n"
    );
    if !notes.is_empty() {
        docs.push_str("\nNotes on the import:\n\n");
        for note in notes {
            docs.push_str(&format!("- {note}\n"));
        }
    }
    docs
}

pub(super) fn source_json(
    id: &str,
    workdir: &str,
    image: Option<&str>,
    needs: &[(String, String)],
    notes: &[String],
) -> String {
    let needs: Vec<Value> = needs
        .iter()
        .map(|(need, why)| json!({"need": need, "why": why}))
        .collect();
    let doc = json!({
        "format": "harbor",
        "origin": ORIGIN,
        "id": id,
        "workdir": workdir,
        "image": image,
        "grader": "tests/test.sh at /tests after the agent, as Harbor's verifier runs it; the reward from /logs/verifier/reward.json (the mean of its numbers) or reward.txt",
        "unmet_needs": needs,
        "notes": notes,
    });
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_policy_of_an_import_loads() {
        let c = Config::default();
        let vars = [
            ("PATH".to_string(), "/opt/bin:$PATH".to_string()),
            ("A".into(), "1".into()),
        ];
        let text = policy_toml("/app", &c, vars.iter());
        let policy = crate::spec::policy::Policy::parse("p", "p.toml", &text).unwrap();
        assert_eq!(policy.filesystem.workspace, Path::new("/app"));
        assert!(
            policy
                .environment
                .path
                .starts_with("/opt/bin:/usr/local/bin")
        );
        assert_eq!(policy.filesystem.workspace_mounts.len(), 2);
    }
}
