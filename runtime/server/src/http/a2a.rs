//! `/a2a/{agent}`: each agent as an agent of the Agent2Agent protocol (A2A 1.0, its JSON-RPC
//! binding): its card at `/a2a/{agent}/.well-known/agent-card.json`, and `SendMessage`,
//! `SendStreamingMessage`, `GetTask`, `ListTasks`, `CancelTask` and `SubscribeToTask` at
//! `/a2a/{agent}`.
//! An A2A task is a run of `/api/runs` (its id is the run's, its `contextId` the run's
//! conversation), so any replica reads, streams and cancels it; a run waiting for a person's
//! approval is `TASK_STATE_INPUT_REQUIRED`.

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt, stream};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::AppState;
use super::api::PathParam;
use super::api_error::{ApiError, ApiResult, ErrorBody};
use super::approvals as approvals_api;
use super::chat::ChatBody;
use super::identity::Known;
use super::runs::{self, Ended, Started};
use crate::access::Principal;
use crate::agents::profiles;
use crate::approvals::{self, Decision};
use crate::error::Error;
use crate::runs::{self as store, Run};
use crate::traces;

/// The protocol version served, as the card and the `A2A-Version` header say it.
const VERSION: &str = "1.0";
/// The artifact a task's answer streams into.
const ANSWER: &str = "answer";
/// Tasks a `ListTasks` page holds unless it says otherwise, and at most.
const DEFAULT_PAGE: u32 = 50;
const MAX_PAGE: u32 = 100;
/// How soon a resumed task is first looked at again until it settles; each wait doubles up to
/// the next, so a caller held on one costs a read every two seconds at most.
const SETTLE_POLL: Duration = Duration::from_millis(200);
const SETTLE_POLL_MAX: Duration = Duration::from_secs(2);

// The specification's error codes: JSON-RPC's, then A2A's own.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;
const TASK_NOT_FOUND: i64 = -32001;
const TASK_NOT_CANCELABLE: i64 = -32002;
const PUSH_NOT_SUPPORTED: i64 = -32003;
const UNSUPPORTED_OPERATION: i64 = -32004;
const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
const VERSION_NOT_SUPPORTED: i64 = -32009;

/// A JSON-RPC error: its code and what it says.
struct RpcError(i64, String);

impl RpcError {
    fn params(message: impl Into<String>) -> Self {
        Self(INVALID_PARAMS, message.into())
    }

    fn task_not_found(id: &str) -> Self {
        Self(TASK_NOT_FOUND, format!("no task {id:?}"))
    }
}

/// What the API refused, in the protocol's codes.
impl From<ApiError> for RpcError {
    fn from(e: ApiError) -> Self {
        let code = match e.status() {
            StatusCode::NOT_FOUND => TASK_NOT_FOUND,
            status if status.is_client_error() => INVALID_PARAMS,
            _ => INTERNAL_ERROR,
        };
        Self(code, e.message().to_owned())
    }
}

impl From<Error> for RpcError {
    fn from(e: Error) -> Self {
        ApiError::from(e).into()
    }
}

/// The agent's card: who it is, where and how it is called, and how callers authenticate.
#[utoipa::path(
    get,
    path = "/a2a/{agent}/.well-known/agent-card.json",
    operation_id = "a2a_agent_card",
    tag = "a2a",
    params(("agent" = String, Path, description = "The agent's name")),
    responses(
        (status = 200, description = "the agent's A2A `AgentCard`, as the A2A specification \
            defines it", body = Object),
        (status = 403, description = "an agent closed to the caller", body = ErrorBody),
        (status = 404, description = "no such agent", body = ErrorBody),
    )
)]
pub(super) async fn card(
    Known(caller): Known,
    State(app): State<AppState>,
    PathParam(agent): PathParam<String>,
) -> ApiResult<Json<Value>> {
    let profile = usable(&app, &caller, &agent).await?;
    let url = format!("{}/a2a/{}", app.public_url, profile.name);
    Ok(Json(json!({
        "name": profile.name,
        "description": profile.description,
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": VERSION}
        ],
        "capabilities": {"streaming": true, "pushNotifications": false},
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{
            "id": profile.name,
            "name": profile.name,
            "description": profile.description,
            "tags": ["agent"],
        }],
        // API tokens and sessions work everywhere; a loopback bind also takes this machine
        // without one.
        "securitySchemes": {
            "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}
        },
        "securityRequirements": [{"schemes": {"bearer": {"list": []}}}],
    })))
}

