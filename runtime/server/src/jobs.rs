//! Deferred adapter work. A job is a task (its status lives there) plus the adapter, the
//! payload, how often it has started (`attempt`) and not before when it may start again
//! (`run_after`, unix ms). It is written in one transaction before the enqueuing handler's
//! response leaves, and runs at least once: a job cut off by a crash or a shutdown goes back
//! to pending at the next start.

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use crate::error::{Error, Result};
use crate::tasks::{self, NewTask, TaskStatus};

/// A job to run now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub task_id: String,
    pub adapter: String,
    pub payload: Vec<u8>,
    /// 1 on the first run.
    pub attempt: u32,
}

/// Why a job was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("the adapter already has {pending} jobs waiting or running (limits.jobs_pending)")]
    Full { pending: u32 },
    #[error(transparent)]
    Db(#[from] Error),
}

impl From<rusqlite::Error> for Refused {
    fn from(e: rusqlite::Error) -> Self {
        Self::Db(e.into())
    }
}

pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Jobs of `adapter` waiting or running.
pub fn unfinished(conn: &Connection, adapter: &str) -> Result<u32> {
    Ok(conn
        .prepare_cached(
            "SELECT count(*) FROM adapter_jobs j JOIN tasks t ON t.task_id = j.task_id \
             WHERE j.adapter = ?1 AND t.status IN ('pending', 'running')",
        )?
        .query_row([adapter], |r| r.get(0))?)
}

/// Persists a job as a pending task, unless the adapter already has `max_unfinished` jobs
/// waiting or running; returns the task id.
pub fn enqueue(
    conn: &mut Connection,
    adapter: &str,
    payload: &[u8],
    max_unfinished: u32,
) -> std::result::Result<String, Refused> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let pending = unfinished(&tx, adapter)?;
    if pending >= max_unfinished {
        return Err(Refused::Full { pending });
    }
    let title = format!("{adapter} job");
    let task = tasks::create(
        &tx,
        &NewTask {
            title: &title,
            description: Some("adapter job"),
            ..NewTask::default()
        },
    )?;
    tx.prepare_cached("INSERT INTO adapter_jobs (task_id, adapter, payload) VALUES (?1, ?2, ?3)")?
        .execute(params![task.task_id, adapter, payload])?;
    tx.commit()?;
    Ok(task.task_id)
}

/// Adapters with a job that may start now, by name.
pub fn ready_adapters(conn: &Connection, now_ms: i64) -> Result<Vec<String>> {
    let mut stmt = conn.prepare_cached(
        "SELECT DISTINCT j.adapter FROM adapter_jobs j JOIN tasks t ON t.task_id = j.task_id \
         WHERE t.status = 'pending' AND coalesce(j.run_after, 0) <= ?1 ORDER BY j.adapter",
    )?;
    let rows = stmt.query_map([now_ms], |r| r.get(0))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// When the next job waiting for its retry time may start (unix ms).
pub fn next_retry(conn: &Connection, now_ms: i64) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached(
            "SELECT min(j.run_after) FROM adapter_jobs j JOIN tasks t ON t.task_id = j.task_id \
             WHERE t.status = 'pending' AND j.run_after > ?1",
        )?
        .query_row([now_ms], |r| r.get(0))?)
}

/// Takes `adapter`'s oldest job that may start now: its task is `running`, its attempt counted.
pub fn claim_next(conn: &mut Connection, adapter: &str, now_ms: i64) -> Result<Option<Job>> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let job = tx
        .prepare_cached(
            "SELECT j.task_id, j.payload, j.attempt + 1 FROM adapter_jobs j \
             JOIN tasks t ON t.task_id = j.task_id \
             WHERE j.adapter = ?1 AND t.status = 'pending' AND coalesce(j.run_after, 0) <= ?2 \
             ORDER BY t.created_at, t.rowid LIMIT 1",
        )?
        .query_row(params![adapter, now_ms], |r| {
            Ok(Job {
                task_id: r.get(0)?,
                adapter: adapter.to_owned(),
                payload: r.get(1)?,
                attempt: r.get(2)?,
            })
        })
        .optional()?;
    if let Some(job) = &job {
        tx.prepare_cached(
            "UPDATE adapter_jobs SET attempt = ?2, run_after = NULL WHERE task_id = ?1",
        )?
        .execute(params![job.task_id, job.attempt])?;
        tasks::set_status(&tx, &job.task_id, TaskStatus::Running)?;
    }
    tx.commit()?;
    Ok(job)
}

/// Puts a job back to wait until `run_after` (unix ms), noting why.
pub fn retry_later(conn: &mut Connection, task_id: &str, run_after: i64, note: &str) -> Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.prepare_cached("UPDATE adapter_jobs SET run_after = ?2 WHERE task_id = ?1")?
        .execute(params![task_id, run_after])?;
    tasks::set_status(&tx, task_id, TaskStatus::Pending)?;
    tasks::append_note(&tx, task_id, note)?;
    tx.commit()?;
    Ok(())
}

