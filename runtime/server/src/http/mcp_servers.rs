//! `GET /api/mcp/servers`: each configured MCP server's state and its tool count.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::AppState;

pub(super) async fn list(State(app): State<AppState>) -> Json<Value> {
    Json(json!({ "servers": app.mcp.statuses() }))
}
