//! The agents over A2A, through the binary, driven by the official SDK's client (`a2a-sdk`
//! from PyPI, `tests/fixtures/a2a/client.py`): the card is discovered, a message streams its
//! answer, a task is read, re-subscribed after its client went, cancelled, and waits for a
//! person as `TASK_STATE_INPUT_REQUIRED`. Bad requests get the specification's error codes.

use std::path::Path;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::fakes::llm::{self, Reply};
use crate::support::{Server, eventually, openai_env, tool_available};

pub(crate) fn sdk_available() -> bool {
    let present = std::process::Command::new("python3")
        .args(["-c", "import a2a.client"])
        .output()
        .is_ok_and(|out| out.status.success());
    tool_available(
        present,
        "A2A TESTS SKIPPED: the A2A SDK is not installed (pip install 'a2a-sdk[http-server]==1.3.0')",
    )
}

/// What the SDK's client made of a call (see the fixture's usage).
pub(crate) async fn sdk(args: &[&str]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/a2a/client.py");
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new("python3")
            .arg(script)
            .args(args)
            .output(),
    )
    .await
    .expect("the SDK's client finished")
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "{args:?}: {e}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// An SDK client subscribed to a task (`SubscribeToTask`), reading its events to its end.
pub(crate) struct Subscriber {
    _process: tokio::process::Child,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Subscriber {
    /// Once the task's first event came.
    pub(crate) async fn start(url: &str, task: &str) -> Self {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/a2a/client.py");
        let mut process = tokio::process::Command::new("python3")
            .arg(script)
            .args(["subscribe", url, task])
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(process.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the subscription started")
            .unwrap()
            .unwrap();
        assert_eq!(first, r#"{"subscribed": true}"#);
        Self {
            _process: process,
            lines,
        }
    }

    /// What the SDK made of the subscription, once the task ended.
    pub(crate) async fn end(mut self) -> Value {
        let last = tokio::time::timeout(Duration::from_secs(30), self.lines.next_line())
            .await
            .expect("the subscription ended")
            .unwrap()
            .unwrap();
        serde_json::from_str(&last).unwrap()
    }
}

/// The text the artifact updates among `events` stream.
pub(crate) fn streamed_text(events: &Value) -> String {
    events
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|event| event["artifactUpdate"]["artifact"]["parts"][0]["text"].as_str())
        .collect()
}

pub(crate) fn last_state(events: &Value) -> &Value {
    &events.as_array().unwrap().last().unwrap()["statusUpdate"]["status"]["state"]
}

/// A raw JSON-RPC call: its HTTP status and body.
async fn call(
    server: &Server,
    agent: &str,
    body: &str,
    version: Option<&str>,
) -> (StatusCode, Value) {
    let mut request = reqwest::Client::new()
        .post(server.url(&format!("/a2a/{agent}")))
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(version) = version {
        request = request.header("A2A-Version", version);
    }
    let response = request.send().await.unwrap();
    (response.status(), response.json().await.unwrap())
}

#[tokio::test]
async fn an_agent_is_discovered_and_converses_over_a2a_with_the_official_sdk() {
    if !sdk_available() {
        return;
    }
    let fake = llm::openai(vec![Reply::Text("one two three"), Reply::Text("again")]).await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    let url = format!("{}/a2a/default", server.url);
    let result = sdk(&["converse", &url, "count to three"]).await;
    assert!(result.get("error").is_none(), "{result}");

    let card = &result["card"];
    assert_eq!(card["name"], "default");
    assert_eq!(card["supportedInterfaces"][0]["url"], url.as_str());
    assert_eq!(card["supportedInterfaces"][0]["protocolBinding"], "JSONRPC");
    assert_eq!(card["capabilities"]["streaming"], true);

    // Streamed: the task first, the answer in appended chunks, then the final status.
    let events = &result["events"];
    let task_id = events[0]["task"]["id"].as_str().unwrap().to_owned();
    let context_id = events[0]["task"]["contextId"].as_str().unwrap().to_owned();
    assert_eq!(events[0]["task"]["status"]["state"], "TASK_STATE_WORKING");
    assert_eq!(streamed_text(events), "one two three");
    assert_eq!(last_state(events), "TASK_STATE_COMPLETED", "{events}");

    let task = &result["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "one two three");
    assert_eq!(task["history"][0]["parts"][0]["text"], "count to three");
    assert_eq!(task["history"][1]["role"], "ROLE_AGENT");

    // A blocking message in the same context: the conversation goes on.
    let second = &result["second"][0]["task"];
    assert_eq!(
        second["status"]["state"], "TASK_STATE_COMPLETED",
        "{second}"
    );
    assert_eq!(second["contextId"], context_id.as_str());
    assert_eq!(second["artifacts"][0]["parts"][0]["text"], "again");
    let history = fake.requests()[1].body["messages"].to_string();
    assert!(history.contains("one two three"), "{history}");

    // The task is a run of the runs API, in the conversation.
    let (_, run) = server.get(&format!("/api/runs/{task_id}")).await;
    assert_eq!(
        (run["status"].as_str(), run["conversation_id"].as_str()),
        (Some("completed"), Some(context_id.as_str()))
    );

    // Listed, newest first, a page at a time.
    let listed = sdk(&["list", &url, &context_id]).await;
    let (first, rest) = (&listed["first"], &listed["rest"]);
    assert_eq!(first["totalSize"], 2, "{listed}");
    assert_eq!(first["tasks"][0]["id"], second["id"], "{listed}");
    assert_eq!(
        first["tasks"][0]["artifacts"][0]["parts"][0]["text"],
        "again"
    );
    assert_eq!(rest["tasks"][0]["id"], task_id.as_str(), "{listed}");
    assert!(
        rest.get("nextPageToken").is_none(),
        "the last page: {listed}"
    );
    let completed = listed["completed"]["tasks"].as_array().unwrap();
    assert_eq!(completed.len(), 2, "{listed}");
    assert!(
        completed
            .iter()
            .all(|task| task.get("history").is_none() && task.get("artifacts").is_none()),
        "{listed}"
    );

    // What the SDK raises for the specification's errors.
    let missing = sdk(&["get", &url, "no-such-task"]).await;
    assert_eq!(missing["error"], "TaskNotFoundError", "{missing}");
    let ended = sdk(&["cancel", &url, &task_id]).await;
    assert_eq!(ended["error"], "TaskNotCancelableError", "{ended}");
}

#[tokio::test]
async fn bad_a2a_requests_get_the_specifications_errors_and_start_nothing() {
    let server = Server::start();
    let message = |parts: Value| {
        json!({"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": {
            "messageId": "m1", "role": "ROLE_USER", "parts": parts}}})
        .to_string()
    };
    for (body, version, code) in [
        ("{not json".to_owned(), None, -32700),
        (json!({"id": 7, "method": "SendMessage"}).to_string(), None, -32600),
        (json!({"jsonrpc": "2.0", "id": 7, "method": "Dance"}).to_string(), None, -32601),
        (json!({"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": [1]}).to_string(), None, -32602),
        (message(json!([])), None, -32602),
        (message(json!([{"text": "hi"}])), Some("0.3"), -32009),
        (message(json!([{"url": "https://example.com/f.pdf", "mediaType": "application/pdf"}])), None, -32005),
        (json!({"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": "nope"}}).to_string(), None, -32001),
        (json!({"jsonrpc": "2.0", "id": 7, "method": "ListTasks", "params": {"pageSize": 0}}).to_string(), None, -32602),
        (json!({"jsonrpc": "2.0", "id": 7, "method": "ListTasks", "params": {"status": "TASK_STATE_NAPPING"}}).to_string(), None, -32602),
        (json!({"jsonrpc": "2.0", "id": 7, "method": "CreateTaskPushNotificationConfig", "params": {}}).to_string(), None, -32003),
    ] {
        let (status, answer) = call(&server, "default", &body, version).await;
        assert_eq!(status, StatusCode::OK, "{body}: {answer}");
        assert_eq!(answer["error"]["code"], code, "{body}: {answer}");
        assert!(answer["error"]["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    let (status, answer) = call(&server, "nobody", &message(json!([{"text": "hi"}])), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    let (_, runs) = server.get("/api/runs").await;
    assert_eq!(runs["total"], 0, "nothing started: {runs}");
    let card = server.get("/a2a/nobody/.well-known/agent-card.json").await;
    assert_eq!(card.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn an_a2a_task_is_resubscribed_after_its_client_went_and_is_cancelled() {
    if !sdk_available() {
        return;
    }
    let (reply, pieces) = llm::by_hand();
    let slow = Reply::Slow(Duration::from_secs(60), "too late");
    let fake = llm::openai(vec![reply, slow]).await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    let url = format!("{}/a2a/default", server.url);

    // A client reads the task and the first chunk, then goes.
    pieces.send("Once ").unwrap();
    let started = sdk(&["start", &url, "tell a story", "2"]).await;
    let events = &started["events"];
    assert_eq!(streamed_text(events), "Once ", "{started}");
    let task_id = events[0]["task"]["id"].as_str().unwrap().to_owned();
    pieces.send("upon ").unwrap();

    // Re-subscribed while it runs: the task, then every chunk from the first.
    let subscriber = Subscriber::start(&url, &task_id).await;
    pieces.send("a time.").unwrap();
    drop(pieces);
    let resumed = subscriber.end().await;
    let events = &resumed["events"];
    assert_eq!(events[0]["task"]["id"], task_id.as_str(), "{resumed}");
    assert_eq!(events[0]["task"]["status"]["state"], "TASK_STATE_WORKING");
    assert_eq!(streamed_text(events), "Once upon a time.", "{resumed}");
    assert_eq!(last_state(events), "TASK_STATE_COMPLETED");
    // Once it ended, it is read instead.
    let late = sdk(&["subscribe", &url, &task_id]).await;
    assert_eq!(late["error"], "UnsupportedOperationError", "{late}");

    // Submitted without waiting, then cancelled while the model takes its time.
    let submitted = sdk(&["submit", &url, "take your time"]).await;
    let task = &submitted["events"][0]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_WORKING", "{submitted}");
    let slow_id = task["id"].as_str().unwrap().to_owned();
    eventually(10, async || (fake.requests().len() == 2).then_some(())).await;
    let cancelled = sdk(&["cancel", &url, &slow_id]).await;
    assert_eq!(
        cancelled["task"]["status"]["state"], "TASK_STATE_CANCELED",
        "{cancelled}"
    );
    let again = sdk(&["cancel", &url, &slow_id]).await;
    assert_eq!(again["error"], "TaskNotCancelableError", "{again}");
}

#[tokio::test]
async fn a_task_that_needs_approval_is_input_required_until_a_person_or_its_caller_decides() {
    if !sdk_available() {
        return;
    }
    let fake = llm::openai(vec![
        Reply::Tools(vec![("c1", "create_note", json!({"title": "Plan"}))]),
        Reply::Text("Saved."),
        Reply::Tools(vec![("c1", "create_note", json!({"title": "Other"}))]),
        Reply::Text("Not saved."),
    ])
    .await;
    let server = Server::start_with_config(
        "[tools.create_note]\napproval = true\n",
        &openai_env(&fake.url),
    );
    let url = format!("{}/a2a/default", server.url);
    let waiting_on = async |prompt: &str| {
        let started = sdk(&["start", &url, prompt, "100"]).await;
        let events = &started["events"];
        assert_eq!(last_state(events), "TASK_STATE_INPUT_REQUIRED", "{started}");
        let last = events.as_array().unwrap().last().unwrap();
        let waiting = last["statusUpdate"]["status"]["message"]["parts"][0]["data"].clone();
        assert_eq!(waiting["tool"], "create_note", "{last}");
        (
            events[0]["task"]["id"].as_str().unwrap().to_owned(),
            waiting,
        )
    };

    // A person decides it here.
    let (task_id, waiting) = waiting_on("save a plan").await;
    let read = sdk(&["get", &url, &task_id]).await;
    assert_eq!(read["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
    let approval = waiting["approval_id"].as_str().unwrap();
    let (status, _) = server
        .post(
            &format!("/api/approvals/{approval}"),
            json!({"decision": "approve"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let done = eventually(20, async || {
        let read = sdk(&["get", &url, &task_id]).await;
        (read["task"]["status"]["state"] == "TASK_STATE_COMPLETED").then_some(read)
    })
    .await;
    assert_eq!(done["task"]["artifacts"][0]["parts"][0]["text"], "Saved.");

    // Its caller decides it over A2A, with a follow-up message to the task.
    let (task_id, _) = waiting_on("save another").await;
    let decided = sdk(&["decide", &url, &task_id, "deny"]).await;
    let events = &decided["events"];
    assert_eq!(events[0]["task"]["id"], task_id.as_str(), "{decided}");
    assert_eq!(last_state(events), "TASK_STATE_COMPLETED", "{decided}");
    let read = sdk(&["get", &url, &task_id]).await;
    assert_eq!(
        read["task"]["artifacts"][0]["parts"][0]["text"],
        "Not saved."
    );
    let told = crate::approvals::tool_message(&fake);
    assert!(
        told.contains("a person declined") && told.contains("not now"),
        "{told}"
    );
    let (_, approvals) = server.get("/api/approvals?status=denied").await;
    assert_eq!(approvals["approvals"][0]["note"], "not now", "{approvals}");
    // A task that is not waiting takes no decision.
    let again = sdk(&["decide", &url, &task_id, "approve"]).await;
    assert_eq!(again["error"], "UnsupportedOperationError", "{again}");
}
