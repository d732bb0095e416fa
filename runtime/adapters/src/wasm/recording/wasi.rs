//! The WASI clocks and random generators of a recorded adapter's stores: the host's own, each
//! value they give noted on the call's tape.

use std::convert::Infallible;
use std::time::Duration;

use rand_core::TryRng;
use serde_json::Value;
use wasmtime_wasi::clocks::{MonotonicClock, WallClock};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, Rng};

use super::{Answer, Tape};

/// The wall clock or the monotonic one, noting each reading.
pub(in crate::wasm) struct RecordedClocks<C> {
    clock: C,
    tape: Tape,
}

impl RecordedClocks<WallClock> {
    pub(in crate::wasm) fn wall(tape: Tape) -> Self {
        Self {
            clock: WallClock::new(),
            tape,
        }
    }
}

impl RecordedClocks<MonotonicClock> {
    pub(in crate::wasm) fn monotonic(tape: Tape) -> Self {
        Self {
            clock: MonotonicClock::new(),
            tape,
        }
    }
}

impl HostWallClock for RecordedClocks<WallClock> {
    fn resolution(&self) -> Duration {
        self.clock.resolution()
    }

    fn now(&self) -> Duration {
        if let Some(Answer::Recorded(answer)) = self.tape.answer("wall-clock.now", &Value::Null) {
            return Duration::from_nanos(answer.as_u64().unwrap_or_default());
        }
        let now = self.clock.now();
        let nanos = u64::try_from(now.as_nanos()).unwrap_or(u64::MAX);
        self.tape.note_clock("wall-clock.now", nanos);
        now
    }
}

impl HostMonotonicClock for RecordedClocks<MonotonicClock> {
    fn resolution(&self) -> u64 {
        self.clock.resolution()
    }

    fn now(&self) -> u64 {
        if let Some(Answer::Recorded(answer)) =
            self.tape.answer("monotonic-clock.now", &Value::Null)
        {
            return answer.as_u64().unwrap_or_default();
        }
        let now = self.clock.now();
        self.tape.note_clock("monotonic-clock.now", now);
        now
    }
}

/// A random generator noting the bytes it gives (runs of them as one import); in a replay,
/// giving the recorded ones.
pub(in crate::wasm) struct RecordedRandom {
    /// Seeded at the first draw: most calls of a small guest draw nothing.
    inner: Option<Box<dyn Rng + Send>>,
    import: &'static str,
    tape: Tape,
}

impl RecordedRandom {
    /// `wasi:random/random` (`secure`) or `wasi:random/insecure`.
    pub(in crate::wasm) fn new(tape: Tape, secure: bool) -> Self {
        Self {
            inner: None,
            import: if secure { "random" } else { "insecure-random" },
            tape,
        }
    }
}

impl TryRng for RecordedRandom {
    type Error = Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        let mut bytes = [0; 4];
        self.try_fill_bytes(&mut bytes)?;
        Ok(u32::from_le_bytes(bytes))
    }

    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        let mut bytes = [0; 8];
        self.try_fill_bytes(&mut bytes)?;
        Ok(u64::from_le_bytes(bytes))
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        let inner = &mut self.inner;
        self.tape.draw(self.import, dst, |dst| {
            inner
                .get_or_insert_with(wasmtime_wasi::thread_rng)
                .fill_bytes(dst);
        });
        Ok(())
    }
}
