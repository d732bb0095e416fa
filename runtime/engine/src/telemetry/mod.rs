//! What the operator's own systems see of the service: logs on stderr, traces over OTLP (with
//! the GenAI semantic conventions for agent runs) when a collector is configured, and
//! Prometheus metrics.
//!
//! Spans meant for OTLP have the target [`TARGET`]: they are never logged, and while no
//! collector is configured no layer takes them, so they cost a cached check each.

pub(crate) mod export;
pub(crate) mod genai;
pub mod metrics;
pub mod propagation;

use std::io::IsTerminal;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::prelude::*;

/// The target of the spans exported over OTLP.
pub const TARGET: &str = "service_runtime::otel";

/// The trace export, flushed by [`Telemetry::shutdown`].
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

/// Installs logging to stderr (`RUST_LOG`, else `default_level`) and, when
/// `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set, trace export.
/// Called inside the runtime, whose executor sends the exports.
pub fn init(default_level: &str) -> anyhow::Result<Telemetry> {
    // An empty RUST_LOG counts as unset.
    let level = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| default_level.to_owned());
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, never into a log file or a pipe.
        .with_ansi(std::io::stderr().is_terminal())
        .with_filter(EnvFilter::new(format!("{level},{TARGET}=off")));
    let (provider, spans) = match export::settings()? {
        Some(settings) => {
            let provider = export::provider(settings)?;
            let tracer = provider.tracer("service-runtime");
            let layer = tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_tracked_inactivity(false)
                .with_threads(false)
                .with_location(false)
                .with_target(false)
                .with_filter(Targets::new().with_target(TARGET, tracing::Level::TRACE));
            propagation::enable();
            (Some(provider), Some(layer))
        }
        None => (None, None),
    };
    tracing_subscriber::registry()
        .with(logs)
        .with(spans)
        .try_init()?;
    Ok(Telemetry { provider })
}

impl Telemetry {
    /// Sends what is queued (within 5 s) and stops the export.
    pub async fn shutdown(self) {
        let Some(provider) = self.provider else {
            return;
        };
        // Blocking: it waits for the export thread, whose requests run on this runtime.
        let flushed = tokio::task::spawn_blocking(move || {
            provider.shutdown_with_timeout(Duration::from_secs(5))
        })
        .await;
        if let Ok(Err(e)) = flushed {
            tracing::warn!("the last spans could not be exported: {e}");
        }
    }
}
