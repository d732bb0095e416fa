//! Goes on with runs that paused for approval once a person decided (or the timeout did):
//! every replica looks every second, and at once when a decision is made here; a claim on
//! the approval makes one replica go on with each.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use crate::approvals;
use crate::bus::{Bus, Event};
use crate::db::Db;
use crate::engine::pause::Resumed;
use crate::engine::{Engine, RunError};

/// How long a claim holds unrenewed (renewed a quarter of the way).
const CLAIM: Duration = Duration::from_secs(30);
/// How often a replica looks for decisions made elsewhere, and for approvals that expired.
const LOOK: Duration = Duration::from_secs(1);

pub struct Resumer {
    pub db: Db,
    pub engine: Arc<Engine>,
    pub replica: String,
    /// Undecided approvals older than this are expired (denied).
    pub timeout: Duration,
    /// Notified when a decision is made on this replica.
    pub wake: Arc<Notify>,
    /// Wakes the job workers for a job queued for the adapter whose run went on.
    pub bus: Arc<Bus>,
}

impl Resumer {
    pub async fn run(self, stop: CancellationToken) {
        let timeout_ms = self.timeout.as_millis() as i64;
        loop {
            match self
                .db
                .call(move |conn| approvals::expire(conn, timeout_ms))
                .await
            {
                Ok(0) => {}
                Ok(expired) => tracing::info!(
                    expired,
                    "approvals expired undecided ([approvals] timeout_secs)"
                ),
                Err(e) => tracing::warn!("cannot expire approvals: {e}"),
            }
            self.claim_all(&stop).await;
            tokio::select! {
                () = self.wake.notified() => {}
                () = tokio::time::sleep(LOOK) => {}
                () = stop.cancelled() => return,
            }
        }
    }

    /// Claims every decided approval no one goes on with, each going on in a task of its own.
    async fn claim_all(&self, stop: &CancellationToken) {
        let lease_ms = CLAIM.as_millis() as i64;
        loop {
            let holder = self.replica.clone();
            let claimed = match self
                .db
                .call(move |conn| approvals::claim(conn, &holder, lease_ms))
                .await
            {
                Ok(Some(claimed)) => claimed,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!("cannot claim a decided approval: {e}");
                    return;
                }
            };
            let (db, engine, holder, cancel, bus) = (
                self.db.clone(),
                Arc::clone(&self.engine),
                self.replica.clone(),
                stop.child_token(),
                Arc::clone(&self.bus),
            );
            tokio::spawn(async move {
                let id = claimed.approval.id.clone();
                let _renewing = renew(db.clone(), id.clone(), holder.clone(), lease_ms);
                let resumed = engine.resume(claimed, &cancel).await;
                if let Ok(Resumed {
                    queued_job: true, ..
                }) = &resumed
                {
                    bus.publish(Event::JobsReady);
                }
                match resumed.map(|r| r.result) {
                    Ok(Err(RunError::Cancelled { .. })) if cancel.is_cancelled() => {
                        // Stopping: another replica, or this one restarted, goes on with it.
                        let released = db
                            .call(move |conn| approvals::release(conn, &id, &holder))
                            .await;
                        if let Err(e) = released {
                            tracing::warn!("cannot release an approval's claim: {e}");
                        }
                    }
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => {
                        tracing::info!(approval = %id, "a run went on after its approval and failed: {e}")
                    }
                    Err(e) => {
                        tracing::warn!(approval = %id, "cannot go on with a run after its approval: {e}")
                    }
                }
            });
        }
    }
}

fn renew(db: Db, id: String, holder: String, lease_ms: i64) -> AbortOnDropHandle<()> {
    AbortOnDropHandle::new(tokio::spawn(async move {
        loop {
            tokio::time::sleep(CLAIM / 4).await;
            let (id, holder) = (id.clone(), holder.clone());
            if let Err(e) = db
                .call(move |conn| approvals::renew(conn, &id, &holder, lease_ms))
                .await
            {
                tracing::warn!("cannot renew an approval's claim: {e}");
            }
        }
    }))
}
