//! Retention: what the service keeps ends. Conversations idle past their age, decided
//! approvals, finished tasks, finished traces (with their steps) and the stream frames of
//! finished runs (`[runs] events_kept_hours`) are deleted in small batches, each its own short transaction, by one replica at a time (a lease), at start and
//! every `every_minutes`. SQLite then gives freed pages back to the file system.

use std::time::{Duration, Instant};

use anyhow::bail;
use chrono::{SecondsFormat, Utc};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::conversations;
use crate::db::{Backend, Conn, Db};
use crate::error::Result;
use crate::leases;
use crate::params;
use crate::runs;
use crate::telemetry::metrics::metrics;

/// Rows one statement deletes at most: a batch holds the connection (and the write lock) for
/// about half a millisecond, which is what a request queued behind it waits.
pub const BATCH: u32 = 10;
/// Conversations are erased one transaction each (their runs' traces too); this many per
/// batch.
const CONVERSATION_BATCH: u32 = 1;
/// Between batches the pruner rests at least this long, and at least `REST` times what the
/// batch took: it works a fifth of the time at most, whatever the disk, and on a quiet one
/// about a fortieth, so few requests ever queue behind a batch.
const PAUSE: Duration = Duration::from_millis(20);
const REST: u32 = 4;
/// Pages SQLite hands back per step of its incremental vacuum (256 KiB at the default size).
const VACUUM_PAGES: u32 = 64;
const LONGEST_DAYS: u32 = 36_500;

/// `[retention]`: how many days each kind of record is kept; `0` keeps it forever.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetentionSection {
    /// Finished traces with their model and tool steps: default 30.
    pub traces_days: Option<u32>,
    /// Finished tasks (completed, error, cancelled): default 90.
    pub tasks_days: Option<u32>,
    /// Conversations with no new message for this long, erased as a deletion does: default 0,
    /// kept forever.
    pub conversations_days: Option<u32>,
    /// Decided approvals whose run went on: default 90.
    pub approvals_days: Option<u32>,
    /// Minutes between rounds (the first is at start), 1 to 1440: default 60.
    pub every_minutes: Option<u32>,
}

/// The kinds of record retention ends, in the order a round prunes them (a conversation
/// erases its runs' content before their traces' turn comes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Conversations,
    Approvals,
    Tasks,
    Traces,
    /// The frames of finished runs' streams, kept for hours (`[runs]`), not days.
    RunEvents,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::Conversations,
        Kind::Approvals,
        Kind::Tasks,
        Kind::Traces,
        Kind::RunEvents,
    ];
    /// Those `[retention]` keeps for `<kind>_days`.
    const BY_DAYS: [Kind; 4] = [
        Kind::Conversations,
        Kind::Approvals,
        Kind::Tasks,
        Kind::Traces,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Conversations => "conversations",
            Kind::Approvals => "approvals",
            Kind::Tasks => "tasks",
            Kind::Traces => "traces",
            Kind::RunEvents => "run_events",
        }
    }
}

impl RetentionSection {
    /// What config.toml says for `kind`, and its default.
    fn set(&self, kind: Kind) -> (Option<u32>, u32) {
        match kind {
            Kind::Traces => (self.traces_days, 30),
            Kind::Tasks => (self.tasks_days, 90),
            Kind::Conversations => (self.conversations_days, 0),
            Kind::Approvals => (self.approvals_days, 90),
            Kind::RunEvents => (None, 0),
        }
    }

    /// Days `kind` is kept; `None` forever.
    pub fn days(&self, kind: Kind) -> Option<u32> {
        let (set, default) = self.set(kind);
        Some(set.unwrap_or(default)).filter(|days| *days > 0)
    }

    pub fn every(&self) -> Duration {
        Duration::from_secs(u64::from(self.every_minutes.unwrap_or(60)) * 60)
    }

    pub fn check(&self) -> anyhow::Result<()> {
        for kind in Kind::BY_DAYS {
            if self.set(kind).0.is_some_and(|days| days > LONGEST_DAYS) {
                bail!(
                    "[retention] {}_days must be between 0 (forever) and {LONGEST_DAYS}",
                    kind.as_str()
                );
            }
        }
        if !(1..=1440).contains(&self.every_minutes.unwrap_or(60)) {
            bail!("[retention] every_minutes must be between 1 and 1440");
        }
        Ok(())
    }

