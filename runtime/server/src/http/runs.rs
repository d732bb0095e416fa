//! `/api/runs`: agent runs that outlive the request that started them. `POST` answers 202 at
//! once and the run works in the background on this replica, as a task; its stream is
//! followed (and re-joined after `Last-Event-ID`) on any replica, its status, answer and tool
//! calls are read, and it is cancelled, wherever it runs. Those who chat see and act on the
//! runs they started; `manage_conversations` on everyone's.

use std::convert::Infallible;
use std::pin::pin;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::api::{Id, JsonBody, Page, PathParam, QueryParams};
use super::api_error::{ApiError, ApiResult, ErrorBody};
use super::chat::{CONVERSATION_HEADER, ChatBody, PromptRefusals, TRACE_HEADER, last_frame};
use super::chat_turns::{self, Begun};
use super::identity::Known;
use crate::access::Principal;
use crate::approvals;
use crate::bus::Event;
use crate::engine::{self, RunError};
use crate::error::Error;
use crate::run_streams::{FLUSH_EVERY, Recorder};
use crate::run_webhooks::{Attempt, Webhook};
use crate::runs::{self, Finish, NewRun, Run};
use crate::tasks::{self, TaskStatus};
use crate::{run_webhooks, task_runs, traces};

/// The response header of a run's stream that names the run.
const RUN_HEADER: &str = "x-run-id";
/// The most a run's `metadata` may hold, as JSON text.
const MAX_METADATA_BYTES: usize = 16 << 10;
/// Task titles are the start of the prompt.
const TITLE_CHARS: usize = 80;

#[derive(Deserialize, ToSchema)]
pub(super) struct RunBody {
    /// What to ask; not blank.
    #[schema(schema_with = crate::agents::schemas::not_blank)]
    prompt: String,
    /// The agent to ask (`default` when absent), or the conversation's own.
    agent: Option<String>,
    /// A model instead of the agent's (blank: the agent's).
    model: Option<String>,
    /// Continues this conversation; a new one starts without it.
    conversation_id: Option<String>,
    /// The caller's own JSON object (at most 16 KiB as JSON), returned with the run.
    #[schema(value_type = Option<Object>)]
    metadata: Option<Value>,
    /// An http(s) URL told when the run ends (a signed POST, retried).
    webhook: Option<String>,
}

/// A run just started.
#[derive(Serialize, ToSchema)]
pub(super) struct RunStarted {
    run_id: String,
    conversation_id: String,
    trace_id: String,
    #[schema(value_type = String, pattern = "^running$")]
    status: &'static str,
}

/// Starts a run in the background, as a task: it outlives the request, and is read, followed
/// and cancelled through its id.
#[utoipa::path(
    post,
    path = "/api/runs",
    operation_id = "start_run",
    tag = "runs",
    request_body = RunBody,
    responses(
        (status = 202, body = RunStarted),
        (status = 400, description = "a blank prompt, metadata that is not an object or is too \
            large, a webhook refused, or an agent other than the conversation's; `field` names \
            it", body = ErrorBody),
        PromptRefusals,
    )
)]
pub(super) async fn create(
    Known(caller): Known,
    State(app): State<AppState>,
    JsonBody(body): JsonBody<RunBody>,
) -> ApiResult<(StatusCode, Json<RunStarted>)> {
    let metadata = match body.metadata {
        None | Some(Value::Null) => None,
        Some(value @ Value::Object(_)) if value.to_string().len() <= MAX_METADATA_BYTES => {
            Some(value)
        }
        Some(Value::Object(_)) => {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("metadata is over {MAX_METADATA_BYTES} bytes as JSON"),
            )
            .with_field("metadata"));
        }
        Some(_) => {
            return Err(
                ApiError::new(StatusCode::BAD_REQUEST, "metadata must be a JSON object")
                    .with_field("metadata"),
            );
        }
    };
    let chat = ChatBody {
        prompt: body.prompt,
        agent: body.agent,
        model: body.model,
        conversation_id: body.conversation_id,
    };
    let (started, _) = start(&app, &caller, chat, metadata, body.webhook).await?;
    let answer = RunStarted {
        run_id: started.run_id,
        conversation_id: started.conversation_id,
        trace_id: started.trace_id,
        status: "running",
    };
    Ok((StatusCode::ACCEPTED, Json(answer)))
}

