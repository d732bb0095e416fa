//! iCalendar (RFC 5545) as far as events need it: unfolded content lines with parameters, text
//! escapes, the VEVENTs of a calendar object with their dates, and writing one event.

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

/// A date or date-time value as written.
#[derive(Debug, Clone)]
pub enum When {
    /// A whole day (`VALUE=DATE`).
    Date(Date),
    /// No zone: the reader's local time (`SERVICE_TZ` here).
    Floating(DateTime),
    Utc(DateTime),
    /// Local time in the IANA zone its `TZID` names.
    Zoned(DateTime, TimeZone),
}

impl When {
    /// The civil date-time as written (midnight for a date).
    pub fn civil(&self) -> DateTime {
        match self {
            Self::Date(date) => date.to_datetime(Time::midnight()),
            Self::Floating(dt) | Self::Utc(dt) | Self::Zoned(dt, _) => *dt,
        }
    }

    /// The same kind of value at another civil date-time (an instance of a recurrence).
    pub fn at(&self, dt: DateTime) -> Self {
        match self {
            Self::Date(_) => Self::Date(dt.date()),
            Self::Floating(_) => Self::Floating(dt),
            Self::Utc(_) => Self::Utc(dt),
            Self::Zoned(_, tz) => Self::Zoned(dt, tz.clone()),
        }
    }

    /// The instant, reading floating times in `local`; `None` for a date.
    pub fn timestamp(&self, local: &TimeZone) -> Option<Timestamp> {
        let (dt, tz) = match self {
            Self::Date(_) => return None,
            Self::Floating(dt) => (dt, local),
            Self::Utc(dt) => (dt, &TimeZone::UTC),
            Self::Zoned(dt, tz) => (dt, tz),
        };
        // A time in a daylight-saving gap or fold is read as RFC 5545 says: the earlier offset.
        tz.to_ambiguous_zoned(*dt)
            .compatible()
            .ok()
            .map(|z| z.timestamp())
    }

    /// Whether two values name the same instance (an EXDATE or RECURRENCE-ID against an
    /// instance): same day for dates, same instant otherwise.
    pub fn same_instance(&self, other: &When, local: &TimeZone) -> bool {
        match (self, other) {
            (Self::Date(a), b) | (b, Self::Date(a)) => *a == b.civil().date(),
            (a, b) => a.timestamp(local).is_some() && a.timestamp(local) == b.timestamp(local),
        }
    }
}

/// How long an event lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Length {
    Days(i64),
    Exact(SignedDuration),
}

/// One VEVENT.
#[derive(Debug, Clone)]
pub struct Event {
    pub uid: String,
    pub summary: String,
    pub description: String,
    pub location: String,
    pub start: When,
    pub end: Option<When>,
    pub duration: Option<Length>,
    pub rrule: Option<String>,
    pub exdates: Vec<When>,
    pub rdates: Vec<When>,
    /// Set on an instance that replaces one of a recurring event.
    pub recurrence_id: Option<When>,
    pub cancelled: bool,
}

/// The events of one calendar object, and what could not be read faithfully.
#[derive(Debug, Default)]
pub struct Parsed {
    pub events: Vec<Event>,
    pub warnings: Vec<String>,
}

/// One content line: `NAME;PARAM=value:value`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Property {
    name: String,
    params: Vec<(String, String)>,
    value: String,
}

impl Property {
    fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Joins folded lines (a line starting with a space or tab continues the one before).
fn unfold(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        match (line.strip_prefix([' ', '\t']), lines.last_mut()) {
            (Some(rest), Some(last)) => last.push_str(rest),
            _ if line.is_empty() => {}
            _ => lines.push(line.to_owned()),
        }
    }
    lines
}

/// Splits a content line; parameter values may be quoted (and then hold `:` and `;`).
fn property(line: &str) -> Option<Property> {
    let name_end = line.find([';', ':'])?;
    let name = line[..name_end].to_ascii_uppercase();
    let mut rest = &line[name_end..];
    let mut params = Vec::new();
    while let Some(after) = rest.strip_prefix(';') {
        let eq = after.find('=')?;
        let key = after[..eq].to_ascii_uppercase();
        let value_part = &after[eq + 1..];
        let (value, tail) = match value_part.strip_prefix('"') {
            Some(quoted) => {
                let close = quoted.find('"')?;
                (&quoted[..close], &quoted[close + 1..])
            }
            None => {
                let end = value_part.find([';', ':']).unwrap_or(value_part.len());
                (&value_part[..end], &value_part[end..])
            }
        };
        params.push((key, value.to_owned()));
        rest = tail;
    }
    let value = rest.strip_prefix(':')?.to_owned();
    Some(Property {
        name,
        params,
        value,
    })
}

