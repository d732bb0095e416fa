//! Completion webhooks of runs: recorded with the run, due once its task has ended (whichever
//! replica ended it, or stopped), claimed by one deliverer at a time with a lease, and kept
//! with a log of their attempts. Delivered at least once: an attempt cut by a stop is made
//! again once its lease runs out.

use serde::Serialize;

use crate::db::{self, Backend, Conn};
use crate::error::Result;
use crate::params;

/// A run's webhook as the runs API shows it.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Webhook {
    pub url: String,
    /// `pending`, `delivered` or `failed` (its attempts ran out).
    pub state: String,
    pub attempts: u32,
    pub delivered_at: Option<String>,
    pub last_error: Option<String>,
}

/// One attempt of the delivery log.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(as = WebhookAttempt)]
pub struct Attempt {
    pub attempt: u32,
    pub at: String,
    /// The receiver's status, when it answered.
    pub status_code: Option<u16>,
    pub error: Option<String>,
    pub duration_ms: i64,
}

/// Records `url` as run `task_id`'s webhook (in the transaction that creates the run).
pub fn add(conn: &Conn, task_id: &str, url: &str) -> Result<()> {
    conn.execute_later(
        "INSERT INTO run_webhooks (task_id, url) VALUES (?1, ?2)",
        params![task_id, url],
    )
}

pub fn get(conn: &Conn, task_id: &str) -> Result<Option<Webhook>> {
    conn.query_opt(
        "SELECT url, state, attempts, delivered_at, last_error FROM run_webhooks \
         WHERE task_id = ?1",
        params![task_id],
        |r| {
            Ok(Webhook {
                url: r.get(0)?,
                state: r.get(1)?,
                attempts: r.get(2)?,
                delivered_at: r.get(3)?,
                last_error: r.get(4)?,
            })
        },
    )
}

/// The delivery log of run `task_id`, oldest first.
pub fn attempts(conn: &Conn, task_id: &str) -> Result<Vec<Attempt>> {
    conn.query(
        "SELECT attempt, at, status_code, error, duration_ms FROM run_webhook_attempts \
         WHERE task_id = ?1 ORDER BY attempt",
        params![task_id],
        |r| {
            let status: Option<i64> = r.get(2)?;
            Ok(Attempt {
                attempt: r.get(0)?,
                at: r.get(1)?,
                status_code: status.and_then(|s| u16::try_from(s).ok()),
                error: r.get(3)?,
                duration_ms: r.get(4)?,
            })
        },
    )
}

/// A delivery taken by a deliverer: its run, where it goes, and which attempt this is.
#[derive(Debug, Clone)]
pub struct Due {
    pub task_id: String,
    pub url: String,
    pub attempt: u32,
}

/// Takes up to `limit` deliveries whose run has ended and whose time has come, leased to
/// `holder` for `lease_ms`; each attempt is counted as it is taken, so one cut by a stop
/// still counts. Deliverers on several replicas each get different ones.
pub fn claim_due(conn: &mut Conn, holder: &str, lease_ms: i64, limit: u32) -> Result<Vec<Due>> {
    let skip_taken = match conn.backend() {
        // The write lock taken at the transaction's start already keeps others out.
        Backend::Sqlite => "",
        Backend::Postgres => " FOR UPDATE OF w SKIP LOCKED",
    };
    let now = conn.clock_ms();
    // Looked for first without the write lock: a replica looks every second, and mostly
    // nothing is due.
    // Deliveries whose run has ended and whose time has come, not held by anyone.
    let due = format!(
        "FROM run_webhooks w JOIN tasks t ON t.task_id = w.task_id \
         WHERE w.state = 'pending' AND w.next_attempt_at <= {now} \
         AND coalesce(w.lease_until, 0) < {now} \
         AND t.status IN ('completed', 'error', 'cancelled')"
    );
    let any = conn.query_opt(&format!("SELECT 1 {due} LIMIT 1"), params![], |r| {
        r.get::<i64>(0)
    })?;
    if any.is_none() {
        return Ok(Vec::new());
    }
    conn.transaction(|tx| {
        let due = tx.query(
            &format!(
                "SELECT w.task_id, w.url, w.attempts + 1 {due} \
                 ORDER BY w.next_attempt_at LIMIT ?1{skip_taken}"
            ),
            params![limit],
            |r| {
                Ok(Due {
                    task_id: r.get(0)?,
                    url: r.get(1)?,
                    attempt: r.get(2)?,
                })
            },
        )?;
        for taken in &due {
            tx.execute(
                &format!(
                    "UPDATE run_webhooks SET attempts = ?2, lease_holder = ?3, \
                     lease_until = {now} + ?4 WHERE task_id = ?1"
                ),
                params![taken.task_id, taken.attempt, holder, lease_ms],
            )?;
        }
        Ok(due)
    })
}

/// Lets go of the deliveries `holder` held (it restarted, so none is under way): they are
/// due again at once instead of once their lease runs out.
pub fn release(conn: &Conn, holder: &str) -> Result<u64> {
    conn.execute(
        "UPDATE run_webhooks SET lease_holder = NULL, lease_until = NULL \
         WHERE lease_holder = ?1",
        params![holder],
    )
}

