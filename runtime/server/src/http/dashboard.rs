//! The dashboard: static assets embedded in the binary, `index.html` at `/` and the rest under
//! `/assets/{file}`. Plain HTML, CSS and ES modules; no build step.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::api::PathParam;
use super::api_error::{ApiError, ErrorBody};

const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const SVG: &str = "image/svg+xml";

/// The dashboard loads only its own files and may not be framed by another page (so no page
/// can overlay it and trick a click on Delete).
const POLICY: &str = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; \
    form-action 'self'; object-src 'none'";

macro_rules! asset {
    ($name:literal, $type:expr) => {
        (
            $name,
            $type,
            include_str!(concat!("../../assets/dashboard/", $name)),
        )
    };
}

/// `(file name, content type, contents)` of every file under `/assets/`.
const ASSETS: &[(&str, &str, &str)] = &[
    asset!("app.js", JS),
    asset!("lib.js", JS),
    asset!("chat.js", JS),
    asset!("agents.js", JS),
    asset!("store.js", JS),
    asset!("tasks.js", JS),
    asset!("adapters.js", JS),
    asset!("recordings.js", JS),
    asset!("shadow.js", JS),
    asset!("schedules.js", JS),
    asset!("traces.js", JS),
    asset!("settings.js", JS),
    asset!("signin.js", JS),
    asset!("access.js", JS),
    asset!("audit.js", JS),
    asset!("style.css", CSS),
    asset!("favicon.svg", SVG),
];

fn serve(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
            // Embedded files change only with the binary; revalidating is cheap on localhost.
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(POLICY),
            ),
            (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        ],
        body,
    )
        .into_response()
}

/// The dashboard's page.
#[utoipa::path(
    get,
    path = "/",
    operation_id = "dashboard",
    tag = "dashboard",
    responses((status = 200, description = "the dashboard", content_type = "text/html")),
)]
pub(super) async fn index() -> Response {
    serve(HTML, include_str!("../../assets/dashboard/index.html"))
}

/// One of the dashboard's files: its scripts, style sheet and icon.
#[utoipa::path(
    get,
    path = "/assets/{file}",
    operation_id = "dashboard_asset",
    tag = "dashboard",
    params(("file" = String, Path, description = "The file's name, such as `app.js`")),
    responses(
        (status = 200, description = "the file (JavaScript, CSS or SVG)"),
        (status = 404, description = "no such file", body = ErrorBody),
    ),
)]
pub(super) async fn asset(PathParam(file): PathParam<String>) -> Response {
    match ASSETS.iter().find(|(name, ..)| *name == file) {
        Some((_, content_type, body)) => serve(content_type, body),
        None => ApiError::new(StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}
