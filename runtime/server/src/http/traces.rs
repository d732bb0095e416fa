//! `/api/traces`: recorded agent runs. What people, models and tools wrote in them is shown to
//! those who may manage every conversation and to whoever asked for the run; others (viewers,
//! members) see the runs' shape, timings and outcomes, with `content_hidden: true`.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::AppState;
use super::api::{Page, PathParam, QueryParams, content_hidden};
use super::api_error::ApiResult;
use super::identity::Known;
use crate::db;
use crate::error::Error;
use crate::traces;

pub(super) async fn list(
    Known(caller): Known,
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
    let traces: Vec<Value> = traces
        .into_iter()
        .map(
            |trace| match caller.may_enter(trace.started_by.as_deref()) {
                true => json!(trace),
                false => content_hidden(json!(trace.without_content())),
            },
        )
        .collect();
    Ok(Json(
        json!({ "traces": traces, "limit": limit, "offset": offset, "total": total }),
    ))
}

/// One trace with its LLM calls and tool invocations in order.
pub(super) async fn show(
    Known(caller): Known,
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
    let (mut body, steps) = match caller.may_enter(trace.started_by.as_deref()) {
        true => (json!(trace), steps),
        false => (
            content_hidden(json!(trace.without_content())),
            steps
                .into_iter()
                .map(traces::Step::without_content)
                .collect(),
        ),
    };
    body["steps"] = json!(steps);
    Ok(Json(body))
}
