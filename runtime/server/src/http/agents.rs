//! `/api/agents`: agent profiles. Each answered profile carries `unavailable_tools`: the tools it
//! lists that cannot be used right now, with the reason.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::api::{JsonBody, PathParam};
use super::api_error::ApiResult;
use super::api_error::ErrorBody;
use super::identity::Known;
use crate::agents::bundle::Bundle;
use crate::agents::profiles::{self, NewProfile, Profile, ProfileInput, ProfilePatch};
use crate::agents::references::References;
use crate::agents::{references, store, tool_names};
use crate::error::Error;

/// A profile as the API answers it.
#[derive(Serialize, ToSchema)]
pub(super) struct AgentView {
    #[serde(flatten)]
    profile: Profile,
    /// The listed tools it cannot use now, and why.
    unavailable_tools: Vec<tool_names::Unavailable>,
}

#[derive(Serialize, ToSchema)]
pub(super) struct AgentList {
    agents: Vec<AgentView>,
}

/// What deleting a profile left naming it.
#[derive(Serialize, ToSchema)]
pub(super) struct Removed {
    name: String,
    /// Always `deleted`.
    result: &'static str,
    referenced_by: References,
    /// Says what happens to what still names it, when something does.
    note: Option<&'static str>,
}

pub(super) fn view(app: &AppState, profile: Profile) -> AgentView {
    AgentView {
        unavailable_tools: unavailable_tools(app, profile.tools.as_deref()),
        profile,
    }
}

/// The listed tools an agent cannot use now (not loaded, or switched off), with the reason.
pub(super) fn unavailable_tools(
    app: &AppState,
    listed: Option<&[String]>,
) -> Vec<tool_names::Unavailable> {
    let env = &app.env;
    tool_names::unavailable(listed, app.engine.tools(), |gate| {
        env.get(gate).as_deref() == Some("true")
    })
}

/// Refuses tool names the server does not know (see [`tool_names::check_known`]), except
/// those in `kept` (already on the profile being changed).
pub(super) fn check_tools(
    app: &AppState,
    profile: &NewProfile,
    kept: &[String],
) -> Result<(), Error> {
    let added: Vec<String> = profile
        .tools
        .iter()
        .flatten()
        .filter(|name| !kept.contains(name))
        .cloned()
        .collect();
    tool_names::check_known(&added, app.engine.tools())
}

/// Every agent profile, oldest first (`default` leads).
#[utoipa::path(
    get,
    path = "/api/agents",
    operation_id = "list_agents",
    tag = "agents",
    responses((status = 200, body = AgentList))
)]
pub(super) async fn list(State(app): State<AppState>) -> ApiResult<Json<AgentList>> {
    let agents = app.db.call(|conn| profiles::list(conn)).await?;
    let agents = agents.into_iter().map(|p| view(&app, p)).collect();
    Ok(Json(AgentList { agents }))
}

/// Creates an agent profile. Unknown keys are ignored.
#[utoipa::path(
    post,
    path = "/api/agents",
    operation_id = "create_agent",
    tag = "agents",
    request_body = ProfileInput,
    responses(
        (status = 201, body = AgentView),
        (status = 400, description = "invalid; `field` names the input", body = ErrorBody),
        (status = 409, description = "a profile of that name exists", body = ErrorBody),
    )
)]
pub(super) async fn create(
    State(app): State<AppState>,
    JsonBody(input): JsonBody<ProfileInput>,
) -> ApiResult<(StatusCode, Json<AgentView>)> {
    let profile = input.validate()?;
    check_tools(&app, &profile, &[])?;
    let created = app
        .db
        .call(move |conn| profiles::insert(conn, &profile))
        .await?;
    Ok((StatusCode::CREATED, Json(view(&app, created))))
}

async fn find(app: &AppState, name: String) -> Result<Profile, Error> {
    app.db
        .call(move |conn| profiles::get(conn, &name)?.ok_or_else(|| profiles::not_found(&name)))
        .await
}

/// One agent profile.
#[utoipa::path(
    get,
    path = "/api/agents/{name}",
    operation_id = "show_agent",
    tag = "agents",
    params(Name),
    responses(
        (status = 200, body = AgentView),
        (status = 404, description = "no such agent", body = ErrorBody),
    )
)]
pub(super) async fn show(
    State(app): State<AppState>,
    PathParam(Name { name }): PathParam<Name>,
) -> ApiResult<Json<AgentView>> {
    Ok(Json(view(&app, find(&app, name).await?)))
}

/// An agent's name in a path: exact and case-sensitive.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
pub(super) struct Name {
    name: String,
}

