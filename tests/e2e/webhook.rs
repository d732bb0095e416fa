//! The bundled webhook adapter through the real binary: `X-Signature: sha256=<hex>` over the
//! raw body, input checks, unknown agents, and a run that answers with its trace.

use hmac::{Hmac, Mac};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::support::{Server, assert_error, json_of};

pub(crate) const SECRET: &str = "webhook-test-secret";

pub(crate) fn sign(secret: &str, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body.as_bytes());
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

async fn run(server: &Server, body: &str, signature: Option<String>) -> (StatusCode, Value) {
    let mut request = reqwest::Client::new()
        .post(server.url("/api/adapters/webhook/run"))
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(signature) = signature {
        request = request.header("x-signature", signature);
    }
    json_of(request.send().await.unwrap()).await
}

pub(crate) async fn signed(server: &Server, body: &str) -> (StatusCode, Value) {
    run(server, body, Some(sign(SECRET, body))).await
}

#[tokio::test]
async fn signed_requests_run_agents() {
    let server = Server::start_with(&[("SERVICE_WEBHOOK_SECRET", SECRET)]);
    let entry = server.adapter("webhook").await.unwrap();
    assert_eq!(entry["status"], "running", "{entry}");
    assert!(
        entry["metadata"]["auth"]
            .as_str()
            .unwrap()
            .contains("X-Signature: sha256=")
    );

    let body = json!({"prompt": "summarise the build", "agent": "default"}).to_string();
    let (status, answer) = signed(&server, &body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert!(
        answer["text"]
            .as_str()
            .unwrap()
            .contains("summarise the build")
    );
    let trace_id = answer["trace_id"].as_str().unwrap();
    let (status, trace) = server.get(&format!("/api/traces/{trace_id}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(trace["source"], "webhook");
    // Without `agent`, the default profile answers.
    let (status, answer) = signed(&server, r#"{"prompt": "no agent named"}"#).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let (_, trace) = server
        .get(&format!(
            "/api/traces/{}",
            answer["trace_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(trace["agent_profile_name"], "default");

    let (status, _) = run(&server, &body, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = run(&server, &body, Some(sign("wrong", &body))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = run(
        &server,
        &body,
        Some(sign(SECRET, &body).replace("sha256=", "")),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    for (bad, status, needle) in [
        ("{not json", StatusCode::BAD_REQUEST, "not JSON"),
        (r#"{"prompt": "  "}"#, StatusCode::BAD_REQUEST, "prompt"),
        (r#"{"agent": "default"}"#, StatusCode::BAD_REQUEST, "prompt"),
        (
            r#"{"prompt": "hi", "agent": 7}"#,
            StatusCode::BAD_REQUEST,
            "agent",
        ),
        (
            r#"{"prompt": "hi", "agent": "nobody"}"#,
            StatusCode::NOT_FOUND,
            "nobody",
        ),
    ] {
        assert_error(&signed(&server, bad).await, status, needle);
    }

    let (status, answer) = server.get("/api/adapters/webhook/run").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{answer}");
    assert_eq!(answer["error"], "GET /run is served for POST only");
}

#[tokio::test]
async fn an_unset_secret_answers_503() {
    let server = Server::start();
    let entry = server.adapter("webhook").await.unwrap();
    assert_eq!(
        (&entry["status"], &entry["error_message"]),
        (
            &json!("error"),
            &json!("ConfigError: SERVICE_WEBHOOK_SECRET is not set")
        ),
        "{entry}"
    );
    assert_eq!(entry["missing_settings"], json!(["SERVICE_WEBHOOK_SECRET"]));
    let body = r#"{"prompt": "hi"}"#;
    let answer = run(&server, body, Some(sign(SECRET, body))).await;
    assert_error(
        &answer,
        StatusCode::SERVICE_UNAVAILABLE,
        "SERVICE_WEBHOOK_SECRET",
    );
}
