//! Deferred adapter work. A job is a task (its status lives there) plus the adapter, the
//! payload, how often it has started (`attempt`) and not before when it may start again
//! (`run_after`, unix ms). It is written in one transaction before the enqueuing handler's
//! response leaves, and runs at least once: any replica may claim it, under a lease it renews
//! while the job runs; a job whose lease ran out (its replica died) or whose replica restarted
//! goes back to pending, until it has started `[jobs] attempts` times.

use crate::db::{self, Backend, Conn, Row, ToParam};
use crate::error::{Error, Result};
use crate::kv_store;
use crate::params;
use crate::tasks::{self, NewTask, TaskStatus};

/// A job to run now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    pub task_id: String,
    pub adapter: String,
    pub payload: Vec<u8>,
    /// 1 on the first run.
    pub attempt: u32,
    /// The trace context of the request that enqueued it, which its run continues.
    pub traceparent: Option<String>,
}

/// The replica running jobs and how long its hold on one lasts without renewal.
#[derive(Debug, Clone, Copy)]
pub struct Lease<'a> {
    pub holder: &'a str,
    pub ms: i64,
}

/// Why a job was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("the adapter already has {pending} jobs waiting or running (limits.jobs_pending)")]
    Full { pending: u32 },
    /// The claim would take the adapter's key-value store past its quota.
    #[error("{0}")]
    KvQuota(String),
    #[error(transparent)]
    Db(#[from] Error),
}

impl From<kv_store::Refused> for Refused {
    fn from(refused: kv_store::Refused) -> Self {
        match refused {
            kv_store::Refused::Db(e) => Self::Db(e),
            over => Self::KvQuota(over.to_string()),
        }
    }
}

/// Jobs of `adapter` waiting or running (counted by triggers as their tasks change).
pub(crate) fn unfinished(conn: &Conn, adapter: &str) -> Result<u32> {
    Ok(conn
        .query_opt(
            "SELECT unfinished FROM adapter_jobs_open WHERE adapter = ?1",
            params![adapter],
            |r| r.get(0),
        )?
        .unwrap_or(0))
}

/// Persists a job as a pending task, unless the adapter already has `max_unfinished` jobs
/// waiting or running (across replicas); returns the task id.
pub fn enqueue(
    conn: &mut Conn,
    adapter: &str,
    payload: &[u8],
    traceparent: Option<&str>,
    max_unfinished: u32,
) -> std::result::Result<String, Refused> {
    conn.transaction(|tx| {
        // The lock `adapter_job_enqueue_once` (migration 27) takes too.
        tx.serialize_on(&format!("jobs:{adapter}"))?;
        let pending = unfinished(tx, adapter)?;
        if pending >= max_unfinished {
            return Err(Refused::Full { pending });
        }
        let title = job_title(adapter);
        let task = tasks::create(
            tx,
            &NewTask {
                title: &title,
                description: Some(JOB_DESCRIPTION),
                ..NewTask::default()
            },
        )?;
        tx.execute_later(
            "INSERT INTO adapter_jobs (task_id, adapter, payload, traceparent) \
             VALUES (?1, ?2, ?3, ?4)",
            params![task.task_id, adapter, payload, traceparent],
        )?;
        Ok(task.task_id)
    })
}

/// A job's task: its title and description.
fn job_title(adapter: &str) -> String {
    format!("{adapter} job")
}
const JOB_DESCRIPTION: &str = "adapter job";

/// What `jobs.enqueue-once` asks: claim `key` for `ttl_ms` in the adapter's key-value store,
/// and queue `payload`.
pub struct Once<'a> {
    pub key: &'a str,
    pub ttl_ms: u64,
    pub payload: &'a [u8],
    pub traceparent: Option<&'a str>,
}

/// Claims the key and enqueues the job in one transaction: the job's task id, or `None` when
/// the key was claimed already (nothing is queued then).
pub fn enqueue_once(
    conn: &mut Conn,
    adapter: &str,
    once: &Once<'_>,
    max_unfinished: u32,
    kv_quota: u64,
) -> std::result::Result<Option<String>, Refused> {
    if conn.backend() == Backend::Postgres {
        return enqueue_once_in_one_statement(conn, adapter, once, max_unfinished, kv_quota);
    }
    conn.transaction(|tx| {
        if !kv_store::claim(tx, adapter, once.key, once.ttl_ms, kv_quota)? {
            return Ok(None);
        }
        enqueue(tx, adapter, once.payload, once.traceparent, max_unfinished).map(Some)
    })
}

