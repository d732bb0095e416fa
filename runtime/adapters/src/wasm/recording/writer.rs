//! Writing an adapter's recordings: made into text and stored after the answers, on the host's
//! executor. The first after a quiet spell is written at once; then the writer rests, and
//! writes what came meanwhile in one transaction (pruned once). A busy adapter recording every
//! call pays one write every `REST`, not one a call, and its calls never wake the writer while
//! it rests.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;

use super::{Ended, Finished};
use crate::db::Db;
use crate::recordings::{self, Kept, NewRecording};
use crate::wasm::state::Caller;

/// Recordings of one adapter waiting to be written, at most, per replica: past it a recording
/// is dropped (and a warning says so) rather than hold memory while the database is slow.
pub(crate) const QUEUED_MOST: usize = 256;
/// Between two writes of one adapter's recordings, at least.
const REST: Duration = Duration::from_millis(50);

/// A recorded call as it ended, and when it started.
pub(super) struct Queued {
    pub(super) ended: Ended,
    pub(super) started_ms: i64,
}

/// One loaded adapter's writer, started with its first recording; it stops once the adapter
/// is unloaded and what it queued is written.
#[derive(Default)]
pub(crate) struct Writer(OnceLock<Arc<Queue>>);

struct Queue {
    waiting: Mutex<Waiting>,
    /// Told of the first recording queued while the writer is idle, and of the unloading.
    wake: Notify,
    /// The most queued: the adapter's `recordings_kept`, at most [`QUEUED_MOST`].
    most: usize,
    /// Whether the oldest queued may make room for a new one: it is then past what the
    /// adapter keeps, and would be pruned as it is written.
    replaced: bool,
}

#[derive(Default)]
struct Waiting {
    queued: VecDeque<Queued>,
    closed: bool,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Writer {
    pub(super) fn send(&self, caller: &Caller, queued: Queued) {
        let queue = self.0.get_or_init(|| {
            let limits = caller.granted.limits;
            let kept = Kept {
                count: limits.recordings_kept,
                hours: limits.recordings_hours,
            };
            let queue = Arc::new(Queue {
                waiting: Mutex::default(),
                wake: Notify::new(),
                most: (kept.count as usize).clamp(1, QUEUED_MOST),
                replaced: kept.count as usize <= QUEUED_MOST,
            });
            let (db, adapter) = (caller.services.db.clone(), caller.adapter.clone());
            caller
                .services
                .host
                .spawn(write(Arc::clone(&queue), db, adapter, kept));
            queue
        });
        let mut waiting = queue.lock();
        if waiting.queued.len() >= queue.most {
            if queue.replaced {
                waiting.queued.pop_front();
            } else {
                drop(waiting);
                tracing::warn!(adapter = %caller.adapter, "a recording was dropped: {QUEUED_MOST} wait to be written already");
                return;
            }
        }
        waiting.queued.push_back(queued);
        let first = waiting.queued.len() == 1;
        drop(waiting);
        if first {
            // Wakes the writer when it waits; while it rests, only leaves it a permit.
            queue.wake.notify_one();
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if let Some(queue) = self.0.get() {
            queue.lock().closed = true;
            queue.wake.notify_one();
        }
    }
}

async fn write(queue: Arc<Queue>, db: Db, adapter: String, kept: Kept) {
    loop {
        let (taken, closed) = {
            let mut waiting = queue.lock();
            (std::mem::take(&mut waiting.queued), waiting.closed)
        };
        if taken.is_empty() {
            if closed {
                return;
            }
            queue.wake.notified().await;
            continue;
        }
        // Made into text here, not on the calls' path.
        let finished: Vec<(Finished, i64)> = taken
            .into_iter()
            .map(|queued| (queued.ended.finish(), queued.started_ms))
            .collect();
        let name = adapter.clone();
        let stored = db
            .call(move |conn| {
                let news: Vec<NewRecording<'_>> = finished
                    .iter()
                    .map(|(finished, started_ms)| NewRecording {
                        export: finished.export,
                        outcome: finished.outcome.as_str(),
                        started_ms: *started_ms,
                        error: finished
                            .error
                            .as_ref()
                            .map(|(kind, message)| (kind.as_str(), message.as_str())),
                        duration_ms: finished.duration_ms,
                        cut: finished.cut,
                        body: &finished.body,
                    })
                    .collect();
                recordings::add_all(conn, &name, &news, kept)
            })
            .await;
        if let Err(e) = stored {
            tracing::warn!(adapter = %adapter, "cannot keep recordings: {e}");
        }
        if !closed {
            tokio::time::sleep(REST).await;
        }
    }
}