    /// Each kind kept for a while, with the time before which it goes (as stored: UTC
    /// ISO-8601 with milliseconds, which orders as text); finished runs' frames go after
    /// `run_events`.
    fn cutoffs(&self, run_events: Duration) -> Vec<(Kind, String)> {
        let before =
            |age: chrono::Duration| (Utc::now() - age).to_rfc3339_opts(SecondsFormat::Millis, true);
        let run_events = chrono::Duration::from_std(run_events).unwrap_or(chrono::Duration::MAX);
        Kind::BY_DAYS
            .into_iter()
            .filter_map(|kind| {
                let days = self.days(kind)?;
                Some((kind, before(chrono::Duration::days(i64::from(days)))))
            })
            .chain([(Kind::RunEvents, before(run_events))])
            .collect()
    }
}

/// Starts the pruner. With SQLite its batches take turns with the API's work on the same
/// connection: a request waits for at most one batch, where a second connection's writers
/// would poll SQLite's lock (sleeping up to tens of milliseconds between tries).
pub fn start(
    db: &Db,
    settings: RetentionSection,
    run_events: Duration,
    replica: String,
    stop: CancellationToken,
) {
    let db = db.clone();
    // A round's lease outlasts the round but not the next one: the first replica whose round
    // comes after it expired leads, so a leader that died is replaced within a period. (Two
    // rounds at once would only delete the same rows; the lease saves the work.)
    let lease_ms = settings.every().as_millis() as i64 / 2;
    tokio::spawn(async move {
        let mut rounds = tokio::time::interval(settings.every());
        rounds.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = rounds.tick() => {}
                () = stop.cancelled() => return,
            }
            let me = replica.clone();
            let lead = db.call(move |conn| leases::hold(conn, "retention", &me, lease_ms));
            match lead.await {
                Ok(Some(_)) => {
                    if let Err(e) = round(&db, settings.cutoffs(run_events), &stop).await {
                        tracing::warn!("retention: cannot delete old records: {e}");
                    }
                }
                Ok(None) => {}
                Err(e) => tracing::warn!("retention: cannot take the lease: {e}"),
            }
        }
    });
}

/// Prunes every kind past its age, a batch at a time, then gives SQLite's free pages back.
async fn round(db: &Db, cutoffs: Vec<(Kind, String)>, stop: &CancellationToken) -> Result<()> {
    for (kind, cutoff) in cutoffs {
        let mut deleted = 0;
        loop {
            let before = cutoff.clone();
            let (gone, took) = db
                .call(move |conn| timed(|| prune_batch(conn, kind, &before)))
                .await?;
            deleted += gone;
            metrics().retention_deleted(kind.as_str(), gone);
            if gone == 0 || stop.is_cancelled() {
                break;
            }
            rest(took).await;
        }
        if deleted > 0 {
            tracing::info!(
                kind = kind.as_str(),
                deleted,
                "retention: deleted records past their age"
            );
        }
    }
    if db.backend() == Backend::Sqlite {
        while !stop.is_cancelled() {
            let (more, took) = db.call(|conn| timed(|| give_back_pages(conn))).await?;
            if !more {
                break;
            }
            rest(took).await;
        }
    }
    Ok(())
}

/// `work`'s answer and how long it took (on the connection, not waiting for it).
fn timed<T>(work: impl FnOnce() -> Result<T>) -> Result<(T, Duration)> {
    let started = Instant::now();
    Ok((work()?, started.elapsed()))
}

/// Steps aside after a batch that took `took`, for the work that queued behind it.
async fn rest(took: Duration) {
    tokio::time::sleep(PAUSE.max(took * REST)).await;
}

