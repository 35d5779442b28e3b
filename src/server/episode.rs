//! The session operations every protocol of the server shares: `/v1` ([`super::handlers`]),
//! OpenEnv ([`super::openenv`], [`super::openenv_ws`]) and MCP over HTTP ([`super::mcp_http`])
//! create, call, verify, advance, fork and close sessions through these functions only, so the
//! same request gives the same transcript and the same reward whichever protocol carried it.
//! Each takes the registry's lock on the session with the server's bounded wait and runs the
//! blocking work off the async threads.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};

use super::AppState;
use super::error::ApiError;
use super::registry::{Locked, close_entry};
use crate::session::{Session, SessionError};

/// What a new session is made of: the task (a name or an inline task, as `/v1/sessions`
/// takes it), an optional start time (Unix seconds) and seed.
pub struct Creation {
    pub task: Value,
    pub base_time: Option<i64>,
    pub seed: Option<u64>,
    /// OpenEnv's episode id, kept with the session (its `state` names it).
    pub episode_id: Option<String>,
    /// The agent that runs its turns (`/v1`'s `agent`, see [`super::agent`]), unchecked.
    pub agent: Option<Value>,
}

/// Run `work` on a blocking thread; a panic there is an internal error.
pub async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(work).await.map_err(|e| {
        tracing::error!(error = %e, "a blocking task failed");
        ApiError::internal("the server failed while handling the request")
    })
}

/// A session error as an API error: logged in full, sent without internals. A resource the
/// kernel refused (descriptors, processes, memory) is `capacity`, not the session's fault.
pub fn session_error(what: &str, e: &SessionError) -> ApiError {
    if let Some(refused) = super::capacity::refused_by_kernel(e) {
        return refused;
    }
    tracing::error!(error = %crate::error::chain(e), "{what}");
    match e {
        // Names the task only.
        SessionError::NoExpected { .. } => ApiError::internal(format!("{what}: {e}")),
        // The server's store lacks the environment's image: for its operator to import.
        SessionError::Image { source, .. }
            if matches!(**source, crate::image::StoreError::NoImage { .. }) =>
        {
            ApiError::image_not_found(format!(
                "{what}: {e}: {source}; import it into the server's state root (envcraft image import ... with the server's --state-dir)"
            ))
        }
        _ => ApiError::internal(format!("{what}: see the server's log")),
    }
}

/// The session in a locked entry, or `invalid_transition` if it was closed meanwhile.
fn open(locked: &mut Locked) -> Result<&mut Session, ApiError> {
    locked.as_mut().ok_or_else(|| {
        ApiError::invalid_transition("the session is closing or closed: no more calls are taken")
    })
}

/// The tools of a session in OpenAI's function-calling form (as `envcraft tools`).
pub fn openai_tools(session: &Session) -> Vec<Value> {
    session
        .tool_schemas()
        .into_iter()
        .map(|(name, description, parameters)| {
            json!({
                "type": "function",
                "function": {"name": name, "description": description, "parameters": parameters},
            })
        })
        .collect()
}

