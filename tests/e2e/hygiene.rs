//! HTTP hygiene: request errors in the project's words, the body limit everywhere, slow
//! clients timed out without starving others, the dashboard's framing policy, plain logs.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::guests::guest;
use crate::support::{Server, assert_error, json_of};
use crate::wasm::{drop_in, loaded};

/// Framework wording that must never reach a client.
const FRAMEWORK_WORDS: [&str; 4] = ["Failed to", "deserialize", "expected struct", "untagged"];

#[track_caller]
fn assert_own_words(
    answer: &(StatusCode, Value),
    status: StatusCode,
    message: &str,
    field: Option<&str>,
) {
    assert_error(answer, status, message);
    let said = answer.1["error"].as_str().unwrap();
    for word in FRAMEWORK_WORDS {
        assert!(!said.contains(word), "{said}");
    }
    assert_eq!(answer.1["field"].as_str(), field, "{}", answer.1);
}

async fn post_raw(
    server: &Server,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (StatusCode, Value) {
    let response = reqwest::Client::new()
        .post(server.url(path))
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    json_of(response).await
}

#[tokio::test]
async fn bodies_of_the_wrong_shape_are_answered_in_the_projects_words() {
    let server = Server::start();
    let bad = StatusCode::BAD_REQUEST;
    assert_own_words(
        &server.post("/api/agents", json!([])).await,
        bad,
        "the request body must be a JSON object, not a list",
        None,
    );
    assert_own_words(
        &server
            .post("/api/agents", json!({"name": ["a"], "system_prompt": "x"}))
            .await,
        bad,
        "name must be a string, not a list",
        Some("name"),
    );
    assert_own_words(
        &server
            .post(
                "/api/agents",
                json!({"name": "a", "system_prompt": "x", "tools": 5}),
            )
            .await,
        bad,
        "tools must be a list of tool names or a comma-separated string, not a number",
        Some("tools"),
    );
    assert_own_words(
        &server
            .post(
                "/api/agents",
                json!({"name": "a", "system_prompt": "x", "tools": ["ok", 1]}),
            )
            .await,
        bad,
        "tools[1] must be a string, not a number",
        Some("tools"),
    );
    assert_own_words(
        &server
            .post(
                "/api/store/import",
                json!({"name": "X", "system_prompt": "y", "recommended_tools": "a,b"}),
            )
            .await,
        bad,
        "recommended_tools must be a list, not a string",
        Some("recommended_tools"),
    );
    assert_own_words(
        &server
            .post(
                "/api/integrations/openai/keys",
                json!({"env_var": "OPENAI_API_KEY"}),
            )
            .await,
        bad,
        "value is required",
        Some("value"),
    );
    assert_own_words(
        &server.post("/api/chat", json!({"prompt": 1})).await,
        bad,
        "prompt must be a string, not a number",
        Some("prompt"),
    );
    assert_own_words(
        &post_raw(
            &server,
            "/api/agents",
            "application/json",
            b"{not json".to_vec(),
        )
        .await,
        bad,
        "the request body is not valid JSON (line 1, column 2)",
        None,
    );
    assert_own_words(
        &post_raw(
            &server,
            "/api/agents",
            "text/plain",
            br#"{"name": "a"}"#.to_vec(),
        )
        .await,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "Content-Type: application/json",
        None,
    );
    assert_own_words(
        &server.get("/api/traces?limit=abc").await,
        bad,
        "limit must be a whole number between 1 and 500",
        Some("limit"),
    );
    assert_own_words(
        &server.get("/api/tasks?offset=-1").await,
        bad,
        "offset must be a whole number of at least 0",
        Some("offset"),
    );
    let (_, list) = server.get("/api/agents").await;
    assert_eq!(
        list["agents"].as_array().unwrap().len(),
        1,
        "nothing was written"
    );
}

#[tokio::test]
async fn bodies_over_the_limit_answer_413_in_json_on_the_api_and_adapter_routes() {
    let server = Server::start();
    let limit = 2 << 20;
    let too_big = vec![b' '; limit + 1];
    for path in [
        "/api/agents",
        "/api/adapters/webhook/run",
        "/api/adapters/nope/x",
    ] {
        let answer = post_raw(&server, path, "application/json", too_big.clone()).await;
        assert_error(
            &answer,
            StatusCode::PAYLOAD_TOO_LARGE,
            "larger than the limit of 2 MiB",
        );
    }
    // Without a declared length (chunked), the limit holds as the body arrives.
    let chunks =
        futures_util::stream::iter((0..5).map(|_| Ok::<_, std::io::Error>(vec![b' '; 512 * 1024])));
    let response = reqwest::Client::new()
        .post(server.url("/api/adapters/webhook/run"))
        .body(reqwest::Body::wrap_stream(chunks))
        .send()
        .await
        .unwrap();
    assert_error(
        &json_of(response).await,
        StatusCode::PAYLOAD_TOO_LARGE,
        "2 MiB",
    );
    // Far over the limit by its declared length: answered before a byte of it is sent.
    let addr = server.url.trim_start_matches("http://").to_owned();
    let mut huge = slow_client(
        &addr,
        &format!(
            "POST /api/agents HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n",
            100 << 20
        ),
    )
    .await;
    let answer = until_closed(&mut huge, Duration::from_secs(10)).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(
        answer.contains("larger than the limit of 2 MiB"),
        "{answer}"
    );
    // The limit itself is allowed: this body is read, and refused for what it is.
    let at_limit = post_raw(
        &server,
        "/api/agents",
        "application/json",
        vec![b' '; limit],
    )
    .await;
    assert_error(&at_limit, StatusCode::BAD_REQUEST, "not valid JSON");
}

/// Connects and sends `sent`, then nothing more.
async fn slow_client(addr: &str, sent: &str) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(sent.as_bytes()).await.unwrap();
    stream
}

