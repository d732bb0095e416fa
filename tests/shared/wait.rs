//! The one way tests and benches wait for something: [`until`] runs a check until it gives a
//! value or a deadline passes (then `None`), [`eventually`] panics then, naming what was
//! awaited, and [`until_blocking`] is [`until`] for code outside async (servers started before
//! a runtime exists).

use std::time::{Duration, Instant};

/// How often a check runs, unless its caller needs finer timing.
pub const EVERY: Duration = Duration::from_millis(50);

/// Runs `check` every `every` until it gives a value, or `None` once `within` has passed.
pub async fn until<T>(
    within: Duration,
    every: Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> Option<T> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = check().await {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(every).await;
    }
}

/// [`until`] every [`EVERY`], panicking with `what` when `within` passes first.
pub async fn eventually<T>(
    what: &str,
    within: Duration,
    check: impl AsyncFnMut() -> Option<T>,
) -> T {
    until(within, EVERY, check)
        .await
        .unwrap_or_else(|| panic!("{what}: not within {within:?}"))
}

/// [`until`], blocking the thread between checks.
pub fn until_blocking<T>(
    within: Duration,
    every: Duration,
    mut check: impl FnMut() -> Option<T>,
) -> Option<T> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = check() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(every);
    }
}
