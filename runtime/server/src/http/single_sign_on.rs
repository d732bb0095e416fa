//! `/api/session/oidc`: signing in through the OpenID provider of `[auth.oidc]`. The start
//! sends the browser to the provider with a `state` also set in a cookie of this browser; the
//! callback takes that sign-in once, checks what the provider sends back, makes or updates the
//! person with the role their groups map to, and sends the browser on with a session. Both are
//! open routes (the browser is nobody yet); every outcome of a callback is audited.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::IntoParams;

use super::AppState;
use super::api::QueryParams;
use super::api_error::{ApiError, ApiResult, ErrorBody};
use super::audit;
use super::identity::cookie;
use super::session;
use crate::access::single_sign_on::{
    self, CALLBACK_PATH, FLOW_COOKIE, FLOW_LIFE, OidcSection, Provider, check_next,
};
use crate::access::{self, Principal, users};
use crate::error::Error;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(super) struct Start {
    /// A path on this server to land on once signed in: default `/`.
    next: Option<String>,
}

fn configured(app: &AppState) -> ApiResult<&OidcSection> {
    app.oidc.as_deref().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "single sign-on is not configured on this server ([auth.oidc] in config.toml)",
        )
    })
}

fn provider<'a>(app: &'a AppState, config: &'a OidcSection) -> Provider<'a> {
    Provider {
        config,
        secret: app.env.get(single_sign_on::SECRET_VARIABLE),
        redirect: format!("{}{CALLBACK_PATH}", app.public_url),
        http: &app.no_redirects,
    }
}

fn see_other(location: &str) -> ApiResult<Response> {
    let location = header::HeaderValue::from_str(location)
        .map_err(|e| ApiError::from(Error::Internal(e.into())))?;
    Ok((StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response())
}

/// Starts a sign-in at the identity provider: sends the browser there.
#[utoipa::path(
    get,
    path = "/api/session/oidc",
    operation_id = "single_sign_on",
    tag = "access",
    params(Start),
    responses(
        (status = 303, description = "to the identity provider", headers(("location" = String))),
        (status = 400, description = "`next` is not a path on this server", body = ErrorBody),
        (status = 404, description = "single sign-on is not configured", body = ErrorBody),
        (status = 429, description = "too many sign-in attempts from this address",
            body = ErrorBody),
        (status = 503, description = "the identity provider cannot be reached",
            body = ErrorBody),
    )
)]
pub(super) async fn start(
    State(app): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    QueryParams(query): QueryParams<Start>,
) -> ApiResult<Response> {
    let config = configured(&app)?;
    let next = check_next(query.next.as_deref().unwrap_or("/"))?;
    // Each start asks the provider and keeps a row for ten minutes: it counts against the
    // address's sign-in attempts, so nobody can make the server do either without bound.
    if let Err(wait) = app.access.spend_sign_in(None, peer.ip()).await? {
        return Ok(session::too_many_sign_ins(wait));
    }
    let (begun, flow) = provider(&app, config).begin(next).await?;
    let state = begun.state.clone();
    app.db
        .call(move |conn| single_sign_on::keep(conn, &state, &flow))
        .await?;
    let mut response = see_other(&begun.url)?;
    response.headers_mut().insert(
        header::SET_COOKIE,
        session::cookie_header(
            &app,
            &headers,
            &format!("{FLOW_COOKIE}={}; Path=/api/session/oidc", begun.state),
            FLOW_LIFE.num_seconds(),
        )?,
    );
    Ok(response)
}

/// What the identity provider sends the browser back with.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// Where the identity provider sends the browser back: signs in and sends it on to `next`.
#[utoipa::path(
    get,
    path = "/api/session/oidc/callback",
    operation_id = "single_sign_on_callback",
    tag = "access",
    params(Callback),
    responses(
        (status = 303, description = "signed in, on to `next`", headers(("location" = String),
            ("set-cookie" = String, description = "The session's cookie"))),
        (status = 400, description = "no code or state", body = ErrorBody),
        (status = 401, description = "the provider refused, or the sign-in is not this \
            browser's, unknown, used or expired", body = ErrorBody),
        (status = 403, description = "none of the person's groups has a role here",
            body = ErrorBody),
        (status = 404, description = "single sign-on is not configured", body = ErrorBody),
        (status = 503, description = "the identity provider cannot be reached",
            body = ErrorBody),
    )
)]
pub(super) async fn callback(
    State(app): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    QueryParams(query): QueryParams<Callback>,
) -> ApiResult<Response> {
    let outcome = finish(&app, &headers, query).await;
    let (principal, status) = match &outcome {
        Ok((principal, _)) => (Some(principal), StatusCode::SEE_OTHER),
        Err(refusal) => (None, refusal.status()),
    };
    audit::write(
        &app,
        principal,
        "single sign-on",
        CALLBACK_PATH,
        status.as_u16(),
        peer,
    );
    outcome.map(|(_, response)| response)
}

async fn finish(
    app: &AppState,
    headers: &HeaderMap,
    query: Callback,
) -> ApiResult<(Principal, Response)> {
    let config = configured(app)?;
    let refused = |message: String| ApiError::new(StatusCode::UNAUTHORIZED, message);
    if let Some(error) = query.error {
        let detail = query.error_description.unwrap_or_default();
        return Err(refused(format!(
            "the identity provider refused the sign-in: {error} {detail}"
        )));
    }
    let (Some(code), Some(state)) = (query.code, query.state) else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "the callback needs the provider's code and state",
        ));
    };
    // The state must come back to the browser that started the sign-in.
    let started_here = cookie(headers, FLOW_COOKIE).is_some_and(|kept| access::same(&kept, &state));
    if !started_here {
        return Err(refused(
            "this sign-in was not started in this browser (its state does not match); start again"
                .into(),
        ));
    }
    let flow = app
        .db
        .call(move |conn| single_sign_on::take(conn, &state))
        .await?
        .ok_or_else(|| refused("this sign-in is unknown, used or expired; start again".into()))?;
    let next = flow.next.clone();
    let identity = provider(app, config)
        .finish(code, flow)
        .await
        .map_err(|e| match e {
            Error::Forbidden(message) => refused(message),
            e => e.into(),
        })?;
    let role = config.role_for(&identity.groups).ok_or_else(|| {
        ApiError::new(
            StatusCode::FORBIDDEN,
            format!(
                "{} signed in, but none of their groups ({}) has a role here ([auth.oidc] roles)",
                identity.name,
                identity.groups.join(", ")
            ),
        )
    })?;
    let name = identity.name.clone();
    app.db
        .call(move |conn| {
            users::from_provider(conn, &identity.subject, &name, role, &identity.groups)
        })
        .await?;
    let (_, user, set_cookie) = session::start(app, headers, identity.name).await?;
    let mut response = see_other(&next)?;
    let cleared = session::cookie_header(
        app,
        headers,
        &format!("{FLOW_COOKIE}=; Path=/api/session/oidc"),
        0,
    )?;
    response
        .headers_mut()
        .append(header::SET_COOKIE, set_cookie);
    response.headers_mut().append(header::SET_COOKIE, cleared);
    Ok((Principal::user(user), response))
}
