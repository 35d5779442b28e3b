//! Code checks: a grader command's output turned into a score, never an exception.
//!
//! A grader prints either a JSON object of named sub-scores in [0, 1] (the score is their
//! mean; `true`/`false` count as 1/0) or a number in [0, 1] on its last line (the ClawGym
//! convention). Anything else (no output, garbage, a number out of range, a crash, a timeout)
//! scores 0 with the reason recorded.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::{Check, CheckKind};
use crate::sandbox::plan::Request;
use crate::sandbox::{self, ExecRequest, OutputMode, SandboxError, StdinSource};
use crate::spec::policy::{Policy, PolicyError};
use crate::spec::task::TaskSpec;

/// Why a grader could not even be set up (its own failures are scores, not errors).
#[derive(Debug, thiserror::Error)]
pub enum GraderError {
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error("cannot stage the grader's files")]
    Stage(#[source] std::io::Error),
    #[error(
        "cannot seal the grader's directory (mark it opaque with the user.overlay.opaque \
         xattr, so that the agent's files cannot shadow the grader's): the state root's \
         filesystem must take user xattrs"
    )]
    Seal(#[source] std::io::Error),
    #[error(transparent)]
    Workspace(#[from] crate::workspace::WorkspaceError),
    #[error(
        "the grader's directory {dir} overlaps the workspace ({workspace}) or one of its mount points: an absolute grader_dir must lie apart from them"
    )]
    GraderDirOverlaps { dir: PathBuf, workspace: PathBuf },
    #[error("the grader runs over the environment's image {image:?}")]
    Image {
        image: String,
        #[source]
        source: Box<crate::image::StoreError>,
    },
}

/// Run `task`'s grader command in a sandbox of its own under the `verifier` policy, over the
/// workspace made of `layers` (topmost first), writable in the grader's own copy-on-write view
/// (a grader that runs the agent's program lets it write its outputs, as in the harness the task
/// comes from; the writes go with the grader's sandbox, so neither the session nor a later
/// verify sees them), with the task's `grader/` files at `/workspace/GRADER_DIR` (`grader`
/// unless the task says; never visible during the rollout), bound read-only over that view so
/// that nothing the grader runs can change them, the transcript (when given) at
/// `$ENVCRAFT_TRANSCRIPT`, and `env` (the session's clock). A timeout, a crash, or output that
/// is no score gives 0 with the reason; only a failure to set the grader up is an error.
pub fn run_grader(
    task: &TaskSpec,
    layers: Vec<PathBuf>,
    transcript: Option<&Path>,
    env: Vec<(String, String)>,
    state_root: &Path,
) -> Result<(CommandScore, Check), GraderError> {
    let command = task.verifier.command.clone().unwrap_or_default();
    let stage = tempfile::Builder::new()
        .prefix("envcraft-grader-")
        .tempdir_in(state_root)
        .map_err(GraderError::Stage)?;
    let top = stage.path().join("layer");
    let session = stage.path().join("session");
    for dir in [&top, &session] {
        std::fs::create_dir_all(dir).map_err(GraderError::Stage)?;
    }
    let policy = grader_policy(task)?;
    let workspace = policy.filesystem.workspace.clone();
    let grader_files = task.dir.join("grader");
    let has_grader_files = grader_files.is_dir();
    // A relative grader_dir is a directory of the workspace (sealed in the grader's own layer);
    // an absolute one (Harbor's `/tests`) a place of its own, apart from the workspace.
    let grader_at = workspace.join(&task.verifier.grader_dir);
    let apart = Path::new(&task.verifier.grader_dir).is_absolute();
    if apart && overlaps_workspace(&policy, &grader_at) {
        return Err(GraderError::GraderDirOverlaps {
            dir: grader_at,
            workspace,
        });
    }
    let staged_grader = match apart {
        true => stage.path().join("grader"),
        false => top.join(&task.verifier.grader_dir),
    };
    if has_grader_files {
        crate::workspace::copy_tree(&grader_files, &staged_grader)?;
        if !apart {
            seal(&staged_grader)?;
        }
    }
    let mut env = env;
    env.extend(interpreter_env(has_grader_files.then_some(&grader_at)));
    if let Some(t) = transcript {
        std::fs::copy(t, session.join("transcript.jsonl")).map_err(GraderError::Stage)?;
        env.push((
            "ENVCRAFT_TRANSCRIPT".into(),
            "/.envcraft/session/transcript.jsonl".into(),
        ));
    }
    env.push((
        "ENVCRAFT_WORKSPACE".into(),
        workspace.to_string_lossy().into_owned(),
    ));
    let mut all_layers = vec![top];
    all_layers.extend(layers);
    // The grader sees the root the agent saw: the environment's image, when it names one.
    let image = match &task.env.image {
        Some(name) => {
            let err = |source| GraderError::Image {
                image: name.clone(),
                source: Box::new(source),
            };
            let store = crate::image::Store::open(state_root).map_err(err)?;
            let record = store.image(name).map_err(err)?;
            Some(sandbox::image_root::ImageRoot::of(&store, &record))
        }
        None => None,
    };
    let mut binds = vec![(session, PathBuf::from("/.envcraft/session"))];
    if has_grader_files {
        binds.push((staged_grader, grader_at));
    }
    let request = Request {
        layers: all_layers,
        binds,
        argv: vec!["/bin/true".into()],
        // The sandbox lives as long as the task lets its grader run.
        timeout_secs: Some(task.verifier.timeout_secs.max(policy.limits.wall_time_secs)),
        host_env: Vec::new(),
        without_namespaces: false,
        image,
    };
    let timeout = Duration::from_secs(task.verifier.timeout_secs);
    let result = sandbox::start(&policy, &request, state_root).and_then(|mut grader| {
        let r = grader.exec(&ExecRequest {
            argv: vec!["/bin/sh".into(), "-c".into(), command.clone()],
            env,
            timeout,
            stdin: StdinSource::Null,
            output: OutputMode::Capture,
            cwd: Default::default(),
        });
        grader.close();
        r
    });
    let score = match result {
        Err(e) => CommandScore::zero(format!(
            "the grader could not run: {}",
            crate::error::chain(&e as &SandboxError)
        )),
        Ok(r) if r.timed_out => CommandScore::zero(format!(
            "the grader ran past {} s and was killed",
            timeout.as_secs()
        )),
        Ok(r) => {
            let mut score = parse(&String::from_utf8_lossy(&r.stdout));
            if let (Some(reason), false) = (&score.reason, r.exit_code == Some(0)) {
                let stderr = String::from_utf8_lossy(&r.stderr);
                let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
                score.reason = Some(format!(
                    "{reason}; the grader exited with {:?}, its stderr ends: {}",
                    r.exit_code.or(r.signal.map(|s| 128 + s)),
                    tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
                ));
            }
            score
        }
    };
    let check = Check {
        name: "command".into(),
        kind: CheckKind::Command,
        path: command,
        passed: score.score >= 1.0,
        expected: "score 1".into(),
        actual: match &score.reason {
            Some(reason) => format!("score 0 ({reason})"),
            None => format!("score {}", score.score),
        },
        diff: score
            .subscores
            .as_ref()
            .map(|s| serde_json::to_string(s).unwrap_or_default()),
    };
    Ok((score, check))
}

