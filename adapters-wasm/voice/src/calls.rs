//! Call records in kv. Each call has a number, claimed atomically, and its facts under keys
//! that each have one writer, so concurrent handlers never overwrite each other:
//! `call:<n>` the request and its placement (the tool), `call:<n>:talk` the conversation (the
//! webhook turns, one at a time by nature), `call:<n>:status` the provider's status (its
//! callbacks), `call:<n>:booking` the calendar entry (the job). `calls:head` is the highest
//! number handed out, a hint for the next one and for listing.

use serde_json::{Value, json};

use crate::service::adapter::kv;

/// How long a call's records are kept.
pub const TTL_MS: u64 = 30 * 24 * 60 * 60 * 1000;
const HEAD: &str = "calls:head";
/// Numbers tried past the head when others took them first.
const MAX_CLAIMS: u64 = 1_000;
/// Calls looked at when listing, newest first.
pub const MAX_SCANNED: u64 = 200;

fn key(n: u64, part: Option<&str>) -> String {
    match part {
        None => format!("call:{n}"),
        Some(part) => format!("call:{n}:{part}"),
    }
}

fn read(key: &str) -> Result<Option<Value>, String> {
    let bytes = kv::get(key).map_err(|e| format!("cannot read {key}: {e}"))?;
    Ok(bytes.and_then(|b| serde_json::from_slice(&b).ok()))
}

fn write(key: &str, value: &Value) -> Result<(), String> {
    kv::set(key, value.to_string().as_bytes(), Some(TTL_MS))
        .map_err(|e| format!("cannot store {key}: {e}"))
}

fn head() -> u64 {
    kv::get(HEAD)
        .ok()
        .flatten()
        .and_then(|b| String::from_utf8(b).ok()?.parse().ok())
        .unwrap_or(0)
}

/// A fresh call number (claimed, so two calls never share one).
pub fn allocate() -> Result<u64, String> {
    let start = head() + 1;
    for n in start..start + MAX_CLAIMS {
        if kv::claim(&key(n, None), TTL_MS).map_err(|e| format!("cannot number the call: {e}"))? {
            // A hint only: a racing call may leave it lower, which costs a claim later.
            let _ = kv::set(HEAD, n.to_string().as_bytes(), None);
            return Ok(n);
        }
    }
    Err("cannot number the call: too many numbers are taken".into())
}

/// The parts of one call.
pub struct Call {
    pub n: u64,
    /// The request and its placement.
    pub request: Value,
    pub talk: Option<Value>,
    pub status: Option<Value>,
    pub booking: Option<Value>,
}

pub fn save_request(n: u64, request: &Value) -> Result<(), String> {
    write(&key(n, None), request)
}

pub fn save_talk(n: u64, talk: &Value) -> Result<(), String> {
    write(&key(n, Some("talk")), talk)
}

pub fn save_status(n: u64, status: &Value) -> Result<(), String> {
    write(&key(n, Some("status")), status)
}

pub fn save_booking(n: u64, booking: &Value) -> Result<(), String> {
    write(&key(n, Some("booking")), booking)
}

/// Call `n`, when its request is stored.
pub fn load(n: u64) -> Result<Option<Call>, String> {
    let Some(request) = read(&key(n, None))? else {
        return Ok(None);
    };
    Ok(Some(Call {
        n,
        request,
        talk: read(&key(n, Some("talk")))?,
        status: read(&key(n, Some("status")))?,
        booking: read(&key(n, Some("booking")))?,
    }))
}

/// Whether number `n` is taken (its request may still be on its way).
fn taken(n: u64) -> bool {
    kv::get(&key(n, None)).ok().flatten().is_some()
}

/// The stored calls, newest first, up to [`MAX_SCANNED`]; expired ones end the walk.
pub fn recent() -> Result<Vec<Call>, String> {
    let mut top = head();
    // The head may lag behind a racing call.
    while taken(top + 1) {
        top += 1;
    }
    let mut out = Vec::new();
    let mut n = top;
    while n > 0 && top - n < MAX_SCANNED && taken(n) {
        out.extend(load(n)?);
        n -= 1;
    }
    Ok(out)
}