/// A run just started.
#[derive(Clone)]
pub(super) struct Started {
    pub run_id: String,
    pub conversation_id: String,
    pub trace_id: String,
}

impl From<Run> for Started {
    fn from(run: Run) -> Self {
        Self {
            run_id: run.run_id,
            conversation_id: run.conversation_id,
            trace_id: run.trace_id,
        }
    }
}

/// How a run ended, as the replica that ran it saw it (its task says the same once recorded).
pub(super) struct Ended {
    /// `completed`, `error`, `cancelled`, or `waiting_for_approval` (it paused).
    pub status: &'static str,
    pub answer: Option<String>,
    /// Why it failed or was cancelled.
    pub note: Option<String>,
}

/// Starts a run in the background on this replica, as a task: its webhook checked first, its
/// turn's place taken, its trace named. Nothing is started when any of it is refused. The
/// handle gives how it ended, to a caller that waits for it here.
pub(super) async fn start(
    app: &AppState,
    caller: &Principal,
    chat: ChatBody,
    metadata: Option<Value>,
    webhook: Option<String>,
) -> ApiResult<(Started, JoinHandle<Ended>)> {
    if let Some(url) = &webhook {
        app.webhooks
            .check(url)
            .await
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, e).with_field("webhook"))?;
    }
    let title: String = chat.prompt.trim().chars().take(TITLE_CHARS).collect();
    let begun = chat_turns::begin(app, caller, chat).await?;
    let trace_id = uuid::Uuid::new_v4().to_string();
    let new = (
        title,
        begun.agent.clone(),
        begun.conversation_id.clone(),
        trace_id.clone(),
        app.replica.clone(),
        caller.label(),
        webhook,
    );
    let run_id = app
        .db
        .call(move |conn| {
            let (title, agent, conversation_id, trace_id, runner, started_by, webhook) = new;
            runs::create(
                conn,
                &NewRun {
                    title: &title,
                    agent: &agent,
                    conversation_id: &conversation_id,
                    trace_id: &trace_id,
                    metadata: metadata.as_ref(),
                    runner: &runner,
                    started_by: Some(&started_by),
                    webhook: webhook.as_deref(),
                },
            )
        })
        .await?;
    let conversation_id = begun.conversation_id.clone();
    // Held here before the answer, so a reader that comes at once follows it from memory.
    let recorder = app.run_streams.begin(&run_id);
    let begun = begun.with_trace_id(&trace_id).for_task(&run_id);
    let done = tokio::spawn(work(app.clone(), begun, run_id.clone(), recorder));
    let started = Started {
        run_id,
        conversation_id,
        trace_id,
    };
    Ok((started, done))
}

/// Runs the turn, recording its frames, then its end.
async fn work(app: AppState, begun: Begun, run_id: String, mut recorder: Recorder) -> Ended {
    let conversation = begun.conversation_id.clone();
    let (events, mut receiver) = mpsc::unbounded_channel();
    let cancel = app.shutdown.child_token();
    let running = task_runs::cancellable(&app.running, &run_id, &cancel, async |cancel| {
        begun.run(&app, Some(&events), &cancel).await
    });
    let mut running = pin!(running);
    let mut flush = tokio::time::interval(FLUSH_EVERY);
    let result = loop {
        tokio::select! {
            result = &mut running => break result,
            Some(event) = receiver.recv() => record(&mut recorder, &event),
            _ = flush.tick() => {
                if let Err(e) = recorder.flush(&app.db).await {
                    tracing::warn!(run = %run_id, "cannot keep a run's frames yet: {e}");
                }
            }
        }
    };
    while let Ok(event) = receiver.try_recv() {
        record(&mut recorder, &event);
    }
    let last = last_frame(&result, &conversation);
    let finish = match &result {
        Ok(output) => Finish {
            status: TaskStatus::Completed,
            trace_id: Some(output.trace_id.clone()),
            note: None,
        },
        Err(e) => Finish {
            status: match e {
                RunError::Cancelled { .. } => TaskStatus::Cancelled,
                RunError::Paused { .. } => TaskStatus::Pending,
                _ => TaskStatus::Error,
            },
            trace_id: e.trace_id().map(str::to_owned),
            note: (!matches!(e, RunError::Paused { .. })).then(|| e.to_string()),
        },
    };
    let ended = Ended {
        status: match finish.status {
            TaskStatus::Pending => "waiting_for_approval",
            status => status.as_str(),
        },
        answer: result.ok().map(|output| output.text),
        note: finish.note.clone(),
    };
    recorder.end(&app.db, &last, finish).await;
    app.webhooks.wake();
    ended
}

