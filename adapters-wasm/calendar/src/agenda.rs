//! One day's agenda: the instances of iCalendar events (recurrences expanded, exceptions and
//! overridden instances applied) or of the Google API's events that touch a day in the
//! configured zone, as the list tool shows them.

use std::collections::HashSet;

use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, ToSpan};
use serde_json::{Value, json};

use crate::ical::{self, Event, Length, When};
use crate::recur::{Rule, Until};

/// Events listed at most; a day with more says it was cut.
pub const MAX_LISTED: usize = 100;
/// Characters of a description shown.
const MAX_DESCRIPTION_CHARS: usize = 500;

/// A day in a zone, and the instants it spans.
pub struct Day {
    pub date: Date,
    pub zone: TimeZone,
    pub start: Timestamp,
    pub end: Timestamp,
}

impl Day {
    pub fn new(date: Date, zone: TimeZone) -> Result<Self, String> {
        let instant = |d: Date| {
            d.to_zoned(zone.clone())
                .map(|z| z.timestamp())
                .map_err(|e| format!("{d} has no start in {}: {e}", zone_name(&zone)))
        };
        let next = date.tomorrow().map_err(|e| e.to_string())?;
        Ok(Self {
            start: instant(date)?,
            end: instant(next)?,
            date,
            zone,
        })
    }

    /// Today where `zone` is.
    pub fn today(zone: TimeZone) -> Result<Self, String> {
        let date = Timestamp::now().to_zoned(zone.clone()).date();
        Self::new(date, zone)
    }
}

pub fn zone_name(zone: &TimeZone) -> &str {
    zone.iana_name().unwrap_or("UTC")
}

/// When an instance happens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Span {
    /// Whole days, `last` included.
    AllDay {
        first: Date,
        last: Date,
    },
    Timed {
        start: Timestamp,
        end: Timestamp,
    },
}

impl Span {
    fn touches(&self, day: &Day) -> bool {
        match self {
            Self::AllDay { first, last } => *first <= day.date && day.date <= *last,
            // A zero-length event counts on the day it happens.
            Self::Timed { start, end } => {
                *start < day.end && (*end > day.start || *start >= day.start)
            }
        }
    }

    /// All-day events first (the earliest begun first), then by start.
    fn sort_key(&self, day: &Day) -> (bool, Date, Timestamp) {
        match self {
            Self::AllDay { first, .. } => (false, *first, day.start),
            Self::Timed { start, .. } => (true, day.date, *start),
        }
    }
}

/// One instance on the day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Occurrence {
    pub summary: String,
    pub description: String,
    pub location: String,
    pub calendar: String,
    pub span: Span,
    pub recurring: bool,
}

/// The day's instances of one calendar object's events (a master, its overrides).
pub fn occurrences(
    events: &[Event],
    day: &Day,
    calendar: &str,
    warnings: &mut Vec<String>,
) -> Vec<Occurrence> {
    let overrides: Vec<&Event> = events
        .iter()
        .filter(|e| e.recurrence_id.is_some())
        .collect();
    let mut out = Vec::new();
    for event in events {
        let replaced: Vec<&When> = match &event.recurrence_id {
            // An override is an instance of its own (unless it cancels one).
            Some(_) if event.cancelled => continue,
            Some(_) => Vec::new(),
            None if event.cancelled => continue,
            None => overrides
                .iter()
                .filter(|o| o.uid == event.uid)
                .filter_map(|o| o.recurrence_id.as_ref())
                .collect(),
        };
        let recurring = event.rrule.is_some()
            || !event.rdates.is_empty()
            || !replaced.is_empty()
            || event.recurrence_id.is_some();
        for start in instances(event, day, warnings) {
            let excluded = event
                .exdates
                .iter()
                .chain(replaced.iter().copied())
                .any(|x| x.same_instance(&start, &day.zone));
            if excluded {
                continue;
            }
            let Some(span) = span(event, &start, &day.zone) else {
                continue;
            };
            if span.touches(day) {
                out.push(Occurrence {
                    summary: event.summary.clone(),
                    description: event.description.clone(),
                    location: event.location.clone(),
                    calendar: calendar.to_owned(),
                    span,
                    recurring,
                });
            }
        }
    }
    out
}

