//! Recurrence rules (RFC 5545 RRULE) for the common cases: FREQ DAILY, WEEKLY, MONTHLY and
//! YEARLY with INTERVAL, COUNT, UNTIL, BYDAY (ordinals too: `1MO`, `-1FR`), BYMONTHDAY and
//! BYMONTH. Instances are civil date-times in the event's own zone, so a weekly 9:00 stays
//! 9:00 across daylight-saving changes. Other parts (BYSETPOS, BYWEEKNO, BYHOUR, ...) are
//! refused rather than guessed. Weeks start on Monday (WKST other than MO is read as MO, which
//! only matters for WEEKLY rules with INTERVAL above 1 and several BYDAY days).

use jiff::ToSpan;
use jiff::civil::{Date, DateTime, Weekday};

/// Periods looked at before giving up: a daily rule over 270 years.
const MAX_PERIODS: i64 = 100_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Freq {
    Daily,
    Weekly,
    Monthly,
    Yearly,
}

/// When a rule stops.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Until {
    /// The last instance starts at or before this value (a DATE or date-time as written).
    Value(String),
    Forever,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    freq: Freq,
    interval: i64,
    count: Option<u32>,
    pub until: Until,
    by_day: Vec<(Option<i8>, Weekday)>,
    by_month_day: Vec<i8>,
    by_month: Vec<i8>,
}

fn weekday(code: &str) -> Option<Weekday> {
    Some(match code {
        "MO" => Weekday::Monday,
        "TU" => Weekday::Tuesday,
        "WE" => Weekday::Wednesday,
        "TH" => Weekday::Thursday,
        "FR" => Weekday::Friday,
        "SA" => Weekday::Saturday,
        "SU" => Weekday::Sunday,
        _ => return None,
    })
}

fn list<T>(value: &str, item: impl Fn(&str) -> Option<T>) -> Option<Vec<T>> {
    value.split(',').map(|v| item(v.trim())).collect()
}