fn record(recorder: &mut Recorder, event: &engine::Event) {
    // The trace is named in the run already.
    if !matches!(event, engine::Event::Started { .. }) {
        recorder.push(&json!(event));
    }
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct Filter {
    /// Only runs of this status.
    #[param(pattern = "^(pending|running|waiting_for_approval|completed|error|cancelled)$")]
    status: Option<String>,
    /// Only runs of this conversation.
    conversation_id: Option<String>,
    /// Only the run of this trace.
    trace_id: Option<String>,
    #[serde(flatten)]
    #[param(ignore)]
    page: Page,
}

#[derive(Serialize, ToSchema)]
pub(super) struct RunList {
    runs: Vec<Run>,
    limit: u32,
    offset: u32,
    total: i64,
}

/// A page of runs (50 by default), newest first: the caller's own unless they may manage
/// every conversation.
#[utoipa::path(
    get,
    path = "/api/runs",
    operation_id = "list_runs",
    tag = "runs",
    params(Filter, Page),
    responses(
        (status = 200, body = RunList),
        (status = 400, description = "an unknown status, or a limit or offset out of range",
            body = ErrorBody),
    )
)]
pub(super) async fn list(
    Known(caller): Known,
    State(app): State<AppState>,
    QueryParams(filter): QueryParams<Filter>,
) -> ApiResult<Json<RunList>> {
    let (limit, offset) = filter.page.resolve(50)?;
    let filter = runs::Filter {
        status: filter.status,
        conversation_id: filter.conversation_id,
        trace_id: filter.trace_id,
        started_by: caller.conversations_scope(),
        ..runs::Filter::default()
    };
    let (runs, total) = app
        .db
        .call(move |conn| runs::list(conn, &filter, limit, offset))
        .await?;
    Ok(Json(RunList {
        runs,
        limit,
        offset,
        total,
    }))
}

/// The run `id` if the caller may see it; others' are unknown to them (404).
pub(super) async fn visible(app: &AppState, caller: &Principal, id: String) -> ApiResult<Run> {
    let run = app
        .db
        .call(move |conn| {
            runs::get(conn, &id)?.ok_or_else(|| Error::not_found(format!("no run {id:?}")))
        })
        .await?;
    if !caller.may_enter(run.started_by.as_deref()) {
        return Err(Error::not_found(format!("no run {:?}", run.run_id)).into());
    }
    Ok(run)
}