/// PostgreSQL's `adapter_job_enqueue_once` (migration 27): the transaction above in one
/// statement, so no lock it takes is held while a round trip is under way.
fn enqueue_once_in_one_statement(
    conn: &Conn,
    adapter: &str,
    once: &Once<'_>,
    max_unfinished: u32,
    kv_quota: u64,
) -> std::result::Result<Option<String>, Refused> {
    let task_id = uuid::Uuid::new_v4().to_string();
    let now = db::now_ms();
    let expires_at = now.saturating_add(i64::try_from(once.ttl_ms).unwrap_or(i64::MAX));
    let (queued, pending, would): (bool, Option<u32>, Option<i64>) = conn.query_one(
        "SELECT queued, pending, would FROM adapter_job_enqueue_once(\
         ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        params![
            adapter,
            once.key,
            expires_at,
            i64::try_from(kv_quota).unwrap_or(i64::MAX),
            now,
            max_unfinished,
            task_id,
            job_title(adapter),
            JOB_DESCRIPTION,
            db::now(),
            once.payload,
            once.traceparent
        ],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    match (queued, pending, would) {
        (true, ..) => Ok(Some(task_id)),
        (false, _, Some(would)) => Err(kv_store::Refused::OverQuota {
            would,
            quota: kv_quota,
        }
        .into()),
        (false, Some(pending), None) => Err(Refused::Full { pending }),
        (false, None, None) => Ok(None),
    }
}

/// Each adapter with a job waiting, in name order: how many wait, and whether one may start
/// now (`now_ms`), in one statement.
pub fn waiting(conn: &Conn, now_ms: i64) -> Result<Vec<Waiting>> {
    conn.query(
        "SELECT j.adapter, count(*), max(CASE WHEN coalesce(j.run_after, 0) <= ?1 THEN 1 ELSE 0 END) \
         FROM adapter_jobs j JOIN tasks t ON t.task_id = j.task_id \
         WHERE t.status = 'pending' GROUP BY j.adapter ORDER BY j.adapter",
        params![now_ms],
        |r| {
            Ok(Waiting {
                adapter: r.get(0)?,
                pending: r.get(1)?,
                ready: r.get::<i64>(2)? == 1,
            })
        },
    )
}

/// One adapter's waiting jobs.
#[derive(Debug, PartialEq, Eq)]
pub struct Waiting {
    pub adapter: String,
    pub pending: u32,
    /// One may start now.
    pub ready: bool,
}

/// When the next job waiting for its retry time may start (unix ms).
pub fn next_retry(conn: &Conn, now_ms: i64) -> Result<Option<i64>> {
    conn.query_one(
        "SELECT min(j.run_after) FROM adapter_jobs j JOIN tasks t ON t.task_id = j.task_id \
         WHERE t.status = 'pending' AND j.run_after > ?1",
        params![now_ms],
        |r| r.get(0),
    )
}

