//! `/api/approvals`: tool calls waiting for a person, and their decisions.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::api::{JsonBody, PathParam, QueryParams};
use super::api_error::{ApiResult, ErrorBody};
use super::identity::Known;
use crate::access::Principal;
use crate::approvals::{self, Approval, Decided, Decision};
use crate::conversations;
use crate::error::Error;

const STATUSES: [&str; 4] = ["pending", "approved", "denied", "expired"];
/// Listed at most, newest first.
const LISTED: u32 = 200;
/// A note's characters at most.
const NOTE_CHARS: usize = 2_000;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(super) struct Filter {
    /// Only those of this status (empty: all).
    #[param(pattern = "^(pending|approved|denied|expired)?$")]
    status: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub(super) struct ApprovalList {
    approvals: Vec<Approval>,
}

/// Tool calls waiting for a person, and those decided: newest first, at most 200; of the
/// caller's own conversations unless they may manage every conversation.
#[utoipa::path(
    get,
    path = "/api/approvals",
    operation_id = "list_approvals",
    tag = "approvals",
    params(Filter),
    responses(
        (status = 200, body = ApprovalList),
        (status = 400, description = "an unknown status or parameter", body = ErrorBody),
    )
)]
pub(super) async fn list(
    Known(caller): Known,
    State(app): State<AppState>,
    QueryParams(filter): QueryParams<Filter>,
) -> ApiResult<Json<ApprovalList>> {
    let status = filter.status.filter(|s| !s.is_empty());
    if let Some(status) = status.as_deref().filter(|s| !STATUSES.contains(s)) {
        return Err(Error::field(
            "status",
            format!(
                "unknown status {status:?}; expected one of {}",
                STATUSES.join(", ")
            ),
        )
        .into());
    }
    let scope = caller.conversations_scope();
    let approvals = app
        .db
        .call(move |conn| approvals::list(conn, status.as_deref(), scope.as_deref(), LISTED))
        .await?;
    Ok(Json(ApprovalList { approvals }))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct DecisionBody {
    decision: Decision,
    /// Why, for the record and the model (at most 2000 characters).
    note: Option<String>,
}

/// Decides a waiting tool call, once: a second decision is a 409 and changes nothing. The run
/// goes on wherever the resumer takes it.
#[utoipa::path(
    post,
    path = "/api/approvals/{id}",
    operation_id = "decide_approval",
    tag = "approvals",
    params(("id" = String, Path, description = "The approval's id")),
    request_body = DecisionBody,
    responses(
        (status = 200, description = "decided", body = Approval),
        (status = 400, description = "a note too long", body = ErrorBody),
        (status = 403, description = "a run someone else started, and the caller may not \
            manage every conversation", body = ErrorBody),
        (status = 404, description = "no such approval", body = ErrorBody),
        (status = 409, description = "already decided, or expired", body = ErrorBody),
    )
)]
pub(super) async fn decide(
    Known(caller): Known,
    State(app): State<AppState>,
    PathParam(id): PathParam<String>,
    JsonBody(body): JsonBody<DecisionBody>,
) -> ApiResult<Json<Approval>> {
    decide_as(&app, &caller, id, body.decision, body.note)
        .await
        .map(Json)
}

/// Decides approval `id` as `caller` (who must be able to enter its conversation); the run
/// goes on wherever the resumer takes it.
pub(super) async fn decide_as(
    app: &AppState,
    caller: &Principal,
    id: String,
    decision: Decision,
    note: Option<String>,
) -> ApiResult<Approval> {
    let note = note.filter(|n| !n.trim().is_empty());
    if note
        .as_ref()
        .is_some_and(|n| n.chars().count() > NOTE_CHARS)
    {
        return Err(
            Error::field("note", format!("a note is at most {NOTE_CHARS} characters")).into(),
        );
    }
    let (wanted, caller) = (id.clone(), caller.clone());
    let decided = app
        .db
        .call(move |conn| {
            // Someone who may not enter the approval's conversation may not decide it.
            if caller.conversations_scope().is_some() {
                let started_by = match approvals::get(conn, &wanted)? {
                    Some(found) => match found.conversation_id {
                        Some(conversation) => {
                            conversations::get(conn, &conversation)?.and_then(|c| c.started_by)
                        }
                        None => None,
                    },
                    None => return Ok(Decided::Unknown),
                };
                if !caller.may_enter(started_by.as_deref()) {
                    return Err(Error::Forbidden(format!(
                        "approval {wanted:?} belongs to a run someone else started; deciding it \
                         needs the permission manage_conversations"
                    )));
                }
            }
            approvals::decide(conn, &wanted, decision, note.as_deref(), &caller.label())
        })
        .await?;
    match decided {
        Decided::Now(approval) => {
            app.approvals_decided.notify_one();
            Ok(approval)
        }
        Decided::Before(approval) => Err(Error::conflict(format!(
            "approval {:?} was already {}",
            approval.id, approval.status
        ))
        .into()),
        Decided::Unknown => Err(Error::not_found(format!("no approval {id:?}")).into()),
    }
}
