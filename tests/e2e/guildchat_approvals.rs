//! Tool calls a person approves in guildchat, through the real binary against the fake
//! platform (REST and gateway, shared with the adapter's own tests): a mention's run waits with
//! Approve and Deny buttons in its channel, a click is taken only from the asker or an
//! approver, the question is edited to say who decided, and the rest of the answer follows in
//! the channel, once.

use serde_json::{Value, json};

use crate::approvals::{note_script, notes_titled, tool_message};
use crate::fakes::llm::FakeLlm;
use crate::guild_platform::{
    ADMIN_ROLE_ID, BOT_ID, FakePlatform, GUILD_ID, USER_ID, bot_user, human, member, message_json,
};
use crate::support::{Server, eventually, openai_env};

const TOKEN: &str = "good-token";
const CHANNEL: u64 = 300;
const APPROVER: u64 = 2_002;
const STRANGER: u64 = 2_009;

async fn start(llm: &FakeLlm) -> (Server, FakePlatform) {
    let platform = FakePlatform::start(TOKEN).await;
    let mut env = vec![
        ("SERVICE_GUILDCHAT_TOKEN", TOKEN.to_owned()),
        ("SERVICE_GUILDCHAT_API_BASE", platform.api_base.clone()),
        ("SERVICE_GUILDCHAT_GUILD_ID", GUILD_ID.to_string()),
        ("SERVICE_GUILDCHAT_ADMIN_ROLE_ID", ADMIN_ROLE_ID.to_string()),
        (
            "SERVICE_GUILDCHAT_APPROVERS",
            format!("{APPROVER}, not-an-id"),
        ),
    ];
    env.extend(openai_env(&llm.url));
    let server = Server::start_with_config("[tools.create_note]\napproval = true\n", &env);
    // The session is up once the gateway was identified to (its READY follows at once).
    eventually(30, async || {
        (!platform.identifies().is_empty()).then_some(())
    })
    .await;
    (server, platform)
}

fn mention(id: u64, text: &str) -> Value {
    message_json(
        id,
        CHANNEL,
        Some(GUILD_ID),
        human(USER_ID),
        &format!("<@{BOT_ID}> {text}"),
        vec![bot_user()],
    )
}

/// The bodies of the messages posted in the channel, once there are `count`.
async fn posts(platform: &FakePlatform, count: usize) -> Vec<Value> {
    let path = format!("/channels/{CHANNEL}/messages");
    eventually(20, async || {
        let posted: Vec<Value> = platform
            .requests_to("POST", &path)
            .into_iter()
            .map(|r| r.body)
            .collect();
        (posted.len() >= count).then_some(posted)
    })
    .await
}

