//! Remote agents called over A2A, through the binary: an agent served by the official SDK's
//! server (`a2a-sdk`, `tests/fixtures/a2a/server.py`) has its card read and its skills offered
//! as `a2a__<name>__<skill>`; calls stream (or not, as its card says), carry the entry's
//! secret header and the trace, time out, and are cancelled there with their run. Hostile
//! remote agents (huge answers, endless streams, bad cards) are bounded and shown on
//! `GET /api/a2a/agents`.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::routing::post;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::a2a::sdk_available;
use crate::fakes::a2a_agent;
use crate::fakes::llm::{self, Reply};
use crate::support::{Server, eventually, openai_env, spawn_fake};

/// The SDK's agent on a free port; what it prints is kept. Killed when dropped.
struct SdkAgent {
    _child: tokio::process::Child,
    url: String,
    said: Arc<Mutex<Vec<Value>>>,
}

impl SdkAgent {
    async fn start(streaming: bool) -> Self {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/a2a/server.py");
        let mut command = tokio::process::Command::new("python3");
        command.arg(script).arg("0");
        if !streaming {
            command.arg("--no-streaming");
        }
        let mut child = command
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the SDK's agent started")
            .unwrap()
            .unwrap();
        let port = serde_json::from_str::<Value>(&first).unwrap()["listening"].clone();
        let said = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&said);
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                kept.lock()
                    .unwrap()
                    .push(serde_json::from_str(&line).unwrap());
            }
        });
        Self {
            _child: child,
            url: format!("http://127.0.0.1:{port}/"),
            said,
        }
    }

    fn said(&self) -> Vec<Value> {
        self.said.lock().unwrap().clone()
    }
}

async fn statuses(server: &Server) -> Value {
    let (status, body) = server.get("/api/a2a/agents").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["agents"].clone()
}

