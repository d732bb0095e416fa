//! W3C trace context: taken from inbound requests (`traceparent`), sent on the host's outbound
//! ones, kept with a queued job so its run continues the trace of the request that enqueued
//! it, and put in MCP requests' `_meta` (as MCP's SDKs read it). Without trace export all of
//! this is inert: nothing is read, nothing is sent.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use http::HeaderMap;
use opentelemetry::Context;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry_http::{HeaderExtractor, HeaderInjector};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_opentelemetry::OpenTelemetrySpanExt;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Turns propagation on, with trace export.
pub(super) fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Makes `span` a child of the context `headers` carry, if they carry one. Before `span` is
/// first entered.
pub fn follow_headers(span: &tracing::Span, headers: &HeaderMap) {
    if enabled() {
        let parent = TraceContextPropagator::new().extract(&HeaderExtractor(headers));
        set_parent(span, parent);
    }
}

/// Makes `span` a child of a context kept as text (a job's, an MCP request's `_meta`).
pub fn follow(span: &tracing::Span, carrier: &HashMap<String, String>) {
    if enabled() {
        set_parent(span, TraceContextPropagator::new().extract(carrier));
    }
}

fn set_parent(span: &tracing::Span, parent: Context) {
    // Fails only for a span that already started, which callers never hand in.
    let _ = span.set_parent(parent);
}

/// The current span's context as request headers (`traceparent`, `tracestate`).
pub fn headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    if enabled() {
        let context = tracing::Span::current().context();
        TraceContextPropagator::new().inject_context(&context, &mut HeaderInjector(&mut headers));
    }
    headers
}

/// The current span's context as text entries (`traceparent`, `tracestate`); empty without
/// one.
pub(crate) fn carrier() -> HashMap<String, String> {
    let mut carrier = HashMap::new();
    if enabled() {
        let context = tracing::Span::current().context();
        TraceContextPropagator::new().inject_context(&context, &mut carrier);
        carrier.retain(|_, value| !value.is_empty());
    }
    carrier
}

/// The current span's `traceparent`, to keep with a queued job.
pub fn traceparent() -> Option<String> {
    carrier().remove("traceparent")
}

/// A kept `traceparent` as a carrier for [`follow`].
pub fn from_traceparent(traceparent: &str) -> HashMap<String, String> {
    HashMap::from([("traceparent".to_owned(), traceparent.to_owned())])
}
