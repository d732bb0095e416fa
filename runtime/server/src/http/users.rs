//! `/api/users` (admins): people with local accounts or single sign-on. A new local user gets
//! a one-time link to set a password; removing a user ends their sessions.

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
use crate::access::links;
use crate::access::{Role, users};
use crate::error::Error;

pub(super) async fn list(State(app): State<AppState>) -> ApiResult<Json<Value>> {
    let users = app.db.call(|conn| users::list(conn)).await?;
    Ok(Json(json!({ "users": users })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateBody {
    name: String,
    role: String,
}

pub(super) async fn create(
    Known(caller): Known,
    State(app): State<AppState>,
    JsonBody(body): JsonBody<CreateBody>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let role = role_to_give(&caller, &body.role)?;
    let created_by = caller.label();
    let (user, secret) = app
        .db
        .call(move |conn| links::invite(conn, &body.name, role, &created_by))
        .await?;
    let link = app.link(&secret);
    Ok((
        StatusCode::CREATED,
        Json(json!({ "user": user, "link": link })),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct UpdateBody {
    role: String,
}

pub(super) async fn update(
    Known(caller): Known,
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
    JsonBody(body): JsonBody<UpdateBody>,
) -> ApiResult<Json<Value>> {
    let role = role_to_give(&caller, &body.role)?;
    let user = app
        .db
        .call(move |conn| {
            conn.transaction(|conn| {
                let user = users::get(conn, &name)?;
                if user.role == Role::Admin && role != Role::Admin {
                    keep_an_admin(conn, &name)?;
                }
                users::set_role(conn, &name, role)
            })
        })
        .await?;
    app.access.forget();
    Ok(Json(json!({ "user": user })))
}

pub(super) async fn remove(
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
) -> ApiResult<Json<Value>> {
    let removed = name.clone();
    app.db
        .call(move |conn| {
            conn.transaction(|conn| {
                if users::get(conn, &removed)?.role == Role::Admin {
                    keep_an_admin(conn, &removed)?;
                }
                users::remove(conn, &removed)
            })
        })
        .await?;
    app.access.forget();
    Ok(Json(json!({ "removed": name })))
}

/// `POST /api/users/{name}/link`: a new one-time link to set a local user's password (their
/// sessions end once it is used).
pub(super) async fn link(
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let user = name.clone();
    let secret = app.db.call(move |conn| links::reset(conn, &user)).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({ "user": name, "link": app.link(&secret) })),
    ))
}

/// Refuses to take the admin role from the last user holding it: with sign-in required,
/// nobody could manage people any more.
fn keep_an_admin(conn: &crate::db::Conn, name: &str) -> crate::error::Result<()> {
    if users::other_admins(conn, name)? == 0 {
        return Err(Error::conflict(format!(
            "{name:?} is the last admin; make someone else admin first"
        )));
    }
    Ok(())
}
