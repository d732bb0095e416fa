//! `cargo bench -p service-runtime --bench guest_languages`
//!
//! The time of one request to a trivial route (a fresh instance per request, as the server
//! does) for guests written in Rust (`echo`), Python (`python-echo`, componentize-py) and
//! JavaScript (`js-echo`, componentize-js), measured in one run; the Rust guest is the baseline.
//! A plain `wasi:http/proxy` component in Rust (`proxy`, the `wasi` crate) answers the same way
//! through `wasi:http/incoming-handler`. Beside each, the floor: the same component served the
//! way `wasmtime serve` serves it (`shared/bare_host.rs`). Targets: every language under 1 ms;
//! the proxy component within 1.2x of the same guest in the project's world; the project's
//! host at most 1.15x the floor for every guest.

// Each bench uses some of the figures.
#[allow(dead_code)]
#[path = "../../../tests/shared/stats.rs"]
mod stats;
use stats::ms;
use std::process::{Child, Stdio};
use std::time::Duration;

use service_runtime::app::{App, Role};

#[path = "shared/bare_host.rs"]
mod bare_host;
use bare_host::BareHost;
#[path = "shared/trivial_route.rs"]
mod trivial_route;
use trivial_route::{CALLS, Guest, load, measure, median, through_project};

// The tests' guest builders.
#[allow(dead_code)]
#[path = "../../../tests/e2e/guests.rs"]
mod guests;
// The tests' way of starting the binary.
#[allow(dead_code)]
#[path = "../../../tests/shared/serve.rs"]
mod serve;
// The one way tests and benches wait (each bench uses a part of it).
#[allow(dead_code)]
#[path = "../../../tests/shared/wait.rs"]
mod wait;

const BIN: &str = env!("CARGO_BIN_EXE_service-runtime");

const ROUNDS: usize = 3;

/// What the kept rows grant: one instance for every request of a round.
const REUSE: &str = "reuse = 1000";

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let guests = trivial_route::guests();
        in_process(&guests).await;
        through_http(&guests).await;
        std::process::exit(0);
    });
}

