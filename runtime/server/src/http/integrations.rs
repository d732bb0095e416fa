//! `/api/integrations`: what is configured, writing keys, and live probes. No response ever
//! carries a secret value.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::api::{ApiResult, JsonBody, PathParam};
use super::guards::LoopbackPeer;
use crate::environment::MAX_VALUE_BYTES;
use crate::error::Error;
use crate::integrations::{self, Integration};

fn find(id: &str) -> Result<&'static Integration, Error> {
    integrations::find(id).ok_or_else(|| Error::not_found(format!("no integration {id:?}")))
}

pub async fn list(State(app): State<AppState>) -> ApiResult<Json<Value>> {
    let env = app.env.clone();
    let statuses = app
        .db
        .call(move |conn| integrations::statuses(conn, &env))
        .await?;
    Ok(Json(json!({ "integrations": statuses })))
}

#[derive(Deserialize)]
pub struct KeyWrite {
    env_var: String,
    value: String,
}

/// Stores one variable of an integration in `<data_dir>/.env`. Loopback peers only.
pub async fn write_key(
    _: LoopbackPeer,
    State(app): State<AppState>,
    PathParam(id): PathParam<String>,
    JsonBody(key): JsonBody<KeyWrite>,
) -> ApiResult<Json<Value>> {
    let integration = find(&id)?;
    if !integration.env_vars.contains(&key.env_var.as_str()) {
        return Err(Error::field(
            "env_var",
            format!(
                "{:?} is not a variable of {}; expected one of {}",
                key.env_var,
                integration.id,
                integration.env_vars.join(", ")
            ),
        )
        .into());
    }
    if key.value.trim().is_empty() {
        return Err(Error::field("value", "value must not be empty").into());
    }
    if key.value.contains(['\n', '\r', '\0']) {
        return Err(Error::field("value", "value must be a single line").into());
    }
    if key.value.len() > MAX_VALUE_BYTES {
        return Err(Error::field(
            "value",
            format!("value must be at most {MAX_VALUE_BYTES} bytes"),
        )
        .into());
    }
    let env = app.env.clone();
    let id = integration.id;
    app.db
        .call(move |conn| {
            env.write(&key.env_var, &key.value)?;
            integrations::forget_verification(conn, id)
        })
        .await?;
    tracing::info!(integration = id, "stored a key in .env");
    // An adapter that reported the missing setting looks again.
    app.adapters.recheck().await;
    Ok(Json(json!({
        "id": id,
        "configured": integration.is_configured(&app.env),
    })))
}

/// Runs the integration's live probe and remembers the outcome.
pub async fn verify(
    State(app): State<AppState>,
    PathParam(id): PathParam<String>,
) -> ApiResult<Json<Value>> {
    let integration = find(&id)?;
    let outcome = integration.probe(&app.env, &app.http).await;
    if integration.has_probe() {
        let id = integration.id;
        let recorded = outcome.clone();
        app.db
            .call(move |conn| integrations::record_verification(conn, id, &recorded))
            .await?;
    }
    Ok(Json(
        json!({ "id": integration.id, "ok": outcome.ok, "error": outcome.error }),
    ))
}
