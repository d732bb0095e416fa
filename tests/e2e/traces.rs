//! `/api/traces`: runs recorded through the library's trace API on the server's database.

use reqwest::StatusCode;
use serde_json::json;
use service_runtime::traces::{self, LlmCall, NewTrace, Outcome, ToolInvocation};

use crate::support::{Server, assert_error};

fn record_run(server: &Server, prompt: &str, error: Option<&str>) -> String {
    server
        .db()
        .blocking(|conn| {
            let id = traces::start(
                conn,
                &NewTrace {
                    agent_profile_name: Some("default"),
                    source: "chat",
                    provider: "offline",
                    model: "offline",
                    prompt,
                    ..NewTrace::default()
                },
            )
            .unwrap();
            let at = service_runtime::db::now();
            traces::record_llm_call(
                conn,
                &id,
                &LlmCall {
                    step: 0,
                    provider: "offline",
                    model: "offline",
                    response_text: Some("calling a tool"),
                    started_at: &at,
                    latency_ms: 4,
                    ..LlmCall::default()
                },
            )
            .unwrap();
            let input = json!({"title": "todo"});
            traces::record_tool_invocation(
                conn,
                &id,
                &ToolInvocation {
                    step: 1,
                    call_id: Some("c1"),
                    tool_name: "create_note",
                    input: &input,
                    output: Some("note 1"),
                    started_at: &at,
                    latency_ms: 2,
                    ..ToolInvocation::default()
                },
            )
            .unwrap();
            traces::finish(
                conn,
                &id,
                &Outcome {
                    response: error.is_none().then_some("done"),
                    error,
                    latency_ms: 12,
                    input_tokens: Some(30),
                    output_tokens: Some(7),
                },
            )
            .unwrap();
            Ok(id)
        })
        .unwrap()
}

#[tokio::test]
async fn lists_newest_first_with_paging() {
    let server = Server::start();
    for prompt in ["one", "two", "three"] {
        record_run(&server, prompt, None);
    }
    let (status, page) = server.get("/api/traces?limit=2").await;
    assert_eq!(status, StatusCode::OK);
    let prompts: Vec<&str> = page["traces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["prompt"].as_str().unwrap())
        .collect();
    assert_eq!(prompts, ["three", "two"]);
    assert_eq!(
        (
            page["total"].as_i64(),
            page["limit"].as_i64(),
            page["offset"].as_i64()
        ),
        (Some(3), Some(2), Some(0))
    );
    let (_, rest) = server.get("/api/traces?limit=2&offset=2").await;
    assert_eq!(rest["traces"][0]["prompt"], "one");

    for bad in ["limit=0", "limit=501", "limit=abc", "offset=-1"] {
        assert_error(
            &server.get(&format!("/api/traces?{bad}")).await,
            StatusCode::BAD_REQUEST,
            "",
        );
    }
}

#[tokio::test]
async fn shows_a_trace_with_its_steps_and_error_status() {
    let server = Server::start();
    let id = record_run(&server, "fails", Some("provider timed out"));
    let (status, trace) = server.get(&format!("/api/traces/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(trace["status"], "error");
    assert_eq!(trace["error_message"], "provider timed out");
    assert_eq!(trace["latency_ms"], 12);
    let steps = trace["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    assert_eq!(
        (steps[0]["kind"].as_str(), steps[0]["latency_ms"].as_i64()),
        (Some("llm_call"), Some(4))
    );
    assert_eq!(steps[1]["kind"], "tool_invocation");
    assert_eq!(steps[1]["input"], json!({"title": "todo"}));
    assert_eq!(steps[1]["output"], "note 1");
    assert_error(
        &server.get("/api/traces/missing").await,
        StatusCode::NOT_FOUND,
        "no trace",
    );
}