/// Deletes at most one batch of `kind` older than `cutoff`; how many went.
pub(crate) fn prune_batch(conn: &mut Conn, kind: Kind, cutoff: &str) -> Result<u64> {
    let statement = match kind {
        Kind::Conversations => return prune_conversations(conn, cutoff),
        Kind::Approvals => format!(
            "DELETE FROM approvals WHERE id IN (SELECT id FROM approvals \
             WHERE resumed = 1 AND status <> 'pending' AND decided_at < ?1 LIMIT {BATCH})"
        ),
        Kind::Tasks => format!(
            "DELETE FROM tasks WHERE task_id IN (SELECT task_id FROM tasks t \
             WHERE t.status IN ('completed', 'error', 'cancelled') \
             AND t.created_at < ?1 AND t.updated_at < ?1 \
             AND t.task_id NOT IN ({}) AND t.task_id NOT IN ({}) \
             ORDER BY t.created_at LIMIT {BATCH})",
            waiting("task_id"),
            waiting("then_task")
        ),
        // A run's frames at a time: at most `[runs] max_events` rows.
        Kind::RunEvents => return runs::prune_events(conn, cutoff),
        // Steps go with their trace (ON DELETE CASCADE); runs it started keep their own.
        Kind::Traces => format!(
            "DELETE FROM traces WHERE id IN (SELECT id FROM traces t \
             WHERE t.status <> 'running' AND t.created_at < ?1 \
             AND t.id NOT IN ({}) ORDER BY t.created_at LIMIT {BATCH})",
            waiting("trace_id")
        ),
    };
    conn.execute(&statement, params![cutoff])
}

/// The `column` of approvals whose run waits for a person or is about to go on after one
/// decided: what it still needs is kept whatever its age. (Every status is named so the
/// `(status, resumed)` index serves; the subquery runs once per statement.)
fn waiting(column: &str) -> String {
    format!(
        "SELECT {column} FROM approvals WHERE status IN ('pending', 'approved', 'denied', \
         'expired') AND resumed = 0 AND {column} IS NOT NULL"
    )
}

/// Erases a batch of conversations idle since before `cutoff`, each as its deletion would; one
/// with a turn in progress or a run waiting for a person is left for a later round.
fn prune_conversations(conn: &mut Conn, cutoff: &str) -> Result<u64> {
    let idle: Vec<String> = conn.query(
        &format!(
            "SELECT id FROM conversations c WHERE c.updated_at < ?1 \
             AND NOT EXISTS (SELECT 1 FROM conversation_turns t \
                             WHERE t.conversation_id = c.id AND t.lease_until >= {clock}) \
             AND c.id NOT IN ({waiting}) ORDER BY c.updated_at LIMIT {CONVERSATION_BATCH}",
            clock = conn.clock_ms(),
            waiting = waiting("conversation_id")
        ),
        params![cutoff],
        |r| r.get(0),
    )?;
    let mut erased = 0;
    for id in idle {
        if conn.transaction(|tx| conversations::delete(tx, &id))? {
            erased += 1;
        }
    }
    Ok(erased)
}

