//! A fake guildchat platform on 127.0.0.1: the REST API (under `/api/v10`) the adapter calls,
//! and a WebSocket gateway speaking the gateway protocol. Tests can make it churn as the real
//! platform does (reconnect requests, invalidated sessions, cut connections, 429s) and read
//! back what the client did.

mod fixtures;
mod gateway;
mod rest;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::Router;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use fixtures::{BOT_ID, bot_user, channel_json, human, member, message_json};

pub const GUILD_ID: u64 = 500;
pub const ADMIN_ROLE_ID: u64 = 600;
pub const USER_ID: u64 = 2_000;

#[derive(Default)]
struct World {
    rest: rest::Rest,
    gateway: gateway::Gateway,
}

struct Shared {
    token: String,
    /// The gateway closes every IDENTIFY with 4004 (a token the REST side still accepted).
    gateway_rejects: bool,
    gateway_url: String,
    world: Mutex<World>,
}

impl Shared {
    fn world(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the gateway accepts this token (sent as `Bot <token>`).
    fn accepts(&self, token: &Value) -> bool {
        let token = token.as_str().unwrap_or("");
        !self.gateway_rejects && token.strip_prefix("Bot ").unwrap_or(token) == self.token
    }
}

pub struct FakePlatform {
    /// What `SERVICE_GUILDCHAT_API_BASE` is set to.
    pub api_base: String,
    shared: Arc<Shared>,
    servers: Vec<JoinHandle<()>>,
}

impl Drop for FakePlatform {
    fn drop(&mut self) {
        self.servers.iter().for_each(JoinHandle::abort);
    }
}

impl FakePlatform {
    pub async fn start(token: &str) -> Self {
        Self::build(token, false).await
    }

    /// REST accepts the token, the gateway does not.
    pub async fn start_rejecting_at_gateway(token: &str) -> Self {
        Self::build(token, true).await
    }

    async fn build(token: &str, gateway_rejects: bool) -> Self {
        let rest = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let gateway = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let shared = Arc::new(Shared {
            token: token.to_owned(),
            gateway_rejects,
            gateway_url: format!("ws://{}", gateway.local_addr().unwrap()),
            world: Mutex::default(),
        });
        let api_base = format!("http://{}", rest.local_addr().unwrap());
        let app = Router::new()
            .fallback(rest::api)
            .with_state(Arc::clone(&shared));
        let servers = vec![
            tokio::spawn(async move { axum::serve(rest, app).await.unwrap() }),
            tokio::spawn(gateway::serve(gateway, Arc::clone(&shared))),
        ];
        Self {
            api_base,
            shared,
            servers,
        }
    }
}

/// Whether `path` matches `pattern`, where `*` matches one segment.
fn path_matches(pattern: &str, path: &str) -> bool {
    let (pattern, path): (Vec<&str>, Vec<&str>) =
        (pattern.split('/').collect(), path.split('/').collect());
    pattern.len() == path.len() && pattern.iter().zip(&path).all(|(p, s)| *p == "*" || p == s)
}
