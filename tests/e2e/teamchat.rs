//! The bundled teamchat adapter through the real binary, against a fake of the platform's Web
//! API (real HTTP, recording `chat.postMessage`): the handshake, signatures and replay window,
//! mentions in threads and DMs, retries run once, failed posts, slash commands, missing
//! secrets and a component that failed to load.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use hmac::{Hmac, Mac};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::fakes::llm::{self, Reply};
use crate::support::{Server, assert_error, eventually, json_of, openai_env, spawn_fake};

const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const BOT_TOKEN: &str = "xoxb-test-token";

/// A posted message: the bearer token it came with and its JSON body.
type Posted = (String, Value);

/// The platform's Web API: `chat.postMessage` answers with `answer` and records the call.
struct FakeApi {
    base: String,
    posted: Arc<Mutex<Vec<Posted>>>,
}

impl FakeApi {
    async fn start(answer: Value) -> Self {
        let posted: Arc<Mutex<Vec<Posted>>> = Arc::default();
        let router = axum::Router::new()
            .route(
                "/api/chat.postMessage",
                post(
                    async |State((posted, answer)): State<(Arc<Mutex<Vec<Posted>>>, Value)>,
                           headers: HeaderMap,
                           Json(body): Json<Value>| {
                        let auth = headers["authorization"].to_str().unwrap().to_owned();
                        posted.lock().unwrap().push((auth, body));
                        Json(answer)
                    },
                ),
            )
            .with_state((Arc::clone(&posted), answer));
        Self {
            base: format!("{}/api", spawn_fake(router).await),
            posted,
        }
    }

    fn posted(&self) -> Vec<Posted> {
        self.posted.lock().unwrap().clone()
    }

    /// The settings of a configured teamchat adapter talking to this fake.
    fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("SERVICE_TEAMCHAT_SIGNING_SECRET", SIGNING_SECRET.into()),
            ("SERVICE_TEAMCHAT_BOT_TOKEN", BOT_TOKEN.into()),
            ("SERVICE_TEAMCHAT_API_BASE", self.base.clone()),
        ]
    }
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// `v0=<hex>`: HMAC-SHA256 over `v0:<timestamp>:<body>`, as the platform signs.
fn signature(secret: &str, timestamp: &str, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("v0:{timestamp}:{body}").as_bytes());
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}

/// Posts `body` to a teamchat route with the given timestamp and signature headers.
async fn send_raw(
    server: &Server,
    route: &str,
    body: &str,
    timestamp: Option<&str>,
    signature: Option<&str>,
) -> (StatusCode, Value) {
    let content_type = if route == "commands" {
        "application/x-www-form-urlencoded"
    } else {
        "application/json"
    };
    let mut request = reqwest::Client::new()
        .post(server.url(&format!("/api/adapters/teamchat/{route}")))
        .header("content-type", content_type)
        .body(body.to_owned());
    if let Some(timestamp) = timestamp {
        request = request.header("x-slack-request-timestamp", timestamp);
    }
    if let Some(signature) = signature {
        request = request.header("x-slack-signature", signature);
    }
    json_of(request.send().await.unwrap()).await
}

/// A correctly signed, fresh request.
async fn signed(server: &Server, route: &str, body: &str) -> (StatusCode, Value) {
    let timestamp = now().to_string();
    let signature = signature(SIGNING_SECRET, &timestamp, body);
    send_raw(server, route, body, Some(&timestamp), Some(&signature)).await
}

fn callback(event_id: &str, event: Value) -> String {
    json!({
        "token": "unused-verification-token",
        "team_id": "T1",
        "api_app_id": "A1",
        "type": "event_callback",
        "event_id": event_id,
        "event_time": now(),
        "authorizations": [{"enterprise_id": null, "team_id": "T1", "user_id": "UBOT", "is_bot": true, "is_enterprise_install": false}],
        "event": event,
    })
    .to_string()
}

fn mention(text: &str, thread_ts: Option<&str>) -> Value {
    let mut event = json!({
        "type": "app_mention",
        "user": "U1",
        "text": text,
        "ts": "1700000001.000200",
        "channel": "C1",
    });
    if let Some(thread_ts) = thread_ts {
        event["thread_ts"] = json!(thread_ts);
    }
    event
}

