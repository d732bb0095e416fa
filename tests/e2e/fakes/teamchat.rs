//! The team-chat platform as the teamchat adapter sees it, on one local server: the Web API
//! (`chat.postMessage`, `chat.update`, `conversations.replies`, `conversations.history`) over
//! the channels it keeps, answering posts from a script (refusals with a status, `Retry-After` and body) before
//! its usual answer, and the hooks origin where slash commands' `response_url`s point. A
//! message's `metadata` is kept and read back only with `include_all_metadata=true`, as the
//! platform does.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::support::spawn_fake;

pub const BOT_TOKEN: &str = "xoxb-test-token";
/// The bot's user id: the author of every message it posts.
pub const BOT_USER: &str = "UBOT";

/// One `chat.postMessage` call: the bearer token it came with, its body, when it came.
#[derive(Debug, Clone)]
pub struct Call {
    pub auth: String,
    pub body: Value,
    pub at: Instant,
}

#[derive(Default)]
struct Platform {
    /// The next posts' answers: (status, `Retry-After` seconds, body), or `None` for the
    /// usual answer.
    script: VecDeque<Option<(u16, Option<u64>, Value)>>,
    /// The answer once no refusal is left; `ok: true` stores the message.
    usual: Value,
    /// The next accepted post is stored but never answered (the connection hangs).
    stall_next: bool,
    /// The next post arrives this much later (as over a slow network).
    delay_next: Option<Duration>,
    calls: Vec<Call>,
    /// Every message of every channel, as the platform stores them.
    messages: Vec<Value>,
    /// What reached a `response_url`: its path and body.
    responses: Vec<(String, Value)>,
    /// The bodies of accepted `chat.update` calls.
    updates: Vec<Value>,
    last_ts: u64,
}

#[derive(Clone)]
pub struct FakePlatform {
    /// The hooks origin; the Web API is under `/api`.
    pub base: String,
    state: Arc<Mutex<Platform>>,
}

