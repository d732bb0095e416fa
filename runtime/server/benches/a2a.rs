//! `cargo bench -p service-runtime --bench a2a`
//!
//! What asking an agent over A2A costs against asking it through the API: the release binary
//! on SQLite with the offline model (so the run itself is cheap and the protocol's overhead
//! shows), one keep-alive client, one request at a time: `POST /api/chat` against a blocking
//! `SendMessage` to `/a2a/default`. Three rounds of 100 requests each way, alternating; the
//! medians of all. Target: A2A at most 1.2x chat's.

#[allow(dead_code)]
#[path = "../../../tests/shared/stats.rs"]
mod stats;
use stats::{median, ms, verdict};

use std::time::{Duration, Instant};

use serde_json::{Value, json};

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
const ROUNDS: usize = 3;
const REQUESTS: usize = 100;
const TARGET_RATIO: f64 = 1.2;

/// POSTs `body` to `url`: the answer, and how long it took.
async fn post(client: &reqwest::Client, url: String, body: Value) -> (Value, Duration) {
    let started = Instant::now();
    let response = client.post(url).json(&body).send().await.unwrap();
    let answer = response.json().await.unwrap();
    (answer, started.elapsed())
}

async fn through_chat(client: &reqwest::Client, url: &str) -> Duration {
    let body = json!({"prompt": "hello"});
    let (answer, took) = post(client, format!("{url}/api/chat"), body).await;
    assert!(answer["text"].is_string(), "{answer}");
    took
}

async fn through_a2a(client: &reqwest::Client, url: &str, n: usize) -> Duration {
    let message = json!({"messageId": format!("m{n}"), "role": "ROLE_USER",
        "parts": [{"text": "hello"}]});
    let body = json!({"jsonrpc": "2.0", "id": n, "method": "SendMessage",
        "params": {"message": message}});
    let (answer, took) = post(client, format!("{url}/a2a/default"), body).await;
    let state = &answer["result"]["task"]["status"]["state"];
    assert_eq!(state, "TASK_STATE_COMPLETED", "{answer}");
    took
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let server = served::Served::start(BIN, &[]);
    let url = server.url.clone();
    let client = reqwest::Client::new();
    let (mut chat, mut a2a) = (Vec::new(), Vec::new());
    runtime.block_on(async {
        // Warm-up: the connection, the database's pages.
        for n in 0..10 {
            through_chat(&client, &url).await;
            through_a2a(&client, &url, n).await;
        }
        for _ in 0..ROUNDS {
            for _ in 0..REQUESTS {
                chat.push(through_chat(&client, &url).await);
            }
            for n in 0..REQUESTS {
                a2a.push(through_a2a(&client, &url, n).await);
            }
        }
    });
    let (chat, a2a) = (median(chat), median(a2a));
    let ratio = a2a.as_secs_f64() / chat.as_secs_f64();
    println!(
        "offline model, one request at a time, {} each way (medians):",
        ROUNDS * REQUESTS
    );
    println!("  POST /api/chat             {:.2} ms", ms(chat));
    println!("  SendMessage /a2a/default   {:.2} ms", ms(a2a));
    println!(
        "  ratio {ratio:.2}x (target at most {TARGET_RATIO}x): {}",
        verdict(ratio <= TARGET_RATIO)
    );
}
