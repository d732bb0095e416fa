//! `GET /api/me`: who the server takes the caller for, what its role may do, whether it asks
//! callers to sign in, and a session's anti-forgery token; open to everyone, so the dashboard
//! knows what to show.

use axum::extract::State;
use axum::{Extension, Json};
use serde_json::{Value, json};

use super::AppState;
use super::identity::AnyCaller;
use super::identity::{Caller, SessionCookie};
use crate::access::sessions;

pub(super) async fn show(
    State(app): State<AppState>,
    AnyCaller(caller): AnyCaller,
    session: Option<Extension<SessionCookie>>,
) -> Json<Value> {
    let principal = match caller {
        Caller::Known(principal) => Some(principal),
        Caller::Anonymous => None,
    };
    // The dashboard's writes carry it; only a page of this site can read this answer.
    let csrf_token = session.map(|Extension(SessionCookie(secret))| sessions::csrf_token(&secret));
    let permissions = principal.as_ref().map(|p| p.role.permissions());
    let mut answer = json!({
        "principal": principal,
        "permissions": permissions.unwrap_or_default(),
        "sign_in_required": app.access.sign_in_required(),
    });
    if let Some(token) = csrf_token {
        answer["csrf_token"] = json!(token);
    }
    // The sign-in page's button.
    if let Some(oidc) = &app.oidc {
        answer["single_sign_on"] = json!(oidc.label());
    }
    Json(answer)
}
