//! `/api/integrations`: listing without secrets, the key write, and live probes against fake
//! platforms that speak the real APIs' shape.

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::support::{Server, assert_error, spawn_fake};

pub(crate) fn entry<'a>(body: &'a Value, id: &str) -> &'a Value {
    body["integrations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == id)
        .unwrap()
}

pub(crate) const OPENAI_KEY: &str = "sk-test-zq9xk7w4";
pub(crate) const SIGNING_SECRET: &str = "9f1e2d3c4b5a69788796a5b4c3d2e1f0";

#[tokio::test]
async fn key_write_rejects_bad_input_without_writing() {
    let server = Server::start();
    let cases = [
        (
            "anthropic",
            json!({"env_var": "OPENAI_API_KEY", "value": "x"}),
            StatusCode::BAD_REQUEST,
            "not a variable of anthropic",
        ),
        (
            "anthropic",
            json!({"env_var": "PATH", "value": "x"}),
            StatusCode::BAD_REQUEST,
            "not a variable",
        ),
        (
            "anthropic",
            json!({"env_var": "ANTHROPIC_API_KEY", "value": "  "}),
            StatusCode::BAD_REQUEST,
            "must not be empty",
        ),
        (
            "anthropic",
            json!({"env_var": "ANTHROPIC_API_KEY", "value": "a\nB=c"}),
            StatusCode::BAD_REQUEST,
            "single line",
        ),
        (
            "anthropic",
            json!({"env_var": "ANTHROPIC_API_KEY"}),
            StatusCode::BAD_REQUEST,
            "value is required",
        ),
        (
            "anthropic",
            json!({"env_var": "ANTHROPIC_API_KEY", "value": "k".repeat(4097)}),
            StatusCode::BAD_REQUEST,
            "value must be at most 4096 bytes",
        ),
        (
            "nope",
            json!({"env_var": "X", "value": "x"}),
            StatusCode::NOT_FOUND,
            "no integration",
        ),
    ];
    for (id, body, status, needle) in cases {
        assert_error(
            &server
                .post(&format!("/api/integrations/{id}/keys"), body)
                .await,
            status,
            needle,
        );
    }
    assert!(!server.data_dir.join(".env").exists());
    // The bound is inclusive.
    let (status, _) = server
        .post(
            "/api/integrations/anthropic/keys",
            json!({"env_var": "ANTHROPIC_API_KEY", "value": "k".repeat(4096)}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
}

/// An OpenAI-compatible `/models` that accepts one key and, like the real one, echoes part of
/// a rejected key in its error body.
async fn fake_openai() -> String {
    let router = Router::new().route(
        "/v1/models",
        get(|headers: HeaderMap| async move {
            let auth = headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            if auth == "Bearer sk-good" {
                (
                    StatusCode::OK,
                    axum::Json(json!({"object": "list", "data": [{"id": "m", "object": "model"}]})),
                )
            } else {
                let error =
                    json!({"error": {"message": format!("Incorrect API key provided: {auth}")}});
                (StatusCode::UNAUTHORIZED, axum::Json(error))
            }
        }),
    );
    format!("{}/v1", spawn_fake(router).await)
}

#[tokio::test]
async fn verify_probes_the_provider_and_remembers_the_outcome() {
    let base = fake_openai().await;
    let server = Server::start_with(&[("SERVICE_OPENAI_BASE_URL", &base)]);
    // Written through the API, not the process environment (which would win over the next).
    server
        .write_key("openai", "OPENAI_API_KEY", "sk-good")
        .await;
    let (status, body) = server
        .post("/api/integrations/openai/verify", json!(null))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["ok"], true, "{body}");
    let (_, list) = server.get("/api/integrations").await;
    assert_eq!(entry(&list, "openai")["verified"], true);

    // A new key makes the old verdict meaningless; the next probe fails without leaking it.
    let write = json!({"env_var": "OPENAI_API_KEY", "value": "sk-bad-zq9x"});
    assert_eq!(
        server.post("/api/integrations/openai/keys", write).await.0,
        StatusCode::OK
    );
    let (_, list) = server.get("/api/integrations").await;
    assert_eq!(entry(&list, "openai")["verified"], json!(null));
    let (_, body) = server
        .post("/api/integrations/openai/verify", json!(null))
        .await;
    assert_eq!(body["ok"], false);
    assert_eq!(body["error"], "HTTP 401 Unauthorized");
    assert!(!body.to_string().contains("zq9x"));
    let (_, list) = server.get("/api/integrations").await;
    assert_eq!(entry(&list, "openai")["verified"], false);
}

#[tokio::test]
async fn verify_reads_the_team_chat_ok_field() {
    let router = Router::new().route(
        "/api/auth.test",
        post(|| async { axum::Json(json!({"ok": false, "error": "invalid_auth"})) }),
    );
    let base = format!("{}/api", spawn_fake(router).await);
    let server = Server::start_with(&[
        ("SERVICE_TEAMCHAT_API_BASE", &base),
        ("SERVICE_TEAMCHAT_BOT_TOKEN", "xoxb-1"),
        (
            "SERVICE_TEAMCHAT_SIGNING_SECRET",
            "0123456789abcdef0123456789abcdef",
        ),
    ]);
    let (status, body) = server
        .post("/api/integrations/teamchat/verify", json!(null))
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["ok"], false);
    assert!(
        body["error"].as_str().unwrap().contains("invalid_auth"),
        "{body}"
    );
}

#[tokio::test]
async fn verify_without_probe_or_settings_says_so() {
    let server = Server::start();
    let (_, body) = server
        .post("/api/integrations/webhook/verify", json!(null))
        .await;
    assert_eq!(
        (body["ok"].as_bool(), body["error"].as_str()),
        (Some(false), Some("no probe"))
    );
    let (_, body) = server
        .post("/api/integrations/anthropic/verify", json!(null))
        .await;
    assert_eq!(body["ok"], false);
    assert!(body["error"].as_str().unwrap().contains("not configured"));
    let (_, list) = server.get("/api/integrations").await;
    assert_eq!(entry(&list, "webhook")["verified"], json!(null));
    assert_error(
        &server
            .post("/api/integrations/nope/verify", json!(null))
            .await,
        StatusCode::NOT_FOUND,
        "no integration",
    );
}
