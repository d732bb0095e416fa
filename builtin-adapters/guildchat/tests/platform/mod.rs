//! A fake guildchat platform on 127.0.0.1: the REST API (under `/api/v10`) the adapter calls,
//! and a WebSocket gateway speaking the gateway protocol (HELLO, IDENTIFY -> READY, heartbeats
//! and their acks, dispatches). Every REST request is recorded for the tests to inspect.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message as Frame;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

pub const BOT_ID: u64 = 1_000;
pub const GUILD_ID: u64 = 500;
pub const ADMIN_ROLE_ID: u64 = 600;
pub const USER_ID: u64 = 2_000;
const HEARTBEAT_MS: u64 = 1_000;

#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// Below `/api/v10`.
    pub path: String,
    pub body: Value,
}

#[derive(Default)]
struct World {
    requests: Vec<Request>,
    next_id: u64,
    channels: Vec<Value>,
    messages: HashMap<u64, Value>,
    /// Channels where posting answers 403 Missing Permissions.
    denied: Vec<u64>,
    sessions: Vec<mpsc::UnboundedSender<Frame>>,
    identifies: Vec<Value>,
    heartbeats: usize,
    closed_sessions: usize,
}

struct Shared {
    token: String,
    /// The gateway closes every IDENTIFY with 4004 (a token the REST side still accepted).
    gateway_rejects: bool,
    gateway_url: String,
    state: Mutex<World>,
}

impl Shared {
    fn state(&self) -> std::sync::MutexGuard<'_, World> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

pub struct FakePlatform {
    /// What `SERVICE_GUILDCHAT_API_BASE` is set to.
    pub api_base: String,
    shared: Arc<Shared>,
    servers: Vec<JoinHandle<()>>,
}

impl Drop for FakePlatform {
    fn drop(&mut self) {
        self.servers.iter().for_each(JoinHandle::abort);
    }
}

impl FakePlatform {
    pub async fn start(token: &str) -> Self {
        Self::build(token, false).await
    }

    /// REST accepts the token, the gateway does not.
    pub async fn start_rejecting_at_gateway(token: &str) -> Self {
        Self::build(token, true).await
    }

    async fn build(token: &str, gateway_rejects: bool) -> Self {
        let rest = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let gateway = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let shared = Arc::new(Shared {
            token: token.to_owned(),
            gateway_rejects,
            gateway_url: format!("ws://{}", gateway.local_addr().unwrap()),
            state: Mutex::new(World {
                next_id: 10_000,
                ..World::default()
            }),
        });
        let api_base = format!("http://{}", rest.local_addr().unwrap());
        let app = Router::new()
            .fallback(rest_api)
            .with_state(Arc::clone(&shared));
        let servers = vec![
            tokio::spawn(async move { axum::serve(rest, app).await.unwrap() }),
            tokio::spawn(serve_gateway(gateway, Arc::clone(&shared))),
        ];
        Self {
            api_base,
            shared,
            servers,
        }
    }

    /// Adds a guild channel; returns its id.
    pub fn add_channel(&self, name: &str, kind: u8, parent_id: Option<u64>) -> u64 {
        let mut state = self.shared.state();
        let id = next_id(&mut state);
        state.channels.push(channel_json(id, name, kind, parent_id));
        id
    }

    pub fn deny_posts_in(&self, channel_id: u64) {
        self.shared.state().denied.push(channel_id);
    }

    pub fn requests(&self) -> Vec<Request> {
        self.shared.state().requests.clone()
    }

    /// Recorded requests with this method whose path matches `path` (`*` matches one segment).
    pub fn requests_to(&self, method: &str, path: &str) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(|r| r.method == method && path_matches(path, &r.path))
            .collect()
    }

    pub fn channels(&self) -> Vec<Value> {
        self.shared.state().channels.clone()
    }

    pub fn identifies(&self) -> Vec<Value> {
        self.shared.state().identifies.clone()
    }

    pub fn heartbeats(&self) -> usize {
        self.shared.state().heartbeats
    }

    pub fn closed_sessions(&self) -> usize {
        self.shared.state().closed_sessions
    }

    /// Sends a dispatch (op 0) to every connected gateway session.
    pub fn dispatch(&self, event: &str, data: Value) {
        let frame = json!({ "op": 0, "t": event, "d": data });
        let state = self.shared.state();
        assert!(
            !state.sessions.is_empty(),
            "no gateway session to dispatch {event} to"
        );
        for session in &state.sessions {
            let _ = session.send(Frame::text(frame.to_string()));
        }
    }
}

