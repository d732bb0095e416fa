//! Request signing: HMAC-SHA256 with the signing secret over `v0:<timestamp>:<raw body>`,
//! sent as `X-Slack-Signature: v0=<hex>` with `X-Slack-Request-Timestamp`. The host compares
//! in constant time, so the secret never enters the sandbox.

use guest_util::{Response, header, signature, unix_now};

use crate::service::adapter::secrets::{self, HmacAlgorithm};
use crate::{HttpRequest, SIGNING_SECRET};

/// Replay window: older (or further in the future) timestamps are refused.
const MAX_AGE_SECS: i64 = 300;

/// `Ok` for an authentic, fresh request; otherwise the answer to send.
pub fn verify(request: &HttpRequest) -> Result<(), Response> {
    if !secrets::is_set(SIGNING_SECRET) {
        // A required secret: the host's entry already says the adapter waits for it.
        let message = format!("the signing secret is not set ({SIGNING_SECRET})");
        return Err(Response::error(503, &message));
    }
    let timestamp = header(&request.headers, "x-slack-request-timestamp")
        .and_then(|t| t.trim().parse::<i64>().ok())
        .ok_or_else(|| Response::error(401, "missing or invalid X-Slack-Request-Timestamp"))?;
    if (unix_now() - timestamp).abs() > MAX_AGE_SECS {
        return Err(Response::error(
            401,
            "request timestamp is more than 300 s away from now (replay protection)",
        ));
    }
    let signature = signature(header(&request.headers, "x-slack-signature"), "v0=")
        .ok_or_else(|| Response::error(401, "missing or malformed X-Slack-Signature"))?;
    let mut signed = format!("v0:{timestamp}:").into_bytes();
    signed.extend_from_slice(&request.body);
    match secrets::verify_hmac(SIGNING_SECRET, HmacAlgorithm::Sha256, &signed, &signature) {
        Ok(true) => Ok(()),
        Ok(false) => Err(Response::error(401, "invalid signature")),
        Err(e) => Err(Response::error(503, &e.to_string())),
    }
}
