//! `/api/schedules`: schedules listed, created, changed (and enabled or disabled), run once now
//! and deleted, as `service-runtime schedule` does. A schedule naming an agent that does not
//! exist (yet) is kept, with a warning in the answer: its runs fail until the agent exists.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::Utc;
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};
use service_contract::RunFailureKind;
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::api::{JsonBody, PathParam, QueryParams};
use super::api_error::{ApiResult, ErrorBody};

use super::identity::Known;
use crate::access::Principal;
use crate::agents::profiles;
use crate::db::Conn;
use crate::error::Error;
use crate::scheduler::manage::{self, Changes, Draft};
use crate::scheduler::store::{self, Schedule};
use crate::scheduler::tick::Due;
use crate::scheduler::{self, cron, plan};
use crate::tasks::TaskStatus;

/// A schedule as the API answers it: its fields and when it runs next, in words.
#[derive(Serialize, ToSchema)]
pub(super) struct ScheduleView {
    #[serde(flatten)]
    schedule: Schedule,
    /// When it runs next, in words (`in 5 minutes`); `null` while disabled.
    next_run_human: Option<String>,
    /// Present when its agent does not exist (yet): its runs fail until it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(required = false)]
    warning: Option<String>,
}

fn view(schedule: Schedule) -> ScheduleView {
    let next_run_human = schedule
        .next_run_at
        .as_deref()
        .and_then(store::parse_timestamp)
        .filter(|_| schedule.enabled)
        .map(|next| plan::describe_next(next, Utc::now()));
    ScheduleView {
        schedule,
        next_run_human,
        warning: None,
    }
}

/// The server's zone, in which cron expressions are read.
fn zone(app: &AppState) -> Result<Tz, Error> {
    cron::zone(app.env.get("SERVICE_TZ").as_deref()).map_err(Error::invalid)
}

/// Refuses a schedule of an agent the caller may not use (one not yet made is anyone's).
fn may_run(conn: &Conn, caller: &Principal, agent: &str) -> Result<(), Error> {
    match profiles::get(conn, agent)? {
        Some(profile) => caller.check_agent(agent, profile.access.as_ref()),
        None => Ok(()),
    }
}

/// `schedule` with a warning when its agent does not exist.
async fn answer(app: &AppState, schedule: Schedule) -> ApiResult<Json<ScheduleView>> {
    let agent = schedule.agent_profile_name.clone();
    let known = app
        .db
        .call(move |conn| profiles::get(conn, &agent))
        .await?
        .is_some();
    let mut view = view(schedule);
    if !known {
        view.warning = Some(format!(
            "there is no agent named {:?} yet; runs fail until it exists",
            view.schedule.agent_profile_name
        ));
    }
    Ok(Json(view))
}

#[derive(Serialize, ToSchema)]
pub(super) struct ScheduleList {
    schedules: Vec<ScheduleView>,
}

/// Every schedule, by name.
#[utoipa::path(
    get,
    path = "/api/schedules",
    operation_id = "list_schedules",
    tag = "schedules",
    responses((status = 200, body = ScheduleList))
)]
pub(super) async fn list(State(app): State<AppState>) -> ApiResult<Json<ScheduleList>> {
    let schedules = app.db.call(|conn| store::list(conn)).await?;
    let schedules = schedules.into_iter().map(view).collect();
    Ok(Json(ScheduleList { schedules }))
}

/// One schedule, as the list shows it.
#[utoipa::path(
    get,
    path = "/api/schedules/{name}",
    operation_id = "show_schedule",
    tag = "schedules",
    params(("name" = String, Path, description = "The schedule's name")),
    responses(
        (status = 200, body = ScheduleView),
        (status = 404, description = "no such schedule", body = ErrorBody),
    )
)]
pub(super) async fn show(
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
) -> ApiResult<Json<ScheduleView>> {
    let schedule = app.db.call(move |conn| store::require(conn, &name)).await?;
    Ok(Json(view(schedule)))
}

