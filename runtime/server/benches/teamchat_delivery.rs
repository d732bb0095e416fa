//! `cargo bench -p service-runtime --bench teamchat_delivery`
//!
//! Every acknowledged mention gets its reply, once, through the real binary: the server runs as
//! a child process on a data directory in a temporary folder whose config.toml sets
//! `[jobs] workers = 64`, against a fake of the platform's Web API (it counts the replies per
//! mention) and a fake OpenAI-compatible model that answers after 10 s, at most 64 calls at
//! once (further calls wait their turn). Three runs, each on a fresh server:
//!
//! 1. kill -9 mid-burst: 100 mentions at 5 per second; 15 s in (the first replies posted,
//!    others being written, a quarter not yet sent) the server is killed and started again on
//!    the same data directory. Mentions it did not acknowledge are sent again once it is back,
//!    as the platform retries them. Target: 100 of 100 replied, 0 duplicates.
//! 2. SIGTERM mid-burst: the same, but the server drains (replies being written finish within
//!    the grace period) and exits before it is started again.
//! 3. Throughput: 1,000 mentions at 100 per second; the time until the last reply against the
//!    ideal 1,000 x 10 s / 64 = 156 s. Target: within 1.5x.
//!
//! For each run, the ack latency (signed request to 200) at the client. Target: p99 < 5 ms.
//! An argument (`kill`, `sigterm`, `throughput`) runs only the runs whose name contains it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use tokio::sync::Semaphore;

// The tests' way of starting the binary.
#[path = "../../../tests/shared/serve.rs"]
mod serve;

const BIN: &str = env!("CARGO_BIN_EXE_service-runtime");
const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const MODEL_TIME: Duration = Duration::from_secs(10);
const MODEL_CALLS_AT_ONCE: usize = 64;
const WORKERS: usize = 64;
/// The ack latency p99 must stay under.
const ACK_TARGET: Duration = Duration::from_millis(5);

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}")
}

