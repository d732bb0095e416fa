//! What the supervisor runs: a native adapter or a loaded component, behind one small trait.

use std::any::Any;

use futures_util::future::BoxFuture;
use service_contract::{
    AdapterEntry, AdapterError, ConfigProblem, HttpRequest, HttpResponse, Route,
};

/// Why an adapter did not answer a request.
#[derive(Debug, Clone)]
pub enum CallError {
    /// It failed; the failure goes on its registry entry.
    Failed(AdapterError),
    /// It has no capacity now (all its instances are busy): 503, nothing recorded.
    Busy(String),
}

pub trait Managed: Any + Send + Sync {
    fn name(&self) -> &str;
    /// Fills in what it knows of its registry entry: kind, version, capabilities, metadata,
    /// whether it can be toggled.
    fn describe(&self, entry: &mut AdapterEntry);
    /// Whether it has both `start` and `stop`, so it can be enabled and disabled.
    fn toggleable(&self) -> bool;
    /// Its `start` hook; `Ok` when it has none.
    fn start(&self) -> BoxFuture<'_, Result<(), AdapterError>>;
    /// Its `stop` hook; `Ok` when it has none.
    fn stop(&self) -> BoxFuture<'_, Result<(), AdapterError>>;
    /// Answers a request to one of its routes (404 for a path it did not declare).
    fn handle_http(&self, request: HttpRequest) -> BoxFuture<'_, Result<HttpResponse, CallError>>;
    /// A problem with its settings it can tell without running (unset required secrets).
    fn config_problem(&self) -> Option<ConfigProblem> {
        None
    }
    /// The settings it depends on: writing one starts it anew.
    fn settings(&self) -> Vec<String>;
}

/// A JSON error answer, as every API error is.
/// The answer to a request no route takes: 405 with `Allow` when routes serve its path with
/// other methods, 404 otherwise.
pub(crate) fn no_route<'a>(
    routes: impl Iterator<Item = &'a Route>,
    request: &HttpRequest,
) -> HttpResponse {
    let mut allowed: Vec<&str> = routes
        .filter(|route| route.covers(&request.path))
        .map(|route| route.method.as_str())
        .collect();
    allowed.sort_unstable();
    allowed.dedup();
    if allowed.is_empty() {
        return json_error(
            404,
            &format!("no route {} {}", request.method, request.path),
        );
    }
    let allow = allowed.join(", ");
    let mut answer = json_error(
        405,
        &format!(
            "{} {} is served for {allow} only",
            request.method, request.path
        ),
    );
    answer.headers.push(("allow".into(), allow));
    answer
}

pub(crate) fn json_error(status: u16, message: &str) -> HttpResponse {
    HttpResponse {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
        body: serde_json::json!({ "error": message })
            .to_string()
            .into_bytes(),
    }
}
