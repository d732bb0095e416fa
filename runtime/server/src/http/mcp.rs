//! `/mcp`: the agents over MCP's Streamable HTTP transport, for callers who may chat (an API
//! token's holder, the local owner); with `SERVICE_MCP_TOKEN` set, whoever sends it too, and
//! every caller, this machine included, must send a token. A foreign `Origin` is refused by the browser guard on every method. Each
//! request is served on its own (no session state), so any replica can take any request.

use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use super::AppState;
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
