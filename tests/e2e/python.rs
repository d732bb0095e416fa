//! An adapter written in Python (`adapters-wasm/examples/python-echo`, built with
//! componentize-py) through the real binary: hot-loaded without a grant, it answers over HTTP and
//! serves its tool to an agent.
//!
//! Without componentize-py on PATH the test says so loudly and passes without running; with
//! `CI=true` that is a failure.

use std::process::Command;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::fakes::llm::{self, Reply};
use crate::guests::{COMPONENTIZE_PY, python_echo};
use crate::support::{Server, eventually, openai_env, stream_frames, tool_available};

/// Whether componentize-py can run here; panics on CI when it cannot.
pub fn componentize_py_available() -> bool {
    let runs = Command::new(COMPONENTIZE_PY)
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    tool_available(
        runs,
        "PYTHON ADAPTER TEST SKIPPED: componentize-py is not on PATH \
         (pip install componentize-py==0.25.1)",
    )
}

#[tokio::test]
async fn a_python_component_serves_http_and_a_tool_to_agents() {
    if !componentize_py_available() {
        return;
    }
    let wasm = python_echo();
    let fake = llm::openai(vec![
        Reply::Tools(vec![(
            "call_py",
            "python_reverse",
            json!({"text": "stressed \u{1F40D}"}),
        )]),
        Reply::Text("It says: snake, desserts."),
    ])
    .await;
    let server = Server::start_with_owned(&openai_env(&fake.url));

    // Hot-loaded while the server runs, written beside and renamed so the watcher never sees
    // half a file. It calls nothing that needs a grant, so it has no grant file.
    let adapters = server.data_dir.join("adapters");
    std::fs::create_dir_all(&adapters).unwrap();
    std::fs::copy(&wasm, adapters.join(".python-echo.partial")).unwrap();
    std::fs::rename(
        adapters.join(".python-echo.partial"),
        adapters.join("python-echo.wasm"),
    )
    .unwrap();

    // The interpreter makes an 18 MB component; a debug build compiles it in tens of seconds.
    let entry = eventually(240, async || {
        let entry = server.adapter("python-echo").await?;
        assert_ne!(entry["status"], "error", "refused: {entry}");
        (entry["status"] == "running").then_some(entry)
    })
    .await;
    assert_eq!(
        (
            entry["kind"].as_str(),
            entry["version"].as_str(),
            entry["supports_toggle"].as_bool()
        ),
        (Some("wasm"), Some("0.1.0"), Some(false))
    );
    assert_eq!(entry["capabilities"], json!([]), "it was granted nothing");
    let ungranted = entry["metadata"]["ungranted_imports"].as_str().unwrap();
    assert!(
        ungranted.contains("kv") && ungranted.contains("agent"),
        "every import of the world, none of them needed: {ungranted}"
    );

    assert_eq!(
        server
            .send_text(
                Method::POST,
                "/api/adapters/python-echo/echo",
                "hi from Rust \u{1F980}"
            )
            .await,
        (
            StatusCode::OK,
            "python-echo got: hi from Rust \u{1F980}".into()
        )
    );
    assert_eq!(
        server
            .send_text(Method::GET, "/api/adapters/python-echo/hello", "")
            .await,
        (StatusCode::OK, "hello from python-echo 0.1.0".into())
    );
    assert_eq!(
        server
            .send_text(
                Method::GET,
                "/api/adapters/python-echo/hello?name=Ada%20L.",
                ""
            )
            .await,
        (
            StatusCode::OK,
            "hello Ada L., from python-echo 0.1.0".into()
        )
    );
    assert_eq!(
        server
            .send_text(Method::GET, "/api/adapters/python-echo/nowhere", "")
            .await
            .0,
        StatusCode::NOT_FOUND
    );
    assert!(
        server.adapter("python-echo").await.unwrap()["last_activity_at"].is_string(),
        "its handler touched the registry"
    );

    // An agent run: the scripted model calls the Python tool and reads its result.
    let frames = stream_frames(&server, json!({"prompt": "reverse it"})).await;
    let result = frames
        .iter()
        .find(|f| f["type"] == "tool_result")
        .unwrap_or_else(|| panic!("no tool result: {frames:#?}"));
    assert_eq!(
        (result["name"].as_str(), result["output"].as_str()),
        (Some("python_reverse"), Some("\u{1F40D} desserts")),
        "{result}"
    );
    let done = frames.last().unwrap();
    assert_eq!(done["type"], "done", "{frames:#?}");

    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    let offered = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "python_reverse")
        .expect("the model was offered python_reverse");
    assert_eq!(
        offered["function"]["parameters"]["required"],
        json!(["text"])
    );
    let answer: &Value = requests[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .expect("a tool message went back to the model");
    assert_eq!(
        (answer["tool_call_id"].as_str(), answer["content"].as_str()),
        (Some("call_py"), Some("\u{1F40D} desserts"))
    );

    let trace_id = done["trace_id"].as_str().unwrap();
    let (_, trace) = server.get(&format!("/api/traces/{trace_id}")).await;
    assert_eq!(trace["status"], "ok", "{trace}");
    let step = trace["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "tool_invocation")
        .unwrap_or_else(|| panic!("no tool step: {trace}"));
    assert_eq!(
        (step["tool_name"].as_str(), step["output"].as_str()),
        (Some("python_reverse"), Some("\u{1F40D} desserts"))
    );
}
