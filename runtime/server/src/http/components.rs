//! `/api/adapters/{name}/...`: requests routed into adapters, native ones (routes mounted in
//! `bind`) or WebAssembly components. The raw body is passed through untouched (signatures are
//! computed over it).

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use service_contract::HttpRequest;

use super::AppState;
use super::api::{ApiError, PathParam};

/// Headers the server sets itself.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "content-length",
    "transfer-encoding",
    "keep-alive",
    "upgrade",
];

pub async fn dispatch(
    State(app): State<AppState>,
    PathParam((name, rest)): PathParam<(String, String)>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request = HttpRequest {
        method: method.as_str().to_owned(),
        path: format!("/{rest}"),
        query: uri.query().unwrap_or_default().to_owned(),
        headers: headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect(),
        body: body.to_vec(),
    };
    let request = match app.adapters.handle_http(&name, request).await {
        Ok(answer) => return respond(&name, answer.status, answer.headers, answer.body),
        Err(request) => request,
    };
    match app.wasm.handle_http(&name, request.into()).await {
        Ok(answer) => respond(&name, answer.status, answer.headers, answer.body),
        Err(e) => {
            let status =
                StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            ApiError::new(status, e.public).into_response()
        }
    }
}

/// An adapter's answer as an HTTP response; an impossible status is the adapter's error.
fn respond(name: &str, status: u16, headers: Vec<(String, String)>, body: Vec<u8>) -> Response {
    let Ok(status) = StatusCode::from_u16(status) else {
        return ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("adapter {name:?} answered an invalid status {status}"),
        )
        .into_response();
    };
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    for (key, value) in headers {
        if HOP_BY_HOP.contains(&key.to_ascii_lowercase().as_str()) {
            continue;
        }
        if let (Ok(key), Ok(value)) = (HeaderName::try_from(key), HeaderValue::try_from(value)) {
            response.headers_mut().append(key, value);
        }
    }
    response
}