/// What an attempt came to.
#[derive(Debug, Clone, Copy)]
pub enum Next {
    Delivered,
    /// Tried again this many milliseconds from now.
    RetryIn(i64),
    /// No attempts left.
    GaveUp,
}

/// Records attempt `due.attempt` (its answer's status, or its error) and what comes next,
/// if `holder` still holds it; false when its lease was lost (another deliverer took over).
pub fn record(
    conn: &mut Conn,
    due: &Due,
    holder: &str,
    outcome: (Option<u16>, Option<&str>, i64),
    next: Next,
) -> Result<bool> {
    let (status_code, error, duration_ms) = outcome;
    let now = conn.clock_ms();
    let (state, retry_in) = match next {
        Next::Delivered => ("delivered", 0),
        Next::RetryIn(ms) => ("pending", ms),
        Next::GaveUp => ("failed", 0),
    };
    let delivered_at = matches!(next, Next::Delivered).then(db::now);
    conn.transaction(|tx| {
        let held = tx.execute(
            &format!(
                "UPDATE run_webhooks SET state = ?3, next_attempt_at = {now} + ?4, \
                 lease_holder = NULL, lease_until = NULL, delivered_at = ?5, last_error = ?6 \
                 WHERE task_id = ?1 AND lease_holder = ?2 AND attempts = ?7"
            ),
            params![
                due.task_id,
                holder,
                state,
                retry_in,
                delivered_at,
                error,
                due.attempt
            ],
        )?;
        if held == 0 {
            return Ok(false);
        }
        tx.execute(
            "INSERT INTO run_webhook_attempts (task_id, attempt, at, status_code, error, \
             duration_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                due.task_id,
                due.attempt,
                db::now(),
                status_code.map(i64::from),
                error,
                duration_ms
            ],
        )?;
        Ok(true)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::testing::{Backends, each_conn};
    use crate::runs::{self, NewRun};
    use crate::tasks::{self, TaskStatus};

    fn run_with_webhook(conn: &mut Conn) -> String {
        runs::create(
            conn,
            &NewRun {
                title: "hello",
                agent: "default",
                conversation_id: "c1",
                trace_id: "trace-1",
                metadata: None,
                runner: "replica-a",
                started_by: None,
                webhook: Some("https://example.com/hook"),
            },
        )
        .unwrap()
    }

    #[test]
    fn a_webhook_is_due_once_its_run_ended_and_taken_by_one_deliverer() {
        each_conn(Backends::Both, |conn| {
            let id = run_with_webhook(conn);
            // Running: not yet.
            assert!(claim_due(conn, "a", 60_000, 10).unwrap().is_empty());
            tasks::set_status(conn, &id, TaskStatus::Completed).unwrap();
            let due = claim_due(conn, "a", 60_000, 10).unwrap();
            assert_eq!(due.len(), 1);
            assert_eq!(
                (due[0].attempt, due[0].url.as_str()),
                (1, "https://example.com/hook")
            );
            // Leased: nobody else takes it.
            assert!(claim_due(conn, "b", 60_000, 10).unwrap().is_empty());

            let failed = (Some(500), Some("the receiver answered 500"), 12);
            assert!(record(conn, &due[0], "a", failed, Next::RetryIn(0)).unwrap());
            let again = claim_due(conn, "b", 60_000, 10).unwrap();
            assert_eq!(again[0].attempt, 2);
            // The first holder's lease is gone: what it says now is not recorded.
            assert!(!record(conn, &due[0], "a", (Some(200), None, 3), Next::Delivered).unwrap());
            assert!(record(conn, &again[0], "b", (Some(204), None, 5), Next::Delivered).unwrap());
            assert!(claim_due(conn, "a", 60_000, 10).unwrap().is_empty());

            let webhook = get(conn, &id).unwrap().unwrap();
            assert_eq!((webhook.state.as_str(), webhook.attempts), ("delivered", 2));
            assert!(webhook.delivered_at.is_some() && webhook.last_error.is_none());
            let log = attempts(conn, &id).unwrap();
            let codes: Vec<_> = log.iter().map(|a| (a.attempt, a.status_code)).collect();
            assert_eq!(codes, vec![(1, Some(500)), (2, Some(204))]);
        });
    }

    #[test]
    fn a_lease_that_ran_out_is_taken_again_and_counted() {
        each_conn(Backends::Both, |conn| {
            let id = run_with_webhook(conn);
            tasks::set_status(conn, &id, TaskStatus::Error).unwrap();
            assert_eq!(claim_due(conn, "a", 0, 10).unwrap()[0].attempt, 1);
            std::thread::sleep(std::time::Duration::from_millis(5));
            // Its holder stopped mid-attempt: the next deliverer makes attempt 2.
            let again = claim_due(conn, "b", 60_000, 10).unwrap();
            assert_eq!(again[0].attempt, 2);
            assert!(
                record(
                    conn,
                    &again[0],
                    "b",
                    (None, Some("timed out"), 10),
                    Next::GaveUp
                )
                .unwrap()
            );
            let webhook = get(conn, &id).unwrap().unwrap();
            assert_eq!(webhook.state, "failed");
            assert_eq!(webhook.last_error.as_deref(), Some("timed out"));
        });
    }
}
