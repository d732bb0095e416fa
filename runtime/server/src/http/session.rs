//! `/api/session`: signing in (a local account's name and password, or a one-time link that
//! sets the password first) and signing out. Open routes: who the caller is is only known
//! once the password or the link checks; the audit entry then names them.

use std::net::SocketAddr;

use axum::Json;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::AppState;
use super::api::JsonBody;
use super::api_error::{ApiError, ApiResult, ErrorBody};
use super::audit::AnsweredFor;
use super::identity::{SessionCookie, cookie};
use crate::access::links::{self, Link};
use crate::access::sessions::{self, COOKIE};
use crate::access::{Principal, Role, passwords, users};
use crate::error::Error;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SignIn {
    name: String,
    password: String,
}

/// A session begun: its user, and the anti-forgery token its writes send in `x-csrf-token`.
/// The session itself is the cookie set with it.
#[derive(Serialize, ToSchema)]
pub(super) struct SignedIn {
    user: users::User,
    csrf_token: String,
}

/// Signs in with a local account's name and password, and sets the session cookie.
#[utoipa::path(
    post,
    path = "/api/session",
    operation_id = "sign_in",
    tag = "access",
    request_body = SignIn,
    responses(
        (status = 200, body = SignedIn, headers(("set-cookie" = String,
            description = "The session's cookie: HttpOnly, SameSite=Lax"))),
        (status = 401, description = "wrong name or password", body = ErrorBody),
        (status = 429, description = "too many attempts for this account or from this \
            address; `retry-after` says when to try again", body = ErrorBody),
    )
)]
pub(super) async fn create(
    State(app): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<SignIn>,
) -> ApiResult<Response> {
    let name = body.name.trim().to_owned();
    let attempted = AnsweredFor::target(format!("/api/session ({name})"));
    if let Err(wait) = app.access.spend_sign_in(Some(&name), peer.ip()).await? {
        let mut response = too_many_sign_ins(wait);
        response.extensions_mut().insert(attempted);
        return Ok(response);
    }
    let stored = {
        let name = name.clone();
        app.db
            .call(move |conn| users::password_hash(conn, &name))
            .await?
    };
    let password = body.password;
    let matches = tokio::task::spawn_blocking(move || match stored {
        Some(stored) => passwords::verify(&password, &stored),
        None => {
            passwords::verify_nothing(&password);
            false
        }
    })
    .await
    .map_err(|e| Error::Internal(e.into()))?;
    if !matches {
        let mut response =
            ApiError::new(StatusCode::UNAUTHORIZED, "wrong name or password").into_response();
        response.extensions_mut().insert(attempted);
        return Ok(response);
    }
    signed_in(&app, &headers, name).await
}

/// The 429 past `[auth]`'s sign-in limits.
pub(super) fn too_many_sign_ins(wait: u64) -> Response {
    ApiError::too_many(
        format!(
            "too many sign-in attempts for this account or from this address; try again in \
             {wait} s"
        ),
        wait,
    )
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct WithLink {
    /// The secret after `#link=` in the link.
    link: String,
    /// The first admin's name (a password link is for its own user).
    name: Option<String>,
    password: String,
}

/// Sets a password with a one-time link (creating the first admin with a first-admin link),
/// then signs in as its user.
#[utoipa::path(
    post,
    path = "/api/session/link",
    operation_id = "sign_in_with_link",
    tag = "access",
    request_body = WithLink,
    responses(
        (status = 200, body = SignedIn, headers(("set-cookie" = String,
            description = "The session's cookie: HttpOnly, SameSite=Lax"))),
        (status = 400, description = "a password too short or too long, or a name \
            refused; `field` names it", body = ErrorBody),
        (status = 401, description = "the link is unknown, used or expired", body = ErrorBody),
        (status = 409, description = "the first admin's name is taken", body = ErrorBody),
    )
)]
pub(super) async fn with_link(
    State(app): State<AppState>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<WithLink>,
) -> ApiResult<Response> {
    passwords::check(&body.password)?;
    let first_name = body.name.map(|name| name.trim().to_owned());
    if let Some(name) = &first_name {
        users::check_name(name)?;
    }
    let password = body.password;
    let hash = tokio::task::spawn_blocking(move || passwords::hash(&password))
        .await
        .map_err(|e| Error::Internal(e.into()))??;
    let secret = body.link;
    let user = app
        .db
        .call(move |conn| {
            conn.transaction(|conn| {
                let name = match links::take(conn, &secret)? {
                    None => return Ok(None),
                    Some(Link::FirstAdmin) => {
                        let name = first_name.ok_or_else(|| {
                            Error::field("name", "name: the first admin needs a name")
                        })?;
                        users::add(conn, &name, Role::Admin, "first-admin link")?;
                        name
                    }
                    Some(Link::Password(user)) => user,
                };
                users::set_password(conn, &name, &hash)?;
                // A new password ends the sessions made with the old one.
                sessions::end_all(conn, &name)?;
                Ok(Some(name))
            })
        })
        .await?;
    let Some(user) = user else {
        let mut response = ApiError::new(
            StatusCode::UNAUTHORIZED,
            "the link is not valid: unknown, already used or expired; ask an admin for a new one",
        )
        .into_response();
        response
            .extensions_mut()
            .insert(AnsweredFor::target("/api/session/link".into()));
        return Ok(response);
    };
    app.access.forget();
    signed_in(&app, &headers, user).await
}

