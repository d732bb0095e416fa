//! `/api/integrations`: what is configured, writing keys, and live probes. No response ever
//! carries a secret value.

use std::collections::BTreeSet;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::AppState;
use super::api::{JsonBody, PathParam};
use super::api_error::{ApiResult, ErrorBody};
use super::guards::LoopbackPeer;
use crate::bus::Event;
use crate::error::Error;
use crate::integrations::{self, Integration, Status, Verification};
use crate::settings_store::{MAX_VALUE_BYTES, SettingsStore};

fn find(id: &str) -> Result<&'static Integration, Error> {
    integrations::find(id).ok_or_else(|| Error::not_found(format!("no integration {id:?}")))
}

#[derive(Serialize, ToSchema)]
pub(super) struct IntegrationList {
    integrations: Vec<Status>,
}

/// Every integration: whether it is configured and which of its variables are set (never
/// their values), and its last probe's outcome.
#[utoipa::path(
    get,
    path = "/api/integrations",
    operation_id = "list_integrations",
    tag = "integrations",
    responses((status = 200, body = IntegrationList))
)]
pub(super) async fn list(State(app): State<AppState>) -> ApiResult<Json<IntegrationList>> {
    let env = app.env.clone();
    let statuses = app
        .db
        .call(move |conn| integrations::statuses(conn, &env))
        .await?;
    Ok(Json(IntegrationList {
        integrations: statuses,
    }))
}

#[derive(Deserialize, ToSchema)]
pub(super) struct KeyWrite {
    /// One of the integration's variables.
    env_var: String,
    /// One line, not blank, at most 4096 bytes; for a variable with choices, one of them.
    value: String,
}

/// Where a key went, and what it changed.
#[derive(Serialize, ToSchema)]
pub(super) struct KeyWritten {
    id: &'static str,
    configured: bool,
    /// `.env`, or `database` (sealed) when replicas share PostgreSQL.
    stored_in: &'static str,
    /// Whether the process environment sets the variable too, and so wins over the key.
    overridden_by_environment: bool,
    /// The adapters started anew to read it (every key applies without a restart).
    applied_to: Vec<String>,
}

/// Stores one variable of an integration: in `<data_dir>/.env`, or sealed in the shared
/// database when replicas share PostgreSQL. Loopback peers only.
#[utoipa::path(
    post,
    path = "/api/integrations/{id}/keys",
    operation_id = "write_integration_key",
    tag = "integrations",
    params(("id" = String, Path, description = "The integration's id")),
    request_body = KeyWrite,
    responses(
        (status = 200, body = KeyWritten),
        (status = 400, description = "not a variable of the integration, or a value refused; \
            `field` names it", body = ErrorBody),
        (status = 403, description = "the request does not come from this machine",
            body = ErrorBody),
        (status = 404, description = "no such integration", body = ErrorBody),
        (status = 409, description = "replicas share PostgreSQL and `SERVICE_SECRET_KEY` is \
            not set, so the key cannot be sealed", body = ErrorBody),
    )
)]
pub(super) async fn write_key(
    _: LoopbackPeer,
    State(app): State<AppState>,
    PathParam(id): PathParam<String>,
    JsonBody(key): JsonBody<KeyWrite>,
) -> ApiResult<Json<KeyWritten>> {
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
    if let Some(values) = integrations::choices(&key.env_var)
        && !values.contains(&key.value.as_str())
    {
        return Err(Error::field(
            "value",
            format!(
                "{} must be one of {}, not {:?}",
                key.env_var,
                values.join(", "),
                key.value
            ),
        )
        .into());
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
    let name = key.env_var.clone();
    let before = app.env.get(&name);
    app.db
        .call(move |conn| {
            // The key last: a failure before it leaves only a verification forgotten.
            integrations::forget_verification(conn, id)?;
            env.write_key(conn, &key.env_var, &key.value)
        })
        .await?;
    let stored = app.env.store_name();
    tracing::info!(integration = id, variable = %name, "stored a key in the {stored}");
    if stored == "database" {
        app.bus.publish(Event::SettingsChanged);
    }
    // Where the process environment wins over the key, nothing changed.
    let changed = app.env.get(&name) != before;
    let overridden = SettingsStore::in_process(&name);
    let applied_to = if changed {
        app.components
            .settings_changed(&BTreeSet::from([name]))
            .await
    } else {
        Vec::new()
    };
    Ok(Json(KeyWritten {
        id,
        configured: integration.is_configured(&app.env),
        stored_in: stored,
        overridden_by_environment: overridden,
        applied_to,
    }))
}

/// A probe's outcome.
#[derive(Serialize, ToSchema)]
pub(super) struct Verified {
    id: &'static str,
    ok: bool,
    /// Why it failed.
    error: Option<String>,
}

/// Runs the integration's live probe (a request that succeeds only with working settings)
/// and remembers the outcome.
#[utoipa::path(
    post,
    path = "/api/integrations/{id}/verify",
    operation_id = "verify_integration",
    tag = "integrations",
    params(("id" = String, Path, description = "The integration's id")),
    responses(
        (status = 200, body = Verified),
        (status = 404, description = "no such integration", body = ErrorBody),
    )
)]
pub(super) async fn verify(
    State(app): State<AppState>,
    PathParam(id): PathParam<String>,
) -> ApiResult<Json<Verified>> {
    let integration = find(&id)?;
    let mut outcome = integration.probe(&app.env, &app.http).await;
    // What answered the probe must be what the adapter reaches: its grant decides that.
    if outcome.ok
        && let Some(url) = integration.probe_url(&app.env)
        && let Some(generation) = app.components.generation(integration.id)
        && let Err(refusal) = generation.may_reach(&url)
    {
        outcome = Verification::failed(refusal);
    }
    if integration.has_probe() {
        let id = integration.id;
        let recorded = outcome.clone();
        app.db
            .call(move |conn| integrations::record_verification(conn, id, &recorded))
            .await?;
    }
    Ok(Json(Verified {
        id: integration.id,
        ok: outcome.ok,
        error: outcome.error,
    }))
}
