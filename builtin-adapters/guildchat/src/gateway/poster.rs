//! Posting messages without losing one to a rate limit. Straight to the platform, serenity's
//! rate limiter waits out a 429 and sends again. Serenity 0.12 cannot run that limiter through
//! an API proxy (its limited requests always go to the platform's own origin), so with
//! `SERVICE_GUILDCHAT_API_BASE` set the limiter is off and a 429 would come back as a plain
//! error, without the wait it asks for. Through a proxy, posts therefore wait and retry here,
//! reading the wait where the limiter reads it.

use std::time::Duration;

use serenity::all::{ChannelId, CreateMessage, Http, Message};
use serenity::http::{ErrorResponse, HttpError, LightMethod, Request, Route, StatusCode};

use crate::config::Config;

pub(super) enum Poster {
    /// Serenity's rate limiter waits out 429s.
    Direct,
    /// Through the API proxy at `base`.
    Proxied {
        client: reqwest::Client,
        base: String,
    },
}

impl Poster {
    pub fn new(config: &Config) -> Self {
        match &config.api_base {
            Some(base) => Self::Proxied {
                client: reqwest::Client::new(),
                base: base.clone(),
            },
            None => Self::Direct,
        }
    }

    /// Posts `message` in `channel` as `ChannelId::send_message` does, waiting out any 429 on
    /// the way.
    pub async fn send(
        &self,
        http: &Http,
        channel: ChannelId,
        mut message: CreateMessage,
    ) -> serenity::Result<Message> {
        let Self::Proxied { client, base } = self else {
            return channel.send_message(http, message).await;
        };
        if let Some(mentions) = &http.default_allowed_mentions {
            message = message.allowed_mentions(mentions.clone());
        }
        let body = serde_json::to_vec(&message)?;
        loop {
            let route = Route::ChannelMessages {
                channel_id: channel,
            };
            let request = Request::new(route, LightMethod::Post).body(Some(body.clone()));
            let response = request
                .build(client, http.token(), Some(base))?
                .send()
                .await?;
            // No cap on retries, as with serenity's limiter: each wait is the platform's own.
            if let Some(wait) = retry_after(&response) {
                tokio::time::sleep(wait).await;
                continue;
            }
            if !response.status().is_success() {
                let method = LightMethod::Post.reqwest_method();
                let error = ErrorResponse::from_response(response, method).await;
                return Err(HttpError::UnsuccessfulRequest(error).into());
            }
            return Ok(serde_json::from_slice(&response.bytes().await?)?);
        }
    }
}

/// The wait a 429 asks for: its `Retry-After` header, in seconds.
fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    if response.status() != StatusCode::TOO_MANY_REQUESTS {
        return None;
    }
    let seconds = response.headers().get("retry-after")?.to_str().ok()?;
    Duration::try_from_secs_f64(seconds.parse().ok()?).ok()
}
