//! `cargo bench -p service-runtime --bench teamchat_delivery`
//!
//! Every acknowledged mention gets its reply, once, through the real binary: the server runs as
//! a child process on a data directory in a temporary folder whose config.toml sets
//! `[jobs] workers = 64`, against a fake of the platform's Web API (it counts the replies per
//! mention) and a fake OpenAI-compatible model that answers after 10 s, at most 64 calls at
//! once (further calls wait their turn). Three runs, each on a fresh server:
//!
//! 1. kill -9 mid-burst: 100 mentions at 5 per second; 15 s in (the first replies posted,
//!    others being written, a quarter not yet sent) the server is killed and started again on
//!    the same data directory. Mentions it did not acknowledge are sent again once it is back,
//!    as the platform retries them. Target: 100 of 100 replied, 0 duplicates.
//! 2. SIGTERM mid-burst: the same, but the server drains (replies being written finish within
//!    the grace period) and exits before it is started again.
//! 3. Throughput: 1,000 mentions at 100 per second; the time until the last reply against the
//!    ideal 1,000 x 10 s / 64 = 156 s. Target: within 1.5x.
//!
//! For each run, the ack latency (signed request to 200) at the client. Target: p99 < 5 ms.
//! An argument (`kill`, `sigterm`, `throughput`) runs only the runs whose name contains it.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

// Each bench uses some of the figures.
#[allow(dead_code)]
#[path = "../../../tests/shared/stats.rs"]
mod stats;
// Shared with the replicas and soak benches, which use more of it.
#[allow(dead_code)]
#[path = "shared/teamchat_load.rs"]
mod teamchat_load;

use stats::{ms, verdict};
use teamchat_load::{
    ACK_TARGET, Fakes, Server, burst, data_dir, resend_unacknowledged, targets, wait,
};

const MODEL_TIME: Duration = Duration::from_secs(10);
const MODEL_CALLS_AT_ONCE: usize = 64;
const WORKERS: usize = 64;

/// A data directory with `[jobs] workers = 64`, and the fakes.
struct Setup {
    _tmp: tempfile::TempDir,
    data_dir: PathBuf,
    fakes: Fakes,
}

impl Setup {
    async fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let data_dir = data_dir(
            tmp.path(),
            "data",
            &format!("[jobs]\nworkers = {WORKERS}\n"),
        );
        Self {
            _tmp: tmp,
            data_dir,
            fakes: Fakes::start(MODEL_TIME, MODEL_CALLS_AT_ONCE).await,
        }
    }

    fn server(&self) -> Server {
        Server::start(&self.data_dir, &self.fakes.env)
    }
}

#[derive(Clone, Copy)]
enum Stop {
    Kill,
    Terminate,
}

/// Runs 1 and 2 (see the top).
async fn mid_burst(stop: Stop) {
    const MENTIONS: usize = 100;
    let setup = Setup::new().await;
    let client = reqwest::Client::new();
    let server = setup.server();
    let url = targets(&[&server.url]);
    let stopper = {
        let (url, setup_dir, env) = (
            Arc::clone(&url),
            setup.data_dir.clone(),
            setup.fakes.env.clone(),
        );
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(15)).await;
            url.write().unwrap().clear();
            let back = tokio::task::spawn_blocking(move || {
                match stop {
                    Stop::Kill => server.kill(),
                    Stop::Terminate => server.terminate(),
                }
                Server::start(&setup_dir, &env)
            })
            .await
            .unwrap();
            *url.write().unwrap() = vec![back.url.clone()];
            back
        })
    };
    let mut acks = burst(&client, &url, MENTIONS, 5).await;
    let server = stopper.await.unwrap();
    resend_unacknowledged(&client, &server.url, &mut acks).await;
    let acknowledged = acks.acked.iter().filter(|a| **a).count();
    let every = Duration::from_millis(200);
    let all = async || (setup.fakes.replies.counts().len() >= MENTIONS).then_some(());
    wait::until(Duration::from_secs(300), every, all).await;
    // Everything the jobs will ever post is out once none waits or runs.
    wait::eventually("the jobs to finish", Duration::from_secs(300), async || {
        (server.unfinished_jobs(&client).await == 0).then_some(())
    })
    .await;
    let counts = setup.fakes.replies.counts();
    let once = counts.values().filter(|c| **c == 1).count();
    let duplicates: usize = counts.values().map(|c| c.saturating_sub(1)).sum();
    let label = match stop {
        Stop::Kill => "kill -9",
        Stop::Terminate => "SIGTERM",
    };
    println!(
        "{label} 15 s into 100 mentions at 5/s: {acknowledged} of {MENTIONS} acknowledged (after the platform's retries), {once} of {MENTIONS} replied exactly once, {duplicates} duplicates (target 100 of 100, 0: {}); ack p99 {:.2} ms over {} acks (target < 5 ms: {}); {}",
        verdict(once == MENTIONS && duplicates == 0),
        ms(acks.p99()),
        acks.all().len(),
        verdict(acks.p99() < ACK_TARGET),
        acks.breakdown(),
    );
}

/// Run 3 (see the top).
async fn throughput() {
    const MENTIONS: usize = 1_000;
    let setup = Setup::new().await;
    let client = reqwest::Client::new();
    let server = setup.server();
    let url = targets(&[&server.url]);
    let started = Instant::now();
    let mut acks = burst(&client, &url, MENTIONS, 100).await;
    let first_try = acks.latencies.len();
    resend_unacknowledged(&client, &server.url, &mut acks).await;
    let all = async || (setup.fakes.replies.counts().len() >= MENTIONS).then_some(());
    wait::until(Duration::from_secs(900), Duration::from_millis(200), all).await;
    let replied = setup.fakes.replies.counts().len();
    let last = setup.fakes.replies.last_at().unwrap_or(started) - started;
    let ideal = MODEL_TIME.as_secs_f64() * MENTIONS as f64 / MODEL_CALLS_AT_ONCE as f64;
    let ratio = last.as_secs_f64() / ideal;
    let duplicates: usize = setup
        .fakes
        .replies
        .counts()
        .values()
        .map(|c| c.saturating_sub(1))
        .sum();
    println!(
        "1,000 mentions at 100/s, [jobs] workers = {WORKERS}, model 10 s with {MODEL_CALLS_AT_ONCE} calls at once: {first_try} of {MENTIONS} acknowledged at the first try, {replied} replied ({duplicates} duplicates), the last after {:.1} s against the ideal {ideal:.1} s: {ratio:.2}x (target within 1.5x: {}); at most {} model calls at once; ack p99 {:.2} ms (target < 5 ms: {}); {}",
        last.as_secs_f64(),
        verdict(replied == MENTIONS && ratio <= 1.5),
        setup.fakes.model.peak.load(Ordering::SeqCst),
        ms(acks.p99()),
        verdict(acks.p99() < ACK_TARGET && first_try == MENTIONS),
        acks.breakdown(),
    );
    drop(server);
}

/// Every run, or those whose name (`kill`, `sigterm`, `throughput`) contains the argument.
fn main() {
    let only = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let wanted = |name: &str| only.as_deref().is_none_or(|only| name.contains(only));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        if wanted("kill") {
            mid_burst(Stop::Kill).await;
        }
        if wanted("sigterm") {
            mid_burst(Stop::Terminate).await;
        }
        if wanted("throughput") {
            throughput().await;
        }
    });
}
