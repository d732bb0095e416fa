//! Routes that start agent runs spend the caller's budget (`[auth] runs_per_minute`) once the
//! permission is checked: past it, 429 with `Retry-After`. Every POST to `/mcp` counts, since
//! any may call an agent.

use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::api_error::ApiError;
use super::identity::Caller;

/// Spends one run of the caller's budget, or answers 429 past it.
pub(super) async fn spend(State(app): State<AppState>, request: Request, next: Next) -> Response {
    let principal = match request.extensions().get::<Caller>() {
        Some(Caller::Known(principal)) if request.method() == Method::POST => principal.clone(),
        _ => return next.run(request).await,
    };
    match app.access.spend_run(&principal).await {
        Ok(Ok(())) => next.run(request).await,
        Ok(Err(wait)) => ApiError::too_many(
            format!(
                "{} started {} agent runs this minute, the most [auth] runs_per_minute \
                 allows; try again in {wait} s",
                principal.label(),
                app.access.runs_per_minute()
            ),
            wait,
        ),
        Err(e) => ApiError::from(e).into_response(),
    }
}
