//! Writing an adapter's recordings: after the answers, on the host's executor, all those that
//! came while the last were written in one transaction (and pruned once), so a busy adapter
//! recording every call pays one write a batch, not one a call.

use std::sync::OnceLock;

use tokio::sync::mpsc;

use super::Finished;
use crate::db::Db;
use crate::recordings::{self, Kept, NewRecording};
use crate::wasm::state::Caller;

/// Recordings of one adapter waiting to be written, at most, per replica: past it a recording
/// is dropped (and a warning says so) rather than hold memory while the database is slow.
pub(crate) const QUEUED_MOST: usize = 256;
/// Written in one transaction, at most.
const BATCH_MOST: usize = 64;

/// A finished recording and when its call started.
pub(super) struct Queued {
    pub(super) finished: Finished,
    pub(super) started_ms: i64,
}

/// One loaded adapter's writer, started with its first recording; it stops once the adapter
/// is unloaded and what it queued is written.
#[derive(Default)]
pub(crate) struct Writer(OnceLock<mpsc::Sender<Queued>>);

impl Writer {
    pub(super) fn send(&self, caller: &Caller, queued: Queued) {
        let queue = self.0.get_or_init(|| {
            let (queue, waiting) = mpsc::channel(QUEUED_MOST);
            let limits = caller.granted.limits;
            let kept = Kept {
                count: limits.recordings_kept,
                hours: limits.recordings_hours,
            };
            let (db, adapter) = (caller.services.db.clone(), caller.adapter.clone());
            caller
                .services
                .host
                .spawn(write(db, adapter, kept, waiting));
            queue
        });
        if queue.try_send(queued).is_err() {
            tracing::warn!(adapter = %caller.adapter, "a recording was dropped: {QUEUED_MOST} wait to be written already");
        }
    }
}

async fn write(db: Db, adapter: String, kept: Kept, mut waiting: mpsc::Receiver<Queued>) {
    let mut batch = Vec::with_capacity(BATCH_MOST);
    while waiting.recv_many(&mut batch, BATCH_MOST).await > 0 {
        let (taken, name) = (std::mem::take(&mut batch), adapter.clone());
        let stored = db
            .call(move |conn| {
                let news: Vec<NewRecording<'_>> = taken
                    .iter()
                    .map(
                        |Queued {
                             finished,
                             started_ms,
                         }| NewRecording {
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
                        },
                    )
                    .collect();
                recordings::add_all(conn, &name, &news, kept)
            })
            .await;
        if let Err(e) = stored {
            tracing::warn!(adapter = %adapter, "cannot keep recordings: {e}");
        }
    }
}
