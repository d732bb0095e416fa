//! The built-in provider used when nothing is configured: deterministic, no network. It
//! streams a clearly labelled answer in several token frames, so a fresh install shows the
//! whole pipeline working without any key: streaming, traces, the dashboard, a conversation's
//! history (it repeats what was said earlier) and tools (asked to `search notes for WORDS`, it
//! calls `search_notes` when the agent may, and reports what the tool answered).

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde_json::json;

use super::{ChatRequest, Message, Provider, ProviderError, TokenSink, ToolCall, Turn, Usage};

pub const NAME: &str = "offline";
pub(crate) const MODEL: &str = "offline";

/// The harmless tool it calls on request, and the words that ask for it.
const TOOL: &str = "search_notes";
const ASK: &str = "search notes for ";

/// How much of an earlier message or a tool's answer it repeats.
const QUOTED_CHARS: usize = 200;

pub struct Offline;

impl Provider for Offline {
    fn name(&self) -> &'static str {
        NAME
    }

    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
        tokens: TokenSink<'a>,
    ) -> BoxFuture<'a, Result<Turn, ProviderError>> {
        async move {
            let said: Vec<&str> = request
                .messages
                .iter()
                .filter_map(|m| match m {
                    Message::User(text) => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            let last = said.last().copied().unwrap_or_default();
            let usage = |out: &str| Usage {
                input_tokens: Some(words(last)),
                output_tokens: Some(words(out)),
            };
            if let Some(call) = tool_call(request, last) {
                return Ok(Turn {
                    usage: usage(""),
                    tool_calls: vec![call],
                    finish_reason: Some("tool_calls".to_owned()),
                    ..Turn::default()
                });
            }
            let text = answer(request, &said);
            // Word-sized frames, like a real model's stream.
            for piece in text.split_inclusive(' ') {
                tokens(piece);
            }
            Ok(Turn {
                usage: usage(&text),
                text,
                tool_calls: Vec::new(),
                model: None,
                finish_reason: Some("stop".to_owned()),
            })
        }
        .boxed()
    }
}

fn words(text: &str) -> i64 {
    text.split_whitespace().count() as i64
}

fn quoted(text: &str) -> String {
    service_contract::registry::clip(text.trim(), QUOTED_CHARS).into_owned()
}

/// `search_notes` for the words after "search notes for", when the agent may use it and the
/// last message is the person's (after the tool answered, it answers in words).
fn tool_call(request: &ChatRequest, last: &str) -> Option<ToolCall> {
    if !matches!(request.messages.last(), Some(Message::User(_)))
        || !request.tools.iter().any(|t| t.name == TOOL)
    {
        return None;
    }
    // ASCII only: byte offsets stay those of `last`.
    let lower = last.to_ascii_lowercase();
    let at = lower.find(ASK)?;
    let query = last
        .get(at + ASK.len()..)?
        .trim()
        .trim_end_matches(['.', '?', '!']);
    (!query.is_empty()).then(|| ToolCall {
        id: "offline-call-1".to_owned(),
        name: TOOL.to_owned(),
        input: json!({ "query": query }),
    })
}

fn answer(request: &ChatRequest, said: &[&str]) -> String {
    let last = said.last().copied().unwrap_or_default();
    let mut text = format!(
        "[offline] No LLM provider is chosen, so the built-in offline responder is answering. \
         You said: \"{}\".",
        quoted(last)
    );
    if let Some(Message::ToolResult {
        content, is_error, ..
    }) = request.messages.last()
    {
        let outcome = if *is_error { "failed" } else { "answered" };
        text.push_str(&format!(" The {TOOL} tool {outcome}: {}", quoted(content)));
    }
    if let [earlier @ .., _] = said
        && let Some(first) = earlier.first()
    {
        text.push_str(&format!(
            " This conversation has {} earlier message(s) of yours; the first was \"{}\".",
            earlier.len(),
            quoted(first)
        ));
    }
    text.push_str(
        " Choose a provider on the dashboard's Settings tab (or set SERVICE_PROVIDER) and its key \
         to talk to a real model; ask me to \"search notes for\" some words to see a tool call.",
    );
    text
}
