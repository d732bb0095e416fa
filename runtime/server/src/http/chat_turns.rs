//! A chat turn within its conversation: the conversation it continues (or starts), its place in
//! the conversation's line, the history it sends, and the exchange it leaves behind. A second
//! message while the first is answered follows `[conversations] double_texting`: it waits its
//! turn (`enqueue`), is refused (`reject`), or stops the running one and answers both
//! (`interrupt`), whichever replica each came to.

use axum::http::StatusCode;
use service_contract::agent::{ProfileChoice, RunRequest};
use tokio_util::sync::CancellationToken;

use super::AppState;
use super::api_error::{ApiError, ApiResult};
use super::chat::{ChatBody, run_error};
use super::conversations::entered;
use crate::access::Principal;
use crate::agents::profiles::{self, DEFAULT_PROFILE};
use crate::bus::Event;
use crate::conversations::line::Place;
use crate::conversations::{self, DoubleTexting};
use crate::engine::{Events, Prepared, RunError, RunOutput, keep_exchange};
use crate::task_runs;

/// A turn ready to run: prepared, in its conversation, with its place in the line (it runs
/// once first in it).
pub(super) struct Begun {
    prepared: Prepared,
    pub conversation_id: String,
    /// The agent it runs.
    pub agent: String,
    prompt: String,
    place: Place,
    /// It continues a conversation, whose latest turns it sends once first in its line.
    continues: bool,
}

/// Reads the conversation the body continues (404 unknown; 400 for another agent than its
/// own), prepares the run and takes its place in the conversation's line (the wait for its
/// turn is the run's). A new conversation starts only once the run could be prepared, so a
/// refused prompt leaves none behind.
pub(super) async fn begin(app: &AppState, caller: &Principal, body: ChatBody) -> ApiResult<Begun> {
    let prompt = body.prompt.clone();
    let model = body.model.filter(|m| !m.trim().is_empty());
    let (agent, continued) = match body.conversation_id {
        None => (
            body.agent.unwrap_or_else(|| DEFAULT_PROFILE.to_owned()),
            None,
        ),
        Some(id) => {
            let caller = caller.clone();
            let found = app.db.call(move |conn| entered(conn, &caller, &id)).await?;
            if let Some(agent) = body.agent.filter(|agent| *agent != found.agent) {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "conversation {:?} is with agent {:?}, not {agent:?}; leave agent out \
                         or start a new conversation",
                        found.id, found.agent
                    ),
                )
                .with_field("agent"));
            }
            (found.agent, Some(found.id))
        }
    };
    // A request naming no agent is refused before anything runs: no run, so no trace.
    let known = {
        let agent = agent.clone();
        app.db.call(move |conn| profiles::get(conn, &agent)).await?
    };
    let Some(known) = known else {
        return Err(
            ApiError::new(StatusCode::NOT_FOUND, format!("no agent named {agent:?}"))
                .with_field("agent"),
        );
    };
    caller.check_agent(&agent, known.access.as_ref())?;
    let request = RunRequest {
        model,
        started_by: Some(caller.label()),
        ..RunRequest::new(
            prompt.clone(),
            ProfileChoice::Required(agent.clone()),
            "chat",
        )
    };
    let continues = continued.is_some();
    let (conversation_id, place, prepared) = match continued {
        Some(id) => {
            let prepared = app.engine.prepare(request).await.map_err(run_error)?;
            let prepared = prepared.in_conversation(&id);
            let place = take_place(app, &id).await?;
            (id, place, prepared)
        }
        None => {
            let prepared = app.engine.prepare(request).await.map_err(run_error)?;
            let (title, by, agent) = (prompt.clone(), caller.label(), agent.clone());
            let started = app
                .db
                .call(move |conn| conversations::start(conn, &agent, "chat", &title, Some(&by)))
                .await?;
            // First in its line, so a message sent meanwhile waits for this one.
            let place = take_place(app, &started.id).await?;
            let prepared = prepared.in_conversation(&started.id);
            (started.id, place, prepared)
        }
    };
    Ok(Begun {
        prepared,
        conversation_id,
        agent,
        prompt,
        place,
        continues,
    })
}

impl Begun {
    /// Names the run's trace before it starts.
    pub(super) fn with_trace_id(mut self, trace_id: &str) -> Self {
        self.prepared = self.prepared.with_trace_id(trace_id);
        self
    }

    /// Makes the run the outcome of `task` (see [`Prepared::for_task`]).
    pub(super) fn for_task(mut self, task: &str) -> Self {
        self.prepared = self.prepared.for_task(task);
        self
    }

    /// Waits for the turn's place to come first, then runs it (an `interrupt` from a newer
    /// message cancels it) and keeps the exchange in its conversation: the prompt always, the
    /// answer when there is one.
    pub(super) async fn run(
        self,
        app: &AppState,
        events: Option<&Events>,
        cancel: &CancellationToken,
    ) -> Result<RunOutput, RunError> {
        let Self {
            mut prepared,
            conversation_id,
            prompt,
            place,
            continues,
            ..
        } = self;
        if continues {
            place.ready().await?;
            let (conversation, budget) = (conversation_id.clone(), app.conversation_budget);
            let history = app
                .db
                .call(move |conn| conversations::history(conn, &conversation, budget))
                .await?;
            prepared = prepared.with_history(history);
        }
        let key = running_key(&conversation_id);
        let result = task_runs::cancellable(&app.running, &key, cancel, async |cancel| {
            app.engine.execute(prepared, events, &cancel).await
        })
        .await;
        // Recorded as the turn leaves the line, so the next turn in line sees this exchange.
        keep_exchange(&app.db, &conversation_id, &prompt, &result, Some(place)).await;
        result
    }
}

/// What a running turn is cancelled by, on whichever replica runs it.
fn running_key(conversation: &str) -> String {
    format!("conversation:{conversation}")
}

/// Takes a place in the conversation's line as `[conversations] double_texting` says: with
/// `interrupt` the running turn is stopped first, with `reject` a busy line is a 409.
async fn take_place(app: &AppState, conversation: &str) -> ApiResult<Place> {
    let policy = app.double_texting;
    if policy == DoubleTexting::Interrupt {
        // The running turn stops where it runs; its prompt stays in the conversation
        // unanswered, so this turn's history carries both.
        let key = running_key(conversation);
        app.running.cancel(&key);
        app.bus.tell_others(Event::TaskCancelled(key));
    }
    let alone = policy == DoubleTexting::Reject;
    Place::take(&app.db, conversation, &app.replica, alone)
        .await?
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::CONFLICT,
                "the previous message of this conversation is still being answered; send \
                 this one once it is ([conversations] double_texting is \"reject\")",
            )
        })
}
