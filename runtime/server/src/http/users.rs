//! `/api/users` (admins): people with local accounts or single sign-on. A new local user gets
//! a one-time link to set a password; removing a user ends their sessions.

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
use crate::access::links;
use crate::access::users::User;
use crate::access::{Role, users};
use crate::error::Error;

#[derive(Serialize, ToSchema)]
pub(super) struct UserList {
    users: Vec<User>,
}

/// Every person with an account.
#[utoipa::path(
    get,
    path = "/api/users",
    operation_id = "list_users",
    tag = "access",
    responses((status = 200, body = UserList))
)]
pub(super) async fn list(State(app): State<AppState>) -> ApiResult<Json<UserList>> {
    let users = app.db.call(|conn| users::list(conn)).await?;
    Ok(Json(UserList { users }))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewUser {
    /// 1 to 64 letters, digits, `-`, `_`, `.` or `@`.
    name: String,
    /// At most the caller's own role.
    #[schema(value_type = Role)]
    role: String,
}

/// A user and the one-time link that sets their password.
#[derive(Serialize, ToSchema)]
pub(super) struct Invited {
    user: User,
    /// Where they set a password; it works once, for a limited time.
    link: String,
}

/// Adds a local user.
#[utoipa::path(
    post,
    path = "/api/users",
    operation_id = "create_user",
    tag = "access",
    request_body = NewUser,
    responses(
        (status = 201, body = Invited),
        (status = 400, description = "invalid; `field` names the input", body = ErrorBody),
        (status = 403, description = "the role is above the caller's", body = ErrorBody),
        (status = 409, description = "a user of that name exists", body = ErrorBody),
    )
)]
pub(super) async fn create(
    Known(caller): Known,
    State(app): State<AppState>,
    JsonBody(body): JsonBody<NewUser>,
) -> ApiResult<(StatusCode, Json<Invited>)> {
    let role = role_to_give(&caller, &body.role)?;
    let created_by = caller.label();
    let (user, secret) = app
        .db
        .call(move |conn| links::invite(conn, &body.name, role, &created_by))
        .await?;
    let link = app.link(&secret);
    Ok((StatusCode::CREATED, Json(Invited { user, link })))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RoleChange {
    /// At most the caller's own role.
    #[schema(value_type = Role)]
    role: String,
}

#[derive(Serialize, ToSchema)]
pub(super) struct ChangedUser {
    user: User,
}

/// Changes a user's role.
#[utoipa::path(
    patch,
    path = "/api/users/{name}",
    operation_id = "update_user",
    tag = "access",
    params(("name" = String, Path, description = "The user's name")),
    request_body = RoleChange,
    responses(
        (status = 200, body = ChangedUser),
        (status = 400, description = "invalid; `field` names the input", body = ErrorBody),
        (status = 403, description = "the role is above the caller's", body = ErrorBody),
        (status = 404, description = "no such user", body = ErrorBody),
        (status = 409, description = "the last admin cannot lose the role", body = ErrorBody),
    )
)]
pub(super) async fn update(
    Known(caller): Known,
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
    JsonBody(body): JsonBody<RoleChange>,
) -> ApiResult<Json<ChangedUser>> {
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
    Ok(Json(ChangedUser { user }))
}

#[derive(Serialize, ToSchema)]
pub(super) struct RemovedUser {
    removed: String,
}

/// Removes a user and ends their sessions.
#[utoipa::path(
    delete,
    path = "/api/users/{name}",
    operation_id = "remove_user",
    tag = "access",
    params(("name" = String, Path, description = "The user's name")),
    responses(
        (status = 200, body = RemovedUser),
        (status = 404, description = "no such user", body = ErrorBody),
        (status = 409, description = "the last admin cannot be removed", body = ErrorBody),
    )
)]
pub(super) async fn remove(
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
) -> ApiResult<Json<RemovedUser>> {
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
    Ok(Json(RemovedUser { removed: name }))
}

#[derive(Serialize, ToSchema)]
pub(super) struct PasswordLink {
    /// The user's name.
    user: String,
    link: String,
}

/// A new one-time link to set a local user's password (their sessions end once it is used).
#[utoipa::path(
    post,
    path = "/api/users/{name}/link",
    operation_id = "reset_user_password",
    tag = "access",
    params(("name" = String, Path, description = "The user's name")),
    responses(
        (status = 201, body = PasswordLink),
        (status = 404, description = "no such user", body = ErrorBody),
        (status = 409, description = "the user signs in through single sign-on",
            body = ErrorBody),
    )
)]
pub(super) async fn link(
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
) -> ApiResult<(StatusCode, Json<PasswordLink>)> {
    let user = name.clone();
    let secret = app.db.call(move |conn| links::reset(conn, &user)).await?;
    let link = app.link(&secret);
    Ok((StatusCode::CREATED, Json(PasswordLink { user: name, link })))
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
