//! `/api/tasks`: the task list and the guarded cancel/delete.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::api::{ApiResult, Page, PathParam, QueryParams};
use super::guards::LoopbackPeer;
use crate::tasks::{self, Removal, TaskStatus};

#[derive(Deserialize)]
pub struct Filter {
    status: Option<String>,
    // Not a flattened `Page`: query strings cannot fill numbers through `flatten`.
    limit: Option<u32>,
    offset: Option<u32>,
}

/// A page of the tasks (100 by default), newest first, with the total.
pub async fn list(
    State(app): State<AppState>,
    QueryParams(filter): QueryParams<Filter>,
) -> ApiResult<Json<Value>> {
    let status = filter.status.map(|s| s.parse::<TaskStatus>()).transpose()?;
    let page = Page {
        limit: filter.limit,
        offset: filter.offset,
    };
    let (limit, offset) = page.resolve(100)?;
    let (tasks, total) = app
        .db
        .call(move |conn| tasks::list(conn, status, limit, offset))
        .await?;
    Ok(Json(
        json!({ "tasks": tasks, "limit": limit, "offset": offset, "total": total }),
    ))
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
