//! What the MCP servers and the remote A2A agents share: one keeper task per entry, kept
//! (reconnecting, re-reading) until the runtime stops, and a status it updates for the API.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use serde::Serialize;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Where an entry stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = ConnectionState)]
pub enum State {
    Connecting,
    Ready,
    Error,
}

/// The keepers of a set of entries.
#[derive(Default)]
pub(crate) struct Keepers {
    running: Mutex<Vec<JoinHandle<()>>>,
    stop: CancellationToken,
}

impl Keepers {
    pub(crate) fn spawn(&self, keeper: impl Future<Output = ()> + Send + 'static) {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(tokio::spawn(keeper));
    }

    /// Resolves once [`Keepers::stop`] is called: keepers return then.
    pub(crate) async fn stopped(&self) {
        self.stop.cancelled().await;
    }

    /// Tells every keeper to stop, and waits for them.
    pub(crate) fn stop(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.stop.cancel();
            let running =
                std::mem::take(&mut *self.running.lock().unwrap_or_else(PoisonError::into_inner));
            for task in running {
                let _ = task.await;
            }
        })
    }
}

/// Returns once `trying()` says no entry is on its first try, or after `within`.
pub(crate) async fn settled(within: Duration, trying: impl Fn() -> bool) {
    let deadline = Instant::now() + within;
    while trying() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An entry's status, shared by its keeper and whoever shows it.
pub(crate) struct Shown<S>(Mutex<S>);

impl<S: Clone> Shown<S> {
    pub(crate) fn new(status: S) -> Self {
        Self(Mutex::new(status))
    }

    pub(crate) fn get(&self) -> S {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn update(&self, change: impl FnOnce(&mut S)) {
        change(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner));
    }
}
