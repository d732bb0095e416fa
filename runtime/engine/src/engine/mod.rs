//! The agent engine. Every agent run in the service (chat, adapters, the scheduler, delegated
//! sub-runs) goes through [`Engine::run`] and records exactly one trace.

mod keyed;
pub mod pause;
pub mod provider;
mod run_error;
mod runner;
pub mod settings;
pub mod tools;
mod turns;

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::Instant;

pub use self::keyed::keep_exchange;
pub use self::run_error::RunError;
use futures_util::future::BoxFuture;
use serde::Serialize;
use serde_json::Value;
use service_contract::agent::{Budget, TurnRole};
pub use service_contract::agent::{Parent, ProfileChoice, RunRequest};
use service_contract::tools::ToolRegistry;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use self::pause::{ApprovalRules, Landing, Paused, PausedTurn, Then};
use self::provider::{ChatRequest, Message, Provider, ProviderError, Usage};
use self::settings::{ProviderChoice, ProviderSettings};
use crate::agents::profiles::{self, Profile};
use crate::conversations;
use crate::db::Db;
use crate::settings_store::SettingsStore;
use crate::telemetry::genai;
use crate::telemetry::metrics::metrics;
use crate::{tasks, traces};

pub const DEFAULT_MAX_ITERATIONS: u32 = 10;
/// LLM calls a top-level run and all the runs it delegates to may make together.
pub const DEFAULT_LLM_CALL_BUDGET: u32 = 100;

/// What a run reports while it works.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// The run's trace exists: sent once, before anything else.
    Started {
        trace_id: String,
    },
    Token {
        text: String,
    },
    ToolCall {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        id: String,
        name: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        output: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}

pub type Events = mpsc::UnboundedSender<Event>;

/// A tool call of a run: what the model asked for, and what the tool answered or why it failed.
#[derive(Debug, Clone, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ToolCallRecord {
    pub id: String,
    pub name: String,
    /// The model's arguments (a string when it wrote something that is not JSON).
    pub input: Value,
    pub output: Option<String>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RunOutput {
    pub trace_id: String,
    pub text: String,
    pub tool_calls: Vec<ToolCallRecord>,
    pub latency_ms: i64,
}

/// Nested delegations stop here, so two agents cannot delegate to each other forever.
pub(crate) const MAX_DELEGATION_DEPTH: u32 = 3;

pub struct Engine {
    /// Itself, for handing to tools as their `AgentRunner`.
    this: Weak<Engine>,
    db: Db,
    env: Arc<SettingsStore>,
    http: reqwest::Client,
    settings: ProviderSettings,
    max_iterations: u32,
    llm_call_budget: u32,
    tools: Arc<ToolRegistry>,
    /// The replica this engine runs on, named on every trace it starts.
    replica: String,
    /// The tools whose calls wait for a person.
    approvals: ApprovalRules,
    /// How much of a conversation an adapter's keyed run sends the model.
    conversation_budget: conversations::Budget,
}

/// A run whose profile and provider were resolved; nothing has been sent yet.
pub struct Prepared {
    request: RunRequest,
    prompt: String,
    profile: Option<Profile>,
    provider: Arc<dyn Provider>,
    model: String,
    /// The conversation the run's answer lands in: only such a run can pause for approval.
    conversation: Option<String>,
    /// The id its trace gets, when named beforehand.
    trace_id: Option<String>,
}

impl Prepared {
    /// Names the trace the run will write, so a caller can link to it before it starts.
    pub fn with_trace_id(mut self, trace_id: &str) -> Self {
        self.trace_id = Some(trace_id.to_owned());
        self
    }

    /// Makes the run the outcome of `task`: a pause leaves it pending, and the run finishes
    /// it once it goes on.
    pub fn for_task(mut self, task: &str) -> Self {
        self.request.task = Some(task.to_owned());
        self
    }

    /// The conversation's turns before the prompt, read once the turn is first in its line.
    pub fn with_history(mut self, history: Vec<service_contract::agent::Turn>) -> Self {
        self.request.history = history;
        self
    }

    /// Lands the run's answer in `conversation`, so it may pause for a person's approval
    /// and answer there later.
    pub fn in_conversation(mut self, conversation: &str) -> Self {
        self.conversation = Some(conversation.to_owned());
        self
    }
}

/// What a run's trace starts with.
struct StartTrace {
    id: Option<String>,
    request: RunRequest,
    profile: Option<String>,
    provider: &'static str,
    model: String,
    prompt: String,
}