/// The agent `name`, if the caller may use it (404 otherwise, as the API says it).
async fn usable(app: &AppState, caller: &Principal, name: &str) -> ApiResult<profiles::Profile> {
    let wanted = name.to_owned();
    let profile = app
        .db
        .call(move |conn| profiles::get(conn, &wanted))
        .await?
        .ok_or_else(|| Error::not_found(format!("no agent named {name:?}")))?;
    caller.check_agent(&profile.name, profile.access.as_ref())?;
    Ok(profile)
}

/// One call of A2A's JSON-RPC binding: `SendMessage`, `SendStreamingMessage`, `GetTask`,
/// `ListTasks`, `CancelTask` or `SubscribeToTask`. Its errors are JSON-RPC errors (HTTP 200);
/// an unknown agent is a 404.
#[utoipa::path(
    post,
    path = "/a2a/{agent}",
    operation_id = "a2a_call",
    tag = "a2a",
    params(("agent" = String, Path, description = "The agent's name")),
    request_body(description = "A JSON-RPC 2.0 request of the A2A protocol", content = Value,
        content_type = "application/json"),
    responses(
        (status = 200, description = "a JSON-RPC 2.0 response (a result or an error), or for \
            the streaming methods the task's events as server-sent events, each a JSON-RPC \
            response", content(
                (Object = "application/json"),
                ("text/event-stream"),
            )),
        (status = 403, description = "an agent closed to the caller", body = ErrorBody),
        (status = 404, description = "no such agent", body = ErrorBody),
        (status = 429, description = "past the caller's run budget", body = ErrorBody),
    )
)]
pub(super) async fn rpc(
    Known(caller): Known,
    State(app): State<AppState>,
    PathParam(agent): PathParam<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(e) = usable(&app, &caller, &agent).await {
        return e.into_response();
    }
    let request: Value = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(e) => return answer(&Value::Null, Err(RpcError(PARSE_ERROR, e.to_string()))),
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let (Some("2.0"), Some(method)) = (
        request.get("jsonrpc").and_then(Value::as_str),
        request.get("method").and_then(Value::as_str),
    ) else {
        let refused = RpcError(
            INVALID_REQUEST,
            "a JSON-RPC 2.0 request object with a method".into(),
        );
        return answer(&id, Err(refused));
    };
    if let Some(version) = headers.get("a2a-version") {
        let version = String::from_utf8_lossy(version.as_bytes());
        if !version.trim().starts_with("1.") {
            let refused = RpcError(
                VERSION_NOT_SUPPORTED,
                format!("A2A version {version:?} is not served; this agent speaks {VERSION}"),
            );
            return answer(&id, Err(refused));
        }
    }
    let empty = json!({});
    let params = match request.get("params") {
        None => &empty,
        Some(params @ Value::Object(_)) => params,
        Some(_) => return answer(&id, Err(RpcError::params("params must be an object"))),
    };
    let call = Call {
        app: &app,
        caller: &caller,
        agent: &agent,
    };
    match method {
        "SendMessage" => answer(&id, call.send(params).await),
        "SendStreamingMessage" => match Incoming::read(params) {
            Ok(message) if message.task_id.is_some() => match call.resume(&message).await {
                Ok((run, task, decided)) => resumed(&app, id, run, task, decided),
                Err(e) => answer(&id, Err(e)),
            },
            Ok(message) => match call.start(message).await {
                Ok((run, task, ..)) => events(&app, id, run, task),
                Err(e) => answer(&id, Err(e)),
            },
            Err(e) => answer(&id, Err(e)),
        },
        "GetTask" => answer(&id, call.get(params).await),
        "CancelTask" => answer(&id, call.cancel(params).await),
        "SubscribeToTask" => match call.subscribe(params).await {
            Ok((run, task)) => events(&app, id, run, task),
            Err(e) => answer(&id, Err(e)),
        },
        "CreateTaskPushNotificationConfig"
        | "GetTaskPushNotificationConfig"
        | "ListTaskPushNotificationConfigs"
        | "DeleteTaskPushNotificationConfig" => answer(
            &id,
            Err(RpcError(
                PUSH_NOT_SUPPORTED,
                "push notifications are not offered; stream the task or read it with GetTask"
                    .into(),
            )),
        ),
        "ListTasks" => answer(&id, call.list(params).await),
        "GetExtendedAgentCard" => answer(
            &id,
            Err(RpcError(
                UNSUPPORTED_OPERATION,
                format!("{method} is not offered by this agent"),
            )),
        ),
        _ => answer(
            &id,
            Err(RpcError(METHOD_NOT_FOUND, format!("no method {method:?}"))),
        ),
    }
}

