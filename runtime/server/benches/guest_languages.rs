//! `cargo bench -p service-runtime --bench guest_languages`
//!
//! The time of one request to a trivial route (a fresh instance per request, as the server
//! does) for guests written in Rust (`echo`), Python (`python-echo`, componentize-py) and
//! JavaScript (`js-echo`, componentize-js), measured in one run; the Rust guest is the baseline.
//! A plain `wasi:http/proxy` component in Rust (`proxy`, the `wasi` crate) answers the same way
//! through `wasi:http/incoming-handler`. Targets: every language under 1 ms; the proxy
//! component within 1.2x of the same guest in the project's world.

// Each bench uses some of the figures.
#[allow(dead_code)]
#[path = "../../../tests/shared/stats.rs"]
mod stats;
use stats::ms;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use service_contract::HttpRequest;
use service_runtime::adapters::Managed;
use service_runtime::app::{App, Role};
use service_runtime::wasm::grants::Grant;
use service_runtime::wasm::{Generation, Named};

// The tests' guest builders.
#[allow(dead_code)]
#[path = "../../../tests/e2e/guests.rs"]
mod guests;

const CALLS: usize = 2_000;

/// Loads a component with nothing granted but what its route needs (nothing).
async fn load(app: &App, wasm: PathBuf) -> Generation {
    let bytes = std::fs::read(&wasm).unwrap();
    let grant = Grant::parse("").unwrap();
    let file = wasm.file_stem().unwrap().to_str().unwrap();
    let loader = app.components.loader();
    let guest = loader
        .load(Named::Own { file }, bytes, Some(grant))
        .await
        .unwrap();
    // What is measured is the optimizing compiler's code, as it serves once optimized.
    loader.optimize(&guest).await.unwrap();
    guest
}

/// Median and 99th percentile of `CALLS` sequential requests after a warm-up.
async fn measure(guest: &Generation, path: &str) -> (Duration, Duration) {
    let request = || HttpRequest {
        method: "GET".into(),
        path: path.into(),
        query: String::new(),
        headers: vec![],
        body: vec![],
    };
    for _ in 0..50 {
        guest.handle_http(request()).await.unwrap();
    }
    let mut samples = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let started = Instant::now();
        let response = guest.handle_http(request()).await.unwrap();
        samples.push(started.elapsed());
        assert_eq!(response.status, 200);
    }
    samples.sort();
    (samples[CALLS / 2], samples[CALLS * 99 / 100])
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let tmp = tempfile::tempdir().unwrap();
        let app = App::open(tmp.path(), Role::Server).await.unwrap();
        let guests = [
            ("Rust (echo, baseline)", guests::guest("echo"), "/hello"),
            ("Rust wasi:http (proxy)", guests::guest("proxy"), "/"),
            ("Python (python-echo)", guests::python_echo(), "/hello"),
            ("JavaScript (js-echo)", guests::js_echo(), "/hello"),
        ];
        println!("one request to a trivial route, a fresh instance each ({CALLS} sequential):");
        let mut baseline = None;
        let mut met = true;
        let mut proxy_ratio = 0.0;
        for (label, wasm, path) in guests {
            let size = std::fs::metadata(&wasm).unwrap().len();
            let guest = Arc::new(load(&app, wasm).await);
            let (p50, p99) = measure(&guest, path).await;
            let base = *baseline.get_or_insert(p50);
            if path == "/" {
                proxy_ratio = ms(p50) / ms(base);
            }
            met &= p50 < Duration::from_millis(1);
            println!(
                "  {label:24} {:6.1} MB  p50 {:7.3} ms  p99 {:7.3} ms  ({:5.1}x the Rust guest)",
                size as f64 / 1e6,
                ms(p50),
                ms(p99),
                ms(p50) / ms(base)
            );
        }
        println!(
            "  target: under 1 ms each: {}",
            if met { "met" } else { "MISSED" }
        );
        println!(
            "  target: the wasi:http component within 1.2x of the Rust guest: {proxy_ratio:.2}x, {}",
            if proxy_ratio <= 1.2 { "met" } else { "MISSED" }
        );
        std::process::exit(0);
    });
}
