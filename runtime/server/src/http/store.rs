//! `/api/store`: the featured bundles, installing them, and importing an exported bundle.

use std::collections::HashSet;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::AppState;
use super::agents::{AgentView, check_tools, unavailable_tools, view};
use super::api::{JsonBody, PathParam};
use super::api_error::ApiResult;
use crate::agents::bundle::Bundle;
use crate::agents::profiles;
use crate::agents::store;
use crate::error::Error;

async fn installed_names(app: &AppState) -> Result<HashSet<String>, Error> {
    app.db
        .call(|conn| Ok(profiles::list(conn)?.into_iter().map(|p| p.name).collect()))
        .await
}

/// A bundle as JSON plus its installed flag.
fn with_installed(bundle: &Bundle, installed: &HashSet<String>) -> Value {
    let mut value = json!(bundle);
    value["installed"] = json!(installed.contains(&bundle.name));
    value
}

fn find(slug: &str) -> Result<&'static Bundle, Error> {
    store::find(slug).ok_or_else(|| Error::not_found(format!("no bundle with slug {slug:?}")))
}

/// Every bundle without its persona (that is in the detail view), with the recommended tools
/// that would be unavailable here and why.
pub(super) async fn list(State(app): State<AppState>) -> ApiResult<Json<Value>> {
    let installed = installed_names(&app).await?;
    let bundles: Vec<Value> = store::bundles()
        .iter()
        .map(|bundle| {
            let mut value = with_installed(bundle, &installed);
            value.as_object_mut().map(|o| o.remove("system_prompt"));
            value["unavailable_tools"] =
                json!(unavailable_tools(&app, bundle.recommended_tools.as_deref()));
            value
        })
        .collect();
    Ok(Json(json!({ "bundles": bundles })))
}

pub(super) async fn show(
    State(app): State<AppState>,
    PathParam(slug): PathParam<String>,
) -> ApiResult<Json<Value>> {
    let bundle = find(&slug)?;
    Ok(Json(with_installed(bundle, &installed_names(&app).await?)))
}

/// Installs a bundle as a profile; never overwrites one of the same name. Its tools are
/// checked as on create.
async fn install_bundle(
    app: &AppState,
    bundle: &Bundle,
) -> ApiResult<(StatusCode, Json<AgentView>)> {
    let profile = bundle.profile_input().validate()?;
    check_tools(app, &profile, &[])?;
    let created = app
        .db
        .call(move |conn| profiles::insert(conn, &profile))
        .await?;
    Ok((StatusCode::CREATED, Json(view(app, created))))
}

pub(super) async fn install(
    State(app): State<AppState>,
    PathParam(slug): PathParam<String>,
) -> ApiResult<(StatusCode, Json<AgentView>)> {
    install_bundle(&app, find(&slug)?).await
}

/// Installs a bundle produced by `GET /api/agents/{name}/export`.
pub(super) async fn import(
    State(app): State<AppState>,
    JsonBody(bundle): JsonBody<Bundle>,
) -> ApiResult<(StatusCode, Json<AgentView>)> {
    install_bundle(&app, &bundle).await
}
