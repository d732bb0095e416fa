//! The cron scheduler's pure planning logic: parsing schedules and deciding when they fire.

pub mod cron;
pub mod plan;
