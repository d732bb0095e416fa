//! One request to a trivial route of a guest loaded in this process, as the benches of guests
//! time it.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use service_contract::HttpRequest;
use service_runtime::adapters::Managed;
use service_runtime::app::App;
use service_runtime::wasm::grants::Grant;
use service_runtime::wasm::{Generation, Named};

use super::guests;

pub const CALLS: usize = 2_000;

/// A guest: its label, component and trivial route.
pub type Guest = (&'static str, PathBuf, &'static str);

/// The guests the benches compare, the Rust one (the baseline) first.
pub fn guests() -> [Guest; 4] {
    [
        ("Rust (echo, baseline)", guests::guest("echo"), "/hello"),
        ("Rust wasi:http (proxy)", guests::guest("proxy"), "/"),
        ("Python (python-echo)", guests::python_echo(), "/hello"),
        ("JavaScript (js-echo)", guests::js_echo(), "/hello"),
    ]
}

/// Loads a component with nothing granted but what its route needs (nothing), and `grant`.
pub async fn load(app: &App, wasm: &Path, file: &str, grant: &str) -> Generation {
    let bytes = std::fs::read(wasm).unwrap();
    let grant = Grant::parse(grant).unwrap();
    let loader = app.components.loader();
    let guest = loader
        .load(Named::Own { file }, bytes, Some(grant))
        .await
        .unwrap();
    // What is measured is the optimizing compiler's code, as it serves once optimized.
    loader.optimize(&guest).await.unwrap();
    guest
}

/// Median and 99th percentile of `CALLS` sequential requests after a warm-up; `call` answers
/// one request's status.
pub async fn measure<F: Future<Output = u16>>(call: impl Fn() -> F) -> (Duration, Duration) {
    for _ in 0..50 {
        call().await;
    }
    let mut samples = Vec::with_capacity(CALLS);
    for _ in 0..CALLS {
        let started = Instant::now();
        let status = call().await;
        samples.push(started.elapsed());
        assert_eq!(status, 200);
    }
    samples.sort();
    (samples[CALLS / 2], samples[CALLS * 99 / 100])
}

/// One `GET path` through the project's host (the sandbox, as a request to the adapter is).
pub async fn through_project(guest: &Generation, path: &str) -> u16 {
    let request = HttpRequest {
        method: "GET".into(),
        path: path.into(),
        query: String::new(),
        headers: vec![],
        body: vec![],
    };
    guest.handle_http(request).await.unwrap().status
}

/// The round with the median p50.
pub fn median(mut rounds: Vec<(Duration, Duration)>) -> (Duration, Duration) {
    rounds.sort();
    rounds[rounds.len() / 2]
}
