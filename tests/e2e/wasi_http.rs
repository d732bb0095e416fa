//! A standard `wasi:http/proxy` component (`adapters-wasm/fixtures/proxy`, built with the
//! `wasi` crate and no project WIT) through the real binary: dropped in, it serves every path
//! under its prefix, and what it sends through `wasi:http/outgoing-handler` goes under the
//! same grant and policy as `outbound-http`. One that also imports the contract's `agent`
//! (`fixtures/proxy-agent`) runs agents.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::HeaderMap;
use axum::response::Redirect;
use axum::routing::get;
use reqwest::{Method, StatusCode};
use serde_json::Value;

use crate::fakes::llm::{self, Reply};
use crate::guests::guest;
use crate::support::{Server, cli, eventually, openai_env, spawn_fake};
use crate::wasm::drop_in;

async fn running(server: &Server, name: &str) -> Value {
    eventually(60, async || {
        let entry = server.adapter(name).await?;
        assert_ne!(entry["status"], "error", "refused: {entry}");
        (entry["status"] == "running").then_some(entry)
    })
    .await
}

/// The `authorization` header a request carried, or `none`.
async fn authorization(headers: HeaderMap) -> String {
    headers
        .get("authorization")
        .map_or("none".to_owned(), |v| v.to_str().unwrap().to_owned())
}