/// A new session: the body `/v1/sessions` answers (`session_id`, `task`, `seed`, `prompt`,
/// `docs`, `tools`, `action_index`).
pub async fn create(state: &Arc<AppState>, creation: Creation) -> Result<Value, ApiError> {
    if state.is_draining() {
        return Err(ApiError::draining());
    }
    let state = state.clone();
    blocking(move || -> Result<Value, ApiError> {
        let Creation {
            task: task_value,
            base_time,
            seed,
            episode_id,
            agent,
        } = creation;
        let agent = agent
            .map(|a| super::agent::parse(&a, state.config.request_timeout))
            .transpose()?;
        let slot = state.registry.reserve()?;
        let task = super::handlers::task_of(&state, &task_value)?;
        let openclaw = agent
            .as_ref()
            .map(|a| super::agent::openclaw(&state, a))
            .transpose()?;
        let name = format!("{}/{}", task.env.name, task.id);
        let mut options = state.session_options.clone();
        options.base_time = base_time;
        options.seed = seed;
        // What a restarted server needs to make the session again (see `super::resume`).
        options.origin = json!({"task": task_value});
        if let Some(episode) = episode_id {
            options.origin["episode_id"] = json!(episode);
        }
        if let (Some(agent), Some(openclaw)) = (&agent, &openclaw) {
            options.origin["agent"] = agent.raw.clone();
            options = openclaw.session_options(&task, options).map_err(|e| {
                tracing::error!(error = %crate::error::chain(&e), "OpenClaw's policy");
                ApiError::internal("cannot make OpenClaw's policy: see the server's log")
            })?;
        }
        let session = {
            let _clone = crate::sandbox::maker::clone_lock();
            Session::create(&task, &options)
        }
        .map_err(|e| session_error("cannot create the session", &e))?;
        let mut body = json!({
            "task": name,
            "seed": seed,
            "prompt": session.prompt(),
            "docs": task.env.docs,
            "tools": openai_tools(&session),
            "action_index": session.action_index(),
        });
        if let Some(openclaw) = &openclaw {
            body["agent"] = super::agent::describe(openclaw);
        }
        // Inserted here, not in the async caller: a request past its deadline still leaves
        // the session where the idle sweeper finds it.
        let attached = openclaw.map(super::agent::attach);
        let id = state.registry.insert_attached(slot, session, attached);
        state.metrics.session_created();
        tracing::info!(session = %id, task = %name, "session created");
        body["session_id"] = json!(id);
        Ok(body)
    })
    .await?
}

/// Run `work` on the open session `id`, locked, on a blocking thread.
pub async fn with_session<T: Send + 'static>(
    state: &AppState,
    id: &str,
    work: impl FnOnce(&mut Session) -> T + Send + 'static,
) -> Result<T, ApiError> {
    let entry = state.registry.get(id)?;
    let mut locked = entry.lock(state.config.lock_wait).await?;
    open(&mut locked)?;
    blocking(move || match locked.as_mut() {
        Some(session) => {
            let done = work(session);
            session.settle();
            Ok(done)
        }
        None => Err(ApiError::session_not_found()),
    })
    .await?
}

/// Call `tool` with `args` (an object) on session `id`: `{"action_index", "result",
/// "transcript_truncated"?}`; a failing tool is a result with `ok: false`, not an error.
pub async fn call(
    state: &AppState,
    id: &str,
    tool: String,
    args: Value,
) -> Result<Value, ApiError> {
    call_within(state, id, tool, args, None).await
}

/// [`call`], and past `limit` (when given) the call's command is killed with its process
/// group (the result is then a `cancelled` tool error; see [`crate::sandbox::cancel`]).
pub async fn call_within(
    state: &AppState,
    id: &str,
    tool: String,
    args: Value,
    limit: Option<std::time::Duration>,
) -> Result<Value, ApiError> {
    let entry = state.registry.get(id)?;
    let offered = entry.tools.contains(&tool);
    // The name the call runs under for the timer below (no MCP request id looks like it).
    static BOUNDED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = BOUNDED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let token = format!("envcraft-deadline-{n}");
    let timer = limit.map(|limit| {
        let (entry, token) = (entry.clone(), token.clone());
        tokio::spawn(async move {
            tokio::time::sleep(limit).await;
            entry.cancel_call(&token);
        })
    });
    let label = if offered {
        tool.clone()
    } else {
        "unknown".into()
    };
    let started = Instant::now();
    let bounded = timer.is_some().then_some(entry);
    let outcome = with_session(state, id, move |session| {
        if let Some(entry) = &bounded {
            match session.canceller() {
                Ok(cancel) => entry.begin_call(token, cancel),
                Err(e) => tracing::warn!(error = %e, "this call cannot be bounded"),
            }
        }
        let result = session.call(&tool, &args);
        if let Some(entry) = &bounded {
            entry.end_call();
        }
        (
            result,
            session.action_index(),
            session.transcript_truncated(),
        )
    })
    .await;
    if let Some(timer) = timer {
        timer.abort();
    }
    let (result, action_index, truncated) = outcome?;
    let ok = result.get("ok") == Some(&Value::Bool(true));
    state.metrics.tool_call(&label, ok, started.elapsed());
    let mut answer = json!({"action_index": action_index, "result": result});
    if truncated {
        // Said on every call from the cut on: the session's record is no longer complete.
        answer["transcript_truncated"] = Value::Bool(true);
    }
    Ok(answer)
}

