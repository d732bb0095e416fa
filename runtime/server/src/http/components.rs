//! `/api/adapters/{name}/...`: requests routed into adapters through the supervisor. The raw
//! body is passed through untouched (signatures are computed over it). An adapter's answer is
//! served on the dashboard's origin, so it is fenced in: `content-security-policy: sandbox`
//! (no script of it runs as the dashboard, no same-origin requests), `nosniff`, and no
//! cookies or CORS headers of its own.

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use service_contract::{HttpRequest, HttpResponse};
use std::time::Instant;

use super::AppState;
use super::api::PathParam;
use super::api_error::ApiError;
use crate::telemetry::metrics::metrics;

/// Headers an adapter may not set: the server's own framing, and what would let its answer
/// act with the dashboard's origin.
const DROPPED: &[&str] = &[
    "connection",
    "content-length",
    "transfer-encoding",
    "keep-alive",
    "upgrade",
    "set-cookie",
    "set-cookie2",
];

pub(super) async fn dispatch(
    State(app): State<AppState>,
    PathParam((name, rest)): PathParam<(String, String)>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    serve(app, name, rest, method, uri, headers, body).await
}

/// `/api/adapters/{name}/` itself (a `wasi:http` component's `/`).
pub(super) async fn dispatch_root(
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    serve(app, name, String::new(), method, uri, headers, body).await
}

async fn serve(
    app: AppState,
    name: String,
    rest: String,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let started = Instant::now();
    tracing::Span::current().record("service_runtime.adapter", name.as_str());
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            let mut response = ApiError::from(rejection).into_response();
            fence(response.headers_mut());
            return response;
        }
    };
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
    let mut response = match app.adapters.dispatch(&name, request).await {
        Ok(answer) => respond(answer),
        Err(refusal) => {
            let status =
                StatusCode::from_u16(refusal.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            ApiError::new(status, refusal.message).into_response()
        }
    };
    fence(response.headers_mut());
    // Only adapters there are become labels: a scan of made-up names adds none.
    if app.adapters.registry().contains(&name) {
        metrics().adapter_request(&name, response.status().as_u16(), started.elapsed());
    }
    response
}

/// An adapter's answer (already checked by the supervisor) as an HTTP response.
fn respond(answer: HttpResponse) -> Response {
    let mut response = Response::new(Body::from(answer.body));
    *response.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_GATEWAY);
    for (key, value) in answer.headers {
        let key = key.to_ascii_lowercase();
        if DROPPED.contains(&key.as_str()) || key.starts_with("access-control-") {
            continue;
        }
        if let (Ok(key), Ok(value)) = (HeaderName::try_from(key), HeaderValue::try_from(value)) {
            response.headers_mut().append(key, value);
        }
    }
    response
}

/// The host's own headers on every adapter answer (errors included).
fn fence(headers: &mut HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
}