#[tokio::test]
async fn a_wasi_http_component_serves_its_prefix_and_sends_under_its_grant() {
    let _heavy = crate::support::heavy().await;
    let reached = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&reached);
    let away = spawn_fake(Router::new().route(
        "/x",
        get(move || async move {
            counter.fetch_add(1, Ordering::SeqCst);
            "reached"
        }),
    ))
    .await;
    let to_away = format!("{away}/x");
    let home = spawn_fake(Router::new().route("/x", get(authorization)).route(
        "/to-away",
        get(move || async move { Redirect::temporary(&to_away) }),
    ))
    .await;
    let seen = spawn_fake(Router::new().route("/x", get(authorization))).await;
    let server = Server::start_with(&[("PROXY_TOKEN", "s3cret")]);
    drop_in(
        &server,
        "proxy",
        &guest("proxy"),
        &format!(
            "secrets = [\"PROXY_TOKEN\"]\noutbound_hosts = [\"{home}\", \"{seen}\"]\n\
             [secret_origins]\nPROXY_TOKEN = [\"{home}\"]\n[limits]\nhandle_http_ms = 30000\n"
        ),
    );
    let entry = running(&server, "proxy").await;
    assert_eq!(entry["kind"], "wasm");
    assert!(entry["version"].is_null(), "{entry}");
    assert_eq!(entry["metadata"]["world"], "wasi:http/proxy");
    let capabilities = entry["capabilities"].to_string();
    assert!(
        capabilities.contains(&format!("origin:{home}"))
            && capabilities.contains("secret:PROXY_TOKEN"),
        "importing wasi:http/outgoing-handler asks for the outbound grant: {entry}"
    );

    // Every method and path under the prefix, the prefix itself included; the component sees
    // the path below it, and the prefix in a header.
    let root = reqwest::get(server.url("/api/adapters/proxy/"))
        .await
        .unwrap();
    assert_eq!(root.status(), StatusCode::OK);
    assert_eq!(root.headers()["content-security-policy"], "sandbox");
    assert_eq!(
        root.text().await.unwrap(),
        "hello from a wasi:http component"
    );
    // The prefix is the host's to say, whatever a client sends.
    let echoed = reqwest::Client::new()
        .put(server.url("/api/adapters/proxy/echo?a=1&b=2"))
        .header("x-forwarded-prefix", "/elsewhere")
        .body("ping")
        .send()
        .await
        .unwrap();
    let (status, echoed) = (echoed.status(), echoed.text().await.unwrap());
    assert_eq!(
        (status, echoed.as_str()),
        (
            StatusCode::OK,
            "PUT /echo?a=1&b=2\nprefix=/api/adapters/proxy\nbody=ping"
        )
    );
    let (status, _) = server
        .send_text(Method::DELETE, "/api/adapters/proxy/any/depth/at/all", "")
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "its own 404");

    let fetch = async |url: &str| {
        server
            .send_text(
                Method::GET,
                &format!("/api/adapters/proxy/fetch?url={url}"),
                "",
            )
            .await
    };
    // A granted origin; the secret placeholder filled for the origin it is bound to only.
    assert_eq!(
        fetch(&format!("{home}/x")).await,
        (StatusCode::OK, "200\nBearer s3cret".to_owned())
    );
    assert_eq!(
        fetch(&format!("{seen}/x")).await,
        (
            StatusCode::BAD_GATEWAY,
            "ErrorCode::HttpRequestDenied".to_owned()
        ),
        "PROXY_TOKEN may not go to {seen}"
    );
    // An ungranted origin is refused before anything leaves, and said on the entry.
    assert_eq!(
        fetch(&format!("{away}/x")).await,
        (
            StatusCode::BAD_GATEWAY,
            "ErrorCode::HttpRequestDenied".to_owned()
        )
    );
    let entry = server.adapter("proxy").await.unwrap();
    let error = entry["error_message"].as_str().unwrap();
    assert!(
        error.starts_with("CapabilityDenied:") && error.contains(&format!("{away} is not granted")),
        "{entry}"
    );
    // A redirect comes back to the guest, as wasi:http says; its target is never reached.
    assert_eq!(
        fetch(&format!("{home}/to-away")).await,
        (StatusCode::OK, format!("307\n\nlocation={away}/x"))
    );
    assert_eq!(reached.load(Ordering::SeqCst), 0);

    // The body is read while the guest writes it, up to the cap every answer has.
    let (status, big) = server
        .send_text(Method::GET, "/api/adapters/proxy/big?kib=100", "")
        .await;
    assert_eq!((status, big.len()), (StatusCode::OK, 100 * 1024));
    let (status, said) = server
        .send_text(Method::GET, "/api/adapters/proxy/big?kib=5000", "")
        .await;
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{said}");
    // A deadline holds like any component's, and the component serves on after. (The one
    // above is long for a busy machine's sake; a copy with a short one spins.)
    drop_in(
        &server,
        "spinner",
        &guest("proxy"),
        "[limits]\nhandle_http_ms = 1000\n",
    );
    running(&server, "spinner").await;
    let (status, _) = server
        .send_text(Method::GET, "/api/adapters/spinner/spin", "")
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    let entry = server.adapter("spinner").await.unwrap();
    assert!(
        entry["error_message"]
            .as_str()
            .unwrap()
            .starts_with("Timeout:"),
        "{entry}"
    );
    assert_eq!(
        server
            .send_text(Method::GET, "/api/adapters/spinner/", "")
            .await
            .0,
        StatusCode::OK
    );
}