/// A run's tool call, as its trace recorded it.
#[derive(Serialize, ToSchema)]
pub(super) struct RunToolCall {
    id: Option<String>,
    name: String,
    input: Value,
    output: Option<String>,
    /// `ok` or `error`.
    status: String,
    error: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub(super) struct RunDetail {
    #[serde(flatten)]
    run: Run,
    /// The agent's answer, once it completed.
    answer: Option<String>,
    tool_calls: Vec<RunToolCall>,
    /// Its webhook's delivery, when it has one.
    webhook: Option<Webhook>,
}

/// One run: its status, and its answer and tool calls so far (from its trace).
#[utoipa::path(
    get,
    path = "/api/runs/{id}",
    operation_id = "show_run",
    tag = "runs",
    params(Id),
    responses(
        (status = 200, body = RunDetail),
        (status = 404, description = "no such run (or someone else's)", body = ErrorBody),
    )
)]
pub(super) async fn show(
    Known(caller): Known,
    State(app): State<AppState>,
    PathParam(Id { id }): PathParam<Id>,
) -> ApiResult<Json<RunDetail>> {
    let run = visible(&app, &caller, id).await?;
    let (trace_id, run_id) = (run.trace_id.clone(), run.run_id.clone());
    let (trace, steps, webhook) = app
        .db
        .call(move |conn| {
            Ok((
                traces::get(conn, &trace_id)?,
                traces::steps(conn, &trace_id)?,
                run_webhooks::get(conn, &run_id)?,
            ))
        })
        .await?;
    let tool_calls = steps
        .into_iter()
        .filter_map(|step| match step {
            traces::Step::ToolInvocation {
                call_id,
                tool_name,
                input,
                output,
                status,
                error_message,
                ..
            } => Some(RunToolCall {
                id: call_id,
                name: tool_name,
                input,
                output,
                status,
                error: error_message,
            }),
            traces::Step::LlmCall { .. } => None,
        })
        .collect();
    Ok(Json(RunDetail {
        run,
        answer: trace.and_then(|trace| trace.response),
        tool_calls,
        webhook,
    }))
}

#[derive(Serialize, ToSchema)]
pub(super) struct WebhookLog {
    #[serde(flatten)]
    webhook: Webhook,
    /// Its attempts, oldest first.
    log: Vec<Attempt>,
}

/// The run's webhook and its delivery log, oldest attempt first.
#[utoipa::path(
    get,
    path = "/api/runs/{id}/webhook",
    operation_id = "run_webhook",
    tag = "runs",
    params(Id),
    responses(
        (status = 200, body = WebhookLog),
        (status = 404, description = "no such run, or it has no webhook", body = ErrorBody),
    )
)]
pub(super) async fn webhook(
    Known(caller): Known,
    State(app): State<AppState>,
    PathParam(Id { id }): PathParam<Id>,
) -> ApiResult<Json<WebhookLog>> {
    let run = visible(&app, &caller, id).await?;
    let run_id = run.run_id.clone();
    let (webhook, attempts) = app
        .db
        .call(move |conn| {
            Ok((
                run_webhooks::get(conn, &run_id)?,
                run_webhooks::attempts(conn, &run_id)?,
            ))
        })
        .await?;
    let Some(webhook) = webhook else {
        return Err(Error::not_found(format!("run {:?} has no webhook", run.run_id)).into());
    };
    Ok(Json(WebhookLog {
        webhook,
        log: attempts,
    }))
}

#[derive(Serialize, ToSchema)]
pub(super) struct RunCancelled {
    run_id: String,
    #[schema(value_type = String, pattern = "^cancelled$")]
    status: &'static str,
}

/// Cancels a run that has not ended, wherever it runs.
#[utoipa::path(
    post,
    path = "/api/runs/{id}/cancel",
    operation_id = "cancel_run",
    tag = "runs",
    params(Id),
    responses(
        (status = 200, body = RunCancelled),
        (status = 404, description = "no such run (or someone else's)", body = ErrorBody),
        (status = 409, description = "the run has ended", body = ErrorBody),
    )
)]
pub(super) async fn cancel(
    Known(caller): Known,
    State(app): State<AppState>,
    PathParam(Id { id }): PathParam<Id>,
) -> ApiResult<Json<RunCancelled>> {
    let run = visible(&app, &caller, id).await?;
    stop(&app, &run).await?;
    Ok(Json(RunCancelled {
        run_id: run.run_id,
        status: "cancelled",
    }))
}

