//! Tool calls that wait for a person. A run that reaches one writes its checkpoint (the
//! messages so far, the rest of its turn, its counters) into an approval and ends; once the
//! approval is decided, whichever replica claims it goes on from the checkpoint in the same
//! trace, and the answer lands in the run's conversation. Nothing waits in memory, so a
//! restart (or kill -9) loses nothing.

use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use service_contract::agent::{Budget, RunFailure, RunFailureKind, RunReply, Waiting};
use tokio_util::sync::CancellationToken;

use super::provider::{ChatRequest, Message, ToolCall, Usage};
use super::{Engine, Run, RunError, RunOutput, Stop, ToolCallRecord};
use crate::agents::profiles;
use crate::approvals::{self, Claimed, NewApproval};
use crate::conversations;
use crate::db;
use crate::job_queue;
use crate::tasks::{self, TaskStatus};

/// The tools named by `[tools.<name>] approval = true` (a name ending in `*` covers the
/// names it starts).
#[derive(Debug, Clone, Default)]
pub struct ApprovalRules(Vec<String>);

impl ApprovalRules {
    pub fn new(names: impl IntoIterator<Item = String>) -> Self {
        Self(names.into_iter().collect())
    }

    pub fn needs(&self, tool: &str) -> bool {
        self.0.iter().any(|rule| match rule.strip_suffix('*') {
            Some(prefix) => tool.starts_with(prefix),
            None => rule == tool,
        })
    }
}

/// Where a paused run's answer goes once it goes on: its conversation, its task, or both,
/// and the adapter that started it when it asked to hear.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Landing {
    pub conversation: Option<String>,
    pub task: Option<String>,
    #[serde(default)]
    pub then: Option<Then>,
}

/// A job to queue for `adapter` once the run went on (`agent.run-in-conversation-or-wait`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Then {
    pub adapter: String,
    pub payload: Vec<u8>,
}

impl Landing {
    /// No landing when `cannot` holds (a delegated run answers its parent).
    pub(crate) fn unless(self, cannot: bool) -> Self {
        if cannot { Self::default() } else { self }
    }

    pub(crate) fn can_pause(&self) -> bool {
        self.conversation.is_some() || self.task.is_some()
    }
}

/// A run that went on after its approval: how it ended, and whether a job was queued for the
/// adapter that started it (the job workers are to be woken).
pub struct Resumed {
    pub result: Result<RunOutput, RunError>,
    pub queued_job: bool,
}

/// Where a run got to once it went on, kept on its approval for the adapter's job to read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum WentOn {
    Answered {
        text: String,
        trace_id: String,
    },
    Waiting {
        approval_id: String,
        tool: String,
        /// The call's arguments as JSON text.
        input: String,
        trace_id: String,
    },
    Failed {
        cancelled: bool,
        message: String,
        trace_id: Option<String>,
    },
}

impl WentOn {
    /// Where the run got to, as the contract's native side says it.
    pub fn into_outcome(self) -> Result<RunReply, RunFailure> {
        match self {
            Self::Answered { text, trace_id } => Ok(RunReply { trace_id, text }),
            Self::Waiting {
                approval_id,
                tool,
                input,
                trace_id,
            } => Err(RunFailure {
                kind: RunFailureKind::Paused,
                message: format!("waiting for a person to approve {tool} (approval {approval_id})"),
                trace_id: Some(trace_id),
                waiting: Some(Box::new(Waiting {
                    approval_id,
                    tool,
                    input,
                })),
            }),
            Self::Failed {
                cancelled,
                message,
                trace_id,
            } => Err(RunFailure {
                kind: if cancelled {
                    RunFailureKind::Cancelled
                } else {
                    RunFailureKind::Failed
                },
                message,
                trace_id,
                waiting: None,
            }),
        }
    }

    /// A job no approval queued (it cannot say where a run got to).
    pub fn unknown(job: &str) -> RunFailure {
        RunFailure {
            kind: RunFailureKind::Failed,
            message: format!("no run that went on queued job {job}"),
            trace_id: None,
            waiting: None,
        }
    }

    fn of(result: &Result<RunOutput, RunError>) -> Self {
        match result {
            Ok(output) => Self::Answered {
                text: output.text.clone(),
                trace_id: output.trace_id.clone(),
            },
            Err(RunError::Paused { paused, trace_id }) => Self::Waiting {
                approval_id: paused.approval_id.clone(),
                tool: paused.tool.clone(),
                input: paused.input.to_string(),
                trace_id: trace_id.clone(),
            },
            Err(e) => Self::Failed {
                cancelled: matches!(e, RunError::Cancelled { .. }),
                message: e.to_string(),
                trace_id: e.trace_id().map(str::to_owned),
            },
        }
    }
}

/// Where a run paused.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Paused {
    pub approval_id: String,
    pub tool: String,
    pub input: Value,
}

