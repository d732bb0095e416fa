//! `/mcp`: the agents over MCP's Streamable HTTP transport, for callers who may chat (an API
//! token's holder, the local owner); with `SERVICE_MCP_TOKEN` set, whoever sends it too, and
//! every caller, this machine included, must send a token. A foreign `Origin` is refused by the browser guard on every method. Each
//! request is served on its own (no session state), so any replica can take any request.

use super::AppState;
use crate::mcp::agents::HttpService;

/// The bearer token MCP clients must send, when set.
pub const TOKEN_VARIABLE: &str = "SERVICE_MCP_TOKEN";

/// The MCP service, ended with the server.
pub fn service(app: &AppState) -> HttpService {
    app.mcp_agents.http_service()
}
