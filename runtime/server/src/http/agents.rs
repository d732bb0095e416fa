//! `/api/agents`: agent profiles.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde_json::{Value, json};

use super::AppState;
use super::api::{ApiResult, JsonBody, PathParam};
use crate::agents::bundle::Bundle;
use crate::agents::profiles::{self, Profile, ProfileInput};
use crate::agents::store;
use crate::error::Error;

pub async fn list(State(app): State<AppState>) -> ApiResult<Json<Value>> {
    let agents = app.db.call(|conn| profiles::list(conn)).await?;
    Ok(Json(json!({ "agents": agents })))
}

pub async fn create(
    State(app): State<AppState>,
    JsonBody(input): JsonBody<ProfileInput>,
) -> ApiResult<(StatusCode, Json<Profile>)> {
    let profile = input.validate()?;
    let created = app
        .db
        .call(move |conn| profiles::insert(conn, &profile))
        .await?;
    Ok((StatusCode::CREATED, Json(created)))
}

async fn find(app: &AppState, name: String) -> Result<Profile, Error> {
    app.db
        .call(move |conn| {
            profiles::get(conn, &name)?
                .ok_or_else(|| Error::not_found(format!("no agent named {name:?}")))
        })
        .await
}

pub async fn show(
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
) -> ApiResult<Json<Profile>> {
    Ok(Json(find(&app, name).await?))
}

/// The profile as a shareable bundle, offered as a file download.
pub async fn export(
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
) -> ApiResult<impl IntoResponse> {
    let profile = find(&app, name).await?;
    let bundle = Bundle::from_profile(&profile, store::named(&profile.name));
    let disposition = format!("attachment; filename=\"{}.agent.json\"", bundle.slug);
    Ok(([(header::CONTENT_DISPOSITION, disposition)], Json(bundle)))
}
