//! The agent engine through `/api/chat`, `/api/chat/stream` and `service-runtime run`, against
//! fake OpenAI and Anthropic servers.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fakes::llm::{self, Reply};
use crate::support::{Server, assert_error, command, eventually, openai_env, stream_frames};

fn types(frames: &[Value]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for frame in frames {
        let kind = frame["type"].as_str().unwrap();
        // Consecutive tokens collapse to one entry: the sequence is what matters.
        if !(kind == "token" && out.last() == Some(&"token")) {
            out.push(kind);
        }
    }
    out
}

fn tokens(frames: &[Value]) -> String {
    frames
        .iter()
        .filter(|f| f["type"] == "token")
        .map(|f| f["text"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn the_stream_names_its_trace_in_a_header_before_the_first_frame() {
    let server = Server::start();
    let response = reqwest::Client::new()
        .post(server.url("/api/chat/stream"))
        .json(&json!({"prompt": "ping"}))
        .send()
        .await
        .unwrap();
    // Known from the headers alone, so a client that stops the run can still link to it.
    let header = response.headers()["x-trace-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let text = response.text().await.unwrap();
    let last: Value = serde_json::from_str(
        text.lines()
            .rev()
            .find_map(|line| line.strip_prefix("data: "))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        (last["type"].as_str(), last["trace_id"].as_str()),
        (Some("done"), Some(header.as_str()))
    );
    assert!(
        !text.contains("\"started\""),
        "the frames are unchanged: {text}"
    );
}

#[tokio::test]
async fn offline_default_streams_a_labelled_answer_with_no_configuration() {
    let server = Server::start();
    let (_, health) = server.get("/api/health").await;
    assert_eq!(
        health["provider"],
        json!({"name": "offline", "model": "offline", "configured": true,
               "chosen_by": "nothing", "with_settings": []})
    );

    let frames = stream_frames(&server, json!({"prompt": "ping"})).await;
    assert_eq!(types(&frames), ["token", "done"]);
    assert!(
        frames.iter().filter(|f| f["type"] == "token").count() > 3,
        "several token frames"
    );
    assert!(tokens(&frames).starts_with("[offline]"));
    assert!(tokens(&frames).contains("\"ping\""));

    let trace_id = frames.last().unwrap()["trace_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, trace) = server.get(&format!("/api/traces/{trace_id}")).await;
    assert_eq!(
        (trace["status"].as_str(), trace["provider"].as_str()),
        (Some("ok"), Some("offline"))
    );

    let (status, answer) = server.post("/api/chat", json!({"prompt": "pong"})).await;
    assert_eq!(status, StatusCode::OK);
    assert!(answer["text"].as_str().unwrap().contains("\"pong\""));
    assert_eq!(answer["tool_calls"], json!([]));
}

/// The model calls `create_note`, reads the result, then answers.
pub(crate) fn note_script() -> Vec<Reply> {
    vec![
        Reply::Tools(vec![(
            "call_1",
            "create_note",
            json!({"title": "Groceries", "body": "oat milk"}),
        )]),
        Reply::Text("Saved your grocery note."),
    ]
}

pub(crate) async fn assert_note_run(server: &Server, frames: &[Value]) -> Value {
    assert_eq!(
        types(frames),
        ["tool_call", "tool_result", "token", "done"],
        "{frames:#?}"
    );
    assert_eq!(frames[0]["name"], "create_note");
    assert_eq!(
        frames[0]["input"],
        json!({"title": "Groceries", "body": "oat milk"})
    );
    assert_eq!(frames[1]["id"], frames[0]["id"]);
    let output: Value = serde_json::from_str(frames[1]["output"].as_str().unwrap()).unwrap();
    assert_eq!(output["title"], "Groceries");
    assert_eq!(tokens(frames), "Saved your grocery note.");

    let (_, health) = server.get("/api/health").await;
    assert_eq!(health["counts"]["notes"], 1, "the note row was written");
    let trace_id = frames.last().unwrap()["trace_id"].as_str().unwrap();
    let (_, trace) = server.get(&format!("/api/traces/{trace_id}")).await;
    assert_eq!(trace["status"], "ok");
    assert_eq!(trace["response"], "Saved your grocery note.");
    let kinds: Vec<&str> = trace["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["llm_call", "tool_invocation", "llm_call"]);
    assert_eq!(trace["steps"][1]["tool_name"], "create_note");
    trace
}

#[tokio::test]
async fn anthropic_tool_call_round_trip() {
    let fake = llm::anthropic(note_script()).await;
    let server = Server::start_with(&[
        ("SERVICE_PROVIDER", "anthropic"),
        ("SERVICE_ANTHROPIC_BASE_URL", &fake.url),
        ("ANTHROPIC_API_KEY", "sk-ant-test"),
        ("SERVICE_MODEL", "claude-test"),
    ]);
    let frames = stream_frames(&server, json!({"prompt": "remember oat milk"})).await;
    let trace = assert_note_run(&server, &frames).await;
    assert_eq!(trace["provider"], "anthropic");
    assert_eq!(trace["model"], "claude-test");

    let requests = fake.requests();
    assert_eq!(requests[0].headers["x-api-key"], "sk-ant-test");
    assert_eq!(requests[0].headers["anthropic-version"], "2023-06-01");
    assert!(requests[0].body["system"].is_string());
    assert!(
        requests[0].body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "create_note" && t["input_schema"]["type"] == "object")
    );
    let messages = &requests[1].body["messages"];
    assert_eq!(messages[1]["content"][0]["type"], "tool_use");
    assert_eq!(messages[2]["role"], "user");
    assert_eq!(messages[2]["content"][0]["type"], "tool_result");
    assert_eq!(messages[2]["content"][0]["tool_use_id"], "call_1");
}

#[tokio::test]
async fn parallel_tool_calls_and_a_tool_error_keep_the_loop_going() {
    let fake = llm::openai(vec![
        Reply::Tools(vec![
            ("a", "create_note", json!({"title": "one"})),
            ("b", "create_note", json!({"title": "two"})),
            ("c", "create_note", json!({"body": "no title"})),
        ]),
        Reply::Text("done"),
    ])
    .await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    let (status, answer) = server
        .post("/api/chat", json!({"prompt": "three notes"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["text"], "done");
    let calls = answer["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 3);
    assert!(
        calls[2]["error"]
            .as_str()
            .unwrap()
            .contains("invalid arguments"),
        "{}",
        calls[2]
    );
    let (_, health) = server.get("/api/health").await;
    assert_eq!(health["counts"]["notes"], 2);
    // The model saw the error as a tool result.
    let messages = &fake.requests()[1].body["messages"];
    assert!(messages[5]["content"].as_str().unwrap().contains("title"));
}

#[tokio::test]
async fn profile_tool_lists_limit_what_the_model_is_offered() {
    let fake = llm::openai(vec![Reply::Text("a"), Reply::Text("b")]).await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    // The calendar adapter's tool is accepted (a featured bundle recommends it) but not here.
    let limited = json!({"name": "Limited", "system_prompt": "x", "tools": "search_notes, create_calendar_event", "default_model": "small-model"});
    assert_eq!(
        server.post("/api/agents", limited).await.0,
        StatusCode::CREATED
    );
    let none = json!({"name": "Toolless", "system_prompt": "x", "tools": []});
    assert_eq!(
        server.post("/api/agents", none).await.0,
        StatusCode::CREATED
    );

    let (_, answer) = server
        .post("/api/chat", json!({"prompt": "hi", "agent": "Limited"}))
        .await;
    let first = &fake.requests()[0].body;
    let offered: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["search_notes"]);
    assert_eq!(first["model"], "small-model", "the profile's model");
    let (_, trace) = server
        .get(&format!(
            "/api/traces/{}",
            answer["trace_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(
        trace["warnings"],
        json!(["tool \"create_calendar_event\" is not registered; skipped"])
    );

    server
        .post(
            "/api/chat",
            json!({"prompt": "hi", "agent": "Toolless", "model": "request-model"}),
        )
        .await;
    let second = &fake.requests()[1].body;
    assert!(
        second.get("tools").is_none(),
        "an empty list offers no tools"
    );
    assert_eq!(second["model"], "request-model", "the request's model wins");
}

#[tokio::test]
async fn errors_before_streaming_are_http_statuses() {
    let server = Server::start_with(&[("SERVICE_PROVIDER", "anthropic")]);
    assert_error(
        &server
            .post("/api/chat/stream", json!({"prompt": " "}))
            .await,
        StatusCode::BAD_REQUEST,
        "prompt",
    );
    let unknown = server
        .post(
            "/api/chat/stream",
            json!({"prompt": "hi", "agent": "Nobody"}),
        )
        .await;
    assert_error(&unknown, StatusCode::NOT_FOUND, "no agent named");
    assert_eq!(unknown.1["field"], "agent");
    let (_, traces) = server.get("/api/traces").await;
    assert_eq!(
        traces["traces"],
        json!([]),
        "a request refused before it ran leaves no trace"
    );
    let unconfigured = server
        .post("/api/chat/stream", json!({"prompt": "hi"}))
        .await;
    assert_error(
        &unconfigured,
        StatusCode::SERVICE_UNAVAILABLE,
        "ANTHROPIC_API_KEY",
    );
    // Even a run refused before it started leaves an error trace.
    let (_, trace) = server
        .get(&format!(
            "/api/traces/{}",
            unconfigured.1["trace_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(trace["status"], "error");
    assert_error(
        &server.post("/api/chat", json!({"agent": "x"})).await,
        StatusCode::BAD_REQUEST,
        "prompt",
    );
}

#[tokio::test]
async fn provider_errors_become_clear_failures_with_error_traces() {
    let fake = llm::openai(vec![
        Reply::Status(
            401,
            json!({"error": {"message": "Incorrect API key provided: sk-test-***key"}}),
        ),
        Reply::Garbage,
        Reply::Status(400, json!({"error": {"message": "model not found"}})),
    ])
    .await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    let denied = server.post("/api/chat", json!({"prompt": "hi"})).await;
    assert_error(
        &denied,
        StatusCode::BAD_GATEWAY,
        "rejected the credentials (HTTP 401)",
    );
    assert!(
        !denied.1.to_string().contains("sk-test"),
        "the provider's echo of the key is dropped"
    );
    let (_, trace) = server
        .get(&format!(
            "/api/traces/{}",
            denied.1["trace_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(trace["status"], "error");
    assert_eq!(trace["steps"][0]["status"], "error");

    let frames = stream_frames(&server, json!({"prompt": "hi"})).await;
    assert_eq!(types(&frames), ["error"]);
    assert!(
        frames[0]["message"].as_str().unwrap().contains("malformed"),
        "{}",
        frames[0]
    );
    assert!(frames[0]["trace_id"].is_string());

    let bad = server.post("/api/chat", json!({"prompt": "hi"})).await;
    assert_error(&bad, StatusCode::BAD_GATEWAY, "HTTP 400: model not found");
}

#[tokio::test]
async fn rate_limits_and_server_errors_are_retried_with_a_bound() {
    let busy = json!({"error": {"message": "slow down"}});
    let fake = llm::openai(vec![
        Reply::Status(429, busy.clone()),
        Reply::Status(503, busy.clone()),
        Reply::Text("made it"),
        Reply::Status(500, busy.clone()),
        Reply::Status(500, busy.clone()),
        Reply::Status(500, busy.clone()),
        Reply::Status(500, busy),
    ])
    .await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    let (status, answer) = server.post("/api/chat", json!({"prompt": "hi"})).await;
    assert_eq!(
        (status, answer["text"].as_str()),
        (StatusCode::OK, Some("made it"))
    );
    assert_eq!(fake.requests().len(), 3);

    let failed = server.post("/api/chat", json!({"prompt": "hi"})).await;
    assert_error(&failed, StatusCode::BAD_GATEWAY, "HTTP 500: slow down");
    assert_eq!(fake.requests().len(), 7, "one try and three retries");
}

#[tokio::test]
async fn max_iterations_stops_a_model_that_never_answers() {
    let call = || Reply::Tools(vec![("x", "search_notes", json!({"query": "anything"}))]);
    let fake = llm::openai(vec![call(), call(), call()]).await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    std::fs::write(
        server.data_dir.join("config.toml"),
        "[engine]\nmax_iterations = 2\n",
    )
    .unwrap();
    let server = server.restart();
    let failed = server.post("/api/chat", json!({"prompt": "loop"})).await;
    assert_error(
        &failed,
        StatusCode::BAD_GATEWAY,
        "stopped after 2 iterations",
    );
    assert_eq!(fake.requests().len(), 2);
}

#[test]
fn max_iterations_below_one_is_refused_at_start() {
    let stderr = crate::support::refused_start("[engine]\nmax_iterations = 0\n").stderr;
    assert!(
        stderr.contains("max_iterations must be at least 1"),
        "{stderr}"
    );
}

#[tokio::test]
async fn delegation_runs_another_profile_as_a_linked_child_trace() {
    let fake = llm::openai(vec![
        Reply::Tools(vec![(
            "d1",
            "delegate_to_agent",
            json!({"agent": "Helper", "prompt": "sum 2 and 2"}),
        )]),
        Reply::Text("four"),
        Reply::Text("The helper says four."),
    ])
    .await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    let helper = json!({"name": "Helper", "system_prompt": "You add numbers.", "tools": []});
    assert_eq!(
        server.post("/api/agents", helper).await.0,
        StatusCode::CREATED
    );
    let (status, answer) = server
        .post("/api/chat", json!({"prompt": "ask the helper"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["text"], "The helper says four.");
    let result: Value =
        serde_json::from_str(answer["tool_calls"][0]["output"].as_str().unwrap()).unwrap();
    assert_eq!(result["answer"], "four");
    let (_, child) = server
        .get(&format!(
            "/api/traces/{}",
            result["trace_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(child["parent_trace_id"], answer["trace_id"]);
    assert_eq!(child["agent_profile_name"], "Helper");
    assert_eq!(
        fake.requests()[1].body["messages"][0]["content"],
        "You add numbers."
    );
}

#[tokio::test]
async fn a_client_that_disconnects_mid_stream_cancels_the_run() {
    let fake = llm::openai(vec![Reply::Slow(Duration::from_secs(20), "too late")]).await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    let response = reqwest::Client::new()
        .post(server.url("/api/chat/stream"))
        .json(&json!({"prompt": "take your time"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    eventually(10, async || (!fake.requests().is_empty()).then_some(())).await;
    drop(response);

    let trace = eventually(5, async || {
        let (_, list) = server.get("/api/traces").await;
        let trace = list["traces"][0].clone();
        (trace["status"] != "running").then_some(trace)
    })
    .await;
    assert_eq!(trace["status"], "error", "{trace}");
    assert!(
        trace["error_message"]
            .as_str()
            .unwrap()
            .contains("cancelled")
    );
}

#[tokio::test]
async fn cli_run_streams_the_answer_and_prints_the_trace_id() {
    let fake = llm::openai(vec![Reply::Text("Hello from the fake model.")]).await;
    let tmp = tempfile::tempdir().unwrap();
    let out = tokio::process::Command::from(command(tmp.path()))
        .args(["run", "--data-dir"])
        .arg(tmp.path())
        .arg("say hello")
        .envs(openai_env(&fake.url))
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no server runs for"),
        "it says it runs in this process"
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let (answer, trace) = stdout.trim_end().rsplit_once('\n').unwrap();
    assert_eq!(answer, "Hello from the fake model.");
    let trace_id = trace.strip_prefix("trace_id: ").unwrap();
    let db = service_runtime::db::Db::open_sqlite(&tmp.path().join("service.sqlite")).unwrap();
    let stored = db
        .blocking(|conn| service_runtime::traces::get(conn, trace_id))
        .unwrap()
        .unwrap();
    assert_eq!(
        (stored.source.as_str(), stored.status.as_str()),
        ("cli", "ok")
    );

    let failed = tokio::process::Command::from(command(tmp.path()))
        .args(["run", "--agent", "Nobody", "--data-dir"])
        .arg(tmp.path())
        .arg("hi")
        .output()
        .await
        .unwrap();
    assert!(!failed.status.success());
    assert!(String::from_utf8_lossy(&failed.stderr).contains("no agent named \"Nobody\""));
}

#[tokio::test]
async fn cli_run_goes_through_the_running_server_with_its_provider() {
    let fake = llm::openai(vec![
        Reply::Tools(vec![("t1", "search_notes", json!({"query": "time"}))]),
        Reply::Text("The server's model answered."),
    ])
    .await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    // No provider in the command's own environment: in this process it would answer offline.
    let out = tokio::process::Command::from(command(server.data_dir.parent().unwrap()))
        .args(["run", "--data-dir"])
        .arg(&server.data_dir)
        .arg("what do my notes say?")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("[through the server at {}]", server.url(""))),
        "{stderr}"
    );
    assert!(stderr.contains("[tool] search_notes done"), "{stderr}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let (answer, trace) = stdout.trim_end().rsplit_once('\n').unwrap();
    assert_eq!(answer, "The server's model answered.");
    let trace_id = trace.strip_prefix("trace_id: ").unwrap();
    let (status, trace) = server.get(&format!("/api/traces/{trace_id}")).await;
    assert_eq!(status, StatusCode::OK, "{trace}");

    // An agent the server does not know: its error, and a failed exit.
    let out = tokio::process::Command::from(command(server.data_dir.parent().unwrap()))
        .args(["run", "--agent", "Nobody", "--data-dir"])
        .arg(&server.data_dir)
        .arg("hi")
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no agent named \"Nobody\""));
}

#[tokio::test]
async fn anthropic_failures_are_typed_and_cut_streams_are_not_answers() {
    let overloaded =
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
    let fake = llm::anthropic(vec![
        Reply::Status(
            401,
            json!({"type": "error", "error": {"message": "invalid x-api-key sk-ant-test"}}),
        ),
        Reply::Garbage,
        Reply::Cut("half an ans"),
        Reply::Status(529, overloaded.clone()),
        Reply::Status(529, overloaded.clone()),
        Reply::Status(529, overloaded.clone()),
        Reply::Status(529, overloaded),
    ])
    .await;
    let server = Server::start_with(&[
        ("SERVICE_PROVIDER", "anthropic"),
        ("SERVICE_ANTHROPIC_BASE_URL", &fake.url),
        ("ANTHROPIC_API_KEY", "sk-ant-test"),
    ]);
    let ask = async || server.post("/api/chat", json!({"prompt": "hi"})).await;
    let denied = ask().await;
    assert_error(
        &denied,
        StatusCode::BAD_GATEWAY,
        "anthropic rejected the credentials (HTTP 401)",
    );
    assert!(!denied.1.to_string().contains("sk-ant"));
    assert_error(
        &ask().await,
        StatusCode::BAD_GATEWAY,
        "anthropic sent a malformed answer",
    );
    let cut = ask().await;
    assert_error(
        &cut,
        StatusCode::BAD_GATEWAY,
        "closed the answer stream before it was complete",
    );
    let (_, trace) = server
        .get(&format!(
            "/api/traces/{}",
            cut.1["trace_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(
        (trace["status"].as_str(), &trace["response"]),
        (Some("error"), &Value::Null)
    );
    assert_error(
        &ask().await,
        StatusCode::BAD_GATEWAY,
        "anthropic answered HTTP 529: Overloaded",
    );
    assert_eq!(fake.requests().len(), 7, "529 is retried three times");
}

#[tokio::test]
async fn a_silent_provider_times_out_and_a_cut_stream_fails() {
    let fake = llm::openai(vec![
        Reply::Cut("half an ans"),
        Reply::Slow(Duration::from_secs(3), "late"),
        Reply::Slow(Duration::from_secs(3), "late"),
        Reply::Slow(Duration::from_secs(3), "late"),
        Reply::Slow(Duration::from_secs(3), "late"),
    ])
    .await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    std::fs::write(
        server.data_dir.join("config.toml"),
        "[provider]\ntimeout_secs = 1\n",
    )
    .unwrap();
    let server = server.restart();
    let ask = async || server.post("/api/chat", json!({"prompt": "hi"})).await;
    assert_error(
        &ask().await,
        StatusCode::BAD_GATEWAY,
        "openai closed the answer stream before it was complete",
    );
    assert_error(
        &ask().await,
        StatusCode::BAD_GATEWAY,
        "openai did not answer in time",
    );
    assert_eq!(fake.requests().len(), 5, "a timeout is retried three times");
}

#[tokio::test]
async fn ollama_and_config_file_settings_choose_the_provider() {
    let fake = llm::openai(vec![
        Reply::Text("local answer"),
        Reply::Text("configured answer"),
    ])
    .await;
    let server = Server::start_with(&[
        ("SERVICE_PROVIDER", "ollama"),
        ("SERVICE_OLLAMA_URL", &fake.url),
    ]);
    let (status, answer) = server.post("/api/chat", json!({"prompt": "hi"})).await;
    assert_eq!(
        (status, answer["text"].as_str()),
        (StatusCode::OK, Some("local answer"))
    );
    let request = &fake.requests()[0];
    assert!(
        request.headers.get("authorization").is_none(),
        "ollama takes no key"
    );
    assert_eq!(request.body["model"], "llama3.2");
    let (_, health) = server.get("/api/health").await;
    assert_eq!(health["provider"]["name"], "ollama");

    // The same choice from config.toml, with the base URL from the environment.
    let server = Server::start_with(&[("SERVICE_OPENAI_BASE_URL", &fake.url)]);
    std::fs::write(
        server.data_dir.join("config.toml"),
        "[provider]\ndefault = \"openai\"\nmodel = \"from-config\"\n",
    )
    .unwrap();
    let server = server.restart();
    let (_, answer) = server.post("/api/chat", json!({"prompt": "hi"})).await;
    assert_eq!(answer["text"], "configured answer", "{answer}");
    assert_eq!(fake.requests()[1].body["model"], "from-config");
}

#[tokio::test]
async fn delegation_stops_at_the_depth_limit() {
    let delegate = || {
        Reply::Tools(vec![(
            "d",
            "delegate_to_agent",
            json!({"agent": "default", "prompt": "go deeper"}),
        )])
    };
    // Depths 0, 1, 2 and 3 each delegate; the fourth delegation is refused.
    let fake = llm::openai(vec![
        delegate(),
        delegate(),
        delegate(),
        delegate(),
        Reply::Text("deepest"),
        Reply::Text("level 2"),
        Reply::Text("level 1"),
        Reply::Text("top"),
    ])
    .await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    let (status, answer) = server.post("/api/chat", json!({"prompt": "recurse"})).await;
    assert_eq!(
        (status, answer["text"].as_str()),
        (StatusCode::OK, Some("top")),
        "{answer}"
    );
    let refused = &fake.requests()[4].body["messages"];
    let last = &refused[refused.as_array().unwrap().len() - 1];
    assert_eq!(last["role"], "tool");
    assert!(
        last["content"]
            .as_str()
            .unwrap()
            .contains("delegation depth limit (3) reached"),
        "{last}"
    );
    let (_, traces) = server.get("/api/traces").await;
    assert_eq!(traces["total"], 4, "the top run and three delegated ones");
}

#[tokio::test]
async fn tool_calls_of_one_turn_run_at_the_same_time() {
    let delegate = |id, prompt| {
        (
            id,
            "delegate_to_agent",
            json!({"agent": "default", "prompt": prompt}),
        )
    };
    // Each delegated run waits a second on the model; one after the other would take two.
    let fake = llm::openai(vec![
        Reply::Tools(vec![delegate("a", "first"), delegate("b", "second")]),
        Reply::Slow(Duration::from_secs(1), "one"),
        Reply::Slow(Duration::from_secs(1), "two"),
        Reply::Text("both done"),
    ])
    .await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    let (status, answer) = server.post("/api/chat", json!({"prompt": "fan out"})).await;
    assert_eq!(
        (status, answer["text"].as_str()),
        (StatusCode::OK, Some("both done")),
        "{answer}"
    );
    let (_, trace) = server
        .get(&format!(
            "/api/traces/{}",
            answer["trace_id"].as_str().unwrap()
        ))
        .await;
    let spans: Vec<(chrono::DateTime<chrono::Utc>, i64)> = trace["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "tool_invocation")
        .map(|s| {
            (
                s["started_at"].as_str().unwrap().parse().unwrap(),
                s["latency_ms"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(spans.len(), 2);
    let (first, second) = (spans[0], spans[1]);
    assert!(first.1 >= 900 && second.1 >= 900, "{spans:?}");
    let gap = (second.0 - first.0).num_milliseconds().abs();
    assert!(
        gap < first.1.min(second.1),
        "the second started before the first ended: {spans:?}"
    );
}

/// The provider a run uses is chosen afresh for every run (spec 2.1's "the configured model"):
/// the one provider with settings when none is chosen, the one chosen in Settings (stored like
/// any key), and the process environment's over both.
#[tokio::test]
async fn a_provider_chosen_in_settings_applies_to_the_next_run_and_the_environment_wins() {
    let openai = llm::openai(vec![Reply::Text("from openai")]).await;
    let anthropic = llm::anthropic(vec![Reply::Text("from anthropic")]).await;
    let server = Server::start();
    let provider = async || server.get("/api/health").await.1["provider"].clone();
    let answer = async || {
        let (status, answer) = server.post("/api/chat", json!({"prompt": "who?"})).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        answer["text"].as_str().unwrap().to_owned()
    };
    assert!(answer().await.starts_with("[offline]"));

    // A key written in Settings: the only provider with settings answers the next run.
    server
        .write_key("openai", "SERVICE_OPENAI_BASE_URL", &openai.url)
        .await;
    server
        .write_key("openai", "OPENAI_API_KEY", "sk-test-key")
        .await;
    assert_eq!(
        (
            provider().await["name"].clone(),
            provider().await["chosen_by"].clone()
        ),
        (json!("openai"), json!("only_configured"))
    );
    assert_eq!(answer().await, "from openai");

    // A second provider's key: none is the only one, so none answers until one is chosen.
    server
        .write_key("anthropic", "SERVICE_ANTHROPIC_BASE_URL", &anthropic.url)
        .await;
    server
        .write_key("anthropic", "ANTHROPIC_API_KEY", "sk-ant-test")
        .await;
    assert_eq!(
        (
            provider().await["name"].clone(),
            provider().await["with_settings"].clone()
        ),
        (json!("offline"), json!(["openai", "anthropic"]))
    );
    server
        .write_key("provider", "SERVICE_PROVIDER", "anthropic")
        .await;
    server
        .write_key("provider", "SERVICE_MODEL", "claude-test")
        .await;
    let chosen = provider().await;
    assert_eq!(
        (&chosen["name"], &chosen["model"], &chosen["chosen_by"]),
        (
            &json!("anthropic"),
            &json!("claude-test"),
            &json!("setting")
        )
    );
    assert_eq!(answer().await, "from anthropic");
    assert_eq!(anthropic.requests()[0].body["model"], "claude-test");

    // Only a provider's name is taken, and nothing is written otherwise.
    let refused = server
        .post(
            "/api/integrations/provider/keys",
            json!({"env_var": "SERVICE_PROVIDER", "value": "gemini"}),
        )
        .await;
    assert_error(
        &refused,
        StatusCode::BAD_REQUEST,
        "one of openai, anthropic, ollama, offline",
    );
    assert_eq!(refused.1["field"], "value");
    assert_eq!(provider().await["name"], "anthropic");

    // The process environment wins over a choice written in Settings.
    let pinned = Server::start_with(&[("SERVICE_PROVIDER", "offline")]);
    let written = pinned
        .write_key("provider", "SERVICE_PROVIDER", "anthropic")
        .await;
    assert_eq!(
        (
            &written["overridden_by_environment"],
            &written["applied_to"]
        ),
        (&json!(true), &json!([]))
    );
    let (_, health) = pinned.get("/api/health").await;
    assert_eq!(
        (
            &health["provider"]["name"],
            &health["provider"]["chosen_by"]
        ),
        (&json!("offline"), &json!("setting"))
    );
}

/// With no provider, the offline responder still shows the pipeline: a conversation's earlier
/// turns reach it, and asked to search notes it calls the tool and reports its answer.
#[tokio::test]
async fn the_offline_responder_shows_history_and_a_tool_call() {
    let server = Server::start();
    let (_, first) = server
        .post("/api/chat", json!({"prompt": "my name is Ada"}))
        .await;
    let conversation = first["conversation_id"].as_str().unwrap();
    let (_, second) = server
        .post(
            "/api/chat",
            json!({"prompt": "what did I say?", "conversation_id": conversation}),
        )
        .await;
    let text = second["text"].as_str().unwrap();
    assert!(
        text.contains("1 earlier message(s) of yours; the first was \"my name is Ada\""),
        "{text}"
    );

    let frames = stream_frames(&server, json!({"prompt": "Search notes for oat milk"})).await;
    assert_eq!(
        types(&frames),
        ["tool_call", "tool_result", "token", "done"]
    );
    assert_eq!(
        (&frames[0]["name"], &frames[0]["input"]),
        (&json!("search_notes"), &json!({"query": "oat milk"}))
    );
    assert!(
        tokens(&frames).contains("The search_notes tool answered:"),
        "{}",
        tokens(&frames)
    );
    // An agent that may not use the tool gets words, not a call.
    let (_, _) = server
        .post(
            "/api/agents",
            json!({"name": "Bare", "system_prompt": "p", "tools": []}),
        )
        .await;
    let frames = stream_frames(
        &server,
        json!({"prompt": "search notes for oat milk", "agent": "Bare"}),
    )
    .await;
    assert_eq!(types(&frames), ["token", "done"]);
}
