//! The bundled voice component through the real binary: the ask-first gate, a call placed
//! through a fake of the provider's Calls API, the conversation the fake then drives over
//! signed webhooks (an agent answering each speech result), bad signatures, silence, and the
//! confirmed booking written to the calendar (a fake Google Calendar behind the calendar
//! component).

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fakes::google_calendar::{self, FakeGoogle};
use crate::fakes::llm::{self, Reply};
use crate::fakes::twilio::{self, FakeTwilio, PUBLIC_BASE, Provider};
use crate::support::{Server, eventually, openai_env};

fn calls(tool: &'static str, input: Value) -> [Reply; 2] {
    [Reply::Tools(vec![("t1", tool, input)]), Reply::Text("done")]
}

async fn tool_call(server: &Server) -> Value {
    let (status, answer) = server
        .post("/api/chat", json!({"prompt": "book me a table"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer["tool_calls"][0].clone()
}

fn output(call: &Value) -> Value {
    let text = call["output"]
        .as_str()
        .unwrap_or_else(|| panic!("the tool failed: {call}"));
    serde_json::from_str(text).unwrap()
}

async fn gate(server: &Server, value: &str) {
    let (status, body) = server
        .post(
            "/api/integrations/voice/keys",
            json!({"env_var": "SERVICE_VOICE_CALLS_ALLOWED", "value": value}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

fn says(twiml: &twilio::Twiml) -> String {
    twiml.says.join(" ")
}

#[tokio::test]
async fn a_reservation_call_is_held_by_the_agent_and_booked() {
    let twilio = FakeTwilio::start().await;
    let google = FakeGoogle::start(Vec::new()).await;
    let chez_nous = json!({
        "venue_name": "Chez Nous",
        "to_number": "+14155550123",
        "reservation_datetime": "2099-11-28T19:30",
        "party_size": 4,
        "notes": "Name: Ana. 8 pm is fine too.",
    });
    let mut bistro = chez_nous.clone();
    bistro["venue_name"] = json!("Bistro Quiet");
    let mut script = Vec::new();
    script.extend(calls("request_reservation_call", chez_nous.clone()));
    script.extend(calls("request_reservation_call", chez_nous.clone()));
    script.push(Reply::Text("Under the name Ana, please."));
    script.push(Reply::Text("Wonderful, thank you. Goodbye! [CONFIRMED]"));
    script.extend(calls(
        "get_reservation_calls",
        json!({"status": "confirmed"}),
    ));
    script.extend(calls("request_reservation_call", bistro));
    script.extend(calls("get_reservation_calls", json!({})));
    script.extend(calls("request_reservation_call", chez_nous));
    let llm = llm::openai(script).await;
    let mut env = openai_env(&llm.url);
    env.extend(twilio.env());
    env.extend(google.env(google_calendar::REFRESH_TOKEN));
    env.push(("SERVICE_CALENDAR_WRITE_ALLOWED", "true".into()));
    env.push(("SERVICE_TZ", "Europe/Paris".into()));
    let server = Server::start_with_owned(&env);
    let entry = server.adapter("voice").await.unwrap();
    assert_eq!(entry["status"], "running", "{entry}");
    let provider = Provider {
        server: server.url.clone(),
        token: twilio::AUTH_TOKEN.into(),
    };

    // The gate is closed: nothing is dialled.
    let refused = tool_call(&server).await;
    let error = refused["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{refused}"));
    assert!(
        error.contains("SERVICE_VOICE_CALLS_ALLOWED=true"),
        "{error}"
    );
    assert!(twilio.calls().is_empty());

    gate(&server, "true").await;
    let placed = output(&tool_call(&server).await);
    assert_eq!(
        (placed["call_id"].as_u64(), placed["status"].as_str()),
        (Some(1), Some("in_progress"))
    );
    let call = twilio.calls()[0].clone();
    assert_eq!(call.field("To"), Some("+14155550123"));
    assert_eq!(call.field("From"), Some(twilio::FROM_NUMBER));
    let answer_url = format!("{PUBLIC_BASE}/api/adapters/voice/calls/1/answer");
    assert_eq!(call.field("Url"), Some(answer_url.as_str()));
    assert_eq!(
        call.field("StatusCallback"),
        Some(format!("{PUBLIC_BASE}/api/adapters/voice/calls/1/status").as_str())
    );

    // Only the provider's signature opens the webhooks.
    let params = [("CallSid", "CA1"), ("CallStatus", "in-progress")];
    let forged = [
        None,
        Some(twilio::signature("another-token", &answer_url, &params)),
        Some(twilio::signature(
            twilio::AUTH_TOKEN,
            &server.url("/api/adapters/voice/calls/1/answer"),
            &params,
        )),
        Some("not base64!".to_owned()),
    ];
    for signature in &forged {
        let (status, body) = provider
            .post_signed(&answer_url, &params, signature.as_deref())
            .await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{signature:?}: {body}");
    }
    let tampered = twilio::signature(twilio::AUTH_TOKEN, &answer_url, &params);
    let (status, _) = provider
        .post_signed(
            &answer_url,
            &[("CallSid", "CA2"), ("CallStatus", "in-progress")],
            Some(&tampered),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "a changed parameter breaks the signature"
    );
    let (status, _) = provider
        .post(
            &format!("{PUBLIC_BASE}/api/adapters/voice/calls/99/answer"),
            &params,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let heard = provider
        .converse(
            &call,
            "CA00000000000000000000000000000001",
            &[
                "Yes, we have a table at half past seven. Under which name?",
                "Perfect, four people at seven thirty for Ana. See you then.",
            ],
        )
        .await;
    assert!(
        says(&heard[0]).contains("a table for 4 people on Saturday, November 28 at 7:30 PM"),
        "{heard:?}"
    );
    assert_eq!(says(&heard[1]), "Under the name Ana, please.");
    assert!(heard[1].gather.is_some());
    assert_eq!(says(&heard[2]), "Wonderful, thank you. Goodbye!");
    assert!(heard[2].hangup && heard[2].gather.is_none());

    // The agent's second turn saw the briefing and the call so far.
    let turns = llm.requests();
    let second = turns
        .iter()
        .find(|r| r.body.to_string().contains("Perfect, four people"))
        .unwrap()
        .body
        .to_string();
    for said in [
        "You are on a phone call with Chez Nous",
        "8 pm is fine too",
        "Under which name?",
        "Under the name Ana, please.",
    ] {
        assert!(second.contains(said), "{said} missing from {second}");
    }

    // The booking goes into the calendar from a job.
    eventually(20, async || {
        let (_, tasks) = server.get("/api/tasks?status=completed").await;
        tasks["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["title"].as_str().is_some_and(|t| t.contains("voice")))
            .cloned()
    })
    .await;
    let inserted = google.inserted();
    assert_eq!(inserted.len(), 1, "{inserted:?}");
    assert_eq!(inserted[0].1["summary"], "Table for 4 at Chez Nous");
    assert_eq!(inserted[0].1["start"]["dateTime"], "2099-11-28T18:30:00Z");
    assert_eq!(inserted[0].1["end"]["dateTime"], "2099-11-28T20:30:00Z");

    let confirmed = output(&tool_call(&server).await);
    let first = &confirmed["calls"][0];
    assert_eq!(
        confirmed["calls"].as_array().unwrap().len(),
        1,
        "{confirmed}"
    );
    assert_eq!(
        (&first["status"], &first["provider_status"]),
        (&json!("confirmed"), &json!("completed"))
    );
    assert_eq!(first["calendar"]["status"], "created", "{first}");
    assert_eq!(first["transcript"].as_array().unwrap().len(), 5);
    assert_eq!(first["transcript"][1]["speaker"], "venue");
    // The call is a conversation the runtime keeps, one exchange per answer the agent gave.
    let (_, calls) = server.get("/api/conversations?source=voice").await;
    assert_eq!(calls["total"], 1, "{calls}");
    assert!(
        calls["conversations"][0]["turns"].as_i64().unwrap() >= 1,
        "{calls}"
    );

    // A second call where nobody says anything.
    let second_call = output(&tool_call(&server).await);
    assert_eq!(second_call["call_id"], 2);
    let call = twilio.calls()[1].clone();
    let heard = provider
        .converse(&call, "CA00000000000000000000000000000002", &["", ""])
        .await;
    assert!(
        says(&heard[1]).starts_with("Sorry, I did not catch that."),
        "{heard:?}"
    );
    assert!(heard[2].hangup);
    let all = output(&tool_call(&server).await);
    let statuses: Vec<(&Value, &Value)> = all["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (&c["venue_name"], &c["status"]))
        .collect();
    assert_eq!(
        statuses,
        [
            (&json!("Bistro Quiet"), &json!("no_answer")),
            (&json!("Chez Nous"), &json!("confirmed"))
        ]
    );

    // Closed again: the next call is refused at once.
    gate(&server, "false").await;
    let refused = tool_call(&server).await;
    assert!(
        refused["error"].as_str().unwrap().contains("turned off"),
        "{refused}"
    );
    assert_eq!(twilio.calls().len(), 2);

    let log = std::fs::read_to_string(server.data_dir.join("server.log")).unwrap();
    assert!(
        !log.contains(twilio::AUTH_TOKEN),
        "the auth token reached the log"
    );
    assert_eq!(server.adapter("voice").await.unwrap()["status"], "running");
}

#[tokio::test]
async fn without_its_settings_the_voice_adapter_offers_nothing_and_says_why() {
    let server = Server::start();
    let entry = eventually(10, async || {
        server
            .adapter("voice")
            .await
            .filter(|e| e["status"] == "error" && e["missing_settings"] != json!([]))
    })
    .await;
    assert!(
        entry["missing_settings"]
            .as_array()
            .unwrap()
            .contains(&json!("SERVICE_VOICE_TWILIO_AUTH_TOKEN")),
        "{entry}"
    );
    let (_, tools) = server.get("/api/tools").await;
    assert!(!tools.to_string().contains("reservation"), "{tools}");
    let (status, body) = server
        .post("/api/adapters/voice/calls/1/answer", json!({}))
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
}
