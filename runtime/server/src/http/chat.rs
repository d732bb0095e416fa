//! `/api/chat`: run an agent and answer at once, or stream the run as server-sent events.

use std::collections::BTreeMap;
use std::convert::Infallible;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use utoipa::openapi::RefOr;
use utoipa::{IntoResponses, ToSchema};

use super::AppState;
use super::api::JsonBody;
use super::api_error::{ApiError, ApiResult, ErrorBody};
use super::identity::Known;
use super::{chat_turns, openapi};
use crate::engine::pause::Paused;
use crate::engine::{Event, RunError, RunOutput};

/// The response header of a chat stream that names the run's trace.
pub(super) const TRACE_HEADER: &str = "x-trace-id";
/// ... and the one that names its conversation, so a client can send the next message at once.
pub(super) const CONVERSATION_HEADER: &str = "x-conversation-id";

#[derive(Deserialize, ToSchema)]
pub(super) struct ChatBody {
    /// What to ask; not blank.
    #[schema(schema_with = crate::agents::schemas::not_blank)]
    pub prompt: String,
    /// The agent to ask (`default` when absent), or the conversation's own.
    pub agent: Option<String>,
    /// A model instead of the agent's (blank: the agent's).
    pub model: Option<String>,
    /// Continues this conversation; a new one starts without it.
    pub conversation_id: Option<String>,
}

/// A finished run's answer, and the conversation it was kept in.
#[derive(Serialize, ToSchema)]
pub(super) struct ChatAnswer {
    #[serde(flatten)]
    output: RunOutput,
    conversation_id: String,
}

/// A run that paused before a tool call a person must approve: which call waits, and where
/// the answer lands once they decide.
#[derive(Serialize, ToSchema)]
pub(super) struct WaitingForApproval<'a> {
    /// Always `waiting_for_approval`.
    status: &'static str,
    approval_id: &'a str,
    tool: &'a str,
    input: &'a Value,
    trace_id: &'a str,
    conversation_id: &'a str,
}

/// A chat stream's body: a chat body, and what a disconnect does.
#[derive(Deserialize, ToSchema)]
pub(super) struct StreamBody {
    #[serde(flatten)]
    chat: ChatBody,
    #[serde(default)]
    on_disconnect: OnDisconnect,
}

/// What becomes of a streamed run whose client goes away.
#[derive(Deserialize, Default, PartialEq, Eq, ToSchema)]
#[serde(rename_all = "lowercase")]
enum OnDisconnect {
    /// The run stops (the stream's own contract, and how a client stops an answer).
    #[default]
    Cancel,
    /// The run goes on as a run of `/api/runs` (named in `X-Run-Id`), to be re-joined.
    Continue,
}

/// What refuses a prompt before its run starts, the same for a chat, its stream and a run.
pub(super) struct PromptRefusals;

impl IntoResponses for PromptRefusals {
    fn responses() -> BTreeMap<String, RefOr<utoipa::openapi::Response>> {
        openapi::error_answers(&[
            (
                "403",
                "an agent closed to the caller, or someone else's conversation",
            ),
            ("404", "no such agent or conversation"),
            (
                "409",
                "the conversation's previous message is still being answered and double \
                 texting is `reject`",
            ),
            ("429", "past the caller's run budget"),
            ("503", "no provider configured"),
        ])
    }
}

pub(super) fn run_error(e: RunError) -> ApiError {
    // The store's error keeps its own kind: a database that went away is a 503.
    let e = match e {
        RunError::Internal(e) => return ApiError::from(e),
        e => e,
    };
    let status = match &e {
        RunError::EmptyPrompt => StatusCode::BAD_REQUEST,
        RunError::UnknownAgent { .. } => StatusCode::NOT_FOUND,
        RunError::NotConfigured { .. } => StatusCode::SERVICE_UNAVAILABLE,
        RunError::Failed { .. } => StatusCode::BAD_GATEWAY,
        RunError::Cancelled { .. } => StatusCode::SERVICE_UNAVAILABLE,
        RunError::Paused { .. } => StatusCode::ACCEPTED,
        RunError::Internal(_) => unreachable!("answered above"),
    };
    let trace_id = e.trace_id().map(str::to_owned);
    ApiError::new(status, e.to_string()).with_trace(trace_id.as_deref())
}