pub struct EngineParts {
    pub db: Db,
    pub env: Arc<SettingsStore>,
    pub http: reqwest::Client,
    pub settings: ProviderSettings,
    pub max_iterations: u32,
    pub llm_call_budget: u32,
    pub tools: Arc<ToolRegistry>,
    pub replica: String,
    pub approvals: ApprovalRules,
    pub conversation_budget: conversations::Budget,
}

impl Engine {
    pub fn new(parts: EngineParts) -> anyhow::Result<Arc<Self>> {
        anyhow::ensure!(
            parts.max_iterations >= 1,
            "max_iterations must be at least 1, got {}",
            parts.max_iterations
        );
        Ok(Arc::new_cyclic(|this| Self {
            this: this.clone(),
            db: parts.db,
            env: parts.env,
            http: parts.http,
            settings: parts.settings,
            max_iterations: parts.max_iterations,
            llm_call_budget: parts.llm_call_budget,
            tools: parts.tools,
            replica: parts.replica,
            approvals: parts.approvals,
            conversation_budget: parts.conversation_budget,
        }))
    }

    pub fn tools(&self) -> &Arc<ToolRegistry> {
        &self.tools
    }

    /// The provider and model runs use now (chosen afresh for every run).
    pub fn provider_choice(&self) -> ProviderChoice {
        self.settings.current(&self.env)
    }

    /// The provider of the choice, with the credentials set now.
    pub fn provider_of(&self, choice: &ProviderChoice) -> Result<Arc<dyn Provider>, ProviderError> {
        choice.provider(&self.env, &self.http)
    }

