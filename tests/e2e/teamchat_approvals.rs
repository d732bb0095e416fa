//! Tool calls a person approves in a teamchat thread, through the real binary against the fake
//! platform: the run waits with Approve and Deny buttons in the thread, a click is taken only
//! signed and only from the asker or an approver, the question is updated to say who decided,
//! and the rest of the answer follows in the thread once, in the same conversation.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::approvals::{note_script, notes_titled, tool_message};
use crate::fakes::llm::FakeLlm;
use crate::fakes::teamchat::FakePlatform;
use crate::support::{Server, eventually, openai_env};
use crate::teamchat::{
    SIGNING_SECRET, callback, form_encode, mention_at, platform, posts, send_raw, signed,
};

const NEEDS_APPROVAL: &str = "[tools.create_note]\napproval = true\n";
const THREAD: &str = "1700000900.000100";

async fn start(llm: &FakeLlm) -> (Server, FakePlatform) {
    let api = platform(json!({"ok": true})).await;
    let mut env = api.env(SIGNING_SECRET);
    env.extend(openai_env(&llm.url));
    env.push(("SERVICE_TEAMCHAT_APPROVERS", "U7, U8".into()));
    (Server::start_with_config(NEEDS_APPROVAL, &env), api)
}

/// A click on one of a question's buttons, as the platform sends it.
fn click(api: &FakePlatform, action: &str, approval: &str, user: &str, question: &Value) -> String {
    let payload = json!({
        "type": "block_actions",
        "user": {"id": user, "username": user, "team_id": "T1"},
        "api_app_id": "A1",
        "container": {
            "type": "message", "message_ts": question["ts"], "channel_id": question["channel"],
            "is_ephemeral": false,
        },
        "channel": {"id": question["channel"], "name": "general"},
        "message": {"type": "message", "ts": question["ts"], "text": question["text"]},
        "response_url": api.response_url(&format!("click-{user}")),
        "actions": [{
            "type": "button", "action_id": action, "block_id": "approval", "value": approval,
            "action_ts": "1700000901.000001",
        }],
    });
    format!("payload={}", form_encode(&payload.to_string()))
}

/// What the clicker `user` was told alone, once.
async fn told(api: &FakePlatform, user: &str) -> String {
    let path = format!("T1/click-{user}/token");
    eventually(10, async || {
        let responses = api.responses();
        let (_, body) = responses.iter().rev().find(|(p, _)| *p == path)?;
        assert_eq!(
            (&body["response_type"], &body["replace_original"]),
            (&json!("ephemeral"), &json!(false))
        );
        Some(body["text"].as_str()?.to_owned())
    })
    .await
}

