//! Running one due schedule: an agent run as a task of the schedule's, and the trace id
//! written back.

use chrono::Utc;
use futures_util::future::BoxFuture;
use service_contract::agent::{ProfileChoice, RunFailure, RunReply, RunRequest};
use tokio_util::sync::CancellationToken;

use super::store;
use super::tick::Due;
use crate::error::Result;
use crate::task_runs::{self, AgentTasks, NewRun};
use crate::tasks::TaskStatus;
use crate::telemetry::TARGET;
use tracing::Instrument;

/// How a dispatched run ended: its task's status, and the answer or why there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    pub status: TaskStatus,
    pub outcome: std::result::Result<RunReply, RunFailure>,
}

impl Ran {
    pub fn trace_id(&self) -> Option<&str> {
        match &self.outcome {
            Ok(reply) => Some(&reply.trace_id),
            Err(failure) => failure.trace_id.as_deref(),
        }
    }
}

pub struct Dispatcher {
    pub tasks: AgentTasks,
}

impl Dispatcher {
    /// Stamps a run started by hand, outside the cron (`schedule run`, Run now), as the
    /// schedule's last run, as a fired slot is stamped before it runs; its next run is
    /// unchanged. Call it just before [`Dispatcher::run`].
    pub async fn stamp_run_now(&self, name: &str) -> Result<()> {
        let name = name.to_owned();
        self.tasks
            .db
            .call(move |conn| store::set_last_run(conn, &name, Utc::now()))
            .await
    }

    /// Runs the schedule's prompt with its profile as a task and writes the trace id back.
    /// Deleting the task while it runs cancels the run.
    pub fn run(&self, due: Due) -> BoxFuture<'_, Result<Ran>> {
        Box::pin(async move {
            let new = NewRun {
                title: format!("Scheduled run: {}", due.name),
                description: due.prompt.clone(),
                profile: due.agent.clone(),
                may_pause: true,
            };
            let span = tracing::info_span!(
                target: TARGET,
                "schedule",
                otel.name = %format!("schedule {}", due.name),
                otel.kind = "internal",
                service_runtime.schedule = %due.name,
            );
            let request =
                RunRequest::new(due.prompt, ProfileChoice::Required(due.agent), super::NAME);
            let (task_id, result) = self
                .tasks
                .as_task_of(new, Some(&due.name), request, CancellationToken::new())
                .instrument(span)
                .await;
            if task_id.is_none() {
                let failure = result.err().map(|f| f.message).unwrap_or_default();
                return Err(crate::error::Error::Internal(anyhow::anyhow!(failure)));
            }
            let ran = Ran {
                status: task_runs::status_of(&result),
                outcome: result,
            };
            if let Some(trace) = ran.trace_id().map(str::to_owned) {
                let name = due.name;
                self.tasks
                    .db
                    .call(move |conn| store::set_last_trace(conn, &name, &trace))
                    .await?;
            }
            Ok(ran)
        })
    }
}
