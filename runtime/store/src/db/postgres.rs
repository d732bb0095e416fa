//! The shared backend: a PostgreSQL server named by `SERVICE_DATABASE_URL`, reached through a
//! bounded pool of connections per replica (tokio-postgres, [`connections`](super::connections);
//! TLS by rustls when the URL's `sslmode` asks for it or the server offers it).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio_postgres::AsyncMessage;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::connections::Pool;
use crate::error::Error;

/// How long a unit of work waits for a pooled connection, and a new connection for the
/// server, before it is answered "unavailable".
pub(crate) const WAIT: Duration = Duration::from_secs(5);

/// The pool, and the runtime of the connections outside it (listening, advisory locks): a
/// thread of their own, reading their sockets as messages come.
pub(super) struct Postgres {
    pub pool: Arc<Pool>,
    /// Where the connections outside the pool run.
    runtime: tokio::runtime::Handle,
    _io: IoRuntime,
    /// `host:port/database`, for messages: never the password.
    pub target: String,
    /// For connections outside the pool.
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
}

/// Checks `url` and opens a pool of at most `size` connections, with one connection made now:
/// a wrong password or an unreachable server is a start-up error naming the problem.
pub(super) async fn connect(url: &str, size: usize) -> anyhow::Result<Postgres> {
    let config = parse(url)?;
    let io = IoRuntime::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("db-io")
            .enable_all()
            .build()
            .context("cannot start the database's I/O thread")?,
    );
    let handle = io.get().handle().clone();
    let target = describe(&config);
    let tls = MakeRustlsConnect::new(
        crate::net::rustls_config().context("cannot set up TLS for the database")?,
    );
    let pool = Arc::new(Pool::new(config.clone(), tls.clone(), size));
    let first = tokio::task::spawn_blocking({
        let pool = Arc::clone(&pool);
        move || pool.get().map(drop)
    });
    first
        .await
        .context("the first connection's thread stopped")?
        .map_err(|e| anyhow::anyhow!("cannot connect to the database at {target}: {e}"))?;
    Ok(Postgres {
        pool,
        runtime: handle,
        _io: io,
        target,
        config,
        tls,
    })
}

/// A runtime that ends without waiting wherever it is dropped (a runtime dropped the usual
/// way would block, which an async caller must not).
pub(super) struct IoRuntime(Option<tokio::runtime::Runtime>);

impl IoRuntime {
    pub(super) fn new(runtime: tokio::runtime::Runtime) -> Self {
        Self(Some(runtime))
    }

    pub(super) fn get(&self) -> &tokio::runtime::Runtime {
        self.0.as_ref().expect("held until dropped")
    }
}

impl Drop for IoRuntime {
    fn drop(&mut self) {
        if let Some(io) = self.0.take() {
            io.shutdown_background();
        }
    }
}

/// A session-level advisory lock, held on a connection of its own while this lives.
pub struct SessionLock {
    _client: tokio_postgres::Client,
    lost: tokio::sync::oneshot::Receiver<()>,
}

impl SessionLock {
    /// Resolves when the lock's connection ends (the server restarted, the network broke):
    /// the lock is no longer held.
    pub async fn lost(&mut self) {
        let _ = (&mut self.lost).await;
    }
}

