//! A new build shadowing the serving one (`adapters install --shadow`, `<name>.shadow.wasm`):
//! for its sample of live calls (`limits.shadow_percent`), once the live call has answered,
//! the shadow runs on the same input with every import answered from the live call's tape
//! where it made the same one, and refused where it did not. Nothing it does leaves the
//! sandbox: what it sends is never sent, what it writes is never kept. The two outputs are
//! compared and the counts kept in the database, where every replica adds to them.
//!
//! Its cost stays off the live path: it runs after the answer, on the guest lane, in
//! instances of its own (its own `max_instances`, its own share of the server's); a live call
//! whose shadow finds none free is skipped and counted, never queued.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

use super::generation::Generation;
use super::recording::{Fixture, Mode, replay};
use super::sandbox::{AdapterPlace, Wait};
use crate::shadows;

pub(crate) struct Shadow {
    pub(crate) generation: Arc<Generation>,
    /// Live calls seen, for the sample.
    calls: AtomicU64,
    /// Calls in the sample skipped since the last comparison was written.
    skipped: AtomicU64,
}

impl Shadow {
    pub(crate) fn new(generation: Generation) -> Self {
        Self {
            generation: Arc::new(generation),
            calls: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
        }
    }

    /// Whether the next live call is in the sample of `percent` in a hundred (spread evenly:
    /// call n is when the running share crosses a whole number).
    pub(crate) fn sampled(&self, percent: u32) -> bool {
        in_sample(self.calls.fetch_add(1, Ordering::Relaxed), percent)
    }

    /// Runs the shadow on a live call (`live` builds its recording, off the live path) and
    /// keeps how it compared. Returns at once.
    pub(crate) fn compare(self: Arc<Self>, live: impl FnOnce() -> Fixture + Send + 'static) {
        let prepared = self.generation.prepared();
        let Some(place) = AdapterPlace::try_take(&prepared.caller) else {
            self.skipped.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let host = prepared.caller.services.host.clone();
        host.spawn(async move {
            let live = live();
            let sandbox = &self.generation.sandbox;
            let wait = Wait::Holding(place);
            let replayed = match replay(sandbox, &prepared, &live, Mode::Shadow, wait).await {
                Ok(replayed) => replayed,
                Err(e) => {
                    tracing::warn!(adapter = %self.generation.name, "cannot run the shadow: {e:#}");
                    return;
                }
            };
            let matched = replayed.outcome == live.outcome && replayed.output == live.output;
            let most = prepared.caller.granted.limits.recording_kib as usize * 1024;
            let difference = (!matched).then(|| {
                let live_side = json!({"outcome": live.outcome, "output": bounded(live.output, most)});
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
            let skipped = self.skipped.swap(0, Ordering::Relaxed);
            let (adapter, sha256) = (self.generation.name.clone(), self.generation.sha256.clone());
            let kept = prepared
                .caller
                .services
                .db
                .call(move |conn| {
                    shadows::compared(
                        conn,
                        &adapter,
                        &sha256,
                        matched,
                        skipped,
                        difference.as_deref(),
                    )
                })
                .await;
            if let Err(e) = kept {
                tracing::warn!(adapter = %self.generation.name, "cannot keep a shadow's comparison: {e}");
            }
        });
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