async fn approval(server: &Server, id: &str) -> Value {
    let (_, listed) = server.get("/api/approvals").await;
    listed["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == id)
        .cloned()
        .unwrap()
}

/// The question posted for a waiting run, and the approval id its buttons carry.
fn question_of(posted: &Value) -> String {
    let buttons = posted["blocks"][1]["elements"].as_array().unwrap();
    let actions: Vec<&str> = buttons
        .iter()
        .map(|b| b["action_id"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["approve", "deny"], "{posted}");
    assert_eq!(buttons[0]["value"], buttons[1]["value"]);
    buttons[0]["value"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_tool_call_waits_for_the_askers_click_and_the_answer_follows_in_the_thread() {
    let llm = note_script("Plan", "Saved the plan.").await;
    let (server, api) = start(&llm).await;
    let mention = mention_at(
        "C5",
        "1700000900.000200",
        "<@UBOT> save a plan",
        Some(THREAD),
    );
    let sent = callback("EvApprove1", mention);
    assert_eq!(signed(&server, "events", &sent).await.0, StatusCode::OK);

    // The question, in the thread, with its buttons; nothing ran yet.
    let posted = posts(&api, 1).await;
    let question = &posted[0].1;
    assert_eq!(question["thread_ts"], THREAD);
    let text = question["text"].as_str().unwrap();
    assert!(
        text.contains("`create_note`") && text.contains("Plan"),
        "{text}"
    );
    let id = question_of(question);
    let pending = approval(&server, &id).await;
    assert_eq!(
        (pending["status"].as_str(), pending["source"].as_str()),
        (Some("pending"), Some("teamchat"))
    );
    assert!(pending["conversation_id"].is_string(), "{pending}");
    assert_eq!(notes_titled(&server, "Plan"), 0);

    // A forged click is refused; someone who neither asked nor approves is told so alone.
    let forged = click(&api, "approve", &id, "U1", question);
    let stamp = (chrono::Utc::now().timestamp()).to_string();
    let answer = send_raw(
        &server,
        "interactions",
        &forged,
        Some(&stamp),
        Some("v0=00ff"),
    )
    .await;
    assert_eq!(answer.0, StatusCode::UNAUTHORIZED, "{}", answer.1);
    let (status, ack) = signed(
        &server,
        "interactions",
        &click(&api, "approve", &id, "U5", question),
    )
    .await;
    assert_eq!(
        (status, ack["outcome"].as_str()),
        (
            StatusCode::OK,
            Some("refused: not the asker or an approver")
        )
    );
    assert!(told(&api, "U5").await.contains("Only the person who asked"));
    assert_eq!(approval(&server, &id).await["status"], "pending");

    // The asker approves: the question says so, the tool runs once, the answer follows.
    let (status, ack) = signed(
        &server,
        "interactions",
        &click(&api, "approve", &id, "U1", question),
    )
    .await;
    assert_eq!(
        (status, ack["outcome"].as_str()),
        (StatusCode::OK, Some("approved"))
    );
    let update = &api.updates()[0];
    assert_eq!(
        (&update["channel"], &update["ts"]),
        (&question["channel"], &question["ts"])
    );
    let updated = update["text"].as_str().unwrap();
    assert!(
        updated.starts_with(text) && updated.ends_with("Approved by <@U1>."),
        "{updated}"
    );
    assert_eq!(
        update["blocks"].as_array().unwrap().len(),
        1,
        "no buttons left"
    );

    let posted = posts(&api, 2).await;
    assert_eq!(posted[1].1["text"], "Saved the plan.");
    assert_eq!(posted[1].1["thread_ts"], THREAD);
    assert_eq!(notes_titled(&server, "Plan"), 1, "the tool ran once");
    let decided = approval(&server, &id).await;
    assert_eq!(
        (decided["status"].as_str(), decided["note"].as_str()),
        (Some("approved"), Some("Approved in teamchat by U1"))
    );

    // A second click changes nothing; an unknown approval is answered politely.
    let (_, ack) = signed(
        &server,
        "interactions",
        &click(&api, "deny", &id, "U7", question),
    )
    .await;
    assert_eq!(ack["outcome"], "decided before");
    assert!(told(&api, "U7").await.contains("decided already"));
    let (_, ack) = signed(
        &server,
        "interactions",
        &click(&api, "approve", "no-such-approval", "U8", question),
    )
    .await;
    assert_eq!(ack["outcome"], "unknown");
    assert!(told(&api, "U8").await.contains("not open here"));
    assert_eq!(approval(&server, &id).await["status"], "approved");
    assert_eq!(api.posted().len(), 2, "nothing more was posted");

    // The thread is one conversation: the question's turn and its answer.
    let (_, listing) = server.get("/api/conversations?source=teamchat").await;
    let conversation = listing["conversations"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (_, shown) = server
        .get(&format!("/api/conversations/{conversation}"))
        .await;
    let texts: Vec<(&str, &str)> = shown["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), m["text"].as_str().unwrap()))
        .collect();
    assert_eq!(
        texts,
        [("user", "save a plan"), ("assistant", "Saved the plan.")]
    );
}

#[tokio::test]
async fn an_approver_denies_and_the_model_hears_that_a_person_declined() {
    let llm = note_script("Secret", "Understood, I did not save it.").await;
    let (server, api) = start(&llm).await;
    let direct = json!({
        "type": "message", "channel_type": "im", "user": "U1", "text": "save a secret",
        "ts": "1700000950.000100", "channel": "D5",
    });
    assert_eq!(
        signed(&server, "events", &callback("EvDeny1", direct))
            .await
            .0,
        StatusCode::OK
    );
    let posted = posts(&api, 1).await;
    let question = &posted[0].1;
    let id = question_of(question);

    let (_, ack) = signed(
        &server,
        "interactions",
        &click(&api, "deny", &id, "U8", question),
    )
    .await;
    assert_eq!(ack["outcome"], "denied");
    let posted = posts(&api, 2).await;
    assert_eq!(
        (
            posted[1].1["channel"].as_str(),
            posted[1].1["text"].as_str()
        ),
        (Some("D5"), Some("Understood, I did not save it."))
    );
    assert!(
        api.updates()[0]["text"]
            .as_str()
            .unwrap()
            .ends_with("Denied by <@U8>.")
    );
    assert_eq!(
        notes_titled(&server, "Secret"),
        0,
        "a declined call never runs"
    );
    let told = tool_message(&llm);
    assert!(told.contains("a person declined this tool call"), "{told}");
}
