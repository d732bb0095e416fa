//! Instances kept between the requests of an adapter whose grant says `reuse = N` (N > 1): one
//! serves up to N requests, one at a time, and goes after a trap, a deadline, a refused memory
//! or table growth, a call cut short, or its N-th request. A new generation starts with none
//! (they belong to the code they were made from). Jobs, hooks and tool calls always get a fresh
//! instance. What one request leaves in the instance's memory the next can read: that is the
//! trade the adapter's operator makes, and the registry entry says so.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::Store;
use wasmtime::component::Instance;
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;

use super::state::{HostState, STDERR_CAPACITY};
use super::wasmtime_config::MAX_INSTANCES;

/// The most requests one instance may serve (`reuse`).
pub(crate) const MAX_REUSE: u32 = 1_000;

/// Idle instances kept, all adapters together. With the [`MAX_INSTANCES`] in use they stay
/// within the engine's pool, which has room for twice as many.
pub(crate) const MAX_KEPT: usize = MAX_INSTANCES / 2;

/// How long an instance is kept unused before its memory is given back.
pub(crate) const IDLE: Duration = Duration::from_secs(10);

/// An instance between two requests.
pub(crate) struct Kept {
    pub store: Store<HostState>,
    pub instance: Instance,
    /// What the guest wrote to stderr, all its requests together.
    pub stderr: MemoryOutputPipe,
    /// Requests it has served.
    pub served: u32,
    since: Instant,
    _slot: OwnedSemaphorePermit,
}

impl Kept {
    /// Whether an instance that has just served a request may serve another, of the `reuse`
    /// it is allowed.
    pub(crate) fn fit(store: &Store<HostState>, stderr: &MemoryOutputPipe, served: u32) -> bool {
        let state = store.data();
        served < state.caller.granted.reuse.0
            && !state.unfit
            && !state.limits.hit
            // A full stderr would fail the guest's next writes, and hide what it last said.
            && stderr.contents().len() < STDERR_CAPACITY / 2
    }
}

/// The idle instances of one generation's code.
#[derive(Default)]
pub(crate) struct Idle {
    kept: Mutex<Vec<Kept>>,
    /// Whether a task is dropping those idle for longer than [`IDLE`].
    sweeping: AtomicBool,
}

impl Idle {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Kept>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The instance used last, if one is idle (its memory is the likeliest to be in cache).
    pub(crate) fn take(&self) -> Option<Kept> {
        self.lock().pop()
    }

    /// Keeps an instance that may serve another request, if one of the server's `slots` for
    /// idle instances is free and the adapter keeps fewer than `most`; otherwise it goes.
    pub(crate) fn keep(
        self: &Arc<Self>,
        slots: &Arc<Semaphore>,
        most: usize,
        store: Store<HostState>,
        instance: Instance,
        stderr: MemoryOutputPipe,
        served: u32,
    ) {
        let Ok(slot) = Arc::clone(slots).try_acquire_owned() else {
            return;
        };
        {
            let mut kept = self.lock();
            if kept.len() >= most {
                return;
            }
            kept.push(Kept {
                store,
                instance,
                stderr,
                served,
                since: Instant::now(),
                _slot: slot,
            });
        }
        if !self.sweeping.swap(true, Ordering::AcqRel) {
            tokio::spawn(sweep(Arc::downgrade(self)));
        }
    }
}

/// Drops the instances of `idle` unused for [`IDLE`], until none is left or the code is gone.
async fn sweep(idle: Weak<Idle>) {
    loop {
        tokio::time::sleep(IDLE / 2).await;
        let Some(idle) = idle.upgrade() else {
            return;
        };
        let (stale, done) = {
            let mut kept = idle.lock();
            let (stale, fresh): (Vec<Kept>, Vec<Kept>) = std::mem::take(&mut *kept)
                .into_iter()
                .partition(|k| k.since.elapsed() >= IDLE);
            *kept = fresh;
            // Decided under the lock: a keep after it starts a sweeper of its own.
            let done = kept.is_empty();
            if done {
                idle.sweeping.store(false, Ordering::Release);
            }
            (stale, done)
        };
        // Their memory is given back outside the lock.
        drop(stale);
        if done {
            return;
        }
    }
}
