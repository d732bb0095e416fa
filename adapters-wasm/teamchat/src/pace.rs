//! How fast the agent has been lately, which decides whether a slash command is answered
//! inline. A guest cannot bound an agent run, and a run past the request's deadline is cut off
//! with a 503, so a command runs inline only when each of the last few runs (replies to
//! events and deferred commands included) took at most half the platform's 3 s, leaving the
//! other half for a run slower than those and for the network. An inline run counts as slow
//! (`?`) until it finishes: one the deadline cut off keeps commands deferred until newer runs
//! have pushed it out.
//!
//! The samples live in one kv value; two runs ending at once may both rewrite it and one
//! sample is lost, which only makes the estimate older, never wrong about a cut-off run for
//! long.

use std::time::Instant;

use crate::service::adapter::agent::{self, RunError, RunOutcome, RunReply, RunRequest};
use crate::service::adapter::kv;

const KEY: &str = "pace:recent";
/// Runs remembered.
const SAMPLES: usize = 5;
/// The slowest recent run a command may still be answered inline after.
pub const INLINE_BUDGET_MS: u64 = 1_500;
const UNFINISHED: &str = "?";

/// One run: its duration, or `None` while it runs inline (or when it was cut off).
type Sample = Option<u64>;

fn parse(value: &str) -> Vec<Sample> {
    value
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().ok())
        .collect()
}

fn format(samples: &[Sample]) -> String {
    let text: Vec<String> = samples
        .iter()
        .map(|s| s.map_or(UNFINISHED.to_owned(), |ms| ms.to_string()))
        .collect();
    text.join(",")
}

/// Inline only after at least one run, with every recent run finished within the budget.
fn fast(samples: &[Sample]) -> bool {
    !samples.is_empty()
        && samples
            .iter()
            .all(|s| s.is_some_and(|ms| ms <= INLINE_BUDGET_MS))
}

/// `sample` added as the newest; an unfinished run it completes no longer counts.
fn with(mut samples: Vec<Sample>, sample: Sample, completes_unfinished: bool) -> Vec<Sample> {
    if completes_unfinished && let Some(i) = samples.iter().position(Option::is_none) {
        samples.remove(i);
    }
    samples.push(sample);
    let excess = samples.len().saturating_sub(SAMPLES);
    samples.drain(..excess);
    samples
}

fn load() -> Vec<Sample> {
    match kv::get(KEY) {
        Ok(Some(bytes)) => parse(&String::from_utf8_lossy(&bytes)),
        _ => Vec::new(),
    }
}

fn store(samples: &[Sample]) {
    // Best effort: a lost sample only makes the estimate older.
    let _ = kv::set(KEY, format(samples).as_bytes(), None);
}

/// Whether the agent has been fast enough lately to answer inline.
pub fn inline_is_safe() -> bool {
    fast(&load())
}

/// Runs the agent, remembering how long it took: as the next turn of a conversation (a run
/// that may wait for a person; `then` is queued once it goes on), or on its own.
pub fn run(
    request: &RunRequest,
    conversation: Option<(&str, &[u8])>,
) -> Result<RunOutcome, RunError> {
    let started = Instant::now();
    let result = match conversation {
        Some((key, then)) => agent::run_in_conversation_or_wait(key, request, then),
        None => agent::run(request).map(RunOutcome::Answered),
    };
    store(&with(load(), Some(elapsed_ms(started)), false));
    result
}

/// Runs the agent inside a request's deadline: counted as slow until it finishes.
pub fn run_inline(request: &RunRequest) -> Result<RunReply, RunError> {
    store(&with(load(), None, false));
    let started = Instant::now();
    let result = agent::run(request);
    store(&with(load(), Some(elapsed_ms(started)), true));
    result
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_only_when_every_recent_run_was() {
        assert!(!fast(&[]), "nothing known yet: defer");
        assert!(fast(&parse("120,1500,30")));
        assert!(!fast(&parse("120,1501,30")));
        assert!(
            !fast(&parse("120,?,30")),
            "an inline run still going or cut off"
        );
    }

    #[test]
    fn keeps_the_last_runs_and_completes_an_unfinished_one() {
        let samples = with(parse("1,2,3,4,5"), Some(6), false);
        assert_eq!(format(&samples), "2,3,4,5,6");
        let started = with(samples, None, false);
        assert_eq!(format(&started), "3,4,5,6,?");
        assert_eq!(format(&with(started, Some(7), true)), "3,4,5,6,7");
    }

    #[test]
    fn a_cut_off_run_stays_slow_until_newer_runs_push_it_out() {
        let mut samples = with(parse("100,100"), None, false);
        for _ in 0..SAMPLES - 1 {
            samples = with(samples, Some(100), false);
            assert!(!fast(&samples), "{}", format(&samples));
        }
        samples = with(samples, Some(100), false);
        assert!(fast(&samples), "{}", format(&samples));
    }

    #[test]
    fn unreadable_samples_count_as_slow() {
        assert_eq!(parse("12,x,"), [Some(12), None]);
    }
}
