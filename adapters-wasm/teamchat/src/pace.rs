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

/// One run, as far as the choice goes: within the budget, past it, or still running inline
/// (or cut off: unfinished counts as slow).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sample {
    Fast,
    Slow,
    Unfinished,
}

impl Sample {
    fn took(ms: u64) -> Self {
        if ms <= INLINE_BUDGET_MS {
            Self::Fast
        } else {
            Self::Slow
        }
    }

    fn parse(text: &str) -> Self {
        match text {
            "f" => Self::Fast,
            "s" => Self::Slow,
            // Durations, as a build before this one kept them.
            ms => ms.parse().map_or(Self::Unfinished, Self::took),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Fast => "f",
            Self::Slow => "s",
            Self::Unfinished => "?",
        }
    }
}

fn parse(value: &str) -> Vec<Sample> {
    value
        .split(',')
        .filter(|s| !s.is_empty())
        .map(Sample::parse)
        .collect()
}

fn format(samples: &[Sample]) -> String {
    let text: Vec<&str> = samples.iter().map(|s| s.as_str()).collect();
    text.join(",")
}

/// Inline only after at least one run, with every recent run finished within the budget.
fn fast(samples: &[Sample]) -> bool {
    !samples.is_empty() && samples.iter().all(|s| *s == Sample::Fast)
}

/// `sample` added as the newest; an unfinished run it completes no longer counts.
fn with(mut samples: Vec<Sample>, sample: Sample, completes_unfinished: bool) -> Vec<Sample> {
    if completes_unfinished && let Some(i) = samples.iter().position(|s| *s == Sample::Unfinished) {
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

/// Adds `sample`, writing only a change: runs as fast as the last few leave nothing to write.
fn remember(sample: Sample, completes_unfinished: bool) {
    let before = load();
    let after = with(before.clone(), sample, completes_unfinished);
    if after != before {
        // Best effort: a lost sample only makes the estimate older.
        let _ = kv::set(KEY, format(&after).as_bytes(), None);
    }
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
    remember(Sample::took(elapsed_ms(started)), false);
    result
}

/// Runs the agent inside a request's deadline: counted as slow until it finishes.
pub fn run_inline(request: &RunRequest) -> Result<RunReply, RunError> {
    remember(Sample::Unfinished, false);
    let started = Instant::now();
    let result = agent::run(request);
    remember(Sample::took(elapsed_ms(started)), true);
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
        assert!(fast(&parse("f,f,f")));
        assert!(!fast(&parse("f,s,f")));
        assert!(
            !fast(&parse("f,?,f")),
            "an inline run still going or cut off"
        );
        // Durations kept by an earlier build.
        assert!(fast(&parse("120,1500,30")));
        assert!(!fast(&parse("120,1501,30")));
    }

    #[test]
    fn keeps_the_last_runs_and_completes_an_unfinished_one() {
        let samples = with(parse("s,f,f,f,f"), Sample::Fast, false);
        assert_eq!(format(&samples), "f,f,f,f,f");
        assert_eq!(
            with(samples.clone(), Sample::Fast, false),
            samples,
            "nothing to write"
        );
        let started = with(samples, Sample::Unfinished, false);
        assert_eq!(format(&started), "f,f,f,f,?");
        assert_eq!(format(&with(started, Sample::Slow, true)), "f,f,f,f,s");
    }

    #[test]
    fn a_cut_off_run_stays_slow_until_newer_runs_push_it_out() {
        let mut samples = with(parse("f,f"), Sample::Unfinished, false);
        for _ in 0..SAMPLES - 1 {
            samples = with(samples, Sample::Fast, false);
            assert!(!fast(&samples), "{}", format(&samples));
        }
        samples = with(samples, Sample::Fast, false);
        assert!(fast(&samples), "{}", format(&samples));
    }

    #[test]
    fn unreadable_samples_count_as_slow() {
        assert_eq!(parse("12,x,"), [Sample::Fast, Sample::Unfinished]);
    }
}