impl Postgres {
    /// Takes the advisory lock `key` on a connection of its own, trying for at most [`WAIT`]
    /// (a session that just died may still hold it while the server notices).
    pub(super) async fn session_lock(&self, key: i64) -> Result<SessionLock, Error> {
        let connecting = self.runtime.spawn({
            let (config, tls) = (self.config.clone(), self.tls.clone());
            async move { config.connect(tls).await }
        });
        let (client, connection) = connecting
            .await
            .map_err(|e| Error::Unavailable(format!("the database's I/O thread stopped: {e}")))?
            .map_err(classify)?;
        let (ended, lost) = tokio::sync::oneshot::channel();
        self.runtime.spawn(async move {
            let _ = connection.await;
            let _ = ended.send(());
        });
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let row = client
                .query_one("SELECT pg_try_advisory_lock($1)", &[&key])
                .await
                .map_err(classify)?;
            if row.get::<_, bool>(0) {
                return Ok(SessionLock {
                    _client: client,
                    lost,
                });
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Error::Unavailable(format!(
                    "another session holds the advisory lock {key}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// A connection of its own that receives the notifications sent on `channel` (an
    /// identifier of this crate's) until the connection is lost; then the receiver ends.
    pub(super) async fn listen(
        &self,
        channel: &'static str,
    ) -> Result<mpsc::UnboundedReceiver<String>, Error> {
        let connecting = self.runtime.spawn({
            let (config, tls) = (self.config.clone(), self.tls.clone());
            async move { config.connect(tls).await }
        });
        let (client, mut connection) = connecting
            .await
            .map_err(|e| Error::Unavailable(format!("the database's I/O thread stopped: {e}")))?
            .map_err(classify)?;
        let (sender, receiver) = mpsc::unbounded_channel();
        let (read, until_read) = tokio::sync::oneshot::channel::<()>();
        self.runtime.spawn(async move {
            let _read = read;
            let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
            loop {
                let message = tokio::select! {
                    message = messages.next() => message,
                    () = sender.closed() => return,
                };
                match message {
                    Some(Ok(AsyncMessage::Notification(note))) => {
                        if sender.send(note.payload().to_owned()).is_err() {
                            return;
                        }
                    }
                    Some(Ok(_)) => {}
                    // Lost: the receiver ends with the only sender, so its owner reconnects.
                    Some(Err(_)) | None => return,
                }
            }
        });
        client
            .batch_execute(&format!("LISTEN {channel}"))
            .await
            .map_err(classify)?;
        // The client lives as long as its connection is read (it ends the connection when
        // dropped). It holds no sender: one kept here hid a lost connection from the receiver.
        self.runtime.spawn(async move {
            let _ = until_read.await;
            drop(client);
        });
        Ok(receiver)
    }
}

/// Parses a `postgres://` URL; the error never repeats the URL (it may hold a password).
pub fn parse(url: &str) -> anyhow::Result<tokio_postgres::Config> {
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        bail!(
            "SERVICE_DATABASE_URL must be a postgres:// URL, e.g. \
             postgres://user:password@host:5432/service"
        );
    }
    let config: tokio_postgres::Config = url.parse().map_err(|e: tokio_postgres::Error| {
        anyhow::anyhow!("SERVICE_DATABASE_URL is not a valid PostgreSQL URL: {e}")
    })?;
    if config.get_hosts().is_empty() {
        bail!("SERVICE_DATABASE_URL names no host");
    }
    Ok(config)
}

fn describe(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        Some(tokio_postgres::config::Host::Unix(path)) => path.display().to_string(),
        None => String::new(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let database = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or_default();
    format!("{host}:{port}/{database}")
}

/// Failures that mean "the database cannot be reached now" (503, try again) rather than a
/// bug or a bad statement.
pub(super) fn classify(e: tokio_postgres::Error) -> Error {
    let lost = e.is_closed()
        || std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>())
        || e.code().is_some_and(|code| {
            let code = code.code();
            // Connection exceptions, the server shutting down or starting, too many clients.
            code.starts_with("08") || code.starts_with("57P") || code == "53300"
        });
    if lost {
        Error::Unavailable(format!("the database is unreachable: {e}"))
    } else {
        Error::Internal(e.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_without_repeating_them() {
        let err = parse("mysql://root:hunter2@db/x").unwrap_err().to_string();
        assert!(err.contains("postgres:// URL"), "{err}");
        assert!(!err.contains("hunter2"));
        let err = parse("postgres://u:hunter2@db:notaport/x")
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a valid PostgreSQL URL"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
        let config = parse("postgres://u:hunter2@db.internal:6543/service").unwrap();
        assert_eq!(describe(&config), "db.internal:6543/service");
    }
}