/// Changes the fields the body names, validated as on create (absent fields stay, `null`
/// clears one); the name cannot change.
#[utoipa::path(
    patch,
    path = "/api/agents/{name}",
    operation_id = "update_agent",
    tag = "agents",
    params(Name),
    request_body = ProfilePatch,
    responses(
        (status = 200, body = AgentView),
        (status = 400, description = "invalid; `field` names the input", body = ErrorBody),
        (status = 404, description = "no such agent", body = ErrorBody),
    )
)]
pub(super) async fn update(
    Known(caller): Known,
    State(app): State<AppState>,
    PathParam(Name { name }): PathParam<Name>,
    JsonBody(patch): JsonBody<ProfilePatch>,
) -> ApiResult<Json<AgentView>> {
    let current = find(&app, name).await?;
    // An agent closed to the caller is not theirs to open or change.
    caller.check_agent(&current.name, current.access.as_ref())?;
    let profile = patch.apply(&current)?.validate()?;
    // A tool whose adapter went away may stay on the profile; new names must be known.
    check_tools(&app, &profile, current.tools.as_deref().unwrap_or_default())?;
    let updated = app
        .db
        .call(move |conn| profiles::update(conn, &profile))
        .await?;
    Ok(Json(view(&app, updated)))
}

/// Who refers to the profile: schedules and adapters that would run without it.
#[utoipa::path(
    get,
    path = "/api/agents/{name}/references",
    operation_id = "agent_references",
    tag = "agents",
    params(Name),
    responses(
        (status = 200, body = References),
        (status = 404, description = "no such agent", body = ErrorBody),
    )
)]
pub(super) async fn references(
    State(app): State<AppState>,
    PathParam(Name { name }): PathParam<Name>,
) -> ApiResult<Json<references::References>> {
    let env = app.env.clone();
    let found = app
        .db
        .call(move |conn| {
            profiles::get(conn, &name)?.ok_or_else(|| profiles::not_found(&name))?;
            references::find(conn, &env, &name)
        })
        .await?;
    Ok(Json(found))
}

/// Deletes a profile (not `default`). Schedules and adapters that name it
/// are left as they are and listed in the answer: they now follow the rule for a missing
/// profile.
#[utoipa::path(
    delete,
    path = "/api/agents/{name}",
    operation_id = "remove_agent",
    tag = "agents",
    params(Name),
    responses(
        (status = 200, body = Removed),
        (status = 404, description = "no such agent", body = ErrorBody),
        (status = 409, description = "`default` cannot be deleted", body = ErrorBody),
    )
)]
pub(super) async fn remove(
    Known(caller): Known,
    State(app): State<AppState>,
    PathParam(Name { name }): PathParam<Name>,
) -> ApiResult<Json<Removed>> {
    let current = find(&app, name.clone()).await?;
    caller.check_agent(&name, current.access.as_ref())?;
    let env = app.env.clone();
    let deleted = name.clone();
    let referenced_by = app
        .db
        .call(move |conn| {
            // One transaction: an answer lost on the way leaves the profile in place.
            conn.transaction(|tx| {
                profiles::delete(tx, &deleted)?;
                references::find(tx, &env, &deleted)
            })
        })
        .await?;
    tracing::info!(agent = %name, "deleted an agent profile");
    let note = (!referenced_by.is_empty()).then_some(
        "these still name the deleted agent: a schedule's runs now fail with an error trace, \
         an adapter answers with the server's default model and no system prompt",
    );
    Ok(Json(Removed {
        name,
        result: "deleted",
        referenced_by,
        note,
    }))
}

/// The profile as a shareable bundle, offered as a file download (`<slug>.agent.json`).
#[utoipa::path(
    get,
    path = "/api/agents/{name}/export",
    operation_id = "export_agent",
    tag = "agents",
    params(Name),
    responses(
        (status = 200, body = Bundle, headers(
            ("content-disposition" = String, description = "attachment; filename=\"<slug>.agent.json\"")
        )),
        (status = 404, description = "no such agent", body = ErrorBody),
    )
)]
pub(super) async fn export(
    State(app): State<AppState>,
    PathParam(Name { name }): PathParam<Name>,
) -> ApiResult<impl IntoResponse> {
    let profile = find(&app, name).await?;
    let bundle = Bundle::from_profile(&profile, store::named(&profile.name));
    let disposition = format!("attachment; filename=\"{}.agent.json\"", bundle.slug);
    Ok(([(header::CONTENT_DISPOSITION, disposition)], Json(bundle)))
}
