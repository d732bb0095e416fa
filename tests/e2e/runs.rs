//! Runs that outlive their client, through `/api/runs` against a fake OpenAI server: 202 at
//! once, the run goes on after its stream's client went away, a client re-joins after the
//! last event it saw and gets the rest once, and cancelling reaches the run.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fakes::llm::{self, Reply};
use crate::fakes::webhook_receiver::{Delivery, Receiver};
use crate::support::{Server, assert_error, eventually, openai_env, tool_available};

/// A signing secret as the Standard Webhooks specification writes them: `whsec_` and base64.
pub(crate) const WEBHOOK_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// Receivers on this machine, and quick retries.
pub(crate) const WEBHOOK_CONFIG: &str = "[webhooks]\nallow_private = true\nfirst_retry_ms = 200\n";

/// The fake model's settings, and the webhooks' secret.
pub(crate) fn webhook_env(model_url: &str) -> Vec<(&'static str, String)> {
    let mut env = openai_env(model_url);
    env.push(("SERVICE_WEBHOOK_SIGNING_SECRET", WEBHOOK_SECRET.to_owned()));
    env
}

/// The payloads of `deliveries`, each verified by the Standard Webhooks reference library
/// (`standardwebhooks` from PyPI); none when it is not installed (outside CI).
pub(crate) fn verified(deliveries: &[Delivery]) -> Option<Vec<Value>> {
    let present = Command::new("python3")
        .args(["-c", "import standardwebhooks"])
        .output()
        .is_ok_and(|out| out.status.success());
    if !tool_available(
        present,
        "WEBHOOK SIGNATURES NOT VERIFIED: pip install standardwebhooks==1.1.0",
    ) {
        return None;
    }
    let input: Vec<Value> = deliveries
        .iter()
        .map(|delivery| {
            let headers: serde_json::Map<String, Value> = delivery
                .headers
                .iter()
                .map(|(name, value)| (name.to_string(), json!(value.to_str().unwrap())))
                .collect();
            json!({"headers": headers, "body": delivery.body})
        })
        .collect();
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/webhooks/verify.py");
    let mut child = Command::new("python3")
        .arg(script)
        .env("WEBHOOK_SECRET", WEBHOOK_SECRET)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(json!(input).to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the reference library refused a delivery: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

/// The run's webhook once its delivery is no longer pending.
pub(crate) async fn settled_webhook(server: &Server, run_id: &str) -> Value {
    eventually(30, async || {
        let (status, webhook) = server.get(&format!("/api/runs/{run_id}/webhook")).await;
        assert_eq!(status, StatusCode::OK, "{webhook}");
        (webhook["state"] != "pending").then_some(webhook)
    })
    .await
}

/// A run's stream as a client reads it: `(id, frame)` events, one at a time.
pub(crate) struct Follow {
    response: reqwest::Response,
    buffer: String,
}

impl Follow {
    /// Opens `/api/runs/{id}/stream` at `base`, after `last` when given.
    pub(crate) async fn open(base: &str, run_id: &str, last: Option<i64>) -> Self {
        let mut request = reqwest::Client::new().get(format!("{base}/api/runs/{run_id}/stream"));
        if let Some(last) = last {
            request = request.header("Last-Event-ID", last.to_string());
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        Self::from(response)
    }

    /// Reads an open event stream (`/api/chat/stream`'s too).
    pub(crate) fn from(response: reqwest::Response) -> Self {
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Self {
            response,
            buffer: String::new(),
        }
    }

    /// The next event (keep-alive comments skipped); none once the stream ended.
    pub(crate) async fn next(&mut self) -> Option<(i64, Value)> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let (mut id, mut data) = (None, None);
                for line in block.lines() {
                    if let Some(value) = line.strip_prefix("id:") {
                        id = Some(value.trim().parse::<i64>().unwrap());
                    } else if let Some(value) = line.strip_prefix("data:") {
                        data = Some(serde_json::from_str(value.trim()).unwrap());
                    }
                }
                match (id, data) {
                    (Some(id), Some(data)) => return Some((id, data)),
                    (None, None) => continue,
                    other => panic!("an event without both id and data: {other:?}"),
                }
            }
            let chunk = tokio::time::timeout(Duration::from_secs(30), self.response.chunk())
                .await
                .expect("the stream went quiet")
                .unwrap()?;
            self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }

    /// Every event until the stream ends.
    pub(crate) async fn rest(mut self) -> Vec<(i64, Value)> {
        let mut events = Vec::new();
        while let Some(event) = self.next().await {
            events.push(event);
        }
        events
    }
}

/// Asserts that a run's stream ended with an error frame whose message says `saying`.
pub(crate) fn ends_in_error(events: &[(i64, Value)], saying: &str) {
    let (_, last) = events.last().expect("a last frame");
    assert_eq!(last["type"], "error", "{last}");
    let message = last["message"].as_str().unwrap();
    assert!(message.contains(saying), "{last}");
}

/// The text of the token frames among `events`.
pub(crate) fn text_of(events: &[(i64, Value)]) -> String {
    events
        .iter()
        .filter(|(_, frame)| frame["type"] == "token")
        .map(|(_, frame)| frame["text"].as_str().unwrap())
        .collect()
}

/// The run once it no longer runs.
async fn once_ended(server: &Server, run_id: &str) -> Value {
    eventually(15, async || {
        let (_, run) = server.get(&format!("/api/runs/{run_id}")).await;
        (run["status"] != "running").then_some(run)
    })
    .await
}

pub(crate) async fn status_of(server: &Server, run_id: &str) -> String {
    let (status, run) = server.get(&format!("/api/runs/{run_id}")).await;
    assert_eq!(status, StatusCode::OK, "{run}");
    run["status"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_run_goes_on_without_its_client_and_a_rejoined_stream_misses_nothing() {
    let (reply, pieces) = llm::by_hand();
    let fake = llm::openai(vec![reply]).await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    let (status, started) = server
        .post(
            "/api/runs",
            json!({"prompt": "count to three", "metadata": {"ticket": 7}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    assert_eq!(started["status"], "running");
    let run_id = started["run_id"].as_str().unwrap().to_owned();
    let trace_id = started["trace_id"].as_str().unwrap().to_owned();
    let conversation_id = started["conversation_id"].as_str().unwrap().to_owned();

    // A client follows two tokens, then goes away.
    let mut first = Follow::open(&server.url, &run_id, None).await;
    pieces.send("one ").unwrap();
    pieces.send("two ").unwrap();
    let mut seen = vec![first.next().await.unwrap(), first.next().await.unwrap()];
    assert_eq!(
        seen.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        vec![1, 2]
    );
    drop(first);

    // The run goes on: the rest of the answer arrives while nobody reads.
    pieces.send("three").unwrap();
    drop(pieces);
    let run = once_ended(&server, &run_id).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["answer"], "one two three");
    assert_eq!(run["metadata"], json!({"ticket": 7}));
    assert_eq!(run["conversation_id"], conversation_id.as_str());
    assert_eq!(run["trace_id"], trace_id.as_str());

    // Re-joined after the last event it saw: the rest, once, and the same as a whole read.
    let rest = Follow::open(&server.url, &run_id, Some(2))
        .await
        .rest()
        .await;
    seen.extend(rest);
    let whole = Follow::open(&server.url, &run_id, None).await.rest().await;
    assert_eq!(seen, whole);
    let ids: Vec<i64> = whole.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, (1..=whole.len() as i64).collect::<Vec<_>>());
    assert_eq!(text_of(&whole), "one two three");
    let (_, last) = whole.last().unwrap();
    assert_eq!(last["type"], "done", "{last}");
    assert_eq!(last["trace_id"], trace_id.as_str());

    // The trace named at the start is the run's; the run is a task, and is listed.
    let (status, trace) = server.get(&format!("/api/traces/{trace_id}")).await;
    assert_eq!((status, &trace["status"]), (StatusCode::OK, &json!("ok")));
    let (_, tasks) = server.get("/api/tasks?status=completed").await;
    assert!(
        tasks["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|task| task["task_id"] == run_id.as_str()),
        "{tasks}"
    );
    let (_, listed) = server
        .get(&format!(
            "/api/runs?status=completed&conversation_id={conversation_id}"
        ))
        .await;
    assert_eq!(listed["total"], 1, "{listed}");
    assert_eq!(listed["runs"][0]["run_id"], run_id.as_str());
    let (_, none) = server.get("/api/runs?status=running").await;
    assert_eq!(none["total"], 0, "{none}");

    // A second run in the conversation has the first exchange as its history.
    let (status, second) = server
        .post(
            "/api/runs",
            json!({"prompt": "and again", "conversation_id": conversation_id}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{second}");
    let second_id = second["run_id"].as_str().unwrap();
    let events = Follow::open(&server.url, second_id, None)
        .await
        .rest()
        .await;
    assert_eq!(
        events.last().unwrap().1["type"],
        "error",
        "the fake has no second reply"
    );
    let messages = &fake.requests()[1].body["messages"];
    assert!(messages.to_string().contains("one two three"), "{messages}");
}

#[tokio::test]
async fn a_cancelled_run_stops_and_its_stream_says_so() {
    let fake = llm::openai(vec![Reply::Slow(Duration::from_secs(30), "too late")]).await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    let (status, started) = server
        .post("/api/runs", json!({"prompt": "take your time"}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let run_id = started["run_id"].as_str().unwrap().to_owned();
    eventually(10, async || (!fake.requests().is_empty()).then_some(())).await;
    let following = Follow::open(&server.url, &run_id, None);
    let following = following.await;

    let (status, cancelled) = server
        .post(&format!("/api/runs/{run_id}/cancel"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    assert_eq!(cancelled["status"], "cancelled");
    let events = following.rest().await;
    ends_in_error(&events, "cancelled");
    assert_eq!(status_of(&server, &run_id).await, "cancelled");

    // Cancelling it again changes nothing.
    let again = server
        .post(&format!("/api/runs/{run_id}/cancel"), json!({}))
        .await;
    assert_error(&again, StatusCode::CONFLICT, "has ended (cancelled)");
    assert_eq!(status_of(&server, &run_id).await, "cancelled");
}

#[tokio::test]
async fn bad_runs_requests_are_refused_and_start_nothing() {
    // Without a secret to sign with, no webhook is taken.
    let unsigned = Server::start();
    let answer = unsigned
        .post(
            "/api/runs",
            json!({"prompt": "hi", "webhook": "https://example.com/done"}),
        )
        .await;
    assert_error(
        &answer,
        StatusCode::BAD_REQUEST,
        "SERVICE_WEBHOOK_SIGNING_SECRET",
    );
    assert_eq!(answer.1["field"], "webhook");
    drop(unsigned);

    let server = Server::start_with(&[("SERVICE_WEBHOOK_SIGNING_SECRET", WEBHOOK_SECRET)]);
    for (webhook, says) in [
        ("ftp://example.com/done", "http or https"),
        ("not a url", "is not a URL"),
        // The outbound policy: no loopback or private receivers unless allowed.
        ("http://127.0.0.1:9/hook", "private or local"),
        ("http://[::1]:9/hook", "private or local"),
        ("http://localhost:9/hook", "private or local"),
        ("http://10.1.2.3/hook", "allow_private"),
    ] {
        let answer = server
            .post("/api/runs", json!({"prompt": "hi", "webhook": webhook}))
            .await;
        assert_error(&answer, StatusCode::BAD_REQUEST, says);
        assert_eq!(answer.1["field"], "webhook", "{webhook}: {answer:?}");
    }
    for (body, field) in [
        (json!({"prompt": "hi", "metadata": [1, 2]}), "metadata"),
        (
            json!({"prompt": "hi", "metadata": {"big": "x".repeat(20_000)}}),
            "metadata",
        ),
        (json!({"prompt": "hi", "agent": "nobody"}), "agent"),
    ] {
        let answer = server.post("/api/runs", body.clone()).await;
        assert!(answer.0.is_client_error(), "{body}: {answer:?}");
        assert_eq!(answer.1["field"], field, "{body}: {answer:?}");
    }
    let answer = server.post("/api/runs", json!({"prompt": "  "})).await;
    assert_eq!(answer.0, StatusCode::BAD_REQUEST, "{answer:?}");
    let (_, runs) = server.get("/api/runs").await;
    assert_eq!(runs["total"], 0, "nothing started: {runs}");
    let answer = server.get("/api/runs?status=done").await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "unknown run status");

    for path in [
        "/api/runs/nope",
        "/api/runs/nope/stream",
        "/api/runs/nope/webhook",
    ] {
        assert_eq!(server.get(path).await.0, StatusCode::NOT_FOUND, "{path}");
    }
    let answer = server.post("/api/runs/nope/cancel", json!({})).await;
    assert_eq!(answer.0, StatusCode::NOT_FOUND);

    // The offline model answers at once: a finished run to re-join wrongly.
    let (_, started) = server.post("/api/runs", json!({"prompt": "hello"})).await;
    let run_id = started["run_id"].as_str().unwrap().to_owned();
    let events = Follow::open(&server.url, &run_id, None).await.rest().await;
    let last = events.len();
    for bad in ["0".to_owned(), (last + 1).to_string(), "abc".to_owned()] {
        let response = reqwest::Client::new()
            .get(server.url(&format!("/api/runs/{run_id}/stream")))
            .header("Last-Event-ID", &bad)
            .send()
            .await
            .unwrap();
        let answer = crate::support::json_of(response).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "Last-Event-ID");
        assert_eq!(answer.1["field"], "Last-Event-ID");
    }
    let answer = server
        .post(&format!("/api/runs/{run_id}/cancel"), json!({}))
        .await;
    assert_error(&answer, StatusCode::CONFLICT, "has ended (completed)");
}

#[tokio::test]
async fn a_stream_past_its_bounds_is_cut_in_words_and_the_answer_kept_whole() {
    // 300 words: one token frame each, three times what the bound keeps.
    let words: &'static str = "word ".repeat(300).leak();
    let fake = llm::openai(vec![Reply::Text(words)]).await;
    let server = Server::start_with_config("[runs]\nmax_events = 100\n", &openai_env(&fake.url));
    let (status, started) = server.post("/api/runs", json!({"prompt": "talk"})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let run_id = started["run_id"].as_str().unwrap();
    let events = Follow::open(&server.url, run_id, None).await.rest().await;
    assert!(events.len() <= 100, "{} frames", events.len());
    let cut: Vec<&Value> = events
        .iter()
        .map(|(_, frame)| frame)
        .filter(|frame| frame["type"] == "truncated")
        .collect();
    assert_eq!(cut.len(), 1, "one frame says so");
    assert!(
        cut[0]["message"]
            .as_str()
            .unwrap()
            .contains("max_events 100"),
        "{}",
        cut[0]
    );
    assert_eq!(events.last().unwrap().1["type"], "done");
    let (_, run) = server.get(&format!("/api/runs/{run_id}")).await;
    assert_eq!(run["answer"], words, "the answer is whole");

    // A bound out of its range stops the start, naming it.
    let stderr = crate::support::refused_start("[runs]\nmax_events = 5\n").stderr;
    assert!(
        stderr.contains("[runs] max_events must be between 100"),
        "{stderr}"
    );
}

#[tokio::test]
async fn a_webhook_is_signed_retried_until_accepted_and_delivered_once_across_a_kill() {
    let fake = llm::openai(vec![Reply::Text("all done"), Reply::Text("second")]).await;
    // Fails twice, then accepts.
    let receiver = Receiver::start(&[500, 500], 204).await;
    let server = Server::start_with_config(WEBHOOK_CONFIG, &webhook_env(&fake.url));
    let (status, started) = server
        .post(
            "/api/runs",
            json!({"prompt": "finish", "webhook": receiver.url, "metadata": {"ticket": 9}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let run_id = started["run_id"].as_str().unwrap().to_owned();

    let webhook = settled_webhook(&server, &run_id).await;
    assert_eq!(webhook["state"], "delivered", "{webhook}");
    assert_eq!(webhook["url"], receiver.url.as_str());
    let answered: Vec<&Value> = webhook["log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|attempt| &attempt["status_code"])
        .collect();
    assert_eq!(
        answered,
        [&json!(500), &json!(500), &json!(204)],
        "{webhook}"
    );
    let deliveries = receiver.deliveries();
    assert_eq!(deliveries.len(), 3);
    assert_eq!(
        receiver.accepted().len(),
        1,
        "exactly one accepted delivery"
    );
    // Every attempt is the same message.
    assert!(
        deliveries
            .iter()
            .all(|d| d.headers["webhook-id"] == deliveries[0].headers["webhook-id"])
    );
    if let Some(payloads) = verified(&deliveries) {
        for payload in payloads {
            assert_eq!(payload["type"], "run.completed", "{payload}");
            assert_eq!(payload["data"]["run_id"], run_id.as_str());
            assert_eq!(payload["data"]["answer"], "all done");
            assert_eq!(payload["data"]["metadata"], json!({"ticket": 9}));
        }
    }
    let (_, run) = server.get(&format!("/api/runs/{run_id}")).await;
    assert_eq!(run["webhook"]["state"], "delivered", "{run}");

    // A delivery still failing when its server is killed (kill -9) is made by the server
    // that starts again, and accepted once.
    receiver.answer(503);
    let (status, started) = server
        .post(
            "/api/runs",
            json!({"prompt": "again", "webhook": receiver.url}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let second = started["run_id"].as_str().unwrap().to_owned();
    eventually(20, async || {
        let (_, webhook) = server.get(&format!("/api/runs/{second}/webhook")).await;
        (webhook["attempts"].as_u64() >= Some(1)).then_some(())
    })
    .await;
    receiver.answer(204);
    let server = server.restart();
    let webhook = settled_webhook(&server, &second).await;
    assert_eq!(webhook["state"], "delivered", "{webhook}");
    let accepted: Vec<Delivery> = receiver
        .accepted()
        .into_iter()
        .filter(|d| d.body.contains(&second))
        .collect();
    assert_eq!(accepted.len(), 1, "delivered once");
    if let Some(payloads) = verified(&accepted) {
        assert_eq!(payloads[0]["data"]["answer"], "second");
    }
}

#[tokio::test]
async fn a_webhook_that_is_never_accepted_is_given_up_after_its_attempts() {
    let receiver = Receiver::start(&[], 302).await;
    let config = format!("{WEBHOOK_CONFIG}max_attempts = 2\n");
    let server = Server::start_with_config(
        &config,
        &[("SERVICE_WEBHOOK_SIGNING_SECRET", WEBHOOK_SECRET.to_owned())],
    );
    let (status, started) = server
        .post(
            "/api/runs",
            json!({"prompt": "hello", "webhook": receiver.url}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let run_id = started["run_id"].as_str().unwrap();
    let webhook = settled_webhook(&server, run_id).await;
    assert_eq!(webhook["state"], "failed", "{webhook}");
    assert_eq!(webhook["attempts"], 2);
    assert_eq!(webhook["log"].as_array().unwrap().len(), 2);
    assert!(
        webhook["last_error"]
            .as_str()
            .unwrap()
            .contains("redirects are not followed"),
        "{webhook}"
    );
    assert_eq!(receiver.deliveries().len(), 2);
}

#[tokio::test]
async fn a_chat_stream_numbers_its_frames_and_may_go_on_without_its_client() {
    let (reply, pieces) = llm::by_hand();
    let fake = llm::openai(vec![Reply::Text("one two"), reply]).await;
    let server = Server::start_with_owned(&openai_env(&fake.url));

    // The default: the stream's own contract, its frames numbered as a run's are.
    let response = reqwest::Client::new()
        .post(server.url("/api/chat/stream"))
        .json(&json!({"prompt": "count"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers().get("x-run-id").is_none());
    let events = Follow::from(response).rest().await;
    let ids: Vec<i64> = events.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, (1..=events.len() as i64).collect::<Vec<_>>());
    assert_eq!(text_of(&events), "one two");

    // `continue`: the client goes after a frame; the run goes on, and is re-joined after it.
    let response = reqwest::Client::new()
        .post(server.url("/api/chat/stream"))
        .json(&json!({"prompt": "count again", "on_disconnect": "continue"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let run_id = response.headers()["x-run-id"].to_str().unwrap().to_owned();
    let trace_id = response.headers()["x-trace-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(response.headers().contains_key("x-conversation-id"));
    let mut first = Follow::from(response);
    pieces.send("three ").unwrap();
    let mut seen = vec![first.next().await.unwrap()];
    drop(first);
    pieces.send("four").unwrap();
    drop(pieces);
    let run = once_ended(&server, &run_id).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["answer"], "three four");
    assert_eq!(run["trace_id"], trace_id.as_str());
    seen.extend(
        Follow::open(&server.url, &run_id, Some(seen[0].0))
            .await
            .rest()
            .await,
    );
    assert_eq!(text_of(&seen), "three four");
    assert_eq!(seen.last().unwrap().1["type"], "done");

    let answer = server
        .post(
            "/api/chat/stream",
            json!({"prompt": "hi", "on_disconnect": "later"}),
        )
        .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "on_disconnect");
}

#[tokio::test]
async fn a_run_paused_for_approval_is_read_waiting_then_finished_and_its_webhook_waits_for_it() {
    let fake = crate::approvals::note_script("Plan", "Saved.").await;
    let receiver = Receiver::start(&[], 204).await;
    let config = format!("{WEBHOOK_CONFIG}[tools.create_note]\napproval = true\n");
    let server = Server::start_with_config(&config, &webhook_env(&fake.url));
    let (status, started) = server
        .post(
            "/api/runs",
            json!({"prompt": "Save a plan", "webhook": receiver.url}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let run_id = started["run_id"].as_str().unwrap().to_owned();

    // The stream ends at the pause; the run waits for a person, and so does its webhook.
    let events = Follow::open(&server.url, &run_id, None).await.rest().await;
    let (_, last) = events.last().unwrap();
    assert_eq!(last["type"], "approval_required", "{last}");
    assert_eq!(status_of(&server, &run_id).await, "waiting_for_approval");
    let (_, waiting) = server.get("/api/runs?status=waiting_for_approval").await;
    assert_eq!(waiting["runs"][0]["run_id"], run_id.as_str(), "{waiting}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        receiver.deliveries().is_empty(),
        "not ended: no webhook yet"
    );

    let approval = last["approval_id"].as_str().unwrap();
    let (status, _) = server
        .post(
            &format!("/api/approvals/{approval}"),
            json!({"decision": "approve"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let run = eventually(20, async || {
        let (_, run) = server.get(&format!("/api/runs/{run_id}")).await;
        (run["status"] == "completed").then_some(run)
    })
    .await;
    assert_eq!(run["answer"], "Saved.", "{run}");
    assert_eq!(run["tool_calls"][0]["name"], "create_note", "{run}");
    assert_eq!(run["tool_calls"][0]["status"], "ok", "{run}");
    let webhook = settled_webhook(&server, &run_id).await;
    assert_eq!(webhook["state"], "delivered", "{webhook}");
    if let Some(payloads) = verified(&receiver.accepted()) {
        assert_eq!(payloads[0]["type"], "run.completed");
        assert_eq!(payloads[0]["data"]["answer"], "Saved.");
    }
}
