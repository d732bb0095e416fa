//! Notes: short texts agents write and search, indexed with SQLite FTS5.

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use crate::db;
use crate::error::{Error, Result};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Note {
    pub id: i64,
    pub title: String,
    pub body: String,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hit {
    pub id: i64,
    pub title: String,
    /// The matching passage with matches in [brackets].
    pub snippet: String,
}

pub fn create(conn: &Connection, title: &str, body: &str) -> Result<Note> {
    let now = db::now();
    conn.execute(
        "INSERT INTO notes (title, body, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)",
        params![title, body, now],
    )?;
    let id = conn.last_insert_rowid();
    get(conn, id)?.ok_or_else(|| Error::Internal(anyhow::anyhow!("note vanished after insert")))
}

pub fn get(conn: &Connection, id: i64) -> Result<Option<Note>> {
    Ok(conn
        .query_row(
            "SELECT id, title, body, created_at, updated_at FROM notes WHERE id = ?1",
            [id],
            |r| {
                Ok(Note {
                    id: r.get(0)?,
                    title: r.get(1)?,
                    body: r.get(2)?,
                    created_at: r.get(3)?,
                    updated_at: r.get(4)?,
                })
            },
        )
        .optional()?)
}

/// Appends `text` on a new line of the note's body.
pub fn append(conn: &Connection, id: i64, text: &str) -> Result<Note> {
    let changed = conn.execute(
        "UPDATE notes SET body = CASE WHEN body = '' THEN ?2 ELSE body || char(10) || ?2 END, \
         updated_at = ?3 WHERE id = ?1",
        params![id, text, db::now()],
    )?;
    if changed == 0 {
        return Err(Error::not_found(format!("no note with id {id}")));
    }
    get(conn, id)?.ok_or_else(|| Error::not_found(format!("no note with id {id}")))
}

/// Full-text search, best matches first. Every word of `query` is searched as a literal term
/// (any of them may match), so FTS5 syntax in the query cannot cause an error.
pub fn search(conn: &Connection, query: &str, limit: u32) -> Result<Vec<Hit>> {
    let terms: Vec<String> = query
        .split_whitespace()
        .filter(|word| word.chars().any(char::is_alphanumeric))
        .map(|word| format!("\"{}\"", word.replace('"', "\"\"")))
        .collect();
    if terms.is_empty() {
        return Err(Error::invalid("the search query has no words"));
    }
    let mut stmt = conn.prepare(
        "SELECT notes.id, notes.title, snippet(notes_fts, -1, '[', ']', '…', 16) \
         FROM notes_fts JOIN notes ON notes.id = notes_fts.rowid \
         WHERE notes_fts MATCH ?1 ORDER BY rank LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![terms.join(" OR "), limit], |r| {
        Ok(Hit {
            id: r.get(0)?,
            title: r.get(1)?,
            snippet: r.get(2)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_append_and_search() {
        let conn = db::memory();
        let note = create(&conn, "Lisbon trip", "flights booked").unwrap();
        create(&conn, "Groceries", "oat milk, coffee").unwrap();
        let note = append(&conn, note.id, "hotel near Alfama").unwrap();
        assert_eq!(note.body, "flights booked\nhotel near Alfama");

        let hits = search(&conn, "alfama", 5).unwrap();
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].title, "Lisbon trip");
        assert!(hits[0].snippet.contains("[Alfama]"), "{}", hits[0].snippet);
        // FTS syntax is searched literally instead of failing.
        assert_eq!(search(&conn, "coffee* AND -\"( )", 5).unwrap().len(), 1);
        assert!(search(&conn, " \"( ", 5).is_err());
        assert!(matches!(append(&conn, 99, "x"), Err(Error::NotFound(_))));
    }
}
