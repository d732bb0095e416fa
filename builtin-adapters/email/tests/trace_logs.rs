//! With trace logs of the IMAP client on, its LOGIN line (password included) would be logged,
//! so the adapter refuses to log in. A test binary of its own: the logger is process-wide.

// Helpers shared with the other test binary; this one uses a few of them.
#[allow(dead_code)]
mod support;

use std::sync::Mutex;

use service_contract::AdapterStatus;
use support::dovecot::{self, Dovecot};
use support::{Harness, lock, settings, wait_for};

/// Keeps every log record, at every level, as its text.
struct Capture(Mutex<Vec<String>>);

impl log::Log for Capture {
    fn enabled(&self, _metadata: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        lock(&self.0).push(format!("{} {}", record.target(), record.args()));
    }

    fn flush(&self) {}
}

static LOGS: Capture = Capture(Mutex::new(Vec::new()));

#[tokio::test]
async fn the_password_never_reaches_the_imap_clients_trace_log() {
    if !dovecot::available() {
        return;
    }
    log::set_logger(&LOGS).unwrap();
    log::set_max_level(log::LevelFilter::Trace);
    let dovecot = Dovecot::start();
    let harness = Harness::new(settings(&dovecot, 9));
    harness.start().await;

    let message = wait_for("the refusal", || harness.entry().error_message).await;
    assert!(
        message.starts_with("ConfigError: RUST_LOG turns on trace logs of async_imap")
            && message.contains("RUST_LOG=trace,async_imap=debug"),
        "{message}"
    );
    assert_eq!(harness.entry().status, AdapterStatus::Error);
    harness.stop().await;
    let logs = lock(&LOGS.0).clone();
    assert!(
        !logs.iter().any(|line| line.contains(dovecot::PASSWORD)),
        "{logs:#?}"
    );
    assert!(
        !dovecot.log().contains("Login: user="),
        "no login was tried"
    );
}
