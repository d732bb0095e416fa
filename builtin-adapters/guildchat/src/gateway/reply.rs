//! Answers to mentions and direct messages (spec 4.3 rules 1-3), and posting long text in
//! parts. Send failures are suppressed so the connection stays open, and recorded on the
//! registry entry so an operator can see them.

use std::sync::Arc;

use serenity::all::{ChannelId, Http, HttpError, Message, UserId};
use service_contract::{RunFailure, RunFailureKind, RunReply};

use super::approval;
use super::bot::Bot;
use crate::NAME;
use crate::chunk::{MAX_POST_CHARS, split_reply};
use crate::notice::{failure_notice, or_empty_notice};

/// Runs the profile on the prompt and replies in the message's channel or DM.
pub(super) async fn answer(bot: &Bot, http: &Arc<Http>, message: &Message, prompt: String) {
    bot.touch();
    let typing = message.channel_id.start_typing(http);
    let outcome = bot
        .ask(prompt, message.channel_id, Some(message.author.id))
        .await;
    drop(typing); // stops the typing indicator before the reply appears
    post_outcome(bot, http, message.channel_id, message.author.id, outcome).await;
}

/// Posts where a run got to: its answer, a question for a person with its buttons, or a
/// notice of its failure.
pub(super) async fn post_outcome(
    bot: &Bot,
    http: &Http,
    channel: ChannelId,
    asker: UserId,
    outcome: Result<RunReply, RunFailure>,
) {
    let text = match outcome {
        Ok(reply) => reply.text,
        Err(failure) if failure.kind == RunFailureKind::Cancelled => return,
        Err(RunFailure {
            waiting: Some(waiting),
            ..
        }) => return approval::ask(bot, http, channel, asker, &waiting).await,
        Err(failure) => failure_notice(&failure),
    };
    // A blank answer would split into no posts at all, and the asker would wait for nothing.
    post_in_parts(bot, http, channel, or_empty_notice(&text)).await;
}

/// Posts `text` as consecutive messages within the platform's length limit. After a failure
/// the rest is dropped: a denied permission would deny every part.
pub(super) async fn post_in_parts(bot: &Bot, http: &Http, channel: ChannelId, text: &str) {
    for part in split_reply(text, MAX_POST_CHARS) {
        let posted = bot.say(http, channel, &part).await;
        if sent(bot, posted, "post a reply", channel).is_none() {
            return;
        }
    }
}

/// The value of a request to the platform in `channel`, or `None` with the failure logged and
/// recorded.
pub(super) fn sent<T>(
    bot: &Bot,
    result: serenity::Result<T>,
    action: &str,
    channel: ChannelId,
) -> Option<T> {
    result
        .map_err(|error| send_failed(bot, &format!("{action} in channel {channel}"), &error))
        .ok()
}

/// Logs a failed request and records it on the registry entry's metadata. The status stays as
/// it is (spec 7: suppressed): a missing permission is how a channel is set up, not a fault of
/// the adapter.
pub(super) fn send_failed(bot: &Bot, action: &str, error: &serenity::Error) {
    let failure = if is_permission_denied(error) {
        format!("could not {action}: the bot lacks permission there ({error})")
    } else {
        format!("could not {action}: {error}")
    };
    tracing::warn!(adapter = NAME, "{failure}");
    bot.record_send_failure(&failure);
}

pub(super) fn is_permission_denied(error: &serenity::Error) -> bool {
    matches!(
        error,
        serenity::Error::Http(HttpError::UnsuccessfulRequest(response))
            if response.status_code.as_u16() == 403
    )
}
