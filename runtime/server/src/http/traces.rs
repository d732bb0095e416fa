//! `/api/traces`: recorded agent runs. What people, models and tools wrote in them is shown to
//! those who may manage every conversation and to whoever asked for the run; others (viewers,
//! members) see the runs' shape, timings and outcomes, with `content_hidden: true`.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::api::{Id, Page, PathParam, QueryParams};
use super::api_error::{ApiResult, ErrorBody};
use super::identity::Known;
use crate::access::Principal;
use crate::db;
use crate::error::Error;
use crate::traces::{self, Step, Trace};

/// A run's record as this caller may see it.
#[derive(Serialize, ToSchema)]
pub(super) struct TraceView {
    #[serde(flatten)]
    trace: Trace,
    /// Present, and `true`, when what people and models wrote is withheld from this caller
    /// (the prompt is empty, the response `null`): they may not enter the run.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    #[schema(required = false)]
    content_hidden: bool,
}

impl TraceView {
    fn for_caller(caller: &Principal, trace: Trace) -> Self {
        match caller.may_enter(trace.started_by.as_deref()) {
            true => Self {
                trace,
                content_hidden: false,
            },
            false => Self {
                trace: trace.without_content(),
                content_hidden: true,
            },
        }
    }
}

#[derive(Serialize, ToSchema)]
pub(super) struct TraceList {
    traces: Vec<TraceView>,
    limit: u32,
    offset: u32,
    total: i64,
}

/// A run's record with its model calls and tool invocations, in order.
#[derive(Serialize, ToSchema)]
pub(super) struct TraceDetail {
    #[serde(flatten)]
    view: TraceView,
    steps: Vec<Step>,
}

/// Recorded agent runs, newest first.
#[utoipa::path(
    get,
    path = "/api/traces",
    operation_id = "list_traces",
    tag = "traces",
    params(Page),
    responses(
        (status = 200, body = TraceList),
        (status = 400, description = "a limit or offset out of range; `field` names it",
            body = ErrorBody),
    )
)]
pub(super) async fn list(
    Known(caller): Known,
    State(app): State<AppState>,
    QueryParams(page): QueryParams<Page>,
) -> ApiResult<Json<TraceList>> {
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
    let traces = traces
        .into_iter()
        .map(|trace| TraceView::for_caller(&caller, trace))
        .collect();
    Ok(Json(TraceList {
        traces,
        limit,
        offset,
        total,
    }))
}

/// One trace with its LLM calls and tool invocations in order.
#[utoipa::path(
    get,
    path = "/api/traces/{id}",
    operation_id = "show_trace",
    tag = "traces",
    params(Id),
    responses(
        (status = 200, body = TraceDetail),
        (status = 404, description = "no such trace", body = ErrorBody),
    )
)]
pub(super) async fn show(
    Known(caller): Known,
    State(app): State<AppState>,
    PathParam(Id { id }): PathParam<Id>,
) -> ApiResult<Json<TraceDetail>> {
    let (trace, steps) = app
        .db
        .call(move |conn| {
            let trace = traces::get(conn, &id)?
                .ok_or_else(|| Error::not_found(format!("no trace {id:?}")))?;
            Ok((trace, traces::steps(conn, &id)?))
        })
        .await?;
    let view = TraceView::for_caller(&caller, trace);
    let steps = match view.content_hidden {
        false => steps,
        true => steps.into_iter().map(Step::without_content).collect(),
    };
    Ok(Json(TraceDetail { view, steps }))
}
