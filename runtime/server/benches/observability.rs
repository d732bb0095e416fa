//! `cargo bench -p service-runtime --bench observability`
//!
//! What exporting traces costs the teamchat route: signed mentions through the real binary
//! (SQLite, the bundled teamchat component, a fake of the platform's Web API, a fake model
//! that answers after 5 s so runs pile up as in production), 1,000 mentions at 100 a second,
//! with trace export off and with every span sent over OTLP/HTTP (protobuf, the default batch
//! settings) to a local collector that decodes nothing and counts the requests. Three rounds,
//! alternating, on fresh state each time: each round's ack latency p50 and p99, then the p99
//! of all acks with export as a ratio of the p99 of all without (target: at most 1.2). A p99
//! of one round is its tenth-slowest ack, which the machine's other work moves about: the
//! pooled figure is the verdict, the rounds show the spread.
//!
//! Everything (the server, the fakes, the collector, the client) shares the machine's cores.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

// Shared with the teamchat delivery benches, which use other parts of it.
// Each bench uses some of the figures.
#[allow(dead_code)]
#[path = "../../../tests/shared/stats.rs"]
mod stats;
#[allow(dead_code)]
#[path = "shared/teamchat_load.rs"]
mod teamchat_load;

use stats::{ms, verdict};
use teamchat_load::{Fakes, Server, burst, data_dir, quantile, targets};

const TARGET_RATIO: f64 = 1.2;
const MENTIONS: usize = 1_000;

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

/// What became of the spans of a run with export: sent in how many requests, and how many
/// were sent and dropped (the server's own counts, read before it stops).
struct Exported {
    requests: usize,
    spans: f64,
    dropped: f64,
}

/// A counter of the server's `/metrics`.
async fn counter(client: &reqwest::Client, server: &Server, name: &str) -> f64 {
    let text = client
        .get(format!("{}/metrics", server.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The acks of one run, and (with export) what became of the spans.
async fn run(export: bool) -> (Vec<Duration>, Exported) {
    let fakes = Fakes::start(Duration::from_secs(5), 64).await;
    let (endpoint, requests) = collector().await;
    let mut env = fakes.env.clone();
    if export {
        for (name, value) in [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
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
    let acks = burst(&client, &targets(&[&server.url]), MENTIONS, 100).await;
    // The replies' runs end 5 s after the last mention; their spans go out with the next batch.
    tokio::time::sleep(Duration::from_secs(11)).await;
    let exported = Exported {
        requests: requests.load(Ordering::Relaxed),
        spans: counter(
            &client,
            &server,
            "service_runtime_otel_spans_exported_total",
        )
        .await,
        dropped: counter(&client, &server, "service_runtime_otel_spans_dropped_total").await,
    };
    drop(server);
    (acks.all(), exported)
}

#[tokio::main]
async fn main() {
    println!("teamchat acks, {MENTIONS} mentions at 100/s, 5 s model; trace export off vs on");
    let (mut all_off, mut all_on) = (Vec::new(), Vec::new());
    for round in 1..=3 {
        let (off, _) = run(false).await;
        let (on, exported) = run(true).await;
        let ratio = quantile(&on, 0.99).as_secs_f64() / quantile(&off, 0.99).as_secs_f64();
        println!(
            "round {round}: off p50 {:.2} ms p99 {:.2} ms | on p50 {:.2} ms p99 {:.2} ms \
             ({} spans in {} export requests, {} dropped) | p99 on/off {ratio:.2}x",
            ms(quantile(&off, 0.5)),
            ms(quantile(&off, 0.99)),
            ms(quantile(&on, 0.5)),
            ms(quantile(&on, 0.99)),
            exported.spans,
            exported.requests,
            exported.dropped,
        );
        all_off.extend(off);
        all_on.extend(on);
    }
    let (off, on) = (quantile(&all_off, 0.99), quantile(&all_on, 0.99));
    let ratio = on.as_secs_f64() / off.as_secs_f64();
    println!(
        "all rounds: p99 off {:.2} ms, on {:.2} ms: {ratio:.2}x (target <= {TARGET_RATIO}x): {}",
        ms(off),
        ms(on),
        verdict(ratio <= TARGET_RATIO)
    );
}
