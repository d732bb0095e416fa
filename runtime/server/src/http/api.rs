//! The extractors every endpoint shares: request bodies, queries and paths that fail to parse
//! answer in the API's error shape (`api_error`), in the project's words; and list pages.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

use super::api_error::{ApiError, ApiResult};
use super::decode;

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

/// A record's id in a path (a trace's, a run's).
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub struct Id {
    pub id: String,
}

/// `?limit=&offset=` of a list endpoint, as text: the numbers are checked by [`Page::resolve`],
/// which says what is wrong with them.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Page {
    /// How many records at most: 1 to 500 (each list has its own default).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 500)]
    pub limit: Option<String>,
    /// How many to skip, newest first.
    #[param(value_type = Option<i64>, minimum = 0, maximum = 4_294_967_295_u64)]
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
