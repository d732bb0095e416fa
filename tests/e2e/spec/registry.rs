//! Sections 2.5 and 3.2: the adapter registry's entries and their states, and section 7's rows
//! on missing settings that need no fake platform.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{Server, eventually};
use crate::webhook::{SECRET, signed};

const STATUSES: [&str; 3] = ["running", "stopped", "error"];

async fn entries(server: &Server) -> Vec<Value> {
    let (status, body) = server.get("/api/adapters").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["adapters"].as_array().unwrap().clone()
}

/// Once every adapter has settled (none still compiling).
async fn settled(server: &Server) -> Vec<Value> {
    eventually(60, async || {
        let all = entries(server).await;
        all.iter().all(|e| e["phase"].is_null()).then_some(all)
    })
    .await
}

#[tokio::test]
async fn spec_2_5_every_entry_has_the_fields_and_one_of_the_three_statuses() {
    // With nothing configured (most adapters wait for settings) and with some configured.
    for env in [vec![], vec![("SERVICE_WEBHOOK_SECRET", SECRET)]] {
        let server = Server::start_with(&env);
        let all = settled(&server).await;
        assert!(all.len() >= 7, "{all:?}");
        for entry in &all {
            let status = entry["status"].as_str().unwrap();
            assert!(STATUSES.contains(&status), "{entry}");
            assert!(entry["name"].is_string(), "{entry}");
            assert!(entry["error_count"].is_u64(), "{entry}");
            assert!(entry["supports_toggle"].is_boolean(), "{entry}");
            for nullable in ["last_activity_at", "error_message"] {
                let value = &entry[nullable];
                assert!(value.is_null() || value.is_string(), "{nullable}: {entry}");
            }
        }
    }
}

#[tokio::test]
async fn spec_2_5_last_activity_is_null_until_the_first_activity_then_utc_iso_8601() {
    let server = Server::start_with(&[("SERVICE_WEBHOOK_SECRET", SECRET)]);
    let entry = server.adapter("webhook").await.unwrap();
    assert_eq!(
        (&entry["status"], &entry["last_activity_at"]),
        (&json!("running"), &Value::Null)
    );
    let (status, _) = signed(&server, r#"{"prompt": "hi"}"#).await;
    assert_eq!(status, StatusCode::OK);
    let entry = server.adapter("webhook").await.unwrap();
    let at = entry["last_activity_at"].as_str().unwrap();
    assert!(
        chrono::DateTime::parse_from_rfc3339(at).is_ok() && at.ends_with('Z'),
        "{at}"
    );
    assert_eq!(entry["status"], "running", "a touch keeps the status");
}

#[tokio::test]
async fn spec_2_5_supports_toggle_is_true_exactly_when_start_and_stop_exist() {
    let server = Server::start();
    let all = settled(&server).await;
    let toggle =
        |name: &str| all.iter().find(|e| e["name"] == name).unwrap()["supports_toggle"].clone();
    // The scheduler and the email adapter have both hooks; the webhook component has neither.
    assert_eq!(
        (toggle("scheduler"), toggle("email"), toggle("webhook")),
        (json!(true), json!(true), json!(false))
    );
    let (status, body) = server
        .post("/api/adapters/webhook/disable", json!(null))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (status, body) = server
        .post("/api/adapters/scheduler/disable", json!(null))
        .await;
    assert_eq!(
        (status, &body["status"]),
        (StatusCode::OK, &json!("stopped"))
    );
}

#[tokio::test]
async fn spec_3_2_an_adapter_found_but_not_started_is_stopped() {
    let server = Server::start();
    let (status, _) = server
        .post("/api/adapters/scheduler/disable", json!(null))
        .await;
    assert_eq!(status, StatusCode::OK);
    // Found again at the next start, and left off: stopped, never running in between.
    let server = server.restart();
    let entry = server.adapter("scheduler").await.unwrap();
    assert_eq!(entry["status"], "stopped", "{entry}");
}

#[tokio::test]
async fn spec_3_2_rule_5_a_missing_secret_marks_an_error_and_the_others_keep_running() {
    let server = Server::start();
    let all = settled(&server).await;
    let entry = |name: &str| all.iter().find(|e| e["name"] == name).unwrap().clone();
    for (adapter, variable) in [
        ("webhook", "SERVICE_WEBHOOK_SECRET"),
        ("teamchat", "SERVICE_TEAMCHAT_SIGNING_SECRET"),
        ("email", "SERVICE_EMAIL_PASSWORD"),
    ] {
        let entry = entry(adapter);
        assert_eq!(
            (&entry["status"], &entry["error_count"]),
            (&json!("error"), &json!(1)),
            "{entry}"
        );
        let message = entry["error_message"].as_str().unwrap();
        assert!(
            message.starts_with("ConfigError: ") && message.contains(variable),
            "{message}"
        );
        assert!(
            entry["missing_settings"]
                .as_array()
                .unwrap()
                .contains(&json!(variable)),
            "{entry}"
        );
    }
    assert_eq!(entry("scheduler")["status"], "running");
    assert_eq!(server.get("/api/health").await.0, StatusCode::OK);
}

#[tokio::test]
async fn spec_3_2_a_start_that_raises_is_caught_recorded_and_the_others_continue() {
    // The calendar's start refuses two calendars named at once.
    let server = Server::start_with(&[
        ("SERVICE_CALENDAR_CALDAV_URL", "http://127.0.0.1:9/dav"),
        ("SERVICE_CALENDAR_GOOGLE_REFRESH_TOKEN", "refresh"),
        ("SERVICE_WEBHOOK_SECRET", SECRET),
    ]);
    let calendar = eventually(30, async || {
        server
            .adapter("calendar")
            .await
            .filter(|e| e["status"] == "error")
    })
    .await;
    assert_eq!(calendar["error_count"], 1, "{calendar}");
    assert!(
        calendar["error_message"]
            .as_str()
            .unwrap()
            .contains("both CalDAV and Google are configured"),
        "{calendar}"
    );
    assert_eq!(
        calendar["missing_settings"],
        json!([]),
        "not a missing setting"
    );
    assert_eq!(
        server.adapter("webhook").await.unwrap()["status"],
        "running"
    );
    assert_eq!(
        signed(&server, r#"{"prompt": "still here?"}"#).await.0,
        StatusCode::OK
    );
}

#[tokio::test]
async fn spec_7_guildchat_token_unset_is_error_naming_the_variable() {
    let server = Server::start();
    let entry = server.adapter("guildchat").await.unwrap();
    assert_eq!(
        (
            &entry["status"],
            &entry["error_message"],
            &entry["missing_settings"]
        ),
        (
            &json!("error"),
            &json!("ConfigError: SERVICE_GUILDCHAT_TOKEN is not set"),
            &json!(["SERVICE_GUILDCHAT_TOKEN"])
        ),
        "{entry}"
    );
}