/// A JSON-RPC response: the result, or the error.
fn answer(id: &Value, outcome: Result<Value, RpcError>) -> Response {
    Json(response(id, outcome)).into_response()
}

fn response(id: &Value, outcome: Result<Value, RpcError>) -> Value {
    match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(RpcError(code, message)) => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        }
    }
}

/// A run just started for a message: the run, its task as it starts, its end once it comes,
/// and its prompt.
type Begun = (Started, Value, JoinHandle<Ended>, String);

/// A call on one agent by one caller.
struct Call<'a> {
    app: &'a AppState,
    caller: &'a Principal,
    agent: &'a str,
}

impl Call<'_> {
    /// Starts a run for the message; with `configuration.returnImmediately` answers the task
    /// at once, else once the run ends or waits for input.
    async fn send(&self, params: &Value) -> Result<Value, RpcError> {
        let message = Incoming::read(params)?;
        let at_once = params["configuration"]["returnImmediately"] == true;
        if message.task_id.is_some() {
            let (run, task, decided) = self.resume(&message).await?;
            if at_once {
                return Ok(json!({"task": task}));
            }
            let run = settled(self.app, &run.run_id, &decided).await?;
            return Ok(json!({"task": task_of(self.app, &run).await?}));
        }
        let (run, task, done, prompt) = self.start(message).await?;
        if at_once {
            return Ok(json!({"task": task}));
        }
        let end = done
            .await
            .map_err(|e| RpcError(INTERNAL_ERROR, format!("the run stopped: {e}")))?;
        if end.status == "waiting_for_approval" {
            // What it waits for is read from where it was recorded.
            let run = read(self.app, &run.run_id).await?;
            return Ok(json!({"task": task_of(self.app, &run).await?}));
        }
        // Known here already: nothing is read back.
        Ok(json!({"task": task_json(&Facts {
            run_id: &run.run_id,
            context: &run.conversation_id,
            trace_id: &run.trace_id,
            status: end.status,
            timestamp: &crate::db::now(),
            prompt: Some(&prompt),
            answer: end.answer.as_deref(),
            why: end.note.as_deref(),
            waiting: None,
        })}))
    }

    /// Starts a run of the agent for the message (in its `contextId`'s conversation when it
    /// names one): the run, and its task as it starts.
    async fn start(&self, message: Incoming) -> Result<Begun, RpcError> {
        let chat = ChatBody {
            prompt: message.prompt.clone(),
            agent: Some(self.agent.to_owned()),
            model: None,
            conversation_id: message.context_id,
        };
        let (run, done) = runs::start(self.app, self.caller, chat, None, None).await?;
        let task = task_json(&Facts {
            run_id: &run.run_id,
            context: &run.conversation_id,
            trace_id: &run.trace_id,
            status: "running",
            timestamp: &crate::db::now(),
            prompt: Some(&message.prompt),
            answer: None,
            why: None,
            waiting: None,
        });
        Ok((run, task, done, message.prompt))
    }

    /// Goes on with the task the message names, which must wait for input: the message's
    /// decision decides the call it waits for. The run, the task now, and the approval
    /// decided.
    async fn resume(&self, message: &Incoming) -> Result<(Started, Value, String), RpcError> {
        let id = message.task_id.as_deref().unwrap_or_default();
        let run = self.find_id(id).await?;
        if run.status != "waiting_for_approval" {
            return Err(RpcError(
                UNSUPPORTED_OPERATION,
                format!(
                    "task {id:?} is {}, not waiting for input; send a new message with its \
                     contextId",
                    run.status
                ),
            ));
        }
        let Some((decision, note)) = message.decision.clone() else {
            return Err(RpcError::params(format!(
                "task {id:?} waits for a decision on a tool call: send a data part \
                 {{\"decision\": \"approve\" | \"deny\", \"note\"?}}, or the text approve or deny"
            )));
        };
        let task = run.run_id.clone();
        let waiting = self
            .app
            .db
            .call(move |conn| approvals::pending_for_task(conn, &task))
            .await?
            .ok_or_else(|| RpcError::task_not_found(id))?;
        approvals_api::decide_as(self.app, self.caller, waiting.id.clone(), decision, note).await?;
        let task = task_of(self.app, &run).await?;
        Ok((Started::from(run), task, waiting.id))
    }

    /// The task `params.id`, if it is one of this agent's runs the caller may see.
    async fn find(&self, params: &Value) -> Result<Run, RpcError> {
        let id = params["id"]
            .as_str()
            .ok_or_else(|| RpcError::params("params.id (the task's id) is required"))?;
        self.find_id(id).await
    }

    async fn find_id(&self, id: &str) -> Result<Run, RpcError> {
        let run = runs::visible(self.app, self.caller, id.to_owned()).await?;
        if run.agent.as_deref() != Some(self.agent) {
            return Err(RpcError::task_not_found(id));
        }
        Ok(run)
    }

    async fn get(&self, params: &Value) -> Result<Value, RpcError> {
        let run = self.find(params).await?;
        task_of(self.app, &run).await
    }

    /// The agent's tasks the caller may see, newest first, a page at a time (the page token is
    /// where the next page starts), filtered by context, state and the time of their last
    /// change; their history and artifacts only when asked for.
    async fn list(&self, params: &Value) -> Result<Value, RpcError> {
        let page_size = match &params["pageSize"] {
            Value::Null => DEFAULT_PAGE,
            size => size
                .as_u64()
                .filter(|size| (1..=u64::from(MAX_PAGE)).contains(size))
                .ok_or_else(|| RpcError::params(format!("pageSize is 1 to {MAX_PAGE}")))?
                as u32,
        };
        let offset = match params["pageToken"]
            .as_str()
            .filter(|token| !token.is_empty())
        {
            None => 0,
            Some(token) => token
                .parse::<u32>()
                .map_err(|_| RpcError::params("pageToken is not one this agent gave"))?,
        };
        let status = match params["status"].as_str() {
            None | Some("TASK_STATE_UNSPECIFIED") => None,
            Some(state) => Some(status_of(state).ok_or_else(|| {
                RpcError::params(format!("status {state:?} is not a task state"))
            })?),
        };
        let updated_after = match params["statusTimestampAfter"].as_str() {
            None => None,
            Some(time) => Some(
                chrono::DateTime::parse_from_rfc3339(time)
                    .map_err(|e| {
                        RpcError::params(format!("statusTimestampAfter is not a timestamp: {e}"))
                    })?
                    .with_timezone(&chrono::Utc)
                    .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            ),
        };
        let history = match &params["historyLength"] {
            Value::Null => None,
            length => Some(
                length
                    .as_u64()
                    .ok_or_else(|| RpcError::params("historyLength is a number of messages"))?
                    as usize,
            ),
        };
        let filter = store::Filter {
            status: status.map(str::to_owned),
            conversation_id: params["contextId"]
                .as_str()
                .filter(|id| !id.is_empty())
                .map(str::to_owned),
            started_by: self.caller.conversations_scope(),
            agent: Some(self.agent.to_owned()),
            updated_after,
            ..store::Filter::default()
        };
        let (runs, total) = self
            .app
            .db
            .call(move |conn| store::list(conn, &filter, page_size, offset))
            .await?;
        let next = offset + runs.len() as u32;
        let mut tasks = tasks_of(self.app, runs).await?;
        for task in &mut tasks {
            if params["includeArtifacts"] != true {
                task.as_object_mut().map(|task| task.remove("artifacts"));
            }
            if let (Some(keep), Some(messages)) = (history, task["history"].as_array_mut()) {
                messages.drain(..messages.len().saturating_sub(keep));
            }
        }
        Ok(json!({
            "tasks": tasks,
            "nextPageToken": if i64::from(next) < total { next.to_string() } else { String::new() },
            "pageSize": page_size,
            "totalSize": total,
        }))
    }

    /// Cancels the task wherever it runs; one that has ended cannot be.
    async fn cancel(&self, params: &Value) -> Result<Value, RpcError> {
        let run = self.find(params).await?;
        runs::stop(self.app, &run)
            .await
            .map_err(|e| match e.status() {
                StatusCode::CONFLICT => RpcError(TASK_NOT_CANCELABLE, e.message().to_owned()),
                _ => e.into(),
            })?;
        let run = read(self.app, &run.run_id).await?;
        task_of(self.app, &run).await
    }

    /// The task as it is now, then its events from its first (so a client that lost its
    /// stream misses nothing of the answer); one that has ended is read with `GetTask`.
    async fn subscribe(&self, params: &Value) -> Result<(Started, Value), RpcError> {
        let run = self.find(params).await?;
        if !matches!(run.status, "running" | "pending") {
            return Err(RpcError(
                UNSUPPORTED_OPERATION,
                format!(
                    "task {:?} has ended ({}); read it with GetTask",
                    run.run_id, run.status
                ),
            ));
        }
        let task = task_of(self.app, &run).await?;
        Ok((Started::from(run), task))
    }
}

