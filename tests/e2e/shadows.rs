//! A shadow build through the binary: `adapters install --shadow` puts echo's version 2
//! beside version 1; live calls are answered by version 1 alone, and version 2 runs on each
//! with its imports answered from the live call's. The route it answers differently is
//! counted and shown with what it was refused; what it fetches never reaches the platform;
//! `promote` makes it serve and `unshadow` drops one.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use reqwest::StatusCode;
use serde_json::Value;

use crate::guests::{echo_v2, guest};
use crate::support::{Server, cli, eventually, spawn_fake};
use crate::wasm::{drop_in, loaded};

/// `adapters ARGS...`: whether it succeeded, and what it printed.
fn adapters(server: &Server, args: &[&str]) -> (bool, String) {
    let mut all = vec!["adapters"];
    all.extend_from_slice(args);
    let done = cli(&server.data_dir, &all);
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&done.stdout),
        String::from_utf8_lossy(&done.stderr)
    );
    (done.status.success(), printed)
}

async fn answer(server: &Server, method: reqwest::Method, path: &str, body: &str) -> String {
    let response = reqwest::Client::new()
        .request(method, server.url(&format!("/api/adapters/echo{path}")))
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK, "{path}");
    response.text().await.unwrap()
}

/// The shadow's comparisons once `compared` calls are counted.
async fn compared(server: &Server, compared: i64) -> Value {
    eventually(30, async || {
        let (status, body) = server.get("/api/adapters/echo/shadow").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        (body["compared"].as_i64() >= Some(compared)).then_some(body)
    })
    .await
}

/// Waits until the registry entry names version `version` as echo's shadow build.
async fn shadowed_by(server: &Server, version: &str) {
    let said = eventually(30, async || {
        let entry = server.adapter("echo").await?;
        entry["metadata"]["shadow"].as_str().map(str::to_owned)
    })
    .await;
    assert!(
        said.starts_with(&format!("{version} (")) && said.ends_with("on 100% of calls"),
        "{said}"
    );
}

#[tokio::test]
async fn a_shadow_build_is_compared_on_live_calls_and_promoted() {
    let fetched = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&fetched);
    let platform = spawn_fake(axum::Router::new().route(
        "/page",
        axum::routing::get(move || async move {
            counter.fetch_add(1, Ordering::SeqCst);
            "the page"
        }),
    ))
    .await;
    let server = Server::start_with(&[("ECHO_TOKEN", "tok-shadowed-1")]);
    let grant = format!(
        "kv = true\nsecrets = [\"ECHO_TOKEN\"]\noutbound_hosts = [\"{platform}\"]\n\
         [secret_origins]\nECHO_TOKEN = [\"{platform}\"]\n\
         [limits]\nshadow_duty_percent = 100\n"
    );
    drop_in(&server, "echo", &guest("echo"), &grant);
    loaded(&server, "echo").await;
    let (status, body) = server.get("/api/adapters/echo/shadow").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(body["error"].as_str().unwrap().contains("no shadow build"));

    // Only a build of a serving adapter shadows.
    let (done, printed) = adapters(
        &server,
        &["install", guest("hostile").to_str().unwrap(), "--shadow"],
    );
    assert!(!done && printed.contains("install it first"), "{printed}");
    let v2 = echo_v2();
    let (done, printed) = adapters(&server, &["install", v2.to_str().unwrap(), "--shadow"]);
    assert!(
        done && printed.contains("shadows the serving build"),
        "{printed}"
    );
    shadowed_by(&server, "2").await;

    // Version 1 answers every live call; each is compared before the next (the shadow runs
    // one at a time: a call that finds it busy is skipped).
    use reqwest::Method;
    let hello = answer(&server, Method::GET, "/hello", "").await;
    assert_eq!(hello, "hello from echo v1");
    compared(&server, 1).await;
    let page = answer(
        &server,
        Method::GET,
        &format!("/fetch?url={platform}/page"),
        "",
    )
    .await;
    assert_eq!(page, "200\nthe page");
    compared(&server, 2).await;
    assert_eq!(
        answer(&server, Method::POST, "/kv?key=k", "kept").await,
        "stored"
    );
    compared(&server, 3).await;
    assert_eq!(answer(&server, Method::GET, "/kv?key=k", "").await, "kept");

    let shadow = compared(&server, 4).await;
    assert_eq!(shadow["compared"], 4, "{shadow}");
    assert_eq!(shadow["matched"], 3, "only /hello differs: {shadow}");
    assert_eq!(shadow["skipped"], 0, "{shadow}");
    assert_eq!(shadow["version"], "2");
    let differences = shadow["differences"].as_array().unwrap();
    assert_eq!(differences.len(), 1, "{shadow}");
    let difference = &differences[0];
    assert_eq!(difference["export"], "handle-http");
    assert_eq!(difference["input"]["path"], "/hello");
    assert_eq!(
        difference["live"]["output"]["body"]["utf8"],
        "hello from echo v1"
    );
    assert_eq!(
        difference["shadow"]["output"]["body"]["utf8"],
        "hello from echo v2"
    );
    // Version 2 logs first: the live call did not, so that import was refused, not done.
    assert_eq!(
        difference["refused"][0]["import"], "log.log",
        "{difference}"
    );
    // Its fetch was answered from the live call's: the platform saw the live one alone.
    assert_eq!(fetched.load(Ordering::SeqCst), 1);
    // Its kv write was answered too, never made: what the live call stored is what is kept.
    assert_eq!(answer(&server, Method::GET, "/kv?key=k", "").await, "kept");

    let (done, printed) = adapters(&server, &["promote", "echo"]);
    assert!(done && printed.contains("promoted"), "{printed}");
    eventually(30, async || {
        let hello = reqwest::get(server.url("/api/adapters/echo/hello"))
            .await
            .ok()?;
        (hello.text().await.ok()? == "hello from echo v2").then_some(())
    })
    .await;
    let entry = eventually(30, async || {
        let entry = server.adapter("echo").await?;
        entry["metadata"]["shadow"].is_null().then_some(entry)
    })
    .await;
    assert_eq!(entry["version"], "2");
    let (status, _) = server.get("/api/adapters/echo/shadow").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(!server.data_dir.join("adapters/echo.shadow.wasm").exists());
    let (done, printed) = adapters(&server, &["promote", "echo"]);
    assert!(!done && printed.contains("no shadow build"), "{printed}");

    // Version 1 back as a shadow of version 2, then dropped.
    let v1 = guest("echo");
    let (done, printed) = adapters(&server, &["install", v1.to_str().unwrap(), "--shadow"]);
    assert!(done, "{printed}");
    shadowed_by(&server, "1").await;
    answer(&server, Method::GET, "/hello", "").await;
    let shadow = compared(&server, 1).await;
    assert_eq!(
        (shadow["version"].as_str(), shadow["matched"].as_i64()),
        (Some("1"), Some(0))
    );
    let (done, printed) = adapters(&server, &["unshadow", "echo"]);
    assert!(done && printed.contains("dropped"), "{printed}");
    eventually(30, async || {
        let entry = server.adapter("echo").await?;
        entry["metadata"]["shadow"].is_null().then_some(())
    })
    .await;
    let (status, _) = server.get("/api/adapters/echo/shadow").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        answer(&server, Method::GET, "/hello", "").await,
        "hello from echo v2"
    );
    let (done, printed) = adapters(&server, &["unshadow", "echo"]);
    assert!(!done && printed.contains("no shadow build"), "{printed}");
    let (done, printed) = adapters(&server, &["unshadow", "../echo"]);
    assert!(!done && printed.contains("not valid"), "{printed}");
}
