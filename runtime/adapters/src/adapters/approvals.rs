//! The host side of approvals for adapters: deciding those of an adapter's own runs (for
//! components' `agent.decide` and native adapters alike), and handing native adapters the jobs
//! queued when their runs went on. Those come from the job queue, as components' jobs do,
//! under this replica's lease (which the job worker renews): a replica that dies while it
//! delivers one leaves it to be taken again.

use std::sync::Arc;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use service_contract::approvals::{Approvals, DecideError, WentOnJob};
use tokio::sync::Notify;

use crate::approvals::{self, Decided, Decision};
use crate::db::{Db, now_ms};
use crate::engine::pause::WentOn;
use crate::job_queue::{self, Lease, Outcome};

/// How long a native adapter's hold on a job lasts unless the job worker renews it.
const LEASE_MS: i64 = 60_000;

#[derive(Clone)]
pub struct DbApprovals {
    pub db: Db,
    pub replica: String,
    /// Wakes this replica's resumer when a decision is taken here.
    pub decided: Arc<Notify>,
}

impl DbApprovals {
    /// Decides an approval of a run `source` started.
    pub(crate) async fn decide_for(
        &self,
        source: &str,
        approval_id: &str,
        approve: bool,
        note: Option<String>,
    ) -> Result<bool, DecideError> {
        let decision = if approve {
            Decision::Approve
        } else {
            Decision::Deny
        };
        let (source, id) = (source.to_owned(), approval_id.to_owned());
        let decided = self
            .db
            .call(move |conn| approvals::decide_for(conn, &id, &source, decision, note.as_deref()))
            .await;
        match decided {
            Ok(Decided::Now(_)) => {
                self.decided.notify_one();
                Ok(true)
            }
            Ok(Decided::Before(_)) => Ok(false),
            Ok(Decided::Unknown) => Err(DecideError::Unknown),
            Err(e) => {
                tracing::warn!("cannot record an adapter's decision: {e}");
                Err(DecideError::Failed)
            }
        }
    }
}

impl Approvals for DbApprovals {
    fn decide(
        &self,
        source: &str,
        approval_id: &str,
        approve: bool,
        note: Option<String>,
    ) -> BoxFuture<'static, Result<bool, DecideError>> {
        let (this, source, id) = (self.clone(), source.to_owned(), approval_id.to_owned());
        async move { this.decide_for(&source, &id, approve, note).await }.boxed()
    }

    fn next_went_on(&self, source: &str) -> BoxFuture<'static, Option<WentOnJob>> {
        let (db, source, holder) = (self.db.clone(), source.to_owned(), self.replica.clone());
        async move {
            let taken = db
                .call(move |conn| {
                    let lease = Lease {
                        holder: &holder,
                        ms: LEASE_MS,
                    };
                    let Some(job) = job_queue::claim_next(conn, &source, now_ms(), lease)? else {
                        return Ok(None);
                    };
                    let went_on = approvals::went_on(conn, &job.task_id, &source)?;
                    Ok(Some((job, went_on)))
                })
                .await;
            let (job, went_on) = match taken {
                Ok(taken) => taken?,
                Err(e) => {
                    tracing::warn!("cannot take an adapter's job: {e}");
                    return None;
                }
            };
            let outcome = went_on
                .and_then(|value| serde_json::from_value::<WentOn>(value).ok())
                .map_or_else(|| Err(WentOn::unknown(&job.task_id)), WentOn::into_outcome);
            Some(WentOnJob {
                job: job.task_id,
                payload: job.payload,
                attempt: job.attempt,
                outcome,
            })
        }
        .boxed()
    }

    fn done(&self, job: &str, failure: Option<String>) -> BoxFuture<'static, ()> {
        let (db, job, holder) = (self.db.clone(), job.to_owned(), self.replica.clone());
        async move {
            let finished = db
                .call(move |conn| {
                    let outcome = match &failure {
                        None => Outcome::Completed,
                        Some(note) => Outcome::Failed { note },
                    };
                    job_queue::finish(conn, &job, &holder, outcome)
                })
                .await;
            if let Err(e) = finished {
                tracing::warn!("cannot finish an adapter's job: {e}");
            }
        }
        .boxed()
    }
}