/// Instance starts up to a day after `day` (the rule's own zone may be ahead of the day's).
fn instances(event: &Event, day: &Day, warnings: &mut Vec<String>) -> Vec<When> {
    let mut starts = vec![event.start.clone()];
    if let (Some(text), None) = (&event.rrule, &event.recurrence_id) {
        match Rule::parse(text) {
            Ok(rule) => {
                let last = day.date.checked_add(1.day()).unwrap_or(day.date);
                let until = until(&rule, &day.zone);
                let civil = rule.expand(event.start.civil(), last, |i| until(&event.start.at(i)));
                starts = civil.into_iter().map(|dt| event.start.at(dt)).collect();
            }
            Err(e) => warnings.push(format!(
                "{:?} repeats by a rule this adapter cannot expand ({e}); only its first date is listed",
                event.summary
            )),
        }
    }
    starts.extend(event.rdates.iter().cloned());
    // An RDATE may repeat a rule's instance.
    let mut seen = HashSet::new();
    starts.retain(|s| seen.insert(s.timestamp(&day.zone).map_or(s.civil(), civil_utc)));
    starts
}

fn civil_utc(ts: Timestamp) -> DateTime {
    ts.to_zoned(TimeZone::UTC).datetime()
}

/// Whether an instance starts after the rule's UNTIL (a date, a UTC time, or a floating time
/// for a floating start).
fn until<'a>(rule: &Rule, local: &'a TimeZone) -> impl Fn(&When) -> bool + 'a {
    let limit = match &rule.until {
        Until::Forever => None,
        Until::Value(text) => ical::value(text),
    };
    move |instance: &When| match &limit {
        None => false,
        Some(When::Date(last)) => instance.civil().date() > *last,
        Some(limit) => match (instance.timestamp(local), limit.timestamp(local)) {
            (Some(i), Some(l)) => i > l,
            _ => instance.civil().date() > limit.civil().date(),
        },
    }
}

