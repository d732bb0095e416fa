//! The storage layer: every store (profiles, tasks, traces, notes, schedules, kv, jobs, ...) is
//! written once, as plain functions over a [`Conn`], and runs on either backend:
//!
//! - SQLite (the default): one file under the data directory, WAL mode, foreign keys on;
//! - PostgreSQL, when `SERVICE_DATABASE_URL` names one: the shared store of several replicas.
//!
//! Async callers go through [`Db::call`], which runs a unit of work on the blocking pool so a
//! slow disk or network never stalls the executor.

mod conn;
mod connections;
pub(crate) mod migrations;
mod postgres;
pub mod sqlite;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod value;

use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context;
use chrono::{SecondsFormat, Utc};
use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

pub use conn::{Backend, Conn, Row};
pub use migrations::SCHEMA_VERSION;
pub use postgres::{SessionLock, parse as parse_postgres_url};
pub use sqlite::{FILE_NAME, WAL_LIMIT};
pub use value::{FromValue, Param, ToParam, Value};

use crate::error::{Error, Result};

/// The variable that selects PostgreSQL; it may carry a password, so it is read from the
/// environment or `.env` only, never from config.toml.
pub const URL_VARIABLE: &str = "SERVICE_DATABASE_URL";

/// Connections a replica opens to PostgreSQL at most, unless `[database] pool_size` says.
pub const DEFAULT_POOL_SIZE: usize = 16;

/// A shared handle to the service's database.
#[derive(Clone)]
pub struct Db {
    store: Arc<Store>,
}

enum Store {
    Sqlite {
        conn: Mutex<rusqlite::Connection>,
        path: PathBuf,
        /// A second connection ([`Db::another`]: components' and tools' writes): before its
        /// work, it truncates a log grown past the limit. Writes that never pause come through
        /// it, so they pay for the truncation; the first connection, the API's, never waits
        /// for one.
        side: bool,
    },
    Postgres(Box<postgres::Postgres>),
}

impl Db {
    /// Opens (creating if needed) and migrates the SQLite database at `path`.
    pub fn open_sqlite(path: &Path) -> anyhow::Result<Self> {
        let raw = sqlite::connect(path)?;
        // Checked before any pragma writes to the file: a newer database stays untouched.
        migrations::ensure_not_newer(&Conn::sqlite(&raw))?;
        sqlite::configure(&raw)?;
        migrations::migrate(&mut Conn::sqlite(&raw))
            .with_context(|| format!("cannot migrate database {}", path.display()))?;
        Ok(Self {
            store: Arc::new(Store::Sqlite {
                conn: Mutex::new(raw),
                path: path.to_owned(),
                side: false,
            }),
        })
    }

    /// Connects to PostgreSQL at `url` with a pool of at most `pool_size` connections and
    /// migrates it (replicas starting together take turns).
    pub(crate) async fn connect_postgres(url: &str, pool_size: usize) -> anyhow::Result<Self> {
        let pg = postgres::connect(url, pool_size).await?;
        let target = pg.target.clone();
        let db = Self {
            store: Arc::new(Store::Postgres(Box::new(pg))),
        };
        db.call(|conn| migrations::migrate(conn).map_err(Error::Internal))
            .await
            .map_err(|e| anyhow::anyhow!("cannot migrate the database at {target}: {e}"))?;
        Ok(db)
    }

