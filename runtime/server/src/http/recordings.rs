//! `/api/adapters/{name}/recordings`: the calls a component's recording kept (`record` in its
//! grant), newest first, and one whole. They hold what platforms sent and what the component
//! did with it, people's messages included, so only those who manage adapters read them.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::api::{PathParam, QueryParams};
use super::api_error::{ApiError, ApiResult, ErrorBody};
use crate::error::Error;
use crate::recordings::{self, Recording, Summary};

const OUTCOMES: [&str; 3] = ["ok", "failed", "error"];
/// Listed at most, newest first.
const LISTED: u32 = 200;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(super) struct Filter {
    /// Only those that ended so (empty: all).
    #[param(pattern = "^(ok|failed|error)?$")]
    outcome: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub(super) struct RecordingList {
    recordings: Vec<Summary>,
}

/// 404 unless an adapter of that name is loaded.
pub(super) fn known(app: &AppState, name: &str) -> ApiResult<()> {
    match app.adapters.registry().get(name) {
        Some(_) => Ok(()),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no adapter named {name:?}"),
        )),
    }
}

/// An adapter's recorded calls, newest first, at most 200; every replica's.
#[utoipa::path(
    get,
    path = "/api/adapters/{name}/recordings",
    operation_id = "list_recordings",
    tag = "adapters",
    params(("name" = String, Path, description = "The adapter's name"), Filter),
    responses(
        (status = 200, body = RecordingList),
        (status = 400, description = "an unknown outcome or parameter", body = ErrorBody),
        (status = 404, description = "no such adapter", body = ErrorBody),
    )
)]
pub(super) async fn list(
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
    QueryParams(filter): QueryParams<Filter>,
) -> ApiResult<Json<RecordingList>> {
    let outcome = filter.outcome.filter(|o| !o.is_empty());
    if let Some(outcome) = outcome.as_deref().filter(|o| !OUTCOMES.contains(o)) {
        return Err(Error::field(
            "outcome",
            format!(
                "unknown outcome {outcome:?}; expected one of {}",
                OUTCOMES.join(", ")
            ),
        )
        .into());
    }
    known(&app, &name)?;
    let recordings = app
        .db
        .call(move |conn| recordings::list(conn, &name, outcome.as_deref(), LISTED))
        .await?;
    Ok(Json(RecordingList { recordings }))
}

/// One recorded call whole: its input, every import it made with its result, its output.
#[utoipa::path(
    get,
    path = "/api/adapters/{name}/recordings/{id}",
    operation_id = "get_recording",
    tag = "adapters",
    params(
        ("name" = String, Path, description = "The adapter's name"),
        ("id" = String, Path, description = "The recording's id"),
    ),
    responses(
        (status = 200, body = Recording),
        (status = 404, description = "no such adapter, or no such recording of it", body = ErrorBody),
    )
)]
pub(super) async fn show(
    State(app): State<AppState>,
    PathParam((name, id)): PathParam<(String, String)>,
) -> ApiResult<Json<Recording>> {
    known(&app, &name)?;
    let adapter = name.clone();
    app.db
        .call(move |conn| recordings::get(conn, Some(&adapter), &id))
        .await?
        .map(Json)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                format!("adapter {name:?} has no such recording"),
            )
        })
}
