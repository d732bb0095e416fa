//! The operator's settings, read through `secrets` when used, so a change (the calls gate
//! above all) counts at the next call.

use crate::service::adapter::secrets;

pub const ACCOUNT_SID: &str = "SERVICE_VOICE_TWILIO_ACCOUNT_SID";
pub const AUTH_TOKEN: &str = "SERVICE_VOICE_TWILIO_AUTH_TOKEN";
pub const FROM_NUMBER: &str = "SERVICE_VOICE_TWILIO_FROM_NUMBER";
pub const API_BASE: &str = "SERVICE_VOICE_TWILIO_API_BASE";
pub const PUBLIC_BASE_URL: &str = "SERVICE_VOICE_PUBLIC_BASE_URL";
pub const CALLS_ALLOWED: &str = "SERVICE_VOICE_CALLS_ALLOWED";
pub const AGENT_PROFILE: &str = "SERVICE_VOICE_AGENT_PROFILE";

/// What the adapter cannot work without.
pub const REQUIRED: &[&str] = &[ACCOUNT_SID, AUTH_TOKEN, FROM_NUMBER, PUBLIC_BASE_URL];

const DEFAULT_API_BASE: &str = "https://api.twilio.com";

/// A setting, `None` when unset or blank.
pub fn get(name: &str) -> Option<String> {
    secrets::get(name)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// The required settings that are unset.
pub fn missing() -> Vec<&'static str> {
    REQUIRED
        .iter()
        .copied()
        .filter(|name| !secrets::is_set(name))
        .collect()
}

pub fn api_base() -> String {
    get(API_BASE)
        .unwrap_or_else(|| DEFAULT_API_BASE.into())
        .trim_end_matches('/')
        .to_owned()
}

/// The public origin (and any path prefix of a reverse proxy) the provider reaches this
/// server at.
pub fn public_base() -> Option<String> {
    get(PUBLIC_BASE_URL).map(|url| url.trim_end_matches('/').to_owned())
}

/// The full public URL of one of this adapter's routes, as the provider requests (and signs) it.
pub fn public_url(path: &str) -> Option<String> {
    Some(format!("{}/api/adapters/voice{path}", public_base()?))
}

/// The ask-first gate: calls are placed only while it is `true`.
pub fn calls_allowed() -> bool {
    get(CALLS_ALLOWED).as_deref() == Some("true")
}
