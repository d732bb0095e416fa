//! Gateway events in, routed to the right behaviour. Serenity runs each handler call on a task
//! of its own, so a slow agent run never holds up the gateway loop.

use std::sync::Arc;

use serenity::all::{
    Context, EventHandler, GuildChannel, GuildId, Interaction, Message, MessageType, Reaction,
    Ready,
};

use super::bot::Bot;
use super::{approval, control, feedback, invite_url, reply, tasks};
use crate::NAME;
use crate::prompt::without_mention;
use crate::route::{Incoming, Route, route};

pub(super) struct Handler {
    bot: Arc<Bot>,
}

impl Handler {
    pub fn new(bot: Arc<Bot>) -> Self {
        Self { bot }
    }

    async fn channels_changed(&self, ctx: &Context, guild_id: GuildId) {
        if let Some(control) = self.bot.control().filter(|c| c.guild_id == guild_id.get()) {
            control::refresh(&self.bot, &ctx.http, control).await;
        }
    }
}

#[serenity::async_trait]
impl EventHandler for Handler {
    async fn ready(&self, ctx: Context, ready: Ready) {
        tracing::info!(
            adapter = NAME,
            user = %ready.user.name,
            invite = %invite_url(ready.application.id.get()),
            "connected to the gateway"
        );
        // With the control bot misconfigured or unprepared, the entry keeps that error:
        // mentions work, but the adapter is not all there.
        let control_ready = match self.bot.control() {
            Some(control) => control::prepare(&self.bot, &ctx.http, control).await,
            None => false,
        };
        if control_ready {
            self.bot.ctx.registry.mark_running(NAME);
        }
    }

    async fn message(&self, ctx: Context, message: Message) {
        let me = self.bot.me;
        let prompt = without_mention(&message.content, me.get());
        let incoming = Incoming {
            from_bot: message.author.bot || message.author.id == me,
            is_chat: matches!(
                message.kind,
                MessageType::Regular | MessageType::InlineReply
            ),
            has_prompt: !prompt.is_empty(),
            in_guild: message.guild_id.is_some(),
            channel_id: message.channel_id.get(),
            mentions_bot: message.mentions.iter().any(|user| user.id == me),
        };
        match route(incoming, self.bot.layout().service()) {
            Route::Ignore => {}
            Route::Reply => reply::answer(&self.bot, &ctx.http, &message, prompt).await,
            Route::Dispatch => tasks::dispatch(&self.bot, &ctx.http, &message, prompt).await,
        }
    }

    async fn interaction_create(&self, ctx: Context, interaction: Interaction) {
        match interaction {
            Interaction::Command(command) if command.data.name == control::SETUP_COMMAND => {
                control::setup(&self.bot, &ctx.http, &command).await;
            }
            Interaction::Component(click) => approval::clicked(&self.bot, &ctx.http, &click).await,
            _ => {}
        }
    }

    async fn reaction_add(&self, ctx: Context, reaction: Reaction) {
        feedback::record(&self.bot, &ctx.http, &reaction).await;
    }

    async fn channel_create(&self, ctx: Context, channel: GuildChannel) {
        self.channels_changed(&ctx, channel.guild_id).await;
    }

    async fn channel_update(&self, ctx: Context, _old: Option<GuildChannel>, new: GuildChannel) {
        self.channels_changed(&ctx, new.guild_id).await;
    }

    async fn channel_delete(
        &self,
        ctx: Context,
        channel: GuildChannel,
        _messages: Option<Vec<Message>>,
    ) {
        self.channels_changed(&ctx, channel.guild_id).await;
    }
}
