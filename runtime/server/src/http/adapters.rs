//! `/api/adapters`: the adapter registry, and enabling or disabling an adapter.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Serialize;
use service_contract::{AdapterEntry, FailureKind};
use utoipa::openapi::RefOr;
use utoipa::{IntoResponses, ToSchema};

use super::api::PathParam;
use super::api_error::{ApiError, ApiResult, ErrorBody};
use super::{AppState, openapi};
use crate::adapters::ToggleError;
use crate::bus::Event;

#[derive(Serialize, ToSchema)]
pub(super) struct AdapterList {
    adapters: Vec<AdapterEntry>,
    /// The replica that answered: statuses and errors are each replica's own.
    replica: String,
}

/// Every adapter as this replica sees it.
#[utoipa::path(
    get,
    path = "/api/adapters",
    operation_id = "list_adapters",
    tag = "adapters",
    responses((status = 200, body = AdapterList))
)]
pub(super) async fn list(State(app): State<AppState>) -> Json<AdapterList> {
    Json(AdapterList {
        adapters: app.adapters.registry().entries(),
        replica: app.replica.clone(),
    })
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
                // Settings it refuses are the operator's to fix, as missing ones are.
                ToggleError::HookFailed(failure) if failure.is(FailureKind::ConfigError) => {
                    StatusCode::CONFLICT
                }
                ToggleError::HookFailed(_) => StatusCode::INTERNAL_SERVER_ERROR,
                _ => StatusCode::CONFLICT,
            };
            ApiError::new(status, e.to_string())
        }
    })
}

/// What refuses switching an adapter on or off.
pub(super) struct ToggleRefusals;

impl IntoResponses for ToggleRefusals {
    fn responses() -> BTreeMap<String, RefOr<utoipa::openapi::Response>> {
        openapi::error_answers(&[
            ("404", "no such adapter"),
            (
                "409",
                "it cannot be switched: not installed, held back, not configured (or its `start` \
                 or `stop` refused its settings), or without `start` and `stop`",
            ),
        ])
    }
}

/// Runs the adapter's `start`; the choice persists across restarts and every replica follows.
#[utoipa::path(
    post,
    path = "/api/adapters/{name}/enable",
    operation_id = "enable_adapter",
    tag = "adapters",
    params(("name" = String, Path, description = "The adapter's name")),
    responses(
        (status = 200, body = AdapterEntry),
        ToggleRefusals,
        (status = 500, description = "its `start` failed", body = ErrorBody),
    )
)]
pub(super) async fn enable(
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
) -> ApiResult<Json<AdapterEntry>> {
    toggle(&app, &name, true).await
}

/// Runs the adapter's `stop`; the choice persists across restarts and every replica follows.
#[utoipa::path(
    post,
    path = "/api/adapters/{name}/disable",
    operation_id = "disable_adapter",
    tag = "adapters",
    params(("name" = String, Path, description = "The adapter's name")),
    responses(
        (status = 200, body = AdapterEntry),
        ToggleRefusals,
        (status = 500, description = "its `stop` failed", body = ErrorBody),
    )
)]
pub(super) async fn disable(
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
) -> ApiResult<Json<AdapterEntry>> {
    toggle(&app, &name, false).await
}