/// Runs an agent to the end and answers with the whole result and its conversation.
#[utoipa::path(
    post,
    path = "/api/chat",
    operation_id = "chat",
    tag = "chat",
    request_body = ChatBody,
    responses(
        (status = 200, body = ChatAnswer),
        (status = 202, description = "the run paused before a tool call a person must approve",
            body = WaitingForApproval),
        (status = 400, description = "a blank prompt, or an agent other than the conversation's",
            body = ErrorBody),
        PromptRefusals,
        (status = 502, description = "the provider failed", body = ErrorBody),
    )
)]
pub(super) async fn complete(
    Known(caller): Known,
    State(app): State<AppState>,
    JsonBody(body): JsonBody<ChatBody>,
) -> ApiResult<Response> {
    let begun = chat_turns::begin(&app, &caller, body).await?;
    let conversation_id = begun.conversation_id.clone();
    let cancel = app.shutdown.child_token();
    // The run is a task of its own so its trace is always finished; if the client goes away
    // this handler is dropped and the guard cancels the run.
    let _cancel_on_drop = cancel.clone().drop_guard();
    let task_app = app.clone();
    let result =
        tokio::spawn(async move { begun.run(&task_app, None, &cancel).await }.in_current_span())
            .await
            .map_err(|e| ApiError::from(crate::error::Error::Internal(e.into())))?;
    let output = match result {
        Ok(output) => output,
        // The answer comes later, into the conversation, once a person decides.
        Err(RunError::Paused { paused, trace_id }) => {
            let waiting = paused_body(&paused, &trace_id, &conversation_id);
            return Ok((StatusCode::ACCEPTED, Json(waiting)).into_response());
        }
        Err(e) => return Err(run_error(e).with_conversation(&conversation_id)),
    };
    let answer = ChatAnswer {
        output,
        conversation_id,
    };
    Ok(Json(answer).into_response())
}

/// What a run that paused for approval answers: which call waits, and where the answer lands.
fn paused_body<'a>(
    paused: &'a Paused,
    trace_id: &'a str,
    conversation_id: &'a str,
) -> WaitingForApproval<'a> {
    WaitingForApproval {
        status: "waiting_for_approval",
        approval_id: &paused.approval_id,
        tool: &paused.tool,
        input: &paused.input,
        trace_id,
        conversation_id,
    }
}

/// A stream's last frame: `done`, `approval_required` or `error`.
pub(super) fn last_frame(result: &Result<RunOutput, RunError>, conversation: &str) -> Value {
    match result {
        Err(RunError::Paused { paused, trace_id }) => {
            let mut last = json!(paused_body(paused, trace_id, conversation));
            last["type"] = json!("approval_required");
            last
        }
        Ok(output) => json!({
            "type": "done",
            "trace_id": output.trace_id,
            "latency_ms": output.latency_ms,
            "conversation_id": conversation,
        }),
        Err(e) => json!({
            "type": "error",
            "message": e.to_string(),
            "trace_id": e.trace_id(),
            "conversation_id": conversation,
        }),
    }
}

/// Frame number `seq` (from 1), as `/api/runs/{id}/stream` numbers them.
fn frame(seq: i64, value: &Value) -> Result<SseEvent, Infallible> {
    Ok(SseEvent::default()
        .id(seq.to_string())
        .data(value.to_string()))
}

