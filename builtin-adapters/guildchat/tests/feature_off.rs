//! The adapter built without the `guildchat` feature:
//! `cargo test -p service-guildchat --no-default-features`.
#![cfg(not(feature = "guildchat"))]

// The harness also serves the gateway tests; most of it has no use here.
#[allow(dead_code)]
mod support;

use service_contract::AdapterStatus;

use support::{Harness, TOKEN};

#[tokio::test]
async fn without_the_feature_the_entry_says_support_is_not_compiled_in() {
    let harness = Harness::new(vec![("SERVICE_GUILDCHAT_TOKEN", TOKEN.to_owned())]);
    harness.start().await;
    let entry = harness.entry();
    assert_eq!(entry.status, AdapterStatus::Error);
    assert_eq!(
        entry.error_message.as_deref(),
        Some(
            "ConfigError: guildchat support is not compiled in (build with the `guildchat` feature)"
        )
    );
    harness.stop().await;
}
