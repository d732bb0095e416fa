//! `GET /api/mcp/servers`: each configured MCP server's state and its tool count.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use crate::mcp::servers::Status;

#[derive(Serialize, ToSchema)]
pub(super) struct McpServerList {
    servers: Vec<Status>,
}

/// The MCP servers of `[[mcp.servers]]`, as this replica is connected to them.
#[utoipa::path(
    get,
    path = "/api/mcp/servers",
    operation_id = "list_mcp_servers",
    tag = "tools",
    responses((status = 200, body = McpServerList))
)]
pub(super) async fn list(State(app): State<AppState>) -> Json<McpServerList> {
    Json(McpServerList {
        servers: app.mcp.statuses(),
    })
}
