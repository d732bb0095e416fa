//! `cargo bench -p service-runtime --bench isolation`
//!
//! The latency of `/api/health` and of another adapter's route (echo's `GET /hello`) on the real
//! server binary while twice as many guests as the machine has cores keep it busy (half of them
//! in jobs, half in requests), against the same with idle guests, in alternating rounds of one
//! run (so a slow moment of a shared machine hits both). Busy two ways: guests that spin, and
//! guests that make the host work for them (HMACs over 60 MiB of their memory, one after the
//! other). Targets: p99 under 20 ms, and under twice the idle p99 (medians over the rounds).

// Each bench uses some of the figures.
#[allow(dead_code)]
#[path = "../../../tests/shared/stats.rs"]
mod stats;
use stats::{median, ms};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

// The tests' guest builder; this benchmark needs `guest`.
#[allow(dead_code)]
#[path = "../../../tests/e2e/guests.rs"]
mod guests;
// The tests' way of starting the binary.
#[path = "../../../tests/shared/serve.rs"]
mod serve;
// The one way tests and benches wait (each bench uses a part of it).
#[allow(dead_code)]
#[path = "../../../tests/shared/wait.rs"]
mod wait;

const SAMPLES: usize = 1_000;
const ROUNDS: usize = 5;
/// How long each spinner spins (its deadline); a round measures while they all spin.
const SPIN_MS: u64 = 8_000;

struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The release binary on a fresh data directory with echo and hostile installed.
fn start(data_dir: &Path) -> Server {
    let adapters = data_dir.join("adapters");
    std::fs::create_dir_all(&adapters).unwrap();
    for (name, grant) in [
        (
            "echo",
            &"agent = true\nkv = true\njobs = true\noutbound_hosts = [\"http://127.0.0.1:9\"]\n"
                .to_owned(),
        ),
        (
            "hostile",
            &format!(
                "jobs = true\nsecrets = [\"HOSTILE_KEY\"]\noutbound_hosts = [\"http://127.0.0.1:9\"]\n\
                 [limits]\nhandle_http_ms = {SPIN_MS}\nrun_job_ms = {SPIN_MS}\nmemory_mib = 128\n"
            ),
        ),
    ] {
        std::fs::copy(guests::guest(name), adapters.join(format!("{name}.wasm"))).unwrap();
        std::fs::write(adapters.join(format!("{name}.toml")), grant).unwrap();
    }
    let mut serve = serve::clean_command(env!("CARGO_BIN_EXE_service-runtime"), data_dir, "warn");
    serve
        .stderr(Stdio::null())
        .env("HOSTILE_KEY", "a key to hash with");
    let (child, url) = serve::spawn_serving(serve, data_dir);
    let url = url.expect("the server did not start");
    Server { child, url }
}

async fn wait_for(client: &reqwest::Client, url: &str, what: impl Fn(&str) -> bool) {
    wait::eventually(url, Duration::from_secs(120), async || {
        let response = client.get(url).send().await.ok()?;
        what(&response.text().await.unwrap_or_default()).then_some(())
    })
    .await;
}

struct Figures {
    p50: Duration,
    p99: Duration,
}

/// `SAMPLES` sequential requests to `path`.
async fn measure(client: &reqwest::Client, base: &str, path: &str) -> Figures {
    let url = format!("{base}{path}");
    let mut samples = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let started = Instant::now();
        let response = client.get(&url).send().await.unwrap();
        let status = response.status();
        response.bytes().await.unwrap();
        samples.push(started.elapsed());
        assert!(status.is_success(), "{path}: {status}");
    }
    samples.sort();
    Figures {
        p50: samples[SAMPLES / 2],
        p99: samples[SAMPLES * 99 / 100],
    }
}

async fn both(client: &reqwest::Client, base: &str) -> [Figures; 2] {
    [
        measure(client, base, "/api/health").await,
        measure(client, base, "/api/adapters/echo/hello").await,
    ]
}

/// How the hostile guests keep the machine busy: the job they enqueue and the request they
/// make, each running until its deadline.
#[derive(Clone, Copy)]
enum Busy {
    Spinning,
    HostWork,
}