/// A turn whose calls are not all settled: the model's text and calls, the results so far.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct PausedTurn {
    pub text: String,
    pub calls: Vec<ToolCall>,
    pub results: Vec<ToolCallRecord>,
    /// The decision about the first unsettled call, when going on.
    #[serde(skip)]
    pub decision: Option<Decided>,
}

/// What was decided about a waiting call.
#[derive(Debug, Clone)]
pub(super) enum Decided {
    Approved {
        approval_id: String,
        /// An earlier attempt started the tool and did not finish.
        started_before: bool,
    },
    Denied {
        note: Option<String>,
    },
    Expired,
}

/// Everything a paused run needs to go on, on any replica.
#[derive(Debug, Serialize, Deserialize)]
struct Checkpoint {
    agent: String,
    source: String,
    /// Absent from checkpoints written before v0.14.
    #[serde(default)]
    started_by: Option<String>,
    landing: Landing,
    model: String,
    system: Option<String>,
    messages: Vec<Message>,
    turn: PausedTurn,
    step: i64,
    iterations: u32,
    tool_calls: Vec<ToolCallRecord>,
    usage: Usage,
    elapsed_ms: i64,
}

impl Run<'_> {
    /// Writes the checkpoint into a new approval for `call`; the run ends here for now.
    pub(super) async fn pause(&self, chat: &ChatRequest, turn: PausedTurn, call: ToolCall) -> Stop {
        let landing = self.landing.clone();
        let checkpoint = Checkpoint {
            agent: self.agent.clone(),
            source: self.source.clone(),
            started_by: self.started_by.clone(),
            landing: landing.clone(),
            model: chat.model.clone(),
            system: chat.system.clone(),
            messages: chat.messages.clone(),
            turn,
            step: self.step,
            iterations: self.iterations,
            tool_calls: self.tool_calls.clone(),
            usage: self.usage,
            elapsed_ms: self.earlier_ms + self.clock.elapsed().as_millis() as i64,
        };
        let checkpoint = match serde_json::to_value(&checkpoint) {
            Ok(checkpoint) => checkpoint,
            Err(e) => return Stop::Error(format!("cannot keep the paused run: {e}")),
        };
        let (agent, trace_id, source, tool, input) = (
            self.agent.clone(),
            self.trace_id.clone(),
            self.source.clone(),
            call.name.clone(),
            call.input.clone(),
        );
        let requested = self
            .engine
            .db
            .call(move |conn| {
                approvals::request(
                    conn,
                    &NewApproval {
                        tool: &tool,
                        input: &input,
                        agent: &agent,
                        conversation_id: landing.conversation.as_deref(),
                        task_id: landing.task.as_deref(),
                        trace_id: &trace_id,
                        source: &source,
                        checkpoint: &checkpoint,
                    },
                )
            })
            .await;
        match requested {
            Ok(approval_id) => Stop::Paused(Paused {
                approval_id,
                tool: call.name,
                input: call.input,
            }),
            Err(e) => Stop::Error(format!("cannot record the approval: {e}")),
        }
    }

    /// Runs an approved call once, or tells the model why it did not run.
    pub(super) async fn settle(
        &self,
        step: i64,
        call: ToolCall,
        decided: Decided,
    ) -> Result<ToolCallRecord, Stop> {
        let refusal = match decided {
            Decided::Approved {
                approval_id,
                started_before: false,
            } => {
                self.engine
                    .db
                    .call(move |conn| approvals::tool_started(conn, &approval_id))
                    .await
                    .map_err(|e| Stop::Error(format!("cannot record the approval: {e}")))?;
                return self.invoke_tool(step, call).await;
            }
            Decided::Approved { .. } => "the service stopped while this approved call ran; it \
                                         may or may not have taken effect, so it was not run \
                                         again"
                .to_owned(),
            Decided::Denied { note: None } => {
                "a person declined this tool call; it was not run".to_owned()
            }
            Decided::Denied { note: Some(note) } => {
                format!("a person declined this tool call; it was not run. Their note: {note}")
            }
            Decided::Expired => "no one approved this tool call in time ([approvals] \
                                 timeout_secs); it was not run"
                .to_owned(),
        };
        self.record_tool(step, call, Err(refusal), &db::now(), Instant::now())
            .await
    }
}

