//! The platform client (serenity): one supervised gateway session at a time. A rejected token
//! or refused intents end it for good with an error on the registry; any other failure is
//! retried after a delay that doubles each time, never in a tight loop. The gateway's routine
//! churn (a reconnect request, an invalidated session, a dropped connection) never gets here:
//! serenity resumes or identifies again by itself, so the entry stays as it is.

mod approval;
mod bot;
mod control;
mod feedback;
mod handler;
mod poster;
mod reply;
mod tasks;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serenity::all::{
    ApplicationId, ClientBuilder, CreateAllowedMentions, CreateBotAuthParameters, GatewayError,
    GatewayIntents, Http, HttpBuilder, HttpError, Permissions, Scope,
};
use service_contract::AdapterContext;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::NAME;
use crate::config::{Config, TOKEN};
use crate::invite::PERMISSIONS;

use bot::Bot;
use handler::Handler;

const FIRST_RETRY: Duration = Duration::from_secs(5);
const MAX_RETRY: Duration = Duration::from_secs(300);
/// Within the host's stop deadline, so `stop` always finishes promptly.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// The invite link for the bot whose application id this is (spec 4.3).
pub fn invite_url(application_id: u64) -> String {
    CreateBotAuthParameters::new()
        .client_id(ApplicationId::new(application_id))
        .scopes(&[Scope::Bot, Scope::ApplicationsCommands])
        .permissions(Permissions::from_bits_truncate(PERMISSIONS))
        .build()
}

/// The running session, if any.
#[derive(Default)]
pub struct Session {
    running: Mutex<Option<Running>>,
}

struct Running {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Session {
    /// Reads the settings and connects on a task of its own. A problem with the settings goes
    /// on the registry; a missing token keeps the adapter offline.
    pub fn launch(&self, ctx: &Arc<AdapterContext>) {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if running.as_ref().is_some_and(|r| !r.task.is_finished()) {
            return;
        }
        let config = match Config::from_secrets(|name| ctx.secrets.get(name)) {
            Ok(config) => config,
            Err(problem) => {
                ctx.registry.report_config(NAME, &problem);
                return;
            }
        };
        if let Err(problem) = &config.control {
            ctx.registry.mark_error(NAME, "ConfigError", problem);
        }
        let stop = CancellationToken::new();
        let task = tokio::spawn(supervise(Arc::clone(ctx), config, stop.clone()));
        *running = Some(Running { stop, task });
    }

