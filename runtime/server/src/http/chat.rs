//! `/api/chat`: run an agent and answer at once, or stream the run as server-sent events.

use std::convert::Infallible;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::AppState;
use super::api::{ApiError, ApiResult, JsonBody};
use super::conversations as http_conversations;
use crate::agents::profiles::DEFAULT_PROFILE;
use crate::conversations;
use crate::engine::{Event, ProfileChoice, RunError, RunOutput, RunRequest};

/// The response header of a chat stream that names the run's trace.
const TRACE_HEADER: &str = "x-trace-id";

#[derive(Deserialize)]
pub struct ChatBody {
    prompt: String,
    agent: Option<String>,
    model: Option<String>,
    /// Continues this conversation; a new one starts without it.
    conversation_id: Option<String>,
}

/// A chat turn: the run to make, and the conversation it continues (`None`: a new one).
struct Turn {
    request: RunRequest,
    prompt: String,
    conversation: Option<String>,
}

/// Reads the conversation a turn continues (404 unknown; its agent, unless the body names
/// the same one, 400) and hands the model its latest messages.
async fn turn(app: &AppState, body: ChatBody) -> ApiResult<Turn> {
    let prompt = body.prompt.clone();
    let model = body.model.filter(|m| !m.trim().is_empty());
    let (agent, history, conversation) = match body.conversation_id {
        None => (
            body.agent.unwrap_or_else(|| DEFAULT_PROFILE.to_owned()),
            Vec::new(),
            None,
        ),
        Some(id) => {
            let budget = app.conversation_budget;
            let (found, history) = app
                .db
                .call(move |conn| {
                    let found = conversations::get(conn, &id)?
                        .ok_or_else(|| http_conversations::unknown(&id))?;
                    let history = conversations::history(conn, &id, budget)?;
                    Ok((found, history))
                })
                .await?;
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
            (found.agent, history, Some(found.id))
        }
    };
    Ok(Turn {
        request: RunRequest {
            model,
            history,
            ..RunRequest::new(prompt.clone(), ProfileChoice::Required(agent), "chat")
        },
        prompt,
        conversation,
    })
}

impl Turn {
    /// The conversation's id, started now when the turn opens one (after its run could be
    /// prepared, so a refused prompt leaves none behind).
    async fn conversation_id(&mut self, app: &AppState) -> ApiResult<String> {
        if let Some(id) = &self.conversation {
            return Ok(id.clone());
        }
        let (agent, prompt) = match &self.request.profile {
            ProfileChoice::Required(agent) | ProfileChoice::Preferred(agent) => {
                (agent.clone(), self.prompt.clone())
            }
        };
        let started = app
            .db
            .call(move |conn| conversations::start(conn, &agent, "chat", &prompt))
            .await?;
        self.conversation = Some(started.id.clone());
        Ok(started.id)
    }
}

/// Keeps the exchange in its conversation: the prompt always, the answer when there is one.
async fn record(app: &AppState, id: String, prompt: String, result: &Result<RunOutput, RunError>) {
    let (answer, calls, trace_id) = match result {
        Ok(output) => (
            Some(output.text.clone()),
            Some(json!(output.tool_calls)),
            Some(output.trace_id.clone()),
        ),
        Err(e) => (None, None, e.trace_id().map(str::to_owned)),
    };
    let recorded = app
        .db
        .call(move |conn| {
            conversations::record(
                conn,
                &id,
                &conversations::Exchange {
                    prompt: &prompt,
                    answer: answer.as_deref(),
                    tool_calls: calls.as_ref(),
                    trace_id: trace_id.as_deref(),
                },
            )
        })
        .await;
    if let Err(e) = recorded {
        tracing::warn!("cannot record a chat exchange in its conversation: {e}");
    }
}

