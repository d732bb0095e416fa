//! Deciding, on each scheduler tick, whether a schedule fires and when it is next due.
//!
//! Everything here is a pure function of the schedule and the current time, so a restart
//! or a long downtime is handled by the same rules as an ordinary tick.

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

use super::cron::CronExpr;

/// What to do with slots missed while the service was down or busy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum CatchUp {
    /// Fire once for the whole backlog, then carry on from now.
    #[default]
    Coalesce,
    /// Fire every missed slot, oldest first, one per tick.
    All,
    /// Drop slots that are more than a tick late.
    Skip,
}

impl CatchUp {
    /// The name it is stored and configured by, as accepted by [`FromStr`].
    pub fn as_str(self) -> &'static str {
        match self {
            CatchUp::Coalesce => "coalesce",
            CatchUp::All => "all",
            CatchUp::Skip => "skip",
        }
    }
}

impl FromStr for CatchUp {
    type Err = String;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "coalesce" => Ok(CatchUp::Coalesce),
            "all" => Ok(CatchUp::All),
            "skip" => Ok(CatchUp::Skip),
            _ => Err(format!(
                "unknown catch-up policy \"{name}\": use coalesce, all or skip"
            )),
        }
    }
}

/// The outcome of a tick for a schedule that is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The slot to fire now; `None` re-arms the schedule without firing.
    pub fire: Option<DateTime<Utc>>,
    /// When the schedule is due next.
    pub next_run_at: DateTime<Utc>,
}

/// When a brand-new schedule is first due: its first slot strictly after `now`.
pub fn first_run(cron: &CronExpr, now: DateTime<Utc>, tz: &Tz) -> Option<DateTime<Utc>> {
    cron.next_after(now, tz)
}

/// Decides what a tick at `now` does for a schedule due at `next_run_at`.
///
/// Returns `None` when the schedule is not due yet, and also when it has no slot left to
/// re-arm to, which cannot happen for a schedule accepted by [`super::cron::parse`]; either
/// way the caller leaves the schedule untouched.
pub fn plan(
    cron: &CronExpr,
    policy: CatchUp,
    next_run_at: DateTime<Utc>,
    now: DateTime<Utc>,
    tick: Duration,
    tz: &Tz,
) -> Option<Decision> {
    if next_run_at > now {
        return None;
    }
    let decision = match policy {
        CatchUp::Coalesce => Decision {
            fire: Some(next_run_at),
            next_run_at: cron.next_after(now, tz)?,
        },
        // One step at a time, so a backlog is worked off one slot per tick.
        CatchUp::All => Decision {
            fire: Some(next_run_at),
            next_run_at: cron.next_after(next_run_at, tz)?,
        },
        CatchUp::Skip => {
            let late = (now - next_run_at)
                .to_std()
                .is_ok_and(|behind| behind > tick);
            Decision {
                fire: (!late).then_some(next_run_at),
                next_run_at: cron.next_after(now, tz)?,
            }
        }
    };
    Some(decision)
}