/// Cancels `run` wherever it runs; 409 when it has ended (nothing changes then).
pub(super) async fn stop(app: &AppState, run: &Run) -> ApiResult<()> {
    let run_id = run.run_id.clone();
    let cancelled = app
        .db
        .call(move |conn| {
            conn.transaction(|tx| {
                let task = tasks::get(tx, &run_id)?
                    .ok_or_else(|| Error::not_found(format!("no run {run_id:?}")))?;
                if !task.status.is_active() {
                    return Ok(None);
                }
                tasks::cancel_or_delete(tx, &run_id)?;
                // A run waiting for approval is told no, and stays cancelled.
                let denied = approvals::deny_for_task(tx, &run_id, "the run was cancelled")?;
                Ok(Some(denied))
            })
        })
        .await?;
    let Some(denied) = cancelled else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "run {:?} has ended ({}); nothing to cancel",
                run.run_id, run.status
            ),
        ));
    };
    if denied > 0 {
        app.approvals_decided.notify_one();
    }
    app.bus.publish(Event::TaskCancelled(run.run_id.clone()));
    Ok(())
}

/// The run's frames as server-sent events, each with its number as `id:`, from the first or
/// from the one after `Last-Event-ID`, until its last frame. Each frame's data is a JSON
/// object whose `type` is `token`, `tool_call` or `tool_result` while the run works, then one
/// `done`, `approval_required` or `error`. The run, its trace and its conversation are named
/// in `X-Run-Id`, `X-Trace-Id` and `X-Conversation-Id`.
#[utoipa::path(
    get,
    path = "/api/runs/{id}/stream",
    operation_id = "follow_run",
    tag = "runs",
    params(
        Id,
        ("last-event-id" = Option<String>, Header,
            description = "Re-joins after this frame (its `id:`)"),
    ),
    responses(
        (status = 200, description = "the run's frames, as server-sent events",
            content_type = "text/event-stream"),
        (status = 400, description = "`Last-Event-ID` is not a frame of the run",
            body = ErrorBody),
        (status = 404, description = "no such run (or someone else's)", body = ErrorBody),
    )
)]
pub(super) async fn stream(
    Known(caller): Known,
    State(app): State<AppState>,
    PathParam(Id { id }): PathParam<Id>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let run = visible(&app, &caller, id).await?;
    let after = match headers.get("last-event-id") {
        None => 0,
        Some(value) => {
            let seen = value
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse::<i64>().ok());
            let mut last = app.run_streams.last_frame(&app.db, &run.run_id).await?;
            // A frame seen on the run's replica reaches the database within a flush: one
            // just seen there is waited for a little.
            let until = tokio::time::Instant::now() + 10 * FLUSH_EVERY;
            while run.status == "running"
                && seen.is_some_and(|seen| seen > last)
                && tokio::time::Instant::now() < until
            {
                tokio::time::sleep(FLUSH_EVERY / 2).await;
                last = app.run_streams.last_frame(&app.db, &run.run_id).await?;
            }
            match seen {
                Some(seen) if (1..=last).contains(&seen) => seen,
                _ => {
                    let shown: String = String::from_utf8_lossy(value.as_bytes())
                        .chars()
                        .take(40)
                        .collect();
                    return Err(ApiError::new(
                        StatusCode::BAD_REQUEST,
                        format!(
                            "Last-Event-ID {shown:?} is not an event of run {:?} (its events \
                             so far are 1 to {last})",
                            run.run_id
                        ),
                    )
                    .with_field("Last-Event-ID"));
                }
            }
        }
    };
    Ok(frames(&app, Started::from(run), after))
}

/// A run's frames after `after` as server-sent events, each with its number as `id:`; the
/// run, its trace and its conversation named in `X-Run-Id`, `X-Trace-Id` and
/// `X-Conversation-Id`, as `/api/chat/stream` names them.
pub(super) fn frames(app: &AppState, run: Started, after: i64) -> Response {
    let frames = app
        .run_streams
        .follow(app.db.clone(), run.run_id.clone(), after)
        .map(|(seq, frame)| {
            Ok::<_, Infallible>(SseEvent::default().id(seq.to_string()).data(&*frame))
        });
    let mut response = Sse::new(frames)
        .keep_alive(KeepAlive::default())
        .into_response();
    for (name, value) in [
        (RUN_HEADER, run.run_id),
        (TRACE_HEADER, run.trace_id),
        (CONVERSATION_HEADER, run.conversation_id),
    ] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}
