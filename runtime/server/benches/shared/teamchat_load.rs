//! The teamchat delivery benches' common parts (`teamchat_delivery`, `replicas`): the real
//! binary as a child process, a fake of the platform's Web API that counts the replies per
//! mention, a fake OpenAI-compatible model with a fixed answer time and a cap on calls at once,
//! and signed mentions sent at a steady rate with their ack latencies.

use crate::stats::ms;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
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

// The tests' way of starting the binary (and of running its commands).
#[path = "../../../../tests/shared/serve.rs"]
pub mod serve;
// The one way tests and benches wait (each bench uses a part of it).
#[allow(dead_code)]
#[path = "../../../../tests/shared/wait.rs"]
pub mod wait;

pub const BIN: &str = env!("CARGO_BIN_EXE_service-runtime");
pub const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
/// The ack latency p99 must stay under.
pub const ACK_TARGET: Duration = Duration::from_millis(5);

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

async fn serve(router: axum::Router, host: IpAddr) -> String {
    let listener = tokio::net::TcpListener::bind((host, 0)).await.unwrap();
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

/// A prompt with this makes the model call `create_note` (titled `note #<n>`, `n` the prompt's
/// number), a tool a person approves where `[tools.create_note] approval = true`.
pub const ASK_FOR_A_NOTE: &str = "note it";

/// A model that answers every prompt after `time`, `at_once` calls at a time, streaming as the
/// OpenAI API does; a prompt that asks for a note gets the tool call first.
pub struct FakeModel {
    pub url: String,
    pub peak: Arc<AtomicUsize>,
}

impl FakeModel {
    pub async fn start(time: Duration, at_once: usize, host: IpAddr) -> Self {
        let slots = Arc::new(Semaphore::new(at_once));
        let in_flight = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let state = (slots, in_flight, Arc::clone(&peak), time);
        let router = axum::Router::new()
            .route("/v1/chat/completions", post(complete))
            .with_state(state);
        Self {
            url: format!("{}/v1", serve(router, host).await),
            peak,
        }
    }
}

type ModelState = (Arc<Semaphore>, Arc<AtomicUsize>, Arc<AtomicUsize>, Duration);

async fn complete(
    State((slots, in_flight, peak, time)): State<ModelState>,
    Json(request): Json<Value>,
) -> Response {
    let _slot = slots.acquire().await.unwrap();
    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    peak.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(time).await;
    in_flight.fetch_sub(1, Ordering::SeqCst);
    let last = request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or_default();
    let prompt = last["content"].as_str().unwrap_or_default();
    let chunk = |delta: Value, finish: Value| json!({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    let events = if last["role"] == "user" && prompt.contains(ASK_FOR_A_NOTE) {
        let title = format!("note #{}", tag(prompt).unwrap_or_default());
        let call = json!({"index": 0, "id": "c1", "type": "function", "function": {"name": "create_note", "arguments": json!({"title": title}).to_string()}});
        [
            chunk(
                json!({"role": "assistant", "content": null, "tool_calls": [call]}),
                Value::Null,
            ),
            chunk(json!({}), json!("tool_calls")),
        ]
    } else {
        let text = match tag(prompt) {
            Some(n) => format!("the answer to mention #{n}"),
            None => "an answer".to_owned(),
        };
        [
            chunk(json!({"role": "assistant", "content": text}), Value::Null),
            chunk(json!({}), json!("stop")),
        ]
    };
    let mut body: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from(body))
        .unwrap()
}

/// The Web API's `chat.postMessage`: replies counted per mention, and when the last came.
#[derive(Clone, Default)]
pub struct Replies(Arc<Mutex<Seen>>);

#[derive(Default)]
struct Seen {
    per_mention: HashMap<usize, usize>,
    last_at: Option<Instant>,
}

impl Replies {
    pub async fn start(&self, host: IpAddr) -> String {
        let router = axum::Router::new()
            .route("/api/chat.postMessage", post(post_message))
            .with_state(self.clone());
        format!("{}/api", serve(router, host).await)
    }

    pub fn counts(&self) -> HashMap<usize, usize> {
        self.0.lock().unwrap().per_mention.clone()
    }

    pub fn last_at(&self) -> Option<Instant> {
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
pub struct Server {
    child: Child,
    pub url: String,
}

impl Server {
    pub fn start(data_dir: &Path, env: &[(String, String)]) -> Self {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(data_dir.join("server.log"))
            .unwrap();
        let mut serve = serve::clean_command(BIN, data_dir, "warn");
        serve.envs(env.iter().map(|(k, v)| (k, v))).stderr(log);
        let (child, url) = serve::spawn_serving(serve, data_dir);
        let url = url.unwrap_or_else(|line| panic!("the server did not start: {line:?}"));
        serve::wait_until_ready(&url, data_dir, Duration::from_secs(120));
        serve::wait_until_optimized(&url, data_dir, Duration::from_secs(120));
        Self { child, url }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGTERM, then waits for the drain and the exit.
    pub fn terminate(mut self) {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the server exited with {status}");
    }

    /// How many of the adapter's jobs wait or run.
    pub async fn unfinished_jobs(&self, client: &reqwest::Client) -> u64 {
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
pub struct Acks {
    pub acked: Vec<bool>,
    pub latencies: Vec<Duration>,
    resent: Vec<Duration>,
    /// What the sends that were not acknowledged got, and how often.
    refused: HashMap<String, usize>,
    /// Acks past the target and their mentions, to tell a lone outlier from a pattern.
    slow: Vec<(usize, Duration)>,
}

pub fn quantile(samples: &[Duration], q: f64) -> Duration {
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

    pub fn all(&self) -> Vec<Duration> {
        [self.latencies.as_slice(), &self.resent].concat()
    }

    pub fn p99(&self) -> Duration {
        quantile(&self.all(), 0.99)
    }

    /// p50 / p99 / max of the burst's acks, and of the re-sent ones.
    pub fn breakdown(&self) -> String {
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

/// Where mentions go: the servers listening at the moment, taken in turn, as a load balancer
/// would (none while the only one is down: the mention is not acknowledged).
pub type Targets = Arc<RwLock<Vec<String>>>;

pub fn targets(urls: &[&str]) -> Targets {
    Arc::new(RwLock::new(urls.iter().map(|u| (*u).to_owned()).collect()))
}

/// Sends mentions `0..count` at `per_sec`, each to the next of `targets`.
pub async fn burst(
    client: &reqwest::Client,
    targets: &Targets,
    count: usize,
    per_sec: u64,
) -> Acks {
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / per_sec));
    let mut sent = Vec::new();
    for n in 0..count {
        tick.tick().await;
        let base = {
            let urls = targets.read().unwrap();
            (!urls.is_empty()).then(|| urls[n % urls.len()].clone())
        };
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
pub async fn resend_unacknowledged(client: &reqwest::Client, base: &str, acks: &mut Acks) {
    for n in 0..acks.acked.len() {
        if !acks.acked[n] {
            let sent = send(client, base, n, true).await;
            acks.record(n, sent, true);
        }
    }
}

/// The fakes, and the settings that point a server at them.
pub struct Fakes {
    pub replies: Replies,
    pub model: FakeModel,
    pub env: Vec<(String, String)>,
}

impl Fakes {
    pub async fn start(model_time: Duration, model_calls_at_once: usize) -> Self {
        let loopback = IpAddr::V4(Ipv4Addr::LOCALHOST);
        Self::start_on(loopback, model_time, model_calls_at_once).await
    }

    /// The fakes listening on `host` (the address the servers reach this process at).
    pub async fn start_on(host: IpAddr, model_time: Duration, model_calls_at_once: usize) -> Self {
        let replies = Replies::default();
        let api = replies.start(host).await;
        let model = FakeModel::start(model_time, model_calls_at_once, host).await;
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
            replies,
            model,
            env,
        }
    }
}

/// A data directory `name` under `root` whose config.toml says `config`.
pub fn data_dir(root: &Path, name: &str, config: &str) -> PathBuf {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), config).unwrap();
    dir
}
