//! Answers to mentions and direct messages (spec 4.3 rules 1-3), and posting long text in
//! parts. Send failures are suppressed so the connection stays open.

use std::sync::Arc;

use serenity::all::{ChannelId, Http, HttpError, Message};
use service_contract::RunFailureKind;

use super::bot::Bot;
use crate::NAME;
use crate::chunk::{MAX_POST_CHARS, split_reply};
use crate::notice::failure_notice;

/// Runs the profile on the prompt and replies in the message's channel or DM.
pub(super) async fn answer(bot: &Bot, http: &Arc<Http>, message: &Message, prompt: String) {
    bot.touch();
    let typing = message.channel_id.start_typing(http);
    let text = match bot.ask(prompt).await {
        Ok(reply) => reply.text,
        Err(failure) if failure.kind == RunFailureKind::Cancelled => return,
        Err(failure) => failure_notice(&failure),
    };
    drop(typing); // stops the typing indicator before the reply appears
    post_in_parts(http, message.channel_id, &text).await;
}

/// Posts `text` as consecutive messages within the platform's length limit. After a failure
/// the rest is dropped: a denied permission would deny every part.
pub(super) async fn post_in_parts(http: &Http, channel: ChannelId, text: &str) {
    for part in split_reply(text, MAX_POST_CHARS) {
        if sent(channel.say(http, part).await, "post a reply", channel).is_none() {
            return;
        }
    }
}

/// The value of a request to the platform, or `None` with the failure logged. A missing
/// permission is how a channel is set up, not a fault of the adapter, so it is logged as such
/// and does not turn the registry entry to `error` (spec 7: suppressed silently).
pub(super) fn sent<T>(result: serenity::Result<T>, action: &str, channel: ChannelId) -> Option<T> {
    match result {
        Ok(value) => Some(value),
        Err(error) if is_permission_denied(&error) => {
            tracing::warn!(
                adapter = NAME,
                %channel,
                "could not {action}: the bot lacks permission in this channel ({error})"
            );
            None
        }
        Err(error) => {
            tracing::warn!(adapter = NAME, %channel, "could not {action}: {error}");
            None
        }
    }
}

pub(super) fn is_permission_denied(error: &serenity::Error) -> bool {
    matches!(
        error,
        serenity::Error::Http(HttpError::UnsuccessfulRequest(response))
            if response.status_code.as_u16() == 403
    )
}
