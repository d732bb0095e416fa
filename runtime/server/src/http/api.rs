//! The JSON conventions every endpoint shares: errors are `{"error": "..."}` with the status
//! their kind implies, and request bodies and queries that fail to parse are 400s in the same
//! shape.

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::error::Error;

/// An error answered to an API client.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
    field: Option<&'static str>,
    trace_id: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            field: None,
            trace_id: None,
        }
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
            Error::InvalidField { field, message } => Self {
                field: Some(field),
                ..Self::new(StatusCode::BAD_REQUEST, message)
            },
            Error::NotFound(message) => Self::new(StatusCode::NOT_FOUND, message),
            Error::Conflict(message) => Self::new(StatusCode::CONFLICT, message),
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

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        Self::new(StatusCode::BAD_REQUEST, rejection.body_text())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        Self::new(StatusCode::BAD_REQUEST, rejection.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        Self::new(StatusCode::BAD_REQUEST, rejection.body_text())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({ "error": self.message });
        if let Some(field) = self.field {
            body["field"] = json!(field);
        }
        if let Some(trace_id) = self.trace_id {
            body["trace_id"] = json!(trace_id);
        }
        (self.status, axum::Json(body)).into_response()
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// `axum::Json` whose rejections answer in the API's error shape.
#[derive(FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct JsonBody<T>(pub T);

/// `axum::extract::Query` whose rejections answer in the API's error shape.
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct QueryParams<T>(pub T);

/// `axum::extract::Path` whose rejections answer in the API's error shape.
#[derive(FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct PathParam<T>(pub T);

/// `?limit=&offset=` of a list endpoint.
#[derive(serde::Deserialize)]
pub struct Page {
    pub limit: Option<u32>,
    pub offset: Option<u32>,
}

/// The largest page a list endpoint answers.
pub const MAX_PAGE: u32 = 500;

impl Page {
    /// (limit, offset), `default` when no limit is given; a limit outside 1..=500 is a 400.
    pub fn resolve(&self, default: u32) -> ApiResult<(u32, u32)> {
        let limit = self.limit.unwrap_or(default);
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(ApiError {
                field: Some("limit"),
                ..ApiError::new(
                    StatusCode::BAD_REQUEST,
                    format!("limit must be between 1 and {MAX_PAGE}"),
                )
            });
        }
        Ok((limit, self.offset.unwrap_or(0)))
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