/// The span of the instance starting at `start`: the event's length from DTEND or DURATION
/// (a day for a date without either; nothing for a time without either).
fn span(event: &Event, start: &When, local: &TimeZone) -> Option<Span> {
    let length = event.duration.or_else(|| {
        let end = event.end.as_ref()?;
        match (&event.start, end) {
            (When::Date(s), When::Date(e)) => Some(Length::Days((*e - *s).get_days().into())),
            (s, e) => Some(Length::Exact(
                e.timestamp(local)?.duration_since(s.timestamp(local)?),
            )),
        }
    });
    match start {
        When::Date(first) => {
            let days = match length {
                Some(Length::Days(d)) => d,
                Some(Length::Exact(d)) => d.as_secs().div_euclid(86_400),
                None => 1,
            };
            let last = first.checked_add((days.max(1) - 1).days()).ok()?;
            Some(Span::AllDay {
                first: *first,
                last,
            })
        }
        timed => {
            let start = timed.timestamp(local)?;
            let length = match length {
                Some(Length::Exact(d)) => d,
                Some(Length::Days(d)) => SignedDuration::from_hours(24 * d),
                None => SignedDuration::ZERO,
            };
            let end = start.checked_add(length.max(SignedDuration::ZERO)).ok()?;
            Some(Span::Timed { start, end })
        }
    }
}

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// What the list tool answers: the day's instances in order (all-day ones first), in the
/// day's zone.
pub fn answer(day: &Day, mut found: Vec<Occurrence>, warnings: &[String]) -> Value {
    found.sort_by_key(|o| o.span.sort_key(day));
    let total = found.len();
    let local = |ts: &Timestamp| {
        ts.to_zoned(day.zone.clone())
            .strftime("%Y-%m-%dT%H:%M:%S%:z")
            .to_string()
    };
    let events: Vec<Value> = found
        .iter()
        .take(MAX_LISTED)
        .map(|o| {
            let (start, end, all_day) = match &o.span {
                Span::AllDay { first, last } => (first.to_string(), last.to_string(), true),
                Span::Timed { start, end } => (local(start), local(end), false),
            };
            let mut event = json!({
                "summary": o.summary,
                "start": start,
                "end": end,
                "all_day": all_day,
                "recurring": o.recurring,
                "calendar": o.calendar,
            });
            if !o.location.is_empty() {
                event["location"] = json!(o.location);
            }
            if !o.description.is_empty() {
                event["description"] = json!(cut(&o.description, MAX_DESCRIPTION_CHARS));
            }
            event
        })
        .collect();
    let mut answer = json!({
        "date": day.date.to_string(),
        "time_zone": zone_name(&day.zone),
        "events": events,
    });
    if total > MAX_LISTED {
        answer["truncated"] = json!(format!("{total} events; the first {MAX_LISTED} are listed"));
    }
    if !warnings.is_empty() {
        answer["warnings"] = json!(warnings);
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ical;
    use jiff::civil::date;

    fn day(y: i16, m: i8, d: i8, zone: &str) -> Day {
        Day::new(date(y, m, d), TimeZone::get(zone).unwrap()).unwrap()
    }

    fn on(day: &Day, object: &str) -> (Vec<Occurrence>, Vec<String>) {
        let mut warnings = Vec::new();
        let parsed = ical::parse(object);
        warnings.extend(parsed.warnings);
        let found = occurrences(&parsed.events, day, "Work", &mut warnings);
        (found, warnings)
    }

    fn vevent(lines: &str) -> String {
        format!(
            "BEGIN:VCALENDAR\nBEGIN:VEVENT\nUID:u1\nSUMMARY:Thing\n{lines}\nEND:VEVENT\nEND:VCALENDAR\n"
        )
    }

    fn times(found: &[Occurrence], zone: &str) -> Vec<String> {
        let zone = TimeZone::get(zone).unwrap();
        found
            .iter()
            .map(|o| match &o.span {
                Span::Timed { start, end } => format!(
                    "{}-{}",
                    start.to_zoned(zone.clone()).strftime("%H:%M"),
                    end.to_zoned(zone.clone()).strftime("%H:%M")
                ),
                Span::AllDay { first, last } => format!("{first}..{last}"),
            })
            .collect()
    }

    #[test]
    fn a_weekly_meeting_keeps_its_local_time_across_daylight_saving() {
        // Weekly on Mondays at 9:00 New York time since the summer; on a November Monday it is
        // 15:00 in Berlin (both zones have left summer time), in July it was 15:00 too.
        let object = vevent(
            "DTSTART;TZID=America/New_York:20260706T090000\nDTEND;TZID=America/New_York:20260706T093000\nRRULE:FREQ=WEEKLY;BYDAY=MO",
        );
        let monday = day(2026, 11, 23, "Europe/Berlin");
        let (found, warnings) = on(&monday, &object);
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(times(&found, "Europe/Berlin"), ["15:00-15:30"]);
        assert!(found[0].recurring);
        // Between the two switch dates (Berlin on winter time, New York still on summer time)
        // the same meeting is at 14:00 in Berlin.
        let (found, _) = on(&day(2026, 10, 26, "Europe/Berlin"), &object);
        assert_eq!(times(&found, "Europe/Berlin"), ["14:00-14:30"]);
        let (found, _) = on(&day(2026, 11, 24, "Europe/Berlin"), &object);
        assert!(found.is_empty());
    }

    #[test]
    fn exceptions_and_moved_instances() {
        let object = "BEGIN:VCALENDAR\nBEGIN:VEVENT\nUID:s\nSUMMARY:Stand-up\n\
            DTSTART:20261116T080000Z\nDURATION:PT15M\nRRULE:FREQ=DAILY\n\
            EXDATE:20261124T080000Z\nEND:VEVENT\n\
            BEGIN:VEVENT\nUID:s\nSUMMARY:Stand-up (late)\nRECURRENCE-ID:20261123T080000Z\n\
            DTSTART:20261123T100000Z\nDTEND:20261123T101500Z\nEND:VEVENT\n\
            BEGIN:VEVENT\nUID:s\nRECURRENCE-ID:20261125T080000Z\nDTSTART:20261125T080000Z\n\
            STATUS:CANCELLED\nEND:VEVENT\nEND:VCALENDAR\n";
        let (found, _) = on(&day(2026, 11, 22, "UTC"), object);
        assert_eq!(times(&found, "UTC"), ["08:00-08:15"]);
        let (found, _) = on(&day(2026, 11, 23, "UTC"), object);
        assert_eq!(times(&found, "UTC"), ["10:00-10:15"], "moved, not doubled");
        assert_eq!(found[0].summary, "Stand-up (late)");
        let (found, _) = on(&day(2026, 11, 24, "UTC"), object);
        assert!(found.is_empty(), "excluded by EXDATE");
        let (found, _) = on(&day(2026, 11, 25, "UTC"), object);
        assert!(found.is_empty(), "cancelled instance");
    }

    #[test]
    fn all_day_events_span_their_days() {
        let trip = vevent("DTSTART;VALUE=DATE:20261122\nDTEND;VALUE=DATE:20261125");
        for (d, expected) in [(21, 0), (22, 1), (24, 1), (25, 0)] {
            let (found, _) = on(&day(2026, 11, d, "Asia/Tokyo"), &trip);
            assert_eq!(found.len(), expected, "November {d}");
        }
        let (found, _) = on(&day(2026, 11, 23, "Asia/Tokyo"), &trip);
        assert_eq!(times(&found, "UTC"), ["2026-11-22..2026-11-24"]);
        // A birthday: yearly, all day, no DTEND.
        let birthday = vevent("DTSTART;VALUE=DATE:19900223\nRRULE:FREQ=YEARLY");
        let (found, _) = on(&day(2026, 2, 23, "UTC"), &birthday);
        assert_eq!(times(&found, "UTC"), ["2026-02-23..2026-02-23"]);
    }

    #[test]
    fn the_day_is_the_configured_zones_day() {
        // 23:30 UTC on the 22nd is the 23rd in Berlin; floating times are Berlin times.
        let late = vevent("DTSTART:20261122T233000Z\nDTEND:20261123T003000Z");
        let (found, _) = on(&day(2026, 11, 23, "Europe/Berlin"), &late);
        assert_eq!(times(&found, "Europe/Berlin"), ["00:30-01:30"]);
        let (found, _) = on(&day(2026, 11, 22, "UTC"), &late);
        assert_eq!(found.len(), 1);
        let floating = vevent("DTSTART:20261123T090000\nDTEND:20261123T100000");
        let (found, _) = on(&day(2026, 11, 23, "Europe/Berlin"), &floating);
        assert_eq!(times(&found, "UTC"), ["08:00-09:00"]);
    }

    #[test]
    fn until_count_and_unsupported_rules() {
        let ended = vevent("DTSTART:20261101T090000Z\nRRULE:FREQ=DAILY;UNTIL=20261122T090000Z");
        assert_eq!(on(&day(2026, 11, 22, "UTC"), &ended).0.len(), 1);
        assert!(on(&day(2026, 11, 23, "UTC"), &ended).0.is_empty());
        let dated = vevent("DTSTART;VALUE=DATE:20261101\nRRULE:FREQ=WEEKLY;UNTIL=20261115");
        assert_eq!(on(&day(2026, 11, 15, "UTC"), &dated).0.len(), 1);
        assert!(on(&day(2026, 11, 22, "UTC"), &dated).0.is_empty());
        let counted = vevent("DTSTART:20261120T090000Z\nRRULE:FREQ=DAILY;COUNT=3");
        assert_eq!(on(&day(2026, 11, 22, "UTC"), &counted).0.len(), 1);
        assert!(on(&day(2026, 11, 23, "UTC"), &counted).0.is_empty());
        let odd = vevent("DTSTART:20261123T090000Z\nRRULE:FREQ=MONTHLY;BYDAY=MO;BYSETPOS=-1");
        let (found, warnings) = on(&day(2026, 11, 23, "UTC"), &odd);
        assert_eq!(found.len(), 1, "the first date still shows");
        assert!(warnings[0].contains("BYSETPOS"), "{warnings:?}");
    }

    #[test]
    fn answers_in_order_in_the_local_zone() {
        let today = day(2026, 11, 23, "Europe/Berlin");
        let timed = |h: i8| Occurrence {
            summary: format!("at {h}"),
            description: "x".repeat(600),
            location: String::new(),
            calendar: "Work".into(),
            span: Span::Timed {
                start: date(2026, 11, 23)
                    .at(h, 0, 0, 0)
                    .to_zoned(TimeZone::UTC)
                    .unwrap()
                    .timestamp(),
                end: date(2026, 11, 23)
                    .at(h + 1, 0, 0, 0)
                    .to_zoned(TimeZone::UTC)
                    .unwrap()
                    .timestamp(),
            },
            recurring: false,
        };
        let mut all_day = timed(0);
        all_day.summary = "holiday".into();
        all_day.span = Span::AllDay {
            first: today.date,
            last: today.date,
        };
        let answer = answer(&today, vec![timed(15), timed(8), all_day], &[]);
        assert_eq!(answer["time_zone"], "Europe/Berlin");
        let events = answer["events"].as_array().unwrap();
        let order: Vec<&str> = events
            .iter()
            .map(|e| e["summary"].as_str().unwrap())
            .collect();
        assert_eq!(order, ["holiday", "at 8", "at 15"]);
        assert_eq!(events[1]["start"], "2026-11-23T09:00:00+01:00");
        assert_eq!(events[0]["start"], "2026-11-23");
        assert!(events[1]["description"].as_str().unwrap().chars().count() <= 501);
        assert!(events[1].get("location").is_none());
    }
}