fn run_error(e: RunError) -> ApiError {
    let status = match &e {
        RunError::EmptyPrompt => StatusCode::BAD_REQUEST,
        RunError::UnknownAgent { .. } => StatusCode::NOT_FOUND,
        RunError::NotConfigured { .. } => StatusCode::SERVICE_UNAVAILABLE,
        RunError::Failed { .. } => StatusCode::BAD_GATEWAY,
        RunError::Cancelled { .. } => StatusCode::SERVICE_UNAVAILABLE,
        RunError::Internal(_) => {
            return ApiError::from(crate::error::Error::Internal(anyhow::anyhow!("{e}")));
        }
    };
    let trace_id = e.trace_id().map(str::to_owned);
    ApiError::new(status, e.to_string()).with_trace(trace_id.as_deref())
}

/// Runs to the end and answers with the whole result and its conversation.
pub async fn complete(
    State(app): State<AppState>,
    JsonBody(body): JsonBody<ChatBody>,
) -> ApiResult<Json<Value>> {
    let mut turn = turn(&app, body).await?;
    let prepared = app
        .engine
        .prepare(turn.request.clone())
        .await
        .map_err(run_error)?;
    let conversation_id = turn.conversation_id(&app).await?;
    let cancel = app.shutdown.child_token();
    // The run is a task of its own so its trace is always finished; if the client goes away
    // this handler is dropped and the guard cancels the run.
    let _cancel_on_drop = cancel.clone().drop_guard();
    let (engine, task_app, id, prompt) = (
        app.engine.clone(),
        app.clone(),
        conversation_id.clone(),
        turn.prompt,
    );
    let result = tokio::spawn(
        async move {
            let result = engine.execute(prepared, None, &cancel).await;
            record(&task_app, id, prompt, &result).await;
            result
        }
        .in_current_span(),
    )
    .await
    .map_err(|e| ApiError::from(crate::error::Error::Internal(e.into())))?;
    let output = result.map_err(|e| run_error(e).with_conversation(&conversation_id))?;
    let mut answer = json!(output);
    answer["conversation_id"] = json!(conversation_id);
    Ok(Json(answer))
}

fn frame(value: &Value) -> Result<SseEvent, Infallible> {
    Ok(SseEvent::default().data(value.to_string()))
}

/// Streams `token`, `tool_call` and `tool_result` frames as the run works, then one `done`
/// or `error` frame. The run's trace id is in the `X-Trace-Id` header, so a client that stops
/// the run early can still link to it. Problems found before the run starts are plain HTTP
/// errors.
pub async fn stream(
    State(app): State<AppState>,
    JsonBody(body): JsonBody<ChatBody>,
) -> ApiResult<Response> {
    let mut turn = turn(&app, body).await?;
    let prepared = app
        .engine
        .prepare(turn.request.clone())
        .await
        .map_err(run_error)?;
    let conversation_id = turn.conversation_id(&app).await?;
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
    let (engine, task_app, id, prompt) = (
        app.engine.clone(),
        app.clone(),
        conversation_id.clone(),
        turn.prompt,
    );
    tokio::spawn(
        async move {
            let result = engine.execute(prepared, Some(&events), &cancel).await;
            record(&task_app, id, prompt, &result).await;
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
    let frames = stream::unfold(Some((pending, receiver, result_rx)), move |state| {
        let conversation = conversation_id.clone();
        async move {
            let (pending, mut receiver, result_rx) = state?;
            let next = match pending {
                Some(event) => Some(event),
                None => receiver.recv().await,
            };
            if let Some(event) = next {
                return Some((frame(&json!(event)), Some((None, receiver, result_rx))));
            }
            let last = match result_rx.await {
                Ok(Ok(output)) => json!({
                    "type": "done",
                    "trace_id": output.trace_id,
                    "latency_ms": output.latency_ms,
                    "conversation_id": conversation,
                }),
                Ok(Err(e)) => json!({
                    "type": "error",
                    "message": e.to_string(),
                    "trace_id": e.trace_id(),
                    "conversation_id": conversation,
                }),
                Err(_) => json!({"type": "error", "message": "the run ended unexpectedly"}),
            };
            Some((frame(&last), None))
        }
    });
    let mut response = Sse::new(frames)
        .keep_alive(KeepAlive::default())
        .into_response();
    if let Some(id) = trace_id.and_then(|id| HeaderValue::from_str(&id).ok()) {
        response.headers_mut().insert(TRACE_HEADER, id);
    }
    Ok(response)
}
