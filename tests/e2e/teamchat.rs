//! The bundled teamchat adapter through the real binary, against a fake of the platform
//! (`fakes::teamchat`: real HTTP, the Web API and the hooks origin), beyond the specification's
//! rows (those are in `spec::teamchat`, with the helpers here): posts refused for now and sent
//! after the wait, long replies in several messages, replies delivered once across a crash and
//! a shutdown, context within its bound, the platform's other requests, slow models, keys
//! written through the API and a component that failed to load.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::fakes::llm::{self, Reply};
use crate::fakes::teamchat::{BOT_TOKEN, BOT_USER, FakePlatform};
use crate::support::{Server, assert_error, eventually, json_of, openai_env};

pub(crate) const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

/// A posted message: the bearer token it came with and its JSON body.
pub(crate) type Posted = (String, Value);

pub(crate) async fn platform(usual: Value) -> FakePlatform {
    FakePlatform::start(usual).await
}

pub(crate) fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// `v0=<hex>`: HMAC-SHA256 over `v0:<timestamp>:<body>`, as the platform signs.
pub(crate) fn signature(secret: &str, timestamp: &str, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("v0:{timestamp}:{body}").as_bytes());
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}

/// Posts `body` to a teamchat route with the given timestamp and signature headers.
pub(crate) async fn send_raw(
    server: &Server,
    route: &str,
    body: &str,
    timestamp: Option<&str>,
    signature: Option<&str>,
) -> (StatusCode, Value) {
    let content_type = if route == "commands" || route == "interactions" {
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
pub(crate) async fn signed(server: &Server, route: &str, body: &str) -> (StatusCode, Value) {
    let timestamp = now().to_string();
    let signature = signature(SIGNING_SECRET, &timestamp, body);
    send_raw(server, route, body, Some(&timestamp), Some(&signature)).await
}

pub(crate) fn callback(event_id: &str, event: Value) -> String {
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

pub(crate) fn mention(text: &str, thread_ts: Option<&str>) -> Value {
    mention_at("C1", "1700000001.000200", text, thread_ts)
}

pub(crate) fn mention_at(channel: &str, ts: &str, text: &str, thread_ts: Option<&str>) -> Value {
    let mut event = json!({
        "type": "app_mention",
        "user": "U1",
        "text": text,
        "ts": ts,
        "channel": channel,
    });
    if let Some(thread_ts) = thread_ts {
        event["thread_ts"] = json!(thread_ts);
    }
    event
}

pub(crate) async fn posts(api: &FakePlatform, count: usize) -> Vec<Posted> {
    eventually(20, async || {
        let posted = api.posted();
        (posted.len() >= count).then_some(posted)
    })
    .await
}

/// The tasks whose trace came from teamchat, with those traces.
pub(crate) async fn runs(server: &Server) -> Vec<(Value, Value)> {
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

/// The adapter's job tasks, once none of them is waiting or running any more.
pub(crate) async fn settled_jobs(server: &Server) -> Vec<Value> {
    eventually(60, async || {
        let (_, tasks) = server.get("/api/tasks").await;
        let jobs: Vec<Value> = tasks["tasks"]
            .as_array()
            .unwrap()
            .iter()
            // A job's task counts its attempts.
            .filter(|t| t["attempt"].is_number())
            .cloned()
            .collect();
        let settled = jobs
            .iter()
            .all(|t| t["status"] == "completed" || t["status"] == "error");
        (!jobs.is_empty() && settled).then_some(jobs)
    })
    .await
}

/// The (role, text) turns of a request to the fake model, system prompt left out.
fn turns(request: &llm::Recorded) -> Vec<(String, String)> {
    request.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_post_refused_for_now_is_sent_after_the_wait_and_the_model_runs_once() {
    let llm = llm::openai(vec![Reply::Text("worth the wait")]).await;
    let api = platform(json!({"ok": true})).await;
    api.refuse_next(
        503,
        None,
        json!({"ok": false, "error": "service_unavailable"}),
    );
    api.refuse_next(429, Some(1), json!({"ok": false, "error": "ratelimited"}));
    let mut env = api.env(SIGNING_SECRET);
    env.extend(openai_env(&llm.url));
    let server = Server::start_with_owned(&env);
    let event = callback("EvRefused", mention("<@UBOT> busy platform?", None));
    assert_eq!(signed(&server, "events", &event).await.0, StatusCode::OK);

    let jobs = settled_jobs(&server).await;
    assert_eq!(
        (jobs[0]["status"].as_str(), &jobs[0]["attempt"]),
        (Some("completed"), &json!(3)),
        "{jobs:?}"
    );
    let calls = api.calls();
    assert_eq!(calls.len(), 3, "{calls:?}");
    // A 5xx waits for the backoff (2 s at the first attempt), a 429 for its Retry-After.
    let gaps: Vec<Duration> = calls.windows(2).map(|w| w[1].at - w[0].at).collect();
    assert!(gaps[0] >= Duration::from_millis(1_900), "{gaps:?}");
    assert!(gaps[1] >= Duration::from_millis(900), "{gaps:?}");
    assert_eq!(api.posted().len(), 1);
    assert_eq!(api.posted()[0].1["text"], "worth the wait");
    assert_eq!(
        llm.requests().len(),
        1,
        "the kept answer is posted, not asked again"
    );
    let (_, trace) = server
        .get(&format!(
            "/api/traces/{}",
            jobs[0]["trace_id"].as_str().unwrap()
        ))
        .await;
    assert!(
        trace["warnings"]
            .to_string()
            .contains("not delivered yet (attempt 1)"),
        "{trace}"
    );
}

/// A reply of about 9,500 characters: prose, a code block, prose.
fn long_reply() -> String {
    let prose = |topic: &str| {
        (0..12)
            .map(|i| {
                format!(
                    "{topic} paragraph {i}: {}",
                    "lorem ipsum dolor sit amet ".repeat(12)
                )
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    };
    let code: Vec<String> = (0..60)
        .map(|i| format!("    let value_{i:02} = compute({i});"))
        .collect();
    format!(
        "{}\n\n```\n{}\n```\n\n{}",
        prose("intro"),
        code.join("\n"),
        prose("outro")
    )
}

#[tokio::test]
async fn a_long_reply_arrives_whole_in_order_in_its_thread_each_part_once() {
    let text = long_reply();
    let llm = llm::openai(vec![Reply::Text(text.clone().leak())]).await;
    let api = platform(json!({"ok": true})).await;
    // The second message is refused once: the retry goes on from there.
    api.accept_next();
    api.refuse_next(500, None, json!({"ok": false, "error": "internal_error"}));
    let mut env = api.env(SIGNING_SECRET);
    env.extend(openai_env(&llm.url));
    let server = Server::start_with_owned(&env);
    let event = callback(
        "EvLong",
        mention("<@UBOT> tell me everything", Some("1700000000.000100")),
    );
    assert_eq!(signed(&server, "events", &event).await.0, StatusCode::OK);
    let jobs = settled_jobs(&server).await;
    assert_eq!(jobs[0]["status"], "completed", "{jobs:?}");

    let parts: Vec<String> = api
        .posted()
        .iter()
        .map(|(_, m)| {
            assert_eq!(m["thread_ts"], "1700000000.000100", "{m}");
            m["text"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(parts.len(), 3, "{parts:#?}");
    assert_eq!(api.calls().len(), 4, "one refused, none posted twice");
    for part in &parts {
        assert!(part.chars().count() <= 4_000, "{}", part.chars().count());
        assert_eq!(
            part.matches("```").count() % 2,
            0,
            "a block left open: {part}"
        );
    }
    let code_lines = |t: &str| t.lines().filter(|l| l.contains("compute(")).count();
    assert!(
        parts.iter().any(|p| code_lines(p) == 60),
        "the code block is in one message"
    );
    // In order, no word cut: the messages together are the reply.
    let words = |t: &str| t.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
    assert_eq!(words(&parts.join("\n\n")), words(&text));
    assert_eq!(llm.requests().len(), 1);
}

/// Waits until the model has been asked `count` times.
async fn asked(llm: &llm::FakeLlm, count: usize) {
    eventually(20, async || (llm.requests().len() >= count).then_some(())).await;
}

/// After a kill -9 mid-job and a restart: the job completed, at its second start.
async fn completed_at_the_second_attempt(server: &Server) {
    let jobs = settled_jobs(server).await;
    assert_eq!(
        (jobs[0]["status"].as_str(), &jobs[0]["attempt"]),
        (Some("completed"), &json!(2)),
        "{jobs:?}"
    );
}

#[tokio::test]
async fn a_reply_cut_off_by_a_crash_is_delivered_once_after_the_restart() {
    let (cut_off, _pieces) = llm::by_hand();
    let llm = llm::openai(vec![cut_off, Reply::Text("after the restart")]).await;
    let api = platform(json!({"ok": true})).await;
    let mut env = api.env(SIGNING_SECRET);
    env.extend(openai_env(&llm.url));
    let server = Server::start_with_owned(&env);
    let event = callback("EvCrash", mention("<@UBOT> survive this", None));
    assert_eq!(signed(&server, "events", &event).await.0, StatusCode::OK);
    asked(&llm, 1).await;

    // kill -9 while the model is answering; the job runs again at the next start.
    let server = server.restart();
    completed_at_the_second_attempt(&server).await;
    let posted = api.posted();
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert_eq!(posted[0].1["text"], "after the restart");
    // The platform's retry of the event is still a duplicate.
    assert_eq!(
        signed(&server, "events", &event).await.1["outcome"],
        "duplicate"
    );
}

#[tokio::test]
async fn a_message_the_platform_took_just_before_a_crash_is_not_posted_again() {
    let llm = llm::openai(vec![Reply::Text("said once"); 2]).await;
    let api = platform(json!({"ok": true})).await;
    api.stall_next();
    let mut env = api.env(SIGNING_SECRET);
    env.extend(openai_env(&llm.url));
    let server = Server::start_with_owned(&env);
    let event = callback("EvTaken", mention("<@UBOT> once, please", None));
    assert_eq!(signed(&server, "events", &event).await.0, StatusCode::OK);
    eventually(20, async || (api.posted().len() == 1).then_some(())).await;

    // kill -9 while the platform's answer is on its way: the post went out, its count was
    // never stored. The next attempt finds the part in the conversation.
    let server = server.restart();
    completed_at_the_second_attempt(&server).await;
    let posted = api.posted();
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert_eq!(posted[0].1["text"], "said once");
    assert_eq!(posted[0].1["metadata"]["event_type"], "service_reply");
}

#[tokio::test]
async fn a_reply_in_progress_at_shutdown_is_delivered_before_exit_and_not_again() {
    let (in_progress, pieces) = llm::by_hand();
    let llm = llm::openai(vec![in_progress]).await;
    let api = platform(json!({"ok": true})).await;
    let mut env = api.env(SIGNING_SECRET);
    env.extend(openai_env(&llm.url));
    let tmp = tempfile::tempdir().unwrap();
    let data_dir = tmp.path().join("data");
    let server = Server::start_in(&data_dir, &env);
    let event = callback("EvShutdown", mention("<@UBOT> finish this", None));
    assert_eq!(signed(&server, "events", &event).await.0, StatusCode::OK);
    asked(&llm, 1).await;

    // SIGTERM while the model answers; the answer completes during the grace period.
    let exited = tokio::task::spawn_blocking(move || server.terminate());
    pieces.send("finished during the drain").unwrap();
    drop(pieces);
    let status = exited.await.unwrap();
    assert!(status.success(), "{status:?}");
    let posted = api.posted();
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert_eq!(posted[0].1["text"], "finished during the drain");

    let server = Server::start_in(&data_dir, &env);
    let jobs = settled_jobs(&server).await;
    assert_eq!(
        (jobs[0]["status"].as_str(), &jobs[0]["attempt"]),
        (Some("completed"), &json!(1)),
        "{jobs:?}"
    );
    assert_eq!(api.calls().len(), 1, "nothing runs again after the restart");
    drop(server);
    drop(tmp);
}

#[tokio::test]
async fn threads_and_direct_messages_keep_their_context_within_the_bound() {
    let llm = llm::openai(vec![Reply::Text("Rome."), Reply::Text("Noon.")]).await;
    let api = platform(json!({"ok": true})).await;
    let parent = "1700000100.000100";
    let said = |ts: &str, user: &str, text: &str, channel: &str, thread: Option<&str>| {
        let mut message =
            json!({"type": "message", "ts": ts, "user": user, "text": text, "channel": channel});
        if user == BOT_USER {
            message["bot_id"] = json!("B1");
        }
        if let Some(thread) = thread {
            message["thread_ts"] = json!(thread);
        }
        api.seed(message);
    };
    said(
        parent,
        "U1",
        "<@UBOT> what is the capital of France?",
        "C7",
        Some(parent),
    );
    said("1700000100.000200", BOT_USER, "Paris.", "C7", Some(parent));
    said("1700000100.000300", "U2", "thanks!", "C7", Some(parent));
    said(
        "1700000100.000350",
        "U1",
        "one more thing",
        "C7",
        Some(parent),
    );
    said(
        "1700000100.000500",
        "U1",
        "said after the mention",
        "C7",
        Some(parent),
    );
    said("1700000200.000100", "U1", "hi", "D9", None);
    said(
        "1700000200.000200",
        BOT_USER,
        "Hello! How can I help?",
        "D9",
        None,
    );
    let mut env = api.env(SIGNING_SECRET);
    env.extend(openai_env(&llm.url));
    env.push(("SERVICE_TEAMCHAT_CONTEXT_MESSAGES", "3".into()));
    let server = Server::start_with_owned(&env);

    let in_thread = mention_at(
        "C7",
        "1700000100.000400",
        "<@UBOT> and of Italy?",
        Some(parent),
    );
    assert_eq!(
        signed(&server, "events", &callback("EvCtx1", in_thread))
            .await
            .0,
        StatusCode::OK
    );
    posts(&api, 1).await;
    let expected = [
        ("assistant", "Paris."),
        ("user", "thanks!"),
        ("user", "one more thing"),
        ("user", "and of Italy?"),
    ];
    let turns_of = |i: usize| turns(&llm.requests()[i]);
    assert_eq!(
        turns_of(0),
        expected.map(|(r, t)| (r.to_owned(), t.to_owned())),
        "the last 3 earlier messages of the thread, the bot's own as the assistant's"
    );

    let dm = json!({"type": "message", "channel_type": "im", "channel": "D9", "user": "U1", "text": "what time is it?", "ts": "1700000200.000300"});
    assert_eq!(
        signed(&server, "events", &callback("EvCtx2", dm)).await.0,
        StatusCode::OK
    );
    let posted = posts(&api, 2).await;
    assert_eq!(
        turns_of(1),
        [
            ("user", "hi"),
            ("assistant", "Hello! How can I help?"),
            ("user", "what time is it?")
        ]
        .map(|(r, t)| (r.to_owned(), t.to_owned()))
    );
    assert_eq!(posted[0].1["thread_ts"], parent);
    assert_eq!(posted[1].1["channel"], "D9");

    // Each is a conversation the runtime keeps, with the adapter as its source.
    let (_, listing) = server.get("/api/conversations?source=teamchat").await;
    let mut titles: Vec<&str> = listing["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["title"].as_str().unwrap())
        .collect();
    titles.sort_unstable();
    assert_eq!(titles, ["and of Italy?", "what time is it?"], "{listing}");
}

#[tokio::test]
async fn two_mentions_in_one_thread_are_answered_one_after_the_other_in_order() {
    let (first, pieces) = llm::by_hand();
    let llm = llm::openai(vec![first, Reply::Text("Second answer.")]).await;
    let api = platform(json!({"ok": true})).await;
    let mut env = api.env(SIGNING_SECRET);
    env.extend(openai_env(&llm.url));
    let server = Server::start_with_owned(&env);
    let thread = "1700000300.000100";
    let mention_in_thread =
        |id: &str, ts: &str, text: &str| callback(id, mention_at("C3", ts, text, Some(thread)));
    let sent = mention_in_thread("EvTwo1", "1700000300.000200", "<@UBOT> first question");
    assert_eq!(signed(&server, "events", &sent).await.0, StatusCode::OK);
    asked(&llm, 1).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let sent = mention_in_thread("EvTwo2", "1700000300.000300", "<@UBOT> second question");
    assert_eq!(signed(&server, "events", &sent).await.0, StatusCode::OK);

    // Both jobs run; the second waits in the conversation's line while the first is answered.
    eventually(20, async || {
        let (_, tasks) = server.get("/api/tasks?status=running").await;
        (tasks["total"] == 2).then_some(())
    })
    .await;
    assert_eq!(
        llm.requests().len(),
        1,
        "the second has not reached the model"
    );
    // The first answer's post is slow to arrive; the second is posted after it all the same.
    api.delay_next(std::time::Duration::from_millis(700));
    pieces.send("First answer.").unwrap();
    drop(pieces);
    let posted = posts(&api, 2).await;
    let texts: Vec<&str> = posted
        .iter()
        .map(|(_, p)| p["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["First answer.", "Second answer."]);
    let (_, listing) = server.get("/api/conversations?source=teamchat").await;
    assert_eq!(listing["conversations"][0]["turns"], 2, "{listing}");
}

#[tokio::test]
async fn the_platforms_other_requests_are_answered_right() {
    let api = platform(json!({"ok": true})).await;
    let server = Server::start_with_owned(&api.env(SIGNING_SECRET));

    // The certificate check (the platform SDK's own test body), signed or not: an empty 200.
    let ssl_check = "token=random&ssl_check=1";
    for is_signed in [true, false] {
        let timestamp = now().to_string();
        let mut request = reqwest::Client::new()
            .post(server.url("/api/adapters/teamchat/commands"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(ssl_check);
        if is_signed {
            request = request
                .header("x-slack-request-timestamp", &timestamp)
                .header(
                    "x-slack-signature",
                    signature(SIGNING_SECRET, &timestamp, ssl_check),
                );
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.text().await.unwrap(), "");
    }

    // The platform dropped events: 200, and the operator learns it from the entry.
    let rate_limited = json!({"token": "Jhj5dZrVaK7ZwHHjRyZWjbDl", "type": "app_rate_limited", "team_id": "T123456", "minute_rate_limited": 1518467820, "api_app_id": "A123456"});
    let (status, body) = signed(&server, "events", &rate_limited.to_string()).await;
    assert_eq!(
        (status, body["outcome"].as_str()),
        (StatusCode::OK, Some("recorded: app_rate_limited"))
    );
    let entry = server.adapter("teamchat").await.unwrap();
    let message = entry["error_message"].as_str().unwrap_or_default();
    assert!(
        message.contains("app_rate_limited") && message.contains("1518467820"),
        "{entry}"
    );

    // Direct messages with a subtype that still carries a question are answered; the bodies
    // are the platform SDK's test scenarios, in a direct conversation.
    let file_share = json!({
        "token": "xxx", "team_id": "T111", "api_app_id": "A111",
        "event": {
            "type": "message", "text": "Hi there!",
            "files": [{"id": "F111", "created": 1652227642, "timestamp": 1652227642, "name": "file.png", "title": "file.png", "mimetype": "image/png", "filetype": "png", "pretty_type": "PNG", "user": "U111", "editable": false, "size": 92582, "mode": "hosted", "is_external": false, "external_type": "", "is_public": true, "public_url_shared": false, "display_as_bot": false, "username": "", "url_private": "https://files.slack.com/files-pri/T111-F111/file.png", "permalink": "https://xxx.slack.com/files/U111/F111/file.png", "has_rich_preview": false}],
            "upload": false, "user": "U111", "display_as_bot": false, "ts": "1652227646.593159",
            "blocks": [{"type": "rich_text", "block_id": "ba4", "elements": [{"type": "rich_text_section", "elements": [{"type": "text", "text": "Hi there!"}]}]}],
            "client_msg_id": "ca088267-717f-41a8-9db8-c98ae14ad6a0", "channel": "D111",
            "subtype": "file_share", "event_ts": "1652227646.593159", "channel_type": "im"
        },
        "type": "event_callback", "event_id": "Ev03EGJQAVMM", "event_time": 1652227646,
        "authorizations": [{"enterprise_id": null, "team_id": "T111", "user_id": "U222", "is_bot": true, "is_enterprise_install": false}],
        "is_ext_shared_channel": false, "event_context": "4-xxx"
    });
    let thread_broadcast = json!({
        "token": "verification-token", "team_id": "T111", "enterprise_id": "E111", "api_app_id": "A111",
        "event": {
            "type": "message", "subtype": "thread_broadcast", "text": "Hi there!", "user": "U111",
            "ts": "1633670813.007500", "thread_ts": "1633663824.000500",
            "root": {"client_msg_id": "111-222-333-444-555", "type": "message", "text": "Write in the thread :bow:", "user": "U111", "ts": "1633663824.000500", "team": "T111", "thread_ts": "1633663824.000500", "reply_count": 17, "reply_users_count": 1, "latest_reply": "1633670813.007500", "reply_users": ["U111"], "is_locked": false},
            "client_msg_id": "111-222-333-444-666", "channel": "D111", "event_ts": "1633670813.007500", "channel_type": "im"
        },
        "type": "event_callback", "event_id": "Ev111", "event_time": 1610261659,
        "authorizations": [{"enterprise_id": "E111", "team_id": "T111", "user_id": "W111", "is_bot": true, "is_enterprise_install": false}],
        "is_ext_shared_channel": false, "event_context": "1-message-T111-C111"
    });
    for body in [&file_share, &thread_broadcast] {
        let (status, answer) = signed(&server, "events", &body.to_string()).await;
        assert_eq!(
            (status, answer["outcome"].as_str()),
            (StatusCode::OK, Some("queued")),
            "{answer}"
        );
    }
    let posted = posts(&api, 2).await;
    assert!(posted.iter().all(|(_, m)| m["channel"] == "D111"));
    assert!(
        posted
            .iter()
            .any(|(_, m)| m["thread_ts"] == "1633663824.000500"),
        "{posted:?}"
    );

    // Edits, deletions, joins and bot messages stay ignored.
    let changed = json!({
        "token": "verification-token", "team_id": "T111", "enterprise_id": "E111", "api_app_id": "A111",
        "event": {
            "type": "message", "subtype": "message_changed",
            "message": {"type": "message", "text": "updated message", "user": "U111", "team": "T111", "edited": {"user": "U111", "ts": "1665102362.000000"}},
            "previous_message": {"type": "message", "text": "original message", "user": "U222", "team": "T111", "ts": "1665102338.901939"},
            "channel": "D111", "hidden": true, "ts": "1665102362.013600", "event_ts": "1665102362.013600", "channel_type": "im"
        },
        "type": "event_callback", "event_id": "Ev112", "event_time": 1665102362,
        "authorizations": [{"enterprise_id": "E111", "team_id": "T111", "user_id": "U111", "is_bot": true, "is_enterprise_install": false}],
        "is_ext_shared_channel": false, "event_context": "1-message-T111-C111"
    });
    let deleted = json!({
        "token": "verification-token", "team_id": "T111", "enterprise_id": "E111", "api_app_id": "A111",
        "event": {
            "type": "message", "subtype": "message_deleted",
            "previous_message": {"type": "message", "text": "Delete this message", "user": "U111", "team": "T111", "ts": "1665368619.804829"},
            "channel": "D111", "hidden": true, "deleted_ts": "1665368619.804829", "event_ts": "1665368629.007100", "ts": "1665368629.007100", "channel_type": "im"
        },
        "type": "event_callback", "event_id": "Ev113", "event_time": 1665368629,
        "authorizations": [{"enterprise_id": "E111", "team_id": "T111", "user_id": "U111", "is_bot": true, "is_enterprise_install": false}],
        "is_ext_shared_channel": false, "event_context": "1-message-T111-C111"
    });
    let joined = callback(
        "Ev114",
        json!({"type": "message", "subtype": "channel_join", "user": "U3", "inviter": "U1", "channel": "D111", "channel_type": "im", "text": "<@U3> has joined the channel", "ts": "1665368700.000100"}),
    );
    let from_bot = callback(
        "Ev115",
        json!({"type": "message", "subtype": "bot_message", "bot_id": "B9", "username": "other bot", "channel": "D111", "channel_type": "im", "text": "beep", "ts": "1665368800.000100"}),
    );
    for body in [changed.to_string(), deleted.to_string(), joined, from_bot] {
        let (status, answer) = signed(&server, "events", &body).await;
        assert_eq!(status, StatusCode::OK);
        assert!(
            answer["outcome"].as_str().unwrap().starts_with("ignored"),
            "{answer}"
        );
    }
    assert_eq!(
        settled_jobs(&server).await.len(),
        2,
        "only the two questions ran"
    );
}

#[tokio::test]
async fn the_ack_never_waits_for_a_slow_model() {
    let llm = llm::openai(vec![Reply::Slow(Duration::from_secs(10), "finally")]).await;
    let api = platform(json!({"ok": true})).await;
    let mut env = api.env(SIGNING_SECRET);
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

/// A slash command form as the platform sends it (the SDK's test body, with this text).
pub(crate) fn command_form(api: &FakePlatform, text: &str, id: &str) -> String {
    let response_url = api.response_url(id);
    format!(
        "token=verification_token&team_id=T111&team_domain=test-domain&channel_id=C111\
         &channel_name=random&user_id=W111&user_name=primary-owner&command=%2Fask&text={}\
         &enterprise_id=E111&enterprise_name=Org+Name&response_url={}&trigger_id=111.111.xxx",
        text.replace(' ', "+"),
        form_encode(&response_url)
    )
}

pub(crate) fn form_encode(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// A command's answer and how long it took.
pub(crate) async fn command(server: &Server, form: &str) -> (Value, Duration) {
    let started = Instant::now();
    let (status, body) = signed(server, "commands", form).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    (body, started.elapsed())
}

#[tokio::test]
async fn keys_written_through_the_api_apply_at_once() {
    let api = platform(json!({"ok": true, "ts": "1700000002.000300"})).await;
    let server = Server::start();
    let entry = server.adapter("teamchat").await.unwrap();
    assert_eq!(
        (
            &entry["status"],
            entry["missing_settings"].as_array().unwrap().len()
        ),
        (&json!("error"), 2),
        "{entry}"
    );

    let mut answers = Vec::new();
    for (name, value) in api.env(SIGNING_SECRET) {
        answers.push(server.write_key("teamchat", name, &value).await);
    }
    for answer in &answers {
        assert_eq!(answer["applied_to"], json!(["teamchat"]), "{answer}");
        assert!(!answer.to_string().contains(BOT_TOKEN), "{answer}");
    }
    let entry = server.adapter("teamchat").await.unwrap();
    assert_eq!(
        (&entry["status"], &entry["missing_settings"]),
        (&json!("running"), &json!([])),
        "{entry}"
    );
    assert!(
        entry["capabilities"]
            .to_string()
            .contains(&api.base.replace("http://", "")),
        "the API base written is an origin it may reach now: {entry}"
    );

    // The reply goes to the API base just written, no restart between.
    let event = callback("Ev900", mention("<@UBOT> are you there?", None));
    assert_eq!(signed(&server, "events", &event).await.0, StatusCode::OK);
    let posted = posts(&api, 1).await;
    assert!(
        posted[0].1["text"]
            .as_str()
            .unwrap()
            .contains("are you there?")
    );
    let (_, verified) = server
        .post("/api/integrations/teamchat/verify", json!(null))
        .await;
    assert_eq!(
        verified,
        json!({"id": "teamchat", "ok": true, "error": null})
    );
}

#[tokio::test]
async fn verify_fails_when_the_adapter_may_not_reach_what_answered() {
    let api = platform(json!({"ok": true, "ts": "1700000002.000300"})).await;
    // A grant without the API base's variable: the platform answers the probe, but the
    // adapter could never send it anything.
    let config = "[adapters.teamchat]\n\
                  secrets = [\"SERVICE_TEAMCHAT_SIGNING_SECRET\", \"SERVICE_TEAMCHAT_BOT_TOKEN\"]\n";
    let server = Server::start_with_config(config, &api.env(SIGNING_SECRET));
    let (status, body) = server
        .post("/api/integrations/teamchat/verify", json!(null))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["ok"], false, "{body}");
    let origin = api.base.clone();
    assert_eq!(
        body["error"],
        format!("the teamchat adapter may not reach {origin}: its grant does not name that origin")
    );
}

#[tokio::test]
async fn a_teamchat_component_that_fails_to_load_is_not_installed() {
    let api = platform(json!({"ok": true})).await;
    let tmp = tempfile::tempdir().unwrap();
    let adapters = tmp.path().join("data/adapters");
    std::fs::create_dir_all(&adapters).unwrap();
    // A truncated component overrides the bundled one, and fails.
    std::fs::write(adapters.join("teamchat.wasm"), b"\0asm\x0d\0\x01\0").unwrap();
    let server = Server::start_in(&tmp.path().join("data"), &api.env(SIGNING_SECRET));
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
