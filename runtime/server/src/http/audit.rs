//! `/api/audit` (admins): the audit log, and the layer that writes it: every request that may
//! change state (any method but GET, HEAD and OPTIONS) on a route of the server, adapters'
//! platform routes aside (platforms, not people, call them), with its answer's status.

use std::net::SocketAddr;

use axum::Json;
use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::api::{Page, QueryParams};
use super::api_error::{ApiResult, ErrorBody};
use super::guards::is_component_route;
use super::identity::Caller;
use crate::access::Principal;
use crate::access::audit::{self, Entry, Event, Filter};

/// Put on an answer by a handler that learns who its caller is while answering (a sign-in):
/// the audit entry names them and `target` instead of the anonymous request.
#[derive(Debug, Clone)]
pub(super) struct AnsweredFor {
    pub principal: Option<Principal>,
    pub target: String,
}

impl AnsweredFor {
    /// An answer to someone still unknown, about `target` (a refused sign-in names the
    /// account tried).
    pub(super) fn target(target: String) -> Self {
        Self {
            principal: None,
            target,
        }
    }
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct AuditQuery {
    /// Only entries of this principal (`owner`, `token:<name>`, `user:<name>`, ...).
    principal: Option<String>,
    /// Only entries of this action (`PATCH /api/agents/{name}`, `credential refused`).
    action: Option<String>,
    #[serde(flatten)]
    #[param(ignore)]
    page: Page,
}

#[derive(Serialize, ToSchema)]
pub(super) struct AuditList {
    entries: Vec<Entry>,
    limit: u32,
    offset: u32,
    total: i64,
}

/// The audit log, newest first (100 entries by default).
#[utoipa::path(
    get,
    path = "/api/audit",
    operation_id = "list_audit",
    tag = "access",
    params(AuditQuery, Page),
    responses(
        (status = 200, body = AuditList),
        (status = 400, description = "a limit or offset out of range; `field` names it",
            body = ErrorBody),
    )
)]
pub(super) async fn list(
    State(app): State<AppState>,
    QueryParams(query): QueryParams<AuditQuery>,
) -> ApiResult<Json<AuditList>> {
    let (limit, offset) = query.page.resolve(100)?;
    let filter = Filter {
        principal: query.principal.filter(|p| !p.is_empty()),
        action: query.action.filter(|a| !a.is_empty()),
    };
    let (entries, total) = app
        .db
        .call(move |conn| audit::list(conn, &filter, limit, offset))
        .await?;
    Ok(Json(AuditList {
        entries,
        limit,
        offset,
        total,
    }))
}

/// Records the request once it is answered.
pub(super) async fn record(
    State(app): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    route: Option<MatchedPath>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_owned();
    if matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    ) || is_component_route(&path)
    {
        return next.run(request).await;
    }
    let action = format!(
        "{} {}",
        request.method(),
        route.as_ref().map_or(path.as_str(), MatchedPath::as_str)
    );
    let principal = match request.extensions().get::<Caller>() {
        Some(Caller::Known(principal)) => Some(principal.clone()),
        _ => None,
    };
    let response = next.run(request).await;
    let (principal, target) = match response.extensions().get::<AnsweredFor>() {
        Some(answered) => (
            answered.principal.clone().or(principal),
            answered.target.clone(),
        ),
        None => (principal, path),
    };
    write(
        &app,
        principal.as_ref(),
        &action,
        &target,
        response.status().as_u16(),
        peer,
    );
    response
}

/// Writes an entry after the answer, so recording never holds a request; a failed write is a
/// warning in the log.
pub(super) fn write(
    app: &AppState,
    principal: Option<&Principal>,
    action: &str,
    target: &str,
    status: u16,
    peer: SocketAddr,
) {
    let (principal, action, target) = (principal.cloned(), action.to_owned(), target.to_owned());
    let (peer, replica) = (peer.ip().to_canonical().to_string(), app.replica.clone());
    let at_ms = crate::db::now_ms();
    let db = app.db.clone();
    tokio::spawn(async move {
        let written = db
            .call(move |conn| {
                audit::record(
                    conn,
                    &Event {
                        at_ms,
                        principal: principal.as_ref(),
                        action: &action,
                        target: &target,
                        status,
                        peer: &peer,
                        replica: &replica,
                    },
                )
            })
            .await;
        if let Err(e) = written {
            tracing::warn!("cannot write an audit entry: {e}");
        }
    });
}
