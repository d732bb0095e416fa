//! `/api/conversations`: chats and adapters' threads, newest first, with their messages.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::api::{Page, PathParam, QueryParams};
use super::api_error::{ApiResult, ErrorBody};
use super::identity::Known;
use crate::access::Principal;
use crate::conversations::{self, Conversation, Message};
use crate::db::Conn;
use crate::error::{Error, Result};

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct Filter {
    #[serde(flatten)]
    #[param(ignore)]
    page: Page,
    /// Only those of this source: `chat`, or an adapter's name.
    source: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub(super) struct ConversationList {
    conversations: Vec<Conversation>,
    limit: u32,
    offset: u32,
    total: i64,
}

/// Conversations, newest first (50 by default); the caller's own unless they may manage
/// every conversation.
#[utoipa::path(
    get,
    path = "/api/conversations",
    operation_id = "list_conversations",
    tag = "conversations",
    params(Filter, Page),
    responses(
        (status = 200, body = ConversationList),
        (status = 400, description = "a limit or offset out of range; `field` names it",
            body = ErrorBody),
    )
)]
pub(super) async fn list(
    Known(caller): Known,
    State(app): State<AppState>,
    QueryParams(filter): QueryParams<Filter>,
) -> ApiResult<Json<ConversationList>> {
    let (limit, offset) = filter.page.resolve(50)?;
    let source = filter.source.filter(|s| !s.is_empty());
    let scope = caller.conversations_scope();
    let (conversations, total) = app
        .db
        .call(move |conn| {
            conversations::list(conn, source.as_deref(), scope.as_deref(), limit, offset)
        })
        .await?;
    Ok(Json(ConversationList {
        conversations,
        limit,
        offset,
        total,
    }))
}

#[derive(Serialize, ToSchema)]
pub(super) struct ConversationDetail {
    #[serde(flatten)]
    conversation: Conversation,
    messages: Vec<Message>,
}

/// One conversation with its messages in order.
#[utoipa::path(
    get,
    path = "/api/conversations/{id}",
    operation_id = "show_conversation",
    tag = "conversations",
    params(("id" = String, Path, description = "The conversation's id")),
    responses(
        (status = 200, body = ConversationDetail),
        (status = 403, description = "someone else's, and the caller may not manage every \
            conversation", body = ErrorBody),
        (status = 404, description = "no such conversation", body = ErrorBody),
    )
)]
pub(super) async fn show(
    Known(caller): Known,
    State(app): State<AppState>,
    PathParam(id): PathParam<String>,
) -> ApiResult<Json<ConversationDetail>> {
    let (conversation, messages) = app
        .db
        .call(move |conn| {
            let conversation = entered(conn, &caller, &id)?;
            Ok((conversation, conversations::messages(conn, &id)?))
        })
        .await?;
    Ok(Json(ConversationDetail {
        conversation,
        messages,
    }))
}

#[derive(Serialize, ToSchema)]
pub(super) struct DeletedConversation {
    id: String,
    /// `deleted`.
    #[schema(value_type = String, pattern = "^deleted$")]
    result: &'static str,
}

/// Deletes a conversation and its messages (its runs' traces stay).
#[utoipa::path(
    delete,
    path = "/api/conversations/{id}",
    operation_id = "delete_conversation",
    tag = "conversations",
    params(("id" = String, Path, description = "The conversation's id")),
    responses(
        (status = 200, body = DeletedConversation),
        (status = 403, description = "someone else's, and the caller may not manage every \
            conversation", body = ErrorBody),
        (status = 404, description = "no such conversation", body = ErrorBody),
    )
)]
pub(super) async fn remove(
    Known(caller): Known,
    State(app): State<AppState>,
    PathParam(id): PathParam<String>,
) -> ApiResult<Json<DeletedConversation>> {
    let answer = DeletedConversation {
        id: id.clone(),
        result: "deleted",
    };
    app.db
        .call(move |conn| {
            conn.transaction(|tx| {
                entered(tx, &caller, &id)?;
                match conversations::delete(tx, &id)? {
                    true => Ok(()),
                    false => Err(unknown(&id)),
                }
            })
        })
        .await?;
    Ok(Json(answer))
}

pub(super) fn unknown(id: &str) -> Error {
    Error::not_found(format!("no conversation {id:?}"))
}

/// The conversation `id`, when `caller` may see and act on it: 404 unknown, 403 someone
/// else's for a caller who may not manage every conversation.
pub(super) fn entered(conn: &Conn, caller: &Principal, id: &str) -> Result<Conversation> {
    let conversation = conversations::get(conn, id)?.ok_or_else(|| unknown(id))?;
    if !caller.may_enter(conversation.started_by.as_deref()) {
        return Err(Error::Forbidden(format!(
            "conversation {id:?} was started by someone else; acting on it needs the \
             permission manage_conversations"
        )));
    }
    Ok(conversation)
}