    /// Disconnects and cancels agent runs still in flight.
    pub async fn shutdown(&self) {
        let running = self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(Running { stop, mut task }) = running {
            stop.cancel();
            if tokio::time::timeout(STOP_GRACE, &mut task).await.is_err() {
                task.abort();
            }
        }
    }
}

/// How a gateway session ended.
enum Ended {
    Stopped,
    /// Retrying cannot help: the token or the bot's settings at the platform must change.
    Fatal(&'static str, String),
    Retry(&'static str, String),
}

async fn supervise(ctx: Arc<AdapterContext>, config: Config, stop: CancellationToken) {
    let mut delay = FIRST_RETRY;
    loop {
        match connect(&ctx, &config, &stop).await {
            Ended::Stopped => return,
            Ended::Fatal(kind, message) => {
                tracing::error!(adapter = NAME, "{kind}: {message}");
                ctx.registry.mark_error(NAME, kind, &message);
                return;
            }
            Ended::Retry(kind, message) => {
                let message = format!("{message}; retrying in {} s", delay.as_secs());
                tracing::warn!(adapter = NAME, "{kind}: {message}");
                ctx.registry.mark_error(NAME, kind, &message);
            }
        }
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = stop.cancelled() => return,
        }
        delay = (delay * 2).min(MAX_RETRY);
    }
}

/// One gateway session, until it is stopped or fails.
async fn connect(ctx: &Arc<AdapterContext>, config: &Config, stop: &CancellationToken) -> Ended {
    let http = http_client(config);
    // The token is checked over REST first: a clear 401, and the bot's own id, before any
    // gateway connection is attempted.
    let me = match http.get_current_user().await {
        Ok(user) => user.id,
        Err(error) => return token_check_failed(&error),
    };
    let bot = Arc::new(Bot::new(
        Arc::clone(ctx),
        config.clone(),
        me,
        stop.child_token(),
    ));
    let client = ClientBuilder::new_with_http(http, intents(config))
        .event_handler(Handler::new(Arc::clone(&bot)))
        .await;
    let mut client = match client {
        Ok(client) => client,
        Err(error) => {
            return Ended::Retry(
                "ConnectionError",
                format!("could not set up the client: {error}"),
            );
        }
    };
    // Runs of this adapter that waited for a person and went on: answered while this session
    // is up (another replica's session takes them when this one is gone).
    let delivering = tokio::spawn(approval::deliver(
        Arc::clone(&bot),
        Arc::clone(&client.http),
        stop.child_token(),
    ));
    let shards = Arc::clone(&client.shard_manager);
    let ended = tokio::select! {
        result = client.start() => result.map_or_else(|error| gateway_failed(&error), |()| Ended::Stopped),
        () = stop.cancelled() => {
            shards.shutdown_all().await;
            Ended::Stopped
        }
    };
    bot.cancel_runs();
    delivering.abort();
    ended
}

fn http_client(config: &Config) -> Http {
    // None of the bot's posts or edits may ping: replies, cards and feed lines carry text from
    // prompts and models, where `<@id>`, `<@&role>` or `@everyone` must stay plain text. Every
    // message builder falls back to this default, interaction responses included.
    let builder =
        HttpBuilder::new(&config.token).default_allowed_mentions(CreateAllowedMentions::new());
    match &config.api_base {
        // Serenity swaps the platform's origin for this and keeps the `/api/v10/...` path, but
        // only on requests that skip its rate limiter: limiting is then the proxy's job, and
        // posts wait out a 429 the proxy passes on by themselves (see `poster`).
        Some(base) => builder.proxy(base).ratelimiter_disabled(true).build(),
        None => builder.build(),
    }
}

fn intents(config: &Config) -> GatewayIntents {
    let intents = GatewayIntents::GUILDS
        | GatewayIntents::GUILD_MESSAGES
        | GatewayIntents::DIRECT_MESSAGES
        | GatewayIntents::MESSAGE_CONTENT;
    // Reaction events are only delivered with this (unprivileged) intent, and the control
    // bot's feedback is read from them.
    if config.control.is_ok() {
        intents | GatewayIntents::GUILD_MESSAGE_REACTIONS
    } else {
        intents
    }
}

fn rejected_token(how: &str) -> String {
    format!(
        "{TOKEN} was rejected ({how}): the token is invalid or was rotated; \
         set a current bot token and restart"
    )
}

fn token_check_failed(error: &serenity::Error) -> Ended {
    let status = match error {
        serenity::Error::Http(HttpError::UnsuccessfulRequest(response)) => {
            Some(response.status_code.as_u16())
        }
        _ => None,
    };
    match (status, error) {
        (Some(401), _) => Ended::Fatal("AuthError", rejected_token("401 Unauthorized")),
        (Some(429 | 500..), _) | (None, serenity::Error::Http(HttpError::Request(_))) => {
            Ended::Retry(
                "ConnectionError",
                format!("could not reach the platform: {}", with_causes(error)),
            )
        }
        _ => Ended::Fatal(
            "ConfigError",
            format!("could not check the bot token: {}", with_causes(error)),
        ),
    }
}

fn gateway_failed(error: &serenity::Error) -> Ended {
    match error {
        serenity::Error::Gateway(GatewayError::InvalidAuthentication) => Ended::Fatal(
            "AuthError",
            rejected_token("the gateway closed with 4004, authentication failed"),
        ),
        serenity::Error::Gateway(GatewayError::DisallowedGatewayIntents) => Ended::Fatal(
            "ConfigError",
            "the platform refused the MESSAGE_CONTENT intent (close code 4014): enable the \
             Message Content intent for this bot in the developer portal, then restart the server"
                .to_owned(),
        ),
        serenity::Error::Gateway(GatewayError::InvalidGatewayIntents) => Ended::Fatal(
            "ConfigError",
            "the platform rejected the requested intents (close code 4013)".to_owned(),
        ),
        other => Ended::Retry(
            "ConnectionError",
            format!("the gateway session ended: {}", with_causes(other)),
        ),
    }
}

/// An error with its causes: "Error while sending HTTP request" alone does not say what failed.
/// Causes that repeat what is already said are left out.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        let said = inner.to_string();
        if !text.contains(&said) {
            text = format!("{text}: {said}");
        }
        cause = inner.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_invite_url_asks_for_both_scopes_and_the_documented_permissions() {
        let url = invite_url(1234);
        assert!(url.contains("client_id=1234"), "{url}");
        assert!(url.contains("scope=bot+applications.commands"), "{url}");
        assert!(url.contains("permissions=292057869376"), "{url}");
    }

    #[test]
    fn the_client_allows_no_mentions_by_default() {
        let config = Config::from_secrets(|name| (name == TOKEN).then(|| "t".to_owned())).unwrap();
        let http = http_client(&config);
        let allowed = serde_json::to_value(http.default_allowed_mentions).unwrap();
        assert_eq!(
            allowed,
            serde_json::json!({ "parse": [], "users": [], "roles": [] })
        );
    }
}