/// What a message says: its text and data parts as one prompt, and where it belongs.
struct Incoming {
    prompt: String,
    context_id: Option<String>,
    task_id: Option<String>,
    /// What it decides for a task waiting for input: a data part `{"decision", "note"?}`, or
    /// the text approve or deny.
    decision: Option<(Decision, Option<String>)>,
}

impl Incoming {
    fn read(params: &Value) -> Result<Self, RpcError> {
        let message = params
            .get("message")
            .filter(|m| m.is_object())
            .ok_or_else(|| RpcError::params("params.message is required"))?;
        if let Some(role) = message.get("role").and_then(Value::as_str)
            && role != "ROLE_USER"
        {
            return Err(RpcError::params(format!(
                "message.role is {role:?}; a message to an agent is ROLE_USER"
            )));
        }
        let parts = message["parts"]
            .as_array()
            .filter(|parts| !parts.is_empty())
            .ok_or_else(|| RpcError::params("message.parts must list at least one part"))?;
        let mut pieces = Vec::with_capacity(parts.len());
        let mut decision = None;
        for part in parts {
            if let Some(text) = part.get("text").and_then(Value::as_str) {
                decision = decision.or(match text.trim().to_lowercase().as_str() {
                    "approve" | "approved" | "yes" => Some((Decision::Approve, None)),
                    "deny" | "denied" | "no" => Some((Decision::Deny, None)),
                    _ => None,
                });
                pieces.push(text.to_owned());
            } else if let Some(data) = part.get("data") {
                if let Some(said) = data.get("decision") {
                    let note = data.get("note").and_then(Value::as_str).map(str::to_owned);
                    decision = Some(match said.as_str() {
                        Some("approve") => (Decision::Approve, note),
                        Some("deny") => (Decision::Deny, note),
                        _ => {
                            return Err(RpcError::params("a decision is \"approve\" or \"deny\""));
                        }
                    });
                }
                pieces.push(data.to_string());
            } else if part.get("raw").is_some() || part.get("url").is_some() {
                return Err(RpcError(
                    CONTENT_TYPE_NOT_SUPPORTED,
                    "file parts (raw, url) are not taken; send text or data parts".into(),
                ));
            } else {
                return Err(RpcError::params(
                    "each part is a text, data, raw or url part",
                ));
            }
        }
        let prompt = pieces.join("\n\n");
        if prompt.trim().is_empty() {
            return Err(RpcError::params("the message says nothing"));
        }
        let id = |name: &str| message.get(name).and_then(Value::as_str).map(str::to_owned);
        Ok(Self {
            prompt,
            context_id: id("contextId").filter(|id| !id.is_empty()),
            task_id: id("taskId").filter(|id| !id.is_empty()),
            decision,
        })
    }
}

