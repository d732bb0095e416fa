//! Tool calls that wait for a person. A run that reaches one writes its checkpoint (the
//! messages so far, the rest of its turn, its counters) into an approval and ends; once the
//! approval is decided, whichever replica claims it goes on from the checkpoint in the same
//! trace, and the answer lands in the run's conversation. Nothing waits in memory, so a
//! restart (or kill -9) loses nothing.

use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use service_contract::agent::Budget;
use tokio_util::sync::CancellationToken;

use super::provider::{ChatRequest, Message, ToolCall, Usage};
use super::{Engine, Run, RunError, RunOutput, Stop, ToolCallRecord};
use crate::agents::profiles;
use crate::approvals::{self, Claimed, NewApproval};
use crate::conversations;
use crate::db;
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

/// Where a paused run's answer goes once it goes on: its conversation, its task, or both.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Landing {
    pub conversation: Option<String>,
    pub task: Option<String>,
}

impl Landing {
    /// No landing when `cannot` holds (a delegated run answers its parent).
    pub fn unless(self, cannot: bool) -> Self {
        if cannot { Self::default() } else { self }
    }

    pub fn can_pause(&self) -> bool {
        self.conversation.is_some() || self.task.is_some()
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
        let (agent, trace_id, tool, input) = (
            self.agent.clone(),
            self.trace_id.clone(),
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
    /// conversation, its outcome on its task) or its next pause. The approval is done with unless `cancel` stopped it,
    /// in which case the claim is left to lapse and the run goes on later.
    pub async fn resume(
        self: &Arc<Self>,
        claimed: Claimed,
        cancel: &CancellationToken,
    ) -> crate::error::Result<Result<RunOutput, RunError>> {
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
        let result = self
            .go_on(checkpoint, &approval.trace_id, decided, cancel)
            .await;
        if matches!(result, Err(RunError::Cancelled { .. })) && cancel.is_cancelled() {
            return Ok(result);
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
        let trace_id = approval.trace_id.clone();
        self.db
            .call(move |conn| {
                if let (Some(conversation), Some((text, calls))) = (conversation, answer) {
                    conversations::answer(conn, &conversation, &text, &calls, &trace_id)?;
                }
                if let Some(task) = task {
                    tasks::record_run(conn, &task, Some(status), Some(&trace_id))?;
                }
                approvals::resumed(conn, &id)
            })
            .await?;
        Ok(result)
    }

    async fn go_on(
        self: &Arc<Self>,
        checkpoint: Checkpoint,
        trace_id: &str,
        decided: Decided,
        cancel: &CancellationToken,
    ) -> Result<RunOutput, RunError> {
        let provider = match self.settings.provider(&self.env, &self.http) {
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
