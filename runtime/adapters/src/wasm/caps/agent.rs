//! `agent`: runs agents for adapters granted `agent`, within the adapter's limits (runs at
//! once, runs per minute). Every run is a task (the job's own inside `run-job`); it is
//! cancelled when the calling request or job is abandoned or its task is deleted. A run made
//! while serving an agent's tool call continues that run's delegation depth and LLM budget.

use serde::Deserialize;
use serde_json::{Value, json};
use service_contract::agent::{
    Parent, ProfileChoice, RunFailure, RunFailureKind, RunReply, RunRequest, Turn, TurnRole,
    Waiting,
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::component::Linker;

use super::super::bindings::{latest, v0_1};
use super::super::grants::{LimitKey, Request};
use super::super::state::HostState;
use super::{Capability, link_versions, on_host, over_quota};
use crate::agents::profiles::DEFAULT_PROFILE;
use crate::allowances;
use crate::approvals;
use crate::engine::pause::WentOn;
use crate::task_runs::NewRun;
use crate::traces;
use latest::service::adapter::agent::{
    DecideError, FailureKind, Host, Role, RunError, RunOutcome, RunReply as WitReply,
    RunRequest as WitRequest, Waiting as WitWaiting,
};
use latest::service::adapter::types::Error;

/// A trace note longer than this is cut.
const NOTE_CHARS: usize = 1_000;
/// A conversation key's bytes at most.
pub(crate) const MAX_CONVERSATION_KEY_BYTES: usize = 256;
/// The most earlier turns a run carries, and their characters together.
pub(crate) const MAX_HISTORY_TURNS: usize = 50;
pub(crate) const MAX_HISTORY_CHARS: usize = 32_000;

/// The agent run a call serves (a component's tool called by an agent): runs the call makes
/// continue its delegation depth and its LLM budget.
pub(crate) type RunContext = Parent;

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    #[serde(default)]
    agent: bool,
    #[serde(default)]
    limits: Limits,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    pub agent_runs_at_once: u32,
    pub agent_runs_per_minute: u32,
    /// A run's prompt, which its trace, its task and every model call keep.
    pub agent_prompt_bytes: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            agent_runs_at_once: 4,
            agent_runs_per_minute: 60,
            agent_prompt_bytes: 64 << 10,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Granted {
    pub allowed: bool,
    pub limits: Limits,
}

pub struct State {
    at_once: std::sync::Arc<Semaphore>,
}

pub struct Agent;

impl Capability for Agent {
    const INTERFACE: &'static str = "agent";
    const KEYS: &'static [&'static str] = &["agent"];
    const LIMIT_KEYS: &'static [LimitKey] = &[
        LimitKey {
            name: "agent_runs_at_once",
            max: 256,
        },
        LimitKey {
            name: "agent_runs_per_minute",
            max: 60_000,
        },
        LimitKey {
            name: "agent_prompt_bytes",
            max: 1 << 20,
        },
    ];
    type Grant = Grant;
    type Granted = Granted;
    type State = State;

    fn grant(
        request: &Request,
        grant: &Grant,
        _: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Granted, String> {
        Ok(Granted {
            allowed: grant.agent && request.wants(Self::INTERFACE, |l| l.agent),
            limits: grant.limits,
        })
    }

    fn granted_anything(granted: &Granted) -> bool {
        granted.allowed
    }

    fn summary(granted: &Granted) -> Vec<String> {
        if granted.allowed {
            vec!["agent".into()]
        } else {
            Vec::new()
        }
    }

    fn state(granted: &Granted) -> anyhow::Result<State> {
        Ok(State {
            at_once: std::sync::Arc::new(Semaphore::new(
                granted.limits.agent_runs_at_once as usize,
            )),
        })
    }

    fn suggest(_: &Request) -> Vec<String> {
        vec!["agent = true".into()]
    }

    fn link(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
        link_versions!(linker, agent)
    }
}

/// Why an agent run (or a tool that runs agents) may not start now.
pub(crate) enum Refusal {
    Denied(String),
    Limited(String),
}

