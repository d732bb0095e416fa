//! The tools: `request_reservation_call` places a call through the provider's Calls API
//! (refused unless `SERVICE_VOICE_CALLS_ALLOWED=true`, checked at every call), and
//! `get_reservation_calls` tells how calls went.

use jiff::Timestamp;
use jiff::civil::DateTime;
use serde_json::{Value, json};

use crate::calls;
use crate::service::adapter::outbound_http::{self, Request};
use crate::settings::{self, ACCOUNT_SID, AUTH_TOKEN, CALLS_ALLOWED, FROM_NUMBER};

pub const REQUEST: &str = "request_reservation_call";
pub const LIST: &str = "get_reservation_calls";

const MAX_VENUE_CHARS: usize = 200;
const MAX_NOTES_CHARS: usize = 1_000;
const MAX_PARTY: u64 = 50;
/// Calls `get_reservation_calls` answers with at most.
const MAX_LISTED: usize = 20;
const STATUSES: &[&str] = &[
    "all",
    "in_progress",
    "confirmed",
    "declined",
    "no_answer",
    "failed",
];

pub struct Spec {
    pub name: &'static str,
    pub description: &'static str,
    pub parameters: Value,
}

pub fn specs() -> Vec<Spec> {
    vec![
        Spec {
            name: REQUEST,
            description: "Phones a restaurant or venue to book a table; an assistant voice \
                holds the conversation and the outcome is recorded (confirmed, declined, \
                no_answer, failed). Ask the user to confirm the venue, number, date, time and \
                party size before calling. Returns at once; use get_reservation_calls for the \
                outcome.",
            parameters: json!({
                "type": "object",
                "properties": {
                    "venue_name": {"type": "string", "minLength": 1, "maxLength": MAX_VENUE_CHARS},
                    "to_number": {
                        "type": "string",
                        "pattern": "^\\+[1-9][0-9]{6,14}$",
                        "description": "The venue's number in E.164 form (+14155550123)."
                    },
                    "reservation_datetime": {
                        "type": "string",
                        "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2})?$",
                        "description": "The venue's local date and time, e.g. 2026-11-28T19:30."
                    },
                    "party_size": {"type": "integer", "minimum": 1, "maximum": MAX_PARTY},
                    "notes": {
                        "type": "string",
                        "maxLength": MAX_NOTES_CHARS,
                        "description": "The name for the booking, wishes, acceptable alternatives."
                    }
                },
                "required": ["venue_name", "to_number", "reservation_datetime", "party_size"],
                "additionalProperties": false
            }),
        },
        Spec {
            name: LIST,
            description: "Lists recent reservation calls, newest first, with their status \
                (in_progress, confirmed, declined, no_answer, failed), the transcript and the \
                calendar entry of a confirmed booking.",
            parameters: json!({
                "type": "object",
                "properties": {
                    "status": {"type": "string", "enum": STATUSES}
                },
                "additionalProperties": false
            }),
        },
    ]
}

pub fn call(name: &str, args: &str) -> Result<String, String> {
    let args: Value =
        serde_json::from_str(args).map_err(|e| format!("the arguments are not JSON: {e}"))?;
    let answer = match name {
        REQUEST => request(&args)?,
        LIST => list(&args)?,
        other => return Err(format!("the voice adapter has no tool {other:?}")),
    };
    Ok(answer.to_string())
}

/// What the model asked for, checked.
pub struct Reservation {
    pub venue_name: String,
    pub to_number: String,
    pub when: DateTime,
    pub party_size: u64,
    pub notes: String,
}

fn text(args: &Value, key: &str, max: usize) -> Result<String, String> {
    let value = args[key].as_str().unwrap_or_default().trim();
    match value.chars().count() > max {
        true => Err(format!("`{key}` is longer than {max} characters")),
        false => Ok(value.to_owned()),
    }
}

pub fn reservation(args: &Value) -> Result<Reservation, String> {
    let venue_name = text(args, "venue_name", MAX_VENUE_CHARS)?;
    if venue_name.is_empty() {
        return Err("`venue_name` is required".into());
    }
    let to_number = text(args, "to_number", 16)?;
    let digits = to_number.strip_prefix('+').unwrap_or_default();
    let e164 = (7..=15).contains(&digits.len())
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !digits.starts_with('0');
    if !e164 {
        return Err(format!(
            "`to_number` {to_number:?} is not an E.164 number (+14155550123)"
        ));
    }
    let written = text(args, "reservation_datetime", 19)?;
    let when: DateTime = written.parse().map_err(|_| {
        format!(
            "`reservation_datetime` {written:?} is not a local date and time (2026-11-28T19:30)"
        )
    })?;
    // The venue's zone is unknown; a day's slack keeps every zone's "today" possible.
    let yesterday = Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .date()
        .yesterday();
    if yesterday.is_ok_and(|y| when.date() < y) {
        return Err(format!("`reservation_datetime` {written} is in the past"));
    }
    let party_size = args["party_size"]
        .as_u64()
        .filter(|n| (1..=MAX_PARTY).contains(n))
        .ok_or_else(|| format!("`party_size` must be a whole number from 1 to {MAX_PARTY}"))?;
    Ok(Reservation {
        venue_name,
        to_number,
        when,
        party_size,
        notes: text(args, "notes", MAX_NOTES_CHARS)?,
    })
}