    /// The database of a data directory: PostgreSQL when `url` is set, else the directory's
    /// SQLite file.
    pub fn open<'a>(
        data_dir: &'a Path,
        url: Option<&'a str>,
        pool_size: usize,
    ) -> BoxFuture<'a, anyhow::Result<Self>> {
        Box::pin(async move {
            match url {
                Some(url) => Self::connect_postgres(url, pool_size).await,
                None => Self::open_sqlite(&data_dir.join(FILE_NAME)),
            }
        })
    }

    /// A handle whose work never waits behind this one's: a second connection to the SQLite
    /// file (components' writes, say, so they never hold the API's connection); the same pool
    /// with PostgreSQL, whose connections are already independent.
    pub fn another(&self) -> anyhow::Result<Self> {
        match &*self.store {
            Store::Sqlite { path, .. } => {
                let raw = sqlite::connect(path)?;
                sqlite::configure(&raw)?;
                Ok(Self {
                    store: Arc::new(Store::Sqlite {
                        conn: Mutex::new(raw),
                        path: path.clone(),
                        side: true,
                    }),
                })
            }
            Store::Postgres(_) => Ok(self.clone()),
        }
    }

    pub fn backend(&self) -> Backend {
        match &*self.store {
            Store::Sqlite { .. } => Backend::Sqlite,
            Store::Postgres(_) => Backend::Postgres,
        }
    }

    /// PostgreSQL's pool now: connections made, idle ones, and callers waiting for one;
    /// `None` with SQLite.
    pub fn pool_status(&self) -> Option<(usize, usize, usize)> {
        match &*self.store {
            Store::Sqlite { .. } => None,
            Store::Postgres(pg) => {
                let status = pg.pool.status();
                Some((status.open, status.idle, status.waiting))
            }
        }
    }

    /// Where the data lives, for logs and health: the file, or `host:port/database`.
    pub fn location(&self) -> String {
        match &*self.store {
            Store::Sqlite { path, .. } => path.display().to_string(),
            Store::Postgres(pg) => pg.target.clone(),
        }
    }

    /// Runs `work` with a connection on the blocking thread pool. It runs to its end even if
    /// the caller stops waiting.
    pub async fn call<T, F>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Conn<'_>) -> Result<T> + Send + 'static,
    {
        self.call_erased(erase(work)).await.map(unerase)
    }

    async fn call_erased(&self, work: ErasedWork) -> Result<Erased> {
        let store = Arc::clone(&self.store);
        tokio::task::spawn_blocking(move || store.run(work))
            .await
            .map_err(|e| Error::Internal(anyhow::anyhow!("database task failed: {e}")))?
    }

    /// Like [`Db::call`], but runs `work` right here when the SQLite connection is free. For
    /// the short single-row statements of component host calls and probes: suspending to
    /// wait for the blocking pool costs more than the statement itself. (Should another
    /// process hold the write lock, as the CLI briefly does, this thread waits for it like
    /// the pool would.) PostgreSQL work always goes through the pool.
    pub async fn call_inline<T, F>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Conn<'_>) -> Result<T> + Send + 'static,
    {
        // Right here, the work keeps its type: no box on the host calls' path. Only the pool's
        // path is erased.
        if let Some(conn) = self.free_sqlite() {
            return with_sqlite(&conn, work);
        }
        self.call(work).await
    }

    /// SQLite's connection when no one holds it and its log needs no truncating first (that
    /// is work for the pool, not for this thread).
    fn free_sqlite(&self) -> Option<std::sync::MutexGuard<'_, rusqlite::Connection>> {
        match &*self.store {
            Store::Sqlite { conn, path, side } if !(*side && sqlite::log_oversized(path)) => {
                conn.try_lock().ok()
            }
            _ => None,
        }
    }

    /// Runs `work` with a connection on this thread, for code outside the async runtime
    /// (tests, start-up checks) or inside a multi-threaded one.
    pub fn blocking<T>(&self, work: impl FnOnce(&mut Conn<'_>) -> Result<T>) -> Result<T> {
        match &*self.store {
            Store::Sqlite { .. } => self.store.run(work),
            Store::Postgres(_) => outside_the_executor(|| self.store.run(work)),
        }
    }

    /// With PostgreSQL, a connection of its own receiving the notifications of `channel` until
    /// it is lost (then the receiver ends); `None` with SQLite, where one process is all there
    /// is to tell.
    pub async fn listen(
        &self,
        channel: &'static str,
    ) -> Result<Option<tokio::sync::mpsc::UnboundedReceiver<String>>> {
        match &*self.store {
            Store::Sqlite { .. } => Ok(None),
            Store::Postgres(pg) => pg.listen(channel).await.map(Some),
        }
    }

    /// PostgreSQL: the session-level advisory lock `key`, held while the returned lock lives;
    /// SQLite (one machine, no other replica to tell): `None`.
    pub async fn session_lock(&self, key: i64) -> Result<Option<SessionLock>> {
        match &*self.store {
            Store::Sqlite { .. } => Ok(None),
            Store::Postgres(pg) => pg.session_lock(key).await.map(Some),
        }
    }

    /// Moves SQLite's WAL checkpoints to a background connection until `stop` (see
    /// [`sqlite::checkpoint_in_background`]); PostgreSQL needs nothing of the kind.
    pub fn checkpoint_in_background(&self, stop: CancellationToken) -> anyhow::Result<()> {
        match &*self.store {
            Store::Sqlite { conn, path, .. } => {
                sqlite::checkpoint_in_background(&lock(conn), path, stop)
            }
            Store::Postgres(_) => Ok(()),
        }
    }
}

