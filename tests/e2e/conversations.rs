//! Conversations through the real binary: a chat carries its earlier turns to the model within
//! the history budget, the listing and the messages, and the errors around them.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fakes::llm::{self, Reply};
use crate::support::{Server, assert_error, openai_env, stream_frames};

/// The messages a model request carried, as (role, content) pairs.
fn sent(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_chat_carries_its_earlier_turns_within_the_budget() {
    let fake = llm::openai(vec![
        Reply::Text("Hello Ada."),
        Reply::Tools(vec![("t1", "search_notes", json!({"query": "Ada"}))]),
        Reply::Text("You are Ada."),
        Reply::Text("Still Ada."),
    ])
    .await;
    let server = Server::start_with_config(
        "[conversations]\nhistory_messages = 3\n",
        &openai_env(&fake.url),
    );

    // The first turn starts a conversation, titled by its prompt.
    let (status, first) = server
        .post("/api/chat", json!({"prompt": "My name is Ada."}))
        .await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let id = first["conversation_id"].as_str().unwrap().to_owned();

    // The second continues it: the model sees the first exchange.
    let (status, second) = server
        .post(
            "/api/chat",
            json!({"prompt": "What is my name?", "conversation_id": id}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert_eq!(second["conversation_id"], id.as_str());
    let requests = fake.requests();
    let earlier: Vec<(String, String)> = sent(&requests[1].body)
        .into_iter()
        .filter(|(role, _)| role != "system")
        .collect();
    let pair = |role: &str, text: &str| (role.to_owned(), text.to_owned());
    assert_eq!(
        earlier,
        [
            pair("user", "My name is Ada."),
            pair("assistant", "Hello Ada."),
            pair("user", "What is my name?"),
        ]
    );

    // The third, streamed: of the four earlier messages the budget keeps the last three.
    let frames = stream_frames(
        &server,
        json!({"prompt": "And now?", "conversation_id": id}),
    )
    .await;
    let done = frames.last().unwrap();
    assert_eq!(
        (done["type"].as_str(), done["conversation_id"].as_str()),
        (Some("done"), Some(id.as_str()))
    );
    let third: Vec<(String, String)> = sent(&fake.requests()[3].body)
        .into_iter()
        .filter(|(role, _)| role != "system")
        .collect();
    assert_eq!(
        third,
        [
            pair("assistant", "Hello Ada."),
            pair("user", "What is my name?"),
            pair("assistant", "You are Ada."),
            pair("user", "And now?"),
        ],
        "the oldest went first; the tool call itself is not history"
    );

    // Listed newest first, with its messages in order.
    let (_, listing) = server.get("/api/conversations").await;
    let conversation = &listing["conversations"][0];
    assert_eq!(
        (
            conversation["id"].as_str(),
            conversation["title"].as_str(),
            conversation["agent"].as_str(),
            conversation["source"].as_str(),
            conversation["turns"].as_i64()
        ),
        (
            Some(id.as_str()),
            Some("My name is Ada."),
            Some("default"),
            Some("chat"),
            Some(3)
        )
    );
    assert_eq!(listing["total"], 1);
    let (_, shown) = server.get(&format!("/api/conversations/{id}")).await;
    let messages = shown["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "user",
            "assistant",
            "user",
            "assistant"
        ]
    );
    assert_eq!(messages[3]["text"], "You are Ada.");
    assert_eq!(messages[3]["tool_calls"][0]["name"], "search_notes");
    assert_eq!(messages[3]["trace_id"], second["trace_id"]);
    assert!(messages[1].get("tool_calls").is_none());
    let (_, chats) = server.get("/api/conversations?source=teamchat").await;
    assert_eq!(chats["conversations"], json!([]));

    // Deleted, it is gone with its messages and what was written in its runs; the runs keep
    // their shape.
    let trace = format!("/api/traces/{}", second["trace_id"].as_str().unwrap());
    let (_, before) = server.get(&trace).await;
    assert!(before.to_string().contains("Ada"), "{before}");
    let (status, _) = server.delete(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, after) = server.get(&trace).await;
    assert!(!after.to_string().contains("Ada"), "{after}");
    assert_eq!(
        (
            &after["prompt"],
            &after["status"],
            &after["steps"].as_array().unwrap().len()
        ),
        (
            &json!(""),
            &before["status"],
            &before["steps"].as_array().unwrap().len()
        )
    );
    assert_eq!(after["steps"][1]["tool_name"], "search_notes", "{after}");
}

#[tokio::test]
async fn unknown_conversations_and_other_agents_are_refused_and_start_nothing() {
    let server = Server::start();
    let unknown = server
        .post(
            "/api/chat",
            json!({"prompt": "hi", "conversation_id": "no-such-conversation"}),
        )
        .await;
    assert_error(&unknown, StatusCode::NOT_FOUND, "no conversation");
    let (status, _) = server.get("/api/conversations/no-such-conversation").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = server
        .delete("/api/conversations/no-such-conversation")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Refused prompts leave no conversation behind.
    let empty = server.post("/api/chat", json!({"prompt": "  "})).await;
    assert_eq!(empty.0, StatusCode::BAD_REQUEST);
    let nobody = server
        .post("/api/chat", json!({"prompt": "hi", "agent": "nobody"}))
        .await;
    assert_eq!(nobody.0, StatusCode::NOT_FOUND);
    let (_, listing) = server.get("/api/conversations").await;
    assert_eq!(listing["total"], 0);

    let (_, first) = server.post("/api/chat", json!({"prompt": "hi"})).await;
    let id = first["conversation_id"].as_str().unwrap();
    server
        .post(
            "/api/agents",
            json!({"name": "other", "system_prompt": "x"}),
        )
        .await;
    let switched = server
        .post(
            "/api/chat",
            json!({"prompt": "hi", "conversation_id": id, "agent": "other"}),
        )
        .await;
    assert_error(
        &switched,
        StatusCode::BAD_REQUEST,
        "is with agent \"default\"",
    );
    assert_eq!(switched.1["field"], "agent");
    let (status, listing) = server.get("/api/conversations?limit=0").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{listing}");
}

/// A chat turn sent on its own task (the test sends the next one meanwhile).
fn ask(server: &Server, body: Value) -> tokio::task::JoinHandle<(StatusCode, Value)> {
    let url = server.url("/api/chat");
    tokio::spawn(async move {
        let response = reqwest::Client::new()
            .post(url)
            .json(&body)
            .send()
            .await
            .unwrap();
        (response.status(), response.json().await.unwrap())
    })
}

/// Opens a conversation, then sends two messages 300 ms apart while the first is answered
/// slowly; both answers, as they came.
async fn two_messages_at_once(
    server: &Server,
) -> (String, (StatusCode, Value), (StatusCode, Value)) {
    let (status, opened) = server.post("/api/chat", json!({"prompt": "Hi."})).await;
    assert_eq!(status, StatusCode::OK, "{opened}");
    let id = opened["conversation_id"].as_str().unwrap().to_owned();
    let first = ask(
        server,
        json!({"prompt": "First question?", "conversation_id": id}),
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = ask(
        server,
        json!({"prompt": "Second question?", "conversation_id": id}),
    );
    (id, first.await.unwrap(), second.await.unwrap())
}

fn texts(messages: &Value) -> Vec<&str> {
    messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["text"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn a_second_message_is_answered_after_the_first_and_sees_its_answer() {
    let fake = llm::openai(vec![
        Reply::Text("Hello."),
        Reply::Slow(Duration::from_millis(1500), "First answer."),
        Reply::Text("Second answer."),
    ])
    .await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    let (id, first, second) = two_messages_at_once(&server).await;
    assert_eq!(
        (first.0, first.1["text"].as_str()),
        (StatusCode::OK, Some("First answer."))
    );
    assert_eq!(
        (second.0, second.1["text"].as_str()),
        (StatusCode::OK, Some("Second answer."))
    );
    let sent_second = sent(&fake.requests()[2].body);
    let last = &sent_second[sent_second.len() - 3..];
    assert_eq!(
        last,
        [
            ("user".to_owned(), "First question?".to_owned()),
            ("assistant".to_owned(), "First answer.".to_owned()),
            ("user".to_owned(), "Second question?".to_owned()),
        ]
    );
    let (_, kept) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(
        texts(&kept["messages"]),
        [
            "Hi.",
            "Hello.",
            "First question?",
            "First answer.",
            "Second question?",
            "Second answer."
        ]
    );
}

#[tokio::test]
async fn with_reject_a_second_message_is_refused_while_the_first_is_answered() {
    let fake = llm::openai(vec![
        Reply::Text("Hello."),
        Reply::Slow(Duration::from_millis(1500), "First answer."),
        Reply::Text("Later answer."),
    ])
    .await;
    let server = Server::start_with_config(
        "[conversations]\ndouble_texting = \"reject\"\n",
        &openai_env(&fake.url),
    );
    let (id, first, second) = two_messages_at_once(&server).await;
    assert_eq!(first.0, StatusCode::OK);
    assert_error(&second, StatusCode::CONFLICT, "still being answered");
    // Once the first is answered, the conversation takes messages again.
    let (status, later) = server
        .post(
            "/api/chat",
            json!({"prompt": "Now?", "conversation_id": id}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{later}");
    let (_, kept) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(
        texts(&kept["messages"]),
        [
            "Hi.",
            "Hello.",
            "First question?",
            "First answer.",
            "Now?",
            "Later answer."
        ]
    );
}

#[tokio::test]
async fn with_interrupt_a_second_message_stops_the_first_and_is_answered_with_both() {
    let fake = llm::openai(vec![
        Reply::Text("Hello."),
        Reply::Slow(Duration::from_secs(10), "Never seen."),
        Reply::Text("Both answered."),
    ])
    .await;
    let server = Server::start_with_config(
        "[conversations]\ndouble_texting = \"interrupt\"\n",
        &openai_env(&fake.url),
    );
    let (id, first, second) = two_messages_at_once(&server).await;
    assert_error(&first, StatusCode::SERVICE_UNAVAILABLE, "cancelled");
    let (_, trace) = server
        .get(&format!(
            "/api/traces/{}",
            first.1["trace_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(trace["status"], "error");
    assert_eq!(
        (second.0, second.1["text"].as_str()),
        (StatusCode::OK, Some("Both answered."))
    );
    let sent_second = sent(&fake.requests()[2].body);
    let last = &sent_second[sent_second.len() - 2..];
    assert_eq!(
        last,
        [
            ("user".to_owned(), "First question?".to_owned()),
            ("user".to_owned(), "Second question?".to_owned()),
        ]
    );
    let (_, kept) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(
        texts(&kept["messages"]),
        [
            "Hi.",
            "Hello.",
            "First question?",
            "Second question?",
            "Both answered."
        ]
    );
}
