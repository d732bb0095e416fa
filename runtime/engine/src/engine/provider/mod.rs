//! LLM providers behind one streaming trait, with provider-neutral messages.

pub mod anthropic;
pub mod offline;
pub mod openai;

use std::time::Duration;

use eventsource_stream::EventStreamError;
use futures_util::future::BoxFuture;
use reqwest::{RequestBuilder, Response, StatusCode};
use serde::{Deserialize, Serialize};
use serde_json::Value;
pub use service_contract::tools::ToolSpec;

use crate::telemetry::propagation;

/// One message of a conversation, in the shape the engine keeps it (and a paused run keeps
/// in its checkpoint).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Message {
    User(String),
    Assistant {
        text: String,
        tool_calls: Vec<ToolCall>,
    },
    ToolResult {
        call_id: String,
        content: String,
        is_error: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The model's arguments; a string when the model produced text that is not JSON.
    pub input: Value,
}

#[derive(Debug, Clone)]
pub struct ChatRequest {
    pub model: String,
    pub system: Option<String>,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
}

/// What the model produced in one turn.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Turn {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    /// The model that answered, when the provider names it.
    pub model: Option<String>,
    /// Why it stopped (`stop`, `tool_calls`, `end_turn`...), as the provider says it.
    pub finish_reason: Option<String>,
}

/// Receives text as the model streams it.
pub(crate) type TokenSink<'a> = &'a mut (dyn FnMut(&str) + Send);

pub trait Provider: Send + Sync {
    /// The provider's name as traces and the dashboard show it.
    fn name(&self) -> &'static str;

    /// Streams one model turn, handing text to `tokens` as it arrives.
    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
        tokens: TokenSink<'a>,
    ) -> BoxFuture<'a, Result<Turn, ProviderError>>;
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    #[error("provider {provider} is not configured: {hint}")]
    NotConfigured {
        provider: &'static str,
        hint: String,
    },
    /// The provider's message is left out: some echo part of the rejected key.
    #[error("{provider} rejected the credentials (HTTP {status})")]
    Unauthorized { provider: &'static str, status: u16 },
    #[error("{provider} is rate limiting requests (HTTP 429): {message}")]
    RateLimited {
        provider: &'static str,
        message: String,
    },
    #[error("{provider} answered HTTP {status}: {message}")]
    Status {
        provider: &'static str,
        status: u16,
        message: String,
    },
    #[error("{provider} did not answer in time")]
    Timeout { provider: &'static str },
    #[error("{provider} sent a malformed answer: {detail}")]
    Malformed {
        provider: &'static str,
        detail: String,
    },
    /// The stream ended without its end marker: the answer may be cut short.
    #[error("{provider} closed the answer stream before it was complete")]
    Truncated { provider: &'static str },
    #[error("cannot reach {provider}: {detail}")]
    Transport {
        provider: &'static str,
        detail: String,
    },
}

impl ProviderError {
    /// A short name for the kind of failure (`error.type` of its span).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NotConfigured { .. } => "not_configured",
            Self::Unauthorized { .. } => "unauthorized",
            Self::RateLimited { .. } => "rate_limited",
            Self::Status { .. } => "status",
            Self::Timeout { .. } => "timeout",
            Self::Malformed { .. } => "malformed",
            Self::Truncated { .. } => "truncated",
            Self::Transport { .. } => "transport",
        }
    }

    fn transport(provider: &'static str, e: &reqwest::Error) -> Self {
        if e.is_timeout() {
            Self::Timeout { provider }
        } else {
            Self::Transport {
                provider,
                detail: e.to_string(),
            }
        }
    }

    pub(crate) fn malformed(provider: &'static str, detail: impl Into<String>) -> Self {
        Self::Malformed {
            provider,
            detail: detail.into(),
        }
    }

    /// A failure reading the event stream: the connection's (a timeout, a reset) or the
    /// stream's framing.
    pub(crate) fn stream(provider: &'static str, e: EventStreamError<reqwest::Error>) -> Self {
        match e {
            EventStreamError::Transport(e) => Self::transport(provider, &e),
            other => Self::malformed(provider, other.to_string()),
        }
    }
}

/// Retries after HTTP 429 and 5xx, a bounded number of times with growing pauses.
const MAX_RETRIES: u32 = 3;
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(8);

/// Sends a request built by `build`, retrying 429/5xx and transport failures; any other
/// non-success status becomes a typed error carrying the provider's own message.
pub(crate) async fn send(
    provider: &'static str,
    build: impl Fn() -> RequestBuilder,
) -> Result<Response, ProviderError> {
    let mut attempt = 0;
    loop {
        // The model call's span goes on as the provider's parent (when traces are exported).
        let retry_after = match build().headers(propagation::headers()).send().await {
            Ok(response) if response.status().is_success() => return Ok(response),
            Ok(response) => {
                let status = response.status();
                let retryable = status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error();
                if !retryable || attempt == MAX_RETRIES {
                    return Err(status_error(provider, response).await);
                }
                response
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
                    .map(Duration::from_secs)
            }
            Err(e) if attempt < MAX_RETRIES && (e.is_connect() || e.is_timeout()) => None,
            Err(e) => return Err(ProviderError::transport(provider, &e)),
        };
        let backoff = retry_after.unwrap_or(FIRST_BACKOFF * 2u32.pow(attempt));
        tokio::time::sleep(backoff.min(MAX_BACKOFF)).await;
        attempt += 1;
    }
}

async fn status_error(provider: &'static str, response: Response) -> ProviderError {
    let status = response.status();
    if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
        return ProviderError::Unauthorized {
            provider,
            status: status.as_u16(),
        };
    }
    let body = response.text().await.unwrap_or_default();
    let message = error_message(&body);
    if status == StatusCode::TOO_MANY_REQUESTS {
        ProviderError::RateLimited { provider, message }
    } else {
        ProviderError::Status {
            provider,
            status: status.as_u16(),
            message,
        }
    }
}

/// `error.message` (OpenAI, Anthropic), `error` as a string (Ollama), or the start of the body.
fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let from_json = parsed.as_ref().and_then(|v| {
        v["error"]["message"]
            .as_str()
            .or_else(|| v["error"].as_str())
            .or_else(|| v["message"].as_str())
            .map(str::to_owned)
    });
    from_json.unwrap_or_else(|| body.chars().take(200).collect())
}

/// Parses a tool call's argument text; text that is not JSON is passed on as a string so
/// the tool's schema check reports it to the model.
pub(crate) fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(Default::default());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}