/// The sandbox's call, in this process, beside the bare host's; and with `reuse`.
async fn in_process(guests: &[Guest]) {
    let tmp = tempfile::tempdir().unwrap();
    let app = App::open(tmp.path(), Role::Server).await.unwrap();
    println!(
        "one request to a trivial route, a fresh instance each ({CALLS} sequential, the median \
         of {ROUNDS} alternating rounds); the floor is the same component served as \
         `wasmtime serve` serves it (benches/shared/bare_host.rs); kept: `{REUSE}`:"
    );
    let mut baseline = None;
    let mut met = true;
    let mut proxy_ratio = 0.0;
    let mut worst_floor = 0.0f64;
    let mut worst_kept = Duration::ZERO;
    for (label, wasm, path) in guests {
        let size = std::fs::metadata(wasm).unwrap().len();
        let floor = BareHost::load(&std::fs::read(wasm).unwrap());
        let name = wasm.file_stem().unwrap().to_str().unwrap();
        let guest = load(&app, wasm, name, "").await;
        let kept = load(&app, wasm, &format!("{name}-kept"), REUSE).await;
        let (mut ours, mut bare, mut reused) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            ours.push(measure(|| through_project(&guest, path)).await);
            bare.push(measure(|| floor.get(path)).await);
            reused.push(measure(|| through_project(&kept, path)).await);
        }
        let ((p50, p99), (floor_p50, _)) = (median(ours), median(bare));
        let (kept_p50, _) = median(reused);
        let base = *baseline.get_or_insert(p50);
        if *path == "/" {
            proxy_ratio = ms(p50) / ms(base);
        }
        met &= p50 < Duration::from_millis(1);
        let over_floor = ms(p50) / ms(floor_p50);
        worst_floor = worst_floor.max(over_floor);
        worst_kept = worst_kept.max(kept_p50);
        println!(
            "  {label:24} {:6.1} MB  p50 {:7.3} ms  p99 {:7.3} ms  ({:5.1}x the Rust guest)  \
             floor {:7.3} ms ({over_floor:.2}x it)  kept {:7.3} ms",
            size as f64 / 1e6,
            ms(p50),
            ms(p99),
            ms(p50) / ms(base),
            ms(floor_p50),
            ms(kept_p50),
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
    println!(
        "  target: at most 1.15x the floor for every guest: worst {worst_floor:.2}x, {}",
        if worst_floor <= 1.15 { "met" } else { "MISSED" }
    );
    println!(
        "  target: kept instances at most 0.1 ms a request: worst {:.3} ms, {}",
        ms(worst_kept),
        if worst_kept <= Duration::from_micros(100) {
            "met"
        } else {
            "MISSED"
        }
    );
}

/// The release binary with `guests` installed, each granted `grant`, once it serves their
/// optimized code: the process, its URL and its data directory.
fn start_binary(guests: &[Guest], grant: &str) -> (Child, String, tempfile::TempDir) {
    let data = tempfile::tempdir().unwrap();
    let adapters = data.path().join("adapters");
    std::fs::create_dir_all(&adapters).unwrap();
    for (_, wasm, _) in guests {
        let name = wasm.file_stem().unwrap().to_str().unwrap();
        std::fs::copy(wasm, adapters.join(format!("{name}.wasm"))).unwrap();
        std::fs::write(adapters.join(format!("{name}.toml")), grant).unwrap();
    }
    let mut serve = serve::clean_command(BIN, data.path(), "warn");
    serve.stderr(Stdio::null());
    let (child, url) = serve::spawn_serving(serve, data.path());
    let url = url.expect("the server did not start");
    serve::wait_until_ready(&url, data.path(), Duration::from_secs(120));
    serve::wait_until_optimized(&url, data.path(), Duration::from_secs(600));
    (child, url, data)
}

/// The same requests through the release binary (the components installed, on their optimized
/// code; a second binary grants them `reuse`) and through the bare host behind hyper, one
/// keep-alive client each.
async fn through_http(guests: &[Guest]) {
    let (mut fresh, fresh_url, _fresh_data) = start_binary(guests, "");
    let (mut kept, kept_url, _kept_data) = start_binary(guests, REUSE);
    // Per guest: the binary, the binary with reuse, the floor.
    let mut targets = vec![format!("{fresh_url}/api/health")];
    for (_, wasm, path) in guests {
        let name = wasm.file_stem().unwrap().to_str().unwrap();
        let floor = bare_host::serve(BareHost::load(&std::fs::read(wasm).unwrap())).await;
        targets.push(format!("{fresh_url}/api/adapters/{name}{path}"));
        targets.push(format!("{kept_url}/api/adapters/{name}{path}"));
        targets.push(format!("{floor}{path}"));
    }
    let client = reqwest::Client::new();
    let mut figures = vec![Vec::new(); targets.len()];
    for _ in 0..ROUNDS {
        for (target, rounds) in targets.iter().zip(&mut figures) {
            rounds.push(measure(|| get(&client, target)).await);
        }
    }
    for child in [&mut fresh, &mut kept] {
        let _ = child.kill();
        let _ = child.wait();
    }
    let p50s: Vec<f64> = figures.into_iter().map(|r| ms(median(r).0)).collect();
    println!(
        "the same through HTTP ({CALLS} sequential keep-alive requests, the median of {ROUNDS} \
         alternating rounds): the release binary, with `{REUSE}`, and the floor behind hyper; \
         `/api/health` {:.3} ms:",
        p50s[0]
    );
    let (rust, rust_kept) = (p50s[1], p50s[2]);
    for ((label, _, _), row) in guests.iter().zip(p50s[1..].chunks(3)) {
        let [binary, kept, floor] = [row[0], row[1], row[2]];
        println!(
            "  {label:24} p50 {binary:7.3} ms ({:+.3} over Rust)  kept {kept:7.3} ms ({:+.3} \
             over Rust kept)  floor {floor:7.3} ms ({:.2}x it)",
            binary - rust,
            kept - rust_kept,
            binary / floor
        );
    }
}

async fn get(client: &reqwest::Client, url: &str) -> u16 {
    let response = client.get(url).send().await.unwrap();
    let status = response.status().as_u16();
    response.bytes().await.unwrap();
    status
}
