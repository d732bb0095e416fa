//! What every event handler shares for one gateway session.

use std::sync::{Arc, PoisonError, RwLock};

use serenity::all::UserId;
use service_contract::{
    AdapterContext, ProfileChoice, RunFailure, RunFailureKind, RunReply, RunRequest,
};
use tokio_util::sync::CancellationToken;

use crate::NAME;
use crate::config::{Config, Control};
use crate::layout::Layout;

pub(super) struct Bot {
    pub ctx: Arc<AdapterContext>,
    pub config: Config,
    /// The bot's own user, to ignore its messages and find its mentions.
    pub me: UserId,
    /// Where the control channels are; refreshed on ready, after setup and on channel events.
    layout: RwLock<Layout>,
    /// One `/service-setup` at a time, so two admins cannot create the channels twice.
    pub setup: tokio::sync::Mutex<()>,
    /// Cancels the agent runs of this session.
    runs: CancellationToken,
}

impl Bot {
    pub fn new(
        ctx: Arc<AdapterContext>,
        config: Config,
        me: UserId,
        runs: CancellationToken,
    ) -> Self {
        Self {
            ctx,
            config,
            me,
            layout: RwLock::default(),
            setup: tokio::sync::Mutex::new(()),
            runs,
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

    /// Records activity on the registry entry.
    pub fn touch(&self) {
        self.ctx.registry.touch(NAME);
    }

    /// Runs the configured profile (or the server defaults when it does not exist). A failure
    /// is logged here, since the channel only gets a notice.
    pub async fn ask(&self, prompt: String) -> Result<RunReply, RunFailure> {
        let request = RunRequest {
            prompt,
            profile: ProfileChoice::Preferred(self.config.profile.clone()),
            model: None,
            source: NAME.to_owned(),
            parent: None,
        };
        let outcome = self.ctx.agents.run(request, self.runs.child_token()).await;
        if let Err(failure) = &outcome
            && failure.kind != RunFailureKind::Cancelled
        {
            tracing::warn!(adapter = NAME, trace = ?failure.trace_id, "a run failed: {failure}");
        }
        outcome
    }

    pub fn cancel_runs(&self) {
        self.runs.cancel();
    }
}