/// The number a prompt or a reply carries (`#17`): which mention it belongs to.
fn tag(text: &str) -> Option<usize> {
    let digits: String = text
        .split('#')
        .nth(1)?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// A model that answers every prompt after `MODEL_TIME`, `MODEL_CALLS_AT_ONCE` at a time,
/// streaming as the OpenAI API does.
struct FakeModel {
    url: String,
    peak: Arc<AtomicUsize>,
}

impl FakeModel {
    async fn start() -> Self {
        let slots = Arc::new(Semaphore::new(MODEL_CALLS_AT_ONCE));
        let in_flight = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let state = (slots, in_flight, Arc::clone(&peak));
        let router = axum::Router::new()
            .route("/v1/chat/completions", post(complete))
            .with_state(state);
        Self {
            url: format!("{}/v1", serve(router).await),
            peak,
        }
    }
}

type ModelState = (Arc<Semaphore>, Arc<AtomicUsize>, Arc<AtomicUsize>);

async fn complete(
    State((slots, in_flight, peak)): State<ModelState>,
    Json(request): Json<Value>,
) -> Response {
    let _slot = slots.acquire().await.unwrap();
    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    peak.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(MODEL_TIME).await;
    in_flight.fetch_sub(1, Ordering::SeqCst);
    let prompt = request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    let text = match tag(prompt) {
        Some(n) => format!("the answer to mention #{n}"),
        None => "an answer".to_owned(),
    };
    let chunk = |delta: Value, finish: Value| json!({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    let events = [
        chunk(json!({"role": "assistant", "content": text}), Value::Null),
        chunk(json!({}), json!("stop")),
    ];
    let mut body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from(body))
        .unwrap()
}

/// The Web API's `chat.postMessage`: replies counted per mention, and when the last came.
#[derive(Clone, Default)]
struct Replies(Arc<Mutex<Seen>>);

#[derive(Default)]
struct Seen {
    per_mention: HashMap<usize, usize>,
    last_at: Option<Instant>,
}

impl Replies {
    async fn start(&self) -> String {
        let router = axum::Router::new()
            .route("/api/chat.postMessage", post(post_message))
            .with_state(self.clone());
        format!("{}/api", serve(router).await)
    }

    fn counts(&self) -> HashMap<usize, usize> {
        self.0.lock().unwrap().per_mention.clone()
    }

    fn last_at(&self) -> Option<Instant> {
        self.0.lock().unwrap().last_at
    }
}

async fn post_message(State(replies): State<Replies>, Json(body): Json<Value>) -> Json<Value> {
    let mut seen = replies.0.lock().unwrap();
    if let Some(n) = body["text"].as_str().and_then(tag) {
        *seen.per_mention.entry(n).or_default() += 1;
    }
    seen.last_at = Some(Instant::now());
    Json(json!({"ok": true, "ts": "1700000000.000100"}))
}

/// The server as a child process on its own data directory.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(data_dir: &Path, env: &[(String, String)]) -> Self {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(data_dir.join("server.log"))
            .unwrap();
        let mut serve = serve::clean_command(BIN, data_dir, "warn");
        serve.envs(env.iter().map(|(k, v)| (k, v))).stderr(log);
        let (child, url) = serve::spawn_serving(serve, data_dir);
        let url = url.unwrap_or_else(|line| panic!("the server did not start: {line:?}"));
        serve::wait_until_ready(&url, Duration::from_secs(120));
        Self { child, url }
    }

    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGTERM, then waits for the drain and the exit.
    fn terminate(mut self) {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the server exited with {status}");
    }

    /// How many of the adapter's jobs wait or run.
    async fn unfinished_jobs(&self, client: &reqwest::Client) -> u64 {
        let mut unfinished = 0;
        for status in ["pending", "running"] {
            let url = format!("{}/api/tasks?status={status}&limit=1", self.url);
            let answer: Value = client.get(url).send().await.unwrap().json().await.unwrap();
            unfinished += answer["total"].as_u64().unwrap();
        }
        unfinished
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A data directory with `[jobs] workers = 64`, and the settings pointing at the fakes.
struct Setup {
    _tmp: tempfile::TempDir,
    data_dir: PathBuf,
    env: Vec<(String, String)>,
    replies: Replies,
    model: FakeModel,
}

impl Setup {
    async fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let data_dir = tmp.path().join("data");
        std::fs::create_dir_all(&data_dir).unwrap();
        std::fs::write(
            data_dir.join("config.toml"),
            format!("[jobs]\nworkers = {WORKERS}\n"),
        )
        .unwrap();
        let replies = Replies::default();
        let api = replies.start().await;
        let model = FakeModel::start().await;
        let env = [
            ("SERVICE_TEAMCHAT_SIGNING_SECRET", SECRET),
            ("SERVICE_TEAMCHAT_BOT_TOKEN", "xoxb-bench"),
            ("SERVICE_TEAMCHAT_API_BASE", &api),
            ("SERVICE_PROVIDER", "openai"),
            ("SERVICE_OPENAI_BASE_URL", &model.url),
            ("OPENAI_API_KEY", "sk-bench"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .to_vec();
        Self {
            _tmp: tmp,
            data_dir,
            env,
            replies,
            model,
        }
    }

    fn server(&self) -> Server {
        Server::start(&self.data_dir, &self.env)
    }
}

fn mention(n: usize) -> String {
    json!({
        "type": "event_callback",
        "event_id": format!("Ev{n:05}"),
        "authorizations": [{"user_id": "UBOT", "is_bot": true}],
        "event": {"type": "app_mention", "channel": "C1", "user": "U1", "text": format!("<@UBOT> question #{n}"), "ts": format!("1700000000.{n:06}")},
    })
    .to_string()
}

/// Sends mention `n` as the platform does: the ack latency, or what came back instead.
async fn send(
    client: &reqwest::Client,
    base: &str,
    n: usize,
    retry: bool,
) -> Result<Duration, String> {
    let body = mention(n);
    let timestamp = unix_now().to_string();
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET.as_bytes()).unwrap();
    mac.update(format!("v0:{timestamp}:{body}").as_bytes());
    let signature = format!("v0={}", hex::encode(mac.finalize().into_bytes()));
    let mut request = client
        .post(format!("{base}/api/adapters/teamchat/events"))
        .header("content-type", "application/json")
        .header("x-slack-request-timestamp", timestamp)
        .header("x-slack-signature", signature)
        .timeout(Duration::from_secs(3))
        .body(body);
    if retry {
        request = request.header("x-slack-retry-num", "1");
    }
    let started = Instant::now();
    let response = request.send().await.map_err(|e| {
        if e.is_timeout() {
            "no answer within 3 s".to_owned()
        } else {
            "no connection".to_owned()
        }
    })?;
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    let elapsed = started.elapsed();
    if status == 200 {
        return Ok(elapsed);
    }
    let error: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    Err(format!(
        "{status}: {}",
        error["error"].as_str().unwrap_or(&body)
    ))
}

/// Mentions sent and acknowledged, with their ack latencies (in the burst, then re-sent).
#[derive(Default)]
struct Acks {
    acked: Vec<bool>,
    latencies: Vec<Duration>,
    resent: Vec<Duration>,
    /// What the sends that were not acknowledged got, and how often.
    refused: HashMap<String, usize>,
    /// Acks past the target and their mentions, to tell a lone outlier from a pattern.
    slow: Vec<(usize, Duration)>,
}

fn quantile(samples: &[Duration], q: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)]
}