/// Streams `token`, `tool_call` and `tool_result` frames as the run works, then one `done`
/// or `error` frame, each numbered as its `id:`. The run's trace id is in the `X-Trace-Id`
/// header, so a client that stops the run early can still link to it. Problems found before
/// the run starts are plain HTTP errors. With `on_disconnect: "continue"` the run is one of
/// `/api/runs` (`X-Run-Id`) and goes on without its client, which re-joins it there.
#[utoipa::path(
    post,
    path = "/api/chat/stream",
    operation_id = "chat_stream",
    tag = "chat",
    request_body = StreamBody,
    responses(
        (status = 200, description = "the run's frames, as server-sent events: each frame's \
            data is a JSON object whose `type` is `token`, `tool_call` or `tool_result`, then \
            one `done`, `approval_required` or `error`", content_type = "text/event-stream"),
        (status = 400, description = "a blank prompt, or an agent other than the conversation's",
            body = ErrorBody),
        PromptRefusals,
    )
)]
pub(super) async fn stream(
    Known(caller): Known,
    State(app): State<AppState>,
    JsonBody(body): JsonBody<StreamBody>,
) -> ApiResult<Response> {
    if body.on_disconnect == OnDisconnect::Continue {
        let (started, _) = super::runs::start(&app, &caller, body.chat, None, None).await?;
        return Ok(super::runs::frames(&app, started, 0));
    }
    let begun = chat_turns::begin(&app, &caller, body.chat).await?;
    let conversation_id = begun.conversation_id.clone();
    let (events, mut receiver) = mpsc::unbounded_channel();
    let (result_tx, result_rx) = oneshot::channel();
    let cancel = app.shutdown.child_token();
    let finished = CancellationToken::new();

    // Cancels the run when the client disconnects (the stream, and with it the receiver, is
    // dropped). It holds a sender, so it must end with the run for the stream to close.
    let watcher_events = events.clone();
    let (watch_cancel, watch_finished) = (cancel.clone(), finished.clone());
    tokio::spawn(async move {
        tokio::select! {
            () = watcher_events.closed() => watch_cancel.cancel(),
            () = watch_finished.cancelled() => {}
        }
    });
    let task_app = app.clone();
    tokio::spawn(
        async move {
            let result = begun.run(&task_app, Some(&events), &cancel).await;
            finished.cancel();
            drop(events);
            let _ = result_tx.send(result);
        }
        .in_current_span(),
    );

    // The first event names the trace; without it the run failed before writing one, and
    // the last frame says why.
    let (trace_id, pending) = match receiver.recv().await {
        Some(Event::Started { trace_id }) => (Some(trace_id), None),
        other => (None, other),
    };
    let header = HeaderValue::from_str(&conversation_id).ok();
    let frames = stream::unfold(Some((1, pending, receiver, result_rx)), move |state| {
        let conversation = conversation_id.clone();
        async move {
            let (seq, pending, mut receiver, result_rx) = state?;
            let next = match pending {
                Some(event) => Some(event),
                None => receiver.recv().await,
            };
            if let Some(event) = next {
                let state = Some((seq + 1, None, receiver, result_rx));
                return Some((frame(seq, &json!(event)), state));
            }
            let last = match result_rx.await {
                Ok(result) => last_frame(&result, &conversation),
                Err(_) => json!({"type": "error", "message": "the run ended unexpectedly"}),
            };
            Some((frame(seq, &last), None))
        }
    });
    let mut response = Sse::new(frames)
        .keep_alive(KeepAlive::default())
        .into_response();
    if let Some(id) = trace_id.and_then(|id| HeaderValue::from_str(&id).ok()) {
        response.headers_mut().insert(TRACE_HEADER, id);
    }
    if let Some(id) = header {
        response.headers_mut().insert(CONVERSATION_HEADER, id);
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_lost_its_database_is_a_503_not_a_500() {
        let lost = crate::error::Error::Unavailable("the database is unreachable".into());
        let answer = run_error(RunError::Internal(lost));
        assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
    }
}