async fn posts(api: &FakeApi, count: usize) -> Vec<Posted> {
    eventually(20, async || {
        let posted = api.posted();
        (posted.len() >= count).then_some(posted)
    })
    .await
}

/// The tasks whose trace came from teamchat, with those traces.
async fn runs(server: &Server) -> Vec<(Value, Value)> {
    let (_, tasks) = server.get("/api/tasks").await;
    let mut out = Vec::new();
    for task in tasks["tasks"].as_array().unwrap() {
        if let Some(trace_id) = task["trace_id"].as_str() {
            let (_, trace) = server.get(&format!("/api/traces/{trace_id}")).await;
            if trace["source"] == "teamchat" {
                out.push((task.clone(), trace));
            }
        }
    }
    out
}

#[tokio::test]
async fn handshake_signatures_and_replay_window() {
    let api = FakeApi::start(json!({"ok": true})).await;
    let server = Server::start_with_owned(&api.env());
    let entry = server.adapter("teamchat").await.unwrap();
    assert_eq!(entry["status"], "running", "{entry}");
    assert_eq!(entry["kind"], "wasm");
    assert!(entry["metadata"]["auth"].as_str().unwrap().contains("v0"));

    let handshake = json!({"token": "t", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "type": "url_verification"}).to_string();
    let (status, body) = signed(&server, "events", &handshake).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body["challenge"],
        "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
    );

    // Correctly signed but too old, or too far in the future: replay protection.
    for skew in [-301, 301] {
        let timestamp = (now() + skew).to_string();
        let sig = signature(SIGNING_SECRET, &timestamp, &handshake);
        let (status, body) =
            send_raw(&server, "events", &handshake, Some(&timestamp), Some(&sig)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{skew}: {body}");
        assert!(body["error"].as_str().unwrap().contains("300 s"));
    }
    let timestamp = now().to_string();
    let wrong = signature("another-secret", &timestamp, &handshake);
    let rejected = [
        (Some("yesterday"), Some(wrong.as_str())),
        (Some(timestamp.as_str()), Some(wrong.as_str())),
        (Some(timestamp.as_str()), None),
        (Some(timestamp.as_str()), Some("v1=00")),
        (None, Some(wrong.as_str())),
    ];
    for route in ["events", "commands"] {
        for (timestamp, sig) in rejected {
            let (status, body) = send_raw(&server, route, &handshake, timestamp, sig).await;
            assert_eq!(
                status,
                StatusCode::UNAUTHORIZED,
                "{route} {timestamp:?} {sig:?}: {body}"
            );
        }
    }
    // A tampered body no longer matches its signature.
    let sig = signature(SIGNING_SECRET, &timestamp, &handshake);
    let tampered = handshake.replace("3eZ", "XXX");
    let (status, _) = send_raw(&server, "events", &tampered, Some(&timestamp), Some(&sig)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // Authentic but malformed.
    let (status, body) = signed(&server, "events", "{not json").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, _) = signed(&server, "events", r#"{"type":"event_callback"}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = signed(&server, "commands", "text=hello").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    assert!(api.posted().is_empty());
    let entry = server.adapter("teamchat").await.unwrap();
    assert_eq!(
        entry["status"], "running",
        "rejections are not adapter errors"
    );
    assert!(entry["last_activity_at"].is_string());
}

#[tokio::test]
async fn mentions_in_threads_and_direct_messages_get_replies() {
    let api = FakeApi::start(json!({"ok": true, "ts": "1700000002.000300"})).await;
    let server = Server::start_with_owned(&api.env());

    let in_thread = callback(
        "Ev001",
        mention("<@UBOT> <@U2> what is the plan?", Some("1700000000.000100")),
    );
    let started = Instant::now();
    let (status, body) = signed(&server, "events", &in_thread).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["outcome"], "queued");
    let posted = posts(&api, 1).await;
    let (auth, message) = &posted[0];
    assert_eq!(auth, &format!("Bearer {BOT_TOKEN}"));
    assert_eq!(message["channel"], "C1");
    assert_eq!(message["thread_ts"], "1700000000.000100");
    // The offline responder quotes its prompt: the bot's mention is gone, the other stays.
    let text = message["text"].as_str().unwrap();
    assert!(
        text.contains("You said: \"<@U2> what is the plan?\""),
        "{text}"
    );
    println!("mention answered in {:?}", started.elapsed());

    let dm = callback(
        "Ev002",
        json!({"type": "message", "channel_type": "im", "channel": "D42", "user": "U1", "text": "hello in private", "ts": "1700000003.000100"}),
    );
    assert_eq!(signed(&server, "events", &dm).await.0, StatusCode::OK);
    let posted = posts(&api, 2).await;
    let (_, message) = &posted[1];
    assert_eq!(message["channel"], "D42");
    assert!(message.get("thread_ts").is_none(), "{message}");
    assert!(
        message["text"]
            .as_str()
            .unwrap()
            .contains("hello in private")
    );

    // Bots (itself included), edits and channel chatter are not prompts.
    let ignored = [
        json!({"type": "app_mention", "bot_id": "B1", "channel": "C1", "text": "<@UBOT> loop?", "ts": "1"}),
        json!({"type": "message", "subtype": "bot_message", "channel_type": "im", "channel": "D42", "text": "me", "ts": "2"}),
        json!({"type": "message", "subtype": "message_changed", "channel_type": "im", "channel": "D42", "text": "edit", "ts": "3"}),
        json!({"type": "message", "channel_type": "channel", "channel": "C1", "text": "chatter", "ts": "4"}),
    ];
    for (i, event) in ignored.into_iter().enumerate() {
        let (status, body) = signed(
            &server,
            "events",
            &callback(&format!("EvIgnored{i}"), event),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        assert!(
            body["outcome"].as_str().unwrap().starts_with("ignored"),
            "{body}"
        );
    }

    // Each reply is a task carrying its run's trace.
    let runs = eventually(20, async || {
        let runs = runs(&server).await;
        (runs.len() == 2 && runs.iter().all(|(task, _)| task["status"] == "completed"))
            .then_some(runs)
    })
    .await;
    assert!(runs.iter().all(|(_, trace)| trace["status"] == "ok"));
    assert_eq!(api.posted().len(), 2, "ignored events post nothing");
    let entry = server.adapter("teamchat").await.unwrap();
    assert!(entry["last_activity_at"].is_string());
    assert_eq!(entry["error_count"], 0, "{entry}");
}

#[tokio::test]
async fn a_retried_event_runs_once_even_across_a_restart() {
    let api = FakeApi::start(json!({"ok": true})).await;
    let server = Server::start_with_owned(&api.env());
    let event = callback("EvRetried", mention("<@UBOT> once please", None));
    let mut outcomes = Vec::new();
    for _ in 0..3 {
        let (status, body) = signed(&server, "events", &event).await;
        assert_eq!(status, StatusCode::OK);
        outcomes.push(body["outcome"].as_str().unwrap().to_owned());
    }
    assert_eq!(outcomes, ["queued", "duplicate", "duplicate"]);
    posts(&api, 1).await;

    let server = server.restart();
    let (status, body) = signed(&server, "events", &event).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["outcome"], "duplicate");
    // A fresh event still runs, so the worker is up: the retried one would have run by then.
    let fresh = callback("EvFresh", mention("<@UBOT> new one", None));
    assert_eq!(
        signed(&server, "events", &fresh).await.1["outcome"],
        "queued"
    );
    let posted = posts(&api, 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(api.posted().len(), 2, "{posted:?}");
    assert_eq!(runs(&server).await.len(), 2);
}

#[tokio::test]
async fn a_failed_post_is_noted_and_the_route_still_answers() {
    let api = FakeApi::start(json!({"ok": false, "error": "not_in_channel"})).await;
    let server = Server::start_with_owned(&api.env());
    let event = callback("EvNoScope", mention("<@UBOT> can you hear me?", None));
    let (status, _) = signed(&server, "events", &event).await;
    assert_eq!(status, StatusCode::OK);
    posts(&api, 1).await;
    let (task, trace) = eventually(20, async || {
        runs(&server)
            .await
            .into_iter()
            .find(|(task, _)| task["status"] == "completed")
    })
    .await;
    let warnings = trace["warnings"].to_string();
    assert!(warnings.contains("reply not delivered"), "{trace}");
    assert!(warnings.contains("not_in_channel"), "{trace}");
    assert!(task["trace_id"].is_string());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(api.posted().len(), 1, "no retry storm");
    assert_eq!(server.get("/api/health").await.0, StatusCode::OK);
    let handshake = r#"{"type":"url_verification","challenge":"still-here"}"#;
    assert_eq!(
        signed(&server, "events", handshake).await.1["challenge"],
        "still-here"
    );
}

#[tokio::test]
async fn the_ack_never_waits_for_a_slow_model() {
    let llm = llm::openai(vec![Reply::Slow(Duration::from_secs(10), "finally")]).await;
    let api = FakeApi::start(json!({"ok": true})).await;
    let mut env = api.env();
    env.extend(openai_env(&llm.url));
    let server = Server::start_with_owned(&env);
    // Warm the route (the component's first instance) before timing it.
    signed(
        &server,
        "events",
        r#"{"type":"url_verification","challenge":"warm"}"#,
    )
    .await;

    let event = callback("EvSlow", mention("<@UBOT> take your time", None));
    let started = Instant::now();
    let (status, body) = signed(&server, "events", &event).await;
    let elapsed = started.elapsed();
    assert_eq!(
        (status, body["outcome"].as_str()),
        (StatusCode::OK, Some("queued"))
    );
    assert!(elapsed < Duration::from_millis(100), "ack took {elapsed:?}");
    // The model is still thinking; its reply arrives later.
    eventually(10, async || (!llm.requests().is_empty()).then_some(())).await;
    assert!(api.posted().is_empty());
    let posted = posts(&api, 1).await;
    assert_eq!(posted[0].1["text"], "finally");
}

#[tokio::test]
async fn slash_commands_answer_inline() {
    let api = FakeApi::start(json!({"ok": true})).await;
    let server = Server::start_with_owned(&api.env());
    let form = "token=x&team_id=T1&channel_id=C1&user_id=U1&command=%2Fask&text=what+is+1%2B1%3F&response_url=https%3A%2F%2Fhooks.example%2Fx";
    let (status, body) = signed(&server, "commands", form).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["response_type"], "in_channel");
    assert!(
        body["text"]
            .as_str()
            .unwrap()
            .contains("You said: \"what is 1+1?\""),
        "{body}"
    );

    let (status, body) = signed(&server, "commands", "command=%2Fask&text=++&user_id=U1").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["response_type"], "ephemeral");
    assert!(body["text"].as_str().unwrap().contains("Usage: /ask"));

    let runs = runs(&server).await;
    assert_eq!(runs.len(), 1, "the usage hint runs no agent");
    assert_eq!(runs[0].0["status"], "completed");
    assert!(
        api.posted().is_empty(),
        "commands answer inline, not by post"
    );
}

