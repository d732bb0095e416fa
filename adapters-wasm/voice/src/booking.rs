//! The calendar entry of a confirmed booking, written from a job through the calendar
//! adapter's `create_calendar_event` when that tool is offered (the calendar adapter offers it
//! only while writes are allowed, and checks again when it runs).

use jiff::ToSpan;
use jiff::civil::DateTime;
use serde_json::{Value, json};

use crate::calls;
use crate::service::adapter::tools;

const CREATE: &str = "create_calendar_event";
/// How long a booked table is put in the calendar for.
const BOOKING_HOURS: i64 = 2;

pub fn run(payload: &[u8]) -> Result<(), String> {
    let n: u64 = std::str::from_utf8(payload)
        .ok()
        .and_then(|p| p.parse().ok())
        .ok_or("a booking job without a call number")?;
    let call = calls::load(n)?.ok_or_else(|| format!("call {n} is gone"))?;
    // A job runs again after a crash: one entry per booking.
    if call.booking.is_some() || calls::outcome(&call).0 != "confirmed" {
        return Ok(());
    }
    let booking = match tools::list().iter().any(|t| t.name == CREATE) {
        false => json!({
            "status": "skipped",
            "reason": format!("{CREATE} is not available (no calendar configured, or calendar writes are off)"),
        }),
        true => match tools::invoke(CREATE, &entry(&call.request)?.to_string()) {
            Ok(created) => json!({
                "status": "created",
                "event": serde_json::from_str::<Value>(&created).unwrap_or(json!(created)),
            }),
            Err(e) => json!({ "status": "failed", "error": e }),
        },
    };
    calls::save_booking(n, &booking)
}

/// The event: the reservation's local time (read in the calendar's zone) for two hours.
fn entry(request: &Value) -> Result<Value, String> {
    let start: DateTime = request["reservation_datetime"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .ok_or("the call has no reservation time")?;
    let end = start
        .checked_add(BOOKING_HOURS.hours())
        .map_err(|e| e.to_string())?;
    let venue = request["venue_name"].as_str().unwrap_or("the venue");
    let party = request["party_size"].as_u64().unwrap_or(1);
    let mut description = format!("Table for {party}, booked by phone.");
    if let Some(notes) = request["notes"].as_str().filter(|n| !n.is_empty()) {
        description.push_str("\nNotes: ");
        description.push_str(notes);
    }
    Ok(json!({
        "summary": format!("Table for {party} at {venue}"),
        "start": start.strftime("%Y-%m-%dT%H:%M").to_string(),
        "end": end.strftime("%Y-%m-%dT%H:%M").to_string(),
        "location": venue,
        "description": description,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_booking_is_two_hours_at_the_venue() {
        let request = json!({"venue_name": "Chez Nous", "party_size": 4, "reservation_datetime": "2026-12-31T23:00", "notes": "Name: Ana"});
        let event = entry(&request).unwrap();
        assert_eq!(event["start"], "2026-12-31T23:00");
        assert_eq!(event["end"], "2027-01-01T01:00");
        assert_eq!(event["summary"], "Table for 4 at Chez Nous");
        assert!(
            event["description"]
                .as_str()
                .unwrap()
                .ends_with("Notes: Name: Ana")
        );
    }
}
