//! The email adapter's real test servers (Dovecot for IMAP, aiosmtpd for SMTP), shared with its
//! own tests, which use all of their helpers; these tests use some.

#[allow(dead_code)]
#[path = "../../builtin-adapters/email/tests/support/dovecot.rs"]
pub mod dovecot;
#[allow(dead_code)]
#[path = "../../builtin-adapters/email/tests/support/smtp_sink.rs"]
pub mod smtp_sink;

pub use crate::support::tool_available;
