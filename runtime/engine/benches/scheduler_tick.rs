//! One scheduler tick's planning and persisting over 10,000 enabled schedules, with none due
//! and with 1,000 due (target: under 50 ms). The baseline, measured in the same run, is a
//! plain read of every schedule row: what a tick that looked at each schedule would pay
//! before doing any planning at all.

// Each bench uses some of the figures.
#[allow(dead_code)]
#[path = "../../../tests/shared/stats.rs"]
mod stats;
use stats::{median, ms};
use std::collections::HashSet;
use std::time::{Duration, Instant};

use chrono::{Duration as Span, Utc};
use service_engine::scheduler::cron;
use service_engine::scheduler::plan::CatchUp;
use service_engine::scheduler::store::{self, NewSchedule};
use service_engine::scheduler::tick::plan_tick;
use service_store::db::{Conn, Db};
use service_store::params;

const SCHEDULES: usize = 10_000;
const DUE: usize = 1_000;
const ROUNDS: usize = 25;

/// Backdates the first `DUE` schedules so they fire at the next tick.
fn make_due(conn: &Conn) -> service_store::error::Result<()> {
    let past = store::timestamp(Utc::now() - Span::minutes(5));
    conn.execute(
        "UPDATE schedules SET next_run_at = ?1 WHERE rowid <= ?2",
        params![past, DUE],
    )?;
    Ok(())
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let db = Db::open_sqlite(&tmp.path().join("service.sqlite")).unwrap();
    let tz = chrono_tz::Tz::UTC;
    // Every-minute schedules are the costliest to step through; weekday ones skip days.
    let crons = [
        "every 1m",
        "every 5m",
        "every 1h",
        "*/15 * * * *",
        "0 9 * * MON-FRI",
        "@daily",
    ]
    .map(|c| cron::parse(c).unwrap());
    let future = Utc::now() + Span::hours(2);
    db.blocking(|conn| {
        conn.transaction(|tx| {
            for i in 0..SCHEDULES {
                let name = format!("schedule-{i:05}");
                let cron = &crons[i % crons.len()];
                let policy = [CatchUp::Coalesce, CatchUp::All, CatchUp::Skip][i % 3];
                let new = NewSchedule {
                    name: &name,
                    cron,
                    agent: "default",
                    prompt: "report",
                    catch_up: policy,
                    enabled: true,
                    next_run_at: Some(future),
                };
                store::create(tx, &new)?;
            }
            Ok(())
        })
    })
    .unwrap();
    let tick = Duration::from_secs(30);
    let none = HashSet::new();

    let baseline = median((0..ROUNDS).map(|_| {
        let started = Instant::now();
        let rows = db.blocking(|conn| store::list(conn)).unwrap().len();
        assert_eq!(rows, SCHEDULES);
        started.elapsed()
    }));

    let idle = median((0..ROUNDS).map(|_| {
        let started = Instant::now();
        let plan = db
            .blocking(|conn| plan_tick(conn, Utc::now(), tick, &tz, &none))
            .unwrap();
        assert!(plan.due.is_empty());
        started.elapsed()
    }));

    let busy = median((0..ROUNDS).map(|_| {
        db.blocking(|conn| make_due(conn)).unwrap();
        let started = Instant::now();
        let plan = db
            .blocking(|conn| plan_tick(conn, Utc::now(), tick, &tz, &none))
            .unwrap();
        let elapsed = started.elapsed();
        assert_eq!(
            plan.due.len() + plan.problems.len(),
            DUE - DUE / 3,
            "skip-policy schedules are late and do not fire"
        );
        elapsed
    }));

    println!("scheduler tick over {SCHEDULES} enabled schedules (median of {ROUNDS})");
    println!(
        "  baseline, read every schedule row: {:8.3} ms",
        ms(baseline)
    );
    println!(
        "  tick, none due:                    {:8.3} ms  ({:.3}x baseline)",
        ms(idle),
        ms(idle) / ms(baseline)
    );
    println!(
        "  tick, {DUE} due (plan + persist):  {:8.3} ms  ({:.3}x baseline; target < 50 ms: {})",
        ms(busy),
        ms(busy) / ms(baseline),
        if ms(busy) < 50.0 { "met" } else { "MISSED" }
    );
}
