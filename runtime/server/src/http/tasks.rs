//! `/api/tasks`: the task list and the guarded cancel/delete. An agent run's title is its
//! prompt: those who may not enter the run (see `/api/traces`) get it empty, with
//! `content_hidden: true`.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::AppState;
use super::api::{Page, PathParam, QueryParams, content_hidden};
use super::api_error::ApiResult;
use super::guards::LoopbackPeer;
use super::identity::Known;
use crate::approvals;
use crate::bus::Event;
use crate::tasks::{self, Removal, TaskStatus};

#[derive(Deserialize)]
pub(super) struct Filter {
    status: Option<String>,
    #[serde(flatten)]
    page: Page,
}

/// A page of the tasks (100 by default), newest first, with the total of the filter and the
/// count of every status (for the dashboard's filter tabs).
pub(super) async fn list(
    Known(caller): Known,
    State(app): State<AppState>,
    QueryParams(filter): QueryParams<Filter>,
) -> ApiResult<Json<Value>> {
    let status = filter.status.map(|s| s.parse::<TaskStatus>()).transpose()?;
    let (limit, offset) = filter.page.resolve(100)?;
    let (tasks, total, counts) = app
        .db
        .call(move |conn| {
            let (tasks, total) = tasks::list(conn, status, limit, offset)?;
            Ok((tasks, total, tasks::counts(conn)?))
        })
        .await?;
    let counts: Map<String, Value> = counts
        .into_iter()
        .map(|(status, count)| (status.as_str().to_owned(), json!(count)))
        .collect();
    let tasks: Vec<Value> = tasks
        .into_iter()
        .map(|task| {
            if task.holds_content() && !caller.may_enter(task.started_by.as_deref()) {
                content_hidden(json!(task.without_content()))
            } else {
                json!(task)
            }
        })
        .collect();
    Ok(Json(json!({
        "tasks": tasks, "limit": limit, "offset": offset, "total": total, "counts": counts,
    })))
}

/// Cancels a pending or running task, deletes a finished one. Loopback peers only.
pub(super) async fn remove(
    _: LoopbackPeer,
    State(app): State<AppState>,
    PathParam(task_id): PathParam<String>,
) -> ApiResult<Json<Value>> {
    let id = task_id.clone();
    let result = app
        .db
        .call(move |conn| {
            let result = tasks::cancel_or_delete(conn, &id)?;
            // A run waiting for approval is told no; it finishes, and the task stays cancelled.
            let denied = approvals::deny_for_task(conn, &id, "the task was cancelled")?;
            Ok((result, denied))
        })
        .await?;
    let (result, denied) = result;
    if denied > 0 {
        app.approvals_decided.notify_one();
    }
    if result == Removal::Cancelled {
        // Stops the work itself, on whichever replica runs it.
        app.bus.publish(Event::TaskCancelled(task_id.clone()));
    }
    Ok(Json(json!({ "task_id": task_id, "result": result })))
}
