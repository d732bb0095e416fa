//! `/api/adapters`: the adapter registry, and enabling or disabling an adapter.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};
use service_contract::AdapterEntry;

use super::AppState;
use super::api::PathParam;
use super::api_error::{ApiError, ApiResult};
use crate::adapters::ToggleError;
use crate::bus::Event;

/// Every adapter as this replica sees it (statuses and errors are each replica's own).
pub(super) async fn list(State(app): State<AppState>) -> Json<Value> {
    Json(json!({ "adapters": app.adapters.registry().entries(), "replica": app.replica }))
}

async fn toggle(app: &AppState, name: &str, enable: bool) -> ApiResult<Json<AdapterEntry>> {
    let entry = app.adapters.toggle(name, enable).await;
    if entry.is_ok() {
        // The other replicas follow the choice (and the one that runs a native applies it).
        // Only the others: this one applied it, and hearing it back after a later toggle
        // would undo that one.
        app.bus.tell_others(Event::AdapterToggled {
            name: name.to_owned(),
            enabled: enable,
        });
    }
    entry.map(Json).map_err(|e| match e {
        ToggleError::Internal(e) => ApiError::from(e),
        e => {
            let status = match &e {
                ToggleError::Unknown(_) => StatusCode::NOT_FOUND,
                ToggleError::HookFailed(_) => StatusCode::INTERNAL_SERVER_ERROR,
                _ => StatusCode::CONFLICT,
            };
            ApiError::new(status, e.to_string())
        }
    })
}

/// Runs the adapter's `start`; the choice persists across restarts.
pub(super) async fn enable(
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
) -> ApiResult<Json<AdapterEntry>> {
    toggle(&app, &name, true).await
}

/// Runs the adapter's `stop`; the choice persists across restarts.
pub(super) async fn disable(
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
) -> ApiResult<Json<AdapterEntry>> {
    toggle(&app, &name, false).await
}
