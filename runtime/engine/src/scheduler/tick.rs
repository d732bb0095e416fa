//! One scheduler tick's planning and persisting: which schedules fire now. Kept apart from
//! dispatching so it can be measured on its own (`benches/scheduler_tick.rs`).

use std::collections::HashSet;
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use super::plan::{self, CatchUp};
use super::{cron, store};
use crate::db::Conn;
use crate::error::Result;

/// A schedule to run now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    pub name: String,
    pub agent: String,
    pub prompt: String,
}

/// What a tick decided.
#[derive(Debug, Default)]
pub struct TickPlan {
    pub due: Vec<Due>,
    /// Schedules that could not be planned, with the reason; the others are unaffected.
    pub problems: Vec<(String, String)>,
}

/// Plans every enabled schedule that is due and persists the new `last_run_at` and
/// `next_run_at` in one transaction, before anything is dispatched, so a restart mid-run never
/// fires the same slot twice. Schedules in `in_flight`, or with a run in progress started by
/// another process (`schedule run`, another replica), are skipped: no self-overlap. Ticks of
/// several processes take turns, each seeing what the one before it planned, so a slot fires
/// once even if two replicas tick at once.
pub fn plan_tick(
    conn: &mut Conn,
    now: DateTime<Utc>,
    tick: Duration,
    tz: &Tz,
    in_flight: &HashSet<String>,
) -> Result<TickPlan> {
    conn.transaction(|tx| plan_in(tx, now, tick, tz, in_flight))
}

fn plan_in(
    tx: &Conn,
    now: DateTime<Utc>,
    tick: Duration,
    tz: &Tz,
    in_flight: &HashSet<String>,
) -> Result<TickPlan> {
    tx.serialize_on("scheduler tick")?;
    let mut result = TickPlan::default();
    let elsewhere = store::runs_in_progress(tx)?;
    for schedule in store::due(tx, now)? {
        if in_flight.contains(&schedule.name) || elsewhere.contains_key(&schedule.name) {
            continue;
        }
        let parsed = cron::parse(&schedule.cron_expression).and_then(|cron| {
            let policy: CatchUp = schedule.catch_up_policy.parse()?;
            Ok((cron, policy))
        });
        let (cron, policy) = match parsed {
            Ok(parsed) => parsed,
            Err(e) => {
                result.problems.push((schedule.name, e));
                continue;
            }
        };
        let next_run_at = schedule
            .next_run_at
            .as_deref()
            .and_then(store::parse_timestamp);
        let Some(next_run_at) = next_run_at else {
            // New (or unreadable): arm it for its first slot after now.
            if let Some(first) = plan::first_run(&cron, now, tz) {
                store::record_plan(tx, &schedule.name, None, first)?;
            }
            continue;
        };
        let Some(decision) = plan::plan(&cron, policy, next_run_at, now, tick, tz) else {
            continue;
        };
        let fired_at = decision.fire.map(|_| now);
        store::record_plan(tx, &schedule.name, fired_at, decision.next_run_at)?;
        if decision.fire.is_some() {
            result.due.push(Due {
                name: schedule.name,
                agent: schedule.agent_profile_name,
                prompt: schedule.prompt,
            });
        }
    }
    Ok(result)
}