/// Where a call stands: the conversation's outcome, else what the provider's status implies.
pub fn outcome(call: &Call) -> (&'static str, Option<String>) {
    if let Some(talk) = &call.talk
        && let Some(outcome) = talk["outcome"].as_str()
    {
        let reason = talk["reason"].as_str().map(str::to_owned);
        return match outcome {
            "confirmed" => ("confirmed", reason),
            "declined" => ("declined", reason),
            "no_answer" => ("no_answer", reason),
            _ => ("failed", reason),
        };
    }
    if let Some(error) = call.request["placement_error"].as_str() {
        return ("failed", Some(error.to_owned()));
    }
    let status = call.status.as_ref().and_then(|s| s["status"].as_str());
    match status {
        Some("busy" | "no-answer" | "canceled") => (
            "no_answer",
            Some(format!("the call ended as {}", status.unwrap_or_default())),
        ),
        Some("failed") => (
            "failed",
            Some("the provider could not connect the call".into()),
        ),
        Some("completed") => (
            "failed",
            Some("the call ended before the venue confirmed or declined".into()),
        ),
        _ => ("in_progress", None),
    }
}

/// A call as `get_reservation_calls` shows it.
pub fn summary(call: &Call) -> Value {
    let (outcome, reason) = outcome(call);
    let request = &call.request;
    let transcript: Vec<Value> = call
        .talk
        .as_ref()
        .and_then(|t| t["turns"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(|turn| {
            let speaker = if turn["role"] == "assistant" {
                "assistant"
            } else {
                "venue"
            };
            json!({ "speaker": speaker, "text": turn["text"] })
        })
        .collect();
    let mut out = json!({
        "call_id": call.n,
        "venue_name": request["venue_name"],
        "to_number": request["to_number"],
        "reservation_datetime": request["reservation_datetime"],
        "party_size": request["party_size"],
        "notes": request["notes"],
        "requested_at": request["requested_at"],
        "status": outcome,
        "transcript": transcript,
    });
    if let Some(reason) = reason {
        out["reason"] = json!(reason);
    }
    if let Some(status) = &call.status {
        out["provider_status"] = status["status"].clone();
    }
    if let Some(booking) = &call.booking {
        out["calendar"] = booking.clone();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(talk: Option<Value>, status: Option<&str>, request: Value) -> Call {
        Call {
            n: 1,
            request,
            talk,
            status: status.map(|s| json!({ "status": s })),
            booking: None,
        }
    }

    #[test]
    fn the_conversation_decides_else_the_provider_status() {
        let confirmed = call(
            Some(json!({"outcome": "confirmed"})),
            Some("completed"),
            json!({}),
        );
        assert_eq!(outcome(&confirmed).0, "confirmed");
        assert_eq!(outcome(&call(None, Some("busy"), json!({}))).0, "no_answer");
        assert_eq!(
            outcome(&call(None, Some("no-answer"), json!({}))).0,
            "no_answer"
        );
        assert_eq!(outcome(&call(None, Some("failed"), json!({}))).0, "failed");
        let hung_up = outcome(&call(
            Some(json!({"turns": []})),
            Some("completed"),
            json!({}),
        ));
        assert_eq!(hung_up.0, "failed");
        assert!(hung_up.1.unwrap().contains("before"));
        assert_eq!(
            outcome(&call(None, Some("ringing"), json!({}))).0,
            "in_progress"
        );
        assert_eq!(outcome(&call(None, None, json!({}))).0, "in_progress");
        let refused = call(None, None, json!({"placement_error": "invalid number"}));
        assert_eq!(outcome(&refused), ("failed", Some("invalid number".into())));
    }

    #[test]
    fn summaries_name_the_speakers() {
        let talk = json!({"turns": [
            {"role": "assistant", "text": "Hello"},
            {"role": "user", "text": "Hi, Chez Nous"},
        ], "outcome": "declined", "reason": "fully booked"});
        let shown = summary(&call(
            Some(talk),
            Some("completed"),
            json!({"venue_name": "Chez Nous"}),
        ));
        assert_eq!(shown["status"], "declined");
        assert_eq!(shown["reason"], "fully booked");
        assert_eq!(shown["transcript"][1]["speaker"], "venue");
        assert_eq!(shown["provider_status"], "completed");
        assert_eq!(shown["venue_name"], "Chez Nous");
    }
}
