//! Feedback (spec 4.3 rule 4): a thumbs-up or thumbs-down on a status card is stored, one vote
//! per person per card (the store keeps the latest). Raw reaction events carry only ids, so the
//! message is fetched to check it is one of this bot's cards; that also keeps votes on cards
//! posted before a restart working.

use serenity::all::{Http, Reaction, ReactionType};
use service_contract::Feedback;

use super::bot::Bot;
use crate::NAME;
use crate::card::{is_status_card, trace_id_in_footer};
use crate::vote::vote_for;

pub(super) async fn record(bot: &Bot, http: &Http, reaction: &Reaction) {
    let ReactionType::Unicode(emoji) = &reaction.emoji else {
        return;
    };
    let (Some(vote), Some(user)) = (vote_for(emoji), reaction.user_id) else {
        return;
    };
    let by_a_bot = user == bot.me || reaction.member.as_ref().is_some_and(|m| m.user.bot);
    let on_another_author = reaction
        .message_author_id
        .is_some_and(|author| author != bot.me);
    if by_a_bot || on_another_author {
        return;
    }
    let message = match reaction.channel_id.message(http, reaction.message_id).await {
        Ok(message) => message,
        Err(error) => {
            tracing::debug!(
                adapter = NAME,
                "could not read a reacted-to message: {error}"
            );
            return;
        }
    };
    let card = message
        .embeds
        .iter()
        .find(|embed| is_status_card(embed.fields.iter().map(|f| f.name.as_str())));
    let Some(card) = card.filter(|_| message.author.id == bot.me) else {
        return;
    };
    bot.touch();
    let feedback = Feedback {
        message_id: reaction.message_id.to_string(),
        user_id: user.to_string(),
        channel_id: reaction.channel_id.to_string(),
        vote,
        trace_id: card
            .footer
            .as_ref()
            .and_then(|footer| trace_id_in_footer(&footer.text))
            .map(str::to_owned),
    };
    if let Err(error) = bot.ctx.feedback.record(feedback).await {
        tracing::warn!(adapter = NAME, "could not store feedback: {error}");
    }
}
