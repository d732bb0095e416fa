//! `/api/tasks`: the task list and the guarded cancel/delete.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::api::{ApiResult, PathParam, QueryParams};
use super::guards::LoopbackPeer;
use crate::tasks::{self, Removal, TaskStatus};

#[derive(Deserialize)]
pub struct Filter {
    status: Option<String>,
}

pub async fn list(
    State(app): State<AppState>,
    QueryParams(filter): QueryParams<Filter>,
) -> ApiResult<Json<Value>> {
    let status = filter.status.map(|s| s.parse::<TaskStatus>()).transpose()?;
    let tasks = app.db.call(move |conn| tasks::list(conn, status)).await?;
    Ok(Json(json!({ "tasks": tasks })))
}

/// Cancels a pending or running task, deletes a finished one. Loopback peers only.
pub async fn remove(
    _: LoopbackPeer,
    State(app): State<AppState>,
    PathParam(task_id): PathParam<String>,
) -> ApiResult<Json<Value>> {
    let id = task_id.clone();
    let result = app
        .db
        .call(move |conn| tasks::cancel_or_delete(conn, &id))
        .await?;
    if result == Removal::Cancelled {
        // Stops the work itself, when this process runs it.
        app.running.cancel(&task_id);
    }
    Ok(Json(json!({ "task_id": task_id, "result": result })))
}
