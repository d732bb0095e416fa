//! Parsing the accepted schedule forms and finding their next slot in a time zone.
//!
//! croner matches the pattern against naive wall-clock times; mapping those to real
//! instants is done here so that daylight-saving shifts neither skip nor repeat a slot.

use chrono::{DateTime, LocalResult, NaiveDateTime, Offset, TimeDelta, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

const ACCEPTED: &str = "use a 5-field cron expression like \"*/15 * * * *\", an alias \
     (@yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly) \
     or every 1m / every 5m / every 30m / every 1h";

/// The shorthands and the 5-field cron each one is stored as.
const SHORTHANDS: [(&str, &str); 11] = [
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
    ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * 0"),
    ("@daily", "0 0 * * *"),
    ("@midnight", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
    ("every 1m", "* * * * *"),
    ("every 5m", "*/5 * * * *"),
    ("every 30m", "*/30 * * * *"),
    ("every 1h", "0 * * * *"),
];

/// The widest clock shift the slot search allows for. Daylight saving moves clocks by
/// one or two hours; Vixie cron uses the same three-hour bound to tell DST from a reset.
const MAX_SHIFT: TimeDelta = TimeDelta::hours(3);

/// A parsed schedule together with the canonical 5-field form it is stored as.
#[derive(Clone, Debug, PartialEq)]
pub struct CronExpr {
    canonical: String,
    schedule: Cron,
    /// Whether the schedule names fixed times of day, which decides how a fall-back repeat is
    /// handled. As in Vixie cron, it does unless its minute or hour field starts with `*`.
    fixed_time: bool,
}

/// Parses a 5-field cron expression, an `@` alias or one of the `every` shorthands.
pub fn parse(input: &str) -> Result<CronExpr, String> {
    let input = input.trim();
    let invalid = |reason: &str| format!("invalid schedule \"{input}\": {reason}; {ACCEPTED}");

    let fields: Vec<&str> = input.split_whitespace().collect();
    let joined = fields.join(" ");
    let canonical = match SHORTHANDS
        .iter()
        .find(|(shorthand, _)| *shorthand == joined)
    {
        Some((_, cron)) => cron.to_string(),
        None if fields.is_empty() => return Err(invalid("it is empty")),
        None if joined.starts_with('@') || fields[0] == "every" => {
            return Err(invalid("unknown shorthand"));
        }
        None if fields.len() != 5 => {
            return Err(invalid(&format!(
                "expected 5 fields, found {}",
                fields.len()
            )));
        }
        None => joined,
    };

    let schedule = parse_fields(&canonical).map_err(|_| invalid(&blame_field(&canonical)))?;
    // Patterns like "0 0 31 2 *" parse but never match; rejecting them here means a stored
    // schedule always has a next slot.
    schedule
        .find_next_occurrence(&DateTime::UNIX_EPOCH.naive_utc(), false)
        .map_err(|_| invalid("it never matches a real date"))?;

    let fixed_time = canonical
        .split(' ')
        .take(2)
        .all(|field| !field.starts_with('*'));
    Ok(CronExpr {
        canonical,
        schedule,
        fixed_time,
    })
}

fn parse_fields(cron: &str) -> Result<Cron, croner::errors::CronError> {
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(cron)
}

/// The five fields in order: name and the values each takes.
const FIELDS: [(&str, &str); 5] = [
    ("minute", "0-59"),
    ("hour", "0-23"),
    ("day-of-month", "1-31"),
    ("month", "1-12 or JAN-DEC"),
    ("day-of-week", "0-7 (0 and 7 are Sunday) or SUN-SAT"),
];

/// Says which field of a 5-field expression the cron parser refused, and what that field
/// takes: each field is tried alone with `*` in the others.
fn blame_field(cron: &str) -> String {
    let fields: Vec<&str> = cron.split(' ').collect();
    for (i, (name, range)) in FIELDS.iter().enumerate() {
        let probe: Vec<&str> = (0..fields.len())
            .map(|j| if i == j { fields[j] } else { "*" })
            .collect();
        if let Err(e) = parse_fields(&probe.join(" ")) {
            let detail = e.to_string();
            let what = if detail.contains("out of bounds") {
                "is out of range".to_owned()
            } else {
                let detail = detail.rsplit(": ").next().unwrap_or(&detail);
                format!(
                    "is not valid ({})",
                    detail.trim_end_matches('.').to_lowercase()
                )
            };
            return format!(
                "the {name} field \"{}\" {what}; it takes {range}",
                fields[i]
            );
        }
    }
    "the fields do not form a valid cron expression".to_owned()
}

impl CronExpr {
    /// The 5-field form the schedule is stored and shown as.
    pub(crate) fn canonical(&self) -> &str {
        &self.canonical
    }

    /// The first slot strictly after `after`, reading the schedule as wall-clock time in `tz`.
    ///
    /// A slot inside a spring-forward gap fires at the instant the clock jumps, so it is
    /// never lost (slots that land on the same instant fire once). In a fall-back repeat a
    /// fixed-time slot fires only on its first pass, while wildcard schedules such as
    /// `0 * * * *` fire on both passes because each one is a distinct real hour.
    pub(crate) fn next_after(&self, after: DateTime<Utc>, tz: &Tz) -> Option<DateTime<Utc>> {
        if let Some(next) = self.next_without_shift(after, tz) {
            return Some(next);
        }
        let wall_clock = |instant: DateTime<Utc>| instant.with_timezone(tz).naive_local();
        // Around a fall-back repeat instants do not follow wall-clock order, so scan the
        // slots from MAX_SHIFT before `after` until MAX_SHIFT past the best instant found.
        let mut wall = wall_clock(after).checked_sub_signed(MAX_SHIFT)?;
        let mut best = None;
        loop {
            wall = match self.schedule.find_next_occurrence(&wall, false) {
                Ok(next) => next,
                Err(_) => return best,
            };
            if best.is_some_and(|best| wall - MAX_SHIFT > wall_clock(best)) {
                return best;
            }
            best = self
                .instants(wall, tz)
                .into_iter()
                .flatten()
                .filter(|&instant| instant > after)
                .chain(best)
                .min();
        }
    }

    /// The common case in one step. With no clock shift within `MAX_SHIFT` of `after`, every
    /// later instant has a later wall-clock time, so the first slot after `after`'s wall-clock
    /// time is the answer, provided that slot exists exactly once (not in a gap or a repeat).
    fn next_without_shift(&self, after: DateTime<Utc>, tz: &Tz) -> Option<DateTime<Utc>> {
        let offset = |instant: DateTime<Utc>| instant.with_timezone(tz).offset().fix();
        if offset(after - MAX_SHIFT) != offset(after + MAX_SHIFT) {
            return None;
        }
        let wall = after.with_timezone(tz).naive_local();
        let next = self.schedule.find_next_occurrence(&wall, false).ok()?;
        match tz.from_local_datetime(&next) {
            LocalResult::Single(instant) => Some(instant.with_timezone(&Utc)),
            _ => None,
        }
    }

    /// The instants at which the wall-clock slot `wall` fires in `tz`.
    fn instants(&self, wall: NaiveDateTime, tz: &Tz) -> [Option<DateTime<Utc>>; 2] {
        match tz.from_local_datetime(&wall) {
            LocalResult::Single(instant) => [Some(instant), None],
            LocalResult::Ambiguous(first, second) => {
                [Some(first), (!self.fixed_time).then_some(second)]
            }
            LocalResult::None => [after_gap(wall, tz), None],
        }
        .map(|instant| instant.map(|instant| instant.with_timezone(&Utc)))
    }
}

/// The first instant after the spring-forward gap that swallows `wall`: the moment the clock
/// jumped. Slots fall on whole minutes, and so do the ends of gaps in every zone in use today.
fn after_gap(wall: NaiveDateTime, tz: &Tz) -> Option<DateTime<Tz>> {
    (1..=24 * 60).find_map(|minutes| {
        tz.from_local_datetime(&(wall + TimeDelta::minutes(minutes)))
            .earliest()
    })
}

/// The zone schedules are read in: `SERVICE_TZ` when set, otherwise the machine's own zone,
/// falling back to UTC when that cannot be detected or is unknown to chrono-tz.
pub fn zone(service_tz: Option<&str>) -> Result<Tz, String> {
    match service_tz {
        Some(name) => name
            .parse()
            .map_err(|_| format!("SERVICE_TZ \"{name}\" is not a known IANA time zone")),
        None => Ok(iana_time_zone::get_timezone()
            .ok()
            .and_then(|name| name.parse().ok())
            .unwrap_or(Tz::UTC)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
    }

    /// The first `count` slots after `from`, following `next_after` as the scheduler does.
    fn slots(schedule: &str, tz: Tz, from: DateTime<Utc>, count: usize) -> Vec<DateTime<Utc>> {
        let cron = parse(schedule).unwrap();
        std::iter::successors(cron.next_after(from, &tz), |&slot| {
            cron.next_after(slot, &tz)
        })
        .take(count)
        .collect()
    }

    /// Asserts `slots` are evenly spaced by `step` minutes: no real slot skipped, none repeated.
    fn assert_every(slots: &[DateTime<Utc>], step: i64) {
        for pair in slots.windows(2) {
            assert_eq!(pair[1] - pair[0], TimeDelta::minutes(step), "{slots:?}");
        }
    }

    #[test]
    fn parses_cron_expressions_into_canonical_form() {
        for (input, canonical) in [
            ("*/15 * * * *", "*/15 * * * *"),
            ("  0   9 *  * MON-FRI ", "0 9 * * MON-FRI"),
            ("0 0 1 JAN *", "0 0 1 JAN *"),
            ("5,35 8-18/2 1-15 */3 0", "5,35 8-18/2 1-15 */3 0"),
            ("0 0 29 2 *", "0 0 29 2 *"),
        ] {
            assert_eq!(parse(input).unwrap().canonical(), canonical, "{input}");
        }
    }

    #[test]
    fn parses_aliases_and_sugar_into_cron() {
        for (input, canonical) in [
            ("@yearly", "0 0 1 1 *"),
            ("@annually", "0 0 1 1 *"),
            ("@monthly", "0 0 1 * *"),
            ("@weekly", "0 0 * * 0"),
            ("@daily", "0 0 * * *"),
            ("@midnight", "0 0 * * *"),
            ("@hourly", "0 * * * *"),
            ("every 1m", "* * * * *"),
            ("every 5m", "*/5 * * * *"),
            (" every  30m ", "*/30 * * * *"),
            ("every 1h", "0 * * * *"),
        ] {
            assert_eq!(parse(input).unwrap().canonical(), canonical, "{input}");
        }
        assert_eq!(parse("@hourly").unwrap(), parse("every 1h").unwrap());
    }

    #[test]
    fn rejects_everything_else_naming_the_accepted_forms() {
        for (input, reason) in [
            ("", "it is empty"),
            ("   ", "it is empty"),
            ("0 * * * * *", "expected 5 fields, found 6"),
            ("0 0 * * * * 2026", "expected 5 fields, found 7"),
            ("every 2m", "unknown shorthand"),
            ("every 1 m", "unknown shorthand"),
            ("@reboot", "unknown shorthand"),
            ("@DAILY", "unknown shorthand"),
            (
                "61 * * * *",
                "the minute field \"61\" is out of range; it takes 0-59",
            ),
            (
                "0 24 * * *",
                "the hour field \"24\" is out of range; it takes 0-23",
            ),
            (
                "0 0 32 * *",
                "the day-of-month field \"32\" is out of range; it takes 1-31",
            ),
            ("0 0 * 13 *", "the month field \"13\" is out of range"),
            ("0 0 * * 8", "the day-of-week field \"8\" is out of range"),
            (
                "*/0 * * * *",
                "the minute field \"*/0\" is not valid (step cannot be zero)",
            ),
            ("x y z a b", "the minute field \"x\" is not valid"),
            ("0 0 31 2 *", "it never matches a real date"),
        ] {
            let err = parse(input).unwrap_err();
            assert!(
                err.starts_with(&format!("invalid schedule \"{}\": ", input.trim())),
                "{err}"
            );
            assert!(err.contains(reason), "{input}: {err}");
            assert!(err.ends_with(ACCEPTED), "{err}");
        }
    }

    #[test]
    fn next_slot_is_strictly_after() {
        let tz = Tz::UTC;
        let cron = parse("*/5 * * * *").unwrap();
        assert_eq!(
            cron.next_after(utc(2026, 6, 1, 12, 5), &tz),
            Some(utc(2026, 6, 1, 12, 10))
        );
        let just_before = utc(2026, 6, 1, 12, 5) - TimeDelta::nanoseconds(1);
        assert_eq!(
            cron.next_after(just_before, &tz),
            Some(utc(2026, 6, 1, 12, 5))
        );
    }

    #[test]
    fn reads_the_schedule_as_wall_clock_time_in_the_zone() {
        // 09:00 in Berlin summer time is 07:00 UTC; in New York winter time it is 14:00 UTC.
        let next = slots("0 9 * * *", Tz::Europe__Berlin, utc(2026, 6, 1, 0, 0), 1);
        assert_eq!(next, [utc(2026, 6, 1, 7, 0)]);
        let next = slots("0 9 * * *", Tz::America__New_York, utc(2026, 1, 5, 0, 0), 1);
        assert_eq!(next, [utc(2026, 1, 5, 14, 0)]);
    }

    #[test]
    fn berlin_spring_forward_fires_gap_slots_once_after_the_jump() {
        // 2026-03-29 02:00 CET jumps to 03:00 CEST (01:00 UTC): 02:30 does not exist that day.
        let tz = Tz::Europe__Berlin;
        let from = utc(2026, 3, 28, 12, 0);
        assert_eq!(
            slots("30 2 * * *", tz, from, 3),
            [
                utc(2026, 3, 29, 1, 0), // 03:00 CEST, the first instant after the gap
                utc(2026, 3, 30, 0, 30),
                utc(2026, 3, 31, 0, 30),
            ]
        );
        // A fixed-time list is not skipped either.
        assert_eq!(
            slots("0 2,14 * * *", tz, utc(2026, 3, 28, 18, 0), 2),
            [utc(2026, 3, 29, 1, 0), utc(2026, 3, 29, 12, 0)]
        );
        // Wildcard schedules lose no slot either: 02:30 CET fires at the jump.
        assert_eq!(
            slots("30 * * * *", tz, utc(2026, 3, 28, 23, 45), 3),
            [
                utc(2026, 3, 29, 0, 30), // 01:30 CET
                utc(2026, 3, 29, 1, 0),  // 02:30 CET, which does not exist, at 03:00 CEST
                utc(2026, 3, 29, 1, 30), // 03:30 CEST
            ]
        );
        // Starting inside the day, after the jumped slot has fired, it does not fire again.
        assert_eq!(
            slots("30 2 * * *", tz, utc(2026, 3, 29, 1, 0), 1),
            [utc(2026, 3, 30, 0, 30)]
        );
    }

    #[test]
    fn berlin_fall_back_fires_fixed_slots_once() {
        // 2026-10-25 03:00 CEST falls back to 02:00 CET: 02:30 happens at 00:30 and 01:30 UTC.
        let tz = Tz::Europe__Berlin;
        assert_eq!(
            slots("30 2 * * *", tz, utc(2026, 10, 24, 12, 0), 2),
            [utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]
        );
        assert_eq!(
            slots("0 2,14 * * *", tz, utc(2026, 10, 24, 12, 0), 2),
            [utc(2026, 10, 25, 0, 0), utc(2026, 10, 25, 13, 0)]
        );
        // From inside the repeated hour the already-fired slot is not fired again.
        assert_eq!(
            slots("30 2 * * *", tz, utc(2026, 10, 25, 1, 10), 1),
            [utc(2026, 10, 26, 1, 30)]
        );
    }

    #[test]
    fn berlin_wildcard_schedules_fire_every_real_interval_through_both_shifts() {
        let tz = Tz::Europe__Berlin;
        // Both shifts happen at 01:00 UTC; cover the two hours either side.
        for shift in [utc(2026, 3, 29, 1, 0), utc(2026, 10, 25, 1, 0)] {
            let from = shift - TimeDelta::hours(2);
            for (schedule, step) in [
                ("0 * * * *", 60),
                ("*/30 * * * *", 30),
                ("*/15 * * * *", 15),
                ("every 1m", 1),
            ] {
                let fired = slots(schedule, tz, from, (4 * 60 / step) as usize);
                assert_every(&fired, step);
                assert_eq!(fired[0], from + TimeDelta::minutes(step), "{schedule}");
            }
        }
        // The repeated 02:00 is two real hours, so hourly fires at both.
        assert_eq!(
            slots("@hourly", tz, utc(2026, 10, 24, 23, 30), 3),
            [
                utc(2026, 10, 25, 0, 0), // 02:00 CEST
                utc(2026, 10, 25, 1, 0), // 02:00 CET
                utc(2026, 10, 25, 2, 0), // 03:00 CET
            ]
        );
    }

    #[test]
    fn new_york_handles_both_shifts() {
        let tz = Tz::America__New_York;
        // 2026-03-08 02:00 EST jumps to 03:00 EDT (07:00 UTC).
        assert_eq!(
            slots("30 2 * * *", tz, utc(2026, 3, 7, 12, 0), 2),
            [utc(2026, 3, 8, 7, 0), utc(2026, 3, 9, 6, 30)]
        );
        // 2026-11-01 02:00 EDT falls back to 01:00 EST: 01:30 happens at 05:30 and 06:30 UTC.
        assert_eq!(
            slots("30 1 * * *", tz, utc(2026, 10, 31, 12, 0), 2),
            [utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]
        );
        for from in [utc(2026, 3, 8, 3, 0), utc(2026, 11, 1, 2, 0)] {
            let fired = slots("0 * * * *", tz, from, 8);
            assert_every(&fired, 60);
            assert_eq!(fired[0], from + TimeDelta::hours(1));
        }
    }

    #[test]
    fn zone_uses_service_tz_or_the_machine_zone() {
        assert_eq!(zone(Some("Europe/Berlin")), Ok(Tz::Europe__Berlin));
        assert_eq!(
            zone(Some("Mars/Base")),
            Err("SERVICE_TZ \"Mars/Base\" is not a known IANA time zone".to_string())
        );
        assert!(zone(None).is_ok());
    }
}
