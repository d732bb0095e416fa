//! `GET /api/schedules`: schedules, read-only (they are managed with the CLI).

use axum::Json;
use axum::extract::State;
use chrono::Utc;
use serde_json::{Value, json};

use super::AppState;
use super::api_error::ApiResult;
use crate::scheduler::{plan, store};

pub async fn list(State(app): State<AppState>) -> ApiResult<Json<Value>> {
    let schedules = app.db.call(|conn| store::list(conn)).await?;
    let now = Utc::now();
    let schedules: Vec<Value> = schedules
        .into_iter()
        .map(|schedule| {
            let human = schedule
                .next_run_at
                .as_deref()
                .and_then(store::parse_timestamp)
                .filter(|_| schedule.enabled)
                .map(|next| plan::describe_next(next, now));
            let mut value = json!(schedule);
            value["next_run_human"] = json!(human);
            value
        })
        .collect();
    Ok(Json(json!({ "schedules": schedules })))
}
