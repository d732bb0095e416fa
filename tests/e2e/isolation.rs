//! Resource isolation of components through the real binary: a hostile adapter may burn its
//! own deadline, quota and share, never the server's or a neighbour's.

use std::time::{Duration, Instant};

use reqwest::StatusCode;

use crate::guests::guest;
use crate::support::{Server, eventually};
use crate::wasm::{ECHO_GRANT, drop_in, loaded};

/// Twice as many spinning guests as the machine has cores, as jobs and as requests at once.
#[tokio::test]
async fn spinning_guests_never_hold_the_api_or_a_neighbour() {
    let server = Server::start();
    drop_in(&server, "echo", &guest("echo"), ECHO_GRANT);
    let grant = "outbound_hosts = [\"http://127.0.0.1:9\"]\njobs = true\n\
                 [limits]\nhandle_http_ms = 30000\nrun_job_ms = 30000\n";
    drop_in(&server, "hostile", &guest("hostile"), grant);
    loaded(&server, "echo").await;
    loaded(&server, "hostile").await;

    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    let client = reqwest::Client::new();
    let mut jobs = Vec::new();
    for _ in 0..cores {
        let response = client
            .get(server.url("/api/adapters/hostile/spin-job"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::ACCEPTED);
        jobs.push(response.text().await.unwrap());
    }
    let spinning: Vec<_> = (0..cores)
        .map(|_| tokio::spawn(client.get(server.url("/api/adapters/hostile/loop")).send()))
        .collect();
    eventually(20, async || {
        let (_, tasks) = server.get("/api/tasks?status=running").await;
        let running = tasks["tasks"]
            .as_array()?
            .iter()
            .filter(|t| jobs.iter().any(|j| t["task_id"] == j.as_str()))
            .count();
        (running == cores).then_some(())
    })
    .await;

    // Every answer comes while all of them spin. The bound is loose on purpose: the latency
    // figures are the benchmark's (benches/isolation.rs); without isolation these waited for
    // the spinners' deadlines.
    for path in ["/api/health", "/api/adapters/echo/hello", "/api/adapters"] {
        for _ in 0..10 {
            let started = Instant::now();
            let response = client.get(server.url(path)).send().await.unwrap();
            assert_eq!(response.status(), StatusCode::OK, "{path}");
            assert!(
                started.elapsed() < Duration::from_secs(1),
                "{path} took {:?} while guests spin",
                started.elapsed()
            );
        }
    }
    assert!(
        spinning.iter().all(|request| !request.is_finished()),
        "the spinning requests are still running (their deadline is 30 s)"
    );
}
