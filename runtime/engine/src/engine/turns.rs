//! The loop of one run's turns: a model call, then the tools it asked for (each checked, and
//! paused for a person when its tool needs approval), until it answers, fails, runs out of
//! iterations or budget, or is cancelled; each call and tool recorded on the trace as it
//! happens.

use std::sync::Arc;
use std::time::Instant;

use futures_util::future::join_all;
use service_contract::agent::AgentRunner;
use service_contract::tools::ToolContext;
use tracing::Instrument;

use super::pause::PausedTurn;
use super::provider::{ChatRequest, Message, Usage};
use crate::db::{self};
use crate::telemetry::genai;
use crate::telemetry::metrics::metrics;
use crate::traces;

use super::{Drive, Event, Parent, Run, Stop, ToolCallRecord, provider};

impl Run<'_> {
    fn emit(&self, event: Event) {
        if let Some(events) = self.events {
            // A receiver that went away is noticed through the cancellation token.
            let _ = events.send(event);
        }
    }

    /// Runs the turns; with how they ended, the last model call when it is not recorded yet
    /// (see [`Run::turns`]).
    pub(super) async fn go(
        mut self,
        mut chat: ChatRequest,
        paused: Option<PausedTurn>,
    ) -> (Drive, Option<ModelCall>) {
        let turns = self.turns(&mut chat, paused).await;
        let unrecorded = self.unrecorded.take();
        let drive = match turns {
            Ok(text) => Ok((text, self.tool_calls, self.usage)),
            Err(failure) => Err((failure, self.usage)),
        };
        (drive, unrecorded)
    }

    async fn turns(
        &mut self,
        chat: &mut ChatRequest,
        mut paused: Option<PausedTurn>,
    ) -> Result<String, Stop> {
        loop {
            if let Some(turn) = paused.take() {
                self.finish_turn(chat, turn).await?;
            }
            // A run cancelled while its tools ran (their calls see it first) asks the model
            // nothing more: the request would reach the provider before the run is dropped.
            if self.cancel.is_cancelled() {
                return Err(Stop::Cancelled);
            }
            if self.iterations >= self.engine.max_iterations {
                return Err(Stop::Error(format!(
                    "stopped after {} iterations without a final answer",
                    self.engine.max_iterations
                )));
            }
            self.iterations += 1;
            if !self.budget.take() {
                return Err(Stop::Error(format!(
                    "the LLM call budget of this run and the runs it delegates to ({} calls, [engine] llm_call_budget) is used up",
                    self.engine.llm_call_budget
                )));
            }
            let started_at = db::now();
            let clock = Instant::now();
            let events = self.events;
            let mut on_token = |text: &str| {
                if let Some(events) = events {
                    let _ = events.send(Event::Token {
                        text: text.to_owned(),
                    });
                }
            };
            let span = genai::chat(self.provider.name(), chat);
            let result = self
                .provider
                .complete(chat, &mut on_token)
                .instrument(span.clone())
                .await;
            let latency_ms = clock.elapsed().as_millis() as i64;
            match &result {
                Ok(turn) => genai::chat_answered(&span, &chat.model, turn),
                Err(e) => genai::failed(&span, e.kind(), &e.to_string()),
            }
            let usage = result.as_ref().map(|t| t.usage).unwrap_or_default();
            metrics().model_call(
                self.provider.name(),
                &chat.model,
                result.is_ok(),
                (usage.input_tokens, usage.output_tokens),
            );
            let call = ModelCall {
                step: self.step,
                model: chat.model.clone(),
                error: result.as_ref().err().map(ToString::to_string),
                text: result.as_ref().ok().map(|turn| turn.text.clone()),
                usage,
                started_at,
                latency_ms,
            };
            self.step += 1;
            if result
                .as_ref()
                .is_ok_and(|turn| !turn.tool_calls.is_empty())
            {
                self.record_llm_call(call).await?;
            } else {
                // The run ends with this call: its step is written with the trace's end, in
                // the same round trip.
                self.unrecorded = Some(call);
            }
            let turn = result.map_err(|e| Stop::Error(e.to_string()))?;
            add_usage(&mut self.usage, turn.usage);
            if turn.tool_calls.is_empty() {
                return Ok(turn.text);
            }
            for call in &turn.tool_calls {
                self.emit(Event::ToolCall {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    input: call.input.clone(),
                });
            }
            paused = Some(self.start_turn(turn.text, turn.tool_calls).await?);
        }
    }

    /// Whether a call waits for a person before it runs: an offered tool that needs approval,
    /// in a run that can pause (elsewhere [`Run::invoke_tool`] refuses it).
    fn waits_for_approval(&self, call: &provider::ToolCall) -> bool {
        self.landing.can_pause() && self.needs_approval(call)
    }

    fn needs_approval(&self, call: &provider::ToolCall) -> bool {
        self.offered.contains(&call.name) && self.engine.approvals.needs(&call.name)
    }

    /// Runs a turn's calls that need no approval, all at once; the rest wait for
    /// [`Run::finish_turn`].
    async fn start_turn(
        &mut self,
        text: String,
        calls: Vec<provider::ToolCall>,
    ) -> Result<PausedTurn, Stop> {
        let free: Vec<provider::ToolCall> = calls
            .iter()
            .filter(|call| !self.waits_for_approval(call))
            .cloned()
            .collect();
        let first_step = self.step;
        self.step += free.len() as i64;
        let done = join_all(
            free.into_iter()
                .enumerate()
                .map(|(i, call)| self.invoke_tool(first_step + i as i64, call)),
        )
        .await;
        let mut results = Vec::with_capacity(calls.len());
        for record in done {
            let record = record?;
            self.emit_result(&record);
            results.push(record);
        }
        Ok(PausedTurn {
            text,
            calls,
            results,
            decision: None,
        })
    }

    /// Settles a turn's waiting calls in order (the decided one as decided; an undecided one
    /// pauses the run), then hands the turn's results to the model.
    async fn finish_turn(
        &mut self,
        chat: &mut ChatRequest,
        mut turn: PausedTurn,
    ) -> Result<(), Stop> {
        let mut decision = turn.decision.take();
        for call in turn.calls.clone() {
            if turn.results.iter().any(|r| r.id == call.id) {
                continue;
            }
            let Some(decided) = decision.take() else {
                return Err(self.pause(chat, turn, call).await);
            };
            let step = self.step;
            self.step += 1;
            let record = self.settle(step, call, decided).await?;
            self.emit_result(&record);
            turn.results.push(record);
        }
        chat.messages.push(Message::Assistant {
            text: turn.text,
            tool_calls: turn.calls.clone(),
        });
        for call in &turn.calls {
            let Some(at) = turn.results.iter().position(|r| r.id == call.id) else {
                continue;
            };
            let record = turn.results.swap_remove(at);
            chat.messages.push(Message::ToolResult {
                call_id: record.id.clone(),
                content: record
                    .error
                    .clone()
                    .unwrap_or_else(|| record.output.clone().unwrap_or_default()),
                is_error: record.error.is_some(),
            });
            self.tool_calls.push(record);
        }
        Ok(())
    }

    fn emit_result(&self, record: &ToolCallRecord) {
        self.emit(Event::ToolResult {
            id: record.id.clone(),
            name: record.name.clone(),
            output: record.output.clone(),
            error: record.error.clone(),
        });
    }

    async fn record_llm_call(&self, call: ModelCall) -> Result<(), Stop> {
        let (trace_id, provider) = (self.trace_id.clone(), self.provider.name());
        self.engine
            .db
            .call(move |conn| call.record(conn, &trace_id, provider))
            .await
            .map_err(|e| Stop::Error(format!("cannot record the trace: {e}")))
    }

    pub(super) async fn invoke_tool(
        &self,
        step: i64,
        call: provider::ToolCall,
    ) -> Result<ToolCallRecord, Stop> {
        let started_at = db::now();
        let clock = Instant::now();
        let context = ToolContext {
            agents: Arc::clone(self.engine) as Arc<dyn AgentRunner>,
            run: Some(Parent {
                trace_id: self.trace_id.clone(),
                depth: self.depth,
                budget: self.budget.clone(),
                started_by: self.started_by.clone(),
            }),
            cancel: self.cancel.clone(),
        };
        let span = genai::execute_tool(&call.name, &call.id, &call.input);
        // A model may name a tool it was not offered; the profile's list is the boundary.
        let offered = self.offered.contains(&call.name);
        let result = if !offered {
            Err(format!(
                "tool {:?} is not available to this agent",
                call.name
            ))
        } else if self.needs_approval(&call) && !self.waits_for_approval(&call) {
            Err(format!(
                "tool {:?} needs a person's approval ([tools.{}] approval), and a run started \
                 by {} cannot wait for one; it was not run",
                call.name, call.name, self.source
            ))
        } else {
            self.engine
                .tools
                .invoke(&call.name, call.input.clone(), context)
                .instrument(span.clone())
                .await
        };
        genai::tool_answered(&span, &result);
        // Only offered names become labels: a model's inventions are not counted one by one.
        let label = if offered {
            call.name.as_str()
        } else {
            "(not offered)"
        };
        metrics().tool_call(label, result.is_ok(), clock.elapsed());
        self.record_tool(step, call, result, &started_at, clock)
            .await
    }

    /// Records a tool call's outcome as a step of the trace.
    pub(super) async fn record_tool(
        &self,
        step: i64,
        call: provider::ToolCall,
        result: Result<String, String>,
        started_at: &str,
        clock: Instant,
    ) -> Result<ToolCallRecord, Stop> {
        let latency_ms = clock.elapsed().as_millis() as i64;
        let (output, error) = match result {
            Ok(output) => (Some(output), None),
            Err(error) => (None, Some(error)),
        };
        let record = ToolCallRecord {
            id: call.id,
            name: call.name,
            input: call.input,
            output,
            error,
        };
        let row = record.clone();
        let (trace_id, started_at) = (self.trace_id.clone(), started_at.to_owned());
        self.engine
            .db
            .call(move |conn| {
                traces::record_tool_invocation(
                    conn,
                    &trace_id,
                    &traces::ToolInvocation {
                        step,
                        call_id: Some(&row.id),
                        tool_name: &row.name,
                        input: &row.input,
                        output: row.output.as_deref(),
                        error: row.error.as_deref(),
                        started_at: &started_at,
                        latency_ms,
                    },
                )
            })
            .await
            .map_err(|e| Stop::Error(format!("cannot record the trace: {e}")))?;
        Ok(record)
    }
}

fn add_usage(total: &mut Usage, turn: Usage) {
    let add = |a: Option<i64>, b: Option<i64>| match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    };
    total.input_tokens = add(total.input_tokens, turn.input_tokens);
    total.output_tokens = add(total.output_tokens, turn.output_tokens);
}

/// A model call, as its step of the trace records it.
pub(super) struct ModelCall {
    step: i64,
    model: String,
    error: Option<String>,
    text: Option<String>,
    usage: Usage,
    started_at: String,
    latency_ms: i64,
}

impl ModelCall {
    /// Sent with the next statement.
    pub(super) fn record(
        &self,
        conn: &db::Conn,
        trace_id: &str,
        provider: &str,
    ) -> crate::error::Result<()> {
        traces::record_llm_call(
            conn,
            trace_id,
            &traces::LlmCall {
                step: self.step,
                provider,
                model: &self.model,
                error: self.error.as_deref(),
                response_text: self.text.as_deref(),
                input_tokens: self.usage.input_tokens,
                output_tokens: self.usage.output_tokens,
                started_at: &self.started_at,
                latency_ms: self.latency_ms,
            },
        )
    }
}
