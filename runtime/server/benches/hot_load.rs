//! `cargo bench -p service-runtime --bench hot_load`
//!
//! Copy-to-first-answer: from the end of a plain copy of a component into the adapters folder
//! of a running server (the release binary) to the first 200 from its route, by language (Rust,
//! Python, JavaScript). Uncached (no compiled artifact: the baseline compiler's code answers
//! first, and the time until the optimizing compiler's code replaced it is shown too) and
//! cached (the optimized artifact in the compile cache), beside the component's bare compile
//! time with the optimizing compiler measured in the same run. For Rust also with the polling
//! fallback (`SERVICE_WATCH_POLL=true`). Targets: a cached component answers within 100 ms of
//! its copy, a changed small one within 100 ms, a new JavaScript or Python one within 3 s.

// Each bench uses some of the figures.
#[allow(dead_code)]
#[path = "../../../tests/shared/stats.rs"]
mod stats;
use stats::{median, ms, verdict};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use service_runtime::wasm::OPTIMIZED;
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
/// Rounds for the interpreters, each of which waits for a compile of seconds.
const BIG_ROUNDS: usize = 3;
/// What the Rust fixture needs to start (its grant stays in the folder throughout).
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
        // The bundled components load and are optimized first, so they do not compete with
        // the copy timed.
        serve::wait_until_ready(&url, data.path(), GIVE_UP);
        serve::wait_until_optimized(&url, data.path(), GIVE_UP);
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

    /// The registry metadata `code` of adapter `name`.
    async fn code(&self, client: &reqwest::Client, name: &str) -> Option<String> {
        let url = format!("{}/api/adapters", self.url);
        let listed: serde_json::Value = client.get(url).send().await.ok()?.json().await.ok()?;
        let entry = listed["adapters"]
            .as_array()?
            .iter()
            .find(|a| a["name"] == name)?;
        entry["metadata"]["code"].as_str().map(str::to_owned)
    }

    /// Copies the component in (a plain copy, as a person would) and times its first answer,
    /// then the time until its optimized code serves.
    async fn copy_to_first_answer(
        &self,
        client: &reqwest::Client,
        name: &str,
        wasm: &Path,
    ) -> (Duration, Duration) {
        std::fs::copy(wasm, self.adapters.join(format!("{name}.wasm"))).unwrap();
        let copied = Instant::now();
        let hello = format!("/api/adapters/{name}/hello");
        self.until(async || self.status(client, &hello).await == Some(StatusCode::OK))
            .await;
        let answered = copied.elapsed();
        self.until(async || self.code(client, name).await.as_deref() == Some(OPTIMIZED))
            .await;
        (answered, copied.elapsed())
    }

    /// Removes the component and waits until it is unloaded and its artifacts pruned.
    async fn remove(&self, client: &reqwest::Client, name: &str, sha256: &str) {
        std::fs::remove_file(self.adapters.join(format!("{name}.wasm"))).unwrap();
        let hello = format!("/api/adapters/{name}/hello");
        self.until(async || {
            self.status(client, &hello).await == Some(StatusCode::NOT_FOUND)
                && self.artifact(sha256).is_none()
        })
        .await;
    }

    /// The compiled artifact of the component whose sha256 is `sha256`, if any.
    fn artifact(&self, sha256: &str) -> Option<PathBuf> {
        std::fs::read_dir(&self.cache)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .find(|path| {
                path.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(sha256)
            })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One component's figures: medians of copy-to-first-answer uncached and cached, and of the
/// time until its optimized code served (uncached).
struct Figures {
    uncached: Duration,
    optimized: Duration,
    cached: Duration,
}

/// `rounds` of (uncached, cached) copy-to-first-answer of `wasm` as adapter `name`.
async fn measure(server: &Server, name: &str, wasm: &Path, rounds: usize) -> Figures {
    let client = reqwest::Client::new();
    let sha256 = hex::encode(Sha256::digest(std::fs::read(wasm).unwrap()));
    let saved = tempfile::NamedTempFile::new().unwrap();
    let (mut uncached, mut optimized, mut cached) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let (answered, optimizing) = server.copy_to_first_answer(&client, name, wasm).await;
        uncached.push(answered);
        optimized.push(optimizing);
        // Only the optimized artifact is left once it serves.
        let artifact = server.artifact(&sha256).expect("the optimized artifact");
        std::fs::copy(&artifact, saved.path()).unwrap();
        server.remove(&client, name, &sha256).await;
        // The artifact back where the compile cache keeps it, as if it had never been pruned.
        std::fs::copy(saved.path(), &artifact).unwrap();
        cached.push(server.copy_to_first_answer(&client, name, wasm).await.0);
        server.remove(&client, name, &sha256).await;
    }
    Figures {
        uncached: median(uncached),
        optimized: median(optimized),
        cached: median(cached),
    }
}

