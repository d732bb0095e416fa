//! `/mcp`: the agents over MCP's Streamable HTTP transport. Without `SERVICE_MCP_TOKEN` only
//! this machine may call it; with it every caller, this machine included, must send it as a
//! bearer token. A foreign `Origin` is refused by the browser guard on every method. Each
//! request is served on its own (no session state), so any replica can take any request.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::{Digest, Sha256};

use super::AppState;
use super::api::ApiError;
use crate::mcp::Agents;

/// The bearer token MCP clients must send, when set.
pub const TOKEN_VARIABLE: &str = "SERVICE_MCP_TOKEN";

/// The MCP service, ended with the server.
pub fn service(app: &AppState) -> StreamableHttpService<Agents, NeverSessionManager> {
    let agents = app.mcp_agents.clone();
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        // Host and Origin are the browser guard's, for every route alike.
        .disable_allowed_hosts()
        .with_cancellation_token(app.shutdown.child_token());
    StreamableHttpService::new(
        move || Ok(agents.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    )
}

/// Lets through the local machine, or with the token set, whoever sends it.
pub async fn authorize(
    State(app): State<AppState>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request,
    next: Next,
) -> Response {
    let refusal = match app.env.get(TOKEN_VARIABLE) {
        Some(token) => {
            let sent = request
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.strip_prefix("Bearer "));
            match sent {
                Some(sent) if same_secret(sent, &token) => None,
                _ => Some((
                    StatusCode::UNAUTHORIZED,
                    "send the token of SERVICE_MCP_TOKEN as a bearer token",
                )),
            }
        }
        None if peer.ip().to_canonical().is_loopback() => None,
        None => Some((
            StatusCode::FORBIDDEN,
            "MCP is served to this machine only; set SERVICE_MCP_TOKEN to serve others",
        )),
    };
    match refusal {
        None => next.run(request).await,
        Some((status, message)) => {
            let mut response = ApiError::new(status, message).into_response();
            if status == StatusCode::UNAUTHORIZED {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            response
        }
    }
}

/// Compares digests, so the time taken says nothing about how much of the token was right.
fn same_secret(sent: &str, token: &str) -> bool {
    let (a, b) = (Sha256::digest(sent), Sha256::digest(token));
    a.iter().zip(b.iter()).fold(0, |acc, (x, y)| acc | (x ^ y)) == 0
}