/// Undoes TEXT escapes (`\n`, `\,`, `\;`, `\\`).
pub fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n' | 'N') => out.push('\n'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// Escapes TEXT for a property value.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            ';' => out.push_str("\\;"),
            ',' => out.push_str("\\,"),
            '\n' => out.push_str("\\n"),
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

/// An IANA zone for a TZID. Some clients prefix the IANA name with a path of their own
/// (`/mozilla.org/20050126_1/Europe/Berlin`), so shorter and shorter tails are tried.
pub fn zone(tzid: &str) -> Option<TimeZone> {
    let mut name = tzid.trim();
    loop {
        if let Ok(tz) = TimeZone::get(name) {
            return Some(tz);
        }
        name = &name[name.find('/')? + 1..];
    }
}

fn number<T: std::str::FromStr>(text: &str, range: std::ops::Range<usize>) -> Option<T> {
    text.get(range)?.parse().ok()
}

/// `YYYYMMDD`.
pub fn parse_date(text: &str) -> Option<Date> {
    if text.len() != 8 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Date::new(
        number(text, 0..4)?,
        number(text, 4..6)?,
        number(text, 6..8)?,
    )
    .ok()
}

/// `YYYYMMDDTHHMMSS`, with `Z` when `utc`.
fn parse_date_time(text: &str) -> Option<(DateTime, bool)> {
    let (text, utc) = match text.strip_suffix(['Z', 'z']) {
        Some(text) => (text, true),
        None => (text, false),
    };
    let (date, time) = text.split_once(['T', 't'])?;
    if time.len() != 6 || !time.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // A leap second (60) is read as the last second of its minute.
    let second: i8 = number::<i8>(time, 4..6)?.min(59);
    let time = Time::new(number(time, 0..2)?, number(time, 2..4)?, second, 0).ok()?;
    Some((parse_date(date)?.to_datetime(time), utc))
}

/// A DATE or DATE-TIME value with its `TZID`; an unknown zone is read as floating and noted.
fn when(value: &str, tzid: Option<&str>, warnings: &mut Vec<String>) -> Option<When> {
    let value = value.trim();
    if let Some(date) = parse_date(value) {
        return Some(When::Date(date));
    }
    let (dt, utc) = parse_date_time(value)?;
    if utc {
        return Some(When::Utc(dt));
    }
    match tzid {
        None => Some(When::Floating(dt)),
        Some(tzid) => match zone(tzid) {
            Some(tz) => Some(When::Zoned(dt, tz)),
            None => {
                warnings.push(format!(
                    "time zone {tzid:?} is unknown; its times are read as local times"
                ));
                Some(When::Floating(dt))
            }
        },
    }
}

/// A DATE or DATE-TIME value without a zone parameter (UNTIL).
pub fn value(text: &str) -> Option<When> {
    when(text, None, &mut Vec::new())
}

/// An RFC 5545 DURATION (`P1D`, `PT1H30M`, `P2W`, `-PT15M`).
pub fn parse_duration(text: &str) -> Option<Length> {
    let text = text.trim();
    let (negative, text) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let body = text.strip_prefix('P')?;
    let (mut days, mut seconds, mut in_time, mut digits) = (0i64, 0i64, false, String::new());
    for c in body.chars() {
        match c {
            '0'..='9' => digits.push(c),
            'T' if !in_time && digits.is_empty() => in_time = true,
            'W' | 'D' | 'H' | 'M' | 'S' => {
                let n: i64 = digits.parse().ok()?;
                digits.clear();
                match (c, in_time) {
                    ('W', false) => days += 7 * n,
                    ('D', false) => days += n,
                    ('H', true) => seconds += 3600 * n,
                    ('M', true) => seconds += 60 * n,
                    ('S', true) => seconds += n,
                    _ => return None,
                }
            }
            _ => return None,
        }
    }
    if !digits.is_empty() {
        return None;
    }
    let sign = if negative { -1 } else { 1 };
    Some(match seconds {
        0 => Length::Days(sign * days),
        _ => Length::Exact(SignedDuration::from_secs(sign * (days * 86_400 + seconds))),
    })
}

/// Every date of an EXDATE or RDATE line (comma-separated).
fn dates(prop: &Property, warnings: &mut Vec<String>) -> Vec<When> {
    prop.value
        .split(',')
        .filter_map(|v| when(v, prop.param("TZID"), warnings))
        .collect()
}