    /// Prepares and executes a run.
    pub fn run<'a>(
        self: &'a Arc<Self>,
        request: RunRequest,
        events: Option<&'a Events>,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<RunOutput, RunError>> {
        Box::pin(async move {
            let prepared = self.prepare(request).await?;
            self.execute(prepared, events, cancel).await
        })
    }

    /// Checks the prompt and resolves the profile, model and provider. A run that fails here
    /// still records an error trace (except for an empty prompt, which is not a run).
    pub fn prepare(&self, request: RunRequest) -> BoxFuture<'_, Result<Prepared, RunError>> {
        Box::pin(async move {
            let prompt = request.prompt.trim().to_owned();
            if prompt.is_empty() {
                return Err(RunError::EmptyPrompt);
            }
            let name = request.profile.name().to_owned();
            let choice = self.provider_choice();
            let profile = {
                let name = name.clone();
                self.db.call(move |conn| profiles::get(conn, &name)).await?
            };
            let model = request
                .model
                .clone()
                .or_else(|| profile.as_ref().and_then(|p| p.default_model.clone()))
                .unwrap_or_else(|| choice.model().to_owned());
            let failed_trace = |error: String| {
                let provider = choice.kind.as_str();
                self.failed_trace(&request, &prompt, &name, (provider, &model), error)
            };
            if profile.is_none() && matches!(request.profile, ProfileChoice::Required(_)) {
                let trace_id = failed_trace(format!("no agent named {name:?}")).await?;
                return Err(RunError::UnknownAgent { name, trace_id });
            }
            // However it was reached (a delegation tool, a component's tool, a component run
            // inside one), a run is never deeper than the limit.
            if let Some(parent) = request
                .parent
                .as_ref()
                .filter(|p| p.depth > MAX_DELEGATION_DEPTH)
            {
                let message = format!(
                    "delegation depth {} is past the limit of {MAX_DELEGATION_DEPTH}",
                    parent.depth
                );
                let trace_id = failed_trace(message.clone()).await?;
                return Err(RunError::Failed { message, trace_id });
            }
            let provider = match self.provider_of(&choice) {
                Ok(provider) => provider,
                Err(error) => {
                    let trace_id = failed_trace(error.to_string()).await?;
                    return Err(RunError::NotConfigured { error, trace_id });
                }
            };
            Ok(Prepared {
                request,
                prompt,
                profile,
                provider,
                model,
                conversation: None,
                trace_id: None,
            })
        })
    }

    async fn failed_trace(
        &self,
        request: &RunRequest,
        prompt: &str,
        profile: &str,
        (provider, model): (&'static str, &str),
        error: String,
    ) -> Result<String, RunError> {
        let started = StartTrace {
            id: None,
            request: request.clone(),
            profile: Some(profile.to_owned()),
            provider,
            model: model.to_owned(),
            prompt: prompt.to_owned(),
        };
        Ok(self.start_trace(started, Vec::new(), Some(error)).await?)
    }

    /// Writes a run's trace, with the warnings of its start; a run that failed before it
    /// began (`failed`) has it finished with that error in the same transaction.
    async fn start_trace(
        &self,
        run: StartTrace,
        warnings: Vec<String>,
        failed: Option<String>,
    ) -> crate::error::Result<String> {
        let replica = self.replica.clone();
        self.db
            .call(move |conn| {
                let trace = traces::NewTrace {
                    id: run.id.as_deref(),
                    parent_trace_id: run.request.parent.as_ref().map(|p| p.trace_id.as_str()),
                    agent_profile_name: run.profile.as_deref(),
                    source: &run.request.source,
                    started_by: run.request.started_by(),
                    provider: run.provider,
                    model: &run.model,
                    prompt: &run.prompt,
                    runner: Some(&replica),
                    warnings: &warnings,
                };
                // A job's task is named in the trace's round trip.
                if let Some(task) = &run.request.in_task {
                    let (source, prompt) = (&run.request.source, &run.request.prompt);
                    tasks::name_run(conn, task, source, prompt, run.request.profile.name())?;
                }
                let Some(error) = &failed else {
                    // One statement: no transaction to begin and commit.
                    return traces::start(conn, &trace);
                };
                conn.transaction(|tx| {
                    let id = traces::start(tx, &trace)?;
                    let outcome = traces::Outcome {
                        error: Some(error),
                        ..Default::default()
                    };
                    traces::finish(tx, &id, &outcome)?;
                    if let Some(task) = &run.request.in_task {
                        tasks::link_trace(tx, task, &id)?;
                    }
                    Ok(id)
                })
            })
            .await
    }

    /// Runs the tool-calling loop of a prepared run, recording its trace as it goes.
    pub fn execute<'a>(
        self: &'a Arc<Self>,
        prepared: Prepared,
        events: Option<&'a Events>,
        cancel: &'a CancellationToken,
    ) -> BoxFuture<'a, Result<RunOutput, RunError>> {
        Box::pin(async move {
            let Prepared {
                request,
                prompt,
                profile,
                provider,
                model,
                conversation,
                trace_id,
            } = prepared;
            let (specs, warnings) = self.allowed_tools(profile.as_ref());
            let run = StartTrace {
                id: trace_id,
                request: request.clone(),
                profile: profile.as_ref().map(|p| p.name.clone()),
                provider: provider.name(),
                model: model.clone(),
                prompt: prompt.clone(),
            };
            let trace_id = self.start_trace(run, warnings, None).await?;
            if let Some(events) = events {
                let _ = events.send(Event::Started {
                    trace_id: trace_id.clone(),
                });
            }
            let agent = request.profile.name().to_owned();
            // Delegated runs answer their parent, not a conversation or a task: they cannot pause.
            let then = conversation.as_ref().and(request.then.clone());
            let landing = Landing {
                conversation,
                task: request.task.clone(),
                then: then.map(|payload| Then {
                    adapter: request.source.clone(),
                    payload,
                }),
            }
            .unless(request.parent.is_some());
            let run = Run {
                engine: self,
                trace_id: trace_id.clone(),
                agent,
                source: request.source.clone(),
                started_by: request.started_by().map(str::to_owned),
                landing,
                depth: request.parent.as_ref().map_or(0, |p| p.depth),
                budget: request
                    .parent
                    .as_ref()
                    .map_or_else(|| Budget::new(self.llm_call_budget), |p| p.budget.clone()),
                offered: specs.iter().map(|s| s.name.clone()).collect(),
                provider: provider.as_ref(),
                events,
                cancel,
                usage: Usage::default(),
                tool_calls: Vec::new(),
                step: 0,
                iterations: 0,
                clock: Instant::now(),
                earlier_ms: 0,
                in_task: request.in_task.clone(),
                unrecorded: None,
            };
            let messages = request
                .history
                .iter()
                .map(|turn| match turn.role {
                    TurnRole::User => Message::User(turn.text.clone()),
                    TurnRole::Assistant => Message::Assistant {
                        text: turn.text.clone(),
                        tool_calls: Vec::new(),
                    },
                })
                .chain([Message::User(prompt)])
                .collect();
            let chat = ChatRequest {
                model,
                system: profile.map(|p| p.system_prompt),
                messages,
                tools: specs,
            };
            self.drive(run, chat, None).await
        })
    }

    /// The tools a profile's runs are offered, with warnings about the names that matched none.
    fn allowed_tools(&self, profile: Option<&Profile>) -> (Vec<provider::ToolSpec>, Vec<String>) {
        let gate_open = |gate: &str| self.env.get(gate).as_deref() == Some("true");
        self.tools
            .allowed(profile.and_then(|p| p.tools.as_deref()), gate_open)
    }

    /// Drives a run (from its start, or on from a paused turn) to its end or its next pause,
    /// and records how it ended: the trace is finished unless the run paused.
    async fn drive(
        &self,
        run: Run<'_>,
        chat: ChatRequest,
        paused: Option<PausedTurn>,
    ) -> Result<RunOutput, RunError> {
        let (agent, trace_id, clock, earlier_ms, in_task) = (
            run.agent.clone(),
            run.trace_id.clone(),
            run.clock,
            run.earlier_ms,
            run.in_task.clone(),
        );
        let provider = run.provider.name();
        let span = genai::invoke_agent(&agent, provider, &chat.model, &trace_id, &run.source);
        let cancel = run.cancel.clone();
        let (outcome, unrecorded) = tokio::select! {
            outcome = run.go(chat, paused).instrument(span.clone()) => outcome,
            () = cancel.cancelled() => (Err((Stop::Cancelled, Usage::default())), None),
        };
        let latency_ms = earlier_ms + clock.elapsed().as_millis() as i64;
        let (result, usage) = match outcome {
            Ok((text, tool_calls, usage)) => (Ok((text, tool_calls)), usage),
            Err((failure, usage)) => (Err(failure), usage),
        };
        let error = match &result {
            Ok(_) | Err(Stop::Paused(_)) => None,
            Err(Stop::Cancelled) => {
                Some("cancelled: the client went away or the task was cancelled".to_owned())
            }
            Err(Stop::Error(message)) => Some(message.clone()),
        };
        genai::record_usage(&span, usage.input_tokens, usage.output_tokens);
        let outcome = match &result {
            Ok(_) => "ok",
            Err(Stop::Paused(_)) => "paused",
            Err(Stop::Cancelled) => "cancelled",
            Err(Stop::Error(_)) => "error",
        };
        if let Some(error) = &error {
            genai::failed(&span, outcome, error);
        }
        metrics().agent_run(&agent, outcome);
        let text = result.as_ref().ok().map(|(text, _)| text.clone());
        // A paused run's trace stays open until the run goes on. The last model call and
        // the link from the run's task go in the same round trip.
        let finished = !matches!(result, Err(Stop::Paused(_)));
        if finished || in_task.is_some() {
            let trace_id = trace_id.clone();
            self.db
                .call(move |conn| {
                    if let Some(call) = &unrecorded {
                        call.record(conn, &trace_id, provider)?;
                    }
                    if let Some(task) = &in_task {
                        tasks::link_trace(conn, task, &trace_id)?;
                    }
                    if !finished {
                        return Ok(());
                    }
                    traces::finish(
                        conn,
                        &trace_id,
                        &traces::Outcome {
                            response: text.as_deref(),
                            error: error.as_deref(),
                            latency_ms,
                            input_tokens: usage.input_tokens,
                            output_tokens: usage.output_tokens,
                        },
                    )
                })
                .await?;
        }
        match result {
            Ok((text, tool_calls)) => Ok(RunOutput {
                trace_id,
                text,
                tool_calls,
                latency_ms,
            }),
            Err(Stop::Cancelled) => Err(RunError::Cancelled { trace_id }),
            Err(Stop::Error(message)) => Err(RunError::Failed { message, trace_id }),
            Err(Stop::Paused(paused)) => Err(RunError::Paused { paused, trace_id }),
        }
    }
}

