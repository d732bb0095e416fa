//! Tool calls a person approves, through the real binary: the run pauses before the call,
//! the decision (or the timeout) lets it go on in the same trace, and its answer lands in the
//! conversation; the pause survives kill -9.

use reqwest::StatusCode;
use serde_json::{Value, json};
use service_runtime::notes;

use crate::fakes::llm::{self, FakeLlm, Reply};
use crate::scheduler;
use crate::support::{Server, assert_error, command, eventually, openai_env, stream_frames};

const NEEDS_APPROVAL: &str = "[tools.create_note]\napproval = true\n";

/// A model that calls `create_note` for a note titled `title`, then answers `answer`.
pub(crate) async fn note_script(title: &str, answer: &'static str) -> FakeLlm {
    llm::openai(vec![
        Reply::Tools(vec![("c1", "create_note", json!({"title": title}))]),
        Reply::Text(answer),
    ])
    .await
}

pub(crate) fn notes_titled(server: &Server, title: &'static str) -> usize {
    server
        .db()
        .blocking(move |conn| notes::search(conn, title, 10))
        .unwrap()
        .len()
}

/// The conversation's messages once its last one is the agent's.
async fn answered(server: &Server, conversation: &str) -> Vec<Value> {
    let path = format!("/api/conversations/{conversation}");
    eventually(20, async || {
        let (_, shown) = server.get(&path).await;
        let messages = shown["messages"].as_array()?.clone();
        (messages.last()?["role"] == "assistant").then_some(messages)
    })
    .await
}

