//! The JSON conventions every endpoint shares: errors are `{"error": "..."}` with the status
//! their kind implies (and `field` when one input field is to blame), and request bodies,
//! queries and paths that fail to parse answer in the same shape, in the project's words.

use std::borrow::Cow;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::json;

use super::{decode, limits};
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

impl From<BytesRejection> for ApiError {
    fn from(rejection: BytesRejection) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            limits::too_large()
        } else {
            Self::new(
                StatusCode::BAD_REQUEST,
                "the request body could not be read to the end",
            )
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

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({ "error": self.message });
        if let Some(field) = self.field {
            body["field"] = json!(field.as_ref());
        }
        if let Some(trace_id) = self.trace_id {
            body["trace_id"] = json!(trace_id);
        }
        if let Some(conversation_id) = self.conversation_id {
            body["conversation_id"] = json!(conversation_id);
        }
        (self.status, axum::Json(body)).into_response()
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// A JSON object body read into `T`. Errors answer in the API's shape and words: 415 without a
/// JSON content type, 400 naming the field for a body of the wrong shape, 413 over the limit.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        if !decode::is_json(request.headers()) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "send the body as JSON, with the header Content-Type: application/json",
            ));
        }
        let bytes = Bytes::from_request(request, state).await?;
        decode::json_object(&bytes).map(Self)
    }
}

/// `axum::extract::Query` whose rejections answer in the API's error shape.
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct QueryParams<T>(pub T);

/// `axum::extract::Path` whose rejections answer in the API's error shape.
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct PathParam<T>(pub T);

/// `?limit=&offset=` of a list endpoint, as text: the numbers are checked by [`Page::resolve`],
/// which says what is wrong with them.
#[derive(serde::Deserialize)]
pub struct Page {
    pub limit: Option<String>,
    pub offset: Option<String>,
}

/// The largest page a list endpoint answers.
pub const MAX_PAGE: u32 = 500;

impl Page {
    /// (limit, offset), `default` when no limit is given; a limit outside 1..=500 or an offset
    /// that is not a whole number is a 400 naming it.
    pub fn resolve(&self, default: u32) -> ApiResult<(u32, u32)> {
        let limit = match &self.limit {
            None => default,
            Some(text) => text.trim().parse().unwrap_or(0),
        };
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("limit must be a whole number between 1 and {MAX_PAGE}"),
            )
            .with_field("limit"));
        }
        let offset = match &self.offset {
            None => 0,
            Some(text) => text.trim().parse().map_err(|_| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "offset must be a whole number of at least 0",
                )
                .with_field("offset")
            })?,
        };
        Ok((limit, offset))
    }
}

/// Unknown routes.
pub async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such endpoint")
}

/// Known routes called with the wrong method.
pub async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed on this endpoint",
    )
}
