//! `/mcp`: the agents over MCP's Streamable HTTP transport, for callers who may chat (an API
//! token's holder, the local owner); with `SERVICE_MCP_TOKEN` set, whoever sends it too, and
//! every caller, this machine included, must send a token. A foreign `Origin` is refused by the browser guard on every method. Each
//! request is served on its own (no session state), so any replica can take any request.

use axum::body::to_bytes;
use axum::extract::Request;
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::api_error::ApiError;
use crate::mcp::agents::HttpService;

/// The longest refusal of the transport kept as its message (a longer one gives way to its
/// status's reason).
const REFUSAL_BYTES: usize = 4096;

/// The bearer token MCP clients must send, when set.
pub const TOKEN_VARIABLE: &str = "SERVICE_MCP_TOKEN";

/// The transport's own refusals (405, 406, 415) are plain text: they answer `{"error": ...}`
/// as every other route does, their other headers (`allow`) kept.
pub async fn json_errors(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|kind| kind.as_bytes().starts_with(b"application/json"));
    if json || !(response.status().is_client_error() || response.status().is_server_error()) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let said = to_bytes(body, REFUSAL_BYTES).await.unwrap_or_default();
    let said = String::from_utf8_lossy(&said);
    let message = match said.trim() {
        "" => parts.status.canonical_reason().unwrap_or("refused"),
        said => said,
    };
    let mut answer = ApiError::new(parts.status, message).into_response();
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            answer.headers_mut().append(name, value.clone());
        }
    }
    answer
}

/// The MCP service, ended with the server.
pub fn service(app: &AppState) -> HttpService {
    app.mcp_agents.http_service()
}
