//! `GET /api/tools`: the tool registry.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::AppState;

pub(super) async fn list(State(app): State<AppState>) -> Json<Value> {
    Json(json!({ "tools": app.engine.tools().list() }))
}