/// After a restart: jobs a previous process was running go back to pending, or fail once they
/// have started `max_attempts` times. Returns (requeued, failed).
pub fn requeue_interrupted(conn: &mut Connection, max_attempts: u32) -> Result<(usize, usize)> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let failed = tx.execute(
        "UPDATE tasks SET status = 'error', updated_at = ?2, \
         description = coalesce(description || char(10), '') || 'interrupted ' || \
           (SELECT attempt FROM adapter_jobs j WHERE j.task_id = tasks.task_id) || ' times; given up' \
         WHERE status = 'running' AND task_id IN \
           (SELECT task_id FROM adapter_jobs WHERE attempt >= ?1)",
        params![max_attempts, crate::db::now()],
    )?;
    let requeued = tx.execute(
        "UPDATE tasks SET status = 'pending', updated_at = ?1, \
         description = coalesce(description || char(10), '') || 'interrupted; will run again' \
         WHERE status = 'running' AND task_id IN (SELECT task_id FROM adapter_jobs)",
        [crate::db::now()],
    )?;
    tx.commit()?;
    Ok((requeued, failed))
}

/// Jobs waiting (pending) per adapter.
pub fn backlog(conn: &Connection) -> Result<Vec<(String, u32)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT j.adapter, count(*) FROM adapter_jobs j JOIN tasks t ON t.task_id = j.task_id \
         WHERE t.status = 'pending' GROUP BY j.adapter",
    )?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db;

    fn payload(conn: &Connection, task_id: &str) -> Option<Vec<u8>> {
        conn.query_row(
            "SELECT payload FROM adapter_jobs WHERE task_id = ?1",
            [task_id],
            |r| r.get(0),
        )
        .optional()
        .unwrap()
    }

    fn status(conn: &Connection, task_id: &str) -> TaskStatus {
        tasks::get(conn, task_id).unwrap().unwrap().status
    }

    #[test]
    fn a_job_is_a_pending_task_with_a_payload() {
        let mut conn = db::memory();
        let first = enqueue(&mut conn, "teamchat", b"{\"channel\":\"C1\"}", 10).unwrap();
        let second = enqueue(&mut conn, "webhook", b"2", 10).unwrap();
        let task = tasks::get(&conn, &first).unwrap().unwrap();
        assert_eq!(
            (task.status, task.title.as_str()),
            (TaskStatus::Pending, "teamchat job")
        );
        assert_eq!(
            ready_adapters(&conn, now_ms()).unwrap(),
            ["teamchat", "webhook"]
        );
        let job = claim_next(&mut conn, "teamchat", now_ms())
            .unwrap()
            .unwrap();
        assert_eq!((job.task_id.as_str(), job.attempt), (first.as_str(), 1));
        assert_eq!(status(&conn, &first), TaskStatus::Running);
        assert_eq!(ready_adapters(&conn, now_ms()).unwrap(), ["webhook"]);
        assert!(
            claim_next(&mut conn, "teamchat", now_ms())
                .unwrap()
                .is_none()
        );
        assert_eq!(backlog(&conn).unwrap(), [("webhook".to_owned(), 1)]);
        assert_eq!(
            payload(&conn, &first).as_deref(),
            Some(&b"{\"channel\":\"C1\"}"[..])
        );
        // Deleting the finished task deletes the job with it.
        tasks::set_status(&conn, &first, TaskStatus::Completed).unwrap();
        tasks::cancel_or_delete(&mut conn, &first).unwrap();
        assert!(payload(&conn, &first).is_none());
        let _ = second;
    }

    #[test]
    fn an_adapter_has_a_bound_on_unfinished_jobs() {
        let mut conn = db::memory();
        let a = enqueue(&mut conn, "a", b"1", 2).unwrap();
        enqueue(&mut conn, "a", b"2", 2).unwrap();
        assert!(matches!(
            enqueue(&mut conn, "a", b"3", 2),
            Err(Refused::Full { pending: 2 })
        ));
        assert!(
            enqueue(&mut conn, "b", b"1", 2).is_ok(),
            "bounds are per adapter"
        );
        claim_next(&mut conn, "a", now_ms()).unwrap().unwrap();
        assert!(
            matches!(enqueue(&mut conn, "a", b"3", 2), Err(Refused::Full { .. })),
            "running counts"
        );
        tasks::set_status(&conn, &a, TaskStatus::Completed).unwrap();
        assert!(enqueue(&mut conn, "a", b"3", 2).is_ok());
    }

    #[test]
    fn retries_wait_and_interrupted_jobs_run_again_up_to_the_limit() {
        let mut conn = db::memory();
        let job = enqueue(&mut conn, "a", b"x", 10).unwrap();
        claim_next(&mut conn, "a", 1_000).unwrap().unwrap();
        retry_later(&mut conn, &job, 5_000, "retry: 429").unwrap();
        assert!(ready_adapters(&conn, 4_999).unwrap().is_empty());
        assert_eq!(next_retry(&conn, 1_000).unwrap(), Some(5_000));
        let again = claim_next(&mut conn, "a", 5_000).unwrap().unwrap();
        assert_eq!(again.attempt, 2);
        // The process dies while it runs: it goes back to pending, until its third start.
        assert_eq!(requeue_interrupted(&mut conn, 3).unwrap(), (1, 0));
        assert_eq!(status(&conn, &job), TaskStatus::Pending);
        assert_eq!(
            claim_next(&mut conn, "a", 5_000).unwrap().unwrap().attempt,
            3
        );
        assert_eq!(requeue_interrupted(&mut conn, 3).unwrap(), (0, 1));
        let task = tasks::get(&conn, &job).unwrap().unwrap();
        assert_eq!(task.status, TaskStatus::Error);
        assert!(task.description.unwrap().contains("interrupted 3 times"));
    }
}