/// The specification's field names (2.4), as `GET` answers them; the short ones (`cron`,
/// `agent`, `catch_up`) are kept as aliases.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewBody {
    /// 1 to 64 characters, no control characters, no space at either end.
    name: String,
    /// Five fields (minute hour day month weekday), read in `SERVICE_TZ`.
    #[serde(rename = "cron_expression", alias = "cron")]
    cron: String,
    #[serde(rename = "agent_profile_name", alias = "agent")]
    agent: String,
    prompt: String,
    #[serde(rename = "catch_up_policy", alias = "catch_up")]
    /// Default `coalesce`.
    #[schema(value_type = Option<plan::CatchUp>)]
    catch_up: Option<String>,
    #[serde(default = "enabled_by_default")]
    #[schema(default = true)]
    enabled: bool,
}

fn enabled_by_default() -> bool {
    true
}

/// Creates a schedule (its agent may not exist yet: the answer then carries a warning).
#[utoipa::path(
    post,
    path = "/api/schedules",
    operation_id = "create_schedule",
    tag = "schedules",
    request_body = NewBody,
    responses(
        (status = 201, body = ScheduleView),
        (status = 400, description = "invalid; `field` names the input when one is to blame",
            body = ErrorBody),
        (status = 409, description = "a schedule of that name exists", body = ErrorBody),
    )
)]
pub(super) async fn create(
    Known(caller): Known,
    State(app): State<AppState>,
    JsonBody(body): JsonBody<NewBody>,
) -> ApiResult<(StatusCode, Json<ScheduleView>)> {
    let tz = zone(&app)?;
    let created = app
        .db
        .call(move |conn| {
            may_run(conn, &caller, &body.agent)?;
            let draft = Draft {
                name: &body.name,
                cron: &body.cron,
                agent: &body.agent,
                prompt: &body.prompt,
                catch_up: body.catch_up.as_deref(),
                enabled: body.enabled,
            };
            manage::create(conn, &draft, &tz, Utc::now())
        })
        .await?;
    Ok((StatusCode::CREATED, answer(&app, created).await?))
}

/// Changes: any of the fields, and `enabled` (enabling starts from the next slot).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ChangesBody {
    #[serde(rename = "cron_expression", alias = "cron")]
    cron: Option<String>,
    #[serde(rename = "agent_profile_name", alias = "agent")]
    agent: Option<String>,
    prompt: Option<String>,
    #[serde(rename = "catch_up_policy", alias = "catch_up")]
    #[schema(value_type = Option<plan::CatchUp>)]
    catch_up: Option<String>,
    enabled: Option<bool>,
}

/// Changes a schedule; a change refused halfway leaves it as it was.
#[utoipa::path(
    patch,
    path = "/api/schedules/{name}",
    operation_id = "update_schedule",
    tag = "schedules",
    params(("name" = String, Path, description = "The schedule's name")),
    request_body = ChangesBody,
    responses(
        (status = 200, body = ScheduleView),
        (status = 400, description = "invalid, or nothing to change", body = ErrorBody),
        (status = 404, description = "no such schedule", body = ErrorBody),
    )
)]
pub(super) async fn update(
    Known(caller): Known,
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
    JsonBody(body): JsonBody<ChangesBody>,
) -> ApiResult<Json<ScheduleView>> {
    let tz = zone(&app)?;
    let changed = app
        .db
        .call(move |conn| {
            let changes = Changes {
                cron: body.cron.as_deref(),
                agent: body.agent.as_deref(),
                prompt: body.prompt.as_deref(),
                catch_up: body.catch_up.as_deref(),
            };
            if changes.is_empty() && body.enabled.is_none() {
                return Err(Error::invalid(
                    "nothing to change: give cron_expression, agent_profile_name, prompt, \
                     catch_up_policy or enabled",
                ));
            }
            // One transaction: a change refused halfway leaves the schedule as it was.
            conn.transaction(|tx| {
                let mut schedule = store::require(tx, &name)?;
                may_run(tx, &caller, &schedule.agent_profile_name)?;
                if let Some(agent) = changes.agent {
                    may_run(tx, &caller, agent)?;
                }
                if !changes.is_empty() {
                    schedule = manage::edit(tx, &name, &changes, &tz, Utc::now())?;
                }
                match body.enabled {
                    Some(enabled) => manage::set_enabled(tx, &name, enabled, &tz, Utc::now()),
                    None => Ok(schedule),
                }
            })
        })
        .await?;
    answer(&app, changed).await
}

#[derive(Serialize, ToSchema)]
pub(super) struct DeletedSchedule {
    deleted: String,
}

