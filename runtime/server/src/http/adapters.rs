//! `/api/adapters`: the adapter registry, and enabling or disabling an adapter.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};
use service_contract::AdapterEntry;

use super::AppState;
use super::api::{ApiError, ApiResult, PathParam};
use super::guards::LoopbackPeer;
use crate::adapters::{self, ToggleError};

pub async fn list(State(app): State<AppState>) -> Json<Value> {
    Json(json!({ "adapters": app.adapters.registry().entries() }))
}

async fn toggle(app: &AppState, name: &str, enable: bool) -> ApiResult<Json<AdapterEntry>> {
    if app.wasm.generation(name).is_some() {
        app.wasm.toggle(name, enable).await.map_err(|e| {
            let status =
                StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            ApiError::new(status, e.public)
        })?;
        adapters::remember_toggle(&app.db, name, enable).await?;
        let entry = app.adapters.registry().get(name);
        return entry.map(Json).ok_or_else(|| {
            ApiError::new(StatusCode::NOT_FOUND, format!("no adapter named {name:?}"))
        });
    }
    app.adapters
        .toggle(name, enable)
        .await
        .map(Json)
        .map_err(|e| {
            let status = match &e {
                ToggleError::Unknown(_) => StatusCode::NOT_FOUND,
                ToggleError::NotToggleable(_) => StatusCode::CONFLICT,
                ToggleError::HookFailed(_) => StatusCode::INTERNAL_SERVER_ERROR,
                ToggleError::Internal(e) => {
                    return ApiError::from(crate::error::Error::Internal(anyhow::anyhow!("{e}")));
                }
            };
            ApiError::new(status, e.to_string())
        })
}

/// Runs the adapter's `start`; the choice persists across restarts. Loopback peers only.
pub async fn enable(
    _: LoopbackPeer,
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
) -> ApiResult<Json<AdapterEntry>> {
    toggle(&app, &name, true).await
}

/// Runs the adapter's `stop`; the choice persists across restarts. Loopback peers only.
pub async fn disable(
    _: LoopbackPeer,
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
) -> ApiResult<Json<AdapterEntry>> {
    toggle(&app, &name, false).await
}
