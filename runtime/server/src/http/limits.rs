//! How much of the server one request may take: its body is read in full, up to
//! [`MAX_BODY_BYTES`] and within the body deadline, before any handler sees it. A body over the
//! limit answers 413 and one that trickles in answers 408, both as `{"error"}`, on the API and
//! on adapter routes alike.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;

use axum::extract::rejection::BytesRejection;

use super::api_error::ApiError;
use crate::config::ServerSection;

/// The largest request body accepted: 2 MiB.
pub const MAX_BODY_BYTES: usize = 2 << 20;

/// How much more of a body over the limit is read (and dropped) before the 413 goes out: a
/// client still sending when the server closes the connection would see a reset instead of
/// the answer. A body declared larger than the two together is refused before it is read.
const DISCARD_BYTES: usize = 4 * MAX_BODY_BYTES;

/// The per-connection and per-request limits of the listener, from `[server]` in config.toml.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub write_timeout: Duration,
    pub max_connections: usize,
    pub max_connections_per_peer: usize,
}

impl Limits {
    pub fn from_config(server: &ServerSection) -> Self {
        Self {
            header_timeout: server.header_timeout(),
            body_timeout: server.body_timeout(),
            write_timeout: server.write_timeout(),
            max_connections: server.max_connections(),
            max_connections_per_peer: server.max_connections_per_peer(),
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self::from_config(&ServerSection::default())
    }
}

/// The answer to a body over [`MAX_BODY_BYTES`].
pub fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!(
            "the request body is larger than the limit of {} MiB",
            MAX_BODY_BYTES >> 20
        ),
    )
}

enum Refused {
    TooLarge,
    Unreadable,
}

/// Middleware: reads the whole body within the body deadline and the size limit, then hands
/// the request on with the body in memory.
pub async fn read_body(State(limits): State<Limits>, request: Request, next: Next) -> Response {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|length| length > (MAX_BODY_BYTES + DISCARD_BYTES) as u64) {
        return too_large().into_response();
    }
    let (parts, body) = request.into_parts();
    match tokio::time::timeout(limits.body_timeout, collect(body)).await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Ok(Err(Refused::TooLarge)) => too_large().into_response(),
        Ok(Err(Refused::Unreadable)) => ApiError::new(
            StatusCode::BAD_REQUEST,
            "the request body could not be read to the end",
        )
        .into_response(),
        Err(_) => ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request body did not arrive within {} s",
                limits.body_timeout.as_secs()
            ),
        )
        .into_response(),
    }
}

async fn collect(body: Body) -> Result<Bytes, Refused> {
    let mut chunks = body.into_data_stream();
    let mut buffer = Vec::new();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|_| Refused::Unreadable)?;
        if buffer.len() + chunk.len() > MAX_BODY_BYTES {
            let mut discarded = chunk.len();
            while discarded <= DISCARD_BYTES {
                match chunks.next().await {
                    Some(Ok(chunk)) => discarded += chunk.len(),
                    _ => break,
                }
            }
            return Err(Refused::TooLarge);
        }
        buffer.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(buffer))
}

impl From<BytesRejection> for ApiError {
    fn from(rejection: BytesRejection) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            too_large()
        } else {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "the request body could not be read to the end",
            )
        }
    }
}