/// A hostile call that starts 20 outgoing requests at once gets its share in flight and a
/// clear error for the rest, while a call beside it sends its own.
#[tokio::test]
async fn a_call_keeps_to_its_share_of_requests_in_flight_and_a_neighbour_keeps_its_own() {
    // The upstream answers when the test says, once both calls' shares have reached it and the
    // hostile call has been refused the rest (or after 20 s, for a failure to show): however
    // slowly a busy machine runs the guest, none of its requests ends while it starts others.
    let upstream = Arc::new((AtomicUsize::new(0), tokio::sync::Notify::new()));
    let slow = spawn_fake(Router::new().route(
        "/slow",
        get({
            let upstream = Arc::clone(&upstream);
            || async move {
                let (arrived, release) = &*upstream;
                let released = release.notified();
                arrived.fetch_add(1, Ordering::SeqCst);
                let _ = tokio::time::timeout(Duration::from_secs(20), released).await;
                "slow"
            }
        }),
    ))
    .await;
    let server = Server::start();
    drop_in(
        &server,
        "proxy",
        &guest("proxy"),
        &format!(
            "outbound_hosts = [\"{slow}\"]\n[limits]\nhttp_requests_at_once = 4\n\
             handle_http_ms = 30000\n"
        ),
    );
    running(&server, "proxy").await;
    let arrived = |at_least: usize| {
        let upstream = Arc::clone(&upstream);
        async move {
            eventually(20, async || {
                (upstream.0.load(Ordering::SeqCst) >= at_least).then_some(())
            })
            .await
        }
    };
    let many = format!("/api/adapters/proxy/many?url={slow}/slow&n=20");
    let hostile = server.send_text(Method::GET, &many, "");
    let neighbour = async {
        arrived(4).await;
        let path = format!("/api/adapters/proxy/many?url={slow}/slow&n=4");
        server.send_text(Method::GET, &path, "").await
    };
    let release = async {
        arrived(8).await;
        eventually(20, async || {
            let entry = server.adapter("proxy").await?;
            (entry["error_count"].as_u64()? >= 16).then_some(())
        })
        .await;
        upstream.1.notify_waiters();
    };
    let (hostile, neighbour, ()) = tokio::join!(hostile, neighbour, release);
    assert_eq!(
        hostile,
        (
            StatusCode::OK,
            "ErrorCode::ConnectionLimitReached=16 ok=4".to_owned()
        )
    );
    assert_eq!(
        neighbour,
        (StatusCode::OK, "ok=4".to_owned()),
        "a call beside it has its own share"
    );
    let entry = server.adapter("proxy").await.unwrap();
    let error = entry["error_message"].as_str().unwrap();
    assert!(
        error.starts_with("QuotaExceeded:") && error.contains("limits.http_requests_at_once"),
        "{entry}"
    );
}

#[tokio::test]
async fn the_cli_installs_a_wasi_http_component_under_its_files_name() {
    let data = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("hello-http.wasm");
    std::fs::copy(guest("proxy"), &file).unwrap();
    let out = cli(
        data.path(),
        &["adapters", "install", file.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.starts_with("installed hello-http (wasi:http)"),
        "{said}"
    );
    assert!(data.path().join("adapters/hello-http.wasm").exists());

    let server = Server::start_in(data.path(), &[]);
    running(&server, "hello-http").await;
    assert_eq!(
        server
            .send_text(Method::GET, "/api/adapters/hello-http/", "")
            .await,
        (
            StatusCode::OK,
            "hello from a wasi:http component".to_owned()
        )
    );
}

#[tokio::test]
async fn a_wasi_http_component_runs_agents_by_importing_one_interface() {
    let fake = llm::openai(vec![Reply::Text("Hello from the agent.")]).await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    drop_in(&server, "asker", &guest("proxy_agent"), "agent = true\n");
    let entry = running(&server, "asker").await;
    assert_eq!(
        entry["capabilities"],
        serde_json::json!(["agent"]),
        "{entry}"
    );
    assert_eq!(
        server
            .send_text(Method::POST, "/api/adapters/asker/ask", "Say hello")
            .await,
        (StatusCode::OK, "Hello from the agent.".to_owned())
    );
    let prompt = &fake.requests()[0].body["messages"];
    assert!(prompt.to_string().contains("Say hello"), "{prompt}");

    // Without the grant the import is there, and refused when called.
    drop_in(&server, "ungranted", &guest("proxy_agent"), "");
    let entry = running(&server, "ungranted").await;
    assert_eq!(entry["metadata"]["ungranted_imports"], "agent", "{entry}");
    let (status, said) = server
        .send_text(Method::POST, "/api/adapters/ungranted/ask", "Say hello")
        .await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert!(
        said.contains("Denied") && said.contains("without the agent grant"),
        "{said}"
    );
    assert_eq!(fake.requests().len(), 1, "no model call without the grant");
}
