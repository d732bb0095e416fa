//! `POST /events`: the URL handshake, event callbacks and the platform's notice that it
//! dropped events. A callback worth answering is claimed by its `event_id` (so the platform's
//! retries, even across restarts, run it once) and handed to a job; the platform gets its 200
//! at once.

use serde_json::{Value, json};

use guest_util::Response;

use crate::job::{EventJob, Work};
use crate::service::adapter::log::{self, Level};
use crate::service::adapter::{jobs, registry};

/// How long an `event_id` is remembered; the platform retries within minutes.
const CLAIM_TTL_MS: u64 = 24 * 60 * 60 * 1000;

pub fn handle(body: &[u8]) -> Response {
    let Ok(envelope) = serde_json::from_slice::<Value>(body) else {
        return Response::error(400, "the body is not JSON");
    };
    match envelope["type"].as_str() {
        Some("url_verification") => match envelope["challenge"].as_str() {
            Some(challenge) => Response::json(200, &json!({ "challenge": challenge })),
            None => Response::error(400, "url_verification without a challenge"),
        },
        Some("event_callback") => callback(&envelope),
        Some("app_rate_limited") => rate_limited(&envelope),
        Some(_) => ack("ignored: not an event callback"),
        None => Response::error(400, "the body has no type"),
    }
}

fn ack(outcome: &str) -> Response {
    Response::json(200, &json!({ "ok": true, "outcome": outcome }))
}

/// The platform dropped this app's events for a minute (more than it delivers per hour): the
/// operator has to know, so it goes on the registry entry and in the log.
fn rate_limited(envelope: &Value) -> Response {
    let minute = envelope["minute_rate_limited"].as_i64().map_or_else(
        || "an unstated minute".to_owned(),
        |m| format!("the minute starting at {m} (unix time)"),
    );
    let message = format!(
        "the platform rate-limited this app's events (app_rate_limited) and dropped events of {minute}"
    );
    log::log(Level::Warn, &message);
    registry::mark_error(&message);
    ack("recorded: app_rate_limited")
}

/// Direct-message subtypes that still carry a question; edits, deletions, joins and bot
/// messages (other subtypes) are not prompts.
const ANSWERED_SUBTYPES: &[&str] = &["file_share", "thread_broadcast"];

fn callback(envelope: &Value) -> Response {
    let (Some(event_id), Some(event)) =
        (envelope["event_id"].as_str(), envelope["event"].as_object())
    else {
        return Response::error(400, "event_callback without event_id or event");
    };
    let kind = event.get("type").and_then(Value::as_str);
    let subtype = event.get("subtype").and_then(Value::as_str);
    // The bot never answers itself or other bots.
    if event.contains_key("bot_id") || subtype == Some("bot_message") {
        return ack("ignored: from a bot");
    }
    let direct =
        kind == Some("message") && event.get("channel_type").and_then(Value::as_str) == Some("im");
    if kind != Some("app_mention") && !direct {
        return ack("ignored: not a mention or a direct message");
    }
    if subtype.is_some_and(|s| !ANSWERED_SUBTYPES.contains(&s)) {
        return ack("ignored: not a new message");
    }
    let (Some(channel), Some(text)) = (
        event.get("channel").and_then(Value::as_str),
        event.get("text").and_then(Value::as_str),
    ) else {
        return Response::error(400, "the event has no channel or text");
    };
    // The bot's own user id, as the platform states it for this installation.
    let bot = envelope["authorizations"][0]["user_id"].as_str();
    let prompt = strip_mentions(text, bot);
    if prompt.is_empty() {
        return ack("ignored: nothing but a mention");
    }
    let text_of = |name: &str| event.get(name).and_then(Value::as_str).map(str::to_owned);
    let job = Work::Event(EventJob {
        channel: channel.to_owned(),
        thread_ts: text_of("thread_ts"),
        ts: text_of("ts"),
        prompt: prompt.to_owned(),
        bot: bot.map(str::to_owned),
        direct,
        user: text_of("user"),
    });
    // The claim and the job together: a crash can never leave the event claimed (its retries
    // dropped as duplicates) with no job to answer it.
    let claim = format!("event:{event_id}");
    match jobs::enqueue_once(&claim, CLAIM_TTL_MS, &job.to_bytes()) {
        Ok(Some(_)) => ack("queued"),
        Ok(None) => ack("duplicate"),
        // Let the platform's retry try again.
        Err(e) => Response::error(503, &format!("cannot queue the reply: {e}")),
    }
}

/// Drops the bot's leading `<@BOT>` mention tokens (also `<@BOT|name>`); other people
/// mentioned stay in the prompt. Without the bot's id the first leading mention is taken to be
/// the bot's, as an `app_mention` starts with it.
pub fn strip_mentions<'a>(text: &'a str, bot: Option<&str>) -> &'a str {
    let mut rest = text.trim_start();
    while let Some(after) = rest.strip_prefix("<@") {
        let Some(end) = after.find('>') else {
            break;
        };
        let id = after[..end].split('|').next().unwrap_or_default();
        if bot.is_some_and(|bot| bot != id) {
            break;
        }
        rest = after[end + 1..].trim_start();
        if bot.is_none() {
            break;
        }
    }
    rest.trim_end()
}

#[cfg(test)]
mod tests {
    use super::strip_mentions;

    #[test]
    fn strips_the_bots_leading_mentions_only() {
        let bot = Some("UBOT");
        assert_eq!(strip_mentions("<@UBOT> hello <@U9>", bot), "hello <@U9>");
        assert_eq!(strip_mentions("  <@UBOT|bot> <@UBOT>  hi ", bot), "hi");
        assert_eq!(
            strip_mentions("<@UBOT> <@U2> review this", bot),
            "<@U2> review this"
        );
        assert_eq!(strip_mentions("<@U2> hi", bot), "<@U2> hi");
        assert_eq!(strip_mentions("<@UBOT>", bot), "");
        assert_eq!(strip_mentions("<@broken hi", bot), "<@broken hi");
        assert_eq!(strip_mentions("plain", bot), "plain");
        assert_eq!(strip_mentions("<@U1> <@U2> hi", None), "<@U2> hi");
    }
}
