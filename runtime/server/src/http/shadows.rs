//! `/api/adapters/{name}/shadow`: how a shadow build (`adapters install --shadow`) compares
//! with the serving one: live calls it was run on, those it answered the same, and its latest
//! differences, counted by every replica. The differences hold live inputs, so only those
//! who manage adapters read them.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;

use super::AppState;
use super::api::PathParam;
use super::api_error::{ApiError, ApiResult, ErrorBody};
use super::recordings::known;
use crate::shadows::{self, Shadow};

/// An adapter's shadow build and how it compares.
#[utoipa::path(
    get,
    path = "/api/adapters/{name}/shadow",
    operation_id = "get_shadow",
    tag = "adapters",
    params(("name" = String, Path, description = "The adapter's name")),
    responses(
        (status = 200, body = Shadow),
        (status = 404, description = "no such adapter, or it has no shadow build", body = ErrorBody),
    )
)]
pub(super) async fn show(
    State(app): State<AppState>,
    PathParam(name): PathParam<String>,
) -> ApiResult<Json<Shadow>> {
    known(&app, &name)?;
    let adapter = name.clone();
    app.db
        .call(move |conn| shadows::get(conn, &adapter))
        .await?
        .map(Json)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                format!(
                    "adapter {name:?} has no shadow build (service-runtime adapters install FILE --shadow)"
                ),
            )
        })
}