impl Acks {
    fn record(&mut self, n: usize, sent: Result<Duration, String>, resent: bool) {
        self.acked[n] = sent.is_ok();
        if let Ok(latency) = sent
            && latency >= ACK_TARGET
        {
            self.slow.push((n, latency));
        }
        match sent {
            Ok(latency) if resent => self.resent.push(latency),
            Ok(latency) => self.latencies.push(latency),
            Err(what) => *self.refused.entry(what).or_default() += 1,
        }
    }

    fn all(&self) -> Vec<Duration> {
        [self.latencies.as_slice(), &self.resent].concat()
    }

    fn p99(&self) -> Duration {
        quantile(&self.all(), 0.99)
    }

    /// p50 / p99 / max of the burst's acks, and of the re-sent ones.
    fn breakdown(&self) -> String {
        let figures = |samples: &[Duration]| match samples.is_empty() {
            true => "none".to_owned(),
            false => format!(
                "{:.2} / {:.2} / {:.2} ms",
                ms(quantile(samples, 0.5)),
                ms(quantile(samples, 0.99)),
                ms(quantile(samples, 1.0))
            ),
        };
        let slow: Vec<String> = self
            .slow
            .iter()
            .map(|(n, latency)| format!("#{n} {:.1} ms", ms(*latency)))
            .collect();
        format!(
            "p50 / p99 / max: burst {} ({}), re-sent {} ({}); acks of 5 ms or more: [{}]; not acknowledged: {:?}",
            figures(&self.latencies),
            self.latencies.len(),
            figures(&self.resent),
            self.resent.len(),
            slow.join(", "),
            self.refused
        )
    }
}

/// Sends mentions `0..count` at `per_sec`, each to wherever the server listens at that moment
/// (`None` while it is down: the mention is not acknowledged).
async fn burst(
    client: &reqwest::Client,
    url: &Arc<RwLock<Option<String>>>,
    count: usize,
    per_sec: u64,
) -> Acks {
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / per_sec));
    let mut sent = Vec::new();
    for n in 0..count {
        tick.tick().await;
        let base = url.read().unwrap().clone();
        let client = client.clone();
        sent.push(tokio::spawn(async move {
            match base {
                Some(base) => send(&client, &base, n, false).await,
                None => Err("the server is down".to_owned()),
            }
        }));
    }
    let mut acks = Acks {
        acked: vec![false; count],
        ..Acks::default()
    };
    for (n, request) in sent.into_iter().enumerate() {
        acks.record(n, request.await.unwrap(), false);
    }
    acks
}

/// Sends again what was not acknowledged, as the platform retries.
async fn resend_unacknowledged(client: &reqwest::Client, base: &str, acks: &mut Acks) {
    for n in 0..acks.acked.len() {
        if !acks.acked[n] {
            let sent = send(client, base, n, true).await;
            acks.record(n, sent, true);
        }
    }
}

#[derive(Clone, Copy)]
enum Stop {
    Kill,
    Terminate,
}