/// Move session `id` to its next prompt: `{"prompt", "turn"}`; `invalid_transition` after the
/// last.
pub async fn next_turn(state: &AppState, id: &str) -> Result<Value, ApiError> {
    with_session(state, id, |session| {
        let (turn, turns) = (session.turn(), session.task().turns.len());
        match session.next_turn() {
            Ok(Some(prompt)) => Ok(json!({"prompt": prompt, "turn": session.turn()})),
            Ok(None) => Err(ApiError::invalid_transition(format!(
                "the session is at its last turn (turn {turn} of {turns}, counting from 0): there is no next prompt"
            ))),
            Err(e) => Err(session_error("cannot move to the next turn", &e)),
        }
    })
    .await?
}

/// Record the model's assistant `message` (checked by [`super::requests::assistant_message`])
/// in session `id`'s transcript: `{"id": ENTRY, "action_index"}`; `invalid_transition` once the
/// transcript is at its policy's limit.
pub async fn add_message(state: &AppState, id: &str, message: Value) -> Result<Value, ApiError> {
    with_session(state, id, move |session| {
        match session.add_assistant_message(&message) {
            Ok(entry) => Ok(json!({"id": entry, "action_index": session.action_index()})),
            Err(SessionError::Assistant(e)) => Err(ApiError::bad_request(format!("field {e}"))),
            Err(e @ SessionError::TranscriptFull) => {
                Err(ApiError::invalid_transition(e.to_string()))
            }
            Err(e) => Err(session_error("cannot record the message", &e)),
        }
    })
    .await?
}

/// A new session from session `id`'s current state; its id.
pub async fn fork(state: &Arc<AppState>, id: &str) -> Result<String, ApiError> {
    if state.is_draining() {
        return Err(ApiError::draining());
    }
    if state.registry.get(id)?.agent.is_some() {
        return Err(ApiError::invalid_transition(
            "a session whose agent is OpenClaw is not forked: OpenClaw's own state lives in its \
             sandbox, which a fork does not copy",
        ));
    }
    let fork_state = state.clone();
    with_session(state, id, move |session| {
        let state = fork_state;
        let slot = state.registry.reserve()?;
        let fork = {
            let _clone = crate::sandbox::maker::clone_lock();
            session.fork()
        }
        .map_err(|e| session_error("cannot fork the session", &e))?;
        let id = state.registry.insert(slot, fork);
        state.metrics.session_created();
        Ok::<_, ApiError>(id)
    })
    .await?
}

/// Score session `id`'s workspace: `{"reward", "passed", "checks"}`, with `not_run` and
/// `partial_reward` when a part of the verifier did not run (`reward` is then null).
pub async fn verify(state: &AppState, id: &str) -> Result<Value, ApiError> {
    let started = Instant::now();
    let verdict = with_session(state, id, |session| {
        let _clone = crate::sandbox::maker::clone_lock();
        session
            .verify()
            .map_err(|e| session_error("cannot verify the session", &e))
    })
    .await??;
    state.metrics.verified(started.elapsed());
    Ok(serde_json::to_value(&verdict).unwrap_or(Value::Null))
}

/// Close session `id` (processes, mounts, directory); `session_not_found` if it is not open.
pub async fn close(state: &AppState, id: &str) -> Result<(), ApiError> {
    let entry = state
        .registry
        .remove(id)
        .ok_or_else(ApiError::session_not_found)?;
    if !close_entry(entry, state.config.request_timeout).await {
        return Err(ApiError::internal("the session could not be closed"));
    }
    tracing::info!(session = %id, "session closed");
    Ok(())
}
