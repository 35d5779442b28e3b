//! At start, the sessions a killed server left: each resumed under its id (see
//! [`crate::session::resume`]) or dropped, so that a request for it gets `session_not_found`.

use std::path::PathBuf;

use super::AppState;
use super::handlers::task_of;
use crate::session::Session;
use crate::session::resume::Saved;

/// Resume every claimed session directory in `claimed` into the registry, one after the
/// other (a resume clones a sandbox: the clone lock is held as for a create); each directory
/// is removed afterwards. Returns (resumed, dropped).
pub fn resume_all(state: &AppState, claimed: Vec<PathBuf>) -> (usize, usize) {
    let (mut resumed, mut dropped) = (0, 0);
    for dir in claimed {
        let outcome = resume_one(state, &dir);
        match &outcome {
            Ok((id, action_index)) => {
                tracing::info!(session = %id, action_index, "session resumed");
                resumed += 1;
            }
            Err(why) => {
                tracing::warn!(dir = %dir.display(), reason = %why, "session not resumed");
                dropped += 1;
            }
        }
        state.metrics.session_resumed(outcome.is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }
    (resumed, dropped)
}

/// The id and action index of the session resumed from `dir`, or why it was not.
fn resume_one(state: &AppState, dir: &std::path::Path) -> Result<(String, u64), String> {
    let chain = |e: &dyn std::error::Error| crate::error::chain(e);
    let saved = Saved::read(dir).map_err(|e| chain(&e))?;
    if !saved.origin["agent"].is_null() {
        // OpenClaw's state died with the sandbox, and a real agent is no trajectory to replay.
        return Err("its agent was OpenClaw, which cannot be resumed".into());
    }
    let task = task_of(state, &saved.origin["task"])
        .map_err(|e| format!("{}: {}", e.category, e.message))?;
    let slot = state
        .registry
        .reserve()
        .map_err(|e| format!("{}: {}", e.category, e.message))?;
    let session = {
        let _clone = crate::sandbox::maker::clone_lock();
        Session::resume(&saved, &task, &state.session_options)
    }
    .map_err(|e| chain(&e))?;
    let action_index = session.action_index();
    Ok((state.registry.insert(slot, session), action_index))
}