/// Takes `adapter`'s oldest job that may start now: its task is `running`, its attempt
/// counted, and it is leased to `lease.holder`. Replicas claiming at once each get a
/// different job.
pub fn claim_next(
    conn: &mut Conn,
    adapter: &str,
    now_ms: i64,
    lease: Lease<'_>,
) -> Result<Option<Job>> {
    let read = |r: &Row<'_>| {
        Ok(Job {
            task_id: r.get(0)?,
            adapter: adapter.to_owned(),
            payload: r.get(1)?,
            attempt: r.get(2)?,
            traceparent: r.get(3)?,
        })
    };
    let leased = format!(
        "attempt = attempt + 1, run_after = NULL, lease_holder = ?4, lease_until = {} + ?3",
        conn.clock_ms()
    );
    if conn.backend() == Backend::Postgres {
        // One statement: the oldest free job's task taken (locked; claims skip each other's),
        // running, and its job leased. Pending tasks are walked in the order of their index
        // and each one's job looked up by its key (the lateral subquery): the plan the
        // statistics of a young, fast-growing queue would not choose, whose joins cost
        // pending × all jobs (15 ms a claim at 200 of 500).
        let running = TaskStatus::Running.as_str();
        return conn.query_opt(
            &format!(
                "WITH next AS (SELECT t.task_id FROM tasks t, LATERAL \
                   (SELECT adapter, run_after FROM adapter_jobs WHERE task_id = t.task_id OFFSET 0) j \
                   WHERE t.status = 'pending' AND j.adapter = ?1 AND coalesce(j.run_after, 0) <= ?2 \
                   ORDER BY t.created_at, t.rowid LIMIT 1 FOR UPDATE OF t SKIP LOCKED), \
                 started AS (UPDATE tasks t SET status = '{running}', updated_at = ?5 \
                   FROM next WHERE t.task_id = next.task_id AND t.status != 'cancelled') \
                 UPDATE adapter_jobs j SET {leased} FROM next WHERE j.task_id = next.task_id \
                 RETURNING j.task_id, j.payload, j.attempt, j.traceparent"
            ),
            params![adapter, now_ms, lease.ms, lease.holder, db::now()],
            read,
        );
    }
    // The write lock taken at the transaction's start keeps other claims out.
    conn.transaction(|tx| {
        let job = tx.query_opt(
            "SELECT j.task_id, j.payload, j.attempt + 1, j.traceparent FROM adapter_jobs j \
             JOIN tasks t ON t.task_id = j.task_id \
             WHERE j.adapter = ?1 AND t.status = 'pending' AND coalesce(j.run_after, 0) <= ?2 \
             ORDER BY t.created_at, t.rowid LIMIT 1",
            params![adapter, now_ms],
            read,
        )?;
        if let Some(job) = &job {
            tx.execute(
                &format!("UPDATE adapter_jobs SET {leased} WHERE task_id = ?1"),
                params![job.task_id, now_ms, lease.ms, lease.holder],
            )?;
            tasks::set_status(tx, &job.task_id, TaskStatus::Running)?;
        }
        Ok(job)
    })
}

/// Extends the lease of the jobs `task_ids` that `lease.holder` holds; returns how many.
pub fn renew(conn: &Conn, lease: Lease<'_>, task_ids: &[String]) -> Result<u64> {
    if task_ids.is_empty() {
        return Ok(0);
    }
    let listed: Vec<String> = (3..task_ids.len() + 3).map(|i| format!("?{i}")).collect();
    let mut params: Vec<&dyn ToParam> = vec![&lease.holder, &lease.ms];
    params.extend(task_ids.iter().map(|id| id as &dyn ToParam));
    conn.execute(
        &format!(
            "UPDATE adapter_jobs SET lease_until = {} + ?2 \
             WHERE lease_holder = ?1 AND task_id IN ({})",
            conn.clock_ms(),
            listed.join(", ")
        ),
        &params,
    )
}

/// How a job run ended, as recorded on its task.
#[derive(Debug)]
pub enum Outcome<'a> {
    Completed,
    /// Runs again once `run_after` (unix ms) has passed; `note` says why.
    RetryLater {
        run_after: i64,
        note: &'a str,
    },
    Failed {
        note: &'a str,
    },
}

