//! Tool calls a person approves, in the channel where they were asked for. A mention's or a
//! direct message's run that waits for a person posts the question with Approve and Deny
//! buttons; the person who asked and `SERVICE_GUILDCHAT_APPROVERS` may click them, and the
//! question is edited to say who decided. Once the run goes on, the host queues a job that says
//! where it got to: the session takes those jobs (every second, and the rest of the answer is
//! posted where the question was), so a restart or another replica loses none.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use serenity::all::{
    ButtonStyle, ChannelId, ComponentInteraction, CreateActionRow, CreateButton,
    CreateInteractionResponse, CreateInteractionResponseMessage, CreateMessage, Http, UserId,
};
use service_contract::{DecideError, Waiting};
use tokio_util::sync::CancellationToken;

use super::bot::Bot;
use super::reply::{post_outcome, send_failed, sent};
use crate::NAME;

/// How often the session looks for runs that went on.
const LOOK: Duration = Duration::from_secs(1);
/// The call's arguments shown in the question, at most.
const INPUT_CHARS: usize = 500;
const PREFIX: &str = "approval";
const UNKNOWN: &str = "This approval is not open here (it may have expired or been removed).";

/// What a run that may wait says to do once it goes on: post in `channel`, for `asker`.
pub(super) struct Later {
    pub channel: ChannelId,
    pub asker: UserId,
}

impl Later {
    pub fn to_bytes(&self) -> Vec<u8> {
        json!({ "channel": self.channel.get(), "asker": self.asker.get() })
            .to_string()
            .into_bytes()
    }

    fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let value: Value = serde_json::from_slice(bytes).ok()?;
        Some(Self {
            channel: ChannelId::new(value["channel"].as_u64().filter(|id| *id != 0)?),
            asker: UserId::new(value["asker"].as_u64().filter(|id| *id != 0)?),
        })
    }
}

/// Posts the question about `waiting` in `channel`, with its buttons.
pub(super) async fn ask(
    bot: &Bot,
    http: &Http,
    channel: ChannelId,
    asker: UserId,
    waiting: &Waiting,
) {
    let mut input: String = waiting.input.chars().take(INPUT_CHARS).collect();
    if input.len() < waiting.input.len() {
        input.push('…');
    }
    let question = format!(
        "Approval needed: the agent wants to run `{}` with `{input}`.",
        waiting.tool
    );
    let id = &waiting.approval_id;
    let button = |action: &str| format!("{PREFIX}:{action}:{id}:{asker}");
    let buttons = CreateActionRow::Buttons(vec![
        CreateButton::new(button("approve"))
            .label("Approve")
            .style(ButtonStyle::Success),
        CreateButton::new(button("deny"))
            .label("Deny")
            .style(ButtonStyle::Danger),
    ]);
    let message = CreateMessage::new()
        .content(question)
        .components(vec![buttons]);
    let posted = bot.send(http, channel, message).await;
    sent(bot, posted, "ask for an approval", channel);
}

/// A click on a question's button (other components are not the adapter's).
pub(super) async fn clicked(bot: &Bot, http: &Http, click: &ComponentInteraction) {
    let parts: Vec<&str> = click.data.custom_id.split(':').collect();
    let [PREFIX, action @ ("approve" | "deny"), id, asker] = parts[..] else {
        return;
    };
    bot.touch();
    let approve = action == "approve";
    let user = click.user.id;
    let may = asker == user.to_string() || bot.config.approvers.contains(&user.get());
    let response = if !may {
        tell(
            "Only the person who asked, or an approver (SERVICE_GUILDCHAT_APPROVERS), can decide this.",
        )
    } else {
        let verb = if approve { "Approved" } else { "Denied" };
        let note = format!("{verb} in guildchat by {user}");
        match bot
            .ctx
            .approvals
            .decide(NAME, id, approve, Some(note))
            .await
        {
            Ok(true) => {
                let text = format!("{}\n{verb} by <@{user}>.", click.message.content);
                CreateInteractionResponse::UpdateMessage(
                    CreateInteractionResponseMessage::new()
                        .content(text)
                        .components(Vec::new()),
                )
            }
            Ok(false) => tell("This was decided already; nothing changed."),
            Err(DecideError::Unknown) => tell(UNKNOWN),
            Err(DecideError::Failed) => {
                tell("Sorry, the decision could not be recorded; please try again.")
            }
        }
    };
    if let Err(error) = click.create_response(http, response).await {
        send_failed(bot, "answer a click on an approval", &error);
    }
}

/// Tells the clicker alone.
fn tell(text: &str) -> CreateInteractionResponse {
    CreateInteractionResponse::Message(
        CreateInteractionResponseMessage::new()
            .content(text)
            .ephemeral(true),
    )
}

/// Posts where each run that went on got to, until `stop`.
pub(super) async fn deliver(bot: Arc<Bot>, http: Arc<Http>, stop: CancellationToken) {
    loop {
        while let Some(job) = bot.ctx.approvals.next_went_on(NAME).await {
            let failure = match Later::from_bytes(&job.payload) {
                Some(later) => {
                    post_outcome(&bot, &http, later.channel, later.asker, job.outcome).await;
                    None
                }
                None => Some("a job without its channel".to_owned()),
            };
            bot.ctx.approvals.done(&job.job, failure).await;
        }
        tokio::select! {
            () = tokio::time::sleep(LOOK) => {}
            () = stop.cancelled() => return,
        }
    }
}
