//! The cron scheduler.
