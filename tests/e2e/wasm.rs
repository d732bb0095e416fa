//! WebAssembly adapters through the real binary: hot-loading, every capability within its
//! grant, hostile components contained, hot replacement, toggles and the compile cache.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hmac::{Hmac, Mac};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::fakes::llm::{self, Reply};
use crate::guests::{echo_v0_1, echo_v2, guest};
use crate::support::{Server, assert_error, eventually, openai_env, spawn_fake};

/// Drops a component (and its grant) into the running server's adapters folder.
pub fn drop_in(server: &Server, name: &str, wasm: &Path, grant: &str) {
    let dir = server.data_dir.join("adapters");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.toml")), grant).unwrap();
    // Written beside and renamed, as an installer should, so the watcher never sees half a file.
    let tmp = dir.join(format!(".{name}.partial"));
    std::fs::copy(wasm, &tmp).unwrap();
    std::fs::rename(&tmp, dir.join(format!("{name}.wasm"))).unwrap();
}

pub async fn loaded(server: &Server, name: &str) -> Value {
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
pub const ECHO_GRANT: &str = "secrets = [\"ECHO_TOKEN\"]\nagent = true\ntools = [\"*\"]\nkv = true\njobs = true\noutbound_hosts = [\"http://127.0.0.1:9\"]\n";

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
    let server = Server::start_with(&[("ECHO_TOKEN", "s3cret"), ("SERVICE_SHELL_ENABLED", "true")]);
    let grant = ECHO_GRANT.replace("http://127.0.0.1:9", &target);
    drop_in(&server, "echo", &guest("echo"), &grant);

    let echo = loaded(&server, "echo").await;
    assert_eq!(
        (echo["status"].as_str(), echo["version"].as_str()),
        (Some("running"), Some("1"))
    );
    assert_eq!(echo["supports_toggle"], true, "it exports lifecycle");
    // A route it serves with another method is a 405 naming the ones it takes; no route, 404.
    let wrong = reqwest::Client::new()
        .delete(server.url("/api/adapters/echo/hello"))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(wrong.headers()["allow"], "GET");
    assert_eq!(
        get(&server, "/api/adapters/echo/nowhere").await.0,
        StatusCode::NOT_FOUND
    );
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
    let entry = server.adapter("echo").await.unwrap();
    assert!(entry["last_activity_at"].is_string());
    assert_eq!(
        entry["error_count"], 0,
        "a plain call records nothing: {entry}"
    );
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

    // Tools through the `tools` import: `*` covers every ungated tool that leaves stored data
    // alone, including delegation (a sub-run without a parent trace), but never a gated one
    // nor one that writes notes, which a grant must name.
    let search = post(
        &server,
        "/api/adapters/echo/tool?name=search_notes",
        r#"{"query": "anything"}"#,
    )
    .await;
    assert_eq!(search.0, StatusCode::OK, "{}", search.1);
    let note = post(
        &server,
        "/api/adapters/echo/tool?name=create_note",
        r#"{"title": "from a component"}"#,
    )
    .await;
    assert_eq!(
        note,
        (
            StatusCode::BAD_GATEWAY,
            "tool \"create_note\" is not granted".into()
        )
    );
    let delegated = post(
        &server,
        "/api/adapters/echo/tool?name=delegate_to_agent",
        r#"{"agent": "default", "prompt": "a sub-task"}"#,
    )
    .await;
    assert_eq!(delegated.0, StatusCode::OK, "{}", delegated.1);
    let delegated: Value = serde_json::from_str(&delegated.1).unwrap();
    assert!(
        delegated["answer"]
            .as_str()
            .unwrap()
            .starts_with("[offline]")
    );
    let (_, child) = server
        .get(&format!(
            "/api/traces/{}",
            delegated["trace_id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(
        (child["status"].as_str(), &child["parent_trace_id"]),
        (Some("ok"), &Value::Null),
        "{child}"
    );
    let shell = post(
        &server,
        "/api/adapters/echo/tool?name=shell_exec",
        r#"{"argv": ["touch", "pwned"]}"#,
    )
    .await;
    assert_eq!(
        shell,
        (
            StatusCode::BAD_GATEWAY,
            "tool \"shell_exec\" is not granted".into()
        )
    );

    let denial = server.adapter("echo").await.unwrap();
    assert!(
        denial["error_message"]
            .as_str()
            .unwrap()
            .starts_with("CapabilityDenied:"),
        "{denial}"
    );

    // Named beside `*`, the writing tool is granted.
    let naming = ECHO_GRANT.replace("tools = [\"*\"]", "tools = [\"*\", \"create_note\"]");
    std::fs::write(server.data_dir.join("adapters/echo.toml"), naming).unwrap();
    let note = eventually(20, async || {
        let note = post(
            &server,
            "/api/adapters/echo/tool?name=create_note",
            r#"{"title": "from a component"}"#,
        )
        .await;
        (note.0 == StatusCode::OK).then_some(note.1)
    })
    .await;
    assert!(note.contains("from a component"), "{note}");
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
        "1",
        "done on the first attempt"
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

    // A claim and its job together: once, and the retry is a duplicate with no job.
    let (status, once) = post(&server, "/api/adapters/echo/job-once?key=Ev2", "payload-2").await;
    assert_eq!(status, StatusCode::ACCEPTED, "{once}");
    assert_eq!(
        post(&server, "/api/adapters/echo/job-once?key=Ev2", "payload-2").await,
        (StatusCode::OK, "duplicate".to_owned())
    );
    assert_eq!(
        get(&server, "/api/adapters/echo/claim?key=Ev2").await.1,
        "false",
        "the key is claimed as by kv.claim"
    );
    eventually(10, async || {
        let (_, tasks) = server.get("/api/tasks?status=completed").await;
        tasks["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["task_id"] == once.as_str())
            .then_some(())
    })
    .await;

    let server = server.restart();
    loaded(&server, "echo").await;
    assert_eq!(
        get(&server, "/api/adapters/echo/claim?key=Ev1").await.1,
        "false",
        "claims persist across restarts"
    );
    // Without the kv grant, enqueue-once is refused and nothing is queued.
    drop_in(
        &server,
        "echo",
        &guest("echo"),
        &ECHO_GRANT.replace("kv = true\n", ""),
    );
    // (Its start hook, which uses kv too, is refused and retried meanwhile: the entry says
    // whichever refusal came last, so each try reads it right after its own.)
    eventually(20, async || {
        let (status, _) = post(&server, "/api/adapters/echo/job-once?key=Ev3", "x").await;
        let entry = server.adapter("echo").await?;
        let said = entry["error_message"].as_str()?;
        (status == StatusCode::INTERNAL_SERVER_ERROR
            && said.contains("jobs.enqueue-once without the kv grant"))
        .then_some(())
    })
    .await;
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

/// The contract grows by 0.2.x: the echo fixture, built for the frozen 0.2.0, loads and uses
/// every capability on this 0.2.1 host (the other tests drive them), and teamchat is built for
/// 0.2.1.
#[tokio::test]
async fn a_component_built_for_0_2_0_serves_on_a_0_2_1_host() {
    let imports_of = |name: &str| {
        let bytes = std::fs::read(guest(name)).unwrap();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        (
            text.contains("service:adapter/agent@0.2.0"),
            text.contains("service:adapter/agent@0.2.3"),
        )
    };
    assert_eq!(imports_of("echo"), (true, false), "echo is built for 0.2.0");
    assert_eq!(
        imports_of("teamchat"),
        (false, true),
        "teamchat for the newest, 0.2.3"
    );
    let server = Server::start();
    drop_in(&server, "echo", &guest("echo"), ECHO_GRANT);
    loaded(&server, "echo").await;
    assert_eq!(
        get(&server, "/api/adapters/echo/hello").await.0,
        StatusCode::OK
    );
}

#[tokio::test]
async fn hostile_components_are_contained() {
    let server = Server::start_with(&[("HOSTILE_TOKEN", "h"), ("SECRET_OF_OTHERS", "x")]);
    drop_in(&server, "echo", &guest("echo"), ECHO_GRANT);
    // The default time limit: after the loop the adapter's calls start on the guest lane,
    // which runs only when nothing else wants a core, and the suite's other tests (building
    // guests, say) can keep both busy for longer than a shorter limit.
    let grant = "secrets = [\"HOSTILE_TOKEN\"]\noutbound_hosts = [\"http://127.0.0.1:9\"]\njobs = true\n[limits]\nmemory_mib = 16\n";
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
    assert!(
        entry_now["error_at"].is_string(),
        "an error says when: {entry_now}"
    );

    // Each misdeed: what the caller gets, and what the entry records (the details stay on
    // the entry; the caller learns only the kind).
    let cases: [(&str, StatusCode, &str, &str); 5] = [
        (
            "/grow",
            StatusCode::INTERNAL_SERVER_ERROR,
            "MemoryLimit",
            "MemoryLimit:",
        ),
        (
            "/panic",
            StatusCode::INTERNAL_SERVER_ERROR,
            "Panic",
            "Panic: ",
        ),
        (
            "/file",
            StatusCode::FORBIDDEN,
            "denied:",
            "CapabilityDenied: filesystem access",
        ),
        (
            "/fetch?url=http://127.0.0.1:8765/api/health",
            StatusCode::BAD_GATEWAY,
            "not granted",
            "CapabilityDenied: outbound request to http://127.0.0.1:8765",
        ),
        (
            "/secret?name=SECRET_OF_OTHERS",
            StatusCode::OK,
            "none",
            "CapabilityDenied: secret SECRET_OF_OTHERS",
        ),
    ];
    let mut errors = server.adapter("hostile").await.unwrap()["error_count"]
        .as_u64()
        .unwrap();
    for (route, status, answer, recorded) in cases {
        let (got, body) = get(&server, &format!("/api/adapters/hostile{route}")).await;
        assert_eq!(got, status, "{route}: {body}");
        assert!(body.contains(answer), "{route}: {body}");
        let entry = server.adapter("hostile").await.unwrap();
        errors += 1;
        assert_eq!(entry["error_count"], errors, "{route}: {entry}");
        let message = entry["error_message"].as_str().unwrap();
        assert!(message.starts_with(recorded), "{route}: {message}");
    }
    let (_, panicked) = get(&server, "/api/adapters/hostile/panic").await;
    assert!(
        !panicked.contains("hostile panic"),
        "guest output stays on the entry: {panicked}"
    );
    assert!(
        server.adapter("hostile").await.unwrap()["error_message"]
            .as_str()
            .unwrap()
            .contains("hostile panic")
    );
    assert_eq!(
        get(&server, "/api/adapters/hostile/env").await.1,
        "env=0 args=0",
        "no inherited environment"
    );
    assert_eq!(
        get(&server, "/api/adapters/hostile/secret?name=HOSTILE_TOKEN")
            .await
            .1,
        "h"
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
    let activity = async || server.adapter("echo").await.unwrap()["last_activity_at"].clone();
    let before = activity().await;
    let slow = tokio::spawn({
        let url = server.url("/api/adapters/echo/slow?ms=1500");
        async move { reqwest::get(url).await.unwrap().text().await.unwrap() }
    });
    // The slow route stamps the entry as it begins.
    eventually(10, async || (activity().await != before).then_some(())).await;
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
    // Each first served the baseline compiler's code; once the optimized code serves, its
    // artifact is the only one kept.
    server.wait_until_optimized();
    let before = artifacts();
    assert_eq!(
        before.len(),
        5,
        "echo and the bundled calendar, teamchat, voice and webhook: {before:?}"
    );
    let server = server.restart();
    let echo = loaded(&server, "echo").await;
    assert_eq!(
        echo["metadata"]["code"], "optimized (Cranelift)",
        "a cached component starts on its optimized code: {echo}"
    );
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

    // Validated before anything is copied: a 0.1 component importing interfaces it was
    // granted nothing of is refused, with what it asks for and a grant that would allow it.
    // A file that is not WebAssembly at all: one line saying so, not a dump of its bytes.
    let garbage = tmp.path().join("garbage.wasm");
    std::fs::write(&garbage, [0xf2u8, 0xf5, 0x6a, 0x97].repeat(500)).unwrap();
    let out = cli(&["adapters", "install", garbage.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(said.trim().lines().count(), 1, "{said}");
    assert!(said.contains("not a WebAssembly file"), "{said}");

    let refused = cli(&["adapters", "install", echo_v0_1().to_str().unwrap()]);
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    for needle in [
        "granted nothing",
        "service:adapter/agent",
        "agent = true",
        "kv = true",
        "jobs = true",
    ] {
        assert!(said.contains(needle), "{needle}: {said}");
    }
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

    // A newer component may import what it never calls: installed, with a warning that
    // says what its grant leaves out and a grant that would cover it.
    let unguarded = cli(&["adapters", "install", renamed.to_str().unwrap()]);
    assert!(unguarded.status.success());
    let said = String::from_utf8_lossy(&unguarded.stderr);
    assert!(
        said.contains("which its grant does not cover") && said.contains("kv = true"),
        "{said}"
    );
    let ungranted = eventually(20, async || {
        let entry = server.adapter("echo").await?;
        entry["metadata"]["ungranted_imports"]
            .as_str()
            .map(str::to_owned)
    })
    .await;
    assert!(ungranted.contains("kv"), "{ungranted}");

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
        listed
            .lines()
            .any(|line| line.starts_with("echo ") && line.ends_with("echo.toml")),
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
    // A name is never a path: a file outside the adapters folder stays.
    let precious = server.data_dir.join("precious.wasm");
    std::fs::write(&precious, b"keep").unwrap();
    let outside = cli(&["adapters", "remove", "../precious"]);
    assert!(!outside.status.success());
    assert!(
        String::from_utf8_lossy(&outside.stderr).contains("is not valid"),
        "{outside:?}"
    );
    assert!(precious.exists());
}

/// Waits until echo's hook log reads `expected` (a hook runs just after the entry appears).
async fn lifecycle_log_reaches(server: &Server, expected: &str) {
    eventually(10, async || {
        let (status, log) = get(server, "/api/adapters/echo/kv?key=lifecycle").await;
        (status == StatusCode::OK && log == expected).then_some(())
    })
    .await;
}

/// Sets one of echo's kv entries straight in the database (its routes answer 503 while it is
/// disabled).
fn echo_kv(server: &Server, key: &str, value: &str) {
    server
        .db()
        .blocking(|conn| {
            service_runtime::kv_store::set(conn, "echo", key, value.as_bytes(), None, 1 << 20)
                .unwrap();
            Ok(())
        })
        .unwrap();
}

#[tokio::test]
async fn component_hooks_run_on_load_toggle_and_removal_and_disabling_always_takes_effect() {
    let server = Server::start();
    drop_in(&server, "echo", &guest("echo"), ECHO_GRANT);
    loaded(&server, "echo").await;
    lifecycle_log_reaches(&server, "start").await;

    // A failing `stop` does not keep an adapter serving: it is disabled, and the entry says
    // what the hook answered.
    echo_kv(&server, "fail-hooks", "yes");
    let (status, entry) = server.post("/api/adapters/echo/disable", json!(null)).await;
    assert_eq!(
        (status, entry["status"].as_str(), entry["note"].as_str()),
        (
            StatusCode::OK,
            Some("stopped"),
            Some("disabled from the dashboard")
        ),
        "{entry}"
    );
    assert_eq!(
        entry["error_message"],
        "HookError: stop failed: stop refused on purpose"
    );
    assert_eq!(
        get(&server, "/api/adapters/echo/hello").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    // A failing `start` leaves it disabled and says why.
    assert_error(
        &server.post("/api/adapters/echo/enable", json!(null)).await,
        StatusCode::INTERNAL_SERVER_ERROR,
        "start failed: start refused on purpose",
    );
    assert_eq!(
        get(&server, "/api/adapters/echo/hello").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    echo_kv(&server, "fail-hooks", "no");
    let (status, entry) = server.post("/api/adapters/echo/enable", json!(null)).await;
    assert_eq!(
        (status, entry["status"].as_str()),
        (StatusCode::OK, Some("running"))
    );
    lifecycle_log_reaches(&server, "start,start").await;
    let (status, _) = server.post("/api/adapters/echo/disable", json!(null)).await;
    assert_eq!(status, StatusCode::OK);

    // The choice survives a restart: loaded, but neither started nor serving.
    let server = server.restart();
    let entry = loaded(&server, "echo").await;
    assert_eq!(entry["status"], "stopped", "{entry}");
    assert_eq!(
        get(&server, "/api/adapters/echo/hello").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    let (status, _) = server.post("/api/adapters/echo/enable", json!(null)).await;
    assert_eq!(status, StatusCode::OK);
    lifecycle_log_reaches(&server, "start,start,stop,start").await;

    // Removing the file stops it; loading it again starts it.
    std::fs::remove_file(server.data_dir.join("adapters/echo.wasm")).unwrap();
    eventually(10, async || {
        server.adapter("echo").await.is_none().then_some(())
    })
    .await;
    drop_in(&server, "echo", &guest("echo"), ECHO_GRANT);
    loaded(&server, "echo").await;
    lifecycle_log_reaches(&server, "start,start,stop,start,stop,start").await;

    // An adapter without start and stop cannot be toggled.
    assert_error(
        &server
            .post("/api/adapters/webhook/disable", json!(null))
            .await,
        StatusCode::CONFLICT,
        "it has no start and stop",
    );
    assert_error(
        &server.post("/api/adapters/nope/enable", json!(null)).await,
        StatusCode::NOT_FOUND,
        "no adapter named",
    );
}

#[tokio::test]
async fn hot_reload_follows_grant_files_and_retries_a_bad_file_only_when_it_changes() {
    let server = Server::start();
    drop_in(&server, "echo", &guest("echo"), ECHO_GRANT);
    let granted = |entry: &Value, capability: &str| {
        entry["capabilities"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == capability)
    };
    assert!(granted(&loaded(&server, "echo").await, "tools:*"));

    // A broken file is reported once, not on every pass of the watcher.
    let broken = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(broken.path(), b"\0asm junk").unwrap();
    drop_in(&server, "broken", broken.path(), "");
    // (It shows as loading until the compiler has refused it.)
    let broken = eventually(10, async || {
        let entry = server.adapter("broken").await?;
        (entry["status"] == "error").then_some(entry)
    })
    .await;
    assert_eq!(broken["error_count"], 1, "{broken}");

    // A new grant takes effect without touching the component; the watcher's pass that took
    // it in looked at the broken file again and left it alone.
    let narrower = ECHO_GRANT.replace("tools = [\"*\"]", "tools = [\"search_notes\"]");
    std::fs::write(server.data_dir.join("adapters/echo.toml"), narrower).unwrap();
    eventually(10, async || {
        let entry = server.adapter("echo").await?;
        granted(&entry, "tool:search_notes").then_some(())
    })
    .await;
    assert_eq!(server.adapter("broken").await.unwrap()["error_count"], 1);

    // Removing it removes its entry.
    std::fs::remove_file(server.data_dir.join("adapters/broken.wasm")).unwrap();
    eventually(10, async || {
        server.adapter("broken").await.is_none().then_some(())
    })
    .await;
    assert_eq!(
        get(&server, "/api/adapters/echo/hello").await.0,
        StatusCode::OK
    );
}

#[tokio::test]
async fn a_component_still_being_written_loads_only_once_complete() {
    use std::io::Write;

    let server = Server::start();
    let dir = server.data_dir.join("adapters");
    std::fs::write(dir.join("echo.toml"), ECHO_GRANT).unwrap();
    let bytes = std::fs::read(guest("echo")).unwrap();
    // The watcher starts once the components are loaded, just after the server says ready.
    eventually(10, async || {
        let log = std::fs::read_to_string(server.data_dir.join("server.log")).ok()?;
        log.contains("watching the adapters folder (file-system notifications)")
            .then_some(())
    })
    .await;
    // Half the component, written in place and kept open, and then a little more every
    // 20 ms, as a slow copy goes (one that stalls past the watcher's quiet limit of 2 s counts
    // as complete). A thread of its own writes, so a slow test server cannot stall it.
    let half = bytes.len() / 2;
    let mut file = std::fs::File::create(dir.join("echo.wasm")).unwrap();
    file.write_all(&bytes[..half]).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let writer = std::thread::spawn({
        let (bytes, done) = (bytes.clone(), Arc::clone(&done));
        move || {
            let mut written = half;
            while !done.load(Ordering::Relaxed) {
                let next = (written + 16).min(bytes.len() - 1);
                file.write_all(&bytes[written..next]).unwrap();
                written = next;
                std::thread::sleep(Duration::from_millis(20));
            }
            (file, written)
        }
    });

    // Another file, dropped in and refused, shows that the watcher looked at the folder since.
    let junk = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(junk.path(), b"\0asm junk").unwrap();
    drop_in(&server, "broken", junk.path(), "");
    eventually(10, async || server.adapter("broken").await).await;
    // Not loaded, but shown as loading from the start: its routes answer 503, never 404.
    let entry = server.adapter("echo").await.unwrap();
    assert_eq!(
        (&entry["status"], &entry["phase"], &entry["version"]),
        (&json!("stopped"), &json!("loading"), &Value::Null),
        "half a file was loaded: {entry}"
    );
    let (status, said) = get(&server, "/api/adapters/echo/hello").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{said}");
    let log = std::fs::read_to_string(server.data_dir.join("server.log")).unwrap();
    assert!(
        log.contains("component found in the adapters folder"),
        "{log}"
    );

    done.store(true, Ordering::Relaxed);
    let (mut file, written) = writer.join().unwrap();
    file.write_all(&bytes[written..]).unwrap();
    drop(file);
    let entry = loaded(&server, "echo").await;
    assert_eq!(entry["error_count"], 0, "{entry}");
    assert_eq!(
        get(&server, "/api/adapters/echo/hello").await,
        (StatusCode::OK, "hello from echo v1".into())
    );
}

#[tokio::test]
async fn polling_instead_of_notifications_still_hot_loads() {
    let server = Server::start_with(&[("SERVICE_WATCH_POLL", "true")]);
    // The watcher starts once the components are loaded, just after the server says ready.
    eventually(10, async || {
        let log = std::fs::read_to_string(server.data_dir.join("server.log")).ok()?;
        log.contains("watching the adapters folder by polling")
            .then_some(())
    })
    .await;
    drop_in(&server, "echo", &guest("echo"), ECHO_GRANT);
    loaded(&server, "echo").await;
    assert_eq!(
        get(&server, "/api/adapters/echo/hello").await,
        (StatusCode::OK, "hello from echo v1".into())
    );
    std::fs::remove_file(server.data_dir.join("adapters/echo.wasm")).unwrap();
    eventually(10, async || {
        server.adapter("echo").await.is_none().then_some(())
    })
    .await;
}

#[tokio::test]
async fn jobs_cut_off_by_a_crash_run_again_and_deleting_a_running_job_cancels_it() {
    // One job at a time, so the second is still waiting when the process dies.
    let server = Server::start_with_config("[jobs]\nworkers = 1\n", &[]);
    drop_in(&server, "echo", &guest("echo"), ECHO_GRANT);
    loaded(&server, "echo").await;
    let task = async |server: &Server, task_id: &str| {
        let (_, tasks) = server.get("/api/tasks").await;
        tasks["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["task_id"] == task_id)
            .cloned()
            .unwrap_or(Value::Null)
    };

    // Deleting the task of a running job cancels it.
    let (_, cancelled) = post(&server, "/api/adapters/echo/job", "slow:30000").await;
    eventually(10, async || {
        (task(&server, &cancelled).await["status"] == "running").then_some(())
    })
    .await;
    let (status, removal) = server.delete(&format!("/api/tasks/{cancelled}")).await;
    assert_eq!(
        (status, removal["result"].as_str()),
        (StatusCode::OK, Some("cancelled"))
    );

    // Killed while one job runs and one waits: after the restart both run, the cut-off one
    // as its second attempt.
    let (_, slow) = post(&server, "/api/adapters/echo/job", "slow:2000").await;
    let (_, queued) = post(&server, "/api/adapters/echo/job", "after-restart").await;
    eventually(10, async || {
        (task(&server, &slow).await["status"] == "running").then_some(())
    })
    .await;
    assert_eq!(task(&server, &queued).await["status"], "pending");
    let server = server.restart();
    loaded(&server, "echo").await;
    for (id, key, attempt) in [(&slow, "slow:2000", "2"), (&queued, "after-restart", "1")] {
        let done = eventually(20, async || {
            let done = task(&server, id).await;
            (done["status"] == "completed").then_some(done)
        })
        .await;
        assert_eq!(done["attempt"], attempt.parse::<u32>().unwrap(), "{done}");
        assert_eq!(
            get(
                &server,
                &format!("/api/adapters/echo/kv?key=job-done:{key}")
            )
            .await
            .1,
            attempt,
            "the attempt that finished {key}"
        );
    }
    assert!(
        task(&server, &slow).await["description"]
            .as_str()
            .unwrap()
            .contains("interrupted; will run again")
    );
    assert_eq!(task(&server, &cancelled).await["status"], "cancelled");
}