fn path_matches(pattern: &str, path: &str) -> bool {
    let (pattern, path): (Vec<&str>, Vec<&str>) =
        (pattern.split('/').collect(), path.split('/').collect());
    pattern.len() == path.len() && pattern.iter().zip(&path).all(|(p, s)| *p == "*" || p == s)
}

fn next_id(state: &mut World) -> u64 {
    state.next_id += 1;
    state.next_id
}

pub fn bot_user() -> Value {
    json!({ "id": BOT_ID.to_string(), "username": "service-bot", "discriminator": "0",
            "global_name": null, "avatar": null, "bot": true })
}

pub fn human(id: u64) -> Value {
    json!({ "id": id.to_string(), "username": format!("user{id}"), "discriminator": "0",
            "global_name": null, "avatar": null })
}

pub fn member(user_id: u64, roles: &[u64]) -> Value {
    let roles: Vec<String> = roles.iter().map(u64::to_string).collect();
    json!({ "user": human(user_id), "roles": roles, "joined_at": "2026-01-01T00:00:00Z",
            "deaf": false, "mute": false, "flags": 0, "permissions": "0" })
}

pub fn channel_json(id: u64, name: &str, kind: u8, parent_id: Option<u64>) -> Value {
    json!({ "id": id.to_string(), "type": kind, "guild_id": GUILD_ID.to_string(), "name": name,
            "position": 0, "permission_overwrites": [], "nsfw": false,
            "parent_id": parent_id.map(|p| p.to_string()) })
}

/// A message as MESSAGE_CREATE carries it and REST returns it.
pub fn message_json(
    id: u64,
    channel_id: u64,
    guild_id: Option<u64>,
    author: Value,
    content: &str,
    mentions: Vec<Value>,
) -> Value {
    json!({
        "id": id.to_string(), "channel_id": channel_id.to_string(),
        "guild_id": guild_id.map(|g| g.to_string()),
        "author": author, "content": content, "timestamp": "2026-01-01T00:00:00Z",
        "edited_timestamp": null, "tts": false, "mention_everyone": false,
        "mentions": mentions, "mention_roles": [], "attachments": [], "embeds": [],
        "pinned": false, "type": 0
    })
}

fn error(status: StatusCode, code: u32, message: &str) -> Response {
    (
        status,
        axum::Json(json!({ "message": message, "code": code })),
    )
        .into_response()
}

fn ok(body: Value) -> Response {
    axum::Json(body).into_response()
}

async fn rest_api(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri
        .path()
        .strip_prefix("/api/v10")
        .unwrap_or(uri.path())
        .to_owned();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let authorized = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.strip_prefix("Bot ").unwrap_or(v) == shared.token);
    let mut state = shared.state();
    state.requests.push(Request {
        method: method.to_string(),
        path: path.clone(),
        body: body.clone(),
    });
    if !authorized {
        return error(StatusCode::UNAUTHORIZED, 0, "401: Unauthorized");
    }
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let id = |s: &str| s.parse::<u64>().unwrap_or(0);
    match (method.as_str(), segments.as_slice()) {
        ("GET", ["gateway"]) => ok(json!({ "url": shared.gateway_url })),
        ("GET", ["gateway", "bot"]) => ok(json!({
            "url": shared.gateway_url, "shards": 1,
            "session_start_limit": { "total": 1000, "remaining": 1000, "reset_after": 0, "max_concurrency": 1 }
        })),
        ("GET", ["users", "@me"]) => ok(bot_user()),
        ("POST", ["channels", channel, "messages"]) => {
            if state.denied.contains(&id(channel)) {
                return error(StatusCode::FORBIDDEN, 50013, "Missing Permissions");
            }
            let message_id = next_id(&mut state);
            let mut message = message_json(
                message_id,
                id(channel),
                None,
                bot_user(),
                body["content"].as_str().unwrap_or(""),
                vec![],
            );
            message["embeds"] = body.get("embeds").cloned().unwrap_or(json!([]));
            state.messages.insert(message_id, message.clone());
            ok(message)
        }
        ("PATCH", ["channels", _, "messages", message]) => {
            let Some(stored) = state.messages.get_mut(&id(message)) else {
                return error(StatusCode::NOT_FOUND, 10008, "Unknown Message");
            };
            for key in ["content", "embeds"] {
                if let Some(value) = body.get(key) {
                    stored[key] = value.clone();
                }
            }
            ok(stored.clone())
        }
        ("GET", ["channels", _, "messages", message]) => match state.messages.get(&id(message)) {
            Some(stored) => ok(stored.clone()),
            None => error(StatusCode::NOT_FOUND, 10008, "Unknown Message"),
        },
        ("POST", ["channels", channel, "messages", _, "threads"]) => {
            let thread_id = next_id(&mut state);
            let mut thread = channel_json(
                thread_id,
                body["name"].as_str().unwrap_or(""),
                11,
                Some(id(channel)),
            );
            thread["thread_metadata"] = json!({ "archived": false, "auto_archive_duration": 1440,
                "archive_timestamp": "2026-01-01T00:00:00Z", "locked": false });
            ok(thread)
        }
        ("PUT", ["channels", _, "messages", _, "reactions", _, "@me"])
        | ("POST", ["channels", _, "typing"])
        | ("POST", ["interactions", _, _, "callback"]) => StatusCode::NO_CONTENT.into_response(),
        ("GET", ["guilds", _, "channels"]) => ok(Value::Array(state.channels.clone())),
        ("POST", ["guilds", _, "channels"]) => {
            let channel_id = next_id(&mut state);
            let parent = body["parent_id"]
                .as_str()
                .map(id)
                .or(body["parent_id"].as_u64());
            let channel = channel_json(
                channel_id,
                body["name"].as_str().unwrap_or(""),
                body["type"].as_u64().unwrap_or(0) as u8,
                parent,
            );
            state.channels.push(channel.clone());
            ok(channel)
        }
        ("PUT", ["applications", application, "guilds", guild, "commands"]) => {
            let commands: Vec<Value> = body.as_array().cloned().unwrap_or_default().into_iter().map(|command| {
                json!({ "id": "777", "application_id": application, "guild_id": guild, "version": "1",
                        "type": 1, "name": command["name"], "description": command["description"],
                        "default_member_permissions": null })
            }).collect();
            ok(Value::Array(commands))
        }
        ("PATCH", ["webhooks", _, _, "messages", "@original"]) => {
            let message_id = next_id(&mut state);
            ok(message_json(
                message_id,
                1,
                None,
                bot_user(),
                body["content"].as_str().unwrap_or(""),
                vec![],
            ))
        }
        _ => error(StatusCode::NOT_FOUND, 0, "404: Not Found"),
    }
}