/// Starts a session for `name` and answers with its cookie.
async fn signed_in(app: &AppState, headers: &HeaderMap, name: String) -> ApiResult<Response> {
    let (secret, user, set_cookie) = start(app, headers, name).await?;
    let principal = Principal::user(user.clone());
    let mut response = Json(SignedIn {
        user,
        csrf_token: sessions::csrf_token(&secret),
    })
    .into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, set_cookie);
    response.extensions_mut().insert(AnsweredFor {
        principal: Some(principal),
        target: "/api/session".into(),
    });
    Ok(response)
}

/// Starts a session for `name`, ending the one the request came with (a session id is never
/// carried across a sign-in): its secret, the user, and the `Set-Cookie` to answer with.
pub(super) async fn start(
    app: &AppState,
    headers: &HeaderMap,
    name: String,
) -> ApiResult<(String, users::User, HeaderValue)> {
    let old = cookie(headers, COOKIE);
    let ends_one = old.is_some();
    let lives = app.access.session_lives();
    let (secret, user) = app
        .db
        .call(move |conn| {
            if let Some(old) = old {
                sessions::end(conn, &old)?;
            }
            let secret = sessions::start(conn, &name, lives)?;
            Ok((secret, users::get(conn, &name)?))
        })
        .await?;
    if ends_one {
        app.access.forget();
    }
    let set_cookie = cookie_header(
        app,
        headers,
        &format!("{COOKIE}={secret}; Path=/"),
        lives.absolute.num_seconds(),
    )?;
    Ok((secret, user, set_cookie))
}

#[derive(Serialize, ToSchema)]
pub(super) struct SignedOut {
    /// Whether the request came with a live session, now ended.
    signed_out: bool,
}

/// Signs out: the session is refused on every replica within a second, and its cookie is
/// cleared.
#[utoipa::path(
    delete,
    path = "/api/session",
    operation_id = "sign_out",
    tag = "access",
    responses((status = 200, body = SignedOut))
)]
pub(super) async fn remove(
    State(app): State<AppState>,
    headers: HeaderMap,
    session: Option<axum::Extension<SessionCookie>>,
) -> ApiResult<Response> {
    // Without a live session there is nothing to end; the cookie is cleared all the same.
    let signed_out = match session {
        Some(axum::Extension(SessionCookie(secret))) => {
            app.db
                .call(move |conn| sessions::end(conn, &secret))
                .await?;
            app.access.forget();
            true
        }
        None => false,
    };
    let mut response = Json(SignedOut { signed_out }).into_response();
    response.headers_mut().insert(
        header::SET_COOKIE,
        cookie_header(&app, &headers, &format!("{COOKIE}=; Path=/"), 0)?,
    );
    Ok(response)
}

/// A `Set-Cookie` of `name=value; Path=...`: never readable by scripts, not sent by other
/// sites' forms, and only over https when the server is reached over https.
pub(super) fn cookie_header(
    app: &AppState,
    headers: &HeaderMap,
    name_value_path: &str,
    max_age: i64,
) -> ApiResult<HeaderValue> {
    let https = app.public_url.starts_with("https:")
        || headers
            .get("x-forwarded-proto")
            .is_some_and(|proto| proto.as_bytes().eq_ignore_ascii_case(b"https"));
    let secure = if https { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{name_value_path}; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}"
    ))
    .map_err(|e| Error::Internal(e.into()).into())
}