impl Busy {
    fn routes(self) -> (&'static str, &'static str) {
        match self {
            Self::Spinning => ("spin-job", "loop"),
            Self::HostWork => ("hmac-job", "hmac?mib=60&n=100000"),
        }
    }
}

/// Starts `cores` busy jobs and `cores` busy requests and waits until all run; the handles
/// end when the requests hit their deadline.
async fn keep_busy(
    client: &reqwest::Client,
    base: &str,
    cores: usize,
    busy: Busy,
) -> Vec<tokio::task::JoinHandle<reqwest::Result<reqwest::Response>>> {
    let (job, request) = busy.routes();
    let mut jobs = Vec::new();
    for _ in 0..cores {
        let started = client
            .get(format!("{base}/api/adapters/hostile/{job}"))
            .send()
            .await
            .unwrap();
        let status = started.status();
        let body = started.text().await.unwrap();
        assert_eq!(status, 202, "{body}");
        jobs.push(body);
    }
    let requests = (0..cores)
        .map(|_| {
            tokio::spawn(
                client
                    .get(format!("{base}/api/adapters/hostile/{request}"))
                    .send(),
            )
        })
        .collect();
    wait_for(
        client,
        &format!("{base}/api/tasks?status=running"),
        |body| jobs.iter().all(|job| body.contains(job.as_str())),
    )
    .await;
    requests
}

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let tmp = tempfile::tempdir().unwrap();
        let server = start(tmp.path());

        let client = reqwest::Client::new();
        let base = server.url.clone();
        serve::wait_until_ready(&base, tmp.path(), Duration::from_secs(120));
        serve::wait_until_optimized(&base, tmp.path(), Duration::from_secs(120));
        // Warm-up.
        measure(&client, &base, "/api/adapters/echo/hello").await;
        let cores = std::thread::available_parallelism().map_or(2, usize::from);
        let (mut idle, mut spinning, mut host_work) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..ROUNDS {
            idle.push(both(&client, &base).await);
            for (busy, rounds) in [(Busy::Spinning, &mut spinning), (Busy::HostWork, &mut host_work)] {
                let guests = keep_busy(&client, &base, cores, busy).await;
                rounds.push(both(&client, &base).await);
                assert!(
                    guests.iter().all(|s| !s.is_finished()),
                    "a busy guest ended before the round was measured; raise SPIN_MS"
                );
                for guest in guests {
                    let status = guest.await.unwrap().unwrap().status();
                    assert_eq!(status, 503, "a busy guest ends at its deadline");
                }
            }
        }
        println!(
            "latency of {SAMPLES} sequential requests, idle guests against {} busy ({cores} jobs + {cores} requests on {cores} cores), medians of {ROUNDS} alternating rounds:",
            2 * cores
        );
        let mut met = true;
        for (what, busy) in [("spinning", &spinning), ("making the host hash", &host_work)] {
            println!("  guests {what}:");
            for (i, label) in ["/api/health", "echo GET /hello"].into_iter().enumerate() {
                let p = |rounds: &[[Figures; 2]], f: fn(&Figures) -> Duration| {
                    median(rounds.iter().map(|r| ms(f(&r[i]))))
                };
                let ratio = median(
                    idle.iter()
                        .zip(busy)
                        .map(|(idle, busy)| ms(busy[i].p99) / ms(idle[i].p99)),
                );
                let busy_p99 = p(busy, |f| f.p99);
                let ok = busy_p99 < 20.0 && ratio < 2.0;
                met &= ok;
                println!(
                    "    {label:16} idle p50 {:6.2} ms p99 {:6.2} ms | busy p50 {:6.2} ms p99 {busy_p99:6.2} ms | p99 ratio {ratio:.2} ({})",
                    p(&idle, |f| f.p50),
                    p(&idle, |f| f.p99),
                    p(busy, |f| f.p50),
                    if ok { "met" } else { "MISSED" }
                );
            }
        }
        println!("  target: p99 < 20 ms and < 2x the idle p99: {}", if met { "met" } else { "MISSED" });
        drop(server);
        std::process::exit(0);
    });
}
