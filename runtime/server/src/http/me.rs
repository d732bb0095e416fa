//! `GET /api/me`: who the server takes the caller for, and whether it asks callers to sign
//! in; open to everyone, so the dashboard knows what to show.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::AppState;
use super::identity::Caller;

pub async fn show(State(app): State<AppState>, caller: Caller) -> Json<Value> {
    let principal = match caller {
        Caller::Known(principal) => Some(principal),
        Caller::Anonymous => None,
    };
    Json(json!({
        "principal": principal,
        "sign_in_required": app.access.sign_in_required(),
    }))
}