impl Store {
    /// Runs `work` with a connection on this thread, blocking it.
    fn run<T>(&self, work: impl FnOnce(&mut Conn<'_>) -> Result<T>) -> Result<T> {
        match self {
            Self::Sqlite { conn, path, side } => {
                let conn = lock(conn);
                if *side {
                    sqlite::keep_log_bounded(&conn, path);
                }
                with_sqlite(&conn, work)
            }
            Self::Postgres(pg) => {
                let mut connection = pg.pool.get()?;
                let mut conn = Conn::postgres(&mut connection);
                let outcome = work(&mut conn);
                conn.finish(outcome)
            }
        }
    }
}

fn with_sqlite<T>(
    raw: &rusqlite::Connection,
    work: impl FnOnce(&mut Conn<'_>) -> Result<T>,
) -> Result<T> {
    let mut conn = Conn::sqlite(raw);
    let outcome = work(&mut conn);
    conn.finish(outcome)
}

fn lock(conn: &Mutex<rusqlite::Connection>) -> std::sync::MutexGuard<'_, rusqlite::Connection> {
    conn.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A unit of work and its result with their types erased. Every `call` site would otherwise
/// instantiate its own copy of the blocking pool's task machinery (about 2,300 lines of LLVM
/// IR each, measured with `cargo llvm-lines`; a hundred call sites in the API crate alone);
/// erased, one copy serves them all, for a box per call next to the pool's own.
type Erased = Box<dyn Any + Send>;
type ErasedWork = Box<dyn FnOnce(&mut Conn<'_>) -> Result<Erased> + Send>;

fn erase<T: Send + 'static>(
    work: impl FnOnce(&mut Conn<'_>) -> Result<T> + Send + 'static,
) -> ErasedWork {
    Box::new(|conn: &mut Conn<'_>| work(conn).map(|value| Box::new(value) as Erased))
}

fn unerase<T: 'static>(value: Erased) -> T {
    *value
        .downcast()
        .expect("a unit of work gives back the type it was erased from")
}

/// Runs blocking `work` from wherever this is called: inside a multi-threaded runtime, the
/// worker hands its other tasks off first.
fn outside_the_executor<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

/// The current time as stored everywhere: UTC ISO 8601 with milliseconds, e.g.
/// `2026-11-22T10:00:00.123Z`. Fixed width, so text order is time order.
pub fn now() -> String {
    Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The current time in unix milliseconds (job retry times, kv expiry).
pub fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

/// Counts the rows of `table`; `table` is always a literal from this crate.
pub fn count(conn: &Conn, table: &'static str) -> Result<i64> {
    conn.query_one(
        &format!("SELECT count(*) FROM {table}"),
        crate::params![],
        |row| row.get(0),
    )
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;

    fn burst(db: &Db, rows: usize, value_bytes: usize) {
        db.blocking(|conn| {
            conn.transaction(|tx| -> Result<()> {
                for i in 0..rows {
                    tx.execute(
                        "INSERT INTO adapter_kv (adapter, key, value) VALUES ('burst', ?1, ?2)",
                        crate::params![i.to_string(), vec![7u8; value_bytes]],
                    )?;
                }
                Ok(())
            })
        })
        .unwrap();
    }

    #[test]
    fn a_burst_leaves_no_oversized_log_behind() {
        let tmp = tempfile::tempdir().unwrap();
        let db = Db::open_sqlite(&tmp.path().join(FILE_NAME)).unwrap();
        let stop = CancellationToken::new();
        db.checkpoint_in_background(stop.clone()).unwrap();
        burst(&db, 2_000, 20_000);
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
    fn writes_that_never_pause_under_readers_that_never_stop_keep_the_log_bounded() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(FILE_NAME);
        let first = Db::open_sqlite(&path).unwrap();
        let stop = CancellationToken::new();
        first.checkpoint_in_background(stop.clone()).unwrap();
        // Writing as components do, on a side connection.
        let db = first.another().unwrap();
        let reader = Db::open_sqlite(&path).unwrap();
        // Writing until four logs' worth went through (however long a busy machine takes,
        // within a minute), while readers never stop.
        let writing = Arc::new(AtomicBool::new(true));
        let give_up = std::time::Instant::now() + Duration::from_secs(60);
        // Read transactions overlapping each other, so some snapshot is always in use.
        let readers: Vec<_> = (0..3)
            .map(|i| {
                let reader = reader.another().unwrap();
                let writing = Arc::clone(&writing);
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(50 * i));
                    while writing.load(Ordering::Relaxed) {
                        reader
                            .blocking(|conn| {
                                // A deferred transaction: a reader, holding its snapshot.
                                let raw = conn.as_sqlite().unwrap();
                                raw.execute_batch("BEGIN")?;
                                raw.query_row("SELECT count(*) FROM adapter_kv", [], |r| {
                                    r.get::<_, i64>(0)
                                })?;
                                std::thread::sleep(Duration::from_millis(150));
                                raw.execute_batch("COMMIT")?;
                                Ok(())
                            })
                            .unwrap();
                    }
                })
            })
            .collect();
        let wal = tmp.path().join(format!("{FILE_NAME}-wal"));
        let (mut written, mut largest, mut round) = (0u64, 0u64, 0u64);
        while written <= 4 * WAL_LIMIT && std::time::Instant::now() < give_up {
            round += 1;
            db.blocking(|conn| {
                conn.transaction(|tx| {
                    // Ever new rows (within a few thousand keys): pages the checkpoint must copy.
                    for i in 0..20 {
                        tx.execute(
                            "INSERT INTO adapter_kv (adapter, key, value) VALUES ('flow', ?1, ?2) \
                             ON CONFLICT (adapter, key) DO UPDATE SET value = excluded.value",
                            crate::params![
                                ((round * 20 + i) % 4_000).to_string(),
                                vec![7u8; 20_000]
                            ],
                        )?;
                    }
                    Ok::<_, Error>(())
                })
            })
            .unwrap();
            written += 20 * 20_000;
            largest = largest.max(wal.metadata().map_or(0, |m| m.len()));
        }
        writing.store(false, Ordering::Relaxed);
        for reader in readers {
            reader.join().unwrap();
        }
        stop.cancel();
        assert!(
            written > 4 * WAL_LIMIT,
            "wrote only {written} bytes in a minute"
        );
        // The limit and, at most, the one transaction that went past it.
        assert!(
            largest < WAL_LIMIT + (1 << 20),
            "the log reached {largest} bytes while {written} were written"
        );
    }

    #[test]
    fn the_log_reaches_the_database_file_in_the_background() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(FILE_NAME);
        let db = Db::open_sqlite(&path).unwrap();
        let stop = CancellationToken::new();
        db.checkpoint_in_background(stop.clone()).unwrap();
        let automatic: i64 = db
            .blocking(|conn| {
                conn.query_one("PRAGMA wal_autocheckpoint", crate::params![], |r| r.get(0))
            })
            .unwrap();
        assert_eq!(automatic, 0, "commits leave checkpoints to the background");
        let before = std::fs::metadata(&path).unwrap().len();
        burst(&db, 2_000, 1_000);
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
