//! The figures benches print: milliseconds, medians, and whether a target was met.

use std::time::Duration;

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The middle value (of an even count, the upper of the two middle ones).
pub fn median<T: PartialOrd + Copy>(values: impl IntoIterator<Item = T>) -> T {
    let mut values: Vec<T> = values.into_iter().collect();
    values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    values[values.len() / 2]
}

pub fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}
