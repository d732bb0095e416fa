//! Who a request comes from ([`identify`], on every request) and whether they may call the
//! route ([`require`], the one check, declared with each route in `routes`).

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::api_error::ApiError;
use super::guards::is_component_route;
use super::{audit, mcp, metrics};
pub use crate::access::Caller;
use crate::access::{self, Permission, Principal, Role, credential, sessions};

/// The session cookie a request came with, when it named someone (for sign-out and the
/// dashboard's anti-forgery token).
#[derive(Debug, Clone)]
pub struct SessionCookie(pub String);

/// The header a write made with a session cookie carries: the session's anti-forgery token.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// Names the caller of every request from its credential: an API token or a shared token
/// as `Authorization: Bearer`, else a session cookie; without either, this machine's user in
/// local mode. A bearer credential that names no one is refused here (401), whatever the
/// route; a cookie that does not is ignored (the sign-in page must stay reachable), so
/// routes that need someone answer 401.
pub async fn identify(
    State(app): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    mut request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path();
    // Platforms authenticate to adapters with their own headers, `Authorization` included.
    let caller = if is_component_route(path) {
        Caller::Anonymous
    } else {
        let shared = shared_token(path);
        let shared_value = shared.and_then(|(variable, _)| app.env.get(variable));
        match request.headers().get(header::AUTHORIZATION) {
            Some(value) => {
                let Some(secret) = value.to_str().ok().and_then(|v| v.strip_prefix("Bearer "))
                else {
                    audit::write(&app, None, "credential refused", path, 401, peer);
                    return unauthorized("send an API token as Authorization: Bearer <token>");
                };
                match (shared, shared_value) {
                    (Some((variable, role)), Some(expected))
                        if access::same(
                            &credential::digest(secret),
                            &credential::digest(&expected),
                        ) =>
                    {
                        Caller::Known(Principal::shared(variable, role))
                    }
                    _ => match app.access.bearer(secret.trim()).await {
                        Ok(principal) => Caller::Known(principal),
                        Err(refused) => {
                            audit::write(&app, None, "credential refused", path, 401, peer);
                            return unauthorized(refused.0);
                        }
                    },
                }
            }
            // With its shared token set, an endpoint wants it (or an API token) from
            // everyone, this machine included.
            None if shared_value.is_some() => Caller::Anonymous,
            None if let Some(secret) = cookie(request.headers(), sessions::COOKIE) => {
                match app.access.session(&secret).await {
                    Ok(principal) => {
                        let writes = !matches!(
                            *request.method(),
                            Method::GET | Method::HEAD | Method::OPTIONS
                        );
                        let token = request
                            .headers()
                            .get(CSRF_HEADER)
                            .and_then(|v| v.to_str().ok())
                            .unwrap_or_default();
                        if writes && !access::same(token, &sessions::csrf_token(&secret)) {
                            audit::write(
                                &app,
                                Some(&principal),
                                "forgery refused",
                                path,
                                403,
                                peer,
                            );
                            return ApiError::new(
                                StatusCode::FORBIDDEN,
                                "a write made with a session cookie needs the session's \
                                 anti-forgery token in the X-CSRF-Token header (the sign-in \
                                 answer and GET /api/me give it)",
                            )
                            .into_response();
                        }
                        request.extensions_mut().insert(SessionCookie(secret));
                        Caller::Known(principal)
                    }
                    Err(_) => Caller::Anonymous,
                }
            }
            None if !app.access.sign_in_required() && peer.ip().to_canonical().is_loopback() => {
                Caller::Known(Principal::owner())
            }
            None => Caller::Anonymous,
        }
    };
    request.extensions_mut().insert(caller);
    next.run(request).await
}

/// The value of the cookie `name`.
pub fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.to_owned())
        .filter(|value| !value.is_empty())
}

/// The shared token an endpoint takes besides API tokens, and the role it gives.
fn shared_token(path: &str) -> Option<(&'static str, Role)> {
    if path == "/mcp" || path.starts_with("/mcp/") {
        Some((mcp::TOKEN_VARIABLE, Role::Member))
    } else if path == "/metrics" {
        Some((metrics::TOKEN_VARIABLE, Role::Viewer))
    } else {
        None
    }
}

/// Lets the request through when its caller holds `permission`.
pub async fn require(permission: Permission, request: Request, next: Next) -> Response {
    if permission == Permission::Open {
        return next.run(request).await;
    }
    match request.extensions().get::<Caller>() {
        Some(Caller::Known(principal)) if principal.may(permission) => next.run(request).await,
        Some(Caller::Known(principal)) => forbidden(principal, permission).into_response(),
        _ => unauthorized("sign in, or send an API token as Authorization: Bearer <token>"),
    }
}

/// The role named `text` (the field `role`), when `caller` may give it: nobody hands out more
/// than they hold.
pub fn role_to_give(caller: &Principal, text: &str) -> Result<Role, ApiError> {
    let role = Role::parse(text, "role")?;
    if role > caller.role {
        return Err(forbidden(caller, Permission::ManageAccess));
    }
    Ok(role)
}

pub fn forbidden(principal: &Principal, permission: Permission) -> ApiError {
    let least = permission.least_role().unwrap_or(Role::Viewer);
    ApiError::new(
        StatusCode::FORBIDDEN,
        format!(
            "this needs the permission {} (role {least} or above); {} has the role {}",
            permission.as_str(),
            principal.label(),
            principal.role
        ),
    )
}

fn unauthorized(message: &str) -> Response {
    let mut response = ApiError::new(StatusCode::UNAUTHORIZED, message).into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// The caller of a route that needs someone (any route but an open one), as a handler takes
/// it: `Known(caller): Known`.
pub struct Known(pub Principal);

impl<S: Send + Sync> FromRequestParts<S> for Known {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Response> {
        match parts.extensions.get::<Caller>() {
            Some(Caller::Known(principal)) => Ok(Self(principal.clone())),
            _ => Err(unauthorized("sign in, or send an API token")),
        }
    }
}

/// The caller of an open route, if any: `AnyCaller(caller): AnyCaller`.
pub struct AnyCaller(pub Caller);

impl<S: Send + Sync> FromRequestParts<S> for AnyCaller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self(
            parts
                .extensions
                .get::<Caller>()
                .cloned()
                .unwrap_or(Caller::Anonymous),
        ))
    }
}