impl HostState {
    /// A place among the adapter's runs: the `agent` grant, a free run slot on this replica
    /// and the adapter's allowance across replicas allow it. A refusal is recorded on the
    /// entry.
    pub(crate) async fn agent_slot(&mut self, what: &str) -> Result<OwnedSemaphorePermit, Refusal> {
        let caller = &self.caller;
        if !caller.granted.agent.allowed {
            let message = format!("{what} without the agent grant");
            caller.deny(&message);
            return Err(Refusal::Denied(message));
        }
        let limits = caller.granted.agent.limits;
        let state = &caller.states.agent;
        let Ok(permit) = std::sync::Arc::clone(&state.at_once).try_acquire_owned() else {
            let message = format!(
                "{what}: {} agent runs of this adapter are already running (limits.agent_runs_at_once)",
                limits.agent_runs_at_once
            );
            let _ = over_quota(self, message.clone());
            return Err(Refusal::Limited(message));
        };
        let (adapter, per_minute) = (caller.adapter.clone(), limits.agent_runs_per_minute);
        let services = std::sync::Arc::clone(&caller.services);
        let allowed = on_host(self, async move {
            services
                .db
                .call_inline(move |conn| allowances::take_run(conn, &adapter, per_minute))
                .await
        })
        .await;
        if !allowed.unwrap_or_else(|e| {
            tracing::warn!("cannot read an adapter's run allowance, refusing the run: {e}");
            false
        }) {
            let message = format!(
                "{what}: this adapter started {} agent runs in the last minute (limits.agent_runs_per_minute)",
                limits.agent_runs_per_minute
            );
            let _ = over_quota(self, message.clone());
            return Err(Refusal::Limited(message));
        }
        Ok(permit)
    }

    /// Runs an agent for the adapter, as the next turn of its conversation `conversation`
    /// when given; with `then`, a run that may pause for a person (see
    /// `run-in-conversation-or-wait`).
    async fn run_agent(
        &mut self,
        request: WitRequest,
        conversation: Option<String>,
        then: Option<Vec<u8>>,
    ) -> Result<RunOutcome, RunError> {
        if let Some(then) = &then {
            // The job that hears of the run later is a job like any other of the adapter's.
            self.jobs_limits("agent.run-in-conversation-or-wait", then.len())
                .map_err(|e| RunError {
                    kind: match e {
                        Error::Denied(_) => FailureKind::Denied,
                        _ => FailureKind::Invalid,
                    },
                    message: e.to_string(),
                    trace_id: None,
                })?;
        }
        if let Some(key) = conversation
            .as_ref()
            .filter(|key| key.is_empty() || key.len() > MAX_CONVERSATION_KEY_BYTES)
        {
            return Err(RunError {
                kind: FailureKind::Invalid,
                message: format!(
                    "agent.run-in-conversation: a key of {} bytes; a key is 1 to \
                     {MAX_CONVERSATION_KEY_BYTES} bytes",
                    key.len()
                ),
                trace_id: None,
            });
        }
        let earlier: usize = request.history.iter().map(|t| t.text.len()).sum();
        self.heavy(request.prompt.len() + earlier).await;
        let most = self.caller.granted.agent.limits.agent_prompt_bytes;
        if request.prompt.len() > most as usize && self.caller.granted.agent.allowed {
            let message = format!(
                "agent.run: a prompt of {} bytes is larger than {most} (limits.agent_prompt_bytes)",
                request.prompt.len()
            );
            let _ = over_quota(self, message.clone());
            return Err(RunError {
                kind: FailureKind::Invalid,
                message,
                trace_id: None,
            });
        }
        let permit = self.agent_slot("agent.run").await.map_err(|refusal| {
            let (kind, message) = match refusal {
                Refusal::Denied(m) => (FailureKind::Denied, m),
                Refusal::Limited(m) => (FailureKind::Limited, m),
            };
            RunError {
                kind,
                message,
                trace_id: None,
            }
        })?;
        let caller = self.caller.clone();
        let profile = request
            .profile
            .unwrap_or_else(|| DEFAULT_PROFILE.to_owned());
        let run = RunRequest {
            profile: if request.profile_required {
                ProfileChoice::Required(profile.clone())
            } else {
                ProfileChoice::Preferred(profile.clone())
            },
            prompt: request.prompt,
            history: history(request.history),
            model: None,
            source: caller.adapter.clone(),
            parent: self.run.as_ref().map(Parent::child),
            conversation,
            // The call's token fires when the call ends: the component posts this answer
            // before the conversation's next turn is run.
            turn_held_until_cancelled: true,
            task: None,
            in_task: None,
            then,
            // A run inside another carries its parent's.
            started_by: None,
        };
        let (cancel, job_task) = (
            self.cancel.child_token(),
            self.job.as_ref().map(|j| j.task_id.clone()),
        );
        let result = on_host(self, async move {
            let tasks = &caller.services.agent_tasks;
            let outcome = match job_task {
                // Inside a job, the job's task is the run's.
                Some(task_id) => tasks.in_task(&task_id, run, cancel).await,
                None => {
                    let new = NewRun {
                        title: run.prompt.clone(),
                        description: format!("{} agent run", caller.adapter),
                        profile,
                        may_pause: false,
                    };
                    tasks.as_task(new, run, cancel).await
                }
            };
            drop(permit);
            outcome
        })
        .await;
        match result {
            Ok(reply) => Ok(RunOutcome::Answered(wit_reply(reply))),
            Err(RunFailure {
                waiting: Some(waiting),
                trace_id: Some(trace_id),
                ..
            }) => Ok(RunOutcome::Waiting(wit_waiting(*waiting, trace_id))),
            Err(failure) => Err(RunError {
                kind: match failure.kind {
                    RunFailureKind::Invalid => FailureKind::Invalid,
                    RunFailureKind::UnknownAgent => FailureKind::UnknownAgent,
                    RunFailureKind::NotConfigured => FailureKind::NotConfigured,
                    // Only a run with `then` pauses, and says for what (above).
                    RunFailureKind::Failed | RunFailureKind::Paused => FailureKind::Failed,
                    RunFailureKind::Cancelled => FailureKind::Cancelled,
                },
                message: failure.message,
                trace_id: failure.trace_id,
            }),
        }
    }
}