fn user_message(task: &str, context: &str, text: &str) -> Value {
    json!({
        "messageId": format!("{task}-prompt"),
        "contextId": context,
        "taskId": task,
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    })
}

fn agent_message(task: &str, context: &str, id: &str, part: Value) -> Value {
    json!({
        "messageId": format!("{task}-{id}"),
        "contextId": context,
        "taskId": task,
        "role": "ROLE_AGENT",
        "parts": [part],
    })
}

/// The run status an A2A state names, for a list's filter.
fn status_of(state: &str) -> Option<&'static str> {
    Some(match state {
        "TASK_STATE_SUBMITTED" => "pending",
        "TASK_STATE_WORKING" => "running",
        "TASK_STATE_INPUT_REQUIRED" => "waiting_for_approval",
        "TASK_STATE_COMPLETED" => "completed",
        "TASK_STATE_CANCELED" => "cancelled",
        "TASK_STATE_FAILED" => "error",
        _ => return None,
    })
}

/// A run's state as A2A names it.
fn state_of(status: &str) -> &'static str {
    match status {
        "pending" => "TASK_STATE_SUBMITTED",
        "running" => "TASK_STATE_WORKING",
        "waiting_for_approval" => "TASK_STATE_INPUT_REQUIRED",
        "completed" => "TASK_STATE_COMPLETED",
        "cancelled" => "TASK_STATE_CANCELED",
        _ => "TASK_STATE_FAILED",
    }
}