impl FakePlatform {
    /// A platform whose posts are answered with `usual` (after any scripted refusal).
    pub async fn start(usual: Value) -> Self {
        let state = Arc::new(Mutex::new(Platform {
            usual,
            last_ts: 1_700_000_500_000_000,
            ..Platform::default()
        }));
        let router = Router::new()
            .route("/api/auth.test", post(auth_test))
            .route("/api/chat.postMessage", post(post_message))
            .route("/api/chat.update", post(update_message))
            .route("/api/conversations.replies", get(replies))
            .route("/api/conversations.history", get(history))
            .route("/commands/{*rest}", post(respond))
            .with_state(Arc::clone(&state));
        Self {
            base: spawn_fake(router).await,
            state,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Platform> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The settings of a configured teamchat adapter talking to this platform.
    pub fn env(&self, signing_secret: &str) -> Vec<(&'static str, String)> {
        vec![
            ("SERVICE_TEAMCHAT_SIGNING_SECRET", signing_secret.into()),
            ("SERVICE_TEAMCHAT_BOT_TOKEN", BOT_TOKEN.into()),
            ("SERVICE_TEAMCHAT_API_BASE", format!("{}/api", self.base)),
            ("SERVICE_TEAMCHAT_HOOKS_BASE", self.base.clone()),
        ]
    }

    /// A `response_url` on this platform's hooks origin.
    pub fn response_url(&self, id: &str) -> String {
        format!("{}/commands/T1/{id}/token", self.base)
    }

    /// The next unscripted post is answered with `status` (and `Retry-After`, when given).
    pub fn refuse_next(&self, status: u16, retry_after: Option<u64>, body: Value) {
        self.lock()
            .script
            .push_back(Some((status, retry_after, body)));
    }

    /// The next post the platform accepts is stored, and its answer never sent: what its
    /// sender sees when it dies after the platform took the message, before it heard so.
    pub fn stall_next(&self) {
        self.lock().stall_next = true;
    }

    /// The next post reaches the platform `delay` after it was sent.
    pub fn delay_next(&self, delay: Duration) {
        self.lock().delay_next = Some(delay);
    }

    /// The next unscripted post gets the usual answer (so a later one can be refused).
    pub fn accept_next(&self) {
        self.lock().script.push_back(None);
    }

    /// A message someone wrote earlier (`ts`, `user`, `text`, `channel`, maybe `thread_ts`).
    pub fn seed(&self, message: Value) {
        self.lock().messages.push(message);
    }

    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// The posts the platform accepted (each got a `ts`): (token, body).
    pub fn posted(&self) -> Vec<(String, Value)> {
        self.lock()
            .calls
            .iter()
            .filter(|c| c.body["ts"].is_string())
            .map(|c| (c.auth.clone(), c.body.clone()))
            .collect()
    }

    pub fn responses(&self) -> Vec<(String, Value)> {
        self.lock().responses.clone()
    }

    /// The accepted `chat.update` calls' bodies.
    pub fn updates(&self) -> Vec<Value> {
        self.lock().updates.clone()
    }
}

fn authorization(headers: &HeaderMap) -> String {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

/// The Web API's answer to a call without the bot token, if this one came without it.
fn unauthorized(headers: &HeaderMap) -> Option<Response> {
    (authorization(headers) != format!("Bearer {BOT_TOKEN}"))
        .then(|| Json(json!({"ok": false, "error": "invalid_auth"})).into_response())
}

/// The Web API's token check: `ok` for the bot's token.
async fn auth_test(headers: HeaderMap) -> Json<Value> {
    let ok = authorization(&headers) == format!("Bearer {BOT_TOKEN}");
    Json(json!({"ok": ok, "user_id": BOT_USER}))
}

async fn post_message(
    State(state): State<Arc<Mutex<Platform>>>,
    headers: HeaderMap,
    Json(mut body): Json<Value>,
) -> Response {
    let auth = authorization(&headers);
    let delay = state
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .delay_next
        .take();
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    let (status, retry_after, answer, stall) = {
        let mut platform = state.lock().unwrap_or_else(PoisonError::into_inner);
        let scripted = platform.script.pop_front().flatten();
        let (status, retry_after, mut answer) =
            scripted.unwrap_or_else(|| (200, None, platform.usual.clone()));
        if status == 200 && answer["ok"] == true {
            platform.last_ts += 100;
            let ts = format!(
                "{}.{:06}",
                platform.last_ts / 1_000_000,
                platform.last_ts % 1_000_000
            );
            let mut stored = json!({
                "type": "message", "user": BOT_USER, "bot_id": "B1", "ts": ts,
                "channel": body["channel"], "text": body["text"],
            });
            if let Some(thread) = body["thread_ts"].as_str() {
                stored["thread_ts"] = json!(thread);
            }
            for kept in ["metadata", "blocks"] {
                if !body[kept].is_null() {
                    stored[kept] = body[kept].clone();
                }
            }
            platform.messages.push(stored);
            answer["ts"] = json!(ts);
            body["ts"] = json!(ts);
        }
        let stall = std::mem::take(&mut platform.stall_next) && body["ts"].is_string();
        platform.calls.push(Call {
            auth,
            body,
            at: Instant::now(),
        });
        (status, retry_after, answer, stall)
    };
    if stall {
        std::future::pending::<()>().await;
    }
    let mut response = (StatusCode::from_u16(status).unwrap(), Json(answer)).into_response();
    if let Some(secs) = retry_after {
        response
            .headers_mut()
            .insert("retry-after", secs.to_string().parse().unwrap());
    }
    response
}

#[derive(Deserialize)]
struct Page {
    channel: String,
    ts: Option<String>,
    latest: Option<String>,
    oldest: Option<String>,
    inclusive: Option<String>,
    limit: Option<usize>,
    include_all_metadata: Option<String>,
}

impl Page {
    /// Whether `message` comes before `latest` and after `oldest` (or at them, when inclusive).
    fn keeps(&self, message: &Value) -> bool {
        let ts = number(&message["ts"]);
        let inclusive = self.inclusive.as_deref() == Some("true");
        let bound = |edge: &Option<String>| edge.as_ref().map(|t| number(&json!(t)));
        let before = bound(&self.latest).is_none_or(|l| ts < l || (inclusive && ts == l));
        let after = bound(&self.oldest).is_none_or(|o| ts > o || (inclusive && ts == o));
        before && after
    }

    /// `message` as this page shows it: its metadata only when asked for.
    fn shown(&self, message: &Value) -> Value {
        let mut shown = message.clone();
        if self.include_all_metadata.as_deref() != Some("true")
            && let Some(fields) = shown.as_object_mut()
        {
            fields.remove("metadata");
        }
        shown
    }
}

fn number(ts: &Value) -> f64 {
    ts.as_str().and_then(|t| t.parse().ok()).unwrap_or(0.0)
}

fn sorted(mut messages: Vec<Value>) -> Vec<Value> {
    messages.sort_by(|a, b| number(&a["ts"]).total_cmp(&number(&b["ts"])));
    messages
}

/// A thread, oldest first from its parent, as the Web API pages it.
async fn replies(
    State(state): State<Arc<Mutex<Platform>>>,
    headers: HeaderMap,
    Query(page): Query<Page>,
) -> Response {
    if let Some(refused) = unauthorized(&headers) {
        return refused;
    }
    let Some(thread) = page.ts.clone() else {
        return Json(json!({"ok": false, "error": "invalid_arguments"})).into_response();
    };
    let platform = state.lock().unwrap_or_else(PoisonError::into_inner);
    let in_thread = platform.messages.iter().filter(|m| {
        m["channel"] == page.channel.as_str()
            && (m["ts"] == thread.as_str() || m["thread_ts"] == thread.as_str())
    });
    let messages: Vec<Value> = sorted(
        in_thread
            .filter(|m| page.keeps(m))
            .map(|m| page.shown(m))
            .collect(),
    )
    .into_iter()
    .take(page.limit.unwrap_or(1000))
    .collect();
    Json(json!({"ok": true, "messages": messages, "has_more": false})).into_response()
}

/// A conversation's own messages (not thread replies), newest first.
async fn history(
    State(state): State<Arc<Mutex<Platform>>>,
    headers: HeaderMap,
    Query(page): Query<Page>,
) -> Response {
    if let Some(refused) = unauthorized(&headers) {
        return refused;
    }
    let platform = state.lock().unwrap_or_else(PoisonError::into_inner);
    let top_level = platform.messages.iter().filter(|m| {
        m["channel"] == page.channel.as_str()
            && (m["thread_ts"].is_null() || m["thread_ts"] == m["ts"])
    });
    let mut messages = sorted(
        top_level
            .filter(|m| page.keeps(m))
            .map(|m| page.shown(m))
            .collect(),
    );
    messages.reverse();
    messages.truncate(page.limit.unwrap_or(100));
    Json(json!({"ok": true, "messages": messages, "has_more": false})).into_response()
}

/// Replaces a stored message's text and blocks; `message_not_found` for an unknown one.
async fn update_message(
    State(state): State<Arc<Mutex<Platform>>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    if let Some(refused) = unauthorized(&headers) {
        return refused;
    }
    let mut platform = state.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(message) = platform
        .messages
        .iter_mut()
        .find(|m| m["channel"] == body["channel"] && m["ts"] == body["ts"])
    else {
        return Json(json!({"ok": false, "error": "message_not_found"})).into_response();
    };
    message["text"] = body["text"].clone();
    message["blocks"] = body["blocks"].clone();
    platform.updates.push(body.clone());
    Json(json!({"ok": true, "channel": body["channel"], "ts": body["ts"]})).into_response()
}

async fn respond(
    State(state): State<Arc<Mutex<Platform>>>,
    Path(rest): Path<String>,
    Json(body): Json<Value>,
) -> &'static str {
    let mut platform = state.lock().unwrap_or_else(PoisonError::into_inner);
    platform.responses.push((rest, body));
    "ok"
}