/// Records how a job ended and gives up its lease. Returns false, recording nothing, when
/// the job is no longer `holder`'s: its lease ran out and another replica took it over.
pub fn finish(conn: &mut Conn, task_id: &str, holder: &str, outcome: Outcome<'_>) -> Result<bool> {
    if matches!(outcome, Outcome::Completed) && conn.backend() == Backend::Postgres {
        // Most jobs end so: one statement, where the transaction below is five in two round
        // trips. The lease let go (when it is still ours), the payload dropped, the task done.
        let released: i64 = conn.query_one(
            "WITH released AS (UPDATE adapter_jobs \
               SET lease_holder = NULL, lease_until = NULL, payload = ?3 \
               WHERE task_id = ?1 AND lease_holder = ?2 RETURNING task_id), \
             done AS (UPDATE tasks t SET status = ?4, updated_at = ?5 FROM released \
               WHERE t.task_id = released.task_id AND t.status != 'cancelled') \
             SELECT count(*) FROM released",
            params![
                task_id,
                holder,
                b"".as_slice(),
                TaskStatus::Completed.as_str(),
                db::now()
            ],
            |r| r.get(0),
        )?;
        return Ok(released == 1);
    }
    conn.transaction(|tx| {
        let released = tx.execute(
            "UPDATE adapter_jobs SET lease_holder = NULL, lease_until = NULL \
             WHERE task_id = ?1 AND lease_holder = ?2",
            params![task_id, holder],
        )?;
        if released == 0 {
            return Ok(false);
        }
        // The job is ours: what follows goes with the commit.
        match outcome {
            Outcome::Completed => {
                tasks::set_status_later(tx, task_id, TaskStatus::Completed)?;
                forget_payload(tx, task_id)?;
            }
            Outcome::RetryLater { run_after, note } => {
                tx.execute(
                    "UPDATE adapter_jobs SET run_after = ?2 WHERE task_id = ?1",
                    params![task_id, run_after],
                )?;
                tasks::set_status_later(tx, task_id, TaskStatus::Pending)?;
                tasks::append_note(tx, task_id, note)?;
            }
            Outcome::Failed { note } => {
                tasks::set_status_later(tx, task_id, TaskStatus::Error)?;
                tasks::append_note(tx, task_id, note)?;
                forget_payload(tx, task_id)?;
            }
        }
        Ok(true)
    })
}

/// A finished job's payload is of no more use: only its task stays.
fn forget_payload(conn: &Conn, task_id: &str) -> Result<()> {
    conn.execute_later(
        "UPDATE adapter_jobs SET payload = ?2 WHERE task_id = ?1",
        params![task_id, b"".as_slice()],
    )
}

/// Deletes the finished jobs of each adapter (with their tasks) past its newest `keep`;
/// returns how many went.
pub fn forget_finished(conn: &Conn, keep: u32) -> Result<u64> {
    conn.execute(
        "DELETE FROM tasks WHERE task_id IN (SELECT task_id FROM (\
           SELECT j.task_id, row_number() OVER \
             (PARTITION BY j.adapter ORDER BY t.updated_at DESC, t.rowid DESC) AS newer \
           FROM adapter_jobs j JOIN tasks t ON t.task_id = j.task_id \
           WHERE t.status IN ('completed', 'error', 'cancelled')) ranked \
         WHERE newer > ?1)",
        params![keep],
    )
}

/// Jobs whose replica is gone go back to pending, or fail once they have started
/// `max_attempts` times: those whose lease ran out, and those `restarted` held before this
/// process (the same replica) started, with any a build before leases left running.
/// Returns (requeued, failed).
pub fn reclaim(conn: &mut Conn, max_attempts: u32, restarted: Option<&str>) -> Result<(u64, u64)> {
    let orphaned = format!(
        "SELECT task_id FROM adapter_jobs WHERE ((lease_holder IS NULL AND CAST(?2 AS TEXT) IS NOT NULL) \
         OR lease_holder = ?2 OR lease_until < {})",
        conn.clock_ms()
    );
    conn.transaction(|tx| {
        let failed = tx.execute(
            &format!(
                "UPDATE tasks SET status = 'error', updated_at = ?3, \
                 description = coalesce(description || '\n', '') || 'interrupted ' || \
                   (SELECT attempt FROM adapter_jobs j WHERE j.task_id = tasks.task_id) || ' times; given up' \
                 WHERE status = 'running' AND task_id IN ({orphaned} AND attempt >= ?1)"
            ),
            params![max_attempts, restarted, crate::db::now()],
        )?;
        let requeued = tx.execute(
            &format!(
                "UPDATE tasks SET status = 'pending', updated_at = ?1, \
                 description = coalesce(description || '\n', '') || 'interrupted; will run again' \
                 WHERE status = 'running' AND task_id IN ({orphaned})"
            ),
            params![crate::db::now(), restarted],
        )?;
        if failed + requeued > 0 {
            tx.execute(
                "UPDATE adapter_jobs SET lease_holder = NULL, lease_until = NULL \
                 WHERE lease_holder IS NOT NULL AND task_id IN \
                   (SELECT task_id FROM tasks WHERE status != 'running')",
                params![],
            )?;
        }
        Ok((requeued, failed))
    })
}

