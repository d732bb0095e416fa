//! Prometheus metrics, counted where things happen (runs, model and tool calls, adapter
//! requests, limit hits, schedule fires) and, for what is a state rather than an event (jobs
//! waiting, instances in use, the database pool, the span queue), read when scraped.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelSet, EncodeMetric, prometheus_text,
};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use super::export::STATS;

/// What `/metrics` answers with.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RunLabels {
    pub agent: String,
    /// `ok`, `error` or `cancelled`.
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelLabels {
    pub provider: String,
    pub model: String,
    /// `ok` or `error`.
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenLabels {
    pub provider: String,
    pub model: String,
    /// `input` or `output`.
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ToolLabels {
    pub tool: String,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ToolName {
    pub tool: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AdapterStatus {
    pub adapter: String,
    pub status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AdapterName {
    pub adapter: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LimitLabels {
    pub adapter: String,
    /// `QuotaExceeded`, `Timeout`, `MemoryLimit`.
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct JobLabels {
    pub adapter: String,
    /// `pending` or `running`.
    pub state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Outcome {
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RecordKind {
    /// `traces`, `tasks`, `conversations` or `approvals`.
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolLabels {
    /// `size`, `available` or `waiting`.
    pub state: &'static str,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// The errors of an adapter's entry that are limits it ran into.
const LIMIT_KINDS: [&str; 3] = ["QuotaExceeded", "Timeout", "MemoryLimit"];

/// Distinct values a label that requests choose (agent and model names) takes; later ones
/// are counted as `other`, so no client can grow the exposition without bound.
pub(crate) const MAX_LABEL_VALUES: usize = 100;

/// The values of one such label seen so far.
#[derive(Default)]
struct Seen(Mutex<HashSet<String>>);

impl Seen {
    fn label(&self, value: &str) -> String {
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.contains(value) || seen.len() < MAX_LABEL_VALUES && seen.insert(value.to_owned()) {
            value.to_owned()
        } else {
            "other".to_owned()
        }
    }
}

pub struct Metrics {
    registry: Registry,
    pub agent_runs: Family<RunLabels, Counter>,
    pub model_calls: Family<ModelLabels, Counter>,
    pub model_tokens: Family<TokenLabels, Counter>,
    pub tool_calls: Family<ToolLabels, Counter>,
    pub tool_duration: Histograms<ToolName>,
    pub adapter_requests: Family<AdapterStatus, Counter>,
    pub adapter_duration: Histograms<AdapterName>,
    pub limit_hits: Family<LimitLabels, Counter>,
    pub scheduler_fires: Family<Outcome, Counter>,
    retention_deleted: Family<RecordKind, Counter>,
    /// Set when scraped.
    pub instances_in_use: Family<AdapterName, Gauge>,
    pub jobs: Family<JobLabels, Gauge>,
    pub db_pool: Family<PoolLabels, Gauge>,
    agents: Seen,
    models: Seen,
}

/// Latencies from 1 ms (an adapter's answer) to two minutes (a tool that runs an agent).
fn seconds() -> Histogram {
    Histogram::new([
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
        120.0,
    ])
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The service's metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

impl Metrics {
    fn new() -> Self {
        let mut registry = Registry::with_prefix("service_runtime");
        let metrics = Self {
            agent_runs: Family::default(),
            model_calls: Family::default(),
            model_tokens: Family::default(),
            tool_calls: Family::default(),
            tool_duration: Family::new_with_constructor(seconds),
            adapter_requests: Family::default(),
            adapter_duration: Family::new_with_constructor(seconds),
            limit_hits: Family::default(),
            scheduler_fires: Family::default(),
            retention_deleted: Family::default(),
            instances_in_use: Family::default(),
            jobs: Family::default(),
            db_pool: Family::default(),
            agents: Seen::default(),
            models: Seen::default(),
            registry: Registry::default(),
        };
        // Counters get `_total` when encoded.
        registry.register(
            "agent_runs",
            "Agent runs by agent and outcome",
            metrics.agent_runs.clone(),
        );
        registry.register(
            "model_calls",
            "Model calls by provider, model and outcome",
            metrics.model_calls.clone(),
        );
        registry.register(
            "model_tokens",
            "Tokens of model calls by provider, model and kind (input, output)",
            metrics.model_tokens.clone(),
        );
        registry.register(
            "tool_calls",
            "Tool calls of agent runs by tool and outcome",
            metrics.tool_calls.clone(),
        );
        registry.register_with_unit(
            "tool_call_duration",
            "How long tool calls took",
            Unit::Seconds,
            metrics.tool_duration.clone(),
        );
        registry.register(
            "adapter_requests",
            "Requests to adapter routes by adapter and HTTP status",
            metrics.adapter_requests.clone(),
        );
        registry.register_with_unit(
            "adapter_request_duration",
            "How long adapters took to answer their routes",
            Unit::Seconds,
            metrics.adapter_duration.clone(),
        );
        registry.register(
            "adapter_limit_hits",
            "Limits adapters ran into (QuotaExceeded, Timeout, MemoryLimit)",
            metrics.limit_hits.clone(),
        );
        registry.register(
            "scheduler_fires",
            "Scheduled runs started, by outcome",
            metrics.scheduler_fires.clone(),
        );
        registry.register(
            "retention_deleted",
            "Records this replica deleted past their [retention] age, by kind",
            metrics.retention_deleted.clone(),
        );
        for kind in crate::retention::Kind::ALL {
            metrics.retention_deleted(kind.as_str(), 0);
        }
        registry.register(
            "adapter_instances_in_use",
            "Instances of each component adapter in use on this replica",
            metrics.instances_in_use.clone(),
        );
        registry.register(
            "jobs",
            "Adapters' jobs pending and running, in the whole service",
            metrics.jobs.clone(),
        );
        registry.register(
            "db_pool_connections",
            "PostgreSQL connections of this replica's pool (size, available, waiting)",
            metrics.db_pool.clone(),
        );
        registry.register_collector(Box::new(Spans));
        Self {
            registry,
            ..metrics
        }
    }

    /// The text exposition.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_text::encode(&mut text, &self.registry);
        text
    }

    /// `count` records of `kind` deleted by retention.
    pub(crate) fn retention_deleted(&self, kind: &'static str, count: u64) {
        self.retention_deleted
            .get_or_create(&RecordKind { kind })
            .inc_by(count);
    }

    /// `outcome`: `ok`, `error` or `cancelled`.
    pub(crate) fn agent_run(&self, agent: &str, outcome: &'static str) {
        self.agent_runs
            .get_or_create(&RunLabels {
                agent: self.agents.label(agent),
                outcome,
            })
            .inc();
    }

    pub(crate) fn model_call(
        &self,
        provider: &str,
        model: &str,
        ok: bool,
        tokens: (Option<i64>, Option<i64>),
    ) {
        let model = self.models.label(model);
        self.model_calls
            .get_or_create(&ModelLabels {
                provider: provider.to_owned(),
                model: model.clone(),
                outcome: if ok { "ok" } else { "error" },
            })
            .inc();
        for (kind, count) in [("input", tokens.0), ("output", tokens.1)] {
            if let Some(count) = count.and_then(|c| u64::try_from(c).ok()) {
                self.model_tokens
                    .get_or_create(&TokenLabels {
                        provider: provider.to_owned(),
                        model: model.clone(),
                        kind,
                    })
                    .inc_by(count);
            }
        }
    }

    pub fn tool_call(&self, tool: &str, ok: bool, took: Duration) {
        self.tool_calls
            .get_or_create(&ToolLabels {
                tool: tool.to_owned(),
                outcome: if ok { "ok" } else { "error" },
            })
            .inc();
        self.tool_duration
            .get_or_create(&ToolName {
                tool: tool.to_owned(),
            })
            .observe(took.as_secs_f64());
    }

    /// Counts an error recorded on an adapter's entry when it is a limit it ran into.
    pub fn limit_hit(&self, adapter: &str, kind: &str) {
        let Some(kind) = LIMIT_KINDS.into_iter().find(|k| *k == kind) else {
            return;
        };
        self.limit_hits
            .get_or_create(&LimitLabels {
                adapter: adapter.to_owned(),
                kind,
            })
            .inc();
    }

    /// Starts a known adapter's series at 0 (its jobs; a component's instances and limit hits
    /// too), so an alert on them sees 0 rather than no data. Call it after clearing `jobs`.
    pub fn known_adapter(&self, adapter: &str, component: bool) {
        for state in ["pending", "running"] {
            let adapter = adapter.to_owned();
            drop(self.jobs.get_or_create(&JobLabels { adapter, state }));
        }
        if component {
            drop(self.instances_in_use.get_or_create(&AdapterName {
                adapter: adapter.to_owned(),
            }));
            for kind in LIMIT_KINDS {
                let adapter = adapter.to_owned();
                drop(
                    self.limit_hits
                        .get_or_create(&LimitLabels { adapter, kind }),
                );
            }
        }
    }

    pub fn adapter_request(&self, adapter: &str, status: u16, took: Duration) {
        self.adapter_requests
            .get_or_create(&AdapterStatus {
                adapter: adapter.to_owned(),
                status,
            })
            .inc();
        self.adapter_duration
            .get_or_create(&AdapterName {
                adapter: adapter.to_owned(),
            })
            .observe(took.as_secs_f64());
    }
}

/// The span queue and what became of the spans, read when scraped.
#[derive(Debug)]
struct Spans;

impl Collector for Spans {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for (name, help, value) in [
            (
                "otel_spans_exported",
                "Spans sent to the OTLP collector",
                &STATS.exported,
            ),
            (
                "otel_spans_dropped",
                "Spans dropped because the export queue was full",
                &STATS.dropped,
            ),
            (
                "otel_spans_failed",
                "Spans the OTLP collector did not take (unreachable, refused)",
                &STATS.failed,
            ),
        ] {
            let counter = ConstCounter::new(value.load(Ordering::Relaxed));
            counter.encode(encoder.encode_descriptor(
                name,
                help,
                None,
                counter.metric_type(),
            )?)?;
        }
        let queued = ConstGauge::new(STATS.queued.load(Ordering::Relaxed) as i64);
        queued.encode(encoder.encode_descriptor(
            "otel_spans_queued",
            "Spans waiting to be exported",
            None,
            queued.metric_type(),
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_requests_choose_stop_growing_at_the_bound() {
        let seen = Seen::default();
        for n in 0..MAX_LABEL_VALUES {
            assert_eq!(seen.label(&n.to_string()), n.to_string());
        }
        assert_eq!(seen.label("one more"), "other");
        assert_eq!(seen.label("7"), "7", "a value seen before keeps its label");
    }
}
