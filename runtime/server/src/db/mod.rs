//! The SQLite database: one file under the data directory, WAL mode, foreign keys on.
//!
//! Domain modules write plain functions over `&Connection`; async callers go through
//! [`Db::call`], which runs them on the blocking pool so a slow disk never stalls the executor.

pub mod migrations;

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context;
use chrono::{SecondsFormat, Utc};
use rusqlite::Connection;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Result};

pub use migrations::SCHEMA_VERSION;

/// File name of the database inside the data directory.
pub const FILE_NAME: &str = "service.sqlite";

/// The write-ahead log is cut back to this size once a burst has been checkpointed.
pub const WAL_LIMIT: u64 = 16 << 20;

/// A shared handle to the service's database.
#[derive(Clone)]
pub struct Db {
    conn: Arc<Mutex<Connection>>,
}

impl Db {
    /// Opens (creating if needed) and migrates the database at `path`.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let mut conn = Connection::open(path)
            .with_context(|| format!("cannot open database {}", path.display()))?;
        // Checked before any pragma writes to the file: a newer database stays untouched.
        migrations::ensure_not_newer(&conn)?;
        conn.busy_timeout(Duration::from_secs(5))?;
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get::<_, String>(0))?;
        conn.pragma_update(None, "foreign_keys", true)?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "journal_size_limit", WAL_LIMIT as i64)?;
        // Hot statements (kv, tasks, jobs) are prepared once: parsing one costs more than
        // running it.
        conn.set_prepared_statement_cache_capacity(64);
        migrations::migrate(&mut conn)
            .with_context(|| format!("cannot migrate database {}", path.display()))?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// Runs `f` with the connection on the blocking thread pool.
    pub async fn call<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        let conn = Arc::clone(&self.conn);
        tokio::task::spawn_blocking(move || {
            f(&mut conn.lock().unwrap_or_else(PoisonError::into_inner))
        })
        .await
        .map_err(|e| Error::Internal(anyhow::anyhow!("database task failed: {e}")))?
    }

    /// Like [`Db::call`], but runs `f` right here when the connection is free. For the short
    /// single-row statements of component host calls: suspending a guest to wait for the
    /// blocking pool costs more than the statement itself. (Should another process hold the
    /// write lock, as the CLI briefly does, this thread waits for it like the pool would.)
    pub async fn call_inline<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        let f = match self.conn.try_lock() {
            Ok(mut conn) => return f(&mut conn),
            Err(_) => f,
        };
        self.call(f).await
    }

    /// Moves WAL checkpoints off the request path: the shared connection stops checkpointing
    /// when a commit fills the log (a stall of milliseconds for whichever request commits
    /// then), and a connection of its own copies the log into the database every half second
    /// (PASSIVE: writers never wait for it), until `stop`. A log grown past [`WAL_LIMIT`] by a
    /// burst (or left so by an earlier process) is truncated once it is all copied.
    pub fn checkpoint_in_background(
        &self,
        path: &Path,
        stop: CancellationToken,
    ) -> anyhow::Result<()> {
        let checkpointer = Connection::open(path)?;
        checkpointer.busy_timeout(Duration::from_secs(5))?;
        self.blocking(|conn| conn.pragma_update(None, "wal_autocheckpoint", 0))?;
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

    /// Runs `f` with the connection on the current thread (CLI commands and tests).
    pub fn blocking<T>(&self, f: impl FnOnce(&mut Connection) -> T) -> T {
        f(&mut self.conn.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// The current time as stored everywhere: UTC ISO 8601 with milliseconds, e.g.
/// `2026-11-22T10:00:00.123Z`. Fixed width, so text order is time order.
pub fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Counts the rows of `table`; `table` is always a literal from this crate.
pub fn count(conn: &Connection, table: &'static str) -> Result<i64> {
    Ok(
        conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |row| {
            row.get(0)
        })?,
    )
}

/// A migrated in-memory database for unit tests.
#[cfg(test)]
pub(crate) fn memory() -> Connection {
    let mut conn = Connection::open_in_memory().unwrap();
    migrations::migrate(&mut conn).unwrap();
    conn
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_leaves_no_oversized_log_behind() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(FILE_NAME);
        let db = Db::open(&path).unwrap();
        let stop = CancellationToken::new();
        db.checkpoint_in_background(&path, stop.clone()).unwrap();
        db.blocking(|conn| {
            let tx = conn.transaction().unwrap();
            for i in 0..2_000 {
                tx.execute(
                    "INSERT INTO adapter_kv (adapter, key, value) VALUES ('burst', ?1, ?2)",
                    (i.to_string(), vec![7u8; 20_000]),
                )
                .unwrap();
            }
            tx.commit().unwrap();
        });
        let wal = tmp.path().join(format!("{FILE_NAME}-wal"));
        assert!(
            wal.metadata().unwrap().len() > WAL_LIMIT,
            "the burst grew the log"
        );
        let shrunk = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(100));
            wal.metadata().map_or(0, |m| m.len()) <= WAL_LIMIT
        });
        stop.cancel();
        assert!(
            shrunk,
            "the log is still {} bytes",
            wal.metadata().unwrap().len()
        );
    }

    #[test]
    fn the_log_reaches_the_database_file_in_the_background() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(FILE_NAME);
        let db = Db::open(&path).unwrap();
        let stop = CancellationToken::new();
        db.checkpoint_in_background(&path, stop.clone()).unwrap();
        let automatic: i64 = db.blocking(|conn| {
            conn.pragma_query_value(None, "wal_autocheckpoint", |r| r.get(0))
                .unwrap()
        });
        assert_eq!(automatic, 0, "commits leave checkpoints to the background");
        let before = std::fs::metadata(&path).unwrap().len();
        db.blocking(|conn| {
            let tx = conn.transaction().unwrap();
            for i in 0..2000 {
                let value = vec![7u8; 1000];
                tx.execute(
                    "INSERT INTO adapter_kv (adapter, key, value) VALUES ('test', ?1, ?2)",
                    (i.to_string(), value),
                )
                .unwrap();
            }
            tx.commit().unwrap();
        });
        // The shared connection no longer checkpoints: the rows sit in the log until the
        // background connection copies them over.
        let grown = (0..40).any(|_| {
            std::thread::sleep(Duration::from_millis(100));
            std::fs::metadata(&path).unwrap().len() > before + 1_000_000
        });
        stop.cancel();
        assert!(grown, "the database file did not grow within 4 s");
    }
}
