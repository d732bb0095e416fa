//! The guildchat adapter (spec 4.3): a bot on the gateway chat platform that answers mentions
//! and direct messages with one agent profile, plus the control bot: the `/service-setup` slash
//! command, task threads from `#service` with status cards, reaction feedback and an activity
//! feed in `#service-activity`.
//!
//! The platform client sits behind the `guildchat` feature (on by default). Built without it,
//! the adapter only records on its registry entry that support is not compiled in.
//!
//! ```no_run
//! # use std::sync::Arc;
//! let adapter: Arc<dyn service_contract::Adapter> =
//!     Arc::new(service_guildchat::GuildchatAdapter::new());
//! ```

// Without the client, the pure modules below have no caller.
#![cfg_attr(not(feature = "guildchat"), allow(dead_code))]

mod activity;
mod card;
mod chunk;
pub mod config;
mod gate;
#[cfg(feature = "guildchat")]
mod gateway;
pub mod invite;
mod layout;
mod notice;
mod prompt;
mod route;
mod vote;

use std::sync::Arc;

use futures_util::FutureExt;
use serde_json::{Value, json};
use service_contract::{Adapter, AdapterContext, Hook};

#[cfg(feature = "guildchat")]
pub use gateway::invite_url;

/// The adapter's registry name.
pub const NAME: &str = "guildchat";

/// The adapter. Construct it once and hand it to the host; `start` connects to the gateway on a
/// task of its own and `stop` disconnects, so it can be toggled at runtime.
#[derive(Default)]
pub struct GuildchatAdapter {
    #[cfg(feature = "guildchat")]
    session: gateway::Session,
}

impl GuildchatAdapter {
    pub fn new() -> Self {
        Self::default()
    }

    #[cfg(feature = "guildchat")]
    fn launch(&self, ctx: &Arc<AdapterContext>) {
        self.session.launch(ctx);
    }

    #[cfg(not(feature = "guildchat"))]
    fn launch(&self, ctx: &Arc<AdapterContext>) {
        ctx.registry.mark_error(
            NAME,
            "ConfigError",
            "guildchat support is not compiled in (build with the `guildchat` feature)",
        );
    }

    async fn halt(&self) {
        #[cfg(feature = "guildchat")]
        self.session.shutdown().await;
    }
}

impl Adapter for GuildchatAdapter {
    fn name(&self) -> &str {
        NAME
    }

    fn describe(&self) -> Value {
        json!({
            "version": env!("CARGO_PKG_VERSION"),
            "kind": "gateway chat bot",
            "compiled_in": cfg!(feature = "guildchat"),
            "settings": config::SETTINGS,
            "invite": { "scopes": invite::SCOPES, "permissions": invite::PERMISSIONS },
        })
    }

    fn settings(&self) -> &[&str] {
        &config::SETTINGS
    }

    fn start<'a>(&'a self, ctx: &'a Arc<AdapterContext>) -> Option<Hook<'a>> {
        // Config problems are recorded on the registry, never raised (spec 3.2 rule 5).
        Some(
            async move {
                self.launch(ctx);
                Ok(())
            }
            .boxed(),
        )
    }

    fn stop(&self) -> Option<Hook<'_>> {
        Some(
            async move {
                self.halt().await;
                Ok(())
            }
            .boxed(),
        )
    }
}
