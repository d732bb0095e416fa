//! Outbound requests through the host, and how their failures read in a tool error.

use crate::service::adapter::outbound_http::{self, Request, Response};

/// The host's limit on one request; calendar servers can be slow on a first query.
const TIMEOUT_MS: u32 = 15_000;

/// Sends a request; the error says which server could not be reached and why.
pub fn send(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: impl Into<Vec<u8>>,
) -> Result<Response, String> {
    let request = Request {
        method: method.into(),
        url: url.into(),
        headers: headers
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        body: body.into(),
        timeout_ms: Some(TIMEOUT_MS),
    };
    outbound_http::send(&request).map_err(|e| format!("{method} {url} failed: {e}"))
}

/// The body as text, for error messages (cut, so a large page cannot flood one).
pub fn excerpt(response: &Response) -> String {
    let text = String::from_utf8_lossy(&response.body);
    let text = text.trim();
    match text.char_indices().nth(300) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}
