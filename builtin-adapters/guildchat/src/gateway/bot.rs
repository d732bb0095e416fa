//! What every event handler shares for one gateway session.

use std::sync::{Arc, Mutex, PoisonError, RwLock};

use serenity::all::{ChannelId, CreateMessage, Http, Message, UserId};
use service_contract::{
    AdapterContext, ProfileChoice, RunFailure, RunFailureKind, RunReply, RunRequest,
};
use tokio_util::sync::CancellationToken;

use crate::NAME;
use crate::config::{Config, Control};
use crate::layout::Layout;

use super::approval::Later;
use super::poster::Poster;

/// Metadata keys on the registry entry for suppressed send failures (spec 7): how many there
/// were and the latest one. The status is left alone, since a channel the bot may not post in
/// is how that channel is set up, not a fault of the adapter.
pub(super) const SEND_FAILURES: &str = "send_failures";
pub(super) const LAST_SEND_FAILURE: &str = "last_send_failure";

pub(super) struct Bot {
    pub ctx: Arc<AdapterContext>,
    pub config: Config,
    /// The bot's own user, to ignore its messages and find its mentions.
    pub me: UserId,
    poster: Poster,
    /// Where the control channels are; refreshed on ready, after setup and on channel events.
    layout: RwLock<Layout>,
    /// One `/service-setup` at a time, so two admins cannot create the channels twice.
    pub setup: tokio::sync::Mutex<()>,
    /// Cancels the agent runs of this session.
    runs: CancellationToken,
    /// The count behind [`SEND_FAILURES`]; locked while the entry is written, so concurrent
    /// failures are never counted out of order.
    send_failures: Mutex<u64>,
}

impl Bot {
    pub fn new(
        ctx: Arc<AdapterContext>,
        config: Config,
        me: UserId,
        runs: CancellationToken,
    ) -> Self {
        // The count carries on from earlier sessions: the entry outlives a reconnect.
        let send_failures = ctx
            .registry
            .get(NAME)
            .and_then(|entry| entry.metadata.get(SEND_FAILURES)?.parse().ok())
            .unwrap_or(0);
        Self {
            ctx,
            poster: Poster::new(&config),
            config,
            me,
            layout: RwLock::default(),
            setup: tokio::sync::Mutex::new(()),
            runs,
            send_failures: Mutex::new(send_failures),
        }
    }

    pub fn control(&self) -> Option<&Control> {
        self.config.control.as_ref().ok()
    }

    pub fn layout(&self) -> Layout {
        self.layout
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn set_layout(&self, layout: Layout) {
        *self.layout.write().unwrap_or_else(PoisonError::into_inner) = layout;
    }

    /// Posts `text` in `channel`; a rate limit delays the post instead of failing it.
    pub async fn say(
        &self,
        http: &Http,
        channel: ChannelId,
        text: &str,
    ) -> serenity::Result<Message> {
        self.send(http, channel, CreateMessage::new().content(text))
            .await
    }

    /// Posts `message` in `channel`, as [`Bot::say`] does.
    pub async fn send(
        &self,
        http: &Http,
        channel: ChannelId,
        message: CreateMessage,
    ) -> serenity::Result<Message> {
        self.poster.send(http, channel, message).await
    }

    /// Records activity on the registry entry.
    pub fn touch(&self) {
        self.ctx.registry.touch(NAME);
    }

    /// Records a suppressed send failure on the registry entry without changing its status.
    pub fn record_send_failure(&self, failure: &str) {
        let mut count = self
            .send_failures
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *count += 1;
        let registry = &self.ctx.registry;
        registry.set_metadata(NAME, SEND_FAILURES, &count.to_string());
        registry.set_metadata(NAME, LAST_SEND_FAILURE, failure);
    }

    /// Runs the configured profile (or the server defaults when it does not exist) as the next
    /// turn of the conversation of `channel` (a channel, a thread or a direct conversation: the
    /// runtime keeps its messages). With `asker`, the run may wait for a person to approve a
    /// tool call (it ends `Paused`; the rest of the answer comes later, see `approval`). A
    /// failure is logged here, since the channel only gets a notice.
    pub async fn ask(
        &self,
        prompt: String,
        channel: ChannelId,
        asker: Option<UserId>,
    ) -> Result<RunReply, RunFailure> {
        let profile = ProfileChoice::Preferred(self.config.profile.clone());
        let request = RunRequest {
            conversation: Some(channel.to_string()),
            then: asker.map(|asker| Later { channel, asker }.to_bytes()),
            ..RunRequest::new(prompt, profile, NAME)
        };
        let outcome = self.ctx.agents.run(request, self.runs.child_token()).await;
        if let Err(failure) = &outcome
            && !matches!(
                failure.kind,
                RunFailureKind::Cancelled | RunFailureKind::Paused
            )
        {
            tracing::warn!(adapter = NAME, trace = ?failure.trace_id, "a run failed: {failure}");
        }
        outcome
    }

    pub fn cancel_runs(&self) {
        self.runs.cancel();
    }
}