/// Why the loop stopped without an answer.
enum Stop {
    Cancelled,
    Error(String),
    /// A tool call waits for a person; the run goes on from its checkpoint once decided.
    Paused(Paused),
}

/// The state of one executing run.
struct Run<'a> {
    engine: &'a Arc<Engine>,
    trace_id: String,
    /// The profile it runs as.
    agent: String,
    source: String,
    /// Who asked for it (its trace and tasks say so; runs it delegates to carry it on).
    started_by: Option<String>,
    /// Where its answer lands, which a run that pauses needs.
    landing: Landing,
    depth: u32,
    /// LLM calls left to this run's whole tree.
    budget: Budget,
    /// The tools the model was offered: the only ones it may call.
    offered: HashSet<String>,
    provider: &'a dyn Provider,
    events: Option<&'a Events>,
    cancel: &'a CancellationToken,
    usage: Usage,
    tool_calls: Vec<ToolCallRecord>,
    /// The trace's next step.
    step: i64,
    /// LLM calls made so far.
    iterations: u32,
    clock: Instant,
    /// Time the run spent before it last paused.
    earlier_ms: i64,
    /// The task it is done in and links to its trace (see [`RunRequest::in_task`]).
    in_task: Option<String>,
    /// The last model call, kept for the trace's end.
    unrecorded: Option<turns::ModelCall>,
}

type Drive = Result<(String, Vec<ToolCallRecord>, Usage), (Stop, Usage)>;