/// A short countdown for the dashboard: "due now", "in 45 s", "in 5 min", "in 3 h 10 min"
/// or "in 2 days".
///
/// Seconds and minutes are rounded up, so it never reads "in 0 s" and turns into "due now"
/// exactly when the slot is due; from a day on it rounds to the nearest whole day.
pub fn describe_next(next: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let remaining = match (next - now).to_std() {
        Ok(remaining) if !remaining.is_zero() => remaining,
        _ => return "due now".to_string(),
    };
    let seconds = remaining.as_secs() + u64::from(remaining.subsec_nanos() > 0);
    if seconds < 60 {
        return format!("in {seconds} s");
    }
    let minutes = seconds.div_ceil(60);
    match (minutes / 60, minutes % 60) {
        (0, minutes) => format!("in {minutes} min"),
        (hours @ 1..24, 0) => format!("in {hours} h"),
        (hours @ 1..24, minutes) => format!("in {hours} h {minutes} min"),
        _ => match (minutes + 12 * 60) / (24 * 60) {
            1 => "in 1 day".to_string(),
            days => format!("in {days} days"),
        },
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeDelta, TimeZone};

    use super::*;
    use crate::scheduler::cron::parse;

    const TICK: Duration = Duration::from_secs(30);
    const TZ: Tz = Tz::UTC;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
    }

    /// A tick half a minute after the 12:00 slot, with the scheduler down for 72 hours before it.
    fn downtime() -> (CronExpr, DateTime<Utc>, DateTime<Utc>) {
        let cron = parse("every 1h").unwrap();
        (cron, utc(2026, 5, 29, 12, 0, 0), utc(2026, 6, 1, 12, 0, 30))
    }

    #[test]
    fn catch_up_names_round_trip() {
        assert_eq!(CatchUp::default(), CatchUp::Coalesce);
        for policy in [CatchUp::Coalesce, CatchUp::All, CatchUp::Skip] {
            assert_eq!(policy.as_str().parse(), Ok(policy));
            let json = format!("\"{}\"", policy.as_str());
            assert_eq!(serde_json::to_string(&policy).unwrap(), json);
            assert_eq!(serde_json::from_str::<CatchUp>(&json).unwrap(), policy);
        }
        assert_eq!(
            "Skip".parse::<CatchUp>(),
            Err("unknown catch-up policy \"Skip\": use coalesce, all or skip".to_string())
        );
    }

    #[test]
    fn first_run_is_the_first_slot_strictly_after_now() {
        let cron = parse("*/5 * * * *").unwrap();
        let now = utc(2026, 6, 1, 12, 5, 0);
        assert_eq!(first_run(&cron, now, &TZ), Some(utc(2026, 6, 1, 12, 10, 0)));
    }

    #[test]
    fn not_due_is_none_for_every_policy() {
        let cron = parse("every 5m").unwrap();
        let now = utc(2026, 6, 1, 12, 4, 59);
        for policy in [CatchUp::Coalesce, CatchUp::All, CatchUp::Skip] {
            assert_eq!(
                plan(&cron, policy, utc(2026, 6, 1, 12, 5, 0), now, TICK, &TZ),
                None
            );
        }
    }

    #[test]
    fn an_on_time_slot_fires_and_rearms_under_every_policy() {
        let cron = parse("every 5m").unwrap();
        let slot = utc(2026, 6, 1, 12, 5, 0);
        let now = slot + TimeDelta::seconds(5);
        for policy in [CatchUp::Coalesce, CatchUp::All, CatchUp::Skip] {
            let decision = plan(&cron, policy, slot, now, TICK, &TZ);
            let expected = Decision {
                fire: Some(slot),
                next_run_at: utc(2026, 6, 1, 12, 10, 0),
            };
            assert_eq!(decision, Some(expected), "{policy:?}");
        }
    }

    #[test]
    fn coalesce_fires_a_long_backlog_once() {
        let (cron, next_run_at, now) = downtime();
        let decision = plan(&cron, CatchUp::Coalesce, next_run_at, now, TICK, &TZ);
        let expected = Decision {
            fire: Some(next_run_at),
            next_run_at: utc(2026, 6, 1, 13, 0, 0),
        };
        assert_eq!(decision, Some(expected));
    }

    #[test]
    fn all_backfills_one_slot_per_tick_until_caught_up() {
        let (cron, mut next_run_at, now) = downtime();
        let first = plan(&cron, CatchUp::All, next_run_at, now, TICK, &TZ).unwrap();
        assert_eq!(first.fire, Some(next_run_at));
        assert_eq!(first.next_run_at, next_run_at + TimeDelta::hours(1));

        let mut fired = Vec::new();
        while let Some(decision) = plan(&cron, CatchUp::All, next_run_at, now, TICK, &TZ) {
            fired.extend(decision.fire);
            next_run_at = decision.next_run_at;
        }
        // Every hour from 2026-05-29 12:00 to 2026-06-01 12:00 inclusive, oldest first.
        assert_eq!(fired.len(), 73);
        assert_eq!(fired[0], utc(2026, 5, 29, 12, 0, 0));
        assert_eq!(fired[72], utc(2026, 6, 1, 12, 0, 0));
        assert!(
            fired
                .windows(2)
                .all(|pair| pair[1] - pair[0] == TimeDelta::hours(1))
        );
        assert_eq!(next_run_at, utc(2026, 6, 1, 13, 0, 0));
    }

    #[test]
    fn skip_drops_a_late_slot_and_rearms() {
        let (cron, next_run_at, now) = downtime();
        let decision = plan(&cron, CatchUp::Skip, next_run_at, now, TICK, &TZ);
        let expected = Decision {
            fire: None,
            next_run_at: utc(2026, 6, 1, 13, 0, 0),
        };
        assert_eq!(decision, Some(expected));
    }

    #[test]
    fn skip_counts_a_slot_late_only_beyond_one_tick() {
        let cron = parse("every 1h").unwrap();
        let slot = utc(2026, 6, 1, 12, 0, 0);
        let at = |late: TimeDelta| plan(&cron, CatchUp::Skip, slot, slot + late, TICK, &TZ);
        assert_eq!(at(TimeDelta::seconds(5)).unwrap().fire, Some(slot));
        assert_eq!(at(TimeDelta::seconds(30)).unwrap().fire, Some(slot));
        assert_eq!(at(TimeDelta::milliseconds(30_001)).unwrap().fire, None);
    }

    #[test]
    fn describes_the_countdown() {
        let now = utc(2026, 6, 1, 12, 0, 0);
        let later = |seconds: i64| now + TimeDelta::seconds(seconds);
        for (next, text) in [
            (now - TimeDelta::hours(1), "due now"),
            (now, "due now"),
            (now + TimeDelta::milliseconds(200), "in 1 s"),
            (later(45), "in 45 s"),
            (later(59), "in 59 s"),
            (later(60), "in 1 min"),
            (later(4 * 60 + 1), "in 5 min"),
            (later(59 * 60 + 30), "in 1 h"),
            (later(3 * 3600 + 10 * 60), "in 3 h 10 min"),
            (later(23 * 3600 + 59 * 60), "in 23 h 59 min"),
            (later(24 * 3600), "in 1 day"),
            (later(35 * 3600), "in 1 day"),
            (later(36 * 3600), "in 2 days"),
            (later(2 * 24 * 3600 + 5 * 3600), "in 2 days"),
        ] {
            assert_eq!(describe_next(next, now), text);
        }
    }
}
