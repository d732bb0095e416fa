//! WebAssembly adapters through the real binary: hot-loading, every capability within its
//! grant, hostile components contained, hot replacement, toggles and the compile cache.

use std::path::Path;
use std::time::Duration;

use hmac::{Hmac, Mac};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::fakes::llm::{self, Reply};
use crate::guests::{echo_v2, guest};
use crate::support::{Server, eventually, openai_env, spawn_fake};

/// Drops a component (and its grant) into the running server's adapters folder.
fn drop_in(server: &Server, name: &str, wasm: &Path, grant: &str) {
    let dir = server.data_dir.join("adapters");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.toml")), grant).unwrap();
    // Written beside and renamed, as an installer should, so the watcher never sees half a file.
    let tmp = dir.join(format!(".{name}.partial"));
    std::fs::copy(wasm, &tmp).unwrap();
    std::fs::rename(&tmp, dir.join(format!("{name}.wasm"))).unwrap();
}

async fn loaded(server: &Server, name: &str) -> Value {
    eventually(20, async || {
        server
            .adapter(name)
            .await
            .filter(|e| e["kind"] == "wasm" && e["version"].is_string())
    })
    .await
}

async fn text(
    server: &Server,
    method: reqwest::Method,
    path: &str,
    body: &str,
) -> (StatusCode, String) {
    let response = reqwest::Client::new()
        .request(method, server.url(path))
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    (response.status(), response.text().await.unwrap())
}

async fn get(server: &Server, path: &str) -> (StatusCode, String) {
    text(server, reqwest::Method::GET, path, "").await
}

async fn post(server: &Server, path: &str, body: &str) -> (StatusCode, String) {
    text(server, reqwest::Method::POST, path, body).await
}

/// Everything echo asks for; it imports `outbound-http`, so it needs at least one origin.
const ECHO_GRANT: &str = "secrets = [\"ECHO_TOKEN\"]\nagent = true\ntools = [\"*\"]\nkv = true\njobs = true\noutbound_hosts = [\"http://127.0.0.1:9\"]\n";

#[tokio::test]
async fn a_dropped_in_component_serves_with_its_granted_capabilities() {
    let target = spawn_fake(axum::Router::new().route(
        "/hello",
        axum::routing::get(|headers: axum::http::HeaderMap| async move {
            format!(
                "auth={}",
                headers
                    .get("authorization")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("-")
            )
        }),
    ))
    .await;
    let server = Server::start_with(&[("ECHO_TOKEN", "s3cret")]);
    let grant = ECHO_GRANT.replace("http://127.0.0.1:9", &target);
    drop_in(&server, "echo", &guest("echo"), &grant);

    let echo = loaded(&server, "echo").await;
    assert_eq!(
        (echo["status"].as_str(), echo["version"].as_str()),
        (Some("running"), Some("1"))
    );
    assert_eq!(echo["supports_toggle"], true, "it exports lifecycle");
    let capabilities: Vec<&str> = echo["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert!(
        capabilities.contains(&"agent")
            && capabilities.contains(&"kv")
            && capabilities.contains(&"secret:ECHO_TOKEN"),
        "{capabilities:?}"
    );

    assert_eq!(
        get(&server, "/api/adapters/echo/hello").await,
        (StatusCode::OK, "hello from echo v1".into())
    );
    assert!(server.adapter("echo").await.unwrap()["last_activity_at"].is_string());
    assert_eq!(
        post(&server, "/api/adapters/echo/echo", "raw \u{1F600} body")
            .await
            .1,
        "raw \u{1F600} body"
    );
    assert_eq!(
        get(&server, "/api/adapters/echo/nowhere").await.0,
        StatusCode::NOT_FOUND
    );

    // The secret is filled into the header by the host; the component never sees it.
    let fetched = get(
        &server,
        &format!("/api/adapters/echo/fetch?url={target}/hello"),
    )
    .await;
    assert_eq!(fetched, (StatusCode::OK, "200\nauth=Bearer s3cret".into()));
    let denied = get(&server, "/api/adapters/echo/fetch?url=http://127.0.0.1:1/x").await;
    assert_eq!(denied.0, StatusCode::BAD_GATEWAY);
    assert!(denied.1.contains("not granted"), "{}", denied.1);

    let mut mac = Hmac::<Sha256>::new_from_slice(b"s3cret").unwrap();
    mac.update(b"signed body");
    let signature = hex::encode(mac.finalize().into_bytes());
    assert_eq!(
        post(
            &server,
            &format!("/api/adapters/echo/verify?sig={signature}"),
            "signed body"
        )
        .await
        .1,
        "true"
    );
    assert_eq!(
        post(
            &server,
            &format!("/api/adapters/echo/verify?sig={signature}"),
            "tampered"
        )
        .await
        .1,
        "false"
    );

    let (status, reply) = post(&server, "/api/adapters/echo/agent", "hello agent").await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    let (trace_id, answer) = reply.split_once('\n').unwrap();
    assert!(answer.starts_with("[offline]"));
    let (_, trace) = server.get(&format!("/api/traces/{trace_id}")).await;
    assert_eq!(trace["source"], "echo");

    let denial = server.adapter("echo").await.unwrap();
    assert!(
        denial["error_message"]
            .as_str()
            .unwrap()
            .starts_with("CapabilityDenied:"),
        "{denial}"
    );
}

