//! Anthropic Messages API with streaming.

use eventsource_stream::Eventsource;
use futures_util::future::BoxFuture;
use futures_util::{FutureExt, StreamExt};
use serde_json::{Value, json};

use super::{
    ChatRequest, Message, Provider, ProviderError, TokenSink, ToolCall, Turn, parse_arguments, send,
};

pub const NAME: &str = "anthropic";
const API_VERSION: &str = "2023-06-01";
const MAX_TOKENS: u32 = 4096;

pub struct Anthropic {
    base_url: String,
    api_key: String,
    http: reqwest::Client,
}

impl Anthropic {
    /// `base_url` ends before `/v1/messages`.
    pub fn new(base_url: &str, api_key: String, http: reqwest::Client) -> Self {
        Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
            http,
        }
    }
}

/// Tool results go back as `tool_result` blocks of one user message per run of results.
fn messages(request: &ChatRequest) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for message in &request.messages {
        match message {
            Message::User(text) => out.push(json!({"role": "user", "content": text})),
            Message::Assistant { text, tool_calls } => {
                let mut blocks = Vec::new();
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for call in tool_calls {
                    let input = if call.input.is_object() {
                        call.input.clone()
                    } else {
                        json!({})
                    };
                    blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
                }
                out.push(json!({"role": "assistant", "content": blocks}));
            }
            Message::ToolResult {
                call_id,
                content,
                is_error,
            } => {
                let block = json!({"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": is_error});
                let previous = out.last_mut().filter(|m| {
                    m["role"] == "user"
                        && m["content"]
                            .as_array()
                            .is_some_and(|c| c.iter().all(|b| b["type"] == "tool_result"))
                });
                match previous {
                    Some(m) => m["content"]
                        .as_array_mut()
                        .expect("checked above")
                        .push(block),
                    None => out.push(json!({"role": "user", "content": [block]})),
                }
            }
        }
    }
    out
}

fn body(request: &ChatRequest) -> Value {
    let mut body = json!({
        "model": request.model,
        "max_tokens": MAX_TOKENS,
        "stream": true,
        "messages": messages(request),
    });
    if let Some(system) = &request.system {
        body["system"] = json!(system);
    }
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
    }
    body
}

/// A content block being streamed: text, or a tool call whose input arrives as JSON text.
enum Block {
    Text,
    ToolUse {
        id: String,
        name: String,
        json: String,
    },
}

impl Provider for Anthropic {
    fn name(&self) -> &'static str {
        NAME
    }

    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
        tokens: TokenSink<'a>,
    ) -> BoxFuture<'a, Result<Turn, ProviderError>> {
        async move {
            let url = format!("{}/v1/messages", self.base_url);
            let body = body(request);
            let response = send(NAME, || {
                self.http
                    .post(&url)
                    .header("x-api-key", &self.api_key)
                    .header("anthropic-version", API_VERSION)
                    .json(&body)
            })
            .await?;

            let mut turn = Turn::default();
            let mut blocks: Vec<Block> = Vec::new();
            let mut finished = false;
            let mut events = response.bytes_stream().eventsource();
            while let Some(event) = events.next().await {
                let event = event.map_err(|e| ProviderError::stream(NAME, e))?;
                let data: Value = serde_json::from_str(&event.data).map_err(|e| {
                    ProviderError::malformed(NAME, format!("bad stream event: {e}"))
                })?;
                match data["type"].as_str().unwrap_or(&event.event) {
                    "message_start" => {
                        turn.usage.input_tokens = data["message"]["usage"]["input_tokens"].as_i64();
                        turn.model = data["message"]["model"].as_str().map(str::to_owned);
                    }
                    "content_block_start" => {
                        let block = &data["content_block"];
                        blocks.push(match block["type"].as_str() {
                            Some("tool_use") => Block::ToolUse {
                                id: block["id"].as_str().unwrap_or_default().to_owned(),
                                name: block["name"].as_str().unwrap_or_default().to_owned(),
                                json: String::new(),
                            },
                            _ => Block::Text,
                        });
                    }
                    "content_block_delta" => {
                        let delta = &data["delta"];
                        if let Some(text) = delta["text"].as_str() {
                            tokens(text);
                            turn.text.push_str(text);
                        } else if let (Some(partial), Some(Block::ToolUse { json, .. })) =
                            (delta["partial_json"].as_str(), blocks.last_mut())
                        {
                            json.push_str(partial);
                        }
                    }
                    "message_delta" => {
                        if let Some(output) = data["usage"]["output_tokens"].as_i64() {
                            turn.usage.output_tokens = Some(output);
                        }
                        if let Some(reason) = data["delta"]["stop_reason"].as_str() {
                            turn.finish_reason = Some(reason.to_owned());
                        }
                    }
                    "error" => {
                        let message = data["error"]["message"].as_str().unwrap_or("unknown error");
                        return Err(ProviderError::Status {
                            provider: NAME,
                            status: 200,
                            message: message.to_owned(),
                        });
                    }
                    "message_stop" => {
                        finished = true;
                        break;
                    }
                    _ => {}
                }
            }
            if !finished {
                return Err(ProviderError::Truncated { provider: NAME });
            }
            turn.tool_calls = blocks
                .into_iter()
                .filter_map(|b| match b {
                    Block::ToolUse { id, name, json } => Some(ToolCall {
                        id,
                        name,
                        input: parse_arguments(&json),
                    }),
                    Block::Text => None,
                })
                .collect();
            Ok(turn)
        }
        .boxed()
    }
}
