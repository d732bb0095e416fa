//! The adapter end to end against a fake platform: REST and gateway on 127.0.0.1, with
//! serenity pointed at it through `SERVICE_GUILDCHAT_API_BASE` and the `/gateway` answer.

mod churn;
mod platform;
mod support;

use std::time::Duration;

use serde_json::{Value, json};
use service_contract::{AdapterStatus, ProfileChoice, TaskState, Vote};

use platform::{
    ADMIN_ROLE_ID, BOT_ID, FakePlatform, GUILD_ID, USER_ID, bot_user, human, member, message_json,
};
use support::{Harness, TOKEN, lock, long_reply, wait_for};

/// The settings of a fully configured adapter pointed at `platform`.
fn full_settings(platform: &FakePlatform) -> Vec<(&'static str, String)> {
    vec![
        ("SERVICE_GUILDCHAT_TOKEN", TOKEN.to_owned()),
        ("SERVICE_GUILDCHAT_API_BASE", platform.api_base.clone()),
        ("SERVICE_GUILDCHAT_GUILD_ID", GUILD_ID.to_string()),
        ("SERVICE_GUILDCHAT_ADMIN_ROLE_ID", ADMIN_ROLE_ID.to_string()),
    ]
}

const CATEGORY: u8 = 4;
const TEXT: u8 = 0;

fn mention(id: u64, channel_id: u64, text: &str) -> Value {
    message_json(
        id,
        channel_id,
        Some(GUILD_ID),
        human(USER_ID),
        &format!("<@{BOT_ID}> {text}"),
        vec![bot_user()],
    )
}

/// A guild message without mentions.
fn said(id: u64, channel_id: u64, author: Value, content: &str) -> Value {
    message_json(id, channel_id, Some(GUILD_ID), author, content, vec![])
}