impl Engine {
    /// Goes on with a claimed, decided approval's run to its end (its answer lands in its
    /// conversation, its outcome on its task, a job for the adapter that asked to hear) or its
    /// next pause. The approval is done with unless `cancel` stopped it, in which case the
    /// claim is left to lapse and the run goes on later.
    pub async fn resume(
        self: &Arc<Self>,
        claimed: Claimed,
        cancel: &CancellationToken,
    ) -> crate::error::Result<Resumed> {
        let Claimed {
            approval,
            checkpoint,
            tool_started,
        } = claimed;
        let checkpoint: Checkpoint = serde_json::from_value(checkpoint)
            .map_err(|e| crate::error::Error::Internal(e.into()))?;
        let decided = match approval.status.as_str() {
            "approved" => Decided::Approved {
                approval_id: approval.id.clone(),
                started_before: tool_started,
            },
            "denied" => Decided::Denied {
                note: approval.note.clone(),
            },
            _ => Decided::Expired,
        };
        if let Some(task) = approval.task_id.clone() {
            self.db
                .call(move |conn| tasks::set_status(conn, &task, TaskStatus::Running))
                .await?;
        }
        let then = checkpoint.landing.then.clone();
        let result = self
            .go_on(checkpoint, &approval.trace_id, decided, cancel)
            .await;
        if matches!(result, Err(RunError::Cancelled { .. })) && cancel.is_cancelled() {
            return Ok(Resumed {
                result,
                queued_job: false,
            });
        }
        let (id, conversation, task) = (
            approval.id.clone(),
            approval.conversation_id.clone(),
            approval.task_id.clone(),
        );
        let answer = match &result {
            Ok(output) => Some((output.text.clone(), serde_json::json!(output.tool_calls))),
            Err(_) => None,
        };
        let status = match &result {
            Ok(_) => TaskStatus::Completed,
            Err(RunError::Paused { .. }) => TaskStatus::Pending,
            Err(RunError::Cancelled { .. }) => TaskStatus::Cancelled,
            Err(_) => TaskStatus::Error,
        };
        let went_on = serde_json::to_value(WentOn::of(&result))
            .map_err(|e| crate::error::Error::Internal(e.into()))?;
        let trace_id = approval.trace_id.clone();
        let queued_job = then.is_some();
        self.db
            .call(move |conn| {
                conn.transaction(|tx| {
                    if let (Some(conversation), Some((text, calls))) = (conversation, answer) {
                        conversations::answer(tx, &conversation, &text, &calls, &trace_id)?;
                    }
                    if let Some(task) = task {
                        tasks::record_run(tx, &task, status, Some(&trace_id))?;
                    }
                    // Queued with the decision's outcome, so the adapter hears exactly once.
                    // Never refused for the adapter's queue bound: a person's decision is
                    // not a guest's flood, and each was one of its runs.
                    let then_task = match &then {
                        Some(then) => Some(
                            job_queue::enqueue(tx, &then.adapter, &then.payload, None, u32::MAX)
                                .map_err(|refused| match refused {
                                    job_queue::Refused::Db(e) => e,
                                    other => {
                                        crate::error::Error::Internal(anyhow::anyhow!("{other}"))
                                    }
                                })?,
                        ),
                        None => None,
                    };
                    approvals::resumed(tx, &id, &went_on, then_task.as_deref())
                })
            })
            .await?;
        Ok(Resumed { result, queued_job })
    }

    async fn go_on(
        self: &Arc<Self>,
        checkpoint: Checkpoint,
        trace_id: &str,
        decided: Decided,
        cancel: &CancellationToken,
    ) -> Result<RunOutput, RunError> {
        let provider = match self.provider_of(&self.provider_choice()) {
            Ok(provider) => provider,
            Err(error) => {
                return Err(RunError::NotConfigured {
                    error,
                    trace_id: trace_id.to_owned(),
                });
            }
        };
        let agent = checkpoint.agent.clone();
        let profile = self
            .db
            .call(move |conn| profiles::get(conn, &agent))
            .await?;
        let (specs, _) = self.allowed_tools(profile.as_ref());
        let run = Run {
            engine: self,
            trace_id: trace_id.to_owned(),
            agent: checkpoint.agent,
            source: checkpoint.source,
            started_by: checkpoint.started_by,
            landing: checkpoint.landing,
            depth: 0,
            budget: Budget::new(self.llm_call_budget.saturating_sub(checkpoint.iterations)),
            offered: specs.iter().map(|s| s.name.clone()).collect(),
            provider: provider.as_ref(),
            events: None,
            cancel,
            usage: checkpoint.usage,
            tool_calls: checkpoint.tool_calls,
            step: checkpoint.step,
            iterations: checkpoint.iterations,
            clock: Instant::now(),
            earlier_ms: checkpoint.elapsed_ms,
            // Linked to the task it was done in as it paused.
            in_task: None,
            unrecorded: None,
        };
        let chat = ChatRequest {
            model: checkpoint.model,
            system: checkpoint.system,
            messages: checkpoint.messages,
            tools: specs,
        };
        let mut turn = checkpoint.turn;
        turn.decision = Some(decided);
        self.drive(run, chat, Some(turn)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_name_tools_or_prefixes() {
        let rules = ApprovalRules::new(["create_note".to_owned(), "mcp__mail__*".to_owned()]);
        assert!(rules.needs("create_note"));
        assert!(rules.needs("mcp__mail__send"));
        assert!(!rules.needs("create_notes"));
        assert!(!rules.needs("search_notes"));
        assert!(!ApprovalRules::default().needs("create_note"));
    }
}
