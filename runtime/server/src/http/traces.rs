//! `/api/traces`: recorded agent runs.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::AppState;
use super::api::{Page, PathParam, QueryParams};
use super::api_error::ApiResult;
use crate::db;
use crate::error::Error;
use crate::traces;

pub async fn list(
    State(app): State<AppState>,
    QueryParams(page): QueryParams<Page>,
) -> ApiResult<Json<Value>> {
    let (limit, offset) = page.resolve(50)?;
    let (traces, total) = app
        .db
        .call(move |conn| {
            Ok((
                traces::list(conn, limit, offset)?,
                db::count(conn, "traces")?,
            ))
        })
        .await?;
    Ok(Json(
        json!({ "traces": traces, "limit": limit, "offset": offset, "total": total }),
    ))
}

/// One trace with its LLM calls and tool invocations in order.
pub async fn show(
    State(app): State<AppState>,
    PathParam(id): PathParam<String>,
) -> ApiResult<Json<Value>> {
    let (trace, steps) = app
        .db
        .call(move |conn| {
            let trace = traces::get(conn, &id)?
                .ok_or_else(|| Error::not_found(format!("no trace {id:?}")))?;
            Ok((trace, traces::steps(conn, &id)?))
        })
        .await?;
    let mut body = json!(trace);
    body["steps"] = json!(steps);
    Ok(Json(body))
}