/// The grader's policy: the bundled `verifier` policy, with the workspace where the session's
/// policy shows it (its path, aliases and mount points), so that the grader finds the agent's
/// files where the agent left them (a Harbor task's `/app`, its `/logs`), and the session's
/// `PATH` and fixed variables. For the bundled policies (all at `/workspace`, no variables of
/// their own) this is the `verifier` policy as it is.
fn grader_policy(task: &TaskSpec) -> Result<Policy, GraderError> {
    let mut policy = Policy::bundled("verifier")?;
    let session = task.env.load_policy()?;
    policy.filesystem.workspace = session.filesystem.workspace;
    policy.filesystem.workspace_aliases = session.filesystem.workspace_aliases;
    policy.filesystem.workspace_mounts = session.filesystem.workspace_mounts;
    // The session's variables (a Harbor task's `ENV`), the verifier's own winning.
    policy.environment.path = session.environment.path;
    for (name, value) in session.environment.set {
        policy.environment.set.entry(name).or_insert(value);
    }
    Ok(policy)
}

/// Whether `path` is, holds or lies below the workspace, an alias or a mount point of `policy`.
fn overlaps_workspace(policy: &Policy, path: &Path) -> bool {
    let fs = &policy.filesystem;
    std::iter::once(&fs.workspace)
        .chain(&fs.workspace_aliases)
        .chain(fs.workspace_mounts.iter().map(|m| &m.path))
        .any(|p| path.starts_with(p) || p.starts_with(path))
}

/// Make the grader's directory in the grader's own (topmost) layer opaque, so that nothing the
/// agent left at the same path in its changes (a `grader/json.py` beside the grader's script, a
/// `grader/check.py` of its own) shows through: the grader's directory holds the task's files
/// and nothing else. Fails closed: a grader whose directory cannot be sealed does not run.
fn seal(dir: &Path) -> Result<(), GraderError> {
    use std::os::fd::AsRawFd;
    let handle = std::fs::File::open(dir).map_err(GraderError::Seal)?;
    crate::sys::fsetxattr(handle.as_raw_fd(), c"user.overlay.opaque", b"y")
        .map_err(GraderError::Seal)
}