fn posts_in(platform: &FakePlatform, channel_id: u64) -> Vec<String> {
    platform
        .requests_to("POST", &format!("/channels/{channel_id}/messages"))
        .into_iter()
        .map(|r| r.body["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Waits until at least `count` posts reached a channel; returns the texts of all of them.
async fn posts_arrive(platform: &FakePlatform, channel_id: u64, count: usize) -> Vec<String> {
    wait_for(&format!("{count} post(s) in channel {channel_id}"), || {
        Some(posts_in(platform, channel_id)).filter(|p| p.len() >= count)
    })
    .await
}

/// Reply bodies sent to a channel, whole.
fn post_bodies_in(platform: &FakePlatform, channel_id: u64) -> Vec<Value> {
    platform
        .requests_to("POST", &format!("/channels/{channel_id}/messages"))
        .into_iter()
        .map(|r| r.body)
        .collect()
}

/// What serenity sends for "no mentions at all".
fn no_mentions() -> Value {
    json!({ "parse": [], "users": [], "roles": [] })
}

/// The control category and channels, as `/service-setup` leaves them; returns the ids of
/// `#service` and `#service-activity`.
fn add_control_channels(platform: &FakePlatform) -> (u64, u64) {
    let category = platform.add_channel("service", CATEGORY, None);
    let service = platform.add_channel("service", TEXT, Some(category));
    platform.add_channel("service-tasks", TEXT, Some(category));
    let activity = platform.add_channel("service-activity", TEXT, Some(category));
    (service, activity)
}

fn setup_command(id: u64, roles: &[u64]) -> Value {
    json!({
        "id": id.to_string(), "application_id": BOT_ID.to_string(), "type": 2,
        "token": format!("interaction-{id}"), "version": 1,
        "guild_id": GUILD_ID.to_string(), "channel_id": "300",
        "member": member(USER_ID, roles), "app_permissions": "0",
        "locale": "en-US", "guild_locale": "en-US", "entitlements": [], "attachment_size_limit": 8388608,
        "data": { "id": "777", "name": "service-setup", "type": 1 }
    })
}

fn reaction(message_id: u64, channel_id: u64, emoji: &str) -> Value {
    json!({
        "user_id": USER_ID.to_string(), "channel_id": channel_id.to_string(),
        "message_id": message_id.to_string(), "guild_id": GUILD_ID.to_string(),
        "member": member(USER_ID, &[]), "emoji": { "id": null, "name": emoji },
        "message_author_id": BOT_ID.to_string(), "burst": false, "type": 0
    })
}

#[test]
fn fixtures_are_what_serenity_reads() {
    use serenity::all::{CommandInteraction, GuildChannel, Message, Reaction};
    serde_json::from_value::<Message>(mention(1, 2, "hi")).unwrap();
    serde_json::from_value::<CommandInteraction>(setup_command(3, &[4])).unwrap();
    serde_json::from_value::<Reaction>(reaction(5, 6, "👍")).unwrap();
    serde_json::from_value::<GuildChannel>(platform::channel_json(7, "service", TEXT, Some(8)))
        .unwrap();
}

#[tokio::test]
async fn a_mention_gets_a_reply_and_the_agent_sees_the_prompt() {
    let platform = FakePlatform::start(TOKEN).await;
    let harness = Harness::new(full_settings(&platform));
    harness.start_ready().await;

    let identify = &platform.identifies()[0];
    // GUILDS | GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT, and reactions for feedback.
    let intents = (1 << 0) | (1 << 9) | (1 << 12) | (1 << 15) | (1 << 10);
    assert_eq!(identify["intents"].as_u64(), Some(intents));
    let registered = platform.requests_to("PUT", "/applications/*/guilds/500/commands");
    assert_eq!(registered[0].body[0]["name"], "service-setup");

    // Ignored: chatter without a mention, and the bot's own message.
    platform.dispatch(
        "MESSAGE_CREATE",
        said(11, 300, human(USER_ID), "just chatting"),
    );
    let mut own = said(12, 300, bot_user(), &format!("<@{BOT_ID}> me"));
    own["mentions"] = json!([bot_user()]);
    platform.dispatch("MESSAGE_CREATE", own);
    platform.dispatch("MESSAGE_CREATE", mention(13, 300, "what is 2+2?"));

    let posts = posts_arrive(&platform, 300, 1).await;
    assert_eq!(posts, ["answer: what is 2+2?"]);
    let prompts = harness.prompts();
    assert_eq!(prompts.len(), 1, "only the mention reached the agent");
    assert_eq!(prompts[0].prompt, "what is 2+2?");
    assert_eq!(
        prompts[0].profile,
        ProfileChoice::Preferred("default".to_owned())
    );
    assert_eq!(prompts[0].source, "guildchat");
    assert_eq!(
        prompts[0].conversation.as_deref(),
        Some("300"),
        "the channel is the conversation the runtime keeps"
    );
    assert!(harness.entry().last_activity_at.is_some());

    wait_for("a heartbeat", || (platform.heartbeats() > 0).then_some(())).await;
    harness.stop().await;
}

#[tokio::test]
async fn a_4500_character_reply_arrives_as_three_posts() {
    let platform = FakePlatform::start(TOKEN).await;
    let harness = Harness::new(full_settings(&platform));
    harness.start_ready().await;

    // A direct message: no guild, no mention needed.
    let dm = message_json(
        21,
        400,
        None,
        human(USER_ID),
        "a long answer please",
        vec![],
    );
    platform.dispatch("MESSAGE_CREATE", dm);

    let posts = posts_arrive(&platform, 400, 3).await;
    assert!(posts.iter().all(|p| p.chars().count() <= 2000));
    assert_eq!(posts.join("\n"), long_reply().trim_end());
    harness.stop().await;
}

#[tokio::test]
async fn setup_refuses_non_admins_and_creates_the_channels_once() {
    let platform = FakePlatform::start(TOKEN).await;
    let harness = Harness::new(full_settings(&platform));
    harness.start_ready().await;

    platform.dispatch("INTERACTION_CREATE", setup_command(31, &[123]));
    let refusal = wait_for("the refusal", || {
        platform
            .requests_to("POST", "/interactions/31/interaction-31/callback")
            .pop()
    })
    .await;
    assert_eq!(refusal.body["type"], 4, "an immediate message");
    assert_eq!(refusal.body["data"]["flags"], 64, "ephemeral");
    assert!(
        refusal.body["data"]["content"]
            .as_str()
            .unwrap()
            .contains("lack the required admin role")
    );
    assert!(platform.channels().is_empty());

    for id in [32, 33] {
        platform.dispatch("INTERACTION_CREATE", setup_command(id, &[ADMIN_ROLE_ID]));
        let answer = wait_for("the setup answer", || {
            platform
                .requests_to(
                    "PATCH",
                    &format!("/webhooks/{BOT_ID}/interaction-{id}/messages/@original"),
                )
                .pop()
        })
        .await;
        let deferred = &platform.requests_to(
            "POST",
            &format!("/interactions/{id}/interaction-{id}/callback"),
        )[0];
        assert_eq!(
            (
                deferred.body["type"].as_u64(),
                deferred.body["data"]["flags"].as_u64()
            ),
            (Some(5), Some(64))
        );
        let summary = answer.body["content"].as_str().unwrap().to_owned();
        if id == 32 {
            assert!(summary.starts_with("Created the category service; created #service, #service-tasks, #service-activity"), "{summary}");
        } else {
            assert!(
                summary.contains("already there; all control channels were already there"),
                "{summary}"
            );
        }
    }
    let channels = platform.channels();
    let names: Vec<(&str, u64)> = channels
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["type"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        names,
        [
            ("service", 4),
            ("service", 0),
            ("service-tasks", 0),
            ("service-activity", 0)
        ]
    );
    let category = &channels[0]["id"];
    assert!(channels[1..].iter().all(|c| &c["parent_id"] == category));
    assert_eq!(
        platform.requests_to("POST", "/guilds/500/channels").len(),
        4,
        "created once"
    );
    assert!(platform.requests_to("DELETE", "/channels/*").is_empty());
    harness.stop().await;
}

#[tokio::test]
async fn a_service_message_becomes_a_thread_with_a_status_card_and_votes_are_feedback() {
    let platform = FakePlatform::start(TOKEN).await;
    let (service, activity) = add_control_channels(&platform);
    let harness = Harness::new(full_settings(&platform));
    harness.start_ready().await;

    let prompt = "Summarise the release notes for the team please";
    platform.dispatch("MESSAGE_CREATE", said(41, service, human(USER_ID), prompt));

    let edit = wait_for("the status card", || {
        platform
            .requests_to("PATCH", "/channels/*/messages/*")
            .pop()
    })
    .await;
    let thread =
        &platform.requests_to("POST", &format!("/channels/{service}/messages/41/threads"))[0];
    assert_eq!(thread.body["name"], "Summarise the release notes for the");
    let thread_id: u64 = edit.path.split('/').nth(2).unwrap().parse().unwrap();
    let card_id: u64 = edit.path.split('/').nth(4).unwrap().parse().unwrap();
    assert_eq!(posts_in(&platform, thread_id)[0], "Processing...");
    assert_eq!(
        harness.prompts()[0].conversation,
        Some(thread_id.to_string()),
        "the task's thread is its conversation"
    );
    let requests = platform.requests();
    let position = |method: &str, pattern: &str| {
        requests
            .iter()
            .position(|r| r.method == method && r.path.contains(pattern))
            .unwrap()
    };
    assert!(
        position("POST", "/threads") < position("POST", &format!("/channels/{thread_id}/messages"))
    );
    assert!(
        position("POST", &format!("/channels/{thread_id}/messages"))
            < position("PATCH", "/messages/")
    );

    let embed = &edit.body["embeds"][0];
    let fields: Vec<(&str, &str)> = embed["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["name"].as_str().unwrap(), f["value"].as_str().unwrap()))
        .collect();
    assert_eq!(
        fields,
        [
            ("Status", "completed"),
            ("Agent", "fake-provider"),
            (
                "Result",
                "answer: Summarise the release notes for the team please"
            )
        ]
    );
    assert_eq!(embed["footer"]["text"], "trace trace-1");
    assert_eq!(edit.body["allowed_mentions"], no_mentions());

    assert_eq!(
        lock(&harness.tasks.created).clone(),
        [(
            "task-1".to_owned(),
            "Summarise the release notes for the".to_owned(),
            Some("default".to_owned())
        )]
    );
    let updates = lock(&harness.tasks.updates).clone();
    let states: Vec<TaskState> = updates.iter().map(|(_, state, _)| *state).collect();
    assert_eq!(states, [TaskState::Running, TaskState::Completed]);
    assert_eq!(
        updates[1].2.as_deref(),
        Some("trace-1"),
        "the run's trace is linked"
    );
    let feed = posts_arrive(&platform, activity, 3).await;
    assert!(
        feed[0].starts_with("`pending`")
            && feed[1].starts_with("`running`")
            && feed[2].starts_with("`completed`")
    );
    assert!(
        feed.iter()
            .all(|line| line.contains(&format!("<#{thread_id}>")))
    );
    assert!(
        post_bodies_in(&platform, activity)
            .iter()
            .all(|body| body["allowed_mentions"] == no_mentions())
    );

    // Votes: other emoji are not feedback; a thumbs-up is, linked to the run's trace.
    wait_for("the offered reactions", || {
        (platform
            .requests_to("PUT", "/channels/*/messages/*/reactions/*/@me")
            .len()
            == 2)
            .then_some(())
    })
    .await;
    platform.dispatch("MESSAGE_REACTION_ADD", reaction(card_id, thread_id, "🎉"));
    platform.dispatch("MESSAGE_REACTION_ADD", reaction(card_id, thread_id, "👍"));
    let votes = wait_for("the vote", || {
        Some(lock(&harness.votes.recorded).clone()).filter(|v| !v.is_empty())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        lock(&harness.votes.recorded).len(),
        1,
        "the party popper is not a vote"
    );
    assert_eq!(votes[0].vote, Vote::Up);
    assert_eq!(votes[0].message_id, card_id.to_string());
    assert_eq!(votes[0].user_id, USER_ID.to_string());
    assert_eq!(votes[0].trace_id.as_deref(), Some("trace-1"));
    harness.stop().await;
}

#[tokio::test]
async fn a_failed_run_gets_a_notice_without_the_details() {
    let platform = FakePlatform::start(TOKEN).await;
    let harness = Harness::new(full_settings(&platform));
    harness.start_ready().await;

    platform.dispatch("MESSAGE_CREATE", mention(71, 300, "please fail"));
    let posts = posts_arrive(&platform, 300, 1).await;
    assert_eq!(posts, ["Sorry, I could not answer that. (trace trace-1)"]);
    harness.stop().await;
}

#[tokio::test]
async fn a_reply_never_pings_the_users_or_roles_it_names() {
    let platform = FakePlatform::start(TOKEN).await;
    let harness = Harness::new(full_settings(&platform));
    harness.start_ready().await;

    platform.dispatch(
        "MESSAGE_CREATE",
        mention(81, 300, "tell <@2001> and <@&600> and @everyone"),
    );
    let bodies = wait_for("the reply", || {
        Some(post_bodies_in(&platform, 300)).filter(|p| !p.is_empty())
    })
    .await;
    assert_eq!(
        bodies[0]["content"],
        "answer: tell <@2001> and <@&600> and @everyone"
    );
    assert_eq!(
        bodies[0]["allowed_mentions"],
        no_mentions(),
        "an empty parse list and no ids: nobody is pinged"
    );
    harness.stop().await;
}

#[tokio::test]
async fn an_empty_reply_gets_a_notice() {
    let platform = FakePlatform::start(TOKEN).await;
    let harness = Harness::new(full_settings(&platform));
    harness.start_ready().await;

    platform.dispatch("MESSAGE_CREATE", mention(91, 300, "stay silent"));
    let posts = posts_arrive(&platform, 300, 1).await;
    assert_eq!(posts, ["(empty reply)"]);
    harness.stop().await;
}

#[tokio::test]
async fn a_result_too_long_for_the_card_follows_it_in_full() {
    let platform = FakePlatform::start(TOKEN).await;
    let (service, _) = add_control_channels(&platform);
    let harness = Harness::new(full_settings(&platform));
    harness.start_ready().await;

    let prompt = "Write a long report for the team";
    platform.dispatch("MESSAGE_CREATE", said(95, service, human(USER_ID), prompt));

    let edit = wait_for("the status card", || {
        platform
            .requests_to("PATCH", "/channels/*/messages/*")
            .pop()
    })
    .await;
    let thread_id: u64 = edit.path.split('/').nth(2).unwrap().parse().unwrap();
    let result = edit.body["embeds"][0]["fields"][2]["value"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(result.chars().count(), 1024, "the embed field limit");
    let shown = result.strip_suffix('…').expect("ends truncated");
    assert!(long_reply().starts_with(shown));

    // Placeholder, then the whole reply in three posts.
    let posts = posts_arrive(&platform, thread_id, 4).await;
    assert_eq!(posts[0], "Processing...");
    assert!(posts[1..].iter().all(|p| p.chars().count() <= 2000));
    assert_eq!(posts[1..].join("\n"), long_reply().trim_end());
    let requests = platform.requests();
    let card_at = requests.iter().position(|r| r.method == "PATCH").unwrap();
    let thread_posts: Vec<usize> = requests
        .iter()
        .enumerate()
        .filter(|(_, r)| r.method == "POST" && r.path == format!("/channels/{thread_id}/messages"))
        .map(|(i, _)| i)
        .collect();
    assert!(
        thread_posts[0] < card_at && thread_posts[1..].iter().all(|&i| i > card_at),
        "the full text comes below the card"
    );
    harness.stop().await;
}

#[tokio::test]
async fn a_missing_token_is_an_error_naming_the_variable() {
    let harness = Harness::new(vec![]);
    harness.start().await;
    let entry = harness.entry();
    assert_eq!(
        (entry.status, entry.missing_settings, entry.error_message),
        (
            AdapterStatus::Error,
            vec!["SERVICE_GUILDCHAT_TOKEN".to_owned()],
            Some("ConfigError: SERVICE_GUILDCHAT_TOKEN is not set".to_owned())
        )
    );
    harness.stop().await;
}

#[tokio::test]
async fn a_rejected_token_is_reported_once_without_reconnecting() {
    let platform = FakePlatform::start(TOKEN).await;
    let mut settings = full_settings(&platform);
    settings[0].1 = "rotated-token".to_owned();
    let harness = Harness::new(settings);
    harness.start().await;

    let message = wait_for("the auth error", || {
        harness
            .entry()
            .error_message
            .filter(|m| m.starts_with("AuthError"))
    })
    .await;
    assert!(message.contains("SERVICE_GUILDCHAT_TOKEN was rejected (401 Unauthorized): the token is invalid or was rotated"), "{message}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(platform.requests().len(), 1, "one check, no retries");
    assert!(platform.identifies().is_empty());
    harness.stop().await;
}

#[tokio::test]
async fn a_token_refused_by_the_gateway_is_an_auth_error() {
    let platform = FakePlatform::start_rejecting_at_gateway(TOKEN).await;
    let harness = Harness::new(full_settings(&platform));
    harness.start().await;

    let message = wait_for("the auth error", || {
        harness
            .entry()
            .error_message
            .filter(|m| m.starts_with("AuthError"))
    })
    .await;
    assert!(
        message.contains("4004") && message.contains("invalid or was rotated"),
        "{message}"
    );
    assert_eq!(harness.entry().status, AdapterStatus::Error);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(platform.identifies().len(), 1, "no reconnect loop");
    harness.stop().await;
}

/// With the control bot misconfigured: the entry keeps `expected_error`, the control bot stays
/// offline (no command, no reaction intent, `#service` is plain chatter), `/service-setup` is
/// refused to everyone, and mentions still get replies.
async fn control_bot_offline_but_mentions_work(
    settings: impl FnOnce(&mut Vec<(&'static str, String)>),
    expected_error: &str,
) {
    let platform = FakePlatform::start(TOKEN).await;
    let (service, _) = add_control_channels(&platform);
    let mut full = full_settings(&platform);
    settings(&mut full);
    let harness = Harness::new(full);
    harness.start().await;
    let message = harness.entry().error_message.unwrap();
    assert!(message.starts_with(expected_error), "{message}");

    wait_for("the gateway session", || {
        (!platform.identifies().is_empty()).then_some(())
    })
    .await;
    platform.dispatch(
        "MESSAGE_CREATE",
        said(50, service, human(USER_ID), "no thread please"),
    );
    platform.dispatch("MESSAGE_CREATE", mention(51, 300, "still there?"));
    let posts = posts_arrive(&platform, 300, 1).await;
    assert_eq!(posts, ["answer: still there?"]);
    assert_eq!(
        harness.entry().status,
        AdapterStatus::Error,
        "the control bot is still offline"
    );
    assert_eq!(
        platform.identifies()[0]["intents"].as_u64(),
        Some((1 << 0) | (1 << 9) | (1 << 12) | (1 << 15))
    );
    assert!(
        platform
            .requests_to("PUT", "/applications/*/guilds/*/commands")
            .is_empty()
    );

    // /service-setup registered by an earlier run is refused to everyone, admins included.
    platform.dispatch("INTERACTION_CREATE", setup_command(52, &[ADMIN_ROLE_ID]));
    let refusal = wait_for("the refusal", || {
        platform
            .requests_to("POST", "/interactions/52/*/callback")
            .pop()
    })
    .await;
    assert_eq!(refusal.body["type"], 4);
    assert_eq!(refusal.body["data"]["flags"], 64, "ephemeral");
    assert!(
        refusal.body["data"]["content"]
            .as_str()
            .unwrap()
            .contains("lack the required admin role")
    );
    assert_eq!(platform.channels().len(), 4, "nothing created");
    assert!(
        platform
            .requests_to("POST", "/channels/*/messages/*/threads")
            .is_empty(),
        "#service is not a task channel while the control bot is offline"
    );
    assert_eq!(harness.prompts().len(), 1, "only the mention ran the agent");
    harness.stop().await;
}

#[tokio::test]
async fn without_control_settings_the_error_stays_and_mentions_still_work() {
    control_bot_offline_but_mentions_work(
        |settings| settings.retain(|(name, _)| !name.ends_with("ADMIN_ROLE_ID")),
        "ConfigError: SERVICE_GUILDCHAT_ADMIN_ROLE_ID is not set; the control bot is offline",
    )
    .await;
}

#[tokio::test]
async fn a_non_numeric_admin_role_denies_setup_to_everyone_and_mentions_still_work() {
    control_bot_offline_but_mentions_work(
        |settings| {
            for (name, value) in settings.iter_mut() {
                if name.ends_with("ADMIN_ROLE_ID") {
                    *value = "admins".to_owned();
                }
            }
        },
        "ConfigError: SERVICE_GUILDCHAT_ADMIN_ROLE_ID must be a numeric id, got \"admins\"; \
         the control bot is offline and /service-setup is denied to everyone",
    )
    .await;
}

#[tokio::test]
async fn a_denied_post_is_suppressed_and_the_bot_keeps_answering() {
    let platform = FakePlatform::start(TOKEN).await;
    platform.deny_posts_in(301);
    let harness = Harness::new(full_settings(&platform));
    harness.start_ready().await;

    platform.dispatch("MESSAGE_CREATE", mention(61, 301, "into the void"));
    wait_for("the denied post", || {
        (!platform
            .requests_to("POST", "/channels/301/messages")
            .is_empty())
        .then_some(())
    })
    .await;
    platform.dispatch("MESSAGE_CREATE", mention(62, 302, "and here?"));
    let posts = posts_arrive(&platform, 302, 1).await;
    assert_eq!(posts, ["answer: and here?"]);

    // Recorded on the entry, whose status stays running.
    let entry = wait_for("the recorded failure", || {
        Some(harness.entry()).filter(|e| e.metadata.contains_key("send_failures"))
    })
    .await;
    assert_eq!(entry.status, AdapterStatus::Running);
    assert_eq!(entry.error_count, 0);
    assert_eq!(entry.error_message, None);
    assert_eq!(entry.metadata["send_failures"], "1");
    let last = &entry.metadata["last_send_failure"];
    assert!(
        last.starts_with("could not post a reply in channel 301: the bot lacks permission")
            && last.contains("Missing Permissions"),
        "{last}"
    );

    // A second failure counts on.
    platform.dispatch("MESSAGE_CREATE", mention(63, 301, "again?"));
    wait_for("the second failure", || {
        (harness.entry().metadata["send_failures"] == "2").then_some(())
    })
    .await;
    assert_eq!(harness.entry().status, AdapterStatus::Running);
    harness.stop().await;
}

#[tokio::test]
async fn stop_disconnects_promptly_and_start_reconnects() {
    let platform = FakePlatform::start(TOKEN).await;
    let harness = Harness::new(full_settings(&platform));
    harness.start_ready().await;

    let started = tokio::time::Instant::now();
    harness.stop().await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "stop took {:?}",
        started.elapsed()
    );
    wait_for("the gateway to see the close", || {
        (platform.closed_connections() == 1).then_some(())
    })
    .await;

    harness.ctx.registry.mark_stopped("guildchat");
    harness.start_ready().await;
    assert_eq!(platform.identifies().len(), 2);
    harness.stop().await;
}
