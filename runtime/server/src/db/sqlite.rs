//! The embedded backend: one SQLite file under the data directory, WAL mode, foreign keys on,
//! and its write-ahead log checkpointed in the background.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use rusqlite::Connection;
use tokio_util::sync::CancellationToken;

/// File name of the database inside the data directory.
pub const FILE_NAME: &str = "service.sqlite";

/// The write-ahead log is cut back to this size once a burst has been checkpointed.
pub const WAL_LIMIT: u64 = 16 << 20;

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
    conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get::<_, String>(0))?;
    conn.pragma_update(None, "foreign_keys", true)?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "journal_size_limit", WAL_LIMIT as i64)?;
    // Every statement is prepared once per connection: parsing one costs more than running it.
    conn.set_prepared_statement_cache_capacity(128);
    Ok(())
}

/// Moves WAL checkpoints off the request path: `conn` stops checkpointing when a commit
/// fills the log (a stall of milliseconds for whichever request commits then), and a
/// connection of its own copies the log into the database every half second (PASSIVE:
/// writers never wait for it), until `stop`. A log grown past [`WAL_LIMIT`] by a burst (or
/// left so by an earlier process) is truncated once it is all copied.
pub fn checkpoint_in_background(
    conn: &Connection,
    path: &Path,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let checkpointer = connect(path)?;
    conn.pragma_update(None, "wal_autocheckpoint", 0)?;
    let wal = path.with_file_name(format!(
        "{}-wal",
        path.file_name().unwrap_or_default().to_string_lossy()
    ));
    std::thread::Builder::new()
        .name("db-checkpoint".into())
        .spawn(move || {
            while !stop.is_cancelled() {
                let oversized = wal.metadata().is_ok_and(|m| m.len() > WAL_LIMIT);
                // (busy, frames in the log, frames copied): all copied means truncating
                // waits for no one.
                let checkpoint = |mode: &str| {
                    checkpointer.query_row(&format!("PRAGMA wal_checkpoint({mode})"), [], |r| {
                        Ok((
                            r.get::<_, i64>(0)?,
                            r.get::<_, i64>(1)?,
                            r.get::<_, i64>(2)?,
                        ))
                    })
                };
                let done = match checkpoint("PASSIVE") {
                    Ok((0, log, copied)) if oversized && log == copied => {
                        checkpoint("TRUNCATE").map(drop)
                    }
                    other => other.map(drop),
                };
                if let Err(e) = done {
                    tracing::warn!("cannot checkpoint the database log: {e}");
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        })?;
    Ok(())
}