/// The variables that keep the agent's files out of a grader's interpreter. Python adds the
/// working directory (the workspace) to its module path for `python3 -c`, `-m` and stdin, so a
/// `json.py` the agent left there would run inside the grader: `PYTHONSAFEPATH` (Python 3.11
/// and later) adds neither the working directory nor the script's directory; the grader's own
/// directory (sealed, see [`seal`]) is put on the path instead, so its scripts still import
/// their helpers; `PYTHONNOUSERSITE` keeps `~/.local` out. They come after the session's
/// variables, so nothing earlier can switch them off. Every process the grader's command
/// starts directly (a shell's `python3 -c`, ClawGym's reward line) has them; a Python grader's
/// own children do not have `PYTHONSAFEPATH` (envcraft's `sitecustomize`, on the path after
/// the grader's directory, drops it): those are the agent's programs the grader runs, and they
/// import the agent's own packages from the workspace, as in the task's harness.
fn interpreter_env(grader_dir: Option<&Path>) -> Vec<(String, String)> {
    let mut env = vec![
        ("PYTHONSAFEPATH".to_string(), "1".to_string()),
        ("PYTHONNOUSERSITE".to_string(), "1".to_string()),
    ];
    let mut path: Vec<String> = grader_dir
        .map(|dir| dir.to_string_lossy().into_owned())
        .into_iter()
        .collect();
    path.push(crate::sandbox::child::GRADER_PYTHON.to_string());
    env.push(("PYTHONPATH".into(), path.join(":")));
    env
}

/// What a grader's run came to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandScore {
    /// In [0, 1].
    pub score: f64,
    /// The named sub-scores, when the grader printed an object.
    pub subscores: Option<BTreeMap<String, f64>>,
    /// Why the score is 0 when the grader did not give one.
    pub reason: Option<String>,
}

impl CommandScore {
    pub fn zero(reason: impl Into<String>) -> CommandScore {
        CommandScore {
            score: 0.0,
            subscores: None,
            reason: Some(reason.into()),
        }
    }
}

fn in_range(x: f64) -> bool {
    x.is_finite() && (0.0..=1.0).contains(&x)
}

/// The score in a grader's standard output.
pub fn parse(stdout: &str) -> CommandScore {
    let text = stdout.trim();
    if text.is_empty() {
        return CommandScore::zero("the grader printed nothing");
    }
    if text.starts_with('{')
        && let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(text)
    {
        let mut subscores = BTreeMap::new();
        for (name, value) in map {
            let x = match value {
                serde_json::Value::Bool(b) => f64::from(u8::from(b)),
                serde_json::Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
                other => {
                    return CommandScore::zero(format!(
                        "sub-score `{name}` is {other}, not a number in [0, 1]"
                    ));
                }
            };
            if !in_range(x) {
                return CommandScore::zero(format!("sub-score `{name}` is {x}, outside [0, 1]"));
            }
            subscores.insert(name, x);
        }
        if subscores.is_empty() {
            return CommandScore::zero("the grader printed an empty object");
        }
        let score = subscores.values().sum::<f64>() / subscores.len() as f64;
        return CommandScore {
            score,
            subscores: Some(subscores),
            reason: None,
        };
    }
    let last = text.lines().last().unwrap_or_default().trim();
    match last.parse::<f64>() {
        Ok(x) if in_range(x) => CommandScore {
            score: x,
            subscores: None,
            reason: None,
        },
        Ok(x) => CommandScore::zero(format!("the grader's score {x} is outside [0, 1]")),
        Err(_) => CommandScore::zero(format!(
            "the grader's last line is not a score: {:?}",
            last.chars().take(200).collect::<String>()
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn json_sub_scores_are_averaged() {
        let s = parse("{\"a\": 1.0, \"b\": 0.5, \"c\": false}\n");
        assert!((s.score - 0.5).abs() < 1e-12);
        assert_eq!(s.subscores.unwrap().len(), 3);
    }

    #[test]
    fn a_float_on_the_last_line_is_the_score() {
        assert_eq!(parse("checking...\nall good\n0.75\n").score, 0.75);
        assert_eq!(parse("1").score, 1.0);
    }

    #[test]
    fn garbage_nothing_and_out_of_range_score_zero_with_a_reason() {
        for out in [
            "",
            "   \n",
            "done",
            "{\"a\": 2}",
            "{\"a\": \"x\"}",
            "1.5",
            "-0.1",
            "{}",
            "NaN",
        ] {
            let s = parse(out);
            assert_eq!(s.score, 0.0, "{out:?}");
            assert!(s.reason.is_some(), "{out:?}");
        }
    }
}