/// Runs 1 and 2 (see the top).
async fn mid_burst(stop: Stop) {
    const MENTIONS: usize = 100;
    let setup = Setup::new().await;
    let client = reqwest::Client::new();
    let server = setup.server();
    let url = Arc::new(RwLock::new(Some(server.url.clone())));
    let stopper = {
        let (url, setup_dir, env) = (Arc::clone(&url), setup.data_dir.clone(), setup.env.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(15)).await;
            *url.write().unwrap() = None;
            let back = tokio::task::spawn_blocking(move || {
                match stop {
                    Stop::Kill => server.kill(),
                    Stop::Terminate => server.terminate(),
                }
                Server::start(&setup_dir, &env)
            })
            .await
            .unwrap();
            *url.write().unwrap() = Some(back.url.clone());
            back
        })
    };
    let mut acks = burst(&client, &url, MENTIONS, 5).await;
    let server = stopper.await.unwrap();
    resend_unacknowledged(&client, &server.url, &mut acks).await;
    let acknowledged = acks.acked.iter().filter(|a| **a).count();
    let started = Instant::now();
    while setup.replies.counts().len() < MENTIONS && started.elapsed() < Duration::from_secs(300) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Everything the jobs will ever post is out once none waits or runs.
    while server.unfinished_jobs(&client).await > 0 {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let counts = setup.replies.counts();
    let once = counts.values().filter(|c| **c == 1).count();
    let duplicates: usize = counts.values().map(|c| c.saturating_sub(1)).sum();
    let label = match stop {
        Stop::Kill => "kill -9",
        Stop::Terminate => "SIGTERM",
    };
    println!(
        "{label} 15 s into 100 mentions at 5/s: {acknowledged} of {MENTIONS} acknowledged (after the platform's retries), {once} of {MENTIONS} replied exactly once, {duplicates} duplicates (target 100 of 100, 0: {}); ack p99 {:.2} ms over {} acks (target < 5 ms: {}); {}",
        verdict(once == MENTIONS && duplicates == 0),
        ms(acks.p99()),
        acks.all().len(),
        verdict(acks.p99() < ACK_TARGET),
        acks.breakdown(),
    );
}

/// Run 3 (see the top).
async fn throughput() {
    const MENTIONS: usize = 1_000;
    let setup = Setup::new().await;
    let client = reqwest::Client::new();
    let server = setup.server();
    let url = Arc::new(RwLock::new(Some(server.url.clone())));
    let started = Instant::now();
    let mut acks = burst(&client, &url, MENTIONS, 100).await;
    let first_try = acks.latencies.len();
    resend_unacknowledged(&client, &server.url, &mut acks).await;
    while setup.replies.counts().len() < MENTIONS && started.elapsed() < Duration::from_secs(900) {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let replied = setup.replies.counts().len();
    let last = setup.replies.last_at().unwrap_or(started) - started;
    let ideal = MODEL_TIME.as_secs_f64() * MENTIONS as f64 / MODEL_CALLS_AT_ONCE as f64;
    let ratio = last.as_secs_f64() / ideal;
    let duplicates: usize = setup
        .replies
        .counts()
        .values()
        .map(|c| c.saturating_sub(1))
        .sum();
    println!(
        "1,000 mentions at 100/s, [jobs] workers = {WORKERS}, model 10 s with {MODEL_CALLS_AT_ONCE} calls at once: {first_try} of {MENTIONS} acknowledged at the first try, {replied} replied ({duplicates} duplicates), the last after {:.1} s against the ideal {ideal:.1} s: {ratio:.2}x (target within 1.5x: {}); at most {} model calls at once; ack p99 {:.2} ms (target < 5 ms: {}); {}",
        last.as_secs_f64(),
        verdict(replied == MENTIONS && ratio <= 1.5),
        setup.model.peak.load(Ordering::SeqCst),
        ms(acks.p99()),
        verdict(acks.p99() < ACK_TARGET && first_try == MENTIONS),
        acks.breakdown(),
    );
    drop(server);
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}

/// Every run, or those whose name (`kill`, `sigterm`, `throughput`) contains the argument.
fn main() {
    let only = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let wanted = |name: &str| only.as_deref().is_none_or(|only| name.contains(only));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        if wanted("kill") {
            mid_burst(Stop::Kill).await;
        }
        if wanted("sigterm") {
            mid_burst(Stop::Terminate).await;
        }
        if wanted("throughput") {
            throughput().await;
        }
    });
}
