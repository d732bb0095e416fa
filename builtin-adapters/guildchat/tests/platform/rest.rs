//! The REST API under `/api/v10`. Every call is recorded with when it arrived and the status it
//! got. A route can be told to refuse its next calls with 429, as the platform's rate limits do.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::fixtures::{bot_user, channel_json, message_json};
use super::{FakePlatform, Shared, path_matches};

/// Above the ids the tests pick for their own messages and channels.
const FIRST_ID: u64 = 10_000;

#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// Below `/api/v10`.
    pub path: String,
    pub body: Value,
    pub at: Instant,
    /// The status the fake answered with.
    pub status: u16,
}

#[derive(Default)]
pub(super) struct Rest {
    pub requests: Vec<Request>,
    /// How many ids the fake has handed out.
    issued: u64,
    pub channels: Vec<Value>,
    messages: HashMap<u64, Value>,
    /// Channels where posting answers 403 Missing Permissions.
    denied: Vec<u64>,
    limits: Vec<RateLimit>,
}

/// The next `refusals` calls of `method path` are answered 429, asking for `retry_after`.
struct RateLimit {
    method: String,
    path: String,
    refusals: usize,
    retry_after: Duration,
}

impl Rest {
    pub fn next_id(&mut self) -> u64 {
        self.issued += 1;
        FIRST_ID + self.issued
    }

    /// Uses up one refusal of a limit on this call, if one applies.
    fn refusal(&mut self, method: &str, path: &str) -> Option<Duration> {
        let limit = self.limits.iter_mut().find(|limit| {
            limit.refusals > 0 && limit.method == method && path_matches(&limit.path, path)
        })?;
        limit.refusals -= 1;
        Some(limit.retry_after)
    }
}

impl FakePlatform {
    /// Adds a guild channel; returns its id.
    pub fn add_channel(&self, name: &str, kind: u8, parent_id: Option<u64>) -> u64 {
        let mut world = self.shared.world();
        let id = world.rest.next_id();
        world
            .rest
            .channels
            .push(channel_json(id, name, kind, parent_id));
        id
    }

    pub fn deny_posts_in(&self, channel_id: u64) {
        self.shared.world().rest.denied.push(channel_id);
    }

    /// Refuses the next `refusals` calls of `method path` (`*` matches one segment) with 429,
    /// asking the client to retry after `retry_after`.
    pub fn rate_limit(&self, method: &str, path: &str, refusals: usize, retry_after: Duration) {
        self.shared.world().rest.limits.push(RateLimit {
            method: method.to_owned(),
            path: path.to_owned(),
            refusals,
            retry_after,
        });
    }

    pub fn requests(&self) -> Vec<Request> {
        self.shared.world().rest.requests.clone()
    }

    /// Recorded requests with this method whose path matches `path` (`*` matches one segment).
    pub fn requests_to(&self, method: &str, path: &str) -> Vec<Request> {
        self.requests()
            .into_iter()
            .filter(|r| r.method == method && path_matches(path, &r.path))
            .collect()
    }

    pub fn channels(&self) -> Vec<Value> {
        self.shared.world().rest.channels.clone()
    }
}

pub(super) async fn api(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let at = Instant::now();
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
    let mut world = shared.world();
    let rest = &mut world.rest;
    let response = if !authorized {
        error(StatusCode::UNAUTHORIZED, 0, "401: Unauthorized")
    } else if let Some(retry_after) = rest.refusal(method.as_str(), &path) {
        too_many_requests(retry_after)
    } else {
        answer(rest, &shared.gateway_url, &method, &path, &body)
    };
    rest.requests.push(Request {
        method: method.to_string(),
        path,
        body,
        at,
        status: response.status().as_u16(),
    });
    response
}

/// A route's rate limit as the platform reports it: `Retry-After` in whole seconds (rounded
/// up), the bucket's `X-RateLimit-*` headers, and the exact wait in the body.
fn too_many_requests(retry_after: Duration) -> Response {
    let wait = retry_after.as_secs_f64();
    let reset = SystemTime::now().duration_since(UNIX_EPOCH).unwrap() + retry_after;
    let headers = [
        ("retry-after", wait.ceil().to_string()),
        ("x-ratelimit-limit", "5".to_owned()),
        ("x-ratelimit-remaining", "0".to_owned()),
        ("x-ratelimit-reset", format!("{:.3}", reset.as_secs_f64())),
        ("x-ratelimit-reset-after", format!("{wait:.3}")),
        ("x-ratelimit-bucket", "fake-bucket".to_owned()),
        ("x-ratelimit-scope", "user".to_owned()),
    ];
    let body = json!({ "message": "You are being rate limited.", "retry_after": wait,
                       "global": false });
    (StatusCode::TOO_MANY_REQUESTS, headers, axum::Json(body)).into_response()
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

fn answer(
    rest: &mut Rest,
    gateway_url: &str,
    method: &Method,
    path: &str,
    body: &Value,
) -> Response {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let id = |s: &str| s.parse::<u64>().unwrap_or(0);
    match (method.as_str(), segments.as_slice()) {
        ("GET", ["gateway"]) => ok(json!({ "url": gateway_url })),
        ("GET", ["gateway", "bot"]) => ok(json!({
            "url": gateway_url, "shards": 1,
            "session_start_limit": { "total": 1000, "remaining": 1000, "reset_after": 0, "max_concurrency": 1 }
        })),
        ("GET", ["users", "@me"]) => ok(bot_user()),
        ("POST", ["channels", channel, "messages"]) => {
            if rest.denied.contains(&id(channel)) {
                return error(StatusCode::FORBIDDEN, 50013, "Missing Permissions");
            }
            let message_id = rest.next_id();
            let mut message = message_json(
                message_id,
                id(channel),
                None,
                bot_user(),
                body["content"].as_str().unwrap_or(""),
                vec![],
            );
            message["embeds"] = body.get("embeds").cloned().unwrap_or(json!([]));
            rest.messages.insert(message_id, message.clone());
            ok(message)
        }
        ("PATCH", ["channels", _, "messages", message]) => {
            let Some(stored) = rest.messages.get_mut(&id(message)) else {
                return error(StatusCode::NOT_FOUND, 10008, "Unknown Message");
            };
            for key in ["content", "embeds"] {
                if let Some(value) = body.get(key) {
                    stored[key] = value.clone();
                }
            }
            ok(stored.clone())
        }
        ("GET", ["channels", _, "messages", message]) => match rest.messages.get(&id(message)) {
            Some(stored) => ok(stored.clone()),
            None => error(StatusCode::NOT_FOUND, 10008, "Unknown Message"),
        },
        ("POST", ["channels", channel, "messages", _, "threads"]) => {
            let thread_id = rest.next_id();
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
        ("GET", ["guilds", _, "channels"]) => ok(Value::Array(rest.channels.clone())),
        ("POST", ["guilds", _, "channels"]) => {
            let channel_id = rest.next_id();
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
            rest.channels.push(channel.clone());
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
            let message_id = rest.next_id();
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