/// The agent `name`'s status once it is no longer connecting.
async fn settled(server: &Server, name: &str) -> Value {
    eventually(30, async || {
        let agents = statuses(server).await;
        let agent = agents
            .as_array()?
            .iter()
            .find(|a| a["name"] == name)?
            .clone();
        (agent["state"] != "connecting").then_some(agent)
    })
    .await
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

#[tokio::test]
async fn agents_call_skills_of_an_sdk_agent_streamed_or_not_with_its_secret_and_the_trace() {
    if !sdk_available() {
        return;
    }
    let (streaming, plain) = (SdkAgent::start(true).await, SdkAgent::start(false).await);
    let fake = llm::openai(vec![
        Reply::Tools(vec![
            ("c1", "a2a__helper__echo", json!({"message": "hello world"})),
            ("c2", "a2a__plain__echo", json!({"message": "hi"})),
            ("c3", "a2a__helper__ask", json!({"message": "ask me"})),
            ("c4", "a2a__hasty__slow", json!({"message": "slow down"})),
        ]),
        Reply::Text("done"),
        Reply::Tools(vec![(
            "c5",
            "a2a__helper__slow",
            json!({"message": "slow again"}),
        )]),
        Reply::Text("never reached"),
    ])
    .await;
    // Traces are exported (here to a sink), so the trace goes on to the remote agent.
    let sink = spawn_fake(Router::new().route("/v1/traces", post(|| async { "" }))).await;
    let config = format!(
        "[a2a.agents.helper]\nurl = {:?}\nheaders = {{ Authorization = \"Bearer {{{{secret:HELPER_TOKEN}}}}\" }}\n\
         [a2a.agents.plain]\nurl = {:?}\n\
         [a2a.agents.hasty]\nurl = {:?}\ntimeout_secs = 1\n",
        streaming.url, plain.url, streaming.url
    );
    let mut env = openai_env(&fake.url);
    env.push(("HELPER_TOKEN", "s3cret-a2a".into()));
    env.push(("OTEL_EXPORTER_OTLP_ENDPOINT", sink));
    let server = Server::start_with_config(&config, &env);
    let helper = settled(&server, "helper").await;
    assert_eq!(
        (
            &helper["state"],
            &helper["agent"],
            &helper["tools"],
            &helper["streaming"]
        ),
        (
            &json!("ready"),
            &json!("helper 1.0.0"),
            &json!(3),
            &json!(true)
        ),
        "{helper}"
    );
    assert_eq!(helper["endpoint"], streaming.url.as_str());
    assert_eq!(settled(&server, "plain").await["streaming"], false);

    let (status, agent) = server
        .post(
            "/api/agents",
            json!({"name": "delegator", "system_prompt": "Delegate.",
                   "tools": ["a2a__helper__*", "a2a__plain__echo", "a2a__hasty__slow"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{agent}");
    let response = reqwest::Client::new()
        .post(server.url("/api/chat"))
        .header("traceparent", format!("00-{TRACE}-00f067aa0ba902b7-01"))
        .json(&json!({"prompt": "go", "agent": "delegator"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let answer: Value = response.json().await.unwrap();
    let calls = answer["tool_calls"].as_array().unwrap();
    let output = |i: usize| calls[i]["output"].as_str().unwrap_or_default().to_owned();
    assert!(
        output(0).starts_with("echo: hello world\n[context_id "),
        "streamed in chunks, joined: {}",
        calls[0]
    );
    assert!(output(1).starts_with("echo: hi\n"), "{}", calls[1]);
    assert!(
        output(2).contains("needs more before it goes on: Which colour?")
            && output(2).contains("call this tool again with task_id"),
        "input-required is an answer that says how to go on: {}",
        calls[2]
    );
    assert!(
        calls[3]["error"]
            .as_str()
            .is_some_and(|e| e.contains("did not finish within 1 s")),
        "{}",
        calls[3]
    );

    // The skills were offered under their names, described from the card.
    let offered = &fake.requests()[0].body["tools"];
    let echo = offered
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "a2a__helper__echo")
        .unwrap_or_else(|| panic!("{offered}"));
    assert_eq!(
        echo["function"]["description"],
        "Ask the agent helper: Says back what it is told"
    );

    // Streamed (the calls run side by side, in no set order), the secret only to its entry,
    // the trace to all; the non-streaming twin got SendMessage.
    let said = streaming.said();
    let sent: Vec<&Value> = said
        .iter()
        .filter(|line| line["method"] == "SendStreamingMessage")
        .collect();
    assert_eq!(sent.len(), 3, "{said:?}");
    let with_secret = sent
        .iter()
        .filter(|line| line["authorization"] == "Bearer s3cret-a2a")
        .count();
    assert_eq!(with_secret, 2, "helper's two calls, not hasty's: {said:?}");
    assert!(
        sent.iter().all(|line| line["a2a_version"] == "1.0"
            && line["traceparent"]
                .as_str()
                .is_some_and(|t| t.contains(TRACE))),
        "{said:?}"
    );
    assert!(
        plain
            .said()
            .iter()
            .any(|line| line["method"] == "SendMessage"),
        "{:?}",
        plain.said()
    );
    // The timed-out task was cancelled there (its id came after the call's 1 s: the call read
    // on for it).
    let canceled = |count: usize| {
        let said = streaming.said();
        async move {
            (said
                .iter()
                .filter(|line| line.get("canceled").is_some())
                .count()
                == count)
                .then_some(())
        }
    };
    eventually(10, async || canceled(1).await).await;

    // A run cancelled while it waits on a remote agent cancels the remote task, though it was
    // cancelled before the agent told the task (1.5 s after the message).
    let (status, run) = server
        .post(
            "/api/runs",
            json!({"prompt": "again", "agent": "delegator"}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{run}");
    eventually(30, async || {
        (streaming
            .said()
            .iter()
            .filter(|line| line["method"] == "SendStreamingMessage")
            .count()
            == 4)
            .then_some(())
    })
    .await;
    let (status, cancelled) = server
        .post(
            &format!("/api/runs/{}/cancel", run["run_id"].as_str().unwrap()),
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    eventually(15, async || canceled(2).await).await;

    let agents = statuses(&server).await;
    assert!(!agents.to_string().contains("s3cret"), "{agents}");
    let hasty = agents
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "hasty")
        .unwrap();
    assert_eq!(
        (&hasty["calls"], &hasty["failed_calls"]),
        (&json!(1), &json!(1))
    );
    assert!(
        hasty["last_call_error"]
            .as_str()
            .unwrap()
            .contains("within 1 s")
    );
}

#[tokio::test]
async fn hostile_remote_agents_are_bounded_and_their_bad_cards_shown() {
    let hostile = a2a_agent::start().await;
    let fake = llm::openai(vec![
        Reply::Tools(vec![
            ("c1", "a2a__huge__talk", json!({"message": "everything"})),
            ("c2", "a2a__endless__talk", json!({"message": "go on"})),
            ("c3", "a2a__idle__talk", json!({"message": "wait"})),
        ]),
        Reply::Text("meanwhile"),
        Reply::Text("done"),
    ])
    .await;
    let entry = |name: &str| format!("[a2a.agents.{name}]\nurl = \"{}/{name}\"\n", hostile.url);
    let config = format!(
        "[a2a]\ncall_timeout_secs = 2\n{}",
        [
            "huge", "endless", "idle", "garbled", "bloated", "moved", "leaky"
        ]
        .map(entry)
        .concat()
    );
    let server = Server::start_with_config(&config, &openai_env(&fake.url));
    for (name, why) in [
        ("garbled", "the card is not JSON"),
        ("bloated", "its card is larger than 262144 bytes"),
        (
            "moved",
            "redirects (302 Found) to http://169.254.169.254/card.json",
        ),
        ("leaky", "is not on http://127.0.0.1"),
    ] {
        let agent = settled(&server, name).await;
        assert_eq!(agent["state"], "error", "{agent}");
        assert!(
            agent["error"].as_str().unwrap().contains(why),
            "{name}: {agent}"
        );
        assert_eq!(agent["tools"], 0);
    }
    for name in ["huge", "endless", "idle"] {
        assert_eq!(settled(&server, name).await["state"], "ready");
    }
    let (status, agent) = server
        .post(
            "/api/agents",
            json!({"name": "brave", "system_prompt": "Ask.",
                   "tools": ["a2a__huge__talk", "a2a__endless__talk", "a2a__idle__talk"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{agent}");

    let brave = {
        let url = server.url("/api/chat");
        tokio::spawn(async move {
            let response = reqwest::Client::new()
                .post(url)
                .json(&json!({"prompt": "go", "agent": "brave"}))
                .send()
                .await
                .unwrap();
            (response.status(), response.json::<Value>().await.unwrap())
        })
    };
    // While the hostile calls run, a neighbour's chat is answered.
    eventually(10, async || (fake.requests().len() == 1).then_some(())).await;
    let (status, neighbour) = server.post("/api/chat", json!({"prompt": "hi"})).await;
    assert_eq!(
        (status, neighbour["text"].as_str()),
        (StatusCode::OK, Some("meanwhile"))
    );
    assert!(!brave.is_finished(), "the hostile calls were still running");
    let (status, answer) = brave.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{answer}");
    let calls = answer["tool_calls"].as_array().unwrap();
    assert!(
        calls[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("answered more than 1048576 bytes")),
        "{}",
        calls[0]
    );
    let endless = calls[1]["output"].as_str().unwrap();
    assert!(
        endless.len() <= 64 << 10 && endless.ends_with("its task was cancelled]"),
        "an endless answer is cut at the tool cap: {} bytes, ending {:?}",
        endless.len(),
        &endless[endless.len().saturating_sub(120)..]
    );
    assert!(
        calls[2]["error"]
            .as_str()
            .is_some_and(|e| e.contains("did not finish within 2 s")),
        "{}",
        calls[2]
    );
    // The endless and idle tasks were cancelled there; the huge one had ended.
    eventually(10, async || (hostile.cancels() == 2).then_some(())).await;

    // Recorded on their entries.
    let agents = statuses(&server).await;
    for name in ["huge", "idle"] {
        let agent = agents
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name)
            .unwrap();
        assert_eq!(agent["failed_calls"], 1, "{agent}");
        assert!(agent["last_call_error_at"].is_string());
    }
    // The server kept serving throughout.
    let (status, _) = server.get("/api/health").await;
    assert_eq!(status, StatusCode::OK);
}
