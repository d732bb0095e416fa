//! The built-in provider used when nothing is configured: deterministic, no network. It
//! streams a clearly labelled answer in several token frames, so a fresh install shows the
//! whole pipeline (streaming, traces, the dashboard) working without any key.

use futures_util::FutureExt;
use futures_util::future::BoxFuture;

use super::{ChatRequest, Message, Provider, ProviderError, TokenSink, Turn, Usage};

pub const NAME: &str = "offline";
pub const MODEL: &str = "offline";

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
            let said = request
                .messages
                .iter()
                .rev()
                .find_map(|m| match m {
                    Message::User(text) => Some(text.as_str()),
                    _ => None,
                })
                .unwrap_or_default();
            let text = format!(
                "[offline] No LLM provider is configured, so the built-in offline responder is \
                 answering. You said: \"{said}\". Set SERVICE_PROVIDER to openai, anthropic or \
                 ollama (and its key) to talk to a real model."
            );
            // Word-sized frames, like a real model's stream.
            for piece in text.split_inclusive(' ') {
                tokens(piece);
            }
            let words = |s: &str| s.split_whitespace().count() as i64;
            Ok(Turn {
                usage: Usage {
                    input_tokens: Some(words(said)),
                    output_tokens: Some(words(&text)),
                },
                text,
                tool_calls: Vec::new(),
                model: None,
                finish_reason: Some("stop".to_owned()),
            })
        }
        .boxed()
    }
}
