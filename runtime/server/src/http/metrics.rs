//! `GET /metrics`: the Prometheus text exposition, for callers who may read the service's
//! status; with `SERVICE_METRICS_TOKEN` set, whoever sends it too, and every scraper, this
//! machine included, must send a token.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::api_error::ApiError;
use service_contract::AdapterKind;

use crate::job_queue;
use crate::telemetry::metrics::{self, AdapterName, JobLabels, PoolLabels};

/// The bearer token scrapers must send, when set.
pub const TOKEN_VARIABLE: &str = "SERVICE_METRICS_TOKEN";

/// The Prometheus text exposition: every series the book's metrics reference lists. With
/// `SERVICE_METRICS_TOKEN` set, a scraper may send that token instead, and every scraper must
/// send a token.
#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "metrics",
    tag = "meta",
    responses(
        (status = 200, description = "the metrics, as Prometheus text",
            content_type = "text/plain; version=0.0.4; charset=utf-8"),
    )
)]
pub async fn show(State(app): State<AppState>) -> Response {
    let open = match app.db.call(|conn| job_queue::open(conn)).await {
        Ok(open) => open,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let metrics = metrics::metrics();
    // States, set afresh on every scrape (an adapter that went away goes from the listing);
    // every known adapter's start at 0.
    metrics.jobs.clear();
    metrics.instances_in_use.clear();
    for entry in app.adapters.registry().entries() {
        metrics.known_adapter(&entry.name, entry.kind == AdapterKind::Wasm);
    }
    for (adapter, status, count) in open {
        let state = if status == "running" {
            "running"
        } else {
            "pending"
        };
        metrics
            .jobs
            .get_or_create(&JobLabels { adapter, state })
            .set(count.into());
    }
    for (adapter, in_use) in app.components.loader().sandbox().instances_in_use() {
        metrics
            .instances_in_use
            .get_or_create(&AdapterName { adapter })
            .set(in_use as i64);
    }
    if let Some((size, available, waiting)) = app.db.pool_status() {
        for (state, value) in [
            ("size", size),
            ("available", available),
            ("waiting", waiting),
        ] {
            metrics
                .db_pool
                .get_or_create(&PoolLabels { state })
                .set(value as i64);
        }
    }
    (
        [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
        metrics.encode(),
    )
        .into_response()
}
