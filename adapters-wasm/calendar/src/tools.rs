//! The two tools: `list_calendar_events_today` and `create_calendar_event` (offered only when
//! writes are allowed, and refused at every call once they are not).

use std::hash::{BuildHasher, Hasher};

use jiff::Timestamp;
use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;
use serde_json::{Value, json};

use crate::agenda::{self, Day, Span, zone_name};
use crate::caldav;
use crate::google::{self, Google};
use crate::ical::{self, NewEvent};
use crate::settings::{self, Backend, WRITE_ALLOWED};

pub const LIST: &str = "list_calendar_events_today";
pub const CREATE: &str = "create_calendar_event";

const MAX_SUMMARY_CHARS: usize = 200;
const MAX_LOCATION_CHARS: usize = 500;
const MAX_DESCRIPTION_CHARS: usize = 4_000;
/// The longest event it creates.
const MAX_DAYS: i64 = 366;

pub struct Spec {
    pub name: &'static str,
    pub description: &'static str,
    pub parameters: Value,
}

pub fn list_spec() -> Spec {
    Spec {
        name: LIST,
        description: "Lists today's calendar events (today in the configured time zone), with \
            recurring and all-day events included, in order. Times are local times with their \
            UTC offset; all-day events give dates.",
        parameters: json!({
            "type": "object",
            "properties": {
                "calendar": {
                    "type": "string",
                    "maxLength": 200,
                    "description": "A calendar's name; without it, the default calendar (or every calendar)."
                }
            },
            "additionalProperties": false
        }),
    }
}

pub fn create_spec() -> Spec {
    Spec {
        name: CREATE,
        description: "Creates a calendar event. `start` and `end` are ISO 8601: a date-time with \
            an offset (2026-11-23T19:00:00+01:00), a local date-time read in the configured \
            time zone (2026-11-23T19:00), or two dates for an all-day event (`end` is its last \
            day).",
        parameters: json!({
            "type": "object",
            "properties": {
                "summary": {"type": "string", "minLength": 1, "maxLength": MAX_SUMMARY_CHARS},
                "start": {"type": "string", "minLength": 10, "maxLength": 40},
                "end": {"type": "string", "minLength": 10, "maxLength": 40},
                "description": {"type": "string", "maxLength": MAX_DESCRIPTION_CHARS},
                "location": {"type": "string", "maxLength": MAX_LOCATION_CHARS},
                "calendar": {
                    "type": "string",
                    "maxLength": 200,
                    "description": "A calendar's name; without it, the default calendar."
                }
            },
            "required": ["summary", "start", "end"],
            "additionalProperties": false
        }),
    }
}

/// Runs a tool with the model's arguments.
pub fn call(name: &str, args: &str) -> Result<String, String> {
    let args: Value =
        serde_json::from_str(args).map_err(|e| format!("the arguments are not JSON: {e}"))?;
    let answer = match name {
        LIST => list(&args)?,
        CREATE => create(&args)?,
        other => return Err(format!("the calendar adapter has no tool {other:?}")),
    };
    Ok(answer.to_string())
}

fn text<'a>(args: &'a Value, key: &str, max: usize) -> Result<&'a str, String> {
    let value = args[key].as_str().unwrap_or_default().trim();
    match value.chars().count() > max {
        true => Err(format!("`{key}` is longer than {max} characters")),
        false => Ok(value),
    }
}

/// The calendar the call names, else the configured default.
fn wanted(args: &Value) -> Result<Option<String>, String> {
    let named = text(args, "calendar", 200)?;
    Ok(match named.is_empty() {
        true => settings::default_calendar(),
        false => Some(named.to_owned()),
    })
}

fn list(args: &Value) -> Result<Value, String> {
    let wanted = wanted(args)?;
    let day = Day::today(settings::zone()?)?;
    let mut warnings = Vec::new();
    let found = match settings::backend()? {
        Backend::CalDav { url } => {
            let mut found = Vec::new();
            for calendar in caldav::choose(caldav::calendars(&url)?, wanted.as_deref())? {
                found.extend(caldav::day(&calendar, &day, &mut warnings)?);
            }
            found
        }
        Backend::Google {
            api_base,
            token_url,
        } => {
            let calendar = wanted.unwrap_or_else(|| "primary".into());
            Google {
                api_base,
                token_url,
            }
            .day(&calendar, &day)?
        }
    };
    warnings.sort();
    warnings.dedup();
    Ok(agenda::answer(&day, found, &warnings))
}

/// One end of a new event: an instant, or a date.
enum End {
    At(Timestamp),
    On(Date),
}

fn end(text: &str, key: &str, zone: &TimeZone) -> Result<End, String> {
    // A bare date would also read as its midnight.
    let date_only = !text.contains(['T', 't', ' ']);
    if date_only && let Ok(date) = text.parse::<Date>() {
        return Ok(End::On(date));
    }
    if let Ok(ts) = text.parse::<Timestamp>() {
        return Ok(End::At(ts));
    }
    if let Ok(dt) = text.parse::<DateTime>() {
        return zone
            .to_ambiguous_zoned(dt)
            .compatible()
            .map(|z| End::At(z.timestamp()))
            .map_err(|e| {
                format!(
                    "`{key}` {text:?} does not exist in {}: {e}",
                    zone_name(zone)
                )
            });
    }
    Err(format!(
        "`{key}` {text:?} is not an ISO 8601 date or date-time (2026-11-23T19:00:00+01:00, \
         2026-11-23T19:00 or 2026-11-23)"
    ))
}

