//! Instantiate + call of a small Rust component (`echo`'s `GET /hello`: a fresh store and
//! instance per call, as every request gets), with the pooling allocator and with on-demand
//! allocation, measured in the same run. The on-demand figure is the baseline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use service_contract::HttpRequest;
use service_runtime::adapters::Managed;
use service_runtime::app::{App, Role};
use service_runtime::wasm::grants::Grant;
use service_runtime::wasm::{Generation, Loader, Named, Sandbox};

// The tests' guest builder; this benchmark only needs `guest`.
#[allow(dead_code)]
#[path = "../../../tests/e2e/guests.rs"]
mod guests;

const CALLS: usize = 2_000;

/// The echo component loaded on a sandbox of its own, pooled or not.
async fn echo(app: &App, pooling: bool) -> Generation {
    let sandbox = Arc::new(Sandbox::new(pooling, &Default::default()).unwrap());
    assert_eq!(
        sandbox.pooled(),
        pooling,
        "the pool could not be reserved on this machine"
    );
    let loader = Loader::new(
        sandbox,
        Arc::clone(app.components.loader().services()),
        &app.data_dir,
        Default::default(),
        &[],
        Vec::new(),
    );
    let grant = Grant::parse("kv = true\njobs = true\nagent = true\ntools = [\"*\"]\noutbound_hosts = [\"http://127.0.0.1:9\"]\nsecrets = [\"ECHO_TOKEN\"]").unwrap();
    let bytes = std::fs::read(guests::guest("echo")).unwrap();
    let echo = loader
        .load(Named::Own { file: "bench" }, bytes, Some(grant))
        .await
        .unwrap();
    // What is measured is the optimizing compiler's code, as it serves once optimized.
    loader.optimize(&echo).await.unwrap();
    echo
}

/// Median and mean of `CALLS` sequential requests after a warm-up.
async fn measure(echo: &Generation) -> (Duration, Duration) {
    let request = || HttpRequest {
        method: "GET".into(),
        path: "/hello".into(),
        query: String::new(),
        headers: vec![],
        body: vec![],
    };
    for _ in 0..100 {
        echo.handle_http(request()).await.unwrap();
    }
    let mut samples = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let started = Instant::now();
        let response = echo.handle_http(request()).await.unwrap();
        samples.push(started.elapsed());
        assert_eq!(response.status, 200);
    }
    let mean = samples.iter().sum::<Duration>() / CALLS as u32;
    samples.sort();
    (samples[CALLS / 2], mean)
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let tmp = tempfile::tempdir().unwrap();
        let app = App::open(tmp.path(), Role::Server).await.unwrap();
        let on_demand = measure(&echo(&app, false).await).await;
        let pooled = measure(&echo(&app, true).await).await;
        println!("instantiate + call of echo GET /hello ({CALLS} calls, fresh instance each)");
        println!("  on-demand allocation (baseline): median {:7.1} µs, mean {:7.1} µs", us(on_demand.0), us(on_demand.1));
        println!(
            "  pooling allocator:               median {:7.1} µs, mean {:7.1} µs  ({:.2}x faster by median)",
            us(pooled.0),
            us(pooled.1),
            us(on_demand.0) / us(pooled.0)
        );
    });
}
