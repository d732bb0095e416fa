//! The earlier turns a reply continues: the messages before the mention in its thread
//! (`conversations.replies`), or before the message in a direct conversation
//! (`conversations.history`), at most `SERVICE_TEAMCHAT_CONTEXT_MESSAGES` of them. The bot's
//! own messages are the assistant's turns. The platform is the record, so nothing is stored
//! here; when it cannot be read (a missing scope, a rate limit) the reply goes without.

use serde_json::Value;

use crate::CONTEXT_MESSAGES;
use crate::events::strip_mentions;
use crate::job::EventJob;
use crate::platform;
use crate::service::adapter::agent::{Role, Turn};
use crate::service::adapter::log::{self, Level};
use crate::service::adapter::secrets;

const DEFAULT_MESSAGES: usize = 20;
/// The host keeps no more turns than this anyway.
const MAX_MESSAGES: usize = 50;
/// One page of a thread, read from its start: a longer thread's latest replies are left out.
const THREAD_PAGE: usize = 200;

/// How many earlier messages a reply carries (0: none).
fn wanted() -> usize {
    let Some(value) = secrets::get(CONTEXT_MESSAGES) else {
        return DEFAULT_MESSAGES;
    };
    match value.trim().parse::<usize>() {
        Ok(n) => n.min(MAX_MESSAGES),
        Err(_) => {
            log::log(
                Level::Warn,
                &format!(
                    "{CONTEXT_MESSAGES} is not a number ({value:?}); using {DEFAULT_MESSAGES}"
                ),
            );
            DEFAULT_MESSAGES
        }
    }
}

/// The turns before `job`'s message, oldest first.
pub fn turns(job: &EventJob) -> Vec<Turn> {
    let limit = wanted();
    if limit == 0 {
        return Vec::new();
    }
    let Some(ts) = job.ts.as_deref() else {
        return Vec::new();
    };
    let fetched = match (&job.thread_ts, job.direct) {
        (Some(thread), _) => {
            let page = THREAD_PAGE.to_string();
            let query = [
                ("channel", job.channel.as_str()),
                ("ts", thread.as_str()),
                ("latest", ts),
                ("inclusive", "false"),
                ("limit", page.as_str()),
            ];
            platform::get("conversations.replies", &query)
        }
        (None, true) => {
            let count = limit.to_string();
            let query = [
                ("channel", job.channel.as_str()),
                ("latest", ts),
                ("inclusive", "false"),
                ("limit", count.as_str()),
            ];
            // Newest first, unlike a thread.
            platform::get("conversations.history", &query).map(|mut answer| {
                if let Some(messages) = answer["messages"].as_array_mut() {
                    messages.reverse();
                }
                answer
            })
        }
        // A mention starting a conversation in a channel has nothing before it.
        (None, false) => return Vec::new(),
    };
    match fetched {
        Ok(answer) => of_messages(
            answer["messages"].as_array().map_or(&[][..], Vec::as_slice),
            ts,
            job.bot.as_deref(),
            limit,
        ),
        Err(failure) => {
            log::log(
                Level::Warn,
                &format!(
                    "replying without the conversation's earlier messages: {}",
                    failure.message()
                ),
            );
            Vec::new()
        }
    }
}

/// The last `limit` messages before `ts` (oldest first) as turns: the bot's as the
/// assistant's, everyone else's as the user's, with the bot's mentions dropped.
fn of_messages(messages: &[Value], ts: &str, bot: Option<&str>, limit: usize) -> Vec<Turn> {
    let turns: Vec<Turn> = messages
        .iter()
        .filter(|m| m["ts"].as_str().is_some_and(|t| before(t, ts)))
        .filter(|m| is_conversation(m))
        .filter_map(|m| {
            let text = m["text"].as_str()?;
            let from_bot = bot.is_some_and(|bot| m["user"].as_str() == Some(bot));
            let (role, text) = if from_bot {
                (Role::Assistant, text.trim())
            } else {
                (Role::User, strip_mentions(text, bot))
            };
            (!text.is_empty()).then(|| Turn {
                role,
                text: text.to_owned(),
            })
        })
        .collect();
    let skip = turns.len().saturating_sub(limit);
    turns.into_iter().skip(skip).collect()
}

/// Messages people (or the bot) wrote, not joins, topic changes and the like.
fn is_conversation(message: &Value) -> bool {
    matches!(
        message["subtype"].as_str(),
        None | Some("file_share" | "thread_broadcast" | "bot_message")
    )
}

/// Message timestamps (`1700000000.000100`) compare as numbers, not as text.
fn before(a: &str, b: &str) -> bool {
    let key = |ts: &str| {
        let (secs, micros) = ts.split_once('.').unwrap_or((ts, "0"));
        (secs.parse::<u64>().ok(), micros.parse::<u64>().ok())
    };
    key(a) < key(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn texts(turns: &[Turn]) -> Vec<(bool, &str)> {
        turns
            .iter()
            .map(|t| (matches!(t.role, Role::Assistant), t.text.as_str()))
            .collect()
    }

    #[test]
    fn earlier_messages_become_turns_the_bots_own_as_the_assistants() {
        let messages = [
            json!({"ts": "100.000001", "user": "U1", "text": "<@UBOT> capital of France?"}),
            json!({"ts": "100.000002", "user": "UBOT", "bot_id": "B1", "text": "Paris."}),
            json!({"ts": "100.000003", "subtype": "channel_join", "user": "U2", "text": "<@U2> has joined"}),
            json!({"ts": "100.000004", "user": "U2", "text": ""}),
            json!({"ts": "100.000005", "user": "U1", "text": "<@UBOT> and Italy?"}),
            json!({"ts": "100.000006", "user": "U1", "text": "later"}),
        ];
        let turns = of_messages(&messages, "100.000005", Some("UBOT"), 10);
        assert_eq!(
            texts(&turns),
            [(false, "capital of France?"), (true, "Paris.")]
        );
        let last = of_messages(&messages, "100.000006", Some("UBOT"), 2);
        assert_eq!(texts(&last), [(true, "Paris."), (false, "and Italy?")]);
    }

    #[test]
    fn timestamps_compare_as_numbers() {
        assert!(before("99.9", "100.1"));
        assert!(before("100.000009", "100.000010"));
        assert!(!before("100.5", "100.5"));
    }
}
