//! The embedded backend: one SQLite file under the data directory, WAL mode, foreign keys on,
//! incremental vacuum, and its write-ahead log checkpointed in the background.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use rusqlite::Connection;
use tokio_util::sync::CancellationToken;

/// File name of the database inside the data directory.
pub const FILE_NAME: &str = "service.sqlite";

/// The write-ahead log is cut back to this size once a burst has been checkpointed.
pub const WAL_LIMIT: u64 = 16 << 20;

/// How often the log is checkpointed.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(500);

/// Opens a connection to the file at `path` with the service's settings. The caller migrates.
pub fn connect(path: &Path) -> anyhow::Result<Connection> {
    let conn = Connection::open(path)
        .with_context(|| format!("cannot open database {}", path.display()))?;
    conn.busy_timeout(Duration::from_secs(5))?;
    Ok(conn)
}

/// The pragmas every connection of the service runs with; applied after the version check, so
/// a database of a newer version is left as it was.
pub fn configure(conn: &Connection) -> anyhow::Result<()> {
    // Only a file without tables can take it: retention's deletions then give pages back.
    let pages: i64 = conn.query_row("PRAGMA page_count", [], |row| row.get(0))?;
    if pages == 0 {
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    }
    conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get::<_, String>(0))?;
    conn.pragma_update(None, "foreign_keys", true)?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "journal_size_limit", WAL_LIMIT as i64)?;
    // Every statement is prepared once per connection: parsing one costs more than running it.
    conn.set_prepared_statement_cache_capacity(128);
    Ok(())
}

/// The write-ahead log of the database at `path`.
fn log_of(path: &Path) -> PathBuf {
    path.with_file_name(format!(
        "{}-wal",
        path.file_name().unwrap_or_default().to_string_lossy()
    ))
}

/// How long a unit of work waits, at most, for a log past [`WAL_LIMIT`] to be truncated.
const LOG_WAIT: Duration = Duration::from_secs(2);

/// Before a unit of work on a side connection `conn`: a log past [`WAL_LIMIT`] is truncated
/// first, by whoever is about to add to it, so writers that never pause cannot outrun the
/// background checkpoints (a look at the file's size, otherwise). A truncation that could not
/// finish (the background checkpoint holding the checkpoint lock, readers still on the log)
/// is tried again until it does, within [`LOG_WAIT`]: the writer waits rather than grow it.
pub(crate) fn keep_log_bounded(conn: &Connection, path: &Path) {
    let give_up = std::time::Instant::now() + LOG_WAIT;
    while log_oversized(path) {
        // Its first column is 1 when the checkpoint could not complete.
        match conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            r.get::<_, i64>(0)
        }) {
            Ok(0) => return,
            Ok(_) if std::time::Instant::now() < give_up => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(_) => {
                tracing::warn!("the database log stays past its limit: readers hold it");
                return;
            }
            Err(e) => {
                tracing::warn!("cannot checkpoint the database log: {e}");
                return;
            }
        }
    }
}

/// Whether the log of the database at `path` has grown past [`WAL_LIMIT`].
pub(crate) fn log_oversized(path: &Path) -> bool {
    log_of(path).metadata().is_ok_and(|m| m.len() > WAL_LIMIT)
}

/// Moves WAL checkpoints off the request path: `conn` stops checkpointing when a commit
/// fills the log (a stall of milliseconds for whichever request commits then), and a
/// connection of its own copies the log into the database every half second (PASSIVE:
/// writers never wait for it), until `stop`. A log a burst left past [`WAL_LIMIT`] (or an
/// earlier process) is truncated at the next of them; one that writers keep growing, by the
/// next unit of work ([`keep_log_bounded`]).
pub fn checkpoint_in_background(
    conn: &Connection,
    path: &Path,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let checkpointer = connect(path)?;
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    let path = path.to_owned();
    std::thread::Builder::new()
        .name("db-checkpoint".into())
        .spawn(move || {
            while !stop.is_cancelled() {
                let mode = if log_oversized(&path) {
                    "TRUNCATE"
                } else {
                    "PASSIVE"
                };
                let done =
                    checkpointer
                        .query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |_| Ok(()));
                if let Err(e) = done {
                    tracing::warn!("cannot checkpoint the database log: {e}");
                }
                std::thread::sleep(CHECKPOINT_EVERY);
            }
        })?;
    Ok(())
}
