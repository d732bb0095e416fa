//! `agent`: runs agents for adapters granted `agent`. Every run is a task (the job's own
//! inside `run-job`); it is cancelled when the calling request or job is abandoned or its
//! task is deleted, and its trace records that.

use service_contract::agent::{ProfileChoice, RunFailure, RunFailureKind, RunReply, RunRequest};

use super::super::bindings::service::adapter::agent::{
    FailureKind, Host, RunError, RunReply as WitReply, RunRequest as WitRequest,
};
use super::super::state::{Caller, HostState};
use crate::agents::profiles::DEFAULT_PROFILE;
use crate::tasks::{self, NewTask, TaskStatus};
use crate::traces;

/// Task titles are the prompt's start.
const TITLE_CHARS: usize = 80;
/// A trace note longer than this is cut.
const NOTE_CHARS: usize = 1_000;

impl Host for HostState {
    async fn run(&mut self, request: WitRequest) -> wasmtime::Result<Result<WitReply, RunError>> {
        let caller = self.caller.clone();
        if !caller.effective.agent {
            caller.deny("agent.run without the agent grant");
            return Ok(Err(RunError {
                kind: FailureKind::Denied,
                message: "this adapter was not granted `agent`".into(),
                trace_id: None,
            }));
        }
        let name = request
            .profile
            .unwrap_or_else(|| DEFAULT_PROFILE.to_owned());
        let run = RunRequest {
            profile: if request.profile_required {
                ProfileChoice::Required(name.clone())
            } else {
                ProfileChoice::Preferred(name.clone())
            },
            prompt: request.prompt,
            model: None,
            source: caller.adapter.clone(),
            parent: None,
        };
        let result = match self.job_task.clone() {
            Some(task_id) => {
                let result = caller
                    .services
                    .agents
                    .run(run, self.cancel.child_token())
                    .await;
                attach(&caller, task_id, None, &result).await;
                result
            }
            None => self.run_as_task(run, &name).await,
        };
        Ok(result
            .map(|reply| WitReply {
                text: reply.text,
                trace_id: reply.trace_id,
            })
            .map_err(|failure| RunError {
                kind: match failure.kind {
                    RunFailureKind::Invalid => FailureKind::Invalid,
                    RunFailureKind::UnknownAgent => FailureKind::UnknownAgent,
                    RunFailureKind::NotConfigured => FailureKind::NotConfigured,
                    RunFailureKind::Failed => FailureKind::Failed,
                    RunFailureKind::Cancelled => FailureKind::Cancelled,
                },
                message: failure.message,
                trace_id: failure.trace_id,
            }))
    }

    async fn annotate(
        &mut self,
        trace_id: String,
        message: String,
    ) -> wasmtime::Result<Result<(), String>> {
        let caller = self.caller.clone();
        if !caller.effective.agent {
            caller.deny("agent.annotate without the agent grant");
            return Ok(Err("this adapter was not granted `agent`".into()));
        }
        let adapter = caller.adapter.clone();
        let note: String = message.chars().take(NOTE_CHARS).collect();
        let added = caller
            .services
            .db
            .call(move |conn| traces::add_warning(conn, &trace_id, &adapter, &note))
            .await;
        Ok(added.map_err(|e| e.to_string()))
    }
}

impl HostState {
    /// A run outside a job: a task of its own, running until the run ends; deleting the task
    /// cancels the run.
    async fn run_as_task(
        &mut self,
        run: RunRequest,
        profile: &str,
    ) -> Result<RunReply, RunFailure> {
        let services = &self.caller.services;
        let title: String = run.prompt.trim().chars().take(TITLE_CHARS).collect();
        let description = format!("{} agent run", self.caller.adapter);
        let profile = profile.to_owned();
        let created = services
            .db
            .call(move |conn| {
                tasks::create_running(
                    conn,
                    &NewTask {
                        title: &title,
                        description: Some(&description),
                        agent_profile_name: Some(&profile),
                        trace_id: None,
                    },
                )
            })
            .await;
        let task_id = match created {
            Ok(task_id) => task_id,
            Err(e) => {
                return Err(RunFailure {
                    kind: RunFailureKind::Failed,
                    message: format!("cannot record the run's task: {e}"),
                    trace_id: None,
                });
            }
        };
        let deleted = services.running.register(&task_id);
        let cancel = self.cancel.child_token();
        let mut running = services.agents.run(run, cancel.clone());
        let result = tokio::select! {
            result = &mut running => result,
            () = deleted.cancelled() => {
                cancel.cancel();
                running.await
            }
        };
        services.running.finish(&task_id);
        let status = match &result {
            Ok(_) => TaskStatus::Completed,
            Err(f) if f.kind == RunFailureKind::Cancelled => TaskStatus::Cancelled,
            Err(_) => TaskStatus::Error,
        };
        attach(&self.caller, task_id, Some(status), &result).await;
        result
    }
}

/// Links a run's trace to its task (and moves the task to `status` when given).
async fn attach(
    caller: &Caller,
    task_id: String,
    status: Option<TaskStatus>,
    result: &Result<RunReply, RunFailure>,
) {
    let trace_id = match result {
        Ok(reply) => Some(reply.trace_id.clone()),
        Err(failure) => failure.trace_id.clone(),
    };
    let recorded = caller
        .services
        .db
        .call(move |conn| {
            if let Some(status) = status {
                tasks::set_status(conn, &task_id, status)?;
            }
            match trace_id {
                Some(trace_id) => tasks::attach_trace(conn, &task_id, &trace_id),
                None => Ok(()),
            }
        })
        .await;
    if let Err(e) = recorded {
        tracing::warn!(adapter = %caller.adapter, "cannot record a run on its task: {e}");
    }
}
