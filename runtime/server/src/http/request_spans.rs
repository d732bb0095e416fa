//! A server span for each API, adapter and MCP request (when traces are exported): named
//! `METHOD route`, a child of the `traceparent` the request carries.

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;
use tracing::field::Empty;

use crate::telemetry::{TARGET, propagation};

pub(super) async fn trace(request: Request, next: Next) -> Response {
    if !tracing::span_enabled!(target: TARGET, tracing::Level::INFO) {
        return next.run(request).await;
    }
    let route = request.extensions().get::<MatchedPath>().map_or_else(
        || request.uri().path().to_owned(),
        |p| p.as_str().to_owned(),
    );
    let span = tracing::info_span!(
        target: TARGET,
        "request",
        otel.name = %format!("{} {route}", request.method()),
        otel.kind = "server",
        http.request.method = %request.method(),
        http.route = %route,
        url.path = %request.uri().path(),
        http.response.status_code = Empty,
        service_runtime.adapter = Empty,
        otel.status_code = Empty,
    );
    propagation::follow_headers(&span, request.headers());
    let response = next.run(request).instrument(span.clone()).await;
    let status = response.status();
    span.record("http.response.status_code", i64::from(status.as_u16()));
    if status.is_server_error() {
        span.record("otel.status_code", "error");
    }
    response
}
