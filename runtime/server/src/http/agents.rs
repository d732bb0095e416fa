//! `/api/agents`: agent profiles. Each answered profile carries `unavailable_tools`: the tools it
//! lists that cannot be used right now, with the reason.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde_json::{Value, json};

use super::AppState;
use super::api::{JsonBody, PathParam};
use super::api_error::ApiResult;
use super::identity::Known;
use crate::agents::bundle::Bundle;
use crate::agents::profiles::{self, NewProfile, Profile, ProfileInput, ProfilePatch};
use crate::agents::{references, store, tool_names};
use crate::error::Error;

/// A profile as the API answers it.
pub(super) fn view(app: &AppState, profile: &Profile) -> Value {
    let mut value = json!(profile);
    value["unavailable_tools"] = json!(unavailable_tools(app, profile.tools.as_deref()));
    value
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

pub(super) async fn list(State(app): State<AppState>) -> ApiResult<Json<Value>> {
    let agents = app.db.call(|conn| profiles::list(conn)).await?;
    let agents: Vec<Value> = agents.iter().map(|p| view(&app, p)).collect();
    Ok(Json(json!({ "agents": agents })))
}

pub(super) async fn create(
    State(app): State<AppState>,
    JsonBody(input): JsonBody<ProfileInput>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let profile = input.validate()?;
    check_tools(&app, &profile, &[])?;
    let created = app
        .db
        .call(move |conn| profiles::insert(conn, &profile))
        .await?;
    Ok((StatusCode::CREATED, Json(view(&app, &created))))
}

async fn find(app: &AppState, name: String) -> Result<Profile, Error> {
    app.db
        .call(move |conn| profiles::get(conn, &name)?.ok_or_else(|| profiles::not_found(&name)))
        .await
}

pub(super) async fn show(
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
) -> ApiResult<Json<Value>> {
    Ok(Json(view(&app, &find(&app, name).await?)))
}

/// Changes the fields the body names, validated as on create; the name cannot change.
pub(super) async fn update(
    Known(caller): Known,
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
    JsonBody(patch): JsonBody<ProfilePatch>,
) -> ApiResult<Json<Value>> {
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
    Ok(Json(view(&app, &updated)))
}

/// Who refers to the profile: schedules and adapters that would run without it.
pub(super) async fn references(
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
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
pub(super) async fn remove(
    Known(caller): Known,
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
) -> ApiResult<Json<Value>> {
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
    Ok(Json(json!({
        "name": name,
        "result": "deleted",
        "referenced_by": referenced_by,
        "note": note,
    })))
}

/// The profile as a shareable bundle, offered as a file download.
pub(super) async fn export(
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
) -> ApiResult<impl IntoResponse> {
    let profile = find(&app, name).await?;
    let bundle = Bundle::from_profile(&profile, store::named(&profile.name));
    let disposition = format!("attachment; filename=\"{}.agent.json\"", bundle.slug);
    Ok(([(header::CONTENT_DISPOSITION, disposition)], Json(bundle)))
}
