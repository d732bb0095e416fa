//! `cargo bench -p service-runtime --bench access`
//!
//! What asking who is calling costs: p99 of `GET /api/agents` through the release binary, on
//! one keep-alive connection, from a server that asks every caller for a credential (an API
//! token as `Authorization: Bearer`) against a local server that asks nobody, in alternating
//! rounds of the same run. Target: at most 1.1x.

#[allow(dead_code)]
#[path = "shared/stats.rs"]
mod stats;
use stats::{median, ms, verdict};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[path = "../../../tests/shared/serve.rs"]
mod serve;
#[allow(dead_code)]
#[path = "../../../tests/shared/wait.rs"]
mod wait;

const BIN: &str = env!("CARGO_BIN_EXE_service-runtime");
const ROUNDS: usize = 7;
const REQUESTS: usize = 2_000;

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

fn start(data_dir: &Path, config: &str) -> Server {
    std::fs::create_dir_all(data_dir).unwrap();
    std::fs::write(data_dir.join("config.toml"), config).unwrap();
    let mut serve = serve::clean_command(BIN, data_dir, "warn");
    serve.stderr(Stdio::null());
    let (child, url) = serve::spawn_serving(serve, data_dir);
    let url = url.expect("the server did not start");
    serve::wait_until_ready(&url, data_dir, Duration::from_secs(120));
    // The bundled components' optimizing compiles would compete with what is timed.
    serve::wait_until_optimized(&url, data_dir, Duration::from_secs(180));
    Server { child, url }
}

/// p99 of `REQUESTS` sequential requests.
async fn p99(client: &reqwest::Client, url: &str, token: Option<&str>) -> Duration {
    let mut times = Vec::with_capacity(REQUESTS);
    for _ in 0..REQUESTS {
        let mut request = client.get(url);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let start = Instant::now();
        let response = request.send().await.unwrap();
        assert!(response.status().is_success(), "{}", response.status());
        response.bytes().await.unwrap();
        times.push(start.elapsed());
    }
    times.sort();
    times[REQUESTS * 99 / 100]
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let (local_dir, signed_dir) = (tmp.path().join("local"), tmp.path().join("signed"));
    let local = start(&local_dir, "");
    let signed = start(&signed_dir, "[auth]\nrequired = true\n");
    let made = Command::new(BIN)
        .arg("--data-dir")
        .arg(&signed_dir)
        .args(["tokens", "create", "--name", "bench", "--role", "admin"])
        .env_clear()
        .env("HOME", tmp.path())
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let token = String::from_utf8(made.stdout).unwrap();
    let token = token.lines().last().unwrap().to_owned();

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::new();
        let (local_url, signed_url) = (
            format!("{}/api/agents", local.url),
            format!("{}/api/agents", signed.url),
        );
        // Warm both (connections, the token's lookup, page cache).
        p99(&client, &local_url, None).await;
        p99(&client, &signed_url, Some(&token)).await;
        let mut rounds = Vec::new();
        for _ in 0..ROUNDS {
            let local = p99(&client, &local_url, None).await;
            let signed = p99(&client, &signed_url, Some(&token)).await;
            rounds.push((local, signed));
        }
        let local = median(rounds.iter().map(|r| r.0));
        let signed = median(rounds.iter().map(|r| r.1));
        let ratio = signed.as_secs_f64() / local.as_secs_f64();
        println!("GET /api/agents, {REQUESTS} requests a round, p99, median of {ROUNDS} rounds:");
        println!("  local (no credential)       {:.3} ms", ms(local));
        println!("  API token (sign-in required) {:.3} ms", ms(signed));
        println!(
            "  ratio {ratio:.2}x (target at most 1.1x: {})",
            verdict(ratio <= 1.1)
        );
    });
}
