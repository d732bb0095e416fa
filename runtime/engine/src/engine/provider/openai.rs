//! OpenAI-compatible Chat Completions with streaming: OpenAI itself, Ollama's `/v1`, vLLM,
//! llama.cpp server, LM Studio.

use eventsource_stream::Eventsource;
use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use serde_json::{Value, json};

use super::{
    ChatRequest, Message, Provider, ProviderError, TokenSink, ToolCall, Turn, Usage,
    parse_arguments, send,
};

pub(crate) struct OpenAi {
    name: &'static str,
    base_url: String,
    api_key: Option<String>,
    http: reqwest::Client,
}

impl OpenAi {
    /// `name` is what traces show (`openai` or `ollama`); `base_url` ends before `/chat/completions`.
    pub(crate) fn new(
        name: &'static str,
        base_url: &str,
        api_key: Option<String>,
        http: reqwest::Client,
    ) -> Self {
        Self {
            name,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
            http,
        }
    }
}

fn messages(request: &ChatRequest) -> Vec<Value> {
    let mut out = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system {
        out.push(json!({"role": "system", "content": system}));
    }
    for message in &request.messages {
        out.push(match message {
            Message::User(text) => json!({"role": "user", "content": text}),
            Message::Assistant { text, tool_calls } if tool_calls.is_empty() => {
                json!({"role": "assistant", "content": text})
            }
            Message::Assistant { text, tool_calls } => json!({
                "role": "assistant",
                "content": if text.is_empty() { Value::Null } else { json!(text) },
                "tool_calls": tool_calls.iter().map(|call| json!({
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": arguments_text(&call.input)},
                })).collect::<Vec<_>>(),
            }),
            Message::ToolResult {
                call_id, content, ..
            } => {
                json!({"role": "tool", "tool_call_id": call_id, "content": content})
            }
        });
    }
    out
}

/// The wire carries arguments as a JSON string; a non-JSON string goes back as it came.
fn arguments_text(input: &Value) -> String {
    match input {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

fn body(request: &ChatRequest) -> Value {
    let mut body = json!({
        "model": request.model,
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": messages(request),
    });
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.parameters,
                }})
            })
            .collect();
    }
    body
}

/// More parallel tool calls than this in one turn is a broken stream, not a model.
const MAX_TOOL_CALLS: usize = 128;

/// Tool calls arrive in fragments keyed by `index`.
#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

impl Provider for OpenAi {
    fn name(&self) -> &'static str {
        self.name
    }

    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
        tokens: TokenSink<'a>,
    ) -> BoxFuture<'a, Result<Turn, ProviderError>> {
        async move {
            let url = format!("{}/chat/completions", self.base_url);
            let body = body(request);
            let response = send(self.name, || {
                let builder = self.http.post(&url).json(&body);
                match &self.api_key {
                    Some(key) => builder.bearer_auth(key),
                    None => builder,
                }
            })
            .await?;

            let mut turn = Turn::default();
            let mut calls: Vec<PartialCall> = Vec::new();
            // `[DONE]`, or a choice's `finish_reason` for servers that omit the marker.
            let mut finished = false;
            let mut events = response.bytes_stream().eventsource();
            while let Some(event) = events.next().await {
                let event = event.map_err(|e| ProviderError::stream(self.name, e))?;
                if event.data == "[DONE]" {
                    finished = true;
                    break;
                }
                let chunk: Value = serde_json::from_str(&event.data).map_err(|e| {
                    ProviderError::malformed(self.name, format!("bad stream chunk: {e}"))
                })?;
                if let Some(message) = chunk["error"]["message"].as_str() {
                    return Err(ProviderError::Status {
                        provider: self.name,
                        status: 200,
                        message: message.to_owned(),
                    });
                }
                if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
                    turn.usage = Usage {
                        input_tokens: usage["prompt_tokens"].as_i64(),
                        output_tokens: usage["completion_tokens"].as_i64(),
                    };
                }
                if let Some(model) = chunk["model"].as_str() {
                    turn.model = Some(model.to_owned());
                }
                let choice = &chunk["choices"][0];
                if let Some(reason) = choice["finish_reason"].as_str() {
                    turn.finish_reason = Some(reason.to_owned());
                    finished = true;
                }
                let delta = &choice["delta"];
                if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
                    tokens(text);
                    turn.text.push_str(text);
                }
                for fragment in delta["tool_calls"].as_array().into_iter().flatten() {
                    let index = fragment["index"].as_u64().unwrap_or(0) as usize;
                    if index >= MAX_TOOL_CALLS {
                        return Err(ProviderError::malformed(
                            self.name,
                            format!("tool call index {index} is out of range"),
                        ));
                    }
                    if calls.len() <= index {
                        calls.resize_with(index + 1, PartialCall::default);
                    }
                    let call = &mut calls[index];
                    if let Some(id) = fragment["id"].as_str() {
                        call.id = id.to_owned();
                    }
                    let function = &fragment["function"];
                    if let Some(name) = function["name"].as_str() {
                        call.name.push_str(name);
                    }
                    if let Some(arguments) = function["arguments"].as_str() {
                        call.arguments.push_str(arguments);
                    }
                }
            }
            if !finished {
                return Err(ProviderError::Truncated {
                    provider: self.name,
                });
            }
            turn.tool_calls = calls
                .into_iter()
                .enumerate()
                .filter(|(_, c)| !c.name.is_empty())
                .map(|(i, c)| ToolCall {
                    id: if c.id.is_empty() {
                        format!("call_{i}")
                    } else {
                        c.id
                    },
                    name: c.name,
                    input: parse_arguments(&c.arguments),
                })
                .collect();
            Ok(turn)
        }
        .boxed()
    }
}
