//! Calls to the platform: Web API methods with the bot token (the host fills it in, so it never
//! enters the sandbox) and posts to a slash command's `response_url`, each failure sorted into
//! worth another attempt later (429 with its `Retry-After`, a 5xx, no answer at all) or final.

use serde_json::Value;

use guest_util::{header, percent_encode};

use crate::service::adapter::outbound_http::{self, Request, Response};
use crate::service::adapter::secrets;
use crate::service::adapter::types::Error;
use crate::{API_BASE, BOT_TOKEN, HOOKS_BASE};

const DEFAULT_API_BASE: &str = "https://slack.com/api";
const DEFAULT_HOOKS_BASE: &str = "https://hooks.slack.com";

/// Why a call did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Worth another attempt after `after_ms` (`None`: when the caller's backoff says).
    Later {
        after_ms: Option<u64>,
        message: String,
    },
    /// Another attempt would fail the same way.
    Final(String),
}

impl Failure {
    pub fn message(&self) -> &str {
        match self {
            Self::Later { message, .. } | Self::Final(message) => message,
        }
    }
}

/// Web API errors the platform answers with 200 that mean "not now" rather than "never".
const TRANSIENT_ERRORS: &[&str] = &["ratelimited", "service_unavailable"];

fn base(variable: &str, default: &str) -> String {
    secrets::get(variable)
        .filter(|b| !b.trim().is_empty())
        .unwrap_or_else(|| default.to_owned())
        .trim_end_matches('/')
        .to_owned()
}

/// Whether `url` is on the platform's hooks origin (where `response_url`s point), so a
/// forged one is refused before it reaches the host's outbound check.
pub fn is_hooks_url(url: &str) -> bool {
    url.strip_prefix(&base(HOOKS_BASE, DEFAULT_HOOKS_BASE))
        .is_some_and(|path| path.starts_with('/'))
}

/// A Web API method called with JSON (`chat.postMessage`); the answer when `ok` is true.
pub fn post(method: &str, body: &Value) -> Result<Value, Failure> {
    let url = format!("{}/{method}", base(API_BASE, DEFAULT_API_BASE));
    let mut headers = authorization();
    headers.push((
        "content-type".into(),
        "application/json; charset=utf-8".into(),
    ));
    api_answer(method, send("POST", url, headers, body.to_string()))
}

/// A Web API method called with a query string (`conversations.replies`).
pub fn get(method: &str, query: &[(&str, &str)]) -> Result<Value, Failure> {
    let query: Vec<String> = query
        .iter()
        .map(|(k, v)| format!("{k}={}", percent_encode(v)))
        .collect();
    let url = format!(
        "{}/{method}?{}",
        base(API_BASE, DEFAULT_API_BASE),
        query.join("&")
    );
    api_answer(method, send("GET", url, authorization(), String::new()))
}

/// Posts a message to a slash command's `response_url` (no token: the URL is the credential).
pub fn respond(url: &str, body: &Value) -> Result<(), Failure> {
    let headers = vec![("content-type".into(), "application/json".into())];
    let response = send("POST", url.to_owned(), headers, body.to_string())?;
    match response.status {
        200..=299 => Ok(()),
        status => Err(by_status(&response, || {
            format!(
                "response_url answered {status}: {}",
                String::from_utf8_lossy(&response.body).trim()
            )
        })),
    }
}

fn authorization() -> Vec<(String, String)> {
    vec![(
        "authorization".into(),
        format!("Bearer {{{{secret:{BOT_TOKEN}}}}}"),
    )]
}

fn send(
    method: &str,
    url: String,
    headers: Vec<(String, String)>,
    body: String,
) -> Result<Response, Failure> {
    outbound_http::send(&Request {
        method: method.into(),
        url,
        headers,
        body: body.into_bytes(),
        timeout_ms: None,
    })
    .map_err(|e| match e {
        // No answer (a timeout, a refused connection): the platform may be back later.
        Error::Failed(message) => Failure::Later {
            after_ms: None,
            message,
        },
        other => Failure::Final(other.to_string()),
    })
}

/// The Web API answers 200 with `"ok": false` and an `error` code for most failures.
fn api_answer(method: &str, sent: Result<Response, Failure>) -> Result<Value, Failure> {
    let response = sent?;
    let answer: Value = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
    let error = answer["error"].as_str().unwrap_or("no error given");
    let describe = || format!("{method} answered {}: {error}", response.status);
    if response.status != 200 {
        return Err(by_status(&response, describe));
    }
    if answer["ok"] == true {
        return Ok(answer);
    }
    if TRANSIENT_ERRORS.contains(&error) {
        return Err(Failure::Later {
            after_ms: retry_after_ms(&response),
            message: describe(),
        });
    }
    Err(Failure::Final(describe()))
}

/// 429 and 5xx are worth waiting for; anything else is final.
fn by_status(response: &Response, describe: impl FnOnce() -> String) -> Failure {
    match response.status {
        429 | 500..=599 => Failure::Later {
            after_ms: retry_after_ms(response),
            message: describe(),
        },
        _ => Failure::Final(describe()),
    }
}

/// `Retry-After` in seconds, as the platform sends it.
fn retry_after_ms(response: &Response) -> Option<u64> {
    header(&response.headers, "retry-after")?
        .trim()
        .parse::<u64>()
        .ok()
        .map(|secs| secs.saturating_mul(1_000))
}
