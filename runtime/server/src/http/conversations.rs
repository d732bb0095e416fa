//! `/api/conversations`: chats and adapters' threads, newest first, with their messages.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::api::{Page, PathParam, QueryParams};
use super::api_error::ApiResult;
use super::identity::Known;
use crate::access::Principal;
use crate::conversations::{self, Conversation};
use crate::db::Conn;
use crate::error::{Error, Result};

#[derive(Deserialize)]
pub(super) struct Filter {
    #[serde(flatten)]
    page: Page,
    source: Option<String>,
}

/// Newest first; the caller's own unless they may manage every conversation.
pub(super) async fn list(
    Known(caller): Known,
    State(app): State<AppState>,
    QueryParams(filter): QueryParams<Filter>,
) -> ApiResult<Json<Value>> {
    let (limit, offset) = filter.page.resolve(50)?;
    let source = filter.source.filter(|s| !s.is_empty());
    let scope = caller.conversations_scope();
    let (conversations, total) = app
        .db
        .call(move |conn| {
            conversations::list(conn, source.as_deref(), scope.as_deref(), limit, offset)
        })
        .await?;
    Ok(Json(json!({
        "conversations": conversations,
        "limit": limit,
        "offset": offset,
        "total": total,
    })))
}

/// One conversation with its messages in order.
pub(super) async fn show(
    Known(caller): Known,
    State(app): State<AppState>,
    PathParam(id): PathParam<String>,
) -> ApiResult<Json<Value>> {
    let (conversation, messages) = app
        .db
        .call(move |conn| {
            let conversation = entered(conn, &caller, &id)?;
            Ok((conversation, conversations::messages(conn, &id)?))
        })
        .await?;
    let mut body = json!(conversation);
    body["messages"] = json!(messages);
    Ok(Json(body))
}

pub(super) async fn remove(
    Known(caller): Known,
    State(app): State<AppState>,
    PathParam(id): PathParam<String>,
) -> ApiResult<Json<Value>> {
    let answer = json!({"id": id, "result": "deleted"});
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