/// The run as it is recorded. Whoever saw a run's last frame finds its end recorded (see
/// `Recorder::end`), and a cancel is recorded before it answers.
async fn read(app: &AppState, run_id: &str) -> Result<Run, RpcError> {
    let id = run_id.to_owned();
    app.db
        .call(move |conn| store::get(conn, &id))
        .await?
        .ok_or_else(|| RpcError::task_not_found(run_id))
}

/// The run once it has ended, or waits for another decision than `decided`. A resumed run's
/// answer comes whole (it streams nowhere), so this is looked for.
async fn settled(app: &AppState, run_id: &str, decided: &str) -> Result<Run, RpcError> {
    let mut wait = SETTLE_POLL;
    loop {
        let id = run_id.to_owned();
        let (run, waiting) = app
            .db
            .call(move |conn| {
                Ok((
                    store::get(conn, &id)?,
                    approvals::pending_for_task(conn, &id)?,
                ))
            })
            .await?;
        let run = run.ok_or_else(|| RpcError::task_not_found(run_id))?;
        let again = waiting.is_some_and(|waiting| waiting.id != decided);
        if matches!(run.status, "completed" | "error" | "cancelled") || again {
            return Ok(run);
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(SETTLE_POLL_MAX);
    }
}

/// The task after its decision, then its last status once it settles.
fn resumed(app: &AppState, id: Value, run: Started, task: Value, decided: String) -> Response {
    let app = app.clone();
    let first = response(&id, Ok(json!({"task": task})));
    let last = async move {
        let run = settled(&app, &run.run_id, &decided).await;
        response(&id, last_update(&app, run).await)
    };
    sse(stream::once(async move { first }).chain(stream::once(last)))
}

/// The last status of a task whose run settled, as an update.
async fn last_update(app: &AppState, run: Result<Run, RpcError>) -> Result<Value, RpcError> {
    let task = task_of(app, &run?).await?;
    Ok(json!({"statusUpdate": {
        "taskId": task["id"],
        "contextId": task["contextId"],
        "status": task["status"],
    }}))
}

/// JSON-RPC responses as server-sent events.
fn sse(events: impl Stream<Item = Value> + Send + 'static) -> Response {
    let events =
        events.map(|event| Ok::<_, Infallible>(SseEvent::default().data(event.to_string())));
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// A run as an A2A task: its state (with why, when it failed or waits for input), its
/// prompt and answer as history, and the answer as its artifact.
async fn task_of(app: &AppState, run: &Run) -> Result<Value, RpcError> {
    let mut tasks = tasks_of(app, vec![run.clone()]).await?;
    Ok(tasks.remove(0))
}

/// [`task_of`] for each run, read in one go.
async fn tasks_of(app: &AppState, runs: Vec<Run>) -> Result<Vec<Value>, RpcError> {
    let tasks = app
        .db
        .call(move |conn| {
            runs.iter()
                .map(|run| {
                    let waiting = approvals::pending_for_task(conn, &run.run_id)?.map(|waiting| {
                        json!({"approval_id": waiting.id, "tool": waiting.tool, "input": waiting.input})
                    });
                    let trace = traces::get(conn, &run.trace_id)?;
                    Ok(task_json(&Facts {
                        run_id: &run.run_id,
                        context: &run.conversation_id,
                        trace_id: &run.trace_id,
                        status: run.status,
                        timestamp: &run.updated_at,
                        prompt: trace.as_ref().map(|trace| trace.prompt.as_str()),
                        answer: trace.as_ref().and_then(|trace| trace.response.as_deref()),
                        why: run.description.as_deref(),
                        waiting,
                    }))
                })
                .collect()
        })
        .await?;
    Ok(tasks)
}

/// What is known of a run, for its task.
struct Facts<'a> {
    run_id: &'a str,
    context: &'a str,
    trace_id: &'a str,
    /// The run's status.
    status: &'a str,
    timestamp: &'a str,
    prompt: Option<&'a str>,
    answer: Option<&'a str>,
    /// Why it failed or was cancelled.
    why: Option<&'a str>,
    /// The call it waits for a decision on.
    waiting: Option<Value>,
}

/// A run as an A2A task: its state (with why it failed, or what it waits for), its prompt and
/// answer as history, and the answer as its artifact.
fn task_json(facts: &Facts<'_>) -> Value {
    let (id, context) = (facts.run_id, facts.context);
    let mut status = json!({"state": state_of(facts.status), "timestamp": facts.timestamp});
    let said = match (facts.status, &facts.waiting, facts.why) {
        ("waiting_for_approval", Some(waiting), _) => Some(("input", json!({"data": waiting}))),
        ("error" | "cancelled", _, Some(why)) => Some(("status", json!({"text": why}))),
        _ => None,
    };
    if let Some((name, part)) = said {
        status["message"] = agent_message(id, context, name, part);
    }
    let mut history: Vec<Value> = facts
        .prompt
        .map(|prompt| user_message(id, context, prompt))
        .into_iter()
        .collect();
    let mut artifacts = Vec::new();
    if let Some(answer) = facts.answer {
        history.push(agent_message(id, context, ANSWER, json!({"text": answer})));
        artifacts.push(json!({"artifactId": ANSWER, "name": ANSWER, "parts": [{"text": answer}]}));
    }
    json!({
        "id": id,
        "contextId": context,
        "status": status,
        "artifacts": artifacts,
        "history": history,
        "metadata": {"trace_id": facts.trace_id},
    })
}

/// The task first, then its run's frames from the first as A2A events, each a JSON-RPC
/// response of its own, then the task's last status.
fn events(app: &AppState, id: Value, run: Started, task: Value) -> Response {
    let first = response(&id, Ok(json!({"task": task})));
    let first = stream::once(async move { first });
    let frames = app
        .run_streams
        .follow(app.db.clone(), run.run_id.clone(), 0);
    sse(first.chain(updates(app.clone(), id, run, frames)))
}

/// A run's frames as A2A's events: tokens append to the answer artifact, tool calls and
/// results are working-state messages, the last frame the final status.
fn updates(
    app: AppState,
    id: Value,
    run: Started,
    frames: impl Stream<Item = (i64, std::sync::Arc<str>)> + Send + 'static,
) -> impl Stream<Item = Value> + Send + 'static {
    let state = (Box::pin(frames), false, false);
    stream::unfold(state, move |(mut frames, mut appended, done)| {
        let (app, id, run) = (app.clone(), id.clone(), run.clone());
        async move {
            if done {
                return None;
            }
            let (task, context) = (run.run_id.as_str(), run.conversation_id.as_str());
            let (seq, frame) = frames.next().await?;
            let frame: Value = serde_json::from_str(&frame).unwrap_or(Value::Null);
            let result = match frame["type"].as_str() {
                Some("token") => {
                    let update = json!({"artifactUpdate": {
                        "taskId": task,
                        "contextId": context,
                        "artifact": {
                            "artifactId": ANSWER,
                            "name": ANSWER,
                            "parts": [{"text": frame["text"]}],
                        },
                        "append": appended,
                        "lastChunk": false,
                    }});
                    appended = true;
                    Ok(update)
                }
                Some("done" | "error" | "approval_required") => {
                    let update = last_update(&app, read(&app, task).await).await;
                    return Some((response(&id, update), (frames, appended, true)));
                }
                _ => Ok(json!({"statusUpdate": {
                    "taskId": task,
                    "contextId": context,
                    "status": {
                        "state": "TASK_STATE_WORKING",
                        "message": agent_message(task, context, &seq.to_string(), json!({"data": frame})),
                    },
                }})),
            };
            Some((response(&id, result), (frames, appended, false)))
        }
    })
}
