//! `GET /api/tools`: the tool registry.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use service_contract::tools::ToolInfo;
use utoipa::ToSchema;

use super::AppState;

#[derive(Serialize, ToSchema)]
pub(super) struct ToolList {
    tools: Vec<ToolInfo>,
}

/// Every tool agents may be given: built in, from adapters, MCP servers and remote agents.
#[utoipa::path(
    get,
    path = "/api/tools",
    operation_id = "list_tools",
    tag = "tools",
    responses((status = 200, body = ToolList))
)]
pub(super) async fn list(State(app): State<AppState>) -> Json<ToolList> {
    Json(ToolList {
        tools: app.engine.tools().list(),
    })
}
