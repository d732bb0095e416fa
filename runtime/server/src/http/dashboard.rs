//! The dashboard: static assets embedded in the binary, served at `/`.

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use super::AppState;

async fn index() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        include_str!("../../assets/dashboard/index.html"),
    )
}

pub fn router() -> Router<AppState> {
    Router::new().route("/", get(index))
}
