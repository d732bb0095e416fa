//! `search_notes`, `create_note`, `append_note`.

use serde::Deserialize;
use serde_json::json;

use service_contract::tools::{RegistryError, Tool, ToolRegistry, args};

use crate::db::Db;
use crate::notes;

#[derive(Deserialize)]
struct Search {
    query: String,
    limit: Option<u32>,
}

#[derive(Deserialize)]
struct Create {
    title: String,
    #[serde(default)]
    body: String,
}

#[derive(Deserialize)]
struct Append {
    id: i64,
    text: String,
}

pub(super) fn register(registry: &ToolRegistry, db: &Db) -> Result<(), RegistryError> {
    registry.register(
        Tool::new(
            "search_notes",
            "Full-text search over the user's notes. Returns the best matches with their id, \
             title and a snippet.",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "description": "Words to look for"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 20, "description": "At most this many results (default 5)"}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
            {
                let db = db.clone();
                move |input, _| {
                    let db = db.clone();
                    async move {
                let Search { query, limit } = args(input)?;
                let hits = db
                    .call(move |conn| notes::search(conn, &query, limit.unwrap_or(5)))
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(json!({ "results": hits }).to_string())
                    }
                }
            },
        ),
        false,
    )?;
    registry.register(
        Tool::new(
            "create_note",
            "Saves a new note. Returns its id.",
            json!({
                "type": "object",
                "properties": {
                    "title": {"type": "string", "minLength": 1, "maxLength": 200},
                    "body": {"type": "string", "maxLength": 100000}
                },
                "required": ["title"],
                "additionalProperties": false
            }),
            {
                let db = db.clone();
                move |input, _| {
                    let db = db.clone();
                    async move {
                        let Create { title, body } = args(input)?;
                        let note = db
                            .call(move |conn| notes::create(conn, &title, &body))
                            .await
                            .map_err(|e| e.to_string())?;
                        Ok(json!({ "id": note.id, "title": note.title }).to_string())
                    }
                }
            },
        )
        .writing(),
        false,
    )?;
    registry.register(
        Tool::new(
            "append_note",
            "Appends text on a new line at the end of an existing note (found with search_notes).",
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "integer", "description": "The note's id"},
                    "text": {"type": "string", "minLength": 1, "maxLength": 100000}
                },
                "required": ["id", "text"],
                "additionalProperties": false
            }),
            {
                let db = db.clone();
                move |input, _| {
                    let db = db.clone();
                    async move {
                let Append { id, text } = args(input)?;
                let note = db
                    .call(move |conn| notes::append(conn, id, &text))
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(json!({ "id": note.id, "title": note.title, "length": note.body.chars().count() }).to_string())
                    }
                }
            },
        )
        .writing(),
        false,
    )
}