/// Jobs waiting and running per adapter: `(adapter, "pending" | "running", count)`.
pub fn open(conn: &Conn) -> Result<Vec<(String, String, u32)>> {
    conn.query(
        "SELECT j.adapter, t.status, count(*) FROM adapter_jobs j JOIN tasks t \
         ON t.task_id = j.task_id WHERE t.status IN ('pending', 'running') \
         GROUP BY j.adapter, t.status",
        params![],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::now_ms;
    use crate::db::testing::{Backends, each_conn};

    fn ready(conn: &Conn, now_ms: i64) -> Vec<String> {
        let waiting = waiting(conn, now_ms).unwrap();
        waiting
            .into_iter()
            .filter(|w| w.ready)
            .map(|w| w.adapter)
            .collect()
    }

    fn backlog(conn: &Conn) -> Vec<(String, u32)> {
        let waiting = waiting(conn, now_ms()).unwrap();
        waiting
            .into_iter()
            .map(|w| (w.adapter, w.pending))
            .collect()
    }

    const HERE: Lease<'static> = Lease {
        holder: "replica-a",
        ms: 60_000,
    };

    fn payload(conn: &Conn, task_id: &str) -> Option<Vec<u8>> {
        conn.query_opt(
            "SELECT payload FROM adapter_jobs WHERE task_id = ?1",
            params![task_id],
            |r| r.get(0),
        )
        .unwrap()
    }

    fn status(conn: &Conn, task_id: &str) -> TaskStatus {
        tasks::get(conn, task_id).unwrap().unwrap().status
    }

    #[test]
    fn a_job_is_a_pending_task_with_a_payload() {
        each_conn(Backends::Both, |conn| {
            let first = enqueue(conn, "teamchat", b"{\"channel\":\"C1\"}", None, 10).unwrap();
            enqueue(conn, "webhook", b"2", None, 10).unwrap();
            let task = tasks::get(conn, &first).unwrap().unwrap();
            assert_eq!(
                (task.status, task.title.as_str()),
                (TaskStatus::Pending, "teamchat job")
            );
            assert_eq!(ready(conn, now_ms()), ["teamchat", "webhook"]);
            let job = claim_next(conn, "teamchat", now_ms(), HERE)
                .unwrap()
                .unwrap();
            assert_eq!((job.task_id.as_str(), job.attempt), (first.as_str(), 1));
            assert_eq!(status(conn, &first), TaskStatus::Running);
            assert_eq!(ready(conn, now_ms()), ["webhook"]);
            assert!(
                claim_next(conn, "teamchat", now_ms(), HERE)
                    .unwrap()
                    .is_none()
            );
            assert_eq!(backlog(conn), [("webhook".to_owned(), 1)]);
            assert_eq!(
                payload(conn, &first).as_deref(),
                Some(&b"{\"channel\":\"C1\"}"[..])
            );
            // Deleting the finished task deletes the job with it.
            assert!(finish(conn, &first, HERE.holder, Outcome::Completed).unwrap());
            assert_eq!(status(conn, &first), TaskStatus::Completed);
            tasks::cancel_or_delete(conn, &first).unwrap();
            assert!(payload(conn, &first).is_none());
        });
    }

    #[test]
    fn an_adapter_has_a_bound_on_unfinished_jobs() {
        each_conn(Backends::Both, |conn| {
            let a = enqueue(conn, "a", b"1", None, 2).unwrap();
            enqueue(conn, "a", b"2", None, 2).unwrap();
            assert!(matches!(
                enqueue(conn, "a", b"3", None, 2),
                Err(Refused::Full { pending: 2 })
            ));
            assert!(
                enqueue(conn, "b", b"1", None, 2).is_ok(),
                "bounds are per adapter"
            );
            claim_next(conn, "a", now_ms(), HERE).unwrap().unwrap();
            assert!(
                matches!(enqueue(conn, "a", b"3", None, 2), Err(Refused::Full { .. })),
                "running counts"
            );
            finish(conn, &a, HERE.holder, Outcome::Completed).unwrap();
            assert!(enqueue(conn, "a", b"3", None, 2).is_ok());
        });
    }

    #[test]
    fn the_unfinished_count_follows_every_change_of_a_jobs_task() {
        each_conn(Backends::Both, |conn| {
            let done = enqueue(conn, "a", b"1", None, 10).unwrap();
            let dropped = enqueue(conn, "a", b"2", None, 10).unwrap();
            enqueue(conn, "a", b"3", None, 10).unwrap();
            tasks::create(conn, &NewTask::default()).unwrap();
            assert_eq!(unfinished(conn, "a").unwrap(), 3);
            claim_next(conn, "a", now_ms(), HERE).unwrap().unwrap();
            assert_eq!(unfinished(conn, "a").unwrap(), 3, "running counts");
            assert!(finish(conn, &done, HERE.holder, Outcome::Completed).unwrap());
            assert_eq!(unfinished(conn, "a").unwrap(), 2);
            tasks::cancel_or_delete(conn, &dropped).unwrap();
            assert_eq!(unfinished(conn, "a").unwrap(), 1, "cancelled");
            tasks::cancel_or_delete(conn, &dropped).unwrap();
            tasks::cancel_or_delete(conn, &done).unwrap();
            assert_eq!(unfinished(conn, "a").unwrap(), 1, "finished ones deleted");
            let running = claim_next(conn, "a", now_ms(), HERE).unwrap().unwrap();
            assert_eq!(reclaim(conn, 1, Some(HERE.holder)).unwrap(), (0, 1));
            assert_eq!(unfinished(conn, "a").unwrap(), 0, "given up");
            let counted: i64 = conn
                .query_one(
                    "SELECT count(*) FROM adapter_jobs j JOIN tasks t ON t.task_id = j.task_id \
                     WHERE t.status IN ('pending', 'running')",
                    params![],
                    |r| r.get(0),
                )
                .unwrap();
            assert_eq!(counted, 0, "{running:?}");
            assert_eq!(unfinished(conn, "b").unwrap(), 0, "never had a job");
        });
    }

    #[test]
    fn finished_jobs_drop_their_payload_and_only_the_newest_stay() {
        each_conn(Backends::Both, |conn| {
            let mut finished = Vec::new();
            for adapter in ["a", "b"] {
                for _ in 0..3 {
                    let job = enqueue(conn, adapter, &[7; 1000], None, 10).unwrap();
                    claim_next(conn, adapter, now_ms(), HERE).unwrap().unwrap();
                    assert!(finish(conn, &job, HERE.holder, Outcome::Completed).unwrap());
                    assert_eq!(payload(conn, &job).as_deref(), Some(&b""[..]));
                    finished.push(job);
                }
            }
            let waiting = enqueue(conn, "a", b"keep me", None, 10).unwrap();
            assert_eq!(
                forget_finished(conn, 2).unwrap(),
                2,
                "the oldest of each adapter"
            );
            assert!(tasks::get(conn, &finished[0]).unwrap().is_none());
            assert!(tasks::get(conn, &finished[3]).unwrap().is_none());
            for kept in [&finished[1], &finished[2], &finished[4], &finished[5]] {
                assert!(tasks::get(conn, kept).unwrap().is_some());
            }
            assert_eq!(payload(conn, &waiting).as_deref(), Some(&b"keep me"[..]));
            assert_eq!(forget_finished(conn, 2).unwrap(), 0);
        });
    }

    #[test]
    fn retries_wait_and_interrupted_jobs_run_again_up_to_the_limit() {
        each_conn(Backends::Both, |conn| {
            let job = enqueue(conn, "a", b"x", None, 10).unwrap();
            claim_next(conn, "a", 1_000, HERE).unwrap().unwrap();
            let retry = Outcome::RetryLater {
                run_after: 5_000,
                note: "retry: 429",
            };
            assert!(finish(conn, &job, HERE.holder, retry).unwrap());
            assert!(ready(conn, 4_999).is_empty());
            assert_eq!(backlog(conn), [("a".to_owned(), 1)], "waiting, not ready");
            assert_eq!(next_retry(conn, 1_000).unwrap(), Some(5_000));
            let again = claim_next(conn, "a", 5_000, HERE).unwrap().unwrap();
            assert_eq!(again.attempt, 2);
            // Another replica's sweep leaves a job whose lease holds alone.
            assert_eq!(reclaim(conn, 3, None).unwrap(), (0, 0));
            // The replica restarts while it runs: back to pending, until its third start.
            assert_eq!(reclaim(conn, 3, Some(HERE.holder)).unwrap(), (1, 0));
            assert_eq!(status(conn, &job), TaskStatus::Pending);
            assert_eq!(
                claim_next(conn, "a", 5_000, HERE).unwrap().unwrap().attempt,
                3
            );
            assert_eq!(reclaim(conn, 3, Some(HERE.holder)).unwrap(), (0, 1));
            let task = tasks::get(conn, &job).unwrap().unwrap();
            assert_eq!(task.status, TaskStatus::Error);
            assert!(task.description.unwrap().contains("interrupted 3 times"));
        });
    }

    #[test]
    fn a_job_whose_lease_ran_out_is_taken_over_once() {
        each_conn(Backends::Both, |conn| {
            let job = enqueue(conn, "a", b"x", None, 10).unwrap();
            let dying = Lease {
                holder: "replica-b",
                ms: -1,
            };
            claim_next(conn, "a", now_ms(), dying).unwrap().unwrap();
            let held = [job.clone()];
            assert_eq!(
                renew(conn, HERE, &held).unwrap(),
                0,
                "not this replica's job"
            );
            assert_eq!(reclaim(conn, 3, None).unwrap(), (1, 0));
            let taken = claim_next(conn, "a", now_ms(), HERE).unwrap().unwrap();
            assert_eq!((taken.task_id.as_str(), taken.attempt), (job.as_str(), 2));
            assert_eq!(renew(conn, HERE, &held).unwrap(), 1);
            // The first replica comes back and finishes late: its outcome is not recorded.
            assert!(!finish(conn, &job, dying.holder, Outcome::Completed).unwrap());
            assert_eq!(status(conn, &job), TaskStatus::Running);
            assert!(finish(conn, &job, HERE.holder, Outcome::Completed).unwrap());
        });
    }

    #[test]
    fn a_job_leased_here_but_no_longer_held_is_not_renewed_and_runs_again() {
        each_conn(Backends::Both, |conn| {
            let short = Lease {
                holder: HERE.holder,
                ms: -1,
            };
            let held = enqueue(conn, "a", b"x", None, 10).unwrap();
            let lost = enqueue(conn, "a", b"y", None, 10).unwrap();
            claim_next(conn, "a", now_ms(), short).unwrap().unwrap();
            claim_next(conn, "a", now_ms(), short).unwrap().unwrap();
            // Both leases ran out; the worker renews the one job it still runs.
            assert_eq!(renew(conn, HERE, std::slice::from_ref(&held)).unwrap(), 1);
            assert_eq!(reclaim(conn, 3, None).unwrap(), (1, 0));
            assert_eq!(status(conn, &held), TaskStatus::Running);
            assert_eq!(status(conn, &lost), TaskStatus::Pending);
            let again = claim_next(conn, "a", now_ms(), HERE).unwrap().unwrap();
            assert_eq!((again.task_id.as_str(), again.attempt), (lost.as_str(), 2));
        });
    }

    #[test]
    fn a_claim_and_its_job_are_taken_together_once() {
        each_conn(Backends::Both, |conn| {
            let once = |key| Once {
                key,
                ttl_ms: 60_000,
                payload: b"reply",
                traceparent: None,
            };
            let first = enqueue_once(conn, "a", &once("event:1"), 10, 1 << 20).unwrap();
            assert!(first.is_some());
            assert_eq!(
                enqueue_once(conn, "a", &once("event:1"), 10, 1 << 20).unwrap(),
                None
            );
            assert_eq!(backlog(conn), [("a".to_owned(), 1)], "one job");
            // Refused by the kv quota: neither the claim nor a job stays.
            assert!(matches!(
                enqueue_once(conn, "a", &once("event:2"), 10, 10),
                Err(Refused::KvQuota(_))
            ));
            assert_eq!(kv_store::get(conn, "a", "event:2").unwrap(), None);
            // Refused by the jobs bound: the claim is undone with it.
            assert!(matches!(
                enqueue_once(conn, "a", &once("event:3"), 1, 1 << 20),
                Err(Refused::Full { pending: 1 })
            ));
            assert_eq!(kv_store::get(conn, "a", "event:3").unwrap(), None);
            // A key claimed already is a duplicate, full queue or not.
            assert_eq!(
                enqueue_once(conn, "a", &once("event:1"), 1, 1 << 20).unwrap(),
                None
            );
            assert_eq!(backlog(conn), [("a".to_owned(), 1)]);
        });
    }
}
