//! Sections 4.2, 5, 6 and 7 for teamchat: the bundled component through the real binary
//! against the fake platform (`fakes::teamchat`), with the helpers of `crate::teamchat`.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fakes::llm::{self, Reply};
use crate::fakes::teamchat::BOT_TOKEN;
use crate::support::{Server, assert_error, eventually, openai_env};
use crate::teamchat::{
    SIGNING_SECRET, callback, command, command_form, mention, now, platform, posts, runs, send_raw,
    settled_jobs, signature, signed,
};

#[tokio::test]
async fn spec_5_teamchat_signatures_the_300_second_replay_window_and_url_verification() {
    let api = platform(json!({"ok": true})).await;
    let server = Server::start_with_owned(&api.env(SIGNING_SECRET));
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
async fn spec_4_2_rules_3_to_7_mentions_in_threads_and_direct_messages_get_one_reply_each() {
    let api = platform(json!({"ok": true, "ts": "1700000002.000300"})).await;
    let server = Server::start_with_owned(&api.env(SIGNING_SECRET));

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
    // Titled by what they did, with their agent, not as "teamchat job".
    let mut titles: Vec<(&str, &str)> = runs
        .iter()
        .map(|(task, _)| {
            (
                task["title"].as_str().unwrap(),
                task["agent_profile_name"].as_str().unwrap(),
            )
        })
        .collect();
    titles.sort_unstable();
    assert_eq!(
        titles,
        [
            ("teamchat: <@U2> what is the plan?", "default"),
            ("teamchat: hello in private", "default")
        ]
    );
    assert_eq!(api.posted().len(), 2, "ignored events post nothing");
    let entry = server.adapter("teamchat").await.unwrap();
    assert!(entry["last_activity_at"].is_string());
    assert_eq!(entry["error_count"], 0, "{entry}");
}

#[tokio::test]
async fn spec_4_2_rule_6_a_retried_event_runs_the_agent_once() {
    let api = platform(json!({"ok": true})).await;
    let server = Server::start_with_owned(&api.env(SIGNING_SECRET));
    let event = callback("EvRetried", mention("<@UBOT> once please", None));
    let mut outcomes = Vec::new();
    for _ in 0..3 {
        let (status, body) = signed(&server, "events", &event).await;
        assert_eq!(status, StatusCode::OK);
        outcomes.push(body["outcome"].as_str().unwrap().to_owned());
    }
    assert_eq!(outcomes, ["queued", "duplicate", "duplicate"]);
    posts(&api, 1).await;
    // The job has ended, its post counted: a crash in between is the crash test's subject.
    settled_jobs(&server).await;

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
    posts(&api, 2).await;
    assert_eq!(settled_jobs(&server).await.len(), 2);
    assert_eq!(api.calls().len(), 2, "{:?}", api.calls());
    assert_eq!(runs(&server).await.len(), 2);
}

#[tokio::test]
async fn spec_4_2_rule_8_a_failed_post_is_suppressed_and_the_route_answers_200() {
    let api = platform(json!({"ok": false, "error": "not_in_channel"})).await;
    let server = Server::start_with_owned(&api.env(SIGNING_SECRET));
    let event = callback("EvNoScope", mention("<@UBOT> can you hear me?", None));
    let (status, _) = signed(&server, "events", &event).await;
    assert_eq!(status, StatusCode::OK);
    let jobs = settled_jobs(&server).await;
    assert_eq!(jobs[0]["status"], "error", "{jobs:?}");
    let (_, trace) = server
        .get(&format!(
            "/api/traces/{}",
            jobs[0]["trace_id"].as_str().unwrap()
        ))
        .await;
    let warnings = trace["warnings"].to_string();
    assert!(warnings.contains("reply not delivered"), "{trace}");
    assert!(warnings.contains("not_in_channel"), "{trace}");
    // A final refusal is not retried.
    assert_eq!(api.calls().len(), 1, "no retry storm");
    assert!(api.posted().is_empty());
    assert_eq!(server.get("/api/health").await.0, StatusCode::OK);
    let handshake = r#"{"type":"url_verification","challenge":"still-here"}"#;
    assert_eq!(
        signed(&server, "events", handshake).await.1["challenge"],
        "still-here"
    );
}

#[tokio::test]
async fn spec_4_1_teamchat_commands_answer_inline() {
    let llm = llm::openai(vec![
        Reply::Text("the first answer"),
        Reply::Text("the inline answer"),
        Reply::Slow(Duration::from_secs(4), "a slow mention"),
        Reply::Slow(Duration::from_secs(4), "a slow command"),
    ])
    .await;
    let api = platform(json!({"ok": true})).await;
    let mut env = api.env(SIGNING_SECRET);
    env.extend(openai_env(&llm.url));
    let server = Server::start_with_owned(&env);

    // Nothing known about the agent's pace yet: acknowledged, answered through response_url.
    let (body, took) = command(&server, &command_form(&api, "what is 1+1?", "1")).await;
    assert_eq!(body["response_type"], "ephemeral", "{body}");
    assert!(body["text"].as_str().unwrap().contains("Working on it"));
    assert!(took < Duration::from_secs(1), "{took:?}");
    let responses = eventually(20, async || {
        let r = api.responses();
        (!r.is_empty()).then_some(r)
    })
    .await;
    assert_eq!(responses[0].0, "T1/1/token");
    assert_eq!(
        responses[0].1,
        json!({"response_type": "in_channel", "text": "the first answer"})
    );

    // The agent was fast: the next command is answered inline.
    let (body, _) = command(&server, &command_form(&api, "and 2+2?", "2")).await;
    assert_eq!(
        body,
        json!({"response_type": "in_channel", "text": "the inline answer"})
    );

    // A slow run (a mention's reply) makes the next command deferred again, well within 3 s.
    let mention = callback("EvSlowRun", mention("<@UBOT> take your time", None));
    assert_eq!(signed(&server, "events", &mention).await.0, StatusCode::OK);
    posts(&api, 1).await;
    let (body, took) = command(&server, &command_form(&api, "and 3+3?", "3")).await;
    assert_eq!(body["response_type"], "ephemeral", "{body}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    let responses = eventually(20, async || {
        let r = api.responses();
        (r.len() == 2).then_some(r)
    })
    .await;
    assert_eq!(responses[1].0, "T1/3/token");
    assert_eq!(responses[1].1["text"], "a slow command");

    // Usage hint, and requests that are not the platform's.
    let (body, _) = command(&server, "command=%2Fask&text=++&user_id=U1").await;
    assert!(
        body["text"].as_str().unwrap().contains("Usage: /ask"),
        "{body}"
    );
    let forged = "command=%2Fask&text=hi&response_url=https%3A%2F%2Fevil.example%2Fhook";
    assert_error(
        &signed(&server, "commands", forged).await,
        StatusCode::BAD_REQUEST,
        "hooks origin",
    );
    assert_error(
        &signed(&server, "commands", "command=%2Fask&text=hi").await,
        StatusCode::BAD_REQUEST,
        "response_url",
    );
    assert_eq!(
        llm.requests().len(),
        4,
        "the usage hint and refusals run no agent"
    );
    let entry = server.adapter("teamchat").await.unwrap();
    assert_eq!(
        (entry["status"].as_str(), &entry["error_count"]),
        (Some("running"), &json!(0)),
        "{entry}"
    );
}

