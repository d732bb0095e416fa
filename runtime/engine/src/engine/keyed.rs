//! Runs of adapters within a conversation they name by a key of their own (a thread, a mail's
//! thread): the runtime keeps its messages, sends the latest with the prompt, and answers its
//! prompts one at a time, in arrival order, whichever replica each came to.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{Engine, RunError, RunOutput, RunRequest};
use crate::conversations::line::Place;
use crate::conversations::{self, Exchange};
use crate::db::Db;

impl Engine {
    /// Runs `request` as the next turn of the conversation `request.source` calls `key`.
    pub(super) async fn run_keyed(
        self: &Arc<Self>,
        mut request: RunRequest,
        key: String,
        cancel: &CancellationToken,
    ) -> Result<RunOutput, RunError> {
        let (source, prompt) = (request.source.clone(), request.prompt.clone());
        let agent = request.profile.name().to_owned();
        let conversation = self
            .db
            .call(move |conn| conversations::keyed(conn, &source, &key, &agent, &prompt))
            .await?;
        let place = Place::take(&self.db, &conversation.id, &self.replica, false)
            .await?
            .ok_or_else(|| {
                crate::error::Error::Internal(anyhow::anyhow!(
                    "a place in line was refused to a turn that did not ask to be alone"
                ))
            })?;
        place.ready().await?;
        // A conversation with no exchange when it was found, whose line gave out its first
        // ticket to this turn, has none now: every turn of the line records in its turn (an
        // MCP client's exchange, which takes no place, is unordered against the line's).
        let first = conversation.turns == 0 && place.ticket() == 1;
        if request.history.is_empty() && !first {
            let (id, budget) = (conversation.id.clone(), self.conversation_budget);
            request.history = self
                .db
                .call(move |conn| conversations::history(conn, &id, budget))
                .await?;
        }
        let (prompt, held) = (request.prompt.clone(), request.turn_held_until_cancelled);
        // A caller that asked to hear when a paused run goes on lets it pause: its answer
        // lands in the conversation then.
        let may_wait = request.then.is_some();
        let result = match self.prepare(request).await {
            Ok(prepared) if may_wait => {
                let prepared = prepared.in_conversation(&conversation.id);
                self.execute(prepared, None, cancel).await
            }
            Ok(prepared) => self.execute(prepared, None, cancel).await,
            Err(e) => Err(e),
        };
        // Recorded first, so the next turn in line sees this exchange; held on while the
        // caller still works with the answer.
        if held {
            keep_exchange(&self.db, &conversation.id, &prompt, &result, None).await;
            let cancel = cancel.clone();
            tokio::spawn(async move {
                cancel.cancelled().await;
                drop(place);
            });
        } else {
            keep_exchange(&self.db, &conversation.id, &prompt, &result, Some(place)).await;
        }
        result
    }
}

/// Keeps a turn's exchange in its conversation: the prompt always, the answer (with its tool
/// calls) when the run gave one; and leaves the line with it when the turn's `place` is given
/// (one round trip for both). A failure to record is logged; the run's outcome stands.
pub fn keep_exchange<'a>(
    db: &'a Db,
    conversation: &'a str,
    prompt: &'a str,
    result: &'a Result<RunOutput, RunError>,
    place: Option<Place>,
) -> BoxFuture<'a, ()> {
    Box::pin(async move {
        let (answer, calls, trace_id) = match result {
            Ok(output) => (
                Some(output.text.clone()),
                Some(json!(output.tool_calls)),
                Some(output.trace_id.clone()),
            ),
            Err(e) => (None, None, e.trace_id().map(str::to_owned)),
        };
        let (conversation, prompt) = (conversation.to_owned(), prompt.to_owned());
        let leaving = place.as_ref().map(Place::ticket);
        let recorded = db
            .call(move |conn| {
                conversations::record(
                    conn,
                    &conversation,
                    &Exchange {
                        prompt: &prompt,
                        answer: answer.as_deref(),
                        tool_calls: calls.as_ref(),
                        trace_id: trace_id.as_deref(),
                        leaving,
                    },
                )
            })
            .await;
        match (recorded, place) {
            (Ok(()), Some(place)) => place.left(),
            // No place given: its holder lets it go.
            (Ok(()), None) => {}
            (Err(e), _) => tracing::warn!("cannot record an exchange in its conversation: {e}"),
        }
    })
}
