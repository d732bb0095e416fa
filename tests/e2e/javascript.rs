//! An adapter written in JavaScript (`adapters-wasm/examples/js-echo`, built with
//! componentize-js) through the real binary: hot-loaded with its grant, it answers over HTTP,
//! sends with the standard `fetch` (wasi:http) to granted origins only, handles an event once
//! (a kv claim), runs an agent, and serves its tool to an agent.
//!
//! The npm tools are the example's own (`npm install` in its folder, as `.ci/run` does). Without
//! them the test says so loudly and passes without running; with `CI=true` that is a failure.

use std::process::Command;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::fakes::llm::{self, Reply};
use crate::guests::{js_echo, js_example};
use crate::support::{
    Server, assert_error, eventually, openai_env, spawn_fake, stream_frames, tool_available,
};
use crate::wasm::drop_in;

/// Whether npm and the example's componentize-js can run here; panics on CI when they cannot.
pub fn npm_tools_available() -> bool {
    let npm_runs = Command::new("npm")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    tool_available(
        npm_runs
            && js_example()
                .join("node_modules/.bin/componentize-js")
                .exists(),
        "JAVASCRIPT ADAPTER TEST SKIPPED: npm or the example's tools are missing \
         (run `npm install` in adapters-wasm/examples/js-echo)",
    )
}

#[tokio::test]
async fn a_javascript_component_claims_events_runs_agents_and_serves_a_tool() {
    if !npm_tools_available() {
        return;
    }
    let wasm = js_echo();
    let fake = llm::openai(vec![
        Reply::Text("Yes, it is ready."),
        Reply::Tools(vec![(
            "call_js",
            "js_word_count",
            json!({"text": "one two  three \u{1F980}"}),
        )]),
        Reply::Text("Four words."),
    ])
    .await;
    let site =
        spawn_fake(axum::Router::new().route("/page", axum::routing::get(|| async { "a page" })))
            .await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    let grant = std::fs::read_to_string(js_example().join("grant.toml")).unwrap();
    let grant = format!("{grant}outbound_hosts = [\"{site}\"]\n");
    drop_in(&server, "js-echo", &wasm, &grant);

    // The engine makes a 12 MB component; a debug build compiles it in tens of seconds.
    let entry = eventually(240, async || {
        let entry = server.adapter("js-echo").await?;
        assert_ne!(entry["status"], "error", "refused: {entry}");
        (entry["status"] == "running").then_some(entry)
    })
    .await;
    assert_eq!(
        (entry["kind"].as_str(), entry["version"].as_str()),
        (Some("wasm"), Some("0.1.0"))
    );
    assert_eq!(
        entry["capabilities"],
        json!([format!("origin:{site}"), "agent", "kv"]),
        "{entry}"
    );
    let ungranted = entry["metadata"]["ungranted_imports"].as_str().unwrap();
    assert!(
        ungranted.contains("jobs") && !ungranted.contains("kv"),
        "componentize-js imports the whole world; only what it calls is granted: {ungranted}"
    );

    let server = &server;
    assert_eq!(
        reqwest::get(server.url("/api/adapters/js-echo/hello"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "hello from js-echo 0.1.0"
    );
    assert_eq!(
        reqwest::get(server.url("/api/adapters/js-echo/hello?name=Ada%20L."))
            .await
            .unwrap()
            .text()
            .await
            .unwrap(),
        "hello Ada L., from js-echo 0.1.0"
    );
    assert_eq!(
        server
            .send_text(
                Method::POST,
                "/api/adapters/js-echo/echo",
                "hi from Rust \u{1F980}"
            )
            .await,
        (StatusCode::OK, "js-echo got: hi from Rust \u{1F980}".into())
    );

    // Errors of the helper module: `{"error": ...}` with the status the handler chose.
    let not_json = server
        .send_text(Method::POST, "/api/adapters/js-echo/ask", "{not json")
        .await;
    assert_eq!(not_json.0, StatusCode::BAD_REQUEST);
    let not_json: Value = serde_json::from_str(&not_json.1).unwrap();
    assert!(
        not_json["error"]
            .as_str()
            .unwrap()
            .starts_with("the body is not JSON"),
        "{not_json}"
    );
    assert_error(
        &server
            .post(
                "/api/adapters/js-echo/ask",
                json!({"id": "", "prompt": "x"}),
            )
            .await,
        StatusCode::BAD_REQUEST,
        "id must be a string",
    );

    // An event runs the agent once: the claim turns the retry away.
    let event = json!({"id": "evt-1", "prompt": "Is it ready?"});
    let (status, answer) = server
        .post("/api/adapters/js-echo/ask", event.clone())
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["reply"], "Yes, it is ready.");
    let trace_id = answer["trace_id"].as_str().unwrap();
    let (_, trace) = server.get(&format!("/api/traces/{trace_id}")).await;
    assert_eq!(trace["status"], "ok", "{trace}");
    assert_eq!(
        server.post("/api/adapters/js-echo/ask", event).await,
        (StatusCode::OK, json!({"duplicate": true}))
    );
    let requests = fake.requests();
    assert_eq!(requests.len(), 1, "the retry ran no agent");
    let prompt = requests[0].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "user")
        .unwrap();
    assert_eq!(prompt["content"], "Is it ready?");

    // An agent run: the scripted model calls the JavaScript tool and reads its result.
    let frames = stream_frames(server, json!({"prompt": "count them"})).await;
    let result = frames
        .iter()
        .find(|f| f["type"] == "tool_result")
        .unwrap_or_else(|| panic!("no tool result: {frames:#?}"));
    assert_eq!(
        (result["name"].as_str(), result["output"].as_str()),
        (Some("js_word_count"), Some("4")),
        "{result}"
    );
    assert_eq!(frames.last().unwrap()["type"], "done", "{frames:#?}");
    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    let offered = requests[1].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "js_word_count")
        .expect("the model was offered js_word_count");
    assert_eq!(
        offered["function"]["parameters"]["required"],
        json!(["text"])
    );

    let entry = server.adapter("js-echo").await.unwrap();
    assert!(entry["last_activity_at"].is_string(), "{entry}");
    assert_eq!(entry["error_count"], 0, "nothing was refused: {entry}");

    // `fetch` (wasi:http) reaches the granted origin; any other is refused before it leaves,
    // and the refusal is on the entry.
    assert_eq!(
        server
            .send_text(
                Method::GET,
                &format!("/api/adapters/js-echo/fetch?url={site}/page"),
                ""
            )
            .await,
        (StatusCode::OK, "200\na page".to_owned())
    );
    let (status, said) = server
        .send_text(
            Method::GET,
            "/api/adapters/js-echo/fetch?url=http://127.0.0.1:9/elsewhere",
            "",
        )
        .await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{said}");
    assert!(said.contains("fetch failed"), "{said}");
    let entry = server.adapter("js-echo").await.unwrap();
    let error = entry["error_message"].as_str().unwrap_or_default();
    assert!(
        error.starts_with("CapabilityDenied:") && error.contains("127.0.0.1:9 is not granted"),
        "{entry}"
    );
}
