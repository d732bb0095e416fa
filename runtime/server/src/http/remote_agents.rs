//! `GET /api/a2a/agents`: each configured remote A2A agent's state, its skills offered as
//! tools, and its calls' last failure.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use crate::a2a::remote::Status;

#[derive(Serialize, ToSchema)]
pub(super) struct RemoteAgentList {
    agents: Vec<Status>,
}

/// The remote agents of `[[a2a.agents]]`, as this replica reads their cards.
#[utoipa::path(
    get,
    path = "/api/a2a/agents",
    operation_id = "list_remote_agents",
    tag = "tools",
    responses((status = 200, body = RemoteAgentList))
)]
pub(super) async fn list(State(app): State<AppState>) -> Json<RemoteAgentList> {
    Json(RemoteAgentList {
        agents: app.a2a.statuses(),
    })
}
