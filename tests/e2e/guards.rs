//! Request guards: loopback-only endpoints judged by the TCP peer, cross-origin writes, and
//! DNS rebinding.

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Method, Request, StatusCode};
use serde_json::{Value, json};
use service_runtime::access::{
    self,
    tokens::{self, NewToken},
};
use service_runtime::agents::profiles::{self, ProfileInput};
use service_runtime::app::{App, Role};
use service_runtime::http::guards::Binding;
use service_runtime::http::{AppState, router};
use service_runtime::tasks::{self, NewTask};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
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

/// The status line's code of a request written by hand: headers no client library sends twice.
async fn raw_status(server: &Server, request: String) -> u16 {
    let mut stream = TcpStream::connect(server.url.trim_start_matches("http://"))
        .await
        .unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut status_line = [0u8; 12];
    stream.read_exact(&mut status_line).await.unwrap();
    String::from_utf8_lossy(&status_line[9..]).parse().unwrap()
}

#[tokio::test]
async fn a_host_or_origin_read_two_ways_is_a_bad_request() {
    let server = Server::start();
    let addr = server.url.trim_start_matches("http://");
    let get = |path: &str, headers: &str| format!("GET {path} HTTP/1.1\r\n{headers}\r\n");
    let post = |headers: &str| {
        let body = r#"{"name":"Sneaky","system_prompt":"x"}"#;
        format!(
            "POST /api/agents HTTP/1.1\r\n{headers}Content-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let cases = [
        (get("/api/health", &format!("Host: {addr}\r\n")), 200),
        (
            get(
                "/api/health",
                &format!("Host: {addr}\r\nHost: evil.example\r\n"),
            ),
            400,
        ),
        (
            get("/api/health", &format!("Host: {addr}@evil.example\r\n")),
            400,
        ),
        (get("/api/health", &format!("Host: {addr}/x\r\n")), 400),
        // Adapter routes skip the browser checks, not this one.
        (
            get(
                "/api/adapters/none/x",
                &format!("Host: {addr}\r\nHost: {addr}\r\n"),
            ),
            400,
        ),
        (
            get("/api/adapters/none/x", &format!("Host: {addr}\r\n")),
            404,
        ),
        (
            post(&format!(
                "Host: {addr}\r\nOrigin: http://{addr}\r\nOrigin: https://evil.example\r\n"
            )),
            400,
        ),
        (
            post(&format!(
                "Host: {addr}\r\nOrigin: http://{addr}@evil.example\r\n"
            )),
            403,
        ),
    ];
    for (request, expected) in cases {
        assert_eq!(
            raw_status(&server, request.clone()).await,
            expected,
            "{request}"
        );
    }
    assert_error(
        &server.get("/api/agents/Sneaky").await,
        StatusCode::NOT_FOUND,
        "no agent",
    );
}

/// The loopback guard judges the socket's peer address. A real non-loopback peer cannot reach
/// a test server bound to 127.0.0.1, so this drives the same router in process with the peer
/// address a remote client would have. Bound to a network address, the server wants a
/// credential from everyone; the specification's two loopback-only endpoints (spec 4.1, 5)
/// refuse even an admin elsewhere, the other writes need only their permission.
#[tokio::test]
async fn loopback_only_endpoints_refuse_remote_peers() {
    let tmp = tempfile::tempdir().unwrap();
    let service = App::open(tmp.path(), Role::Server).await.unwrap();
    let db = service.db.clone();
    let (task_id, admin) = db
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
            let new = NewToken::new("ops", access::Role::Admin, None, "test")?;
            Ok((task.task_id, tokens::create(conn, &new)?.1))
        })
        .unwrap();
    let app = router(
        AppState::new(&service, Binding { loopback: false }).unwrap(),
        Default::default(),
    );

    let call = |method: Method, uri: String, body: Value, peer: [u8; 4], token: Option<&str>| {
        let mut request = Request::builder()
            .method(method)
            .uri(uri)
            .header("host", "10.0.0.2:8765")
            .header("content-type", "application/json")
            .extension(ConnectInfo(SocketAddr::from((peer, 40000))));
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        app.clone()
            .oneshot(request.body(Body::from(body.to_string())).unwrap())
    };
    let remote = [10, 0, 0, 9];
    let key = json!({"env_var": "ANTHROPIC_API_KEY", "value": "x"});
    let delete_task = format!("/api/tasks/{task_id}");
    let write_key = "/api/integrations/anthropic/keys".to_owned();

    // Nobody, from anywhere, this machine included: 401.
    for peer in [remote, [127, 0, 0, 1]] {
        for (method, uri) in [
            (Method::DELETE, delete_task.clone()),
            (Method::POST, write_key.clone()),
            (Method::DELETE, "/api/agents/Temp".into()),
            (Method::POST, "/api/adapters/scheduler/disable".into()),
        ] {
            let answer = call(method, uri.clone(), key.clone(), peer, None)
                .await
                .unwrap();
            assert_eq!(answer.status(), StatusCode::UNAUTHORIZED, "{uri}");
        }
    }
    // An admin elsewhere: the specification's two are refused.
    for (method, uri) in [
        (Method::DELETE, delete_task.clone()),
        (Method::POST, write_key.clone()),
    ] {
        let answer = call(method, uri, key.clone(), remote, Some(&admin))
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::FORBIDDEN);
        let body = axum::body::to_bytes(answer.into_body(), 1 << 16)
            .await
            .unwrap();
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert!(body["error"].as_str().unwrap().contains("local machine"));
    }
    assert!(
        db.blocking(|conn| tasks::get(conn, &task_id))
            .unwrap()
            .is_some(),
        "task untouched"
    );
    assert!(!tmp.path().join(".env").exists(), "no key written");
    // The other writes need only the permission.
    for toggle in ["disable", "enable"] {
        let answer = call(
            Method::POST,
            format!("/api/adapters/scheduler/{toggle}"),
            json!(null),
            remote,
            Some(&admin),
        )
        .await
        .unwrap();
        assert_eq!(answer.status(), StatusCode::OK, "{toggle}");
    }

    // The same admin on this machine: everything goes through.
    for (method, uri, body) in [
        (Method::DELETE, delete_task, json!(null)),
        (Method::POST, write_key, key),
        (Method::DELETE, "/api/agents/Temp".to_owned(), json!(null)),
    ] {
        let answer = call(method, uri.clone(), body, [127, 0, 0, 1], Some(&admin))
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::OK, "{uri}");
    }
}