/// The answer of a run that cannot pause (no `then`).
fn answered(outcome: Result<RunOutcome, RunError>) -> Result<WitReply, RunError> {
    match outcome? {
        RunOutcome::Answered(reply) => Ok(reply),
        RunOutcome::Waiting(waiting) => Err(RunError {
            kind: FailureKind::Failed,
            message: format!(
                "the run paused for approval {} though it could not",
                waiting.approval_id
            ),
            trace_id: Some(waiting.trace_id),
        }),
    }
}

fn wit_waiting(waiting: Waiting, trace_id: String) -> WitWaiting {
    WitWaiting {
        approval_id: waiting.approval_id,
        tool: waiting.tool,
        input_json: waiting.input,
        trace_id,
    }
}

/// Where a run got to once it went on, as the contract says it.
fn wit_went_on(went_on: WentOn) -> Result<RunOutcome, RunError> {
    match went_on {
        WentOn::Answered { text, trace_id } => {
            Ok(RunOutcome::Answered(WitReply { text, trace_id }))
        }
        WentOn::Waiting {
            approval_id,
            tool,
            input,
            trace_id,
        } => Ok(RunOutcome::Waiting(WitWaiting {
            approval_id,
            tool,
            input_json: input,
            trace_id,
        })),
        WentOn::Failed {
            cancelled,
            message,
            trace_id,
        } => Err(RunError {
            kind: if cancelled {
                FailureKind::Cancelled
            } else {
                FailureKind::Failed
            },
            message,
            trace_id,
        }),
    }
}

/// The last turns that fit the bounds, oldest first.
fn history(turns: Vec<latest::service::adapter::agent::Turn>) -> Vec<Turn> {
    let turns = turns
        .into_iter()
        .map(|turn| Turn {
            role: match turn.role {
                Role::User => TurnRole::User,
                Role::Assistant => TurnRole::Assistant,
            },
            text: turn.text,
        })
        .collect();
    service_contract::agent::latest(turns, MAX_HISTORY_TURNS, MAX_HISTORY_CHARS)
}

fn wit_reply(reply: RunReply) -> WitReply {
    WitReply {
        text: reply.text,
        trace_id: reply.trace_id,
    }
}

/// The agent imports as they run; the `Host` impl notes each on the call's recording.
impl HostState {
    async fn run_now(
        &mut self,
        request: WitRequest,
    ) -> wasmtime::Result<Result<WitReply, RunError>> {
        Ok(answered(self.run_agent(request, None, None).await))
    }

