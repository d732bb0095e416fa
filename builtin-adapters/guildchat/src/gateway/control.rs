//! The control bot's guild side (spec 4.3): the guild-scoped `/service-setup` command and
//! knowing where the control channels are.

use serenity::all::{
    ChannelType, CommandInteraction, CreateChannel, CreateCommand, CreateInteractionResponse,
    CreateInteractionResponseMessage, EditInteractionResponse, GuildId, Http,
};

use super::bot::Bot;
use super::reply::{is_permission_denied, send_failed};
use crate::NAME;
use crate::config::Control;
use crate::gate::{REFUSAL, may_run_setup};
use crate::layout::{self, ChannelKind, Layout, setup_summary};

pub(super) const SETUP_COMMAND: &str = "service-setup";

/// On ready: registers `/service-setup` in the guild (guild commands appear at once) and finds
/// the control channels. Returns whether both worked; a failure goes on the registry.
pub(super) async fn prepare(bot: &Bot, http: &Http, control: &Control) -> bool {
    let guild = GuildId::new(control.guild_id);
    let command = CreateCommand::new(SETUP_COMMAND)
        .description("Create the control category and channels (admin role only)");
    if let Err(error) = guild.set_commands(http, vec![command]).await {
        let message = format!(
            "could not register /{SETUP_COMMAND} in guild {guild} ({error}); is the bot in that \
             guild, invited with the applications.commands scope?"
        );
        bot.ctx.registry.mark_error(NAME, "ControlError", &message);
        return false;
    }
    refresh(bot, http, control).await
}

/// Re-reads the guild's channels to find the control channels.
pub(super) async fn refresh(bot: &Bot, http: &Http, control: &Control) -> bool {
    let guild = GuildId::new(control.guild_id);
    match guild_channels(http, guild).await {
        Ok(channels) => {
            bot.set_layout(Layout::locate(&channels, &control.category));
            true
        }
        Err(error) => {
            let message = format!("could not list the channels of guild {guild}: {error}");
            bot.ctx.registry.mark_error(NAME, "ControlError", &message);
            false
        }
    }
}

async fn guild_channels(
    http: &Http,
    guild: GuildId,
) -> serenity::Result<Vec<layout::GuildChannel>> {
    let channels = guild.channels(http).await?;
    Ok(channels
        .into_values()
        .map(|channel| layout::GuildChannel {
            id: channel.id.get(),
            kind: match channel.kind {
                ChannelType::Category => ChannelKind::Category,
                ChannelType::Text => ChannelKind::Text,
                _ => ChannelKind::Other,
            },
            name: channel.name,
            parent_id: channel.parent_id.map(|id| id.get()),
        })
        .collect())
}

/// `/service-setup`: admins get the missing control channels; everyone else an ephemeral
/// refusal (spec 7).
pub(super) async fn setup(bot: &Bot, http: &Http, command: &CommandInteraction) {
    bot.touch();
    let roles: Vec<u64> = command
        .member
        .as_ref()
        .map(|member| member.roles.iter().map(|role| role.get()).collect())
        .unwrap_or_default();
    let allowed = may_run_setup(bot.control(), command.guild_id.map(|id| id.get()), &roles);
    let (true, Some(control)) = (allowed, bot.control()) else {
        let refusal = CreateInteractionResponseMessage::new()
            .content(REFUSAL)
            .ephemeral(true);
        let answered = command
            .create_response(http, CreateInteractionResponse::Message(refusal))
            .await;
        if let Err(error) = answered {
            send_failed(bot, &format!("refuse /{SETUP_COMMAND}"), &error);
        }
        return;
    };
    // Creating channels can take longer than the platform's three seconds to answer.
    let deferred =
        CreateInteractionResponse::Defer(CreateInteractionResponseMessage::new().ephemeral(true));
    if let Err(error) = command.create_response(http, deferred).await {
        send_failed(bot, &format!("acknowledge /{SETUP_COMMAND}"), &error);
        return;
    }
    let outcome = {
        let _one_at_a_time = bot.setup.lock().await;
        create_missing(http, control).await
    };
    let summary = match outcome {
        Ok(summary) => {
            refresh(bot, http, control).await;
            summary
        }
        Err(error) if is_permission_denied(&error) => "Setup stopped: the bot may not create \
            channels here. Grant its role the Manage Channels permission, then run /service-setup \
            again."
            .to_owned(),
        Err(error) => format!("Setup stopped: {error}"),
    };
    let edited = command
        .edit_response(http, EditInteractionResponse::new().content(summary))
        .await;
    if let Err(error) = edited {
        send_failed(bot, &format!("answer /{SETUP_COMMAND}"), &error);
    }
}

/// Creates the category and the control channels that are absent; returns what it did.
async fn create_missing(http: &Http, control: &Control) -> serenity::Result<String> {
    let guild = GuildId::new(control.guild_id);
    let layout = Layout::locate(&guild_channels(http, guild).await?, &control.category);
    let category = match layout.category {
        Some(id) => id.into(),
        None => {
            let builder = CreateChannel::new(&control.category).kind(ChannelType::Category);
            guild.create_channel(http, builder).await?.id
        }
    };
    let missing = layout.missing();
    for name in &missing {
        let builder = CreateChannel::new(*name)
            .kind(ChannelType::Text)
            .category(category);
        guild.create_channel(http, builder).await?;
    }
    Ok(setup_summary(
        &control.category,
        layout.category.is_none(),
        &missing,
    ))
}