impl Rule {
    /// Parses an RRULE value; the error names what is not supported or not valid.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut rule = Rule {
            freq: Freq::Daily,
            interval: 1,
            count: None,
            until: Until::Forever,
            by_day: Vec::new(),
            by_month_day: Vec::new(),
            by_month: Vec::new(),
        };
        let mut freq = None;
        for part in text.split(';').filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("malformed rule part {part:?}"))?;
            let key = key.trim().to_ascii_uppercase();
            let value = value.trim().to_ascii_uppercase();
            let bad = || format!("invalid {key}={value}");
            match key.as_str() {
                "FREQ" => {
                    freq = Some(match value.as_str() {
                        "DAILY" => Freq::Daily,
                        "WEEKLY" => Freq::Weekly,
                        "MONTHLY" => Freq::Monthly,
                        "YEARLY" => Freq::Yearly,
                        _ => return Err(format!("FREQ={value} is not supported")),
                    })
                }
                "INTERVAL" => {
                    rule.interval = value.parse().ok().filter(|n| *n >= 1).ok_or_else(bad)?
                }
                "COUNT" => rule.count = Some(value.parse().map_err(|_| bad())?),
                "UNTIL" => rule.until = Until::Value(value),
                "BYDAY" => {
                    rule.by_day = list(&value, |day| {
                        let split = day.len().checked_sub(2)?;
                        let ordinal = match &day[..split] {
                            "" => None,
                            n => Some(n.parse::<i8>().ok().filter(|n| *n != 0)?),
                        };
                        Some((ordinal, weekday(&day[split..])?))
                    })
                    .ok_or_else(bad)?
                }
                "BYMONTHDAY" => {
                    rule.by_month_day = list(&value, |d| {
                        d.parse().ok().filter(|d: &i8| *d != 0 && d.abs() <= 31)
                    })
                    .ok_or_else(bad)?
                }
                "BYMONTH" => {
                    rule.by_month =
                        list(&value, |m| m.parse().ok().filter(|m| (1..=12).contains(m)))
                            .ok_or_else(bad)?
                }
                "WKST" => {}
                other => return Err(format!("{other} is not supported")),
            }
        }
        rule.freq = freq.ok_or("the rule has no FREQ")?;
        Ok(rule)
    }

    /// Instance starts from `start` on, in order, up to the last one on or before `last_date`
    /// (COUNT and UNTIL applied; `past_until` says whether a start is after UNTIL).
    pub fn expand(
        &self,
        start: DateTime,
        last_date: Date,
        past_until: impl Fn(DateTime) -> bool,
    ) -> Vec<DateTime> {
        let mut out = Vec::new();
        let mut emitted = 0u32;
        for k in 0..MAX_PERIODS {
            let Some(anchor) = self.anchor(start.date(), k) else {
                break;
            };
            if anchor > last_date {
                break;
            }
            for date in self.candidates(anchor, start.date()) {
                let instance = date.to_datetime(start.time());
                if instance < start {
                    continue;
                }
                if date > last_date || past_until(instance) {
                    return out;
                }
                out.push(instance);
                emitted += 1;
                if self.count.is_some_and(|count| emitted >= count) {
                    return out;
                }
            }
        }
        out
    }

    /// The first day of period `k` (its day, week, month or year).
    fn anchor(&self, start: Date, k: i64) -> Option<Date> {
        let step = k.checked_mul(self.interval)?;
        match self.freq {
            Freq::Daily => start.checked_add(step.days()).ok(),
            Freq::Weekly => {
                let monday = start
                    .checked_sub(i64::from(start.weekday().to_monday_zero_offset()).days())
                    .ok()?;
                monday.checked_add(step.weeks()).ok()
            }
            Freq::Monthly => start.first_of_month().checked_add(step.months()).ok(),
            Freq::Yearly => start
                .first_of_month()
                .with()
                .month(1)
                .build()
                .ok()?
                .checked_add(step.years())
                .ok(),
        }
    }

    /// The dates of one period, in order.
    fn candidates(&self, anchor: Date, start: Date) -> Vec<Date> {
        let mut dates = match self.freq {
            Freq::Daily => vec![anchor],
            Freq::Weekly => {
                let days: Vec<Weekday> = match self.by_day.is_empty() {
                    true => vec![start.weekday()],
                    false => self.by_day.iter().map(|(_, d)| *d).collect(),
                };
                days.iter()
                    .filter_map(|d| {
                        let offset = i64::from(d.to_monday_zero_offset());
                        anchor.checked_add(offset.days()).ok()
                    })
                    .collect()
            }
            Freq::Monthly => self.month_days(anchor, start.day()),
            Freq::Yearly => {
                if !self.by_month.is_empty() {
                    let months = self
                        .by_month
                        .iter()
                        .filter_map(|m| anchor.with().month(*m).day(1).build().ok());
                    months
                        .flat_map(|first| self.month_days(first, start.day()))
                        .collect()
                } else if !self.by_day.is_empty() && self.by_month_day.is_empty() {
                    self.year_weekdays(anchor)
                } else {
                    let first = anchor.with().month(start.month()).day(1).build();
                    first.map_or_else(|_| Vec::new(), |f| self.month_days(f, start.day()))
                }
            }
        };
        dates.retain(|d| self.keeps(*d));
        dates.sort();
        dates.dedup();
        dates
    }

    /// BYMONTH, and for DAILY and WEEKLY rules BYMONTHDAY and BYDAY, limit the dates.
    fn keeps(&self, date: Date) -> bool {
        let month_ok = self.by_month.is_empty() || self.by_month.contains(&date.month());
        if !matches!(self.freq, Freq::Daily | Freq::Weekly) {
            return month_ok;
        }
        let day_ok = self.by_month_day.is_empty()
            || self
                .by_month_day
                .iter()
                .any(|d| month_day(date.first_of_month(), *d) == Some(date));
        let weekday_ok = self.freq == Freq::Weekly
            || self.by_day.is_empty()
            || self.by_day.iter().any(|(_, d)| *d == date.weekday());
        month_ok && day_ok && weekday_ok
    }

    /// The days of the month starting at `first` that BYMONTHDAY and BYDAY pick (both: the
    /// days both pick); neither: `default_day`, when the month has it.
    fn month_days(&self, first: Date, default_day: i8) -> Vec<Date> {
        let by_month_day: Vec<Date> = self
            .by_month_day
            .iter()
            .filter_map(|d| month_day(first, *d))
            .collect();
        let by_day: Vec<Date> = self
            .by_day
            .iter()
            .flat_map(|(ordinal, weekday)| match ordinal {
                Some(n) => first
                    .nth_weekday_of_month(*n, *weekday)
                    .ok()
                    .into_iter()
                    .collect(),
                None => every_weekday(first, first.last_of_month(), *weekday),
            })
            .collect();
        match (by_month_day.is_empty(), by_day.is_empty()) {
            (true, true) => month_day(first, default_day).into_iter().collect(),
            (false, true) => by_month_day,
            (true, false) => by_day,
            (false, false) => by_day
                .into_iter()
                .filter(|d| by_month_day.contains(d))
                .collect(),
        }
    }

    /// YEARLY with BYDAY and neither BYMONTH nor BYMONTHDAY: weekdays counted in the year.
    fn year_weekdays(&self, first: Date) -> Vec<Date> {
        let last = first.last_of_year();
        self.by_day
            .iter()
            .flat_map(|(ordinal, weekday)| {
                let all = every_weekday(first, last, *weekday);
                match ordinal {
                    None => all,
                    Some(n) => {
                        let index = if *n > 0 {
                            usize::try_from(n - 1).ok()
                        } else {
                            all.len().checked_sub(n.unsigned_abs().into())
                        };
                        index
                            .and_then(|i| all.get(i).copied())
                            .into_iter()
                            .collect()
                    }
                }
            })
            .collect()
    }
}

