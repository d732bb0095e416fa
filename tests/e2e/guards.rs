//! Request guards: loopback-only endpoints judged by the TCP peer, cross-origin writes, and
//! DNS rebinding.

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Method, Request, StatusCode};
use serde_json::{Value, json};
use service_runtime::agents::profiles::{self, ProfileInput};
use service_runtime::app::{App, Role};
use service_runtime::http::guards::Binding;
use service_runtime::http::{AppState, router};
use service_runtime::tasks::{self, NewTask};
use tower::ServiceExt;

use crate::support::{Server, assert_error};

#[tokio::test]
async fn foreign_origin_cannot_change_state() {
    let server = Server::start();
    let client = reqwest::Client::new();
    let response = client
        .post(server.url("/api/agents"))
        .header("origin", "https://evil.example")
        .json(&json!({"name": "Injected", "system_prompt": "x"}))
        .send()
        .await
        .unwrap();
    assert_error(
        &crate::support::json_of(response).await,
        StatusCode::FORBIDDEN,
        "cross-origin",
    );
    assert_error(
        &server.get("/api/agents/Injected").await,
        StatusCode::NOT_FOUND,
        "no agent",
    );

    // The dashboard itself sends its own origin.
    let response = client
        .post(server.url("/api/agents"))
        .header("origin", &server.url)
        .json(&json!({"name": "Mine", "system_prompt": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
}

#[tokio::test]
async fn rebound_host_names_are_refused() {
    let server = Server::start();
    let response = reqwest::Client::new()
        .get(server.url("/api/health"))
        .header("host", "attacker.example:8765")
        .send()
        .await
        .unwrap();
    assert_error(
        &crate::support::json_of(response).await,
        StatusCode::FORBIDDEN,
        "Host header",
    );
    let port = server.url.rsplit(':').next().unwrap();
    let response = reqwest::get(format!("http://localhost:{port}/api/health"))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

/// The loopback guard judges the socket's peer address. A real non-loopback peer cannot reach
/// a test server bound to 127.0.0.1, so this drives the same router in process with the peer
/// address a remote client would have.
#[tokio::test]
async fn loopback_only_endpoints_refuse_remote_peers() {
    let tmp = tempfile::tempdir().unwrap();
    let service = App::open(tmp.path(), Role::Server).await.unwrap();
    let db = service.db.clone();
    let task_id = db
        .blocking(|conn| {
            let task = tasks::create(
                conn,
                &NewTask {
                    title: "keep me",
                    ..NewTask::default()
                },
            )?;
            let temp = ProfileInput {
                name: Some("Temp".into()),
                system_prompt: Some("x".into()),
                ..ProfileInput::default()
            };
            profiles::insert(conn, &temp.validate()?)?;
            Ok(task.task_id)
        })
        .unwrap();
    let app = router(
        AppState::new(&service).unwrap(),
        Binding { loopback: false },
        Default::default(),
    );

    let call = |method: Method, uri: String, body: Value, peer: [u8; 4]| {
        let request = Request::builder()
            .method(method)
            .uri(uri)
            .header("host", "10.0.0.2:8765")
            .header("content-type", "application/json")
            .extension(ConnectInfo(SocketAddr::from((peer, 40000))))
            .body(Body::from(body.to_string()))
            .unwrap();
        app.clone().oneshot(request)
    };
    let remote = [10, 0, 0, 9];
    let key = json!({"env_var": "ANTHROPIC_API_KEY", "value": "x"});

    let answer = call(
        Method::DELETE,
        format!("/api/tasks/{task_id}"),
        json!(null),
        remote,
    )
    .await
    .unwrap();
    assert_eq!(answer.status(), StatusCode::FORBIDDEN);
    let answer = call(
        Method::POST,
        "/api/integrations/anthropic/keys".into(),
        key.clone(),
        remote,
    )
    .await
    .unwrap();
    assert_eq!(answer.status(), StatusCode::FORBIDDEN);
    let body = axum::body::to_bytes(answer.into_body(), 1 << 16)
        .await
        .unwrap();
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert!(body["error"].as_str().unwrap().contains("local machine"));
    assert!(
        db.blocking(|conn| tasks::get(conn, &task_id))
            .unwrap()
            .is_some(),
        "task untouched"
    );
    assert!(!tmp.path().join(".env").exists(), "no key written");
    let answer = call(
        Method::DELETE,
        "/api/agents/Temp".into(),
        json!(null),
        remote,
    )
    .await
    .unwrap();
    assert_eq!(answer.status(), StatusCode::FORBIDDEN);
    assert!(
        db.blocking(|conn| profiles::get(conn, "Temp"))
            .unwrap()
            .is_some(),
        "agent untouched"
    );
    for toggle in ["disable", "enable"] {
        let answer = call(
            Method::POST,
            format!("/api/adapters/scheduler/{toggle}"),
            json!(null),
            remote,
        )
        .await
        .unwrap();
        assert_eq!(answer.status(), StatusCode::FORBIDDEN, "{toggle}");
    }

    // The same requests from a loopback peer go through.
    let answer = call(
        Method::DELETE,
        format!("/api/tasks/{task_id}"),
        json!(null),
        [127, 0, 0, 1],
    )
    .await
    .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    let answer = call(
        Method::POST,
        "/api/integrations/anthropic/keys".into(),
        key,
        [127, 0, 0, 1],
    )
    .await
    .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    let answer = call(
        Method::DELETE,
        "/api/agents/Temp".into(),
        json!(null),
        [127, 0, 0, 1],
    )
    .await
    .unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
}