    async fn run_in_conversation_now(
        &mut self,
        key: String,
        request: WitRequest,
    ) -> wasmtime::Result<Result<WitReply, RunError>> {
        Ok(answered(self.run_agent(request, Some(key), None).await))
    }

    async fn run_in_conversation_or_wait_now(
        &mut self,
        key: String,
        request: WitRequest,
        then: Vec<u8>,
    ) -> wasmtime::Result<Result<RunOutcome, RunError>> {
        Ok(self.run_agent(request, Some(key), Some(then)).await)
    }

    async fn went_on_now(&mut self) -> wasmtime::Result<Option<Result<RunOutcome, RunError>>> {
        let (Some(job), true) = (&self.job, self.caller.granted.agent.allowed) else {
            return Ok(None);
        };
        let (task, caller) = (job.task_id.clone(), self.caller.clone());
        let found = on_host(self, async move {
            let adapter = caller.adapter.clone();
            caller
                .services
                .db
                .call(move |conn| approvals::went_on(conn, &task, &adapter))
                .await
        })
        .await;
        Ok(match found {
            Ok(found) => found
                .and_then(|value| serde_json::from_value::<WentOn>(value).ok())
                .map(wit_went_on),
            Err(e) => Some(Err(RunError {
                kind: FailureKind::Failed,
                message: format!("cannot read where the run got to: {e}"),
                trace_id: None,
            })),
        })
    }

    async fn decide_now(
        &mut self,
        approval_id: String,
        approve: bool,
        note: Option<String>,
    ) -> wasmtime::Result<Result<bool, DecideError>> {
        let caller = self.caller.clone();
        if !caller.granted.agent.allowed {
            caller.deny("agent.decide without the agent grant");
            return Ok(Err(DecideError::Denied));
        }
        let note: Option<String> = note.map(|n| n.chars().take(NOTE_CHARS).collect());
        let decided = on_host(self, async move {
            let approvals = &caller.services.approvals;
            approvals
                .decide_for(&caller.adapter, &approval_id, approve, note)
                .await
        })
        .await;
        Ok(decided.map_err(|e| match e {
            service_contract::DecideError::Unknown => DecideError::Unknown,
            service_contract::DecideError::Failed => DecideError::Failed,
        }))
    }

    async fn annotate_now(
        &mut self,
        trace_id: String,
        message: String,
    ) -> wasmtime::Result<Result<(), String>> {
        let caller = self.caller.clone();
        if !caller.granted.agent.allowed {
            caller.deny("agent.annotate without the agent grant");
            return Ok(Err("this adapter was not granted `agent`".into()));
        }
        let adapter = caller.adapter.clone();
        let note: String = message.chars().take(NOTE_CHARS).collect();
        let added = on_host(self, async move {
            caller
                .services
                .db
                .call(move |conn| traces::add_warning(conn, &trace_id, &adapter, &note))
                .await
        })
        .await;
        Ok(added.map_err(|e| match e {
            // A trace full of warnings: the bound of what an adapter may add.
            crate::error::Error::Conflict(full) => {
                let message = format!("agent.annotate: {full}");
                self.caller.over_quota(&message);
                message
            }
            other => other.to_string(),
        }))
    }
}

impl Host for HostState {
    async fn run(&mut self, request: WitRequest) -> wasmtime::Result<Result<WitReply, RunError>> {
        let args = self.args(|| json!({"request": request}));
        if let Some(answer) = self.replayed("agent.run", &args)? {
            return Ok(answer);
        }
        let answer = self.run_now(request).await?;
        self.taped("agent.run", args, &answer);
        Ok(answer)
    }

    async fn run_in_conversation(
        &mut self,
        key: String,
        request: WitRequest,
    ) -> wasmtime::Result<Result<WitReply, RunError>> {
        let args = self.args(|| json!({"key": key, "request": request}));
        if let Some(answer) = self.replayed("agent.run-in-conversation", &args)? {
            return Ok(answer);
        }
        let answer = self.run_in_conversation_now(key, request).await?;
        self.taped("agent.run-in-conversation", args, &answer);
        Ok(answer)
    }

