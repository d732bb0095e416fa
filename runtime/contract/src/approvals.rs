//! Tool calls a person approves, as native adapters see them: a run made with
//! [`RunRequest::then`](crate::RunRequest::then) may pause for a person (it ends `Paused`, saying
//! what it waits for); the adapter may decide approvals of its own runs, and once a run went on
//! the host queues a job for the adapter that says where the run got to.

use futures_util::future::BoxFuture;

use crate::agent::{RunFailure, RunReply};

/// Why a decision was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecideError {
    /// No approval of this adapter's runs has that id.
    Unknown,
    /// The host could not record it now.
    Failed,
}

/// The job queued for an adapter once a run of its that waited for a person went on.
#[derive(Debug, Clone)]
pub struct WentOnJob {
    /// Handed back to [`Approvals::done`].
    pub job: String,
    /// What the run's `then` said.
    pub payload: Vec<u8>,
    /// 1 on the first delivery; more when an earlier one was cut off (a crash).
    pub attempt: u32,
    /// Where the run got to: its answer, its next pause (`Paused`, with `waiting`), or why it
    /// failed.
    pub outcome: Result<RunReply, RunFailure>,
}

/// What the host offers native adapters whose runs may wait for a person.
pub trait Approvals: Send + Sync {
    /// Decides an approval one of `source`'s runs waits for: `Ok(true)` decided now,
    /// `Ok(false)` decided (or expired) before and nothing changed.
    fn decide(
        &self,
        source: &str,
        approval_id: &str,
        approve: bool,
        note: Option<String>,
    ) -> BoxFuture<'static, Result<bool, DecideError>>;

    /// The oldest job queued for `source` by a run that went on, taken for this replica (a
    /// replica that dies with it leaves it to another); `None` when there is none.
    fn next_went_on(&self, source: &str) -> BoxFuture<'static, Option<WentOnJob>>;

    /// The job is done with: delivered, or (with `failure`) given up.
    fn done(&self, job: &str, failure: Option<String>) -> BoxFuture<'static, ()>;
}

/// A host that keeps no approvals (an adapter's own tests, whose runs never wait): nothing to
/// decide, no run that went on.
pub struct NoApprovals;

impl Approvals for NoApprovals {
    fn decide(
        &self,
        _: &str,
        _: &str,
        _: bool,
        _: Option<String>,
    ) -> BoxFuture<'static, Result<bool, DecideError>> {
        Box::pin(async { Err(DecideError::Unknown) })
    }

    fn next_went_on(&self, _: &str) -> BoxFuture<'static, Option<WentOnJob>> {
        Box::pin(async { None })
    }

    fn done(&self, _: &str, _: Option<String>) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }
}
