//! A new build shadowing the serving one (`adapters install --shadow`, `<name>.shadow.wasm`):
//! for its sample of live calls (`limits.shadow_percent`), once the live call has answered,
//! the shadow runs on the same input with every import answered from the live call's tape
//! where it made the same one, and refused where it did not. Nothing it does leaves the
//! sandbox: what it sends is never sent, what it writes is never kept. The two outputs are
//! compared and the counts kept in the database, where every replica adds to them.
//!
//! Its cost stays off the live path: it runs after the answer, one call at a time, in
//! instances of its own (its own share of the server's), on a lane of one thread at the
//! lowest priority, and at most `limits.shadow_duty_percent` of the time (10%). A live call
//! in the sample that finds the shadow busy or resting is skipped and counted, never queued.
//! The counts are written once a second, not once a call.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::generation::Generation;
use super::recording::{Fixture, Mode, replay};
use super::sandbox::{AdapterPlace, Wait};
use crate::shadows::{self, Counts, DIFFERENCES_KEPT};

/// How often a shadow's counts are written.
const WRITTEN_EVERY: Duration = Duration::from_secs(1);

pub(crate) struct Shadow {
    pub(crate) generation: Arc<Generation>,
    /// Live calls seen, for the sample.
    calls: AtomicU64,
    /// Its one comparison at a time.
    turn: Arc<Semaphore>,
    /// Counted since the last write.
    pending: Mutex<Pending>,
    /// Until when it rests (`limits.shadow_duty_percent`).
    rests_until: Mutex<Instant>,
}

#[derive(Default)]
struct Pending {
    counts: Counts,
    /// The latest differences, as JSON text.
    differences: VecDeque<String>,
}

impl Shadow {
    /// A shadow of `generation`, its counts written every second while it lives.
    pub(crate) fn start(generation: Generation) -> Arc<Self> {
        let shadow = Arc::new(Self {
            generation: Arc::new(generation),
            calls: AtomicU64::new(0),
            turn: Arc::new(Semaphore::new(1)),
            pending: Mutex::default(),
            rests_until: Mutex::new(Instant::now()),
        });
        let host = shadow.generation.prepared().caller.services.host.clone();
        host.spawn(write_counts(Arc::downgrade(&shadow)));
        shadow
    }

    /// Its turn on the next live call, when the call is in the sample of `percent` in a
    /// hundred (spread evenly: call n is when the running share crosses a whole number) and
    /// it is free and rested; a call in the sample it cannot take is counted as skipped. Taken
    /// as the live call starts, so a call it skips costs that call no more than the check.
    pub(crate) fn turn(self: &Arc<Self>, percent: u32) -> Option<Turn> {
        if !in_sample(self.calls.fetch_add(1, Ordering::Relaxed), percent) {
            return None;
        }
        let rested = *self
            .rests_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            <= Instant::now();
        let taken = Arc::clone(&self.turn)
            .try_acquire_owned()
            .ok()
            .filter(|_| rested)
            .zip(AdapterPlace::try_take(&self.generation.prepared().caller));
        let Some((running, place)) = taken else {
            self.pending().counts.skipped += 1;
            return None;
        };
        Some(Turn {
            shadow: Arc::clone(self),
            running,
            place,
        })
    }

