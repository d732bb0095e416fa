//! Keys of the registry entry's metadata: counts, carried on across stop and start as the entry
//! is, and why the latest skipped message was skipped.

pub const POLLS: &str = "polls";
pub const ANSWERED: &str = "answered";
pub const SKIPPED: &str = "skipped";
pub const LAST_SKIPPED: &str = "last_skipped";
