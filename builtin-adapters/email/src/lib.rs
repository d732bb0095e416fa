//! The email adapter: answers mail that arrives in an IMAP mailbox with one agent profile, and
//! replies through SMTP, threaded, from its own address.
//!
//! Handled state lives on the messages as IMAP flags ([`CLAIMED_KEYWORD`], `\Answered`,
//! [`SKIPPED_KEYWORD`]), so a restart never
//! answers a message twice, and a message claimed but not answered before a crash is answered
//! after it. Auto-replies, bounces, list and bulk mail and its own mail are never answered, so
//! two robots cannot mail each other in a loop.
//!
//! ```no_run
//! # use std::sync::Arc;
//! let adapter: Arc<dyn service_contract::Adapter> = Arc::new(service_email::EmailAdapter::new());
//! ```

mod automated;
mod body;
pub mod config;
mod failure;
mod incoming;
mod mailbox;
pub mod metadata;
mod outbox;
mod screen;
mod senders;
mod session;
mod texts;
mod thread;
mod tls;
mod worker;

use std::sync::Arc;

use futures_util::FutureExt;
use serde_json::{Value, json};
use service_contract::{Adapter, AdapterContext, Hook};

pub use mailbox::{CLAIMED_KEYWORD, SKIPPED_KEYWORD};

/// The adapter's registry name.
pub const NAME: &str = "email";

/// The adapter. `start` polls the mailbox on a task of its own and `stop` ends it, so it can be
/// toggled at runtime.
#[derive(Default)]
pub struct EmailAdapter {
    session: session::Session,
}

impl EmailAdapter {
    pub fn new() -> Self {
        Self::default()
    }
}

impl Adapter for EmailAdapter {
    fn name(&self) -> &str {
        NAME
    }

    fn describe(&self) -> Value {
        json!({
            "version": env!("CARGO_PKG_VERSION"),
            "kind": "IMAP mailbox answered through SMTP",
            "settings": config::SETTINGS,
            "keywords": { "claimed": CLAIMED_KEYWORD, "skipped": SKIPPED_KEYWORD },
            "limits": {
                "max_message_bytes": config::DEFAULT_MAX_MESSAGE_BYTES,
                "max_per_poll": config::DEFAULT_MAX_PER_POLL,
                "max_prompt_chars": config::DEFAULT_MAX_PROMPT_CHARS,
                "max_age_days": config::DEFAULT_MAX_AGE_DAYS,
            },
        })
    }

    fn settings(&self) -> &[&str] {
        &config::SETTINGS
    }

    fn start<'a>(&'a self, ctx: &'a Arc<AdapterContext>) -> Option<Hook<'a>> {
        // Config problems are recorded on the registry, never raised (spec 3.2 rule 5).
        Some(
            async move {
                self.session.launch(ctx);
                Ok(())
            }
            .boxed(),
        )
    }

    fn stop(&self) -> Option<Hook<'_>> {
        Some(
            async move {
                self.session.shutdown().await;
                Ok(())
            }
            .boxed(),
        )
    }
}