/// Deletes a schedule; its runs so far stay, as tasks and traces.
#[utoipa::path(
    delete,
    path = "/api/schedules/{name}",
    operation_id = "delete_schedule",
    tag = "schedules",
    params(("name" = String, Path, description = "The schedule's name")),
    responses(
        (status = 200, body = DeletedSchedule),
        (status = 404, description = "no such schedule", body = ErrorBody),
    )
)]
pub(super) async fn remove(
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
) -> ApiResult<Json<DeletedSchedule>> {
    let deleted = name.clone();
    app.db
        .call(move |conn| store::delete(conn, &deleted))
        .await?;
    Ok(Json(DeletedSchedule { deleted: name }))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct RunQuery {
    /// Answer once the run ended, with its outcome (the CLI's `schedule run`).
    #[serde(default)]
    wait: bool,
}

/// A run started, not waited for.
#[derive(Serialize, ToSchema)]
pub(super) struct Started {
    #[schema(value_type = String, pattern = "^started$")]
    status: &'static str,
}

/// How a run waited for ended.
#[derive(Serialize, ToSchema)]
pub(super) struct Ended {
    /// Its task's status.
    status: TaskStatus,
    trace_id: Option<String>,
    /// The agent's answer, when it completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(required = false)]
    text: Option<String>,
    /// Why it failed, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(required = false)]
    error: Option<String>,
    /// When it failed: whether because its agent does not exist.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(required = false)]
    unknown_agent: Option<bool>,
}

/// Runs the schedule once now, outside its cron (its next run is unchanged), as a task. 202
/// at once, or with `?wait=true` 200 once it ended: its task status, trace and answer or error.
#[utoipa::path(
    post,
    path = "/api/schedules/{name}/run",
    operation_id = "run_schedule",
    tag = "schedules",
    params(("name" = String, Path, description = "The schedule's name"), RunQuery),
    responses(
        (status = 200, description = "ended (`?wait=true`)", body = Ended),
        (status = 202, description = "started", body = Started),
        (status = 400, description = "`wait` is not a boolean", body = ErrorBody),
        (status = 404, description = "no such schedule", body = ErrorBody),
        (status = 409, description = "a run of it is in progress (a schedule never overlaps \
            itself)", body = ErrorBody),
    )
)]
pub(super) async fn run(
    Known(caller): Known,
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
    QueryParams(query): QueryParams<RunQuery>,
) -> ApiResult<Response> {
    let wanted = name.clone();
    let (schedule, running) = app
        .db
        .call(move |conn| {
            let schedule = store::require(conn, &wanted)?;
            may_run(conn, &caller, &schedule.agent_profile_name)?;
            Ok((schedule, scheduler::runs_in_progress(conn)?.remove(&wanted)))
        })
        .await?;
    if let Some(task) = running {
        return Err(Error::conflict(format!(
            "a run of {name:?} is still in progress (task {task}); a schedule never overlaps itself"
        ))
        .into());
    }
    let due = Due {
        name: schedule.name,
        agent: schedule.agent_profile_name,
        prompt: schedule.prompt,
    };
    // Before answering, so a client that reloads sees it.
    app.dispatcher.stamp_run_now(&due.name).await?;
    let dispatcher = Arc::clone(&app.dispatcher);
    // On a task of its own, as the scheduler's runs: a client that goes away cuts nothing.
    let run = tokio::spawn(async move {
        let ran = dispatcher.run(due).await;
        if let Err(e) = &ran {
            tracing::warn!(schedule = %name, "a run started from the API failed to start: {e}");
        }
        ran
    });
    if !query.wait {
        let started = Started { status: "started" };
        return Ok((StatusCode::ACCEPTED, Json(started)).into_response());
    }
    let ran = run
        .await
        .map_err(|e| Error::Internal(e.into()))?
        .map_err(|e| Error::Internal(anyhow::anyhow!("{e}")))?;
    let mut ended = Ended {
        status: ran.status,
        trace_id: ran.trace_id().map(str::to_owned),
        text: None,
        error: None,
        unknown_agent: None,
    };
    match ran.outcome {
        Ok(reply) => ended.text = Some(reply.text),
        Err(failure) => {
            ended.error = Some(failure.to_string());
            ended.unknown_agent = Some(failure.kind == RunFailureKind::UnknownAgent);
        }
    }
    Ok(Json(ended).into_response())
}
