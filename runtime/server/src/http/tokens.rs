//! `/api/tokens`: API tokens for machines (admins only). A new token's secret is in the
//! creation's answer and nowhere else, ever.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::api::{JsonBody, PathParam};
use super::api_error::ApiResult;
use super::identity::Known;
use super::identity::role_to_give;
use crate::access::tokens::{self, NewToken};

pub(super) async fn list(State(app): State<AppState>) -> ApiResult<Json<Value>> {
    let tokens = app.db.call(|conn| tokens::list(conn)).await?;
    Ok(Json(json!({ "tokens": tokens })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateBody {
    name: String,
    role: String,
    /// A life such as `30d`; none for a token that lasts until revoked.
    expires: Option<String>,
}

pub(super) async fn create(
    Known(caller): Known,
    State(app): State<AppState>,
    JsonBody(body): JsonBody<CreateBody>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let role = role_to_give(&caller, &body.role)?;
    let new = NewToken::new(&body.name, role, body.expires.as_deref(), &caller.label())?;
    let (token, secret) = app.db.call(move |conn| tokens::create(conn, &new)).await?;
    let mut answer = json!(token);
    answer["token"] = json!(secret);
    Ok((StatusCode::CREATED, Json(answer)))
}

pub(super) async fn revoke(
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
) -> ApiResult<Json<Value>> {
    let revoked = name.clone();
    app.db
        .call(move |conn| tokens::revoke(conn, &revoked))
        .await?;
    app.access.forget();
    Ok(Json(json!({ "revoked": name })))
}