/// Day `day` of the month starting at `first` (negative: from its end), when it exists.
fn month_day(first: Date, day: i8) -> Option<Date> {
    let length = first.days_in_month();
    let day = if day > 0 { day } else { length + 1 + day };
    (1..=length)
        .contains(&day)
        .then(|| first.with().day(day).build().ok())
        .flatten()
}

/// Every `weekday` from `first` to `last`.
fn every_weekday(first: Date, last: Date, weekday: Weekday) -> Vec<Date> {
    let mut out = Vec::new();
    let offset =
        (weekday.to_monday_zero_offset() - first.weekday().to_monday_zero_offset()).rem_euclid(7);
    let mut day = first.checked_add(i64::from(offset).days()).ok();
    while let Some(d) = day.filter(|d| *d <= last) {
        out.push(d);
        day = d.checked_add(1.week()).ok();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::civil::date;

    fn expand(rule: &str, start: DateTime, last: Date) -> Vec<String> {
        Rule::parse(rule)
            .unwrap()
            .expand(start, last, |_| false)
            .iter()
            .map(|d| d.to_string())
            .collect()
    }

    fn starts(rule: &str, start: Date, last: Date) -> Vec<String> {
        expand(rule, start.at(9, 0, 0, 0), last)
            .iter()
            .map(|s| s[..10].to_owned())
            .collect()
    }

    #[test]
    fn daily_with_interval_and_count() {
        assert_eq!(
            starts(
                "FREQ=DAILY;INTERVAL=2;COUNT=3",
                date(2026, 1, 30),
                date(2027, 1, 1)
            ),
            ["2026-01-30", "2026-02-01", "2026-02-03"]
        );
        // Weekdays only, stopping at the last date asked for.
        assert_eq!(
            starts(
                "FREQ=DAILY;BYDAY=MO,TU,WE,TH,FR",
                date(2026, 11, 20),
                date(2026, 11, 24)
            ),
            ["2026-11-20", "2026-11-23", "2026-11-24"]
        );
    }

    #[test]
    fn weekly_on_several_days() {
        assert_eq!(
            starts(
                "FREQ=WEEKLY;INTERVAL=2;BYDAY=TU,TH",
                date(2026, 11, 5), // a Thursday: the Tuesday before it is not an instance
                date(2026, 12, 1)
            ),
            ["2026-11-05", "2026-11-17", "2026-11-19", "2026-12-01"]
        );
        assert_eq!(
            starts("FREQ=WEEKLY;COUNT=2", date(2026, 11, 2), date(2027, 1, 1)),
            ["2026-11-02", "2026-11-09"]
        );
    }

    #[test]
    fn monthly_by_ordinal_weekday_and_month_day() {
        assert_eq!(
            starts(
                "FREQ=MONTHLY;BYDAY=-1FR;COUNT=3",
                date(2026, 1, 1),
                date(2027, 1, 1)
            ),
            ["2026-01-30", "2026-02-27", "2026-03-27"]
        );
        // The 31st is skipped in months without one (RFC 5545: invalid dates are ignored).
        assert_eq!(
            starts("FREQ=MONTHLY;COUNT=3", date(2026, 1, 31), date(2027, 1, 1)),
            ["2026-01-31", "2026-03-31", "2026-05-31"]
        );
        assert_eq!(
            starts(
                "FREQ=MONTHLY;BYMONTHDAY=1,-1;COUNT=4",
                date(2026, 2, 1),
                date(2027, 1, 1)
            ),
            ["2026-02-01", "2026-02-28", "2026-03-01", "2026-03-31"]
        );
        assert_eq!(
            starts(
                "FREQ=MONTHLY;BYDAY=FR;BYMONTHDAY=13;COUNT=2",
                date(2026, 1, 1),
                date(2030, 1, 1)
            ),
            ["2026-02-13", "2026-03-13"]
        );
    }

    #[test]
    fn yearly_rules() {
        assert_eq!(
            starts("FREQ=YEARLY;COUNT=3", date(2024, 2, 29), date(2040, 1, 1)),
            ["2024-02-29", "2028-02-29", "2032-02-29"]
        );
        // US Thanksgiving: the fourth Thursday of November.
        assert_eq!(
            starts(
                "FREQ=YEARLY;BYMONTH=11;BYDAY=4TH",
                date(2025, 11, 27),
                date(2027, 12, 31)
            ),
            ["2025-11-27", "2026-11-26", "2027-11-25"]
        );
        assert_eq!(
            starts(
                "FREQ=YEARLY;BYDAY=1MO;COUNT=2",
                date(2026, 1, 1),
                date(2030, 1, 1)
            ),
            ["2026-01-05", "2027-01-04"]
        );
    }

    #[test]
    fn until_stops_the_rule() {
        let rule = Rule::parse("FREQ=DAILY;UNTIL=20261125T000000Z").unwrap();
        assert_eq!(rule.until, Until::Value("20261125T000000Z".into()));
        let limit = date(2026, 11, 24).at(9, 0, 0, 0);
        let instances = rule.expand(date(2026, 11, 22).at(9, 0, 0, 0), date(2027, 1, 1), |i| {
            i > limit
        });
        assert_eq!(instances.len(), 3);
    }

    #[test]
    fn refuses_what_it_does_not_support() {
        assert!(Rule::parse("FREQ=HOURLY").unwrap_err().contains("HOURLY"));
        assert!(
            Rule::parse("FREQ=MONTHLY;BYDAY=MO;BYSETPOS=1")
                .unwrap_err()
                .contains("BYSETPOS")
        );
        assert!(Rule::parse("INTERVAL=2").unwrap_err().contains("FREQ"));
        assert!(Rule::parse("FREQ=DAILY;INTERVAL=0").is_err());
        assert!(Rule::parse("FREQ=WEEKLY;BYDAY=XX").is_err());
        assert!(Rule::parse("FREQ=WEEKLY;WKST=SU").is_ok());
    }
}
