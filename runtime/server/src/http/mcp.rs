//! `/mcp`: the agents over MCP's Streamable HTTP transport. Without `SERVICE_MCP_TOKEN` only
//! this machine may call it; with it every caller, this machine included, must send it as a
//! bearer token. A foreign `Origin` is refused by the browser guard on every method. Each
//! request is served on its own (no session state), so any replica can take any request.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use super::{AppState, guards};
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
    let token = app.env.get(TOKEN_VARIABLE);
    match guards::token_or_loopback(token, TOKEN_VARIABLE, peer, request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => refusal.into_response(),
    }
}
