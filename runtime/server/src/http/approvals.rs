//! `/api/approvals`: tool calls waiting for a person, and their decisions.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::api::{JsonBody, PathParam, QueryParams};
use super::api_error::ApiResult;
use super::identity::Known;
use crate::access::Principal;
use crate::approvals::{self, Decided, Decision};
use crate::conversations;
use crate::error::Error;

const STATUSES: [&str; 4] = ["pending", "approved", "denied", "expired"];
/// Listed at most, newest first.
const LISTED: u32 = 200;
/// A note's characters at most.
const NOTE_CHARS: usize = 2_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Filter {
    status: Option<String>,
}

/// `?status=pending|approved|denied|expired`; newest first, at most 200; of the caller's own
/// conversations unless they may manage every conversation.
pub(super) async fn list(
    Known(caller): Known,
    State(app): State<AppState>,
    QueryParams(filter): QueryParams<Filter>,
) -> ApiResult<Json<Value>> {
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
    Ok(Json(json!({ "approvals": approvals })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DecisionBody {
    decision: Decision,
    note: Option<String>,
}

/// Decides once: a second decision is a 409 and changes nothing.
pub(super) async fn decide(
    Known(caller): Known,
    State(app): State<AppState>,
    PathParam(id): PathParam<String>,
    JsonBody(body): JsonBody<DecisionBody>,
) -> ApiResult<Json<Value>> {
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
) -> ApiResult<Value> {
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
            Ok(json!(approval))
        }
        Decided::Before(approval) => Err(Error::conflict(format!(
            "approval {:?} was already {}",
            approval.id, approval.status
        ))
        .into()),
        Decided::Unknown => Err(Error::not_found(format!("no approval {id:?}")).into()),
    }
}
