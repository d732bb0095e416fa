//! `/api/store`: the featured bundles, installing them, and importing an exported bundle.

use std::collections::HashSet;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::agents::{AgentView, check_tools, unavailable_tools, view};
use super::api::{JsonBody, PathParam};
use super::api_error::{ApiResult, ErrorBody};
use crate::agents::bundle::Bundle;
use crate::agents::profiles;
use crate::agents::store;
use crate::agents::tool_names::Unavailable;
use crate::error::Error;

async fn installed_names(app: &AppState) -> Result<HashSet<String>, Error> {
    app.db
        .call(|conn| Ok(profiles::list(conn)?.into_iter().map(|p| p.name).collect()))
        .await
}

/// A bundle in full, and whether a profile of its name exists.
#[derive(Serialize, ToSchema)]
pub(super) struct Shown {
    #[serde(flatten)]
    bundle: &'static Bundle,
    installed: bool,
}

/// A bundle as the list shows it: without its persona (the detail view has it), with the
/// recommended tools that would be unavailable here and why.
#[derive(Serialize, ToSchema)]
pub(super) struct Listed {
    slug: &'static str,
    name: &'static str,
    role: &'static str,
    description: &'static str,
    recommended_model: Option<&'static str>,
    recommended_tools: Option<&'static [String]>,
    paired_adapters: &'static [String],
    color: Option<&'static str>,
    installed: bool,
    unavailable_tools: Vec<Unavailable>,
}

#[derive(Serialize, ToSchema)]
pub(super) struct BundleList {
    bundles: Vec<Listed>,
}

fn find(slug: &str) -> Result<&'static Bundle, Error> {
    store::find(slug).ok_or_else(|| Error::not_found(format!("no bundle with slug {slug:?}")))
}

/// A bundle's slug in a path (case-insensitive).
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub(super) struct Slug {
    slug: String,
}

/// Every featured bundle, without its persona.
#[utoipa::path(
    get,
    path = "/api/store",
    operation_id = "list_bundles",
    tag = "store",
    responses((status = 200, body = BundleList))
)]
pub(super) async fn list(State(app): State<AppState>) -> ApiResult<Json<BundleList>> {
    let installed = installed_names(&app).await?;
    let bundles = store::bundles()
        .iter()
        .map(|bundle| Listed {
            slug: &bundle.slug,
            name: &bundle.name,
            role: &bundle.role,
            description: &bundle.description,
            recommended_model: bundle.recommended_model.as_deref(),
            recommended_tools: bundle.recommended_tools.as_deref(),
            paired_adapters: &bundle.paired_adapters,
            color: bundle.color.as_deref(),
            installed: installed.contains(&bundle.name),
            unavailable_tools: unavailable_tools(&app, bundle.recommended_tools.as_deref()),
        })
        .collect();
    Ok(Json(BundleList { bundles }))
}

/// One featured bundle in full.
#[utoipa::path(
    get,
    path = "/api/store/{slug}",
    operation_id = "show_bundle",
    tag = "store",
    params(Slug),
    responses(
        (status = 200, body = Shown),
        (status = 404, description = "no such bundle", body = ErrorBody),
    )
)]
pub(super) async fn show(
    State(app): State<AppState>,
    PathParam(Slug { slug }): PathParam<Slug>,
) -> ApiResult<Json<Shown>> {
    let bundle = find(&slug)?;
    let installed = installed_names(&app).await?.contains(&bundle.name);
    Ok(Json(Shown { bundle, installed }))
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

/// Installs a featured bundle as a profile (its tools the bundle's recommended ones).
#[utoipa::path(
    post,
    path = "/api/store/{slug}/install",
    operation_id = "install_bundle",
    tag = "store",
    params(Slug),
    responses(
        (status = 201, body = AgentView),
        (status = 404, description = "no such bundle", body = ErrorBody),
        (status = 409, description = "a profile of that name exists; nothing changes",
            body = ErrorBody),
    )
)]
pub(super) async fn install(
    State(app): State<AppState>,
    PathParam(Slug { slug }): PathParam<Slug>,
) -> ApiResult<(StatusCode, Json<AgentView>)> {
    install_bundle(&app, find(&slug)?).await
}

/// Installs a bundle produced by `GET /api/agents/{name}/export`.
#[utoipa::path(
    post,
    path = "/api/store/import",
    operation_id = "import_bundle",
    tag = "store",
    request_body = Bundle,
    responses(
        (status = 201, body = AgentView),
        (status = 400, description = "invalid; `field` names the input", body = ErrorBody),
        (status = 409, description = "a profile of that name exists", body = ErrorBody),
    )
)]
pub(super) async fn import(
    State(app): State<AppState>,
    JsonBody(bundle): JsonBody<Bundle>,
) -> ApiResult<(StatusCode, Json<AgentView>)> {
    install_bundle(&app, &bundle).await
}
