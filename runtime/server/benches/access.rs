//! `cargo bench -p service-runtime --bench access`
//!
//! What asking who is calling costs: p99 of `GET /api/agents` through the release binary, on
//! one keep-alive connection, from a server that asks every caller for a credential (an API
//! token as `Authorization: Bearer`, and a person's session cookie) against a local server that
//! asks nobody, in alternating rounds of the same run. Target: at most 1.1x each.

#[allow(dead_code)]
#[path = "../../../tests/shared/stats.rs"]
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

/// What a request carries.
#[derive(Clone, Copy)]
enum Credential<'a> {
    None,
    Bearer(&'a str),
    Cookie(&'a str),
}

/// p99 of `REQUESTS` sequential requests.
async fn p99(client: &reqwest::Client, url: &str, credential: Credential<'_>) -> Duration {
    let mut times = Vec::with_capacity(REQUESTS);
    for _ in 0..REQUESTS {
        let request = match credential {
            Credential::None => client.get(url),
            Credential::Bearer(token) => client.get(url).bearer_auth(token),
            Credential::Cookie(cookie) => client.get(url).header("cookie", cookie),
        };
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
    // What a command on the data directory prints last: a token, or a person's link.
    let last_line = |args: &[&str]| {
        let made = Command::new(BIN)
            .arg("--data-dir")
            .arg(&signed_dir)
            .args(args)
            .env_clear()
            .env("HOME", tmp.path())
            .output()
            .unwrap();
        assert!(
            made.status.success(),
            "{}",
            String::from_utf8_lossy(&made.stderr)
        );
        let out = String::from_utf8(made.stdout).unwrap();
        out.lines().last().unwrap().to_owned()
    };
    let token = last_line(&["tokens", "create", "--name", "bench", "--role", "admin"]);
    let link = last_line(&["users", "add", "bench", "--role", "admin"]);
    let secret = link.split_once("#link=").unwrap().1.to_owned();

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::new();
        let (local_url, signed_url) = (
            format!("{}/api/agents", local.url),
            format!("{}/api/agents", signed.url),
        );
        // The person sets a password through the link; the answer sets the session cookie.
        let signed_in = client
            .post(format!("{}/api/session/link", signed.url))
            .json(&serde_json::json!({"link": secret, "password": "bench password, long enough"}))
            .send()
            .await
            .unwrap();
        assert!(signed_in.status().is_success(), "{}", signed_in.status());
        let cookie = signed_in.headers()["set-cookie"].to_str().unwrap();
        let cookie = cookie.split(';').next().unwrap().to_owned();
        let credentials = [
            Credential::None,
            Credential::Bearer(&token),
            Credential::Cookie(&cookie),
        ];
        let url = |credential: Credential<'_>| match credential {
            Credential::None => local_url.clone(),
            _ => signed_url.clone(),
        };
        // Warm each (connections, the credential's lookup, page cache).
        for credential in credentials {
            p99(&client, &url(credential), credential).await;
        }
        let mut rounds: Vec<[Duration; 3]> = Vec::new();
        for _ in 0..ROUNDS {
            let mut round = [Duration::ZERO; 3];
            for (i, credential) in credentials.into_iter().enumerate() {
                round[i] = p99(&client, &url(credential), credential).await;
            }
            rounds.push(round);
        }
        let [local, bearer, session] =
            [0, 1, 2].map(|i| median(rounds.iter().map(|round| round[i])));
        println!("GET /api/agents, {REQUESTS} requests a round, p99, median of {ROUNDS} rounds:");
        println!("  local (no credential)          {:.3} ms", ms(local));
        for (what, signed) in [("API token", bearer), ("session cookie", session)] {
            let ratio = signed.as_secs_f64() / local.as_secs_f64();
            println!(
                "  {what:<15} (sign-in required) {:.3} ms, ratio {ratio:.2}x (target at most \
                 1.1x: {})",
                ms(signed),
                verdict(ratio <= 1.1)
            );
        }
    });
}
