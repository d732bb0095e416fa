//! `reuse = N`: an adapter whose grant asks for it serves up to N requests from one instance,
//! and throws the instance away after a trap, a deadline, a refused memory growth, N requests
//! or a new generation; an adapter left at 1 never shares one. The memory probe tells which: a
//! fresh instance finds nothing of the previous request's writes, a kept one finds them all.

use reqwest::StatusCode;
use serde_json::Value;

use crate::guests::guest;
use crate::support::{Server, eventually};
use crate::wasm::drop_in;

const FRESH: &str = "image changed 0, left 0";
const KEPT: &str = "image changed 4194304, left 1048576";

async fn get(server: &Server, path: &str) -> (StatusCode, String) {
    let response = reqwest::get(server.url(path)).await.unwrap();
    (response.status(), response.text().await.unwrap())
}

async fn leftover(server: &Server, adapter: &str) -> String {
    let (status, body) = get(server, &format!("/api/adapters/{adapter}/leftover")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// Waits until `adapter` runs optimized code whose entry lists `capability`; its entry.
async fn running_with(server: &Server, adapter: &str, capability: &str) -> Value {
    let entry = eventually(60, async || {
        let entry = server.adapter(adapter).await?;
        let listed = entry["capabilities"]
            .as_array()?
            .iter()
            .any(|c| c.as_str().is_some_and(|c| c.starts_with(capability)));
        (entry["status"] == "running" && listed).then_some(entry)
    })
    .await;
    server.wait_until_optimized();
    entry
}

const GRANT: &str = "reuse = 3\n[limits]\nhandle_http_ms = 400\nmemory_mib = 32\n";

#[tokio::test]
async fn an_instance_serves_up_to_reuse_requests_and_goes_after_each_end() {
    let server = Server::start();
    drop_in(&server, "kept", &guest("memory_probe"), GRANT);
    drop_in(&server, "fresh", &guest("memory_probe"), "");
    let entry = running_with(&server, "kept", "reuse: up to 3 requests").await;
    assert!(
        entry["capabilities"]
            .to_string()
            .contains("can read what an earlier one left"),
        "the trade is said on the entry: {entry}"
    );

    // Three requests from one instance, then a fresh one; the neighbour left at 1, asked in
    // between, never finds anything.
    let mut seen = Vec::new();
    for _ in 0..7 {
        seen.push(leftover(&server, "kept").await);
        assert_eq!(leftover(&server, "fresh").await, FRESH);
    }
    assert_eq!(seen, [FRESH, KEPT, KEPT, FRESH, KEPT, KEPT, FRESH]);

    // Each way a call can end badly throws its instance (the one kept) away: the next request
    // gets a fresh one, which is kept for the next route.
    assert_eq!(leftover(&server, "kept").await, KEPT);
    for (route, status) in [
        ("/panic", StatusCode::INTERNAL_SERVER_ERROR),
        ("/spin", StatusCode::SERVICE_UNAVAILABLE),
        ("/hog", StatusCode::INSUFFICIENT_STORAGE),
    ] {
        let (answered, body) = get(&server, &format!("/api/adapters/kept{route}")).await;
        assert_eq!(answered, status, "{route}: {body}");
        assert_eq!(leftover(&server, "kept").await, FRESH, "after {route}");
    }

    // A new generation (the grant changed) starts with no instance of the old one.
    assert_eq!(leftover(&server, "kept").await, KEPT);
    drop_in(
        &server,
        "kept",
        &guest("memory_probe"),
        &GRANT.replace("reuse = 3", "reuse = 4"),
    );
    running_with(&server, "kept", "reuse: up to 4 requests").await;
    assert_eq!(leftover(&server, "kept").await, FRESH);
    assert_eq!(leftover(&server, "kept").await, KEPT);
}

#[tokio::test]
async fn reuse_out_of_range_is_refused_with_its_bounds() {
    let server = Server::start();
    for (grant, error) in [
        ("reuse = 0", "reuse = 0 is out of range: it takes 1 to 1000"),
        (
            "reuse = 1001",
            "reuse = 1001 is out of range: it takes 1 to 1000",
        ),
        ("reuse = \"many\"", "reuse must be a whole number"),
    ] {
        drop_in(&server, "probe", &guest("memory_probe"), grant);
        eventually(30, async || {
            let entry = server.adapter("probe").await?;
            entry.to_string().contains(error).then_some(())
        })
        .await;
    }
}

#[tokio::test]
async fn an_idle_instance_is_let_go_after_its_ten_seconds() {
    let server = Server::start();
    drop_in(&server, "kept", &guest("memory_probe"), GRANT);
    running_with(&server, "kept", "reuse: up to 3 requests").await;
    assert_eq!(leftover(&server, "kept").await, FRESH);
    assert_eq!(leftover(&server, "kept").await, KEPT, "kept while in use");
    // Idle for 10 s, it goes at the next look (every 5 s).
    tokio::time::sleep(std::time::Duration::from_secs(16)).await;
    assert_eq!(leftover(&server, "kept").await, FRESH);
}
