//! Work done as a task: the task is `running` while it works, deleting it cancels the work,
//! and its outcome becomes the task's status. Agent runs of adapters, schedules and jobs all
//! go through here.

use std::pin::pin;
use std::sync::Arc;

use service_contract::agent::{AgentRunner, RunFailure, RunFailureKind, RunReply, RunRequest};
use tokio_util::sync::CancellationToken;

use crate::db::Db;
use crate::tasks::{self, NewTask, RunningTasks, TITLE_CHARS, TaskStatus};

/// Runs `work` for `task_id`: the token it gets is cancelled when the task is deleted or
/// `parent` is cancelled.
pub async fn cancellable<T>(
    running: &RunningTasks,
    task_id: &str,
    parent: &CancellationToken,
    work: impl AsyncFnOnce(CancellationToken) -> T,
) -> T {
    watched(running.register(task_id), running, task_id, parent, work).await
}

/// [`cancellable`] for a job just claimed from the database: a delete of its task since the
/// claim has its token cancelled from the start (see [`RunningTasks::register_claimed`]).
pub async fn claimed<T>(
    running: &RunningTasks,
    task_id: &str,
    parent: &CancellationToken,
    work: impl AsyncFnOnce(CancellationToken) -> T,
) -> T {
    let deleted = running.register_claimed(task_id);
    watched(deleted, running, task_id, parent, work).await
}

async fn watched<T>(
    deleted: CancellationToken,
    running: &RunningTasks,
    task_id: &str,
    parent: &CancellationToken,
    work: impl AsyncFnOnce(CancellationToken) -> T,
) -> T {
    let cancel = parent.child_token();
    let mut work = pin!(work(cancel.clone()));
    // Deleted: the work is told, and what it makes of that is its outcome.
    let outcome = tokio::select! {
        outcome = &mut work => outcome,
        () = deleted.cancelled() => {
            cancel.cancel();
            work.await
        }
    };
    running.finish(task_id);
    outcome
}

/// The status a task gets from the run it did.
pub fn status_of(result: &Result<RunReply, RunFailure>) -> TaskStatus {
    match result {
        Ok(_) => TaskStatus::Completed,
        Err(f) if f.kind == RunFailureKind::Cancelled => TaskStatus::Cancelled,
        // Waiting for a person: the run finishes the task once decided.
        Err(f) if f.kind == RunFailureKind::Paused => TaskStatus::Pending,
        Err(_) => TaskStatus::Error,
    }
}

/// A new task for an agent run.
pub struct NewRun {
    /// Cut to its first 80 characters.
    pub title: String,
    pub description: String,
    pub profile: String,
    /// The run may pause for a person's approval, leaving the task pending until it goes on
    /// (a scheduled run; a component or an MCP client waits for its answer instead).
    pub may_pause: bool,
}

/// Runs agents as tasks.
#[derive(Clone)]
pub struct AgentTasks {
    pub db: Db,
    pub agents: Arc<dyn AgentRunner>,
    pub running: Arc<RunningTasks>,
    /// The replica the runs are done on.
    pub replica: String,
}

impl AgentTasks {
    /// An agent run that is a task of its own (`schedule`: the schedule it is a run of).
    pub async fn as_task(
        &self,
        new: NewRun,
        request: RunRequest,
        cancel: CancellationToken,
    ) -> Result<RunReply, RunFailure> {
        self.as_task_of(new, None, request, cancel).await.1
    }

    /// [`AgentTasks::as_task`], also naming the schedule the run belongs to; returns the
    /// task id with the outcome.
    pub async fn as_task_of(
        &self,
        new: NewRun,
        schedule: Option<&str>,
        request: RunRequest,
        cancel: CancellationToken,
    ) -> (Option<String>, Result<RunReply, RunFailure>) {
        let schedule = schedule.map(str::to_owned);
        let new_may_pause = new.may_pause;
        let replica = self.replica.clone();
        let started_by = request.started_by().map(str::to_owned);
        let created = self
            .db
            .call(move |conn| {
                let title: String = new.title.trim().chars().take(TITLE_CHARS).collect();
                tasks::create_running(
                    conn,
                    &NewTask {
                        title: &title,
                        description: Some(&new.description),
                        agent_profile_name: Some(&new.profile),
                        trace_id: None,
                        schedule_name: schedule.as_deref(),
                        runner: Some(&replica),
                        started_by: started_by.as_deref(),
                    },
                )
            })
            .await;
        let task_id = match created {
            Ok(task_id) => task_id,
            Err(e) => {
                let failure = RunFailure {
                    kind: RunFailureKind::Failed,
                    message: format!("cannot record the run's task: {e}"),
                    trace_id: None,
                    waiting: None,
                };
                return (None, Err(failure));
            }
        };
        let request = RunRequest {
            task: new_may_pause.then(|| task_id.clone()),
            ..request
        };
        let result = cancellable(&self.running, &task_id, &cancel, async |cancel| {
            self.agents.run(request, cancel).await
        })
        .await;
        self.record(&task_id, status_of(&result), &result).await;
        (Some(task_id), result)
    }

    /// An agent run inside a task that already exists (a job's): the run names the task and
    /// links its trace (see [`RunRequest::in_task`]); its status is the job's business.
    pub async fn in_task(
        &self,
        task_id: &str,
        request: RunRequest,
        cancel: CancellationToken,
    ) -> Result<RunReply, RunFailure> {
        let request = RunRequest {
            in_task: Some(task_id.to_owned()),
            ..request
        };
        self.agents.run(request, cancel).await
    }

    /// Moves a run's task to `status` and links it to the run's trace.
    async fn record(
        &self,
        task_id: &str,
        status: TaskStatus,
        result: &Result<RunReply, RunFailure>,
    ) {
        let trace_id = match result {
            Ok(reply) => Some(reply.trace_id.clone()),
            Err(failure) => failure.trace_id.clone(),
        };
        let task_id = task_id.to_owned();
        let recorded = self
            .db
            .call(move |conn| tasks::record_run(conn, &task_id, status, trace_id.as_deref()))
            .await;
        if let Err(e) = recorded {
            tracing::warn!("cannot record a run on its task: {e}");
        }
    }
}