/// What the model was told about call `c1` when the run went on.
pub(crate) fn tool_message(fake: &FakeLlm) -> String {
    let requests = fake.requests();
    let messages = requests.last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .clone();
    let tool = messages.iter().find(|m| m["role"] == "tool").unwrap();
    assert_eq!(tool["tool_call_id"], "c1");
    tool["content"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn an_approved_call_runs_once_and_the_answer_lands_in_the_conversation() {
    let fake = note_script("Plan", "Done.").await;
    let server = Server::start_with_config(NEEDS_APPROVAL, &openai_env(&fake.url));

    let (status, paused) = server
        .post("/api/chat", json!({"prompt": "Save a plan"}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{paused}");
    assert_eq!(paused["status"], "waiting_for_approval");
    assert_eq!(
        (&paused["tool"], &paused["input"]),
        (&json!("create_note"), &json!({"title": "Plan"}))
    );
    let (id, conversation, trace) = (
        paused["approval_id"].as_str().unwrap().to_owned(),
        paused["conversation_id"].as_str().unwrap().to_owned(),
        paused["trace_id"].as_str().unwrap().to_owned(),
    );
    assert_eq!(notes_titled(&server, "Plan"), 0, "nothing ran yet");

    let (_, pending) = server.get("/api/approvals?status=pending").await;
    let listed = &pending["approvals"][0];
    assert_eq!(
        (
            listed["id"].as_str(),
            listed["tool"].as_str(),
            listed["agent"].as_str(),
            listed["conversation_id"].as_str(),
            listed["trace_id"].as_str(),
            listed["status"].as_str()
        ),
        (
            Some(id.as_str()),
            Some("create_note"),
            Some("default"),
            Some(conversation.as_str()),
            Some(trace.as_str()),
            Some("pending")
        )
    );
    assert_eq!(listed["input"], json!({"title": "Plan"}));

    let path = format!("/api/approvals/{id}");
    let (status, decided) = server.post(&path, json!({"decision": "approve"})).await;
    assert_eq!(
        (
            status,
            decided["status"].as_str(),
            decided["decided_by"].as_str()
        ),
        (StatusCode::OK, Some("approved"), Some("owner"))
    );
    let messages = answered(&server, &conversation).await;
    let texts: Vec<(&str, &str)> = messages
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), m["text"].as_str().unwrap()))
        .collect();
    assert_eq!(texts, [("user", "Save a plan"), ("assistant", "Done.")]);
    assert_eq!(messages[1]["tool_calls"][0]["name"], "create_note");
    assert_eq!(notes_titled(&server, "Plan"), 1, "the tool ran once");
    assert!(tool_message(&fake).contains("\"title\":\"Plan\""));

    // One trace, from the prompt to the answer, with the call between the two model calls.
    let (_, shown) = server.get(&format!("/api/traces/{trace}")).await;
    assert_eq!(
        (shown["status"].as_str(), shown["response"].as_str()),
        (Some("ok"), Some("Done."))
    );
    let kinds: Vec<&str> = shown["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["kind"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        kinds,
        ["llm_call", "tool_invocation", "llm_call"],
        "{shown}"
    );

    // A second decision changes nothing.
    assert_error(
        &server.post(&path, json!({"decision": "deny"})).await,
        StatusCode::CONFLICT,
        "already approved",
    );
    let (_, all) = server.get("/api/approvals").await;
    assert_eq!(all["approvals"][0]["status"], "approved");
    assert_eq!(notes_titled(&server, "Plan"), 1);
}

#[tokio::test]
async fn a_denied_call_is_not_run_and_the_model_is_told_why() {
    let fake = note_script("Plan", "Done.").await;
    let server = Server::start_with_config(NEEDS_APPROVAL, &openai_env(&fake.url));
    let (_, paused) = server
        .post("/api/chat", json!({"prompt": "Save a plan"}))
        .await;
    let id = paused["approval_id"].as_str().unwrap();

    // Bad decisions first: each refused, none decides.
    let path = format!("/api/approvals/{id}");
    assert_error(
        &server.post(&path, json!({"decision": "maybe"})).await,
        StatusCode::BAD_REQUEST,
        "decision",
    );
    assert_error(
        &server
            .post("/api/approvals/no-such-id", json!({"decision": "approve"}))
            .await,
        StatusCode::NOT_FOUND,
        "no approval",
    );
    let foreign = reqwest::Client::new()
        .post(server.url(&path))
        .header("origin", "https://evil.example")
        .json(&json!({"decision": "approve"}))
        .send()
        .await
        .unwrap();
    assert_eq!(foreign.status(), StatusCode::FORBIDDEN);
    assert_error(
        &server.get("/api/approvals?status=maybe").await,
        StatusCode::BAD_REQUEST,
        "unknown status",
    );
    let (_, pending) = server.get("/api/approvals?status=pending").await;
    assert_eq!(pending["approvals"].as_array().unwrap().len(), 1);

    let (status, _) = server
        .post(&path, json!({"decision": "deny", "note": "not today"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let messages = answered(&server, paused["conversation_id"].as_str().unwrap()).await;
    assert_eq!(messages.last().unwrap()["text"], "Done.");
    let told = tool_message(&fake);
    assert!(
        told.contains("a person declined") && told.contains("not today"),
        "{told}"
    );
    assert_eq!(notes_titled(&server, "Plan"), 0, "never ran");
}

#[tokio::test]
async fn a_pause_survives_kill_9_and_a_streamed_run_names_it() {
    let fake = note_script("Plan", "Done.").await;
    let server = Server::start_with_config(NEEDS_APPROVAL, &openai_env(&fake.url));
    let frames = stream_frames(&server, json!({"prompt": "Save a plan"})).await;
    let last = frames.last().unwrap();
    assert_eq!(last["type"], "approval_required", "{frames:?}");
    assert_eq!(last["tool"], "create_note");
    let (id, conversation, trace) = (
        last["approval_id"].as_str().unwrap().to_owned(),
        last["conversation_id"].as_str().unwrap().to_owned(),
        last["trace_id"].as_str().unwrap().to_owned(),
    );

    // kill -9 and start again: the pause is in the database, not in the process.
    let server = server.restart();
    let (_, shown) = server.get(&format!("/api/traces/{trace}")).await;
    assert_eq!(
        shown["status"], "running",
        "a paused run is not failed by the restart"
    );
    let (status, _) = server
        .post(
            &format!("/api/approvals/{id}"),
            json!({"decision": "approve"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let messages = answered(&server, &conversation).await;
    assert_eq!(messages.last().unwrap()["text"], "Done.");
    assert_eq!(notes_titled(&server, "Plan"), 1);
    let (_, shown) = server.get(&format!("/api/traces/{trace}")).await;
    assert_eq!(shown["status"], "ok");
}

#[tokio::test]
async fn no_decision_in_time_is_a_denial() {
    let fake = note_script("Plan", "Done.").await;
    let config = format!("{NEEDS_APPROVAL}[approvals]\ntimeout_secs = 1\n");
    let server = Server::start_with_config(&config, &openai_env(&fake.url));
    let (_, paused) = server
        .post("/api/chat", json!({"prompt": "Save a plan"}))
        .await;
    let messages = answered(&server, paused["conversation_id"].as_str().unwrap()).await;
    assert_eq!(messages.last().unwrap()["text"], "Done.");
    assert!(tool_message(&fake).contains("no one approved"));
    let (_, all) = server.get("/api/approvals").await;
    assert_eq!(all["approvals"][0]["status"], "expired");
    assert_error(
        &server
            .post(
                &format!("/api/approvals/{}", paused["approval_id"].as_str().unwrap()),
                json!({"decision": "approve"}),
            )
            .await,
        StatusCode::CONFLICT,
        "already expired",
    );
    assert_eq!(notes_titled(&server, "Plan"), 0);
}

#[tokio::test]
async fn a_run_that_cannot_wait_is_refused_the_call_and_nothing_runs() {
    let fake = note_script("Plan", "Done.").await;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("config.toml"), NEEDS_APPROVAL).unwrap();
    let out = tokio::process::Command::from(command(tmp.path()))
        .args(["run", "--data-dir"])
        .arg(tmp.path())
        .arg("Save a plan")
        .envs(openai_env(&fake.url))
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("Done."));
    let told = tool_message(&fake);
    assert!(
        told.contains("needs a person's approval") && told.contains("cli"),
        "{told}"
    );
    let db = service_runtime::db::Db::open_sqlite(&tmp.path().join("service.sqlite")).unwrap();
    let (found, pending) = db
        .blocking(|conn| {
            Ok((
                notes::search(conn, "Plan", 10)?.len(),
                service_runtime::approvals::pending_count(conn)?,
            ))
        })
        .unwrap();
    assert_eq!((found, pending), (0, 0));
}

/// A server whose scheduler ticks every second, with the note tool behind approval, and a
/// schedule due at once; the pending approval its run left.
async fn scheduled_pause(fake: &FakeLlm) -> (Server, Value) {
    let mut env = openai_env(&fake.url);
    env.push(("SERVICE_SCHEDULER_TICK_SECS", "1".into()));
    let server = Server::start_with_config(NEEDS_APPROVAL, &env);
    scheduler::create(
        &server,
        "notes",
        scheduler::DUE_ONLY_WHEN_BACKDATED,
        "coalesce",
    );
    scheduler::backdate(&server, "notes", 0);
    let approval = eventually(20, async || {
        let (_, pending) = server.get("/api/approvals?status=pending").await;
        pending["approvals"].as_array()?.first().cloned()
    })
    .await;
    (server, approval)
}

#[tokio::test]
async fn a_scheduled_run_leaves_its_task_pending_until_a_person_decides() {
    let fake = note_script("Plan", "Done.").await;
    let (server, approval) = scheduled_pause(&fake).await;
    assert_eq!(approval["conversation_id"], Value::Null);
    let task_id = approval["task_id"].as_str().unwrap().to_owned();
    let task = &scheduler::runs_of(&server, "notes").await[0];
    assert_eq!(
        (
            task["task_id"].as_str(),
            task["status"].as_str(),
            task["waiting_for"].as_str()
        ),
        (Some(task_id.as_str()), Some("pending"), Some("approval"))
    );

    let (status, _) = server
        .post(
            &format!("/api/approvals/{}", approval["id"].as_str().unwrap()),
            json!({"decision": "approve"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let task = eventually(20, async || {
        let task = scheduler::runs_of(&server, "notes").await.pop()?;
        (task["status"] == "completed").then_some(task)
    })
    .await;
    assert_eq!(task["trace_id"], approval["trace_id"]);
    assert_eq!(task["waiting_for"], Value::Null);
    assert_eq!(notes_titled(&server, "Plan"), 1);
}

#[tokio::test]
async fn cancelling_a_waiting_task_declines_its_call() {
    let fake = note_script("Plan", "Done.").await;
    let (server, approval) = scheduled_pause(&fake).await;
    let task_id = approval["task_id"].as_str().unwrap();
    let (status, removed) = server.delete(&format!("/api/tasks/{task_id}")).await;
    assert_eq!(
        (status, removed["result"].as_str()),
        (StatusCode::OK, Some("cancelled"))
    );
    // The run is told no and ends; the task stays cancelled and nothing ran.
    eventually(20, async || (fake.requests().len() == 2).then_some(())).await;
    assert!(tool_message(&fake).contains("the task was cancelled"));
    let (_, all) = server.get("/api/approvals").await;
    assert_eq!(all["approvals"][0]["status"], "denied");
    let trace = format!("/api/traces/{}", approval["trace_id"].as_str().unwrap());
    eventually(20, async || {
        (server.get(&trace).await.1["status"] == "ok").then_some(())
    })
    .await;
    assert_eq!(
        scheduler::runs_of(&server, "notes").await[0]["status"],
        "cancelled"
    );
    assert_eq!(notes_titled(&server, "Plan"), 0);
}