/// The custom ids of a posted question's buttons.
fn buttons(question: &Value) -> Vec<String> {
    question["components"][0]["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["custom_id"].as_str().unwrap().to_owned())
        .collect()
}

/// A click on the button `custom_id` of the question message `question_id`, by `user`.
fn click(id: u64, user: u64, question_id: u64, content: &str, custom_id: &str) -> Value {
    json!({
        "id": id.to_string(), "application_id": BOT_ID.to_string(), "type": 3,
        "token": format!("click-{id}"), "version": 1,
        "guild_id": GUILD_ID.to_string(), "channel_id": CHANNEL.to_string(),
        "member": member(user, &[]), "app_permissions": "0",
        "locale": "en-US", "guild_locale": "en-US", "entitlements": [],
        "attachment_size_limit": 8388608,
        "message": message_json(question_id, CHANNEL, Some(GUILD_ID), bot_user(), content, vec![]),
        "data": { "custom_id": custom_id, "component_type": 2 }
    })
}

/// The answer the platform got to click `id`.
async fn answered(platform: &FakePlatform, id: u64) -> Value {
    let path = format!("/interactions/{id}/click-{id}/callback");
    eventually(20, async || {
        let found = platform.requests_to("POST", &path);
        Some(found.first()?.body.clone())
    })
    .await
}

async fn approval(server: &Server, source: &str) -> Value {
    let (_, listed) = server.get("/api/approvals").await;
    listed["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["source"] == source)
        .cloned()
        .unwrap()
}

#[tokio::test]
async fn a_mention_waits_for_a_click_and_the_rest_of_the_answer_follows_once() {
    let llm = note_script("Roadmap", "Saved the roadmap.").await;
    let (server, platform) = start(&llm).await;
    platform.dispatch("MESSAGE_CREATE", mention(11, "save the roadmap"));

    // The question, with its buttons; nothing ran yet.
    let posted = posts(&platform, 1).await;
    let question = &posted[0];
    let content = question["content"].as_str().unwrap().to_owned();
    assert!(
        content.contains("`create_note`") && content.contains("Roadmap"),
        "{content}"
    );
    let pending = approval(&server, "guildchat").await;
    let id = pending["id"].as_str().unwrap();
    let [approve, deny] = &buttons(question)[..] else {
        panic!("two buttons: {question}")
    };
    assert_eq!(approve, &format!("approval:approve:{id}:{USER_ID}"));
    assert_eq!(deny, &format!("approval:deny:{id}:{USER_ID}"));
    assert_eq!(notes_titled(&server, "Roadmap"), 0);
    // The clicks carry the question as the platform shows it (its id is the fake's own).
    let question_id = 900;

    // Someone else is told so alone, and nothing is decided.
    platform.dispatch(
        "INTERACTION_CREATE",
        click(21, STRANGER, question_id, &content, approve),
    );
    let refused = answered(&platform, 21).await;
    assert_eq!(
        (refused["type"].as_u64(), refused["data"]["flags"].as_u64()),
        (Some(4), Some(64))
    );
    assert!(
        refused["data"]["content"]
            .as_str()
            .unwrap()
            .contains("Only the person who asked")
    );
    assert_eq!(approval(&server, "guildchat").await["status"], "pending");

    // The asker approves: the question says so without buttons; the answer follows.
    platform.dispatch(
        "INTERACTION_CREATE",
        click(22, USER_ID, question_id, &content, approve),
    );
    let updated = answered(&platform, 22).await;
    assert_eq!(updated["type"], 7, "{updated}");
    assert_eq!(
        updated["data"]["content"],
        format!("{content}\nApproved by <@{USER_ID}>.")
    );
    assert_eq!(updated["data"]["components"], json!([]));
    let posted = posts(&platform, 2).await;
    assert_eq!(posted[1]["content"], "Saved the roadmap.");
    assert_eq!(notes_titled(&server, "Roadmap"), 1, "the tool ran once");
    let decided = approval(&server, "guildchat").await;
    assert_eq!(
        (decided["status"].as_str(), decided["note"].as_str()),
        (
            Some("approved"),
            Some(format!("Approved in guildchat by {USER_ID}").as_str())
        )
    );

    // An approver's late click changes nothing; the job that posted the answer is done.
    platform.dispatch(
        "INTERACTION_CREATE",
        click(23, APPROVER, question_id, &content, deny),
    );
    let late = answered(&platform, 23).await;
    assert!(
        late["data"]["content"]
            .as_str()
            .unwrap()
            .contains("decided already")
    );
    assert_eq!(approval(&server, "guildchat").await["status"], "approved");
    let (_, tasks) = server.get("/api/tasks").await;
    let job = tasks["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["title"] == "guildchat job")
        .cloned()
        .unwrap();
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(posts(&platform, 2).await.len(), 2, "posted once");
}

#[tokio::test]
async fn an_approver_denies_and_the_model_hears_that_a_person_declined() {
    let llm = note_script("Secret", "Understood, not saved.").await;
    let (server, platform) = start(&llm).await;
    platform.dispatch("MESSAGE_CREATE", mention(31, "save a secret"));
    let posted = posts(&platform, 1).await;
    let content = posted[0]["content"].as_str().unwrap().to_owned();
    let deny = buttons(&posted[0])[1].clone();
    let question_id = 900;
    platform.dispatch(
        "INTERACTION_CREATE",
        click(41, APPROVER, question_id, &content, &deny),
    );
    assert!(
        answered(&platform, 41).await["data"]["content"]
            .as_str()
            .unwrap()
            .ends_with(&format!("Denied by <@{APPROVER}>."))
    );
    let posted = posts(&platform, 2).await;
    assert_eq!(posted[1]["content"], "Understood, not saved.");
    assert_eq!(
        notes_titled(&server, "Secret"),
        0,
        "a declined call never runs"
    );
    let told = tool_message(&llm);
    assert!(told.contains("a person declined this tool call"), "{told}");
}
