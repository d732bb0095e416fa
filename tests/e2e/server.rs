//! Start-up, health, configuration and shutdown of the binary.

use reqwest::StatusCode;
use rusqlite::Connection;
use serde_json::json;

use service_runtime::db::SCHEMA_VERSION;

use crate::support::{Server, command, refused_start};

#[tokio::test]
async fn health_reports_version_schema_and_counts() {
    let server = Server::start();
    let (status, body) = server.get("/api/health").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["status"], "ok");
    assert_eq!(body["schema_version"], SCHEMA_VERSION);
    assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));
    // The bootstrapped `default` profile is the only agent of a fresh install.
    assert_eq!(body["counts"]["agents"], 1);
    assert_eq!(body["counts"]["tasks"], 0);

    let conn = Connection::open(server.data_dir.join("service.sqlite")).unwrap();
    let version: u32 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    let journal: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!((version, journal.as_str()), (SCHEMA_VERSION, "wal"));
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_json_errors() {
    let server = Server::start();
    crate::support::assert_error(
        &server.get("/api/nope").await,
        StatusCode::NOT_FOUND,
        "no such endpoint",
    );
    crate::support::assert_error(
        &server.delete("/api/agents").await,
        StatusCode::METHOD_NOT_ALLOWED,
        "method not allowed",
    );
}

#[tokio::test]
async fn state_survives_a_restart() {
    let server = Server::start();
    let (status, _) = server
        .post("/api/store/sol/install", serde_json::json!({}))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let server = server.restart();
    let (_, body) = server.get("/api/agents/Sol").await;
    assert_eq!(body["name"], "Sol");
}

#[test]
fn sigterm_shuts_down_cleanly() {
    let server = Server::start();
    let status = server.terminate();
    assert!(status.success(), "{status:?}");
}

#[test]
fn refuses_a_database_from_a_newer_version_and_leaves_it_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("service.sqlite");
    {
        let conn = Connection::open(&path).unwrap();
        let future = SCHEMA_VERSION + 1;
        conn.execute_batch(&format!(
            "CREATE TABLE from_the_future (x); PRAGMA user_version = {future};"
        ))
        .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let out = command(tmp.path())
        .args(["serve", "--port", "0", "--data-dir"])
        .arg(tmp.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let future = SCHEMA_VERSION + 1;
    assert!(
        stderr.contains(&format!("schema version {future}")),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the newer database was modified"
    );
}

#[test]
fn invalid_config_file_is_a_clear_startup_error() {
    let refused = refused_start("[server]\nport = \"eighty\"\n");
    assert!(refused.stderr.contains("config.toml"), "{}", refused.stderr);
    assert!(
        !refused.created_database,
        "nothing is created on a bad config"
    );
}

#[tokio::test]
async fn data_dir_and_port_come_from_the_environment_and_config() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("from-env");
    std::fs::create_dir_all(&data).unwrap();
    // A free port, learned by binding it once; config.toml names it, SERVICE_DATA_DIR the dir.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    std::fs::write(
        data.join("config.toml"),
        format!("[server]\nport = {port}\n"),
    )
    .unwrap();
    let mut child = command(tmp.path())
        .arg("serve")
        .env("SERVICE_DATA_DIR", &data)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(
        line.trim(),
        format!("service-runtime listening on http://127.0.0.1:{port}")
    );
    assert!(data.join("service.sqlite").exists());
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn default_data_dir_follows_xdg() {
    let tmp = tempfile::tempdir().unwrap();
    let xdg = tmp.path().join("xdg");
    // A port that is taken makes `serve` fail after the data directory was prepared.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let out = command(tmp.path())
        .args([
            "serve",
            "--port",
            &busy.local_addr().unwrap().port().to_string(),
        ])
        .env("XDG_DATA_HOME", &xdg)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot listen"));
    assert!(xdg.join("service-runtime/service.sqlite").exists());
}

/// The server built without the `guildchat` feature:
/// `cargo test -p service-runtime --no-default-features --test e2e without_guildchat`.
#[cfg(not(feature = "guildchat"))]
#[tokio::test]
async fn without_guildchat_compiled_in_its_entry_says_so_and_the_rest_runs() {
    let server = Server::start_with(&[("SERVICE_GUILDCHAT_TOKEN", "unused")]);
    let (status, health) = server.get("/api/health").await;
    assert_eq!(
        (status, health["status"].as_str()),
        (StatusCode::OK, Some("ok"))
    );
    let guildchat = server.adapter("guildchat").await.unwrap();
    assert_eq!(guildchat["status"], "error");
    assert!(
        guildchat["error_message"]
            .as_str()
            .unwrap()
            .contains("guildchat support is not compiled in"),
        "{guildchat}"
    );
    assert_eq!(
        server.adapter("scheduler").await.unwrap()["status"],
        "running"
    );
    let (status, answer) = server
        .post("/api/chat", serde_json::json!({"prompt": "still here?"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}

/// Errors say what is accepted, and repeat what was sent only in part: a 5,000-character name
/// comes back cut to 64 characters.
#[tokio::test]
async fn errors_say_what_is_accepted_and_cut_what_was_sent() {
    let server = Server::start();
    let (status, body) = server
        .post("/api/approvals/some-id", json!({"decision": "maybe"}))
        .await;
    assert_eq!(
        (status, body["error"].as_str(), body["field"].as_str()),
        (
            StatusCode::BAD_REQUEST,
            Some("decision must be approve or deny, not \"maybe\""),
            Some("decision")
        )
    );

    let long = "x".repeat(5_000);
    let cut = format!("\"{}…\"", "x".repeat(64));
    for (status, body) in [
        server
            .post(
                "/api/schedules",
                json!({"name": long, "cron": "@daily", "agent": "default", "prompt": "p"}),
            )
            .await,
        server.get(&format!("/api/agents/{long}")).await,
        server
            .post("/api/chat", json!({"prompt": "hi", "agent": long}))
            .await,
        server
            .post(&format!("/api/store/{long}/install"), json!(null))
            .await,
    ] {
        let error = body["error"].as_str().unwrap();
        assert!(status.is_client_error(), "{status}");
        assert!(error.contains(&cut) && error.len() < 300, "{error}");
    }
}
