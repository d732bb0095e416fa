//! `/api/conversations`: chats and adapters' threads, newest first, with their messages.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::api::{Page, PathParam, QueryParams};
use super::api_error::ApiResult;
use crate::conversations;
use crate::error::Error;

#[derive(Deserialize)]
pub struct Filter {
    #[serde(flatten)]
    page: Page,
    source: Option<String>,
}

pub async fn list(
    State(app): State<AppState>,
    QueryParams(filter): QueryParams<Filter>,
) -> ApiResult<Json<Value>> {
    let (limit, offset) = filter.page.resolve(50)?;
    let source = filter.source.filter(|s| !s.is_empty());
    let (conversations, total) = app
        .db
        .call(move |conn| conversations::list(conn, source.as_deref(), limit, offset))
        .await?;
    Ok(Json(json!({
        "conversations": conversations,
        "limit": limit,
        "offset": offset,
        "total": total,
    })))
}

/// One conversation with its messages in order.
pub async fn show(
    State(app): State<AppState>,
    PathParam(id): PathParam<String>,
) -> ApiResult<Json<Value>> {
    let (conversation, messages) = app
        .db
        .call(move |conn| {
            let conversation = conversations::get(conn, &id)?.ok_or_else(|| unknown(&id))?;
            Ok((conversation, conversations::messages(conn, &id)?))
        })
        .await?;
    let mut body = json!(conversation);
    body["messages"] = json!(messages);
    Ok(Json(body))
}

pub async fn remove(
    State(app): State<AppState>,
    PathParam(id): PathParam<String>,
) -> ApiResult<Json<Value>> {
    let answer = json!({"id": id, "result": "deleted"});
    app.db
        .call(move |conn| match conversations::delete(conn, &id)? {
            true => Ok(()),
            false => Err(unknown(&id)),
        })
        .await?;
    Ok(Json(answer))
}

pub fn unknown(id: &str) -> Error {
    Error::not_found(format!("no conversation {id:?}"))
}
