//! Recordings of component calls (see the adapters' `recording`): kept per adapter, bounded
//! by count and age as each is added, read newest first.

use serde::Serialize;

use crate::db::{self, Conn};
use crate::error::Result;
use crate::params;

/// A recording to keep.
pub struct NewRecording<'a> {
    pub export: &'a str,
    pub outcome: &'a str,
    /// When the call started, in milliseconds since the epoch.
    pub started_ms: i64,
    /// The failure's kind and message, when the call did not finish.
    pub error: Option<(&'a str, &'a str)>,
    pub duration_ms: u64,
    pub cut: usize,
    /// `{input, imports, output}`, JSON text.
    pub body: &'a str,
}

/// How many of an adapter's recordings are kept, and for how long.
#[derive(Debug, Clone, Copy)]
pub struct Kept {
    pub count: u32,
    pub hours: u32,
}

/// A recording as a list shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Summary {
    pub id: String,
    pub adapter: String,
    /// `handle-http`, `run-job`, `call-tool`, `start` or `stop`.
    pub export: String,
    /// `ok`, `failed` (the component answered a failure: an HTTP 5xx, a job or tool error,
    /// a hook that refused) or `error` (the call did not finish).
    pub outcome: String,
    /// What ended a call that did not finish (`Timeout`, `Panic`, `Trap`, ...).
    pub error_kind: Option<String>,
    pub error: Option<String>,
    /// When the call started (RFC 3339).
    pub at: String,
    pub duration_ms: i64,
    /// The recording's size.
    pub bytes: i64,
    /// Imports not kept: the call made more than `limits.recording_kib` holds.
    pub cut: i64,
}

/// A recording whole.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Recording {
    #[serde(flatten)]
    pub summary: Summary,
    /// The export's input (the HTTP request, the job, the tool call).
    #[schema(value_type = Object)]
    pub input: serde_json::Value,
    /// Every import the call made, in order: `{import, args, result}`, or `{import, bytes}`
    /// (hex) for random bytes.
    #[schema(value_type = Vec<Object>)]
    pub imports: serde_json::Value,
    /// What the export returned; null when the call did not finish.
    #[schema(value_type = Object)]
    pub output: serde_json::Value,
}

const SUMMARY: &str =
    "id, adapter, export, outcome, error_kind, error, at, duration_ms, bytes, cut";

fn summary(r: &db::Row<'_>) -> Result<Summary> {
    Ok(Summary {
        id: r.get(0)?,
        adapter: r.get(1)?,
        export: r.get(2)?,
        outcome: r.get(3)?,
        error_kind: r.get(4)?,
        error: r.get(5)?,
        at: r.get(6)?,
        duration_ms: r.get(7)?,
        bytes: r.get(8)?,
        cut: r.get(9)?,
    })
}

/// Keeps recordings of `adapter` (in one transaction), then drops what it keeps no more
/// (past the count, or the age).
pub fn add_all(
    conn: &mut Conn,
    adapter: &str,
    news: &[NewRecording<'_>],
    kept: Kept,
) -> Result<()> {
    let now = db::now_ms();
    conn.transaction(|conn| {
        for new in news {
            let at = chrono::DateTime::from_timestamp_millis(new.started_ms)
                .unwrap_or_default()
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            let (kind, error) = new.error.unzip();
            // With PostgreSQL the batch and its pruning go with the commit, one round trip.
            conn.execute_later(
                "INSERT INTO adapter_recordings (id, adapter, export, outcome, error_kind, error, \
                 at, at_ms, duration_ms, bytes, cut, body) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                params![
                    uuid::Uuid::new_v4().to_string(),
                    adapter,
                    new.export,
                    new.outcome,
                    kind,
                    error,
                    at,
                    new.started_ms,
                    i64::try_from(new.duration_ms).unwrap_or(i64::MAX),
                    new.body.len() as i64,
                    new.cut as i64,
                    new.body
                ],
            )?;
        }
        // Two ranges of the (adapter, at_ms) index: the old ones, and those past the count
        // (the newest one past it found by walking the index, never the rows).
        let oldest = now - i64::from(kept.hours) * 3_600_000;
        conn.execute_later(
            "DELETE FROM adapter_recordings WHERE adapter = ?1 AND at_ms < ?2",
            params![adapter, oldest],
        )?;
        conn.execute_later(
            "DELETE FROM adapter_recordings WHERE adapter = ?1 AND (at_ms, id) <= \
             (SELECT at_ms, id FROM adapter_recordings WHERE adapter = ?1 \
              ORDER BY at_ms DESC, id DESC LIMIT 1 OFFSET ?2)",
            params![adapter, i64::from(kept.count)],
        )?;
        Ok(())
    })
}

/// An adapter's recordings, newest first, of one outcome when given; at most `limit`.
pub fn list(conn: &Conn, adapter: &str, outcome: Option<&str>, limit: u32) -> Result<Vec<Summary>> {
    conn.query(
        &format!(
            "SELECT {SUMMARY} FROM adapter_recordings WHERE adapter = ?1 \
             AND (CAST(?2 AS TEXT) IS NULL OR outcome = ?2) ORDER BY at_ms DESC, id DESC LIMIT ?3"
        ),
        params![adapter, outcome, limit],
        summary,
    )
}

/// A recording whole: one of `adapter`'s when given, anyone's otherwise.
pub fn get(conn: &Conn, adapter: Option<&str>, id: &str) -> Result<Option<Recording>> {
    conn.query_opt(
        &format!(
            "SELECT {SUMMARY}, body FROM adapter_recordings \
             WHERE (CAST(?1 AS TEXT) IS NULL OR adapter = ?1) AND id = ?2"
        ),
        params![adapter, id],
        |r| {
            let body: String = r.get(10)?;
            let mut body: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            let mut take = |field: &str| body.get_mut(field).map(serde_json::Value::take);
            Ok(Recording {
                input: take("input").unwrap_or_default(),
                imports: take("imports").unwrap_or_default(),
                output: take("output").unwrap_or_default(),
                summary: summary(r)?,
            })
        },
    )
}