#[tokio::test]
async fn missing_secrets_are_registry_errors() {
    let server = Server::start();
    let entry = server.adapter("teamchat").await.unwrap();
    assert_eq!(entry["status"], "error");
    let message = entry["error_message"].as_str().unwrap();
    assert!(
        message.contains("SERVICE_TEAMCHAT_SIGNING_SECRET is not set"),
        "{message}"
    );
    assert!(message.contains("SERVICE_TEAMCHAT_BOT_TOKEN"), "{message}");

    let handshake = r#"{"type":"url_verification","challenge":"c"}"#;
    for route in ["events", "commands"] {
        let answer = signed(&server, route, handshake).await;
        assert_error(
            &answer,
            StatusCode::SERVICE_UNAVAILABLE,
            "signing secret is not set",
        );
    }
    let entry = server.adapter("teamchat").await.unwrap();
    assert_eq!(entry["status"], "error");
    assert!(
        entry["error_message"]
            .as_str()
            .unwrap()
            .contains("signing secret is not set")
    );

    // Only the bot token missing: requests are served, the entry names the token.
    let server = Server::start_with(&[("SERVICE_TEAMCHAT_SIGNING_SECRET", SIGNING_SECRET)]);
    let entry = server.adapter("teamchat").await.unwrap();
    assert_eq!(entry["status"], "error");
    let message = entry["error_message"].as_str().unwrap();
    assert!(
        message.contains("SERVICE_TEAMCHAT_BOT_TOKEN is not set"),
        "{message}"
    );
    assert!(!message.contains("SIGNING_SECRET"), "{message}");
    assert_eq!(
        signed(&server, "events", handshake).await.1["challenge"],
        "c"
    );
}

