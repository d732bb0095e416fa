//! `cargo bench -p service-runtime --bench observability`
//!
//! What exporting traces costs the teamchat route: signed mentions through the real binary
//! (SQLite, the bundled teamchat component, a fake of the platform's Web API, a fake model
//! that answers after 5 s so runs pile up as in production), 500 mentions at 100 a second,
//! with trace export off and with every span sent over OTLP/HTTP (protobuf, a 200 ms batch
//! delay) to a local collector that decodes nothing and counts the requests. Two rounds,
//! alternating, on fresh state each time; the ack latency's p50 and p99 of each, and the p99
//! with export as a ratio of the p99 without (target: at most 1.2).
//!
//! Everything (the server, the fakes, the collector, the client) shares the machine's cores.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

// Shared with the teamchat delivery benches, which use other parts of it.
#[allow(dead_code)]
#[path = "shared/teamchat_load.rs"]
mod teamchat_load;

use teamchat_load::{Fakes, Server, burst, data_dir, ms, quantile, targets, verdict};

const TARGET_RATIO: f64 = 1.2;

/// A collector that takes every export and counts the requests.
async fn collector() -> (String, Arc<AtomicUsize>) {
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&requests);
    let router = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(move |_: axum::body::Bytes| {
            let counted = Arc::clone(&counted);
            async move {
                counted.fetch_add(1, Ordering::Relaxed);
                ""
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (format!("http://{addr}"), requests)
}

/// Ack latencies (p50, p99) of one run, and the collector's requests (with export).
async fn run(export: bool) -> (Duration, Duration, usize) {
    let fakes = Fakes::start(Duration::from_secs(5), 64).await;
    let (endpoint, requests) = collector().await;
    let mut env = fakes.env.clone();
    if export {
        for (name, value) in [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_BSP_SCHEDULE_DELAY", "200"),
        ] {
            env.push((name.to_owned(), value.to_owned()));
        }
    }
    let root = tempfile::tempdir().unwrap();
    let server = Server::start(
        &data_dir(root.path(), "server", "[jobs]\nworkers = 64\n"),
        &env,
    );
    let client = reqwest::Client::new();
    let acks = burst(&client, &targets(&[&server.url]), 500, 100).await;
    drop(server);
    let all = acks.all();
    (
        quantile(&all, 0.5),
        acks.p99(),
        requests.load(Ordering::Relaxed),
    )
}

#[tokio::main]
async fn main() {
    println!("teamchat acks, 500 mentions at 100/s, 5 s model; trace export off vs on");
    let mut worst: f64 = 0.0;
    for round in 1..=2 {
        let (off_p50, off_p99, _) = run(false).await;
        let (on_p50, on_p99, exports) = run(true).await;
        let ratio = on_p99.as_secs_f64() / off_p99.as_secs_f64();
        worst = worst.max(ratio);
        println!(
            "round {round}: off p50 {:.2} ms p99 {:.2} ms | on p50 {:.2} ms p99 {:.2} ms \
             ({exports} export requests) | p99 on/off {ratio:.2}x",
            ms(off_p50),
            ms(off_p99),
            ms(on_p50),
            ms(on_p99),
        );
    }
    println!(
        "worst p99 ratio {worst:.2}x (target <= {TARGET_RATIO}x): {}",
        verdict(worst <= TARGET_RATIO)
    );
}
