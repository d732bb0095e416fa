//! PostgreSQL connections driven by the thread that uses them, and their pool.
//!
//! Units of work run on the blocking pool (see [`Db::call`](super::Db::call)). Each pooled
//! connection has a single-threaded runtime of its own, and the thread holding it runs the
//! connection's I/O itself while it waits for an answer: a statement costs its round trip to
//! the server and nothing more. (Driven by an I/O thread of their own, each round trip handed
//! the work to that thread and back, two thread switches more, which on two cores cost a
//! large share of the server's CPU under load.) An idle connection is not read; a connection
//! the server closed meanwhile is noticed when it is taken.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use tokio_postgres::{Client, Statement};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::postgres::{IoRuntime, WAIT, classify};
use crate::error::Error;

type Io = Pin<Box<dyn Future<Output = Result<(), tokio_postgres::Error>> + Send>>;

/// One connection: its client, the future that reads and writes its socket, and the runtime
/// that future runs on.
pub(crate) struct Connection {
    client: Client,
    io: Io,
    /// Prepared statements, by their SQL (each prepared once per connection).
    statements: HashMap<String, Statement>,
    /// Its I/O ended (the server closed it, the network broke): never polled again.
    ended: bool,
    runtime: IoRuntime,
}

impl Connection {
    fn open(config: &tokio_postgres::Config, tls: &MakeRustlsConnect) -> Result<Self, Error> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| {
                Error::Internal(anyhow::anyhow!("cannot start a connection's runtime: {e}"))
            })?;
        let (client, connection) = runtime.block_on(async {
            tokio::time::timeout(WAIT, config.connect(tls.clone()))
                .await
                .map_err(|_| timed_out())?
                .map_err(classify)
        })?;
        Ok(Self {
            client,
            io: Box::pin(connection),
            statements: HashMap::new(),
            ended: false,
            runtime: IoRuntime::new(runtime),
        })
    }

    /// Runs `work` to its end on this thread, driving the connection's I/O meanwhile.
    pub(crate) fn drive<T>(
        &mut self,
        work: impl AsyncFnOnce(
            &Client,
            &mut HashMap<String, Statement>,
        ) -> Result<T, tokio_postgres::Error>,
    ) -> Result<T, Error> {
        if self.ended {
            return Err(lost());
        }
        let Self {
            client,
            io,
            statements,
            ended,
            runtime,
        } = self;
        runtime.get().block_on(async {
            tokio::select! {
                biased;
                answer = work(client, statements) => answer.map_err(classify),
                closed = io.as_mut() => {
                    *ended = true;
                    Err(closed.map_or_else(classify, |()| lost()))
                }
            }
        })
    }

    /// Whether the server closed it: what it sent since its last use is read first (a
    /// restart's goodbye, say), without waiting for more.
    fn closed(&mut self) -> bool {
        if self.ended || self.client.is_closed() {
            return true;
        }
        let Self { io, runtime, .. } = self;
        self.ended = runtime.get().block_on(async {
            // Lets the runtime look at the socket before the connection is polled.
            tokio::task::yield_now().await;
            futures_util::poll!(io.as_mut()).is_ready()
        });
        self.ended
    }
}

fn timed_out() -> Error {
    Error::Unavailable(format!(
        "the database did not answer within {} s",
        WAIT.as_secs()
    ))
}

fn lost() -> Error {
    Error::Unavailable("the database is unreachable: connection closed".into())
}

/// At most `size` connections, made when first needed and kept.
pub(crate) struct Pool {
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
    size: usize,
    state: Mutex<State>,
    freed: Condvar,
}

#[derive(Default)]
struct State {
    idle: Vec<Connection>,
    /// Connections made and not closed, idle or in use.
    open: usize,
    waiting: usize,
}

/// The pool now: connections open, idle ones, and callers waiting for one.
pub(crate) struct Status {
    pub open: usize,
    pub idle: usize,
    pub waiting: usize,
}

impl Pool {
    pub(crate) fn new(config: tokio_postgres::Config, tls: MakeRustlsConnect, size: usize) -> Self {
        Self {
            config,
            tls,
            size,
            state: Mutex::default(),
            freed: Condvar::new(),
        }
    }

    /// A connection for this thread, waiting at most [`WAIT`] for one to be free; blocks.
    pub(crate) fn get(&self) -> Result<Pooled<'_>, Error> {
        let deadline = Instant::now() + WAIT;
        let mut state = self.lock();
        loop {
            while let Some(mut connection) = state.idle.pop() {
                if connection.closed() {
                    state.open -= 1;
                    continue;
                }
                return Ok(self.pooled(connection));
            }
            if state.open < self.size {
                state.open += 1;
                drop(state);
                return match Connection::open(&self.config, &self.tls) {
                    Ok(connection) => Ok(self.pooled(connection)),
                    Err(e) => {
                        self.lock().open -= 1;
                        self.freed.notify_one();
                        Err(e)
                    }
                };
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left == Duration::ZERO {
                return Err(timed_out());
            }
            state.waiting += 1;
            state = self
                .freed
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            state.waiting -= 1;
        }
    }

    pub(crate) fn status(&self) -> Status {
        let state = self.lock();
        Status {
            open: state.open,
            idle: state.idle.len(),
            waiting: state.waiting,
        }
    }

    fn pooled(&self, connection: Connection) -> Pooled<'_> {
        Pooled {
            pool: self,
            connection: Some(connection),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A connection taken from the pool; it goes back when dropped (closed ones do not).
pub(crate) struct Pooled<'p> {
    pool: &'p Pool,
    connection: Option<Connection>,
}

impl std::ops::Deref for Pooled<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.connection.as_ref().expect("held until dropped")
    }
}

impl std::ops::DerefMut for Pooled<'_> {
    fn deref_mut(&mut self) -> &mut Connection {
        self.connection.as_mut().expect("held until dropped")
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        let Some(connection) = self.connection.take() else {
            return;
        };
        let mut state = self.pool.lock();
        if connection.ended || connection.client.is_closed() {
            state.open -= 1;
        } else {
            state.idle.push(connection);
        }
        drop(state);
        self.pool.freed.notify_one();
    }
}