#[tokio::test]
async fn a_teamchat_component_that_fails_to_load_is_not_installed() {
    let api = FakeApi::start(json!({"ok": true})).await;
    let tmp = tempfile::tempdir().unwrap();
    let adapters = tmp.path().join("data/adapters");
    std::fs::create_dir_all(&adapters).unwrap();
    // A truncated component overrides the bundled one, and fails.
    std::fs::write(adapters.join("teamchat.wasm"), b"\0asm\x0d\0\x01\0").unwrap();
    let server = Server::start_in(&tmp.path().join("data"), &api.env());
    let entry = server.adapter("teamchat").await.unwrap();
    assert_eq!(entry["status"], "error", "{entry}");
    for route in ["events", "commands"] {
        let answer = signed(&server, route, "{}").await;
        assert_error(
            &answer,
            StatusCode::SERVICE_UNAVAILABLE,
            "the teamchat adapter is not installed",
        );
    }
    assert_eq!(server.adapter("webhook").await.unwrap()["kind"], "wasm");

    // Removing the broken file brings the bundled component back.
    std::fs::remove_file(adapters.join("teamchat.wasm")).unwrap();
    let handshake = r#"{"type":"url_verification","challenge":"back"}"#;
    let body = eventually(20, async || {
        let (status, body) = signed(&server, "events", handshake).await;
        (status == StatusCode::OK).then_some(body)
    })
    .await;
    assert_eq!(body["challenge"], "back");
    drop(tmp);
}

