//! `/api/tokens`: API tokens for machines (admins only). A new token's secret is in the
//! creation's answer and nowhere else, ever.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::AppState;
use super::api::{JsonBody, PathParam};
use super::api_error::{ApiResult, ErrorBody};
use super::identity::Known;
use super::identity::role_to_give;
use crate::access::Role;
use crate::access::tokens::{self, NewToken, Token};

#[derive(Serialize, ToSchema)]
pub(super) struct TokenList {
    tokens: Vec<Token>,
}

/// Every API token, without its secret.
#[utoipa::path(
    get,
    path = "/api/tokens",
    operation_id = "list_tokens",
    tag = "access",
    responses((status = 200, body = TokenList))
)]
pub(super) async fn list(State(app): State<AppState>) -> ApiResult<Json<TokenList>> {
    let tokens = app.db.call(|conn| tokens::list(conn)).await?;
    Ok(Json(TokenList { tokens }))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewTokenInput {
    /// 1 to 64 letters, digits, `-`, `_` or `.`.
    name: String,
    /// At most the caller's own role.
    #[schema(value_type = Role)]
    role: String,
    /// A life such as `30d`, `12h` or `45m` (at most 3650 days); none for a token that lasts
    /// until revoked.
    expires: Option<String>,
}

/// A new token, with its secret: shown this once.
#[derive(Serialize, ToSchema)]
pub(super) struct CreatedToken {
    #[serde(flatten)]
    token: Token,
    /// The secret to send as `Authorization: Bearer <token>`.
    #[serde(rename = "token")]
    secret: String,
}

/// Creates a token.
#[utoipa::path(
    post,
    path = "/api/tokens",
    operation_id = "create_token",
    tag = "access",
    request_body = NewTokenInput,
    responses(
        (status = 201, body = CreatedToken),
        (status = 400, description = "invalid; `field` names the input", body = ErrorBody),
        (status = 403, description = "the role is above the caller's", body = ErrorBody),
        (status = 409, description = "a token of that name exists", body = ErrorBody),
    )
)]
pub(super) async fn create(
    Known(caller): Known,
    State(app): State<AppState>,
    JsonBody(body): JsonBody<NewTokenInput>,
) -> ApiResult<(StatusCode, Json<CreatedToken>)> {
    let role = role_to_give(&caller, &body.role)?;
    let new = NewToken::new(&body.name, role, body.expires.as_deref(), &caller.label())?;
    let (token, secret) = app.db.call(move |conn| tokens::create(conn, &new)).await?;
    Ok((StatusCode::CREATED, Json(CreatedToken { token, secret })))
}

#[derive(Serialize, ToSchema)]
pub(super) struct RevokedToken {
    revoked: String,
}

/// Revokes a token: it is refused from the next request on.
#[utoipa::path(
    delete,
    path = "/api/tokens/{name}",
    operation_id = "revoke_token",
    tag = "access",
    params(("name" = String, Path, description = "The token's name")),
    responses(
        (status = 200, body = RevokedToken),
        (status = 404, description = "no such token", body = ErrorBody),
    )
)]
pub(super) async fn revoke(
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
) -> ApiResult<Json<RevokedToken>> {
    let revoked = name.clone();
    app.db
        .call(move |conn| tokens::revoke(conn, &revoked))
        .await?;
    app.access.forget();
    Ok(Json(RevokedToken { revoked: name }))
}
