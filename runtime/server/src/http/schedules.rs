//! `/api/schedules`: schedules listed, created, changed (and enabled or disabled), run once now
//! and deleted, as `service-runtime schedule` does. A schedule naming an agent that does not
//! exist (yet) is kept, with a warning in the answer: its runs fail until the agent exists.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::Utc;
use chrono_tz::Tz;
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::api::{JsonBody, PathParam, QueryParams};
use super::api_error::ApiResult;
use service_contract::RunFailureKind;

use super::identity::Known;
use crate::access::Principal;
use crate::agents::profiles;
use crate::db::Conn;
use crate::error::Error;
use crate::scheduler::manage::{self, Changes, Draft};
use crate::scheduler::store::{self, Schedule};
use crate::scheduler::tick::Due;
use crate::scheduler::{self, cron, plan};

/// A schedule as the API answers it: its fields and when it runs next, in words.
fn view(schedule: &Schedule) -> Value {
    let human = schedule
        .next_run_at
        .as_deref()
        .and_then(store::parse_timestamp)
        .filter(|_| schedule.enabled)
        .map(|next| plan::describe_next(next, Utc::now()));
    let mut value = json!(schedule);
    value["next_run_human"] = json!(human);
    value
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
async fn answer(app: &AppState, schedule: Schedule) -> ApiResult<Json<Value>> {
    let agent = schedule.agent_profile_name.clone();
    let known = app
        .db
        .call(move |conn| profiles::get(conn, &agent))
        .await?
        .is_some();
    let mut value = view(&schedule);
    if !known {
        value["warning"] = json!(format!(
            "there is no agent named {:?} yet; runs fail until it exists",
            schedule.agent_profile_name
        ));
    }
    Ok(Json(value))
}

pub(super) async fn list(State(app): State<AppState>) -> ApiResult<Json<Value>> {
    let schedules = app.db.call(|conn| store::list(conn)).await?;
    let schedules: Vec<Value> = schedules.iter().map(view).collect();
    Ok(Json(json!({ "schedules": schedules })))
}

/// The specification's field names (2.4), as `GET` answers them; the short ones (`cron`,
/// `agent`, `catch_up`) are kept as aliases.
/// One schedule, as the list shows it.
pub(super) async fn show(
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
) -> ApiResult<Json<Value>> {
    let schedule = app.db.call(move |conn| store::require(conn, &name)).await?;
    Ok(Json(view(&schedule)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NewBody {
    name: String,
    #[serde(rename = "cron_expression", alias = "cron")]
    cron: String,
    #[serde(rename = "agent_profile_name", alias = "agent")]
    agent: String,
    prompt: String,
    #[serde(rename = "catch_up_policy", alias = "catch_up")]
    catch_up: Option<String>,
    #[serde(default = "enabled_by_default")]
    enabled: bool,
}

fn enabled_by_default() -> bool {
    true
}

pub(super) async fn create(
    Known(caller): Known,
    State(app): State<AppState>,
    JsonBody(body): JsonBody<NewBody>,
) -> ApiResult<(StatusCode, Json<Value>)> {
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
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ChangesBody {
    #[serde(rename = "cron_expression", alias = "cron")]
    cron: Option<String>,
    #[serde(rename = "agent_profile_name", alias = "agent")]
    agent: Option<String>,
    prompt: Option<String>,
    #[serde(rename = "catch_up_policy", alias = "catch_up")]
    catch_up: Option<String>,
    enabled: Option<bool>,
}

pub(super) async fn update(
    Known(caller): Known,
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
    JsonBody(body): JsonBody<ChangesBody>,
) -> ApiResult<Json<Value>> {
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

/// Its runs so far stay, as tasks and traces.
pub(super) async fn remove(
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
) -> ApiResult<Json<Value>> {
    let deleted = name.clone();
    app.db
        .call(move |conn| store::delete(conn, &deleted))
        .await?;
    Ok(Json(json!({ "deleted": name })))
}

#[derive(Deserialize)]
pub(super) struct RunQuery {
    /// Answer once the run ended, with its outcome (the CLI's `schedule run`).
    #[serde(default)]
    wait: bool,
}

/// Runs the schedule once now, outside its cron (its next run is unchanged), as a task; 409
/// while a run of it is in progress (a schedule never overlaps itself). 202 at once, or with
/// `?wait=true` 200 once it ended: its task status, trace and answer or error.
pub(super) async fn run(
    Known(caller): Known,
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
    QueryParams(query): QueryParams<RunQuery>,
) -> ApiResult<(StatusCode, Json<Value>)> {
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
        return Ok((StatusCode::ACCEPTED, Json(json!({ "status": "started" }))));
    }
    let ran = run
        .await
        .map_err(|e| Error::Internal(e.into()))?
        .map_err(|e| Error::Internal(anyhow::anyhow!("{e}")))?;
    let mut answer = json!({ "status": ran.status, "trace_id": ran.trace_id() });
    match &ran.outcome {
        Ok(reply) => answer["text"] = json!(reply.text),
        Err(failure) => {
            answer["error"] = json!(failure.to_string());
            answer["unknown_agent"] = json!(failure.kind == RunFailureKind::UnknownAgent);
        }
    }
    Ok((StatusCode::OK, Json(answer)))
}
