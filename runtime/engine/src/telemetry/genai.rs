//! The spans of agent runs, after the OpenTelemetry semantic conventions for generative AI
//! (semantic conventions 1.37.0): `invoke_agent {agent}` for a run, `chat {model}` for each
//! model call, `execute_tool {tool}` for each tool call. What was said (prompts, answers,
//! tool arguments and results) is recorded only with
//! `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`.

use std::sync::LazyLock;

use opentelemetry::{Array, StringValue, Value as OtelValue};
use serde_json::{Value, json};
use tracing::Span;
use tracing::field::Empty;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::TARGET;
use crate::engine::provider::{ChatRequest, Message, Turn};

static CAPTURE_CONTENT: LazyLock<bool> = LazyLock::new(|| {
    std::env::var("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
        .is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"))
});

/// Whether spans may carry what was said.
pub(crate) fn capture_content() -> bool {
    *CAPTURE_CONTENT
}

/// A run of `agent`; the service's own trace id leads to `/api/traces/{id}`.
pub(crate) fn invoke_agent(
    agent: &str,
    provider: &str,
    model: &str,
    trace_id: &str,
    source: &str,
) -> Span {
    tracing::info_span!(
        target: TARGET,
        "invoke_agent",
        otel.name = %format!("invoke_agent {agent}"),
        otel.kind = "internal",
        gen_ai.operation.name = "invoke_agent",
        gen_ai.agent.name = agent,
        gen_ai.provider.name = provider,
        gen_ai.request.model = model,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        service_runtime.trace_id = trace_id,
        service_runtime.source = source,
        "error.type" = Empty,
        otel.status_code = Empty,
        otel.status_description = Empty,
    )
}

/// One model call.
pub(crate) fn chat(provider: &str, request: &ChatRequest) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "chat",
        otel.name = %format!("chat {}", request.model),
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider,
        gen_ai.request.model = %request.model,
        gen_ai.response.model = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.system_instructions = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
        "error.type" = Empty,
        otel.status_code = Empty,
        otel.status_description = Empty,
    );
    if capture_content() && !span.is_disabled() {
        if let Some(system) = &request.system {
            let parts = json!([{"type": "text", "content": system}]);
            span.record("gen_ai.system_instructions", parts.to_string());
        }
        let messages: Vec<Value> = request.messages.iter().map(message).collect();
        span.record("gen_ai.input.messages", Value::from(messages).to_string());
    }
    span
}

/// What a model call answered.
pub(crate) fn chat_answered(span: &Span, request_model: &str, turn: &Turn) {
    if span.is_disabled() {
        return;
    }
    span.record(
        "gen_ai.response.model",
        turn.model.as_deref().unwrap_or(request_model),
    );
    record_usage(span, turn.usage.input_tokens, turn.usage.output_tokens);
    if let Some(reason) = &turn.finish_reason {
        span.set_attribute(
            "gen_ai.response.finish_reasons",
            OtelValue::Array(Array::String(vec![StringValue::from(reason.clone())])),
        );
    }
    if capture_content() {
        let mut parts = Vec::new();
        if !turn.text.is_empty() {
            parts.push(json!({"type": "text", "content": turn.text}));
        }
        parts.extend(turn.tool_calls.iter().map(|call| {
            json!({"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.input})
        }));
        let output = json!([{
            "role": "assistant",
            "parts": parts,
            "finish_reason": turn.finish_reason.as_deref().unwrap_or("stop"),
        }]);
        span.record("gen_ai.output.messages", output.to_string());
    }
}

/// A run's or a call's tokens.
pub(crate) fn record_usage(span: &Span, input: Option<i64>, output: Option<i64>) {
    if let Some(input) = input {
        span.record("gen_ai.usage.input_tokens", input);
    }
    if let Some(output) = output {
        span.record("gen_ai.usage.output_tokens", output);
    }
}

/// One tool call.
pub(crate) fn execute_tool(tool: &str, call_id: &str, input: &Value) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "execute_tool",
        otel.name = %format!("execute_tool {tool}"),
        otel.kind = "internal",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        gen_ai.tool.call.id = call_id,
        "gen_ai.tool.type" = "function",
        gen_ai.tool.call.arguments = Empty,
        gen_ai.tool.call.result = Empty,
        "error.type" = Empty,
        otel.status_code = Empty,
        otel.status_description = Empty,
    );
    if capture_content() {
        span.record("gen_ai.tool.call.arguments", input.to_string());
    }
    span
}

/// What a tool answered.
pub(crate) fn tool_answered(span: &Span, result: &Result<String, String>) {
    match result {
        Ok(output) if capture_content() => {
            span.record("gen_ai.tool.call.result", output.as_str());
        }
        Ok(_) => {}
        Err(error) => failed(span, "tool_error", error),
    }
}

/// Marks a span failed, with the error's kind and message.
pub(crate) fn failed(span: &Span, kind: &str, message: &str) {
    span.record("error.type", kind);
    span.record("otel.status_code", "error");
    span.record("otel.status_description", message);
}

/// A message as the conventions' JSON has it.
fn message(message: &Message) -> Value {
    match message {
        Message::User(text) => {
            json!({"role": "user", "parts": [{"type": "text", "content": text}]})
        }
        Message::Assistant { text, tool_calls } => {
            let mut parts = Vec::new();
            if !text.is_empty() {
                parts.push(json!({"type": "text", "content": text}));
            }
            parts.extend(tool_calls.iter().map(|call| {
                json!({"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.input})
            }));
            json!({"role": "assistant", "parts": parts})
        }
        Message::ToolResult {
            call_id, content, ..
        } => json!({
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": call_id, "response": content}],
        }),
    }
}
