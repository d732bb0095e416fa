//! `/api/tasks`: the task list and the guarded cancel/delete. An agent run's title is its
//! prompt: those who may not enter the run (see `/api/traces`) get it empty, with
//! `content_hidden: true`.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::api::{Page, PathParam, QueryParams};
use super::api_error::{ApiResult, ErrorBody};
use super::guards::LoopbackPeer;
use super::identity::Known;
use crate::access::Principal;
use crate::approvals;
use crate::bus::Event;
use crate::tasks::{self, Removal, Task, TaskStatus};

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct Filter {
    /// Only tasks of this status.
    #[param(value_type = Option<TaskStatus>)]
    status: Option<String>,
    #[serde(flatten)]
    #[param(ignore)]
    page: Page,
}

/// A task as this caller may see it.
#[derive(Serialize, ToSchema)]
pub(super) struct TaskView {
    #[serde(flatten)]
    task: Task,
    /// Present, and `true`, when the run's prompt is withheld from this caller (the title is
    /// empty, the description `null`): they may not enter the run.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    #[schema(required = false)]
    content_hidden: bool,
}

impl TaskView {
    fn for_caller(caller: &Principal, task: Task) -> Self {
        match task.holds_content() && !caller.may_enter(task.started_by.as_deref()) {
            false => Self {
                task,
                content_hidden: false,
            },
            true => Self {
                task: task.without_content(),
                content_hidden: true,
            },
        }
    }
}

#[derive(Serialize, ToSchema)]
pub(super) struct TaskList {
    tasks: Vec<TaskView>,
    limit: u32,
    offset: u32,
    /// How many tasks the filter matches.
    total: i64,
    /// How many tasks have each status, whatever the filter.
    counts: BTreeMap<String, i64>,
}

/// A page of the tasks (100 by default), newest first, with the total of the filter and the
/// count of every status (for the dashboard's filter tabs).
#[utoipa::path(
    get,
    path = "/api/tasks",
    operation_id = "list_tasks",
    tag = "tasks",
    params(Filter, Page),
    responses(
        (status = 200, body = TaskList),
        (status = 400, description = "an unknown status, or a limit or offset out of range",
            body = ErrorBody),
    )
)]
pub(super) async fn list(
    Known(caller): Known,
    State(app): State<AppState>,
    QueryParams(filter): QueryParams<Filter>,
) -> ApiResult<Json<TaskList>> {
    let status = filter.status.map(|s| s.parse::<TaskStatus>()).transpose()?;
    let (limit, offset) = filter.page.resolve(100)?;
    let (tasks, total, counts) = app
        .db
        .call(move |conn| {
            let (tasks, total) = tasks::list(conn, status, limit, offset)?;
            Ok((tasks, total, tasks::counts(conn)?))
        })
        .await?;
    let counts = counts
        .into_iter()
        .map(|(status, count)| (status.as_str().to_owned(), count))
        .collect();
    let tasks = tasks
        .into_iter()
        .map(|task| TaskView::for_caller(&caller, task))
        .collect();
    Ok(Json(TaskList {
        tasks,
        limit,
        offset,
        total,
        counts,
    }))
}

#[derive(Serialize, ToSchema)]
pub(super) struct RemovedTask {
    task_id: String,
    result: Removal,
}

/// Cancels a pending or running task (on whichever replica runs it), deletes a finished one.
/// Loopback peers only.
#[utoipa::path(
    delete,
    path = "/api/tasks/{task_id}",
    operation_id = "remove_task",
    tag = "tasks",
    params(("task_id" = String, Path, description = "The task's id")),
    responses(
        (status = 200, body = RemovedTask),
        (status = 403, description = "the request does not come from this machine",
            body = ErrorBody),
        (status = 404, description = "no such task", body = ErrorBody),
    )
)]
pub(super) async fn remove(
    _: LoopbackPeer,
    State(app): State<AppState>,
    PathParam(task_id): PathParam<String>,
) -> ApiResult<Json<RemovedTask>> {
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
    Ok(Json(RemovedTask { task_id, result }))
}
