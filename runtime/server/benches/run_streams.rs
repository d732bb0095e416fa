//! `cargo bench -p service-runtime --bench run_streams`
//!
//! What following a run through `/api/runs/{id}/stream` costs against `/api/chat/stream`: the
//! release binary on SQLite, a local fake of an OpenAI-compatible model that streams 300
//! tokens 1 ms apart (a fast model), one run at a time. Time to first token runs from the
//! first request's start (`POST /api/runs`, then the stream's `GET`; or the chat `POST`) to the
//! first token frame; the stream time from the first token frame to the last frame. Three
//! rounds of 20 runs each way, alternating; medians of all. Target: each at most 1.1x chat's.

#[allow(dead_code)]
#[path = "../../../tests/shared/stats.rs"]
mod stats;
use stats::{median, ms, verdict};

use std::convert::Infallible;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::response::Response;
use futures_util::StreamExt;
use serde_json::json;

// Shared with the tests and other benches, which use the rest of it.
#[allow(dead_code)]
#[path = "../../../tests/shared/serve.rs"]
mod serve;
#[path = "../../../tests/shared/served.rs"]
mod served;
#[allow(dead_code)]
#[path = "../../../tests/shared/wait.rs"]
mod wait;

const BIN: &str = env!("CARGO_BIN_EXE_service-runtime");
const TOKENS: usize = 300;
const TOKEN_EVERY: Duration = Duration::from_millis(1);
const ROUNDS: usize = 3;
const RUNS: usize = 20;
const TARGET_RATIO: f64 = 1.1;

/// An OpenAI-compatible chat completions endpoint streaming `TOKENS` tokens.
async fn fake_model() -> String {
    let answer = || {
        let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
            let chunk = json!({"id": "c", "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
            format!("data: {chunk}\n\n")
        };
        let tokens = futures_util::stream::iter(0..TOKENS).then(move |n| async move {
            tokio::time::sleep(TOKEN_EVERY).await;
            Ok::<_, Infallible>(chunk(json!({"content": format!("t{n} ")}), json!(null)))
        });
        let tail = futures_util::stream::iter([
            Ok(chunk(json!({}), json!("stop"))),
            Ok("data: [DONE]\n\n".to_owned()),
        ]);
        Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from_stream(tokens.chain(tail)))
            .unwrap()
    };
    let router = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move || async move { answer() }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}/v1")
}

/// Reads an event stream to its end: when the first token frame came, and when the last.
async fn follow(response: reqwest::Response, started: Instant) -> (Duration, Duration) {
    assert!(response.status().is_success(), "{}", response.status());
    let mut body = response.bytes_stream();
    let (mut text, mut first, mut tokens) = (String::new(), None, 0);
    while let Some(chunk) = body.next().await {
        text.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
        let found = text.matches("\"type\":\"token\"").count();
        if found > 0 && first.is_none() {
            first = Some(started.elapsed());
        }
        tokens += found;
        // Only whole frames were counted; what follows the last one waits for the next chunk.
        let keep = text.rfind("\n\n").map_or(0, |end| end + 2);
        text.drain(..keep);
    }
    assert_eq!(
        tokens, TOKENS,
        "every token arrived; the stream ended with {text}"
    );
    let first = first.expect("a token frame");
    (first, started.elapsed() - first)
}

async fn through_chat(client: &reqwest::Client, url: &str) -> (Duration, Duration) {
    let started = Instant::now();
    let response = client
        .post(format!("{url}/api/chat/stream"))
        .json(&json!({"prompt": "count"}))
        .send()
        .await
        .unwrap();
    follow(response, started).await
}

async fn through_runs(client: &reqwest::Client, url: &str) -> (Duration, Duration) {
    let started = Instant::now();
    let run: serde_json::Value = client
        .post(format!("{url}/api/runs"))
        .json(&json!({"prompt": "count"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = run["run_id"].as_str().expect("a run id");
    let response = client
        .get(format!("{url}/api/runs/{id}/stream"))
        .send()
        .await
        .unwrap();
    follow(response, started).await
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let model = runtime.block_on(fake_model());
    let server = served::Served::start(
        BIN,
        &[
            ("SERVICE_PROVIDER", "openai"),
            ("SERVICE_OPENAI_BASE_URL", &model),
            ("OPENAI_API_KEY", "sk-bench"),
        ],
    );
    let url = server.url.clone();

    let client = reqwest::Client::new();
    let (mut chat, mut runs) = (Vec::new(), Vec::new());
    runtime.block_on(async {
        // Warm-up: connections, the database's pages, the model's first answer.
        through_chat(&client, &url).await;
        through_runs(&client, &url).await;
        for _ in 0..ROUNDS {
            for _ in 0..RUNS {
                chat.push(through_chat(&client, &url).await);
            }
            for _ in 0..RUNS {
                runs.push(through_runs(&client, &url).await);
            }
        }
    });
    let first = |samples: &[(Duration, Duration)]| median(samples.iter().map(|s| s.0));
    let rest = |samples: &[(Duration, Duration)]| median(samples.iter().map(|s| s.1));
    let ttft = first(&runs).as_secs_f64() / first(&chat).as_secs_f64();
    let stream = rest(&runs).as_secs_f64() / rest(&chat).as_secs_f64();
    let per_second = |d: Duration| TOKENS as f64 / d.as_secs_f64();
    println!(
        "one run at a time, {TOKENS} tokens {} ms apart, {} runs each way (medians):",
        TOKEN_EVERY.as_millis(),
        ROUNDS * RUNS
    );
    println!(
        "  /api/chat/stream          first token {:.2} ms, then {:.1} ms ({:.0} tokens/s)",
        ms(first(&chat)),
        ms(rest(&chat)),
        per_second(rest(&chat))
    );
    println!(
        "  /api/runs + its stream    first token {:.2} ms, then {:.1} ms ({:.0} tokens/s)",
        ms(first(&runs)),
        ms(rest(&runs)),
        per_second(rest(&runs))
    );
    println!(
        "  ratio: first token {ttft:.2}x, stream {stream:.2}x (target at most {TARGET_RATIO}x): {}",
        verdict(ttft <= TARGET_RATIO && stream <= TARGET_RATIO)
    );
}