#[tokio::test]
async fn spec_7_teamchat_secrets_unset_are_a_503_and_an_error_naming_them() {
    let server = Server::start();
    let entry = server.adapter("teamchat").await.unwrap();
    // Spec 5 rule 4 and 7: status `error`, the message saying the signing secret (and the bot
    // token) is not set; `missing_settings` lets the dashboard offer to set them.
    assert_eq!(
        (
            &entry["status"],
            &entry["error_count"],
            &entry["error_message"]
        ),
        (
            &json!("error"),
            &json!(1),
            &json!(
                "ConfigError: SERVICE_TEAMCHAT_SIGNING_SECRET and SERVICE_TEAMCHAT_BOT_TOKEN \
                 are not set"
            )
        ),
        "{entry}"
    );
    assert_eq!(
        entry["missing_settings"],
        json!([
            "SERVICE_TEAMCHAT_SIGNING_SECRET",
            "SERVICE_TEAMCHAT_BOT_TOKEN"
        ])
    );

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
    assert_eq!(entry["status"], "error", "{entry}");

    // Only the bot token missing: requests are served, the entry names the token.
    let server = Server::start_with(&[("SERVICE_TEAMCHAT_SIGNING_SECRET", SIGNING_SECRET)]);
    let entry = server.adapter("teamchat").await.unwrap();
    assert_eq!(
        (&entry["status"], &entry["error_message"]),
        (
            &json!("error"),
            &json!("ConfigError: SERVICE_TEAMCHAT_BOT_TOKEN is not set")
        ),
        "{entry}"
    );
    assert_eq!(
        entry["missing_settings"],
        json!(["SERVICE_TEAMCHAT_BOT_TOKEN"])
    );
    assert_eq!(
        signed(&server, "events", handshake).await.1["challenge"],
        "c"
    );
}

#[tokio::test]
async fn spec_4_2_rule_2_the_configured_profile_answers_and_a_missing_one_falls_back() {
    let llm = llm::openai(vec![
        Reply::Text("as the concierge"),
        Reply::Text("as the default"),
    ])
    .await;
    let api = platform(json!({"ok": true})).await;
    let mut env = api.env(SIGNING_SECRET);
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