    fn pending(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A shadow's turn on one live call: it holds the shadow's one running comparison and an
/// instance place.
pub(crate) struct Turn {
    shadow: Arc<Shadow>,
    running: OwnedSemaphorePermit,
    place: AdapterPlace,
}

impl Turn {
    /// Runs the shadow on the live call (`live` builds its recording, off the live path) and
    /// counts how it compared. Returns at once.
    pub(crate) fn compare(self, live: impl FnOnce() -> Fixture + Send + 'static) {
        let Turn {
            shadow: this,
            running,
            place,
        } = self;
        let prepared = this.generation.prepared();
        let host = prepared.caller.services.host.clone();
        host.spawn(async move {
            let _running = running;
            let started = Instant::now();
            let live = live();
            let sandbox = &this.generation.sandbox;
            let wait = Wait::Holding(place);
            let replayed = match replay(sandbox, &prepared, &live, Mode::Shadow, wait).await {
                Ok(replayed) => replayed,
                Err(e) => {
                    tracing::warn!(adapter = %this.generation.name, "cannot run the shadow: {e:#}");
                    return;
                }
            };
            let matched = replayed.outcome == live.outcome && replayed.output == live.output;
            let most = prepared.caller.granted.limits.recording_kib as usize * 1024;
            let difference = (!matched).then(|| {
                let live_side =
                    json!({"outcome": live.outcome, "output": bounded(live.output, most)});
                json!({
                    "export": live.export,
                    "input": bounded(live.input, most),
                    "live": live_side,
                    "shadow": {
                        "outcome": replayed.outcome,
                        "output": bounded(replayed.output, most),
                        "error": replayed.error,
                    },
                    "refused": bounded(Value::from(replayed.refused), most),
                })
                .to_string()
            });
            // Its calls take the kernel's memory locks and the caches live calls need too,
            // which no scheduler priority keeps from them: it rests in proportion.
            let duty = prepared
                .caller
                .granted
                .limits
                .shadow_duty_percent
                .clamp(1, 100);
            let rest = started
                .elapsed()
                .mul_f64(f64::from(100 - duty) / f64::from(duty));
            *this
                .rests_until
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = Instant::now() + rest;
            let mut pending = this.pending();
            pending.counts.compared += 1;
            pending.counts.matched += u64::from(matched);
            if let Some(difference) = difference {
                if pending.differences.len() == DIFFERENCES_KEPT as usize {
                    pending.differences.pop_front();
                }
                pending.differences.push_back(difference);
            }
        });
    }
}

impl Shadow {
    /// Writes what was counted since the last write.
    async fn write(&self) {
        let Pending {
            counts,
            differences,
        } = std::mem::take(&mut *self.pending());
        if counts == Counts::default() {
            return;
        }
        let (adapter, sha256) = (self.generation.name.clone(), self.generation.sha256.clone());
        let differences: Vec<String> = differences.into();
        let written = self
            .generation
            .prepared()
            .caller
            .services
            .db
            .call(move |conn| shadows::compared(conn, &adapter, &sha256, counts, &differences))
            .await;
        if let Err(e) = written {
            tracing::warn!(adapter = %self.generation.name, "cannot keep a shadow's comparisons: {e}");
        }
    }
}

/// Writes a shadow's counts every [`WRITTEN_EVERY`] until it is dropped.
async fn write_counts(shadow: Weak<Shadow>) {
    loop {
        tokio::time::sleep(WRITTEN_EVERY).await;
        let Some(shadow) = shadow.upgrade() else {
            return;
        };
        shadow.write().await;
    }
}

/// Whether call `n` (from 0) is in a sample of `percent`.
fn in_sample(n: u64, percent: u32) -> bool {
    let percent = u64::from(percent.min(100));
    (n + 1) * percent / 100 > n * percent / 100
}

/// A value of a difference, summarised by its size past a quarter of `most` (the recording
/// bound): four of them make one difference.
fn bounded(value: Value, most: usize) -> Value {
    let bytes = value.to_string().len();
    if bytes <= most / 4 {
        value
    } else {
        json!({"cut": format!("{bytes} bytes, past limits.recording_kib")})
    }
}

#[cfg(test)]
mod tests {
    use super::in_sample;

    #[test]
    fn a_sample_is_spread_evenly() {
        let taken = |percent| (0..100).filter(|&n| in_sample(n, percent)).count();
        assert_eq!((taken(100), taken(25), taken(1)), (100, 25, 1));
        let quarter: Vec<u64> = (0..8).filter(|&n| in_sample(n, 25)).collect();
        assert_eq!(quarter, [3, 7]);
    }
}
