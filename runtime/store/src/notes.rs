//! Notes: short texts agents write and search, with the database's full-text search (FTS5
//! on SQLite, `tsvector` on PostgreSQL; both lowercase words without stemming).

use serde::Serialize;

use crate::db::{self, Backend, Conn};
use crate::error::{Error, Result};
use crate::params;

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

const COLUMNS: &str = "id, title, body, created_at, updated_at";

fn from_row(r: &db::Row<'_>) -> Result<Note> {
    Ok(Note {
        id: r.get(0)?,
        title: r.get(1)?,
        body: r.get(2)?,
        created_at: r.get(3)?,
        updated_at: r.get(4)?,
    })
}

// Writes answer with RETURNING: one statement, so a connection lost after it leaves no doubt
// about what was written.
pub fn create(conn: &Conn, title: &str, body: &str) -> Result<Note> {
    let now = db::now();
    conn.query_one(
        &format!(
            "INSERT INTO notes (title, body, created_at, updated_at) VALUES (?1, ?2, ?3, ?3) \
             RETURNING {COLUMNS}"
        ),
        params![title, body, now],
        from_row,
    )
}

/// Appends `text` on a new line of the note's body.
pub fn append(conn: &Conn, id: i64, text: &str) -> Result<Note> {
    conn.query_opt(
        &format!(
            "UPDATE notes SET body = CASE WHEN body = '' THEN ?2 ELSE body || '\n' || ?2 END, \
             updated_at = ?3 WHERE id = ?1 RETURNING {COLUMNS}"
        ),
        params![id, text, db::now()],
        from_row,
    )?
    .ok_or_else(|| Error::not_found(format!("no note with id {id}")))
}

/// Full-text search, best matches first. Every word of `query` is searched as a literal term
/// (any of them may match), so search syntax in the query cannot cause an error.
pub fn search(conn: &Conn, query: &str, limit: u32) -> Result<Vec<Hit>> {
    let words: Vec<&str> = query
        .split_whitespace()
        .filter(|word| word.chars().any(char::is_alphanumeric))
        .collect();
    if words.is_empty() {
        return Err(Error::invalid("the search query has no words"));
    }
    let read = |r: &db::Row<'_>| {
        Ok(Hit {
            id: r.get(0)?,
            title: r.get(1)?,
            snippet: r.get(2)?,
        })
    };
    match conn.backend() {
        Backend::Sqlite => {
            let terms: Vec<String> = words
                .iter()
                .map(|word| format!("\"{}\"", word.replace('"', "\"\"")))
                .collect();
            conn.query(
                "SELECT notes.id, notes.title, snippet(notes_fts, -1, '[', ']', '…', 16) \
                 FROM notes_fts JOIN notes ON notes.id = notes_fts.rowid \
                 WHERE notes_fts MATCH ?1 ORDER BY rank LIMIT ?2",
                params![terms.join(" OR "), limit],
                read,
            )
        }
        Backend::Postgres => {
            // Each word a quoted lexeme of to_tsquery's syntax, any of which may match.
            let terms: Vec<String> = words
                .iter()
                .map(|word| format!("'{}'", word.replace('\\', "\\\\").replace('\'', "''")))
                .collect();
            conn.query(
                "SELECT notes.id, notes.title, ts_headline('simple', notes.title || ' ' || notes.body, \
                   q.query, 'StartSel=[, StopSel=], MaxWords=16, MinWords=5') \
                 FROM notes, to_tsquery('simple', ?1) AS q (query) WHERE notes.search @@ q.query \
                 ORDER BY ts_rank(notes.search, q.query) DESC, notes.id LIMIT ?2",
                params![terms.join(" | "), limit],
                read,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::{Backends, each_conn};

    #[test]
    fn create_append_and_search() {
        each_conn(Backends::Both, |conn| {
            let note = create(conn, "Lisbon trip", "flights booked").unwrap();
            create(conn, "Groceries", "oat milk, coffee").unwrap();
            let note = append(conn, note.id, "hotel near Alfama").unwrap();
            assert_eq!(note.body, "flights booked\nhotel near Alfama");

            let hits = search(conn, "alfama", 5).unwrap();
            assert_eq!(hits.len(), 1);
            assert_eq!(hits[0].title, "Lisbon trip");
            assert!(hits[0].snippet.contains("[Alfama]"), "{}", hits[0].snippet);
            // FTS syntax is searched literally instead of failing.
            assert_eq!(search(conn, "coffee* AND -\"( )", 5).unwrap().len(), 1);
            assert!(search(conn, " \"( ", 5).is_err());
            assert!(matches!(append(conn, 99, "x"), Err(Error::NotFound(_))));
        });
    }
}
