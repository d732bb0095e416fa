//! Task threads (spec 4.3 rule 4): a plain message in `#service` opens a public thread named
//! after the prompt, gets a `Processing...` placeholder, runs the agent as a task, and the
//! placeholder becomes the status card. Each status change is a line in `#service-activity`.

use serenity::all::{
    ChannelId, CreateEmbed, CreateEmbedFooter, CreateThread, EditMessage, Http, Message,
    ReactionType,
};
use service_contract::{RunFailureKind, TaskState};

use super::bot::Bot;
use super::reply::{post_in_parts, sent};
use crate::NAME;
use crate::activity::activity_line;
use crate::card::{PLACEHOLDER, RESULT, StatusCard};
use crate::notice::failure_notice;
use crate::prompt::thread_name;

/// Offered on every card so votes are one click away.
const VOTES: [&str; 2] = ["\u{1F44D}", "\u{1F44E}"];

pub(super) async fn dispatch(bot: &Bot, http: &Http, message: &Message, prompt: String) {
    bot.touch();
    let title = thread_name(&prompt);
    let thread = message
        .channel_id
        .create_thread_from_message(http, message.id, CreateThread::new(title.clone()))
        .await;
    let Some(thread) = sent(bot, thread, "open a task thread", message.channel_id) else {
        return;
    };
    let Some(placeholder) = sent(
        bot,
        bot.say(http, thread.id, PLACEHOLDER).await,
        "post the placeholder",
        thread.id,
    ) else {
        return;
    };
    let progress = Progress::start(bot, http, &title, thread.id).await;
    progress.moved(TaskState::Running, None).await;
    let (state, result, trace_id) = match bot.ask(prompt, thread.id, None).await {
        Ok(reply) => (TaskState::Completed, reply.text, Some(reply.trace_id)),
        Err(failure) => {
            let state = if failure.kind == RunFailureKind::Cancelled {
                TaskState::Cancelled
            } else {
                TaskState::Error
            };
            (state, failure_notice(&failure), failure.trace_id)
        }
    };
    progress.moved(state, trace_id.as_deref()).await;

    let provider = bot.ctx.agents.provider_name();
    let card = StatusCard::new(&title, state, &provider, &result, trace_id.as_deref());
    let edit = EditMessage::new().content("").embed(embed(&card));
    let edited = thread.id.edit_message(http, placeholder.id, edit).await;
    if sent(bot, edited, "edit the status card", thread.id).is_none() {
        return;
    }
    if card.truncated {
        post_in_parts(bot, http, thread.id, &result).await;
    }
    for vote in VOTES {
        let reaction = ReactionType::Unicode(vote.to_owned());
        let added = thread
            .id
            .create_reaction(http, placeholder.id, reaction)
            .await;
        sent(bot, added, "offer the feedback reactions", thread.id);
    }
}

fn embed(card: &StatusCard) -> CreateEmbed {
    let fields = card
        .fields
        .iter()
        .map(|(name, value)| (*name, value.as_str(), *name != RESULT));
    let embed = CreateEmbed::new()
        .title(&card.title)
        .colour(card.colour)
        .fields(fields);
    match &card.footer {
        Some(footer) => embed.footer(CreateEmbedFooter::new(footer)),
        None => embed,
    }
}

/// A dispatched task's record and its lines in the activity feed.
struct Progress<'a> {
    bot: &'a Bot,
    http: &'a Http,
    title: &'a str,
    thread: ChannelId,
    /// `None` when the record could not be written; the thread and the feed go on regardless.
    task_id: Option<String>,
}

impl<'a> Progress<'a> {
    async fn start(bot: &'a Bot, http: &'a Http, title: &'a str, thread: ChannelId) -> Self {
        let task_id = match bot.ctx.tasks.create(title, Some(&bot.config.profile)).await {
            Ok(id) => Some(id),
            Err(error) => {
                tracing::warn!(
                    adapter = NAME,
                    "could not record the task {title:?}: {error}"
                );
                None
            }
        };
        let progress = Self {
            bot,
            http,
            title,
            thread,
            task_id,
        };
        progress.announce(TaskState::Pending).await;
        progress
    }

    async fn moved(&self, state: TaskState, trace_id: Option<&str>) {
        if let Some(task_id) = &self.task_id
            && let Err(error) = self.bot.ctx.tasks.update(task_id, state, trace_id).await
        {
            tracing::warn!(adapter = NAME, task = %task_id, "could not update the task: {error}");
        }
        self.announce(state).await;
    }

    async fn announce(&self, state: TaskState) {
        let Some(feed) = self.bot.layout().activity().map(ChannelId::new) else {
            return;
        };
        let line = activity_line(
            self.title,
            state,
            self.task_id.as_deref(),
            self.thread.get(),
        );
        sent(
            self.bot,
            self.bot.say(self.http, feed, &line).await,
            "post to the activity feed",
            feed,
        );
    }
}
