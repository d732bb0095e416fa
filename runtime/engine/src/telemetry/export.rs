//! Spans out over OTLP/HTTP (protobuf or JSON), configured by the standard `OTEL_*` variables
//! of the process environment. The export never costs a run anything: finished spans wait in
//! a bounded queue (`OTEL_BSP_MAX_QUEUE_SIZE`, 2,048) that the SDK's own thread empties; a span
//! finding it full is dropped and counted, and a slow or dead collector only fills it.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use opentelemetry::Context;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider, Span, SpanData, SpanExporter,
    SpanProcessor,
};

/// The queue's default length, as the specification has it.
const DEFAULT_QUEUE: usize = 2_048;
/// How often a failing export is logged at most.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// What became of the spans, for `/metrics`.
#[derive(Debug, Default)]
pub(crate) struct SpanStats {
    /// Waiting to be sent.
    pub queued: AtomicUsize,
    pub dropped: AtomicU64,
    pub exported: AtomicU64,
    pub failed: AtomicU64,
}

pub(crate) static STATS: SpanStats = SpanStats {
    queued: AtomicUsize::new(0),
    dropped: AtomicU64::new(0),
    exported: AtomicU64::new(0),
    failed: AtomicU64::new(0),
};

pub(crate) struct Settings {
    protocol: Protocol,
    /// One export request's time.
    timeout: Duration,
    queue: usize,
}

fn variable(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// The export's settings, or `None` when no collector is named (or `OTEL_SDK_DISABLED=true`,
/// `OTEL_TRACES_EXPORTER=none`). A protocol this build does not speak stops the start.
pub(crate) fn settings() -> anyhow::Result<Option<Settings>> {
    let named = variable("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .or_else(|| variable("OTEL_EXPORTER_OTLP_ENDPOINT"))
        .is_some();
    let disabled = variable("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || variable("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"));
    if !named || disabled {
        return Ok(None);
    }
    let protocol = match variable("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|| variable("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .map(|p| p.to_ascii_lowercase())
        .as_deref()
    {
        None | Some("http/protobuf") => Protocol::HttpBinary,
        Some("http/json") => Protocol::HttpJson,
        Some(other) => bail!(
            "OTEL_EXPORTER_OTLP_PROTOCOL={other:?} is not spoken here: use http/protobuf or \
             http/json"
        ),
    };
    let timeout = [
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ]
    .iter()
    .find_map(|name| variable(name)?.parse().ok())
    .map_or(Duration::from_secs(10), Duration::from_millis);
    let queue = match variable("OTEL_BSP_MAX_QUEUE_SIZE") {
        None => DEFAULT_QUEUE,
        Some(text) => text
            .parse()
            .ok()
            .filter(|n| (1..=1 << 20).contains(n))
            .context("OTEL_BSP_MAX_QUEUE_SIZE must be a number from 1 to 1048576")?,
    };
    Ok(Some(Settings {
        protocol,
        timeout,
        queue,
    }))
}

/// The tracer provider: the OTLP exporter (endpoint, headers and sampler from the
/// environment) behind the bounded queue. Called inside the runtime.
pub(crate) fn provider(settings: Settings) -> anyhow::Result<SdkTracerProvider> {
    let client = Client {
        http: reqwest::Client::builder()
            .user_agent(concat!("service-runtime/", env!("CARGO_PKG_VERSION")))
            .build()?,
        runtime: tokio::runtime::Handle::try_current()?,
        timeout: settings.timeout,
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(settings.protocol)
        .with_http_client(client)
        .build()
        .context("invalid OTLP exporter settings (OTEL_EXPORTER_OTLP_*)")?;
    let batches = BatchSpanProcessor::builder(Counted {
        inner: exporter,
        last_warning: Mutex::new(None),
    })
    .with_batch_config(
        BatchConfigBuilder::default()
            .with_max_queue_size(settings.queue)
            .build(),
    )
    .build();
    Ok(SdkTracerProvider::builder()
        .with_resource(resource())
        .with_span_processor(Bounded {
            inner: batches,
            queue: settings.queue,
        })
        .build())
}

/// `service.name` from `OTEL_SERVICE_NAME` (or `OTEL_RESOURCE_ATTRIBUTES`), else
/// `service-runtime`; the version always.
fn resource() -> Resource {
    let named = variable("OTEL_SERVICE_NAME").is_some()
        || variable("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|a| a.contains("service.name="));
    let builder = if named {
        Resource::builder()
    } else {
        Resource::builder().with_service_name("service-runtime")
    };
    builder
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build()
}

/// The exporter's HTTP client: the service's reqwest, its requests run on the service's
/// runtime (the SDK's export thread has none) with a deadline each.
#[derive(Debug, Clone)]
struct Client {
    http: reqwest::Client,
    runtime: tokio::runtime::Handle,
    timeout: Duration,
}

#[async_trait::async_trait]
impl HttpClient for Client {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let mut request = reqwest::Request::try_from(request)?;
        *request.timeout_mut() = Some(self.timeout);
        let http = self.http.clone();
        self.runtime
            .spawn(async move {
                let response = http.execute(request).await?;
                let mut answer = Response::builder().status(response.status());
                if let Some(headers) = answer.headers_mut() {
                    *headers = response.headers().clone();
                }
                Ok(answer.body(response.bytes().await?)?)
            })
            .await?
    }
}

/// Keeps the queue bounded, counting what it turns away; the batch processor behind it gets
/// the same bound, so it never drops a span itself.
#[derive(Debug)]
struct Bounded {
    inner: BatchSpanProcessor,
    queue: usize,
}

impl SpanProcessor for Bounded {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.inner.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        if STATS.queued.fetch_add(1, Ordering::AcqRel) >= self.queue {
            STATS.queued.fetch_sub(1, Ordering::AcqRel);
            STATS.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.inner.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// Counts what is sent and what fails, and says so in the log now and then.
#[derive(Debug)]
struct Counted<E> {
    inner: E,
    last_warning: Mutex<Option<Instant>>,
}

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        STATS.queued.fetch_sub(spans, Ordering::AcqRel);
        let result = self.inner.export(batch).await;
        match &result {
            Ok(()) => STATS.exported.fetch_add(spans as u64, Ordering::Relaxed),
            Err(e) => {
                let mut last = self
                    .last_warning
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                if last.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
                    *last = Some(Instant::now());
                    tracing::warn!("spans could not be exported over OTLP: {e}");
                }
                STATS.failed.fetch_add(spans as u64, Ordering::Relaxed)
            }
        };
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}
