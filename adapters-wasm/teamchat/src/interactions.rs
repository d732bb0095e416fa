//! `POST /interactions`: a click on an approval's Approve or Deny button (`block_actions`, the
//! form field `payload`, signed like events). The clicker must be the person who asked or an
//! approver; the decision goes to the host, and the question is updated to say who decided.
//! Whatever goes wrong is told to the clicker alone (an ephemeral message through the click's
//! `response_url`); the platform always gets its 200, whose body names the outcome.

use guest_util::{Response, form_field};
use serde_json::{Value, json};

use crate::service::adapter::agent::{self, DecideError};
use crate::service::adapter::log::{self, Level};
use crate::{approval, platform};

pub fn handle(body: &[u8]) -> Response {
    let payload = std::str::from_utf8(body)
        .ok()
        .and_then(|form| form_field(form, "payload"));
    let Some(Ok(payload)) = payload.map(|p| serde_json::from_str::<Value>(&p)) else {
        return Response::error(400, "an interaction without a JSON `payload` field");
    };
    if payload["type"] != "block_actions" {
        return ack("ignored: not a button click");
    }
    let action = &payload["actions"][0];
    let approve = match action["action_id"].as_str() {
        Some("approve") => true,
        Some("deny") => false,
        _ => return ack("ignored: not an approval's button"),
    };
    let (Some(approval_id), Some(user)) =
        (action["value"].as_str(), payload["user"]["id"].as_str())
    else {
        return Response::error(400, "a button click without its value or its user");
    };
    let tell = |outcome: &str, text: &str| {
        tell(&payload, text);
        ack(outcome)
    };
    match approval::may_decide(approval_id, user) {
        None => return tell("unknown", UNKNOWN),
        Some(false) => {
            return tell(
                "refused: not the asker or an approver",
                "Only the person who asked, or an approver (SERVICE_TEAMCHAT_APPROVERS), can decide this.",
            );
        }
        Some(true) => {}
    }
    let verb = if approve { "Approved" } else { "Denied" };
    let note = format!("{verb} in teamchat by {user}");
    match agent::decide(approval_id, approve, Some(&note)) {
        Ok(true) => {
            update(&payload, &format!("{verb} by <@{user}>."));
            ack(if approve { "approved" } else { "denied" })
        }
        Ok(false) => tell(
            "decided before",
            "This was decided already; nothing changed.",
        ),
        Err(DecideError::Unknown) => tell("unknown", UNKNOWN),
        Err(DecideError::Denied | DecideError::Failed) => tell(
            "not recorded",
            "Sorry, the decision could not be recorded; please try again.",
        ),
    }
}

const UNKNOWN: &str = "This approval is not open here (it may have expired or been removed).";

fn ack(outcome: &str) -> Response {
    Response::json(200, &json!({ "ok": true, "outcome": outcome }))
}

/// Replaces the question's buttons with who decided.
fn update(payload: &Value, outcome: &str) {
    let channel = payload["channel"]["id"]
        .as_str()
        .or(payload["container"]["channel_id"].as_str());
    let ts = payload["message"]["ts"]
        .as_str()
        .or(payload["container"]["message_ts"].as_str());
    let (Some(channel), Some(ts)) = (channel, ts) else {
        return;
    };
    let question = payload["message"]["text"].as_str().unwrap_or_default();
    let text = format!("{question}\n{outcome}");
    let message = json!({
        "channel": channel,
        "ts": ts,
        "text": text,
        "blocks": approval::decided_blocks(&text),
    });
    if let Err(e) = platform::post("chat.update", &message) {
        log::log(
            Level::Warn,
            &format!(
                "the decision is recorded, but its question was not updated: {}",
                e.message()
            ),
        );
    }
}

/// Tells the clicker alone, through the click's `response_url`.
fn tell(payload: &Value, text: &str) {
    let Some(url) = payload["response_url"]
        .as_str()
        .filter(|url| platform::is_hooks_url(url))
    else {
        return;
    };
    let message = json!({ "response_type": "ephemeral", "replace_original": false, "text": text });
    if let Err(e) = platform::respond(url, &message) {
        log::log(
            Level::Warn,
            &format!(
                "cannot tell a clicker why nothing was decided: {}",
                e.message()
            ),
        );
    }
}