fn request(args: &Value) -> Result<Value, String> {
    // The gate is read at every call, so turning it off stops the next call at once.
    if !settings::calls_allowed() {
        return Err(format!(
            "placing calls is turned off: the operator has to set {CALLS_ALLOWED}=true"
        ));
    }
    let missing = settings::missing();
    if !missing.is_empty() {
        return Err(format!(
            "the voice adapter is not configured: {} not set",
            missing.join(", ")
        ));
    }
    let reservation = reservation(args)?;
    let n = calls::allocate()?;
    let mut record = json!({
        "venue_name": reservation.venue_name,
        "to_number": reservation.to_number,
        "reservation_datetime": reservation.when.strftime("%Y-%m-%dT%H:%M").to_string(),
        "party_size": reservation.party_size,
        "notes": reservation.notes,
        "requested_at": Timestamp::now().to_string(),
    });
    calls::save_request(n, &record)?;
    match dial(n, &reservation.to_number) {
        Ok(sid) => {
            record["sid"] = json!(sid);
            calls::save_request(n, &record)?;
            Ok(json!({
                "call_id": n,
                "status": "in_progress",
                "note": "The venue is being called; get_reservation_calls tells the outcome.",
            }))
        }
        Err(problem) => {
            record["placement_error"] = json!(problem);
            calls::save_request(n, &record)?;
            Err(problem)
        }
    }
}

/// Asks the provider to place the call; answers its call SID.
fn dial(n: u64, to: &str) -> Result<String, String> {
    let (Some(sid), Some(from)) = (settings::get(ACCOUNT_SID), settings::get(FROM_NUMBER)) else {
        return Err(format!("{ACCOUNT_SID} or {FROM_NUMBER} is not set"));
    };
    let url = |action: &str| {
        settings::public_url(&format!("/calls/{n}/{action}"))
            .ok_or_else(|| format!("{} is not set", settings::PUBLIC_BASE_URL))
    };
    let mut form = vec![
        ("To", to.to_owned()),
        ("From", from),
        ("Url", url("answer")?),
        ("Method", "POST".to_owned()),
        ("StatusCallback", url("status")?),
        ("StatusCallbackMethod", "POST".to_owned()),
    ];
    for event in ["initiated", "ringing", "answered", "completed"] {
        form.push(("StatusCallbackEvent", event.to_owned()));
    }
    let request = Request {
        method: "POST".into(),
        url: format!(
            "{}/2010-04-01/Accounts/{}/Calls.json",
            settings::api_base(),
            guest_util::percent_encode(&sid)
        ),
        headers: vec![
            (
                "content-type".into(),
                "application/x-www-form-urlencoded".into(),
            ),
            ("accept".into(), "application/json".into()),
            // The host fills in the account's credentials; the token never enters the sandbox.
            (
                "authorization".into(),
                format!("{{{{basic:{ACCOUNT_SID}:{AUTH_TOKEN}}}}}"),
            ),
        ],
        body: guest_util::form_encode(&form).into_bytes(),
        timeout_ms: None,
    };
    let response =
        outbound_http::send(&request).map_err(|e| format!("the call could not be placed: {e}"))?;
    let answer: Value = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
    match (response.status, answer["sid"].as_str()) {
        (200..=299, Some(sid)) => Ok(sid.to_owned()),
        (status, _) => Err(format!(
            "the provider refused the call ({status}{}): {}",
            answer["code"]
                .as_u64()
                .map(|c| format!(", code {c}"))
                .unwrap_or_default(),
            answer["message"].as_str().unwrap_or("no message")
        )),
    }
}

fn list(args: &Value) -> Result<Value, String> {
    let wanted = args["status"].as_str().unwrap_or("all");
    if !STATUSES.contains(&wanted) {
        return Err(format!("`status` must be one of {}", STATUSES.join(", ")));
    }
    let calls: Vec<Value> = calls::recent()?
        .iter()
        .filter(|c| wanted == "all" || calls::outcome(c).0 == wanted)
        .take(MAX_LISTED)
        .map(calls::summary)
        .collect();
    Ok(json!({ "calls": calls }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(to: &str, when: &str, party: Value) -> Value {
        json!({"venue_name": "Chez Nous", "to_number": to, "reservation_datetime": when, "party_size": party})
    }

    #[test]
    fn checks_what_the_model_asks_for() {
        let ok = reservation(&args("+14155550123", "2099-11-28T19:30", json!(4))).unwrap();
        assert_eq!(
            (ok.when.hour(), ok.party_size, ok.notes.as_str()),
            (19, 4, "")
        );
        for (to, when, party, problem) in [
            ("4155550123", "2099-11-28T19:30", json!(4), "E.164"),
            ("+0155550123", "2099-11-28T19:30", json!(4), "E.164"),
            ("+14155550123", "next friday", json!(4), "local date"),
            ("+14155550123", "2001-01-01T19:30", json!(4), "past"),
            ("+14155550123", "2099-11-28T19:30", json!(0), "party_size"),
            ("+14155550123", "2099-11-28T19:30", json!(2.5), "party_size"),
        ] {
            let refused = reservation(&args(to, when, party)).err().unwrap();
            assert!(refused.contains(problem), "{to} {when}: {refused}");
        }
        let mut no_venue = args("+14155550123", "2099-11-28T19:30", json!(2));
        no_venue["venue_name"] = json!("  ");
        assert!(reservation(&no_venue).is_err());
    }

    #[test]
    fn specs_fit_the_hosts_bounds() {
        for spec in specs() {
            assert!(spec.description.len() <= 1_024);
            assert!(spec.parameters.to_string().len() <= 8 << 10);
        }
    }
}