/// The span `start` and `end` describe; both dates or both times, in order, at most a year.
pub fn span(start: &str, end_text: &str, zone: &TimeZone) -> Result<Span, String> {
    let span = match (end(start, "start", zone)?, end(end_text, "end", zone)?) {
        (End::At(start), End::At(end)) if end > start => Span::Timed { start, end },
        (End::On(first), End::On(last)) if last >= first => Span::AllDay { first, last },
        (End::At(_), End::At(_)) => return Err("`end` must be after `start`".into()),
        (End::On(_), End::On(_)) => return Err("`end` must not be before `start`".into()),
        _ => {
            return Err(
                "`start` and `end` must both be dates (all-day) or both be date-times".into(),
            );
        }
    };
    let days = match &span {
        Span::Timed { start, end } => end.duration_since(*start).as_hours() / 24,
        Span::AllDay { first, last } => i64::from((*last - *first).get_days()),
    };
    match days >= MAX_DAYS {
        true => Err(format!("an event may last at most {MAX_DAYS} days")),
        false => Ok(span),
    }
}

/// 128 random bits from the host's WASI random source, as hex.
fn random_id() -> String {
    let half = || {
        std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
    };
    format!("{:016x}{:016x}", half(), half())
}

fn create(args: &Value) -> Result<Value, String> {
    // Re-checked at every call: the operator may have turned writes off since the tool was
    // offered.
    if !settings::write_allowed() {
        return Err(format!(
            "creating events is turned off: the operator has to set {WRITE_ALLOWED}=true"
        ));
    }
    let summary = text(args, "summary", MAX_SUMMARY_CHARS)?;
    if summary.is_empty() {
        return Err("`summary` is required".into());
    }
    let description = text(args, "description", MAX_DESCRIPTION_CHARS)?;
    let location = text(args, "location", MAX_LOCATION_CHARS)?;
    let zone = settings::zone()?;
    let span = span(text(args, "start", 40)?, text(args, "end", 40)?, &zone)?;
    let wanted = wanted(args)?;
    let (calendar, stored) = match settings::backend()? {
        Backend::CalDav { url } => {
            let calendar = caldav::choose(caldav::calendars(&url)?, wanted.as_deref())?
                .into_iter()
                .next()
                .ok_or("no calendar to write to")?;
            let uid = format!("{}@service-runtime", random_id());
            let ics = ical::write(&NewEvent {
                uid: &uid,
                stamp: Timestamp::now(),
                summary,
                description,
                location,
                span: &span,
            });
            let url = caldav::create(&calendar, &uid, &ics)?;
            (calendar.name, json!({ "id": uid, "url": url }))
        }
        Backend::Google {
            api_base,
            token_url,
        } => {
            let calendar = wanted.unwrap_or_else(|| "primary".into());
            let body = google::event_body(summary, description, location, &span, zone_name(&zone));
            let created = Google {
                api_base,
                token_url,
            }
            .insert(&calendar, &body)?;
            (calendar, created)
        }
    };
    let local = |ts: &Timestamp| {
        ts.to_zoned(zone.clone())
            .strftime("%Y-%m-%dT%H:%M:%S%:z")
            .to_string()
    };
    let (start, end, all_day) = match &span {
        Span::AllDay { first, last } => (first.to_string(), last.to_string(), true),
        Span::Timed { start, end } => (local(start), local(end), false),
    };
    Ok(json!({
        "created": {
            "summary": summary,
            "start": start,
            "end": end,
            "all_day": all_day,
            "location": location,
            "calendar": calendar,
        },
        "event": stored,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_new_event_times() {
        let paris = TimeZone::get("Europe/Paris").unwrap();
        let Span::Timed { start, end } =
            span("2026-11-23T19:00", "2026-11-23T21:00:00+01:00", &paris).unwrap()
        else {
            panic!()
        };
        assert_eq!(start.to_string(), "2026-11-23T18:00:00Z");
        assert_eq!(end.duration_since(start).as_hours(), 2);
        assert_eq!(
            span("2026-11-23", "2026-11-24", &paris).unwrap(),
            Span::AllDay {
                first: "2026-11-23".parse().unwrap(),
                last: "2026-11-24".parse().unwrap()
            }
        );
        for (start, end, problem) in [
            ("2026-11-23T19:00Z", "2026-11-23T18:00Z", "after"),
            ("2026-11-23", "2026-11-23T18:00", "both"),
            ("tomorrow", "2026-11-23", "ISO 8601"),
            ("2026-11-24", "2026-11-23", "before"),
            ("2026-01-01", "2027-06-01", "at most"),
        ] {
            let refused = span(start, end, &paris).unwrap_err();
            assert!(refused.contains(problem), "{start} {end}: {refused}");
        }
    }

    #[test]
    fn specs_are_json_schemas_within_the_hosts_bounds() {
        for spec in [list_spec(), create_spec()] {
            assert!(spec.description.len() <= 1_024);
            assert!(spec.parameters.to_string().len() <= 8 << 10);
            assert_eq!(spec.parameters["type"], "object");
        }
        assert_ne!(random_id(), random_id());
    }
}
