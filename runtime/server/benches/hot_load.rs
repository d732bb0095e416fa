//! `cargo bench -p service-runtime --bench hot_load`
//!
//! Copy-to-first-answer: from the end of a plain copy of a component into the adapters folder
//! of a running server (the release binary) to the first 200 from its route. Measured with
//! file-system notifications and with the polling fallback (`SERVICE_WATCH_POLL=true`: every
//! 500 ms as before, plus its 100 ms settle), for a component whose compiled artifact is in the
//! compile cache (cached) and one whose is not (uncached), beside the component's bare compile
//! time measured in the same run. Target: a cached component answers within 100 ms of its copy
//! with notifications.

// Each bench uses some of the figures.
#[allow(dead_code)]
#[path = "shared/stats.rs"]
mod stats;
use stats::{median, ms};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use sha2::{Digest, Sha256};

// The tests' guest builders.
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

const ROUNDS: usize = 5;
/// What the fixture needs to start (its grant stays in the folder throughout).
const GRANT: &str = "secrets = [\"ECHO_TOKEN\"]\nagent = true\ntools = [\"*\"]\nkv = true\njobs = true\noutbound_hosts = [\"http://127.0.0.1:9\"]\n";
const GIVE_UP: Duration = Duration::from_secs(60);

struct Server {
    child: Child,
    url: String,
    adapters: PathBuf,
    cache: PathBuf,
    _data: tempfile::TempDir,
}

impl Server {
    fn start(env: &[(&str, &str)]) -> Self {
        let data = tempfile::tempdir().unwrap();
        let mut serve =
            serve::clean_command(env!("CARGO_BIN_EXE_service-runtime"), data.path(), "warn");
        serve.envs(env.iter().copied()).stderr(Stdio::null());
        let (child, url) = serve::spawn_serving(serve, data.path());
        let url = url.unwrap_or_else(|line| panic!("the server did not start: {line:?}"));
        // The bundled components load first, so they do not compete with the copy timed.
        serve::wait_until_ready(&url, GIVE_UP);
        let adapters = data.path().join("adapters");
        std::fs::write(adapters.join("echo.toml"), GRANT).unwrap();
        Self {
            child,
            url,
            adapters,
            cache: data.path().join("cache"),
            _data: data,
        }
    }

    /// Waits for `done`, looking every 0.5 ms: the wait is what is measured.
    async fn until(&self, mut done: impl AsyncFnMut() -> bool) {
        let every = Duration::from_micros(500);
        let done = wait::until(GIVE_UP, every, async || done().await.then_some(())).await;
        assert!(done.is_some(), "gave up after {GIVE_UP:?}");
    }

    async fn status(&self, client: &reqwest::Client, path: &str) -> Option<StatusCode> {
        let response = client.get(format!("{}{path}", self.url)).send().await;
        response.ok().map(|r| r.status())
    }

    /// Copies the component in (a plain copy, as a person would) and times its first answer.
    async fn copy_to_first_answer(&self, client: &reqwest::Client, wasm: &Path) -> Duration {
        std::fs::copy(wasm, self.adapters.join("echo.wasm")).unwrap();
        let copied = Instant::now();
        self.until(async || {
            self.status(client, "/api/adapters/echo/hello").await == Some(StatusCode::OK)
        })
        .await;
        copied.elapsed()
    }

    /// Removes the component and waits until it is unloaded and its artifact pruned.
    async fn remove(&self, client: &reqwest::Client, artifact: &Path) {
        std::fs::remove_file(self.adapters.join("echo.wasm")).unwrap();
        self.until(async || {
            self.status(client, "/api/adapters/echo/hello").await == Some(StatusCode::NOT_FOUND)
                && !artifact.exists()
        })
        .await;
    }

    /// The compiled artifact of the component whose sha256 is `sha256`.
    fn artifact(&self, sha256: &str) -> PathBuf {
        std::fs::read_dir(&self.cache)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .find(|path| {
                path.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(sha256)
            })
            .expect("the loaded component's artifact is in the cache")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Rounds of (cached, uncached) copy-to-first-answer on a server started with `env`.
async fn measure(wasm: &Path, env: &[(&str, &str)]) -> (Vec<Duration>, Vec<Duration>) {
    let server = Server::start(env);
    let client = reqwest::Client::new();
    let sha256 = hex::encode(Sha256::digest(std::fs::read(wasm).unwrap()));
    let saved = tempfile::NamedTempFile::new().unwrap();
    let (mut cached, mut uncached) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        uncached.push(server.copy_to_first_answer(&client, wasm).await);
        let artifact = server.artifact(&sha256);
        std::fs::copy(&artifact, saved.path()).unwrap();
        server.remove(&client, &artifact).await;
        // The artifact back where the compile cache keeps it, as if it had never been pruned.
        std::fs::copy(saved.path(), &artifact).unwrap();
        cached.push(server.copy_to_first_answer(&client, wasm).await);
        server.remove(&client, &artifact).await;
    }
    (cached, uncached)
}

fn main() {
    let wasm = guests::guest("echo");
    let bytes = std::fs::read(&wasm).unwrap();
    let engine = wasmtime::Engine::default();
    let compile = median((0..ROUNDS).map(|_| {
        let started = Instant::now();
        wasmtime::component::Component::new(&engine, &bytes).unwrap();
        started.elapsed()
    }));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    println!(
        "copy-to-first-answer of echo ({} KB), median of {ROUNDS}; its bare compile: {:.1} ms",
        bytes.len() / 1024,
        ms(compile)
    );
    let mut medians = Vec::new();
    for (label, env) in [
        ("notifications", &[][..]),
        (
            "polling (SERVICE_WATCH_POLL=true)",
            &[("SERVICE_WATCH_POLL", "true")][..],
        ),
    ] {
        let (cached, uncached) = runtime.block_on(measure(&wasm, env));
        let (cached, uncached) = (median(cached), median(uncached));
        medians.push(cached);
        println!(
            "  {label:34} cached {:7.1} ms   uncached {:7.1} ms ({:4.1}x the bare compile)",
            ms(cached),
            ms(uncached),
            ms(uncached) / ms(compile)
        );
    }
    println!(
        "  target: cached under 100 ms with notifications: {}",
        if medians[0] < Duration::from_millis(100) {
            "met"
        } else {
            "MISSED"
        }
    );
}
