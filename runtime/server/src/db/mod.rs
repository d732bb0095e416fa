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

use crate::error::{Error, Result};

pub use migrations::SCHEMA_VERSION;

/// File name of the database inside the data directory.
pub const FILE_NAME: &str = "service.sqlite";

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