/// Reads the VEVENTs of a calendar object (VTIMEZONE, VALARM and other components are
/// skipped; their properties never leak into an event).
pub fn parse(text: &str) -> Parsed {
    let mut parsed = Parsed::default();
    // Component nesting: properties belong to the innermost component only.
    let mut stack: Vec<String> = Vec::new();
    let mut props: Vec<Property> = Vec::new();
    for line in unfold(text) {
        let Some(prop) = property(&line) else {
            continue;
        };
        match prop.name.as_str() {
            "BEGIN" => {
                let component = prop.value.trim().to_ascii_uppercase();
                if component == "VEVENT" {
                    props.clear();
                }
                stack.push(component);
            }
            "END" => {
                let closed = stack.pop();
                if closed.as_deref() != Some("VEVENT") {
                    continue;
                }
                match event(&props, &mut parsed.warnings) {
                    Some(event) => parsed.events.push(event),
                    None => parsed
                        .warnings
                        .push("an event without a readable DTSTART was skipped".into()),
                }
            }
            _ if stack.last().map(String::as_str) == Some("VEVENT") => props.push(prop),
            _ => {}
        }
    }
    parsed
}

fn event(props: &[Property], warnings: &mut Vec<String>) -> Option<Event> {
    let first = |name: &str| props.iter().find(|p| p.name == name);
    let text = |name: &str| first(name).map(|p| unescape(&p.value)).unwrap_or_default();
    let date = |name: &str, warnings: &mut Vec<String>| {
        first(name).and_then(|p| when(&p.value, p.param("TZID"), warnings))
    };
    let start = date("DTSTART", warnings)?;
    let all = |name: &str, warnings: &mut Vec<String>| {
        props
            .iter()
            .filter(|p| p.name == name)
            .flat_map(|p| dates(p, warnings))
            .collect()
    };
    Some(Event {
        uid: text("UID"),
        summary: text("SUMMARY"),
        description: text("DESCRIPTION"),
        location: text("LOCATION"),
        end: date("DTEND", warnings),
        duration: first("DURATION").and_then(|p| parse_duration(&p.value)),
        rrule: first("RRULE").map(|p| p.value.trim().to_owned()),
        exdates: all("EXDATE", warnings),
        rdates: all("RDATE", warnings),
        recurrence_id: date("RECURRENCE-ID", warnings),
        cancelled: text("STATUS").eq_ignore_ascii_case("CANCELLED"),
        start,
    })
}

/// A new event to write.
pub struct NewEvent<'a> {
    pub uid: &'a str,
    pub stamp: Timestamp,
    pub summary: &'a str,
    pub description: &'a str,
    pub location: &'a str,
    pub span: &'a crate::agenda::Span,
}

fn utc_value(ts: Timestamp) -> String {
    ts.strftime("%Y%m%dT%H%M%SZ").to_string()
}

fn date_value(date: Date) -> String {
    date.strftime("%Y%m%d").to_string()
}

/// Folds a content line at 75 octets (never inside a character).
fn fold(line: &str, out: &mut String) {
    let mut width = 0;
    for c in line.chars() {
        if width + c.len_utf8() > 75 {
            out.push_str("\r\n ");
            width = 1;
        }
        out.push(c);
        width += c.len_utf8();
    }
    out.push_str("\r\n");
}