#[tokio::test]
async fn the_configured_profile_answers_and_a_missing_one_falls_back_to_the_defaults() {
    let llm = llm::openai(vec![
        Reply::Text("as the concierge"),
        Reply::Text("as the default"),
    ])
    .await;
    let api = FakeApi::start(json!({"ok": true})).await;
    let mut env = api.env();
    env.extend(openai_env(&llm.url));
    env.push(("SERVICE_TEAMCHAT_AGENT_PROFILE", "Concierge".into()));
    let server = Server::start_with_owned(&env);
    let concierge = json!({"name": "Concierge", "system_prompt": "You are the concierge."});
    assert_eq!(
        server.post("/api/agents", concierge).await.0,
        StatusCode::CREATED
    );
    let event = callback("EvProfile", mention("<@UBOT> where is lunch?", None));
    assert_eq!(signed(&server, "events", &event).await.0, StatusCode::OK);
    assert_eq!(posts(&api, 1).await[0].1["text"], "as the concierge");
    assert_eq!(
        llm.requests()[0].body["messages"][0],
        json!({"role": "system", "content": "You are the concierge."})
    );

    // A profile name that matches nothing (names are exact) runs with the server's defaults.
    env.pop();
    env.push(("SERVICE_TEAMCHAT_AGENT_PROFILE", "concierge".into()));
    let server = Server::start_with_owned(&env);
    let event = callback("EvFallback", mention("<@UBOT> where is lunch?", None));
    assert_eq!(signed(&server, "events", &event).await.0, StatusCode::OK);
    assert_eq!(posts(&api, 2).await[1].1["text"], "as the default");
    let first = &llm.requests()[1].body["messages"][0];
    assert_eq!(first["role"], "user", "no system prompt: {first}");
    let (_, trace) = eventually(20, async || {
        runs(&server)
            .await
            .into_iter()
            .find(|(_, trace)| trace["status"] != "running")
    })
    .await;
    assert_eq!(
        (trace["status"].as_str(), &trace["agent_profile_name"]),
        (Some("ok"), &Value::Null)
    );
}