/// The bare compile of `bytes` with `config`, median of `rounds`.
fn bare_compile(config: &wasmtime::Config, bytes: &[u8], rounds: usize) -> Duration {
    let engine = wasmtime::Engine::new(config).unwrap();
    median((0..rounds).map(|_| {
        let started = Instant::now();
        wasmtime::component::Component::new(&engine, bytes).unwrap();
        started.elapsed()
    }))
}

/// The compilers measured: the optimizing one (the baseline of the ratios), the same at no
/// optimization, and the baseline compiler.
fn compilers() -> [(&'static str, wasmtime::Config); 3] {
    let mut unoptimized = wasmtime::Config::new();
    unoptimized.cranelift_opt_level(wasmtime::OptLevel::None);
    let mut winch = wasmtime::Config::new();
    winch.strategy(wasmtime::Strategy::Winch);
    [
        ("Cranelift", wasmtime::Config::new()),
        ("Cranelift opt-level none", unoptimized),
        ("Winch", winch),
    ]
}

fn main() {
    let guests = [
        ("Rust", "echo", guests::guest("echo"), ROUNDS),
        ("Python", "python-echo", guests::python_echo(), BIG_ROUNDS),
        ("JavaScript", "js-echo", guests::js_echo(), BIG_ROUNDS),
    ];
    let runtime = tokio::runtime::Runtime::new().unwrap();
    println!(
        "copy-to-first-answer by language, medians; uncached: the baseline compiler's code \
         answers first (then: when the optimized code serves); the bare optimizing compile \
         measured in this run is the baseline:"
    );
    let server = Server::start(&[]);
    let (mut small_met, mut big_met, mut cached_met) = (true, true, true);
    for (language, name, wasm, rounds) in &guests {
        let bytes = std::fs::read(wasm).unwrap();
        let compile_rounds = if *rounds == ROUNDS { ROUNDS } else { 1 };
        let times: Vec<(&str, Duration)> = compilers()
            .iter()
            .map(|(label, config)| (*label, bare_compile(config, &bytes, compile_rounds)))
            .collect();
        let compile = times[0].1;
        let compared: Vec<String> = times
            .iter()
            .map(|(label, time)| {
                format!(
                    "{label} {:.1} ms ({:.2}x)",
                    ms(*time),
                    ms(*time) / ms(compile)
                )
            })
            .collect();
        println!("  {language:10} bare compiles: {}", compared.join(", "));
        let figures = runtime.block_on(measure(&server, name, wasm, *rounds));
        println!(
            "  {language:10} {:8.1} MB  uncached {:7.1} ms ({:5.2}x the bare compile of \
             {:7.1} ms; optimized after {:7.1} ms)  cached {:6.1} ms",
            bytes.len() as f64 / 1e6,
            ms(figures.uncached),
            ms(figures.uncached) / ms(compile),
            ms(compile),
            ms(figures.optimized),
            ms(figures.cached),
        );
        cached_met &= figures.cached < Duration::from_millis(100);
        if *language == "Rust" {
            small_met &= figures.uncached < Duration::from_millis(100);
        } else {
            big_met &= figures.uncached < Duration::from_secs(3);
        }
    }
    drop(server);
    let polling = Server::start(&[("SERVICE_WATCH_POLL", "true")]);
    let figures = runtime.block_on(measure(&polling, "echo", &guests[0].2, ROUNDS));
    println!(
        "  Rust with polling (SERVICE_WATCH_POLL=true): uncached {:7.1} ms  cached {:6.1} ms",
        ms(figures.uncached),
        ms(figures.cached)
    );
    println!("  target: cached under 100 ms: {}", verdict(cached_met));
    println!(
        "  target: a changed small component under 100 ms: {}",
        verdict(small_met)
    );
    println!(
        "  target: a new JavaScript or Python component under 3 s: {}",
        verdict(big_met)
    );
}