#[tokio::test]
async fn kv_claims_and_jobs_survive_and_run() {
    let server = Server::start();
    drop_in(&server, "echo", &guest("echo"), ECHO_GRANT);
    loaded(&server, "echo").await;
    assert_eq!(
        get(&server, "/api/adapters/echo/claim?key=Ev1").await.1,
        "true"
    );
    assert_eq!(
        get(&server, "/api/adapters/echo/claim?key=Ev1").await.1,
        "false"
    );

    let (status, task_id) = post(&server, "/api/adapters/echo/job", "payload-1").await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let task = eventually(10, async || {
        let (_, tasks) = server.get("/api/tasks?status=completed").await;
        tasks["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["task_id"] == task_id.as_str())
            .cloned()
    })
    .await;
    assert_eq!(task["title"], "echo job");
    assert_eq!(
        get(&server, "/api/adapters/echo/kv?key=job-done:payload-1")
            .await
            .1,
        "payload-1"
    );

    let (_, failing) = post(&server, "/api/adapters/echo/job", "fail").await;
    let failed = eventually(10, async || {
        let (_, tasks) = server.get("/api/tasks?status=error").await;
        tasks["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["task_id"] == failing.as_str())
            .cloned()
    })
    .await;
    assert!(
        failed["description"]
            .as_str()
            .unwrap()
            .contains("job failed on purpose"),
        "{failed}"
    );

    let server = server.restart();
    loaded(&server, "echo").await;
    assert_eq!(
        get(&server, "/api/adapters/echo/claim?key=Ev1").await.1,
        "false",
        "claims persist across restarts"
    );
}

#[tokio::test]
async fn component_tools_serve_agents_while_loaded() {
    let fake = llm::openai(vec![
        Reply::Tools(vec![("t1", "echo_tool", json!({"text": "ping"}))]),
        Reply::Text("done"),
    ])
    .await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    drop_in(&server, "echo", &guest("echo"), ECHO_GRANT);
    loaded(&server, "echo").await;
    let tools = eventually(10, async || {
        let (_, body) = server.get("/api/tools").await;
        body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "echo_tool")
            .then_some(body)
    })
    .await;
    assert!(
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "echo_tool" && t["parameters"]["required"] == json!(["text"]))
    );
    let (status, answer) = server
        .post("/api/chat", json!({"prompt": "use echo"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(
        answer["tool_calls"][0]["output"],
        "echo: {\"text\":\"ping\"}"
    );

    std::fs::remove_file(server.data_dir.join("adapters/echo.wasm")).unwrap();
    eventually(10, async || {
        server.adapter("echo").await.is_none().then_some(())
    })
    .await;
    let (_, body) = server.get("/api/tools").await;
    assert!(
        !body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "echo_tool"),
        "unloading removes its tools"
    );
    assert_eq!(
        get(&server, "/api/adapters/echo/hello").await.0,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn hostile_components_are_contained() {
    let server = Server::start_with(&[("HOSTILE_TOKEN", "h"), ("SECRET_OF_OTHERS", "x")]);
    drop_in(&server, "echo", &guest("echo"), ECHO_GRANT);
    let grant = "secrets = [\"HOSTILE_TOKEN\"]\noutbound_hosts = [\"http://127.0.0.1:9\"]\n[limits]\nhandle_http_ms = 400\nmemory_mib = 16\n";
    drop_in(&server, "hostile", &guest("hostile"), grant);
    loaded(&server, "echo").await;
    loaded(&server, "hostile").await;

    // An infinite loop is interrupted; the other adapter answers meanwhile.
    let looping = tokio::spawn({
        let url = server.url("/api/adapters/hostile/loop");
        async move { reqwest::get(url).await.unwrap().status() }
    });
    assert_eq!(
        get(&server, "/api/adapters/echo/hello").await.0,
        StatusCode::OK
    );
    assert_eq!(looping.await.unwrap(), StatusCode::SERVICE_UNAVAILABLE);
    let entry_now = server.adapter("hostile").await.unwrap();
    assert!(
        entry_now["error_message"]
            .as_str()
            .unwrap()
            .starts_with("Timeout:"),
        "{entry_now}"
    );

    let (status, body) = get(&server, "/api/adapters/hostile/grow").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(body.contains("MemoryLimit"), "{body}");
    let (status, body) = get(&server, "/api/adapters/hostile/panic").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        body.contains("Panic") && body.contains("hostile panic"),
        "{body}"
    );

    let (status, body) = get(&server, "/api/adapters/hostile/file").await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.starts_with("denied:"), "no filesystem: {body}");
    assert_eq!(
        get(&server, "/api/adapters/hostile/env").await.1,
        "env=0 args=0",
        "no inherited environment"
    );
    let (status, body) = get(
        &server,
        "/api/adapters/hostile/fetch?url=http://127.0.0.1:8765/api/health",
    )
    .await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert!(body.contains("not granted"), "{body}");
    assert_eq!(
        get(
            &server,
            "/api/adapters/hostile/secret?name=SECRET_OF_OTHERS"
        )
        .await
        .1,
        "none"
    );
    assert_eq!(
        get(&server, "/api/adapters/hostile/secret?name=HOSTILE_TOKEN")
            .await
            .1,
        "h"
    );

    let hostile = server.adapter("hostile").await.unwrap();
    assert!(hostile["error_count"].as_u64().unwrap() >= 5, "{hostile}");
    assert!(
        hostile["error_message"]
            .as_str()
            .unwrap()
            .contains("SECRET_OF_OTHERS")
    );
    assert_eq!(
        get(&server, "/api/adapters/hostile/ok").await,
        (StatusCode::OK, "still fine".into())
    );
    assert_eq!(
        get(&server, "/api/adapters/echo/hello").await.0,
        StatusCode::OK
    );
    assert_eq!(server.adapter("echo").await.unwrap()["error_count"], 0);
}

#[tokio::test]
async fn bad_components_are_refused_at_load_with_the_reason() {
    let server = Server::start();
    drop_in(&server, "echo", &guest("echo"), ECHO_GRANT);
    loaded(&server, "echo").await;
    drop_in(&server, "unknown-import", &guest("unknown_import"), "");
    drop_in(&server, "future-version", &guest("future_version"), "");
    let bytes = std::fs::read(guest("echo")).unwrap();
    std::fs::write(
        server.data_dir.join("adapters/truncated.wasm"),
        &bytes[..bytes.len() / 3],
    )
    .unwrap();
    // Echo asks for agent, kv, jobs...; without a grant it imports interfaces it was given nothing of.
    drop_in(&server, "ungranted", &guest("echo"), "");

    let reason = async |name: &str| {
        let e = eventually(20, async || {
            server
                .adapter(name)
                .await
                .filter(|e| e["status"] == "error")
        })
        .await;
        e["error_message"].as_str().unwrap().to_owned()
    };
    assert!(
        reason("unknown-import")
            .await
            .contains("service:adapter/teleport")
    );
    assert!(
        reason("future-version")
            .await
            .contains("supports service:adapter@0.1.0")
    );
    assert!(reason("truncated").await.contains("not a valid component"));
    let ungranted = reason("ungranted").await;
    assert!(
        ungranted.contains("describes itself as \"echo\"") || ungranted.contains("granted nothing"),
        "{ungranted}"
    );
    assert_eq!(
        get(&server, "/api/adapters/echo/hello").await.0,
        StatusCode::OK,
        "the good one keeps serving"
    );
}

#[tokio::test]
async fn replacing_a_component_keeps_in_flight_requests_on_the_old_one() {
    let server = Server::start();
    drop_in(&server, "echo", &guest("echo"), ECHO_GRANT);
    loaded(&server, "echo").await;
    let v2 = echo_v2();
    let slow = tokio::spawn({
        let url = server.url("/api/adapters/echo/slow?ms=1500");
        async move { reqwest::get(url).await.unwrap().text().await.unwrap() }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop_in(&server, "echo", &v2, ECHO_GRANT);
    eventually(20, async || {
        (get(&server, "/api/adapters/echo/hello").await.1 == "hello from echo v2").then_some(())
    })
    .await;
    assert_eq!(
        slow.await.unwrap(),
        "slow done v1",
        "the old generation finished its request"
    );
    assert_eq!(server.adapter("echo").await.unwrap()["version"], "2");

    // A broken replacement keeps the last good generation serving.
    std::fs::write(server.data_dir.join("adapters/echo.wasm"), b"\0asm garbage").unwrap();
    let broken = eventually(20, async || {
        server
            .adapter("echo")
            .await
            .filter(|e| e["status"] == "error")
    })
    .await;
    assert!(
        broken["error_message"]
            .as_str()
            .unwrap()
            .starts_with("LoadError:")
    );
    assert_eq!(
        get(&server, "/api/adapters/echo/hello").await.1,
        "hello from echo v2"
    );
}

#[tokio::test]
async fn toggles_unknown_names_and_the_compile_cache() {
    let server = Server::start();
    drop_in(&server, "echo", &guest("echo"), ECHO_GRANT);
    loaded(&server, "echo").await;
    let (status, entry_now) = server.post("/api/adapters/echo/disable", json!(null)).await;
    assert_eq!(
        (status, entry_now["status"].as_str()),
        (StatusCode::OK, Some("stopped"))
    );
    assert_eq!(
        get(&server, "/api/adapters/echo/hello").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    let (status, _) = server.post("/api/adapters/echo/enable", json!(null)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        get(&server, "/api/adapters/echo/hello").await.0,
        StatusCode::OK
    );
    assert_eq!(
        get(&server, "/api/adapters/nope/hello").await.0,
        StatusCode::NOT_FOUND
    );

    let cache = server.data_dir.join("cache");
    let artifacts = || {
        std::fs::read_dir(&cache)
            .unwrap()
            .flatten()
            .map(|e| (e.file_name(), e.metadata().unwrap().modified().unwrap()))
            .collect::<Vec<_>>()
    };
    let before = artifacts();
    assert_eq!(before.len(), 3, "echo and the bundled teamchat and webhook");
    let server = server.restart();
    loaded(&server, "echo").await;
    assert_eq!(
        artifacts(),
        before,
        "a restart with unchanged components compiles nothing"
    );
}

#[tokio::test]
async fn the_adapters_cli_installs_lists_and_removes_while_the_server_runs() {
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let grant = tmp.path().join("grant.toml");
    std::fs::write(&grant, ECHO_GRANT).unwrap();
    let renamed = tmp.path().join("my-build.wasm");
    std::fs::copy(guest("echo"), &renamed).unwrap();
    let cli = |args: &[&str]| crate::support::cli(&server.data_dir, args);

    // Validated before anything is copied: no grant means interfaces granted nothing.
    let refused = cli(&["adapters", "install", renamed.to_str().unwrap()]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("granted nothing"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let alien = cli(&[
        "adapters",
        "install",
        guest("unknown_import").to_str().unwrap(),
    ]);
    assert!(String::from_utf8_lossy(&alien.stderr).contains("teleport"));
    assert!(
        !server.data_dir.join("adapters/echo.wasm").exists()
            && !server
                .data_dir
                .join("adapters/unknown-import.wasm")
                .exists()
    );

    let installed = cli(&[
        "adapters",
        "install",
        renamed.to_str().unwrap(),
        "--grant",
        grant.to_str().unwrap(),
    ]);
    assert!(
        installed.status.success(),
        "{}",
        String::from_utf8_lossy(&installed.stderr)
    );
    assert!(String::from_utf8_lossy(&installed.stdout).starts_with("installed echo 1"));
    loaded(&server, "echo").await;
    assert_eq!(
        get(&server, "/api/adapters/echo/hello").await.1,
        "hello from echo v1"
    );
    let listed = String::from_utf8(cli(&["adapters", "list"]).stdout).unwrap();
    assert!(
        listed.starts_with("echo ") && listed.contains("grant: yes"),
        "{listed}"
    );

    assert!(cli(&["adapters", "remove", "echo"]).status.success());
    eventually(10, async || {
        server.adapter("echo").await.is_none().then_some(())
    })
    .await;
    let missing = cli(&["adapters", "remove", "echo"]);
    assert!(
        !missing.status.success()
            && String::from_utf8_lossy(&missing.stderr).contains("no component named")
    );
}