/// Whether the server still holds `stream` open without having answered.
fn still_open(stream: &TcpStream) -> bool {
    let mut byte = [0u8; 1];
    matches!(stream.try_read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

/// Everything the server sends until it closes the connection (bounded by `limit`).
async fn until_closed(stream: &mut TcpStream, limit: Duration) -> String {
    let mut answer = Vec::new();
    tokio::time::timeout(limit, stream.read_to_end(&mut answer))
        .await
        .expect("the server kept a slow client's connection open")
        .unwrap();
    String::from_utf8_lossy(&answer).into_owned()
}

async fn health(server: &Server) -> StatusCode {
    // A client of its own, dropped after the request: no pooled connection keeps a slot.
    reqwest::Client::new()
        .get(server.url("/api/health"))
        .send()
        .await
        .unwrap()
        .status()
}

#[tokio::test]
async fn slow_clients_time_out_and_do_not_starve_others() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(
        data.join("config.toml"),
        "[server]\nheader_timeout_secs = 3\nbody_timeout_secs = 3\nmax_connections = 4\n\
         max_connections_per_peer = 4\n",
    )
    .unwrap();
    let server = Server::start_in(&data, &[]);
    let addr = server.url.trim_start_matches("http://").to_owned();
    let half_headers = format!("GET /api/health HTTP/1.1\r\nHost: {addr}\r\n");

    // Below the cap, slow clients take their slots and nothing from anyone else: a request
    // is answered while all of them are still held.
    let mut slow = vec![
        slow_client(&addr, "").await,
        slow_client(&addr, &half_headers).await,
        slow_client(&addr, "GE").await,
    ];
    assert_eq!(health(&server).await, StatusCode::OK);
    assert!(slow.iter().all(still_open), "answered while they wait");

    // At the cap, the next client waits for a slot, which the header deadline frees.
    slow.push(slow_client(&addr, &half_headers).await);
    let started = Instant::now();
    assert_eq!(health(&server).await, StatusCode::OK);
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    for stream in &mut slow {
        until_closed(stream, Duration::from_secs(10)).await;
    }

    // A body that never arrives in full is answered 408 when the body deadline passes.
    let mut trickle = slow_client(
        &addr,
        &format!(
            "POST /api/agents HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Content-Length: 100\r\n\r\n{{\"name\""
        ),
    )
    .await;
    let answer = until_closed(&mut trickle, Duration::from_secs(10)).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(
        answer.contains("the request body did not arrive within 3 s"),
        "{answer}"
    );
    assert_eq!(health(&server).await, StatusCode::OK);
}

/// How much arrives on `stream` before the server closes it (bounded by `limit`).
async fn received_before_close(stream: &mut TcpStream, limit: Duration) -> usize {
    let mut chunk = vec![0u8; 64 << 10];
    let mut received = 0;
    loop {
        match tokio::time::timeout(limit, stream.read(&mut chunk))
            .await
            .expect("the server kept a connection that reads nothing open")
        {
            Ok(0) | Err(_) => return received,
            Ok(n) => received += n,
        }
    }
}

#[tokio::test]
async fn a_client_that_never_reads_holds_its_share_for_the_write_deadline_only() {
    let _heavy = crate::support::heavy().await;
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(
        data.join("config.toml"),
        "[server]\nmax_connections = 16\nmax_connections_per_peer = 4\nwrite_timeout_secs = 2\n",
    )
    .unwrap();
    let server = Server::start_in(&data, &[]);
    // Big answers are made on the guest lane, which a machine busy with other work runs last:
    // a long request limit keeps a slow machine from turning them into timeouts (503s, small
    // answers that would leave the connections idle instead of stuck writing).
    let grant = "[limits]\nhandle_http_ms = 60000\n";
    drop_in(&server, "hostile", &guest("hostile"), grant);
    loaded(&server, "hostile").await;
    let addr = server.url.trim_start_matches("http://").to_owned();
    let ask = |bytes: usize| {
        format!("GET /api/adapters/hostile/big?bytes={bytes} HTTP/1.1\r\nHost: {addr}\r\n\r\n")
    };

    // Four connections ask for 4 MB each and read nothing, with a receive buffer small enough
    // that the answer cannot wait in the kernel: this address's whole share.
    let mut held = Vec::new();
    for _ in 0..4 {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(8 << 10).unwrap();
        let mut stream = socket.connect(addr.parse().unwrap()).await.unwrap();
        stream.write_all(ask(4_000_000).as_bytes()).await.unwrap();
        held.push(stream);
    }
    // A fifth from the same address is turned away at once, in words.
    let mut fifth = slow_client(&addr, &ask(10)).await;
    let answer = until_closed(&mut fifth, Duration::from_secs(5)).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("the most one client may hold"), "{answer}");
    // Another address is served meanwhile.
    let elsewhere = reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .unwrap();
    let response = elsewhere
        .get(server.url("/api/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    // Reading nothing for the write deadline (2 s), each is closed: what arrived is what the
    // socket buffers took, not the answer.
    tokio::time::sleep(Duration::from_secs(4)).await;
    for stream in &mut held {
        let received = received_before_close(stream, Duration::from_secs(15)).await;
        assert!(received < 4_000_000, "{received}");
    }
    // The share is free again.
    assert_eq!(health(&server).await, StatusCode::OK);

    // An answer past 4 MiB is not passed on, and the entry says why.
    let response = reqwest::get(server.url("/api/adapters/hostile/big?bytes=5000000"))
        .await
        .unwrap();
    let (status, said) = (response.status(), response.text().await.unwrap());
    assert_eq!(status, StatusCode::BAD_GATEWAY, "{said}");
    let hostile = server.adapter("hostile").await.unwrap();
    assert!(
        hostile["error_message"]
            .as_str()
            .unwrap()
            .contains("a body of 5000000 bytes, more than 4 MiB"),
        "{hostile}"
    );
}

#[tokio::test]
async fn the_dashboard_refuses_to_be_framed() {
    let server = Server::start();
    for path in ["/", "/assets/app.js"] {
        let response = reqwest::get(server.url(path)).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let policy = response.headers()["content-security-policy"]
            .to_str()
            .unwrap();
        assert!(
            policy.contains("frame-ancestors 'none'"),
            "{path}: {policy}"
        );
        assert!(policy.contains("default-src 'self'"), "{path}: {policy}");
        assert_eq!(response.headers()["x-frame-options"], "DENY", "{path}");
    }
}

#[tokio::test]
async fn logs_written_to_a_file_carry_no_colour_codes() {
    let server = Server::start();
    assert_eq!(server.get("/api/nope").await.0, StatusCode::NOT_FOUND);
    let log = std::fs::read_to_string(server.data_dir.join("server.log")).unwrap();
    assert!(log.contains("INFO") && log.contains("serving"), "{log}");
    assert!(!log.contains('\u{1b}'), "{log:?}");
}
