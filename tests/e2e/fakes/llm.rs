//! Fake LLM APIs: OpenAI-compatible Chat Completions and the Anthropic Messages API, both
//! streaming server-sent events. Each answers from a script, one reply per request, and records
//! every request (headers and JSON body) for assertions.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use crate::support::spawn_fake;

/// One scripted answer.
#[derive(Clone)]
pub enum Reply {
    /// A final answer, streamed in word-sized chunks.
    Text(&'static str),
    /// Tool calls `(id, name, arguments)`, arguments streamed in fragments.
    Tools(Vec<(&'static str, &'static str, Value)>),
    /// An HTTP error with this JSON body.
    Status(u16, Value),
    /// A stream whose chunk is not JSON.
    Garbage,
    /// Waits this long before answering with the text.
    Slow(Duration, &'static str),
    /// Starts streaming the text, then closes the stream without its end marker.
    Cut(&'static str),
    /// Streams each piece the test sends (OpenAI only), and ends when the sender is dropped:
    /// the test decides when every token arrives. See [`by_hand`].
    ByHand(Arc<Mutex<Option<UnboundedReceiver<&'static str>>>>),
}

/// A reply streamed by hand, and the sender that feeds it.
pub fn by_hand() -> (Reply, UnboundedSender<&'static str>) {
    let (pieces, receiver) = tokio::sync::mpsc::unbounded_channel();
    (Reply::ByHand(Arc::new(Mutex::new(Some(receiver)))), pieces)
}

#[derive(Clone, Debug)]
pub struct Recorded {
    pub headers: HeaderMap,
    pub body: Value,
}

#[derive(Clone)]
struct Fake {
    script: Arc<Mutex<VecDeque<Reply>>>,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

pub struct FakeLlm {
    /// Base URL to configure (`.../v1` for OpenAI; the root for Anthropic).
    pub url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl FakeLlm {
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

type Encoder = fn(Reply) -> Response;

async fn start(
    path: &str,
    script: Vec<Reply>,
    encode: Encoder,
) -> (String, Arc<Mutex<Vec<Recorded>>>) {
    let fake = Fake {
        script: Arc::new(Mutex::new(script.into())),
        requests: Arc::default(),
    };
    let requests = fake.requests.clone();
    let router = Router::new()
        .route(
            path,
            post(move |State(fake): State<Fake>, headers: HeaderMap, axum::Json(body): axum::Json<Value>| async move {
                fake.requests.lock().unwrap().push(Recorded { headers, body });
                let reply = fake.script.lock().unwrap().pop_front();
                match reply {
                    Some(Reply::Slow(pause, text)) => {
                        tokio::time::sleep(pause).await;
                        encode(Reply::Text(text))
                    }
                    Some(reply) => encode(reply),
                    None => (StatusCode::BAD_REQUEST, axum::Json(json!({"error": {"message": "the fake ran out of scripted replies"}}))).into_response(),
                }
            }),
        )
        .with_state(fake);
    (spawn_fake(router).await, requests)
}

/// One server-sent event.
fn frame(name: Option<&str>, data: &Value) -> String {
    match name {
        Some(name) => format!("event: {name}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

const DONE: &str = "data: [DONE]\n\n";

fn event_stream(body: Body) -> Response {
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(body)
        .unwrap()
}

/// Events as an SSE stream; `done` appends OpenAI's `[DONE]` marker.
fn sse(events: Vec<(Option<&str>, Value)>, done: bool) -> Response {
    let mut text: String = events
        .iter()
        .map(|(name, data)| frame(*name, data))
        .collect();
    if done {
        text.push_str(DONE);
    }
    // Sent in pieces, as a real stream arrives.
    let chunks: Vec<Result<String, Infallible>> = text
        .as_bytes()
        .chunks(37)
        .map(|c| Ok(String::from_utf8_lossy(c).into_owned()))
        .collect();
    event_stream(Body::from_stream(futures_util::stream::iter(chunks)))
}

fn words(text: &str) -> Vec<String> {
    text.split_inclusive(' ').map(str::to_owned).collect()
}

fn halves(args: &Value) -> [String; 2] {
    let text = args.to_string();
    let (a, b) = text.split_at(text.len() / 2);
    [a.to_owned(), b.to_owned()]
}

fn error_response(status: u16, body: Value) -> Response {
    (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response()
}

fn openai_reply(reply: Reply) -> Response {
    let choice = |delta: Value, finish: Value| json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    let chunk = move |delta: Value| choice(delta, Value::Null);
    let usage = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}});
    let text_events = |text: &str| {
        let mut events = vec![(None, chunk(json!({"role": "assistant", "content": ""})))];
        events.extend(
            words(text)
                .into_iter()
                .map(|w| (None, chunk(json!({"content": w})))),
        );
        events
    };
    match reply {
        Reply::Text(text) => {
            let mut events = text_events(text);
            events.push((None, choice(json!({}), json!("stop"))));
            events.push((None, usage));
            sse(events, true)
        }
        Reply::Cut(text) => sse(text_events(text), false),
        Reply::ByHand(pieces) => {
            let Some(receiver) = pieces.lock().unwrap().take() else {
                return error_response(
                    400,
                    json!({"error": {"message": "a hand-streamed reply answers once"}}),
                );
            };
            let head = frame(None, &chunk(json!({"role": "assistant", "content": ""})));
            let tokens = futures_util::stream::unfold(receiver, move |mut receiver| async move {
                let piece = receiver.recv().await?;
                Some((frame(None, &chunk(json!({"content": piece}))), receiver))
            });
            let tail = [
                frame(None, &choice(json!({}), json!("stop"))),
                frame(None, &usage),
                DONE.to_owned(),
            ];
            let body = futures_util::stream::iter([head])
                .chain(tokens)
                .chain(futures_util::stream::iter(tail))
                .map(Ok::<_, Infallible>);
            event_stream(Body::from_stream(body))
        }
        Reply::Tools(calls) => {
            let mut events = vec![(None, chunk(json!({"role": "assistant", "content": null})))];
            for (index, (id, name, args)) in calls.iter().enumerate() {
                let [first, second] = halves(args);
                events.push((None, chunk(json!({"tool_calls": [{"index": index, "id": id, "type": "function", "function": {"name": name, "arguments": first}}]}))));
                events.push((None, chunk(json!({"tool_calls": [{"index": index, "function": {"arguments": second}}]}))));
            }
            events.push((None, choice(json!({}), json!("tool_calls"))));
            events.push((None, usage));
            sse(events, true)
        }
        Reply::Status(status, body) => error_response(status, body),
        Reply::Garbage => event_stream(Body::from("data: {not json\n\n")),
        Reply::Slow(..) => unreachable!("handled before encoding"),
    }
}

fn anthropic_reply(reply: Reply) -> Response {
    let start = (
        Some("message_start"),
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": 13, "output_tokens": 1}}}),
    );
    let end = |reason: &str| {
        vec![
            (
                Some("message_delta"),
                json!({"type": "message_delta", "delta": {"stop_reason": reason}, "usage": {"output_tokens": 6}}),
            ),
            (Some("message_stop"), json!({"type": "message_stop"})),
        ]
    };
    let text_events = |text: &str| {
        let mut events = vec![
            start.clone(),
            (
                Some("content_block_start"),
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ),
        ];
        events.push((Some("ping"), json!({"type": "ping"})));
        events.extend(words(text).into_iter().map(|w| (Some("content_block_delta"), json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}}))));
        events
    };
    match reply {
        Reply::Cut(text) => sse(text_events(text), false),
        Reply::Text(text) => {
            let mut events = text_events(text);
            events.push((
                Some("content_block_stop"),
                json!({"type": "content_block_stop", "index": 0}),
            ));
            events.extend(end("end_turn"));
            sse(events, false)
        }
        Reply::Tools(calls) => {
            let mut events = vec![start];
            for (index, (id, name, args)) in calls.iter().enumerate() {
                events.push((Some("content_block_start"), json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}})));
                for part in halves(args) {
                    events.push((Some("content_block_delta"), json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": part}})));
                }
                events.push((
                    Some("content_block_stop"),
                    json!({"type": "content_block_stop", "index": index}),
                ));
            }
            events.extend(end("tool_use"));
            sse(events, false)
        }
        Reply::Status(status, body) => error_response(status, body),
        Reply::Garbage => event_stream(Body::from("event: message_start\ndata: {not json\n\n")),
        Reply::ByHand(_) => unreachable!("hand-streamed replies speak the OpenAI protocol"),
        Reply::Slow(..) => unreachable!("handled before encoding"),
    }
}

pub async fn openai(script: Vec<Reply>) -> FakeLlm {
    let (url, requests) = start("/v1/chat/completions", script, openai_reply).await;
    FakeLlm {
        url: format!("{url}/v1"),
        requests,
    }
}

pub async fn anthropic(script: Vec<Reply>) -> FakeLlm {
    let (url, requests) = start("/v1/messages", script, anthropic_reply).await;
    FakeLlm { url, requests }
}
