//! Which replicas are alive, as PostgreSQL sees it. Each process holds a session-level
//! advisory lock named for its replica id while it lives ([`key`], taken by
//! [`crate::db::Db::session_lock`]); the server lets it go the moment that session ends (kill -9,
//! a machine gone), so another replica tells a dead one from a slow one with one query instead
//! of waiting for its leases to run out. A replica that is only slow (paused, starved) keeps
//! its session, and so its lock and its work.

use sha2::{Digest, Sha256};

use crate::db::Conn;
use crate::error::Result;
use crate::{job_queue, params, run_webhooks, tasks, traces};

/// The advisory lock of `replica`.
pub fn key(replica: &str) -> i64 {
    let digest = Sha256::digest(format!("service-runtime replica {replica}"));
    i64::from_be_bytes(digest[..8].try_into().expect("eight bytes"))
}

/// The replicas other than `me` that hold work or a lease but no longer their lock, each
/// taken over: its jobs requeued (up to `job_attempts` starts), its leases let go, its running
/// tasks and runs failed as interrupted. Their ids.
pub fn take_over_dead(conn: &mut Conn, me: &str, job_attempts: u32) -> Result<Vec<String>> {
    let holders: Vec<String> = conn.query(
        "SELECT lease_holder FROM adapter_jobs WHERE lease_holder IS NOT NULL \
         UNION SELECT holder FROM leases WHERE expires_at > 0 \
         UNION SELECT holder FROM conversation_turns \
         UNION SELECT claimed_by FROM approvals WHERE claim_until IS NOT NULL \
         UNION SELECT lease_holder FROM run_webhooks WHERE lease_holder IS NOT NULL \
         UNION SELECT runner FROM tasks WHERE status = 'running' AND runner IS NOT NULL",
        params![],
        |r| r.get(0),
    )?;
    let mut dead = Vec::new();
    for holder in holders.into_iter().filter(|holder| holder != me) {
        // Taken for the transaction only: a free lock means no session of that replica lives.
        let free: bool = conn.transaction(|tx| {
            tx.query_one(
                "SELECT pg_try_advisory_xact_lock(?1)",
                params![key(&holder)],
                |r| r.get(0),
            )
        })?;
        if !free {
            continue;
        }
        // Each kind of lease it held is let go, so what it was doing is taken at once: the
        // scheduler and gateways, its turns' places in their conversations, approvals it was
        // resuming, webhooks it was delivering, and its jobs.
        for statement in [
            "UPDATE leases SET expires_at = 0 WHERE holder = ?1",
            "DELETE FROM conversation_turns WHERE holder = ?1",
            "UPDATE approvals SET claim_until = NULL WHERE claimed_by = ?1",
        ] {
            conn.execute(statement, params![holder])?;
        }
        run_webhooks::release(conn, &holder)?;
        job_queue::reclaim(conn, job_attempts, Some(&holder))?;
        dead.push(holder);
    }
    if !dead.is_empty() {
        // Their presence is let go above, so theirs are the orphans.
        tasks::fail_orphaned(conn, None)?;
        traces::fail_orphaned(conn, None)?;
    }
    Ok(dead)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::now_ms;
    use crate::db::testing::{Backends, block_on, each_backend};
    use crate::job_queue::{Lease, claim_next, enqueue};
    use crate::leases;

    #[test]
    fn the_work_of_a_replica_whose_lock_is_free_is_taken_over_and_a_live_ones_is_not() {
        each_backend(Backends::PostgresOnly, |db| {
            let _alive = block_on(db.session_lock(key("alive"))).unwrap().unwrap();
            db.blocking(|conn| {
                for (adapter, holder) in [("a", "alive"), ("b", "gone")] {
                    enqueue(conn, adapter, b"x", None, 10).unwrap();
                    let lease = Lease { holder, ms: 60_000 };
                    claim_next(conn, adapter, now_ms(), lease)?.unwrap();
                    leases::hold(conn, "gateway", holder, 60_000)?;
                }
                assert_eq!(take_over_dead(conn, "me", 3)?, ["gone"]);
                let leased: Vec<String> = conn.query(
                    "SELECT lease_holder FROM adapter_jobs WHERE lease_holder IS NOT NULL",
                    params![],
                    |r| r.get(0),
                )?;
                assert_eq!(leased, ["alive"], "the live replica keeps its job");
                assert_eq!(take_over_dead(conn, "me", 3)?, Vec::<String>::new());
                Ok(())
            })
            .unwrap();
        });
    }
}