/// One step of SQLite's incremental vacuum; whether free pages are left. A database created
/// before incremental vacuum was turned on keeps its free pages for reuse (see the book's Data chapter).
fn give_back_pages(conn: &mut Conn) -> Result<bool> {
    let incremental: i64 = conn.query_one("PRAGMA auto_vacuum", params![], |r| r.get(0))?;
    if incremental != 2 {
        return Ok(false);
    }
    // Each step of the statement frees one page: it is run to its end.
    conn.query(
        &format!("PRAGMA incremental_vacuum({VACUUM_PAGES})"),
        params![],
        |_| Ok(()),
    )?;
    let free: i64 = conn.query_one("PRAGMA freelist_count", params![], |r| r.get(0))?;
    Ok(free > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::{Backends, each_conn};

    const OLD: &str = "2020-01-01T00:00:00.000Z";
    const NEW: &str = "2999-01-01T00:00:00.000Z";
    const CUTOFF: &str = "2025-01-01T00:00:00.000Z";

    fn trace(conn: &Conn, id: &str, status: &str, at: &str) {
        conn.execute(
            "INSERT INTO traces (id, provider, model, prompt, status, created_at) \
             VALUES (?1, 'offline', 'm', 'hi', ?2, ?3)",
            params![id, status, at],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO llm_calls (trace_id, step, provider, model, status, started_at, \
             latency_ms) VALUES (?1, 1, 'offline', 'm', 'ok', ?2, 1)",
            params![id, at],
        )
        .unwrap();
    }

    fn approval(conn: &Conn, id: &str, trace: &str, status: &str, resumed: i64, at: &str) {
        conn.execute(
            "INSERT INTO approvals (id, tool, input, agent, conversation_id, task_id, trace_id, \
             status, requested_at, requested_ms, decided_at, checkpoint, resumed) \
             VALUES (?1, 'shell_exec', '{}', 'default', 'c-waiting', 't-waiting', ?2, ?3, ?4, 0, \
             ?4, '{}', ?5)",
            params![id, trace, status, at, resumed],
        )
        .unwrap();
    }

    fn conversation(conn: &Conn, id: &str, at: &str) {
        conn.execute(
            "INSERT INTO conversations (id, agent, title, source, created_at, updated_at) \
             VALUES (?1, 'default', 'hi', 'chat', ?2, ?2)",
            params![id, at],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO conversation_messages (conversation_id, seq, role, text, at) \
             VALUES (?1, 1, 'user', 'hi', ?2)",
            params![id, at],
        )
        .unwrap();
    }

    fn task(conn: &Conn, id: &str, status: &str, at: &str) {
        conn.execute(
            "INSERT INTO tasks (task_id, title, status, created_at, updated_at) \
             VALUES (?1, 'x', ?2, ?3, ?3)",
            params![id, status, at],
        )
        .unwrap();
    }

    fn ids(conn: &Conn, sql: &str) -> Vec<String> {
        conn.query(sql, params![], |r| r.get(0)).unwrap()
    }

    fn prune_all(conn: &mut Conn, kind: Kind) -> u64 {
        let mut total = 0;
        loop {
            let gone = prune_batch(conn, kind, CUTOFF).unwrap();
            total += gone;
            if gone == 0 {
                return total;
            }
        }
    }

    #[test]
    fn what_is_past_its_age_goes_and_what_a_waiting_run_needs_stays() {
        each_conn(Backends::Both, |conn| {
            for n in 0..(BATCH + 5) {
                trace(conn, &format!("old-{n}"), "ok", OLD);
            }
            trace(conn, "old-running", "running", OLD);
            trace(conn, "old-waiting", "ok", OLD);
            trace(conn, "new", "ok", NEW);
            approval(conn, "a-waiting", "old-waiting", "pending", 0, OLD);
            approval(conn, "a-done", "old-0", "approved", 1, OLD);
            approval(conn, "a-new", "new", "denied", 1, NEW);
            task(conn, "t-old", "completed", OLD);
            task(conn, "t-running", "running", OLD);
            task(conn, "t-waiting", "completed", OLD);
            task(conn, "t-new", "error", NEW);
            conversation(conn, "c-old", OLD);
            conversation(conn, "c-waiting", OLD);
            conversation(conn, "c-new", NEW);

            assert_eq!(prune_all(conn, Kind::Conversations), 1);
            assert_eq!(prune_all(conn, Kind::Approvals), 1);
            assert_eq!(prune_all(conn, Kind::Tasks), 1);
            assert_eq!(prune_all(conn, Kind::Traces), u64::from(BATCH) + 5);

            assert_eq!(
                ids(conn, "SELECT id FROM traces ORDER BY id"),
                ["new", "old-running", "old-waiting"]
            );
            let steps = ids(conn, "SELECT trace_id FROM llm_calls ORDER BY trace_id");
            assert_eq!(
                steps,
                ["new", "old-running", "old-waiting"],
                "steps go with them"
            );
            assert_eq!(
                ids(conn, "SELECT id FROM approvals ORDER BY id"),
                ["a-new", "a-waiting"]
            );
            assert_eq!(
                ids(conn, "SELECT task_id FROM tasks ORDER BY task_id"),
                ["t-new", "t-running", "t-waiting"]
            );
            assert_eq!(
                ids(conn, "SELECT id FROM conversations ORDER BY id"),
                ["c-new", "c-waiting"]
            );
            assert_eq!(
                ids(
                    conn,
                    "SELECT DISTINCT conversation_id FROM conversation_messages \
                     ORDER BY conversation_id"
                ),
                ["c-new", "c-waiting"]
            );
        });
    }

    #[test]
    fn defaults_and_bounds_are_the_documented_ones() {
        let defaults = RetentionSection::default();
        let days: Vec<_> = Kind::BY_DAYS.map(|kind| defaults.days(kind)).into();
        assert_eq!(days, [None, Some(90), Some(90), Some(30)]);
        let forever = RetentionSection {
            traces_days: Some(0),
            ..RetentionSection::default()
        };
        assert_eq!(forever.days(Kind::Traces), None);
        let too_long = RetentionSection {
            tasks_days: Some(LONGEST_DAYS + 1),
            ..RetentionSection::default()
        };
        let error = too_long.check().unwrap_err().to_string();
        assert!(
            error.contains("[retention] tasks_days must be between 0"),
            "{error}"
        );
    }
}
