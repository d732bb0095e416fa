//! `GET /api/a2a/agents`: each configured remote A2A agent's state, its skills offered as
//! tools, and its calls' last failure.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::AppState;

pub(super) async fn list(State(app): State<AppState>) -> Json<Value> {
    Json(json!({ "agents": app.a2a.statuses() }))
}
