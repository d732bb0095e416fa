//! The API's error answer: `{"error": "..."}` with the status its kind implies (and `field`
//! when one input field is to blame, `trace_id` and `conversation_id` when a run failed).

use std::borrow::Cow;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::error::Error;

/// An error answered to an API client.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
    field: Option<Cow<'static, str>>,
    trace_id: Option<String>,
    conversation_id: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            field: None,
            trace_id: None,
            conversation_id: None,
        }
    }

    /// Names the input field to blame, for forms.
    pub fn with_field(mut self, field: impl Into<Cow<'static, str>>) -> Self {
        self.field = Some(field.into());
        self
    }

    /// A 429 answer saying when to try again (`Retry-After`, in seconds).
    pub fn too_many(message: impl Into<String>, wait: u64) -> Response {
        let mut response = Self::new(StatusCode::TOO_MANY_REQUESTS, message).into_response();
        response.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            axum::http::HeaderValue::from(wait),
        );
        response
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn field(&self) -> Option<&str> {
        self.field.as_deref()
    }

    /// Names the conversation the failed turn was kept in.
    pub fn with_conversation(mut self, id: &str) -> Self {
        self.conversation_id = Some(id.to_owned());
        self
    }

    /// Names the trace that recorded the failed run.
    pub fn with_trace(mut self, trace_id: Option<&str>) -> Self {
        self.trace_id = trace_id.map(str::to_owned);
        self
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        match e {
            Error::Invalid(message) => Self::new(StatusCode::BAD_REQUEST, message),
            Error::InvalidField { field, message } => {
                Self::new(StatusCode::BAD_REQUEST, message).with_field(field)
            }
            Error::NotFound(message) => Self::new(StatusCode::NOT_FOUND, message),
            Error::Forbidden(message) => Self::new(StatusCode::FORBIDDEN, message),
            Error::Conflict(message) => Self::new(StatusCode::CONFLICT, message),
            Error::Unavailable(message) => {
                tracing::warn!("{message}");
                Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the database is unreachable; try again shortly",
                )
            }
            Error::Internal(e) => {
                tracing::error!("internal error: {e:#}");
                Self::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal error; see the server log",
                )
            }
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        let QueryRejection::FailedToDeserializeQueryString(e) = rejection else {
            return Self::new(
                StatusCode::BAD_REQUEST,
                "the query string could not be read",
            );
        };
        // Query values are all text (numbers are parsed by the handlers), so what fails here
        // is the encoding or a repeated key.
        tracing::debug!("unreadable query string: {}", e.body_text());
        Self::new(
            StatusCode::BAD_REQUEST,
            "the query string could not be read: give each key once, percent-encoded",
        )
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        tracing::debug!("unreadable path: {}", rejection.body_text());
        Self::new(
            StatusCode::BAD_REQUEST,
            "the path could not be read: names in it must be percent-encoded UTF-8",
        )
    }
}

/// The most of one quoted value (a name the client sent, as `{:?}` writes it) an error repeats:
/// a 5,000-character name comes back cut, not whole.
const QUOTED_CHARS: usize = 64;

/// `message` with every quoted value longer than [`QUOTED_CHARS`] cut (with `…`).
fn clip_quoted(message: &str) -> Cow<'_, str> {
    if message.len() <= QUOTED_CHARS {
        return message.into();
    }
    let mut out = String::with_capacity(message.len().min(1024));
    let mut chars = message.chars();
    while let Some(c) = chars.next() {
        out.push(c);
        if c != '"' {
            continue;
        }
        // Inside a quoted value: up to its closing quote, escapes kept whole.
        let (mut kept, mut escaped, mut cut) = (0, false, false);
        for c in chars.by_ref() {
            let closing = c == '"' && !escaped;
            escaped = c == '\\' && !escaped;
            if closing {
                if cut {
                    out.push('…');
                }
                out.push(c);
                break;
            }
            if kept < QUOTED_CHARS {
                out.push(c);
                kept += 1;
            } else {
                cut = true;
            }
        }
    }
    out.into()
}

/// The body of every error answer.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct ErrorBody<'a> {
    /// What went wrong, in words for a person.
    #[schema(value_type = String)]
    error: Cow<'a, str>,
    /// The input field to blame, when it is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    field: Option<Cow<'static, str>>,
    /// The trace of the failed run, when a run failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_id: Option<String>,
    /// The conversation the failed turn was kept in.
    #[serde(skip_serializing_if = "Option::is_none")]
    conversation_id: Option<String>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: clip_quoted(&self.message),
            field: self.field,
            trace_id: self.trace_id,
            conversation_id: self.conversation_id,
        };
        (self.status, axum::Json(body)).into_response()
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_quoted_values_are_cut_and_the_rest_kept() {
        let long = "x".repeat(5_000);
        let message = format!("no agent named {long:?}; pick another \"one\"");
        let cut = clip_quoted(&message);
        assert_eq!(
            cut,
            format!(
                "no agent named \"{}…\"; pick another \"one\"",
                "x".repeat(QUOTED_CHARS)
            )
        );
        let escaped = format!(
            "bad name {:?}",
            format!("{}\"{}", "a".repeat(10), "b".repeat(100))
        );
        assert!(
            clip_quoted(&escaped).ends_with("…\""),
            "{}",
            clip_quoted(&escaped)
        );
        assert_eq!(clip_quoted("short \"one\""), "short \"one\"");
    }
}
