//! The gateway's own churn: the platform asks the bot to reconnect, invalidates its session, cuts
//! its connection or refuses a post with 429. Each is ridden out: the bot comes back the way the
//! protocol asks for, the next mention is answered, and the entry stays `running` with no error.

use std::time::Duration;

use service_contract::AdapterStatus;

use super::platform::FakePlatform;
use super::support::{Harness, TOKEN, wait_for};
use super::{full_settings, mention, posts_arrive};

/// How the bot is expected to come back after the churn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Comeback {
    /// RESUME of the first session, which replays what the bot missed.
    Resume,
    /// A fresh IDENTIFY, as a session that cannot be resumed requires; what the old session
    /// still had in flight is gone.
    Identify,
}

/// Starts a ready bot, applies `churn` to its gateway session and sends a mention while the bot
/// is away. Waits for the `expected` comeback, then checks that the next mention is answered
/// (the missed one too after a resume) and that the entry never left `running`.
async fn rides_out(churn: impl FnOnce(&FakePlatform), expected: Comeback) {
    let platform = FakePlatform::start(TOKEN).await;
    let harness = Harness::new(full_settings(&platform));
    harness.start_ready().await;

    // Nothing is awaited in between, so the bot has not reacted to the churn yet: the mention
    // goes out on the connection it is about to leave.
    churn(&platform);
    platform.dispatch("MESSAGE_CREATE", mention(101, 300, "missed?"));
    let comeback = wait_for("the bot to come back", || {
        match (platform.resumes().len(), platform.identifies().len()) {
            (0, 1) => None,
            (1, 1) => Some(Comeback::Resume),
            (0, 2) => Some(Comeback::Identify),
            other => panic!("unexpected (resumes, identifies): {other:?}"),
        }
    })
    .await;
    assert_eq!(comeback, expected);
    if comeback == Comeback::Resume {
        assert_eq!(platform.resumes()[0]["session_id"], "session-1");
    }

    platform.dispatch("MESSAGE_CREATE", mention(102, 300, "still there?"));
    let answers: &[&str] = match comeback {
        Comeback::Resume => &["answer: missed?", "answer: still there?"],
        Comeback::Identify => &["answer: still there?"],
    };
    let mut posts = posts_arrive(&platform, 300, answers.len()).await;
    posts.sort();
    assert_eq!(posts, answers);
    assert_eq!(
        harness.prompts().len(),
        answers.len(),
        "each mention ran once"
    );
    let entry = harness.entry();
    assert_eq!(entry.status, AdapterStatus::Running);
    assert_eq!(
        (entry.error_count, entry.error_message),
        (0, None),
        "a reconnect is not an error"
    );
    harness.stop().await;
}

#[tokio::test]
async fn after_a_reconnect_request_the_bot_resumes_and_answers() {
    rides_out(FakePlatform::request_reconnect, Comeback::Resume).await;
}

#[tokio::test]
async fn after_a_resumable_invalid_session_the_bot_resumes_and_answers() {
    rides_out(|p| p.invalidate_session(true), Comeback::Resume).await;
}

#[tokio::test]
async fn after_a_non_resumable_invalid_session_the_bot_identifies_again_and_answers() {
    rides_out(|p| p.invalidate_session(false), Comeback::Identify).await;
}

#[tokio::test]
async fn after_the_connection_is_cut_the_bot_reconnects_and_answers() {
    rides_out(FakePlatform::cut_connection, Comeback::Resume).await;
}

#[tokio::test]
async fn a_reply_refused_with_429_is_posted_once_after_the_wait() {
    let platform = FakePlatform::start(TOKEN).await;
    let harness = Harness::new(full_settings(&platform));
    harness.start_ready().await;

    let retry_after = Duration::from_millis(1_500);
    platform.rate_limit("POST", "/channels/300/messages", 1, retry_after);
    platform.dispatch("MESSAGE_CREATE", mention(111, 300, "busy?"));

    let attempts = wait_for("the post after the wait", || {
        let attempts = platform.requests_to("POST", "/channels/300/messages");
        attempts.iter().any(|a| a.status == 200).then_some(attempts)
    })
    .await;
    let statuses: Vec<u16> = attempts.iter().map(|a| a.status).collect();
    assert_eq!(statuses, [429, 200], "refused once, then posted once");
    assert!(
        attempts[1].at - attempts[0].at >= retry_after,
        "retried {:?} after the 429, which asked for {retry_after:?}",
        attempts[1].at - attempts[0].at
    );
    assert_eq!(attempts[1].body, attempts[0].body, "the same reply");
    assert_eq!(attempts[1].body["content"], "answer: busy?");
    let entry = harness.entry();
    assert!(
        !entry.metadata.contains_key("send_failures"),
        "a rate limit is waited out, not a failure: {:?}",
        entry.metadata
    );
    assert_eq!(entry.status, AdapterStatus::Running);
    harness.stop().await;
}
