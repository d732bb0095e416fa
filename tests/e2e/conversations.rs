//! Conversations through the real binary: a chat carries its earlier turns to the model within
//! the history budget, the listing and the messages, and the errors around them.

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

    // Deleted, it is gone with its messages.
    let (status, _) = server.delete(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = server.get(&format!("/api/conversations/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
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