async fn serve_gateway(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            if let Ok(socket) = tokio_tungstenite::accept_async(stream).await {
                gateway_session(socket, &shared).await;
            }
            shared.state().closed_sessions += 1;
        });
    }
}

async fn gateway_session(
    socket: tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
    shared: &Shared,
) {
    let (mut sink, mut stream) = socket.split();
    let hello = json!({ "op": 10, "d": { "heartbeat_interval": HEARTBEAT_MS } });
    if sink.send(Frame::text(hello.to_string())).await.is_err() {
        return;
    }
    let (to_client, mut outbox) = mpsc::unbounded_channel::<Frame>();
    let mut sequence = 0u64;
    loop {
        tokio::select! {
            frame = stream.next() => {
                let Some(Ok(Frame::Text(text))) = frame else {
                    if matches!(frame, Some(Ok(_))) { continue }
                    return;
                };
                let payload: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
                match payload["op"].as_u64() {
                    Some(1) => {
                        shared.state().heartbeats += 1;
                        let _ = sink.send(Frame::text(json!({ "op": 11 }).to_string())).await;
                    }
                    Some(2) => {
                        let token = payload["d"]["token"].as_str().unwrap_or("");
                        let token = token.strip_prefix("Bot ").unwrap_or(token);
                        shared.state().identifies.push(payload["d"].clone());
                        if shared.gateway_rejects || token != shared.token {
                            let close = CloseFrame { code: CloseCode::from(4004), reason: "Authentication failed.".into() };
                            let _ = sink.send(Frame::Close(Some(close))).await;
                            // Keep reading until the client closes, as a server would.
                            tokio::time::timeout(Duration::from_secs(2), async { while stream.next().await.is_some() {} }).await.ok();
                            return;
                        }
                        sequence += 1;
                        let ready = json!({ "op": 0, "t": "READY", "s": sequence, "d": {
                            "v": 10, "user": bot_user(), "guilds": [], "session_id": "session-1",
                            "resume_gateway_url": shared.gateway_url, "shard": [0, 1],
                            "application": { "id": BOT_ID.to_string(), "flags": 0 }
                        }});
                        if sink.send(Frame::text(ready.to_string())).await.is_err() { return }
                        shared.state().sessions.push(to_client.clone());
                    }
                    _ => {}
                }
            }
            Some(frame) = outbox.recv() => {
                // Number each dispatch, as the gateway does.
                let frame = match frame {
                    Frame::Text(text) => {
                        sequence += 1;
                        let mut payload: Value = serde_json::from_str(&text).unwrap();
                        payload["s"] = json!(sequence);
                        Frame::text(payload.to_string())
                    }
                    other => other,
                };
                if sink.send(frame).await.is_err() { return }
            }
        }
    }
}