/// A VCALENDAR holding one VEVENT. Times are written in UTC, which needs no VTIMEZONE.
pub fn write(event: &NewEvent) -> String {
    use crate::agenda::Span;
    let mut lines = vec![
        "BEGIN:VCALENDAR".to_owned(),
        "VERSION:2.0".to_owned(),
        "PRODID:-//service-runtime//calendar adapter//EN".to_owned(),
        "CALSCALE:GREGORIAN".to_owned(),
        "BEGIN:VEVENT".to_owned(),
        format!("UID:{}", event.uid),
        format!("DTSTAMP:{}", utc_value(event.stamp)),
    ];
    match event.span {
        Span::AllDay { first, last } => {
            let end = last.tomorrow().unwrap_or(*last);
            lines.push(format!("DTSTART;VALUE=DATE:{}", date_value(*first)));
            lines.push(format!("DTEND;VALUE=DATE:{}", date_value(end)));
        }
        Span::Timed { start, end } => {
            lines.push(format!("DTSTART:{}", utc_value(*start)));
            lines.push(format!("DTEND:{}", utc_value(*end)));
        }
    }
    lines.push(format!("SUMMARY:{}", escape(event.summary)));
    if !event.description.is_empty() {
        lines.push(format!("DESCRIPTION:{}", escape(event.description)));
    }
    if !event.location.is_empty() {
        lines.push(format!("LOCATION:{}", escape(event.location)));
    }
    lines.extend(["END:VEVENT".to_owned(), "END:VCALENDAR".to_owned()]);
    let mut out = String::new();
    for line in &lines {
        fold(line, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agenda::Span;

    const OBJECT: &str = "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VTIMEZONE\r\nTZID:Europe/Berlin\r\n\
        BEGIN:STANDARD\r\nDTSTART:19701025T030000\r\nTZOFFSETFROM:+0200\r\nTZOFFSETTO:+0100\r\n\
        END:STANDARD\r\nEND:VTIMEZONE\r\nBEGIN:VEVENT\r\nUID:abc@x\r\n\
        DTSTART;TZID=\"/mozilla.org/20050126_1/Europe/Berlin\":20261123T090000\r\n\
        DTEND;TZID=Europe/Berlin:20261123T100000\r\nSUMMARY:Stand-up\\, daily\r\n\
        DESCRIPTION:Line one\\nline t\r\n wo\r\nRRULE:FREQ=DAILY;COUNT=3\r\n\
        EXDATE;TZID=Europe/Berlin:20261124T090000,20261125T090000\r\n\
        BEGIN:VALARM\r\nACTION:DISPLAY\r\nDESCRIPTION:not the event's\r\nEND:VALARM\r\n\
        END:VEVENT\r\nBEGIN:VEVENT\r\nUID:day@x\r\nDTSTART;VALUE=DATE:20261123\r\n\
        DURATION:P2D\r\nSUMMARY:Trip\r\nSTATUS:CANCELLED\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n";

    #[test]
    fn reads_events_with_zones_folds_and_escapes() {
        let parsed = parse(OBJECT);
        assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
        let [standup, trip] = &parsed.events[..] else {
            panic!("{:?}", parsed.events);
        };
        assert_eq!(standup.summary, "Stand-up, daily");
        assert_eq!(standup.description, "Line one\nline two", "VALARM kept out");
        let When::Zoned(dt, tz) = &standup.start else {
            panic!("{:?}", standup.start);
        };
        assert_eq!((dt.hour(), tz.iana_name()), (9, Some("Europe/Berlin")));
        let utc = standup.start.timestamp(&TimeZone::UTC).unwrap();
        assert_eq!(utc.to_string(), "2026-11-23T08:00:00Z");
        assert_eq!(standup.exdates.len(), 2);
        assert_eq!(standup.rrule.as_deref(), Some("FREQ=DAILY;COUNT=3"));
        assert!(matches!(trip.start, When::Date(_)));
        assert_eq!(trip.duration, Some(Length::Days(2)));
        assert!(trip.cancelled);
    }

    #[test]
    fn unknown_zones_are_local_times_and_say_so() {
        let parsed = parse(
            "BEGIN:VEVENT\nUID:1\nDTSTART;TZID=W. Europe Standard Time:20261123T090000\nEND:VEVENT\n",
        );
        assert!(matches!(parsed.events[0].start, When::Floating(_)));
        assert!(parsed.warnings[0].contains("W. Europe Standard Time"));
        let broken = parse("BEGIN:VEVENT\nUID:2\nDTSTART:tomorrow\nEND:VEVENT\n");
        assert!(broken.events.is_empty() && broken.warnings.len() == 1);
    }

    #[test]
    fn reads_durations() {
        assert_eq!(parse_duration("P1W"), Some(Length::Days(7)));
        assert_eq!(
            parse_duration("PT1H30M"),
            Some(Length::Exact(SignedDuration::from_mins(90)))
        );
        assert_eq!(
            parse_duration("P1DT1S"),
            Some(Length::Exact(SignedDuration::from_secs(86_401)))
        );
        assert_eq!(
            parse_duration("-PT15M"),
            Some(Length::Exact(SignedDuration::from_mins(-15)))
        );
        assert_eq!(parse_duration("P1H"), None);
        assert_eq!(parse_duration("PT"), Some(Length::Days(0)));
    }

    #[test]
    fn writes_what_it_reads_back() {
        let start: Timestamp = "2026-11-23T18:30:00Z".parse().unwrap();
        let span = Span::Timed {
            start,
            end: start + SignedDuration::from_hours(2),
        };
        let summary = "Dinner; table for 4, window ".repeat(4);
        let text = write(&NewEvent {
            uid: "u1@service-runtime",
            stamp: start,
            summary: &summary,
            description: "Booked by phone\nAsk for Ana",
            location: "Chez Nous",
            span: &span,
        });
        assert!(text.lines().all(|l| l.len() <= 76), "{text}");
        assert!(text.contains("DTSTART:20261123T183000Z\r\n"));
        let event = &parse(&text).events[0];
        assert_eq!(event.summary, summary);
        assert_eq!(event.description, "Booked by phone\nAsk for Ana");
        assert_eq!(event.location, "Chez Nous");
        assert_eq!(
            event.end.as_ref().unwrap().timestamp(&TimeZone::UTC),
            Some(start + SignedDuration::from_hours(2))
        );

        let day = Date::new(2026, 11, 23).unwrap();
        let all_day = Span::AllDay {
            first: day,
            last: day,
        };
        let text = write(&NewEvent {
            uid: "u2",
            stamp: start,
            summary: "Holiday",
            description: "",
            location: "",
            span: &all_day,
        });
        assert!(text.contains("DTSTART;VALUE=DATE:20261123\r\nDTEND;VALUE=DATE:20261124\r\n"));
        assert!(!text.contains("LOCATION"));
    }
}
