//! `GET /api/me`: who the server takes the caller for, what its role may do, whether it asks
//! callers to sign in, and a session's anti-forgery token; open to everyone, so the dashboard
//! knows what to show.

use axum::extract::State;
use axum::{Extension, Json};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::identity::AnyCaller;
use super::identity::{Caller, SessionCookie};
use crate::access::{Principal, sessions};

/// Who the server takes the caller for.
#[derive(Serialize, ToSchema)]
pub(super) struct Me {
    /// `null` for a caller the server does not know.
    principal: Option<Principal>,
    /// What the caller's role may do (none for a stranger).
    permissions: Vec<&'static str>,
    /// Whether a caller without a credential is refused.
    sign_in_required: bool,
    /// A session's anti-forgery token, sent back in its writes' `x-csrf-token` header.
    #[serde(skip_serializing_if = "Option::is_none")]
    csrf_token: Option<String>,
    /// The single sign-on button's label, when single sign-on is set up.
    #[serde(skip_serializing_if = "Option::is_none")]
    single_sign_on: Option<String>,
}

/// Who the server takes the caller for.
#[utoipa::path(
    get,
    path = "/api/me",
    operation_id = "me",
    tag = "access",
    responses((status = 200, body = Me))
)]
pub(super) async fn show(
    State(app): State<AppState>,
    AnyCaller(caller): AnyCaller,
    session: Option<Extension<SessionCookie>>,
) -> Json<Me> {
    let principal = match caller {
        Caller::Known(principal) => Some(principal),
        Caller::Anonymous => None,
    };
    // The dashboard's writes carry it; only a page of this site can read this answer.
    let csrf_token = session.map(|Extension(SessionCookie(secret))| sessions::csrf_token(&secret));
    let permissions = principal.as_ref().map(|p| p.role.permissions());
    Json(Me {
        principal,
        permissions: permissions.unwrap_or_default(),
        sign_in_required: app.access.sign_in_required(),
        csrf_token,
        // The sign-in page's button.
        single_sign_on: app.oidc.as_ref().map(|oidc| oidc.label().to_owned()),
    })
}