    async fn run_in_conversation_or_wait(
        &mut self,
        key: String,
        request: WitRequest,
        then: Vec<u8>,
    ) -> wasmtime::Result<Result<RunOutcome, RunError>> {
        let args = self.args(|| json!({"key": key, "request": request, "then": then}));
        if let Some(answer) = self.replayed("agent.run-in-conversation-or-wait", &args)? {
            return Ok(answer);
        }
        let outcome = self
            .run_in_conversation_or_wait_now(key, request, then)
            .await?;
        self.taped("agent.run-in-conversation-or-wait", args, &outcome);
        Ok(outcome)
    }

    async fn went_on(&mut self) -> wasmtime::Result<Option<Result<RunOutcome, RunError>>> {
        let args = self.args(|| Value::Null);
        if let Some(answer) = self.replayed("agent.went-on", &args)? {
            return Ok(answer);
        }
        let outcome = self.went_on_now().await?;
        self.taped("agent.went-on", args, &outcome);
        Ok(outcome)
    }

    async fn decide(
        &mut self,
        approval_id: String,
        approve: bool,
        note: Option<String>,
    ) -> wasmtime::Result<Result<bool, DecideError>> {
        let args =
            self.args(|| json!({"approval_id": approval_id, "approve": approve, "note": note}));
        if let Some(answer) = self.replayed("agent.decide", &args)? {
            return Ok(answer);
        }
        let decided = self.decide_now(approval_id, approve, note).await?;
        self.taped("agent.decide", args, &decided);
        Ok(decided)
    }

    async fn annotate(
        &mut self,
        trace_id: String,
        message: String,
    ) -> wasmtime::Result<Result<(), String>> {
        let args = self.args(|| json!({"trace_id": trace_id, "message": message}));
        if let Some(answer) = self.replayed("agent.annotate", &args)? {
            return Ok(answer);
        }
        let added = self.annotate_now(trace_id, message).await?;
        self.taped("agent.annotate", args, &added);
        Ok(added)
    }
}

impl v0_1::service::adapter::agent::Host for HostState {
    async fn run(
        &mut self,
        request: v0_1::service::adapter::agent::RunRequest,
    ) -> wasmtime::Result<
        Result<v0_1::service::adapter::agent::RunReply, v0_1::service::adapter::agent::RunError>,
    > {
        use v0_1::service::adapter::agent as old;
        let request = WitRequest {
            prompt: request.prompt,
            profile: request.profile,
            profile_required: request.profile_required,
            history: Vec::new(),
        };
        Ok(answered(self.run_agent(request, None, None).await)
            .map(|reply| old::RunReply {
                text: reply.text,
                trace_id: reply.trace_id,
            })
            .map_err(|e| old::RunError {
                kind: match e.kind {
                    FailureKind::Invalid => old::FailureKind::Invalid,
                    FailureKind::UnknownAgent => old::FailureKind::UnknownAgent,
                    FailureKind::NotConfigured => old::FailureKind::NotConfigured,
                    // 0.1 has no `limited`: the message says why.
                    FailureKind::Failed | FailureKind::Limited => old::FailureKind::Failed,
                    FailureKind::Cancelled => old::FailureKind::Cancelled,
                    FailureKind::Denied => old::FailureKind::Denied,
                },
                message: e.message,
                trace_id: e.trace_id,
            }))
    }

    async fn annotate(
        &mut self,
        trace_id: String,
        message: String,
    ) -> wasmtime::Result<Result<(), String>> {
        Host::annotate(self, trace_id, message).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latest::service::adapter::agent::Turn as WitTurn;

    #[test]
    fn history_keeps_the_latest_turns_within_bounds() {
        let turn = |i: usize| WitTurn {
            role: if i.is_multiple_of(2) {
                Role::User
            } else {
                Role::Assistant
            },
            text: format!("turn {i}"),
        };
        let kept = history((0..80).map(turn).collect());
        assert_eq!(kept.len(), MAX_HISTORY_TURNS);
        assert_eq!(kept.first().unwrap().text, "turn 30");
        assert_eq!(kept.last().unwrap().text, "turn 79");
        let long = WitTurn {
            role: Role::User,
            text: "x".repeat(MAX_HISTORY_CHARS),
        };
        let kept = history(vec![long, turn(1)]);
        assert_eq!(
            kept.len(),
            1,
            "the oldest turn does not fit beside the newest"
        );
    }
}
