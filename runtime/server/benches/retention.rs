//! `cargo bench -p service-runtime --bench retention`
//!
//! What pruning costs the writers beside it: p99 of `POST /api/chat` (each turn writes a trace,
//! its step and a conversation) through the release binary on SQLite, while retention deletes
//! 100,000 traces past their age (each with two steps), against the same requests before the
//! pruner's round started and after it ended, in the same run. Target: at most 1.2x. Also the database's size with
//! the old traces and after the round gave their pages back.

#[allow(dead_code)]
#[path = "shared/stats.rs"]
mod stats;
use stats::{ms, verdict};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use service_runtime::db::{self, Db};
use service_runtime::params;

#[path = "../../../tests/shared/serve.rs"]
mod serve;
#[allow(dead_code)]
#[path = "../../../tests/shared/wait.rs"]
mod wait;

const BIN: &str = env!("CARGO_BIN_EXE_service-runtime");
const OLD_TRACES: u64 = 100_000;
/// Requests between two looks at how far the pruner got.
const BATCH: usize = 100;

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Writes `OLD_TRACES` finished traces from 2020, each with two model calls, in transactions
/// of 10,000 (the server's writers wait for each, before anything is timed).
fn write_old_traces(db: &Db) {
    let prompt = "an old question, asked and answered long ago ".repeat(8);
    for chunk in 0..OLD_TRACES / 10_000 {
        db.blocking(|conn| {
            conn.transaction(|tx| {
                for n in 0..10_000 {
                    let id = format!("old-{chunk}-{n}");
                    tx.execute(
                        "INSERT INTO traces (id, provider, model, prompt, response, status, \
                         created_at, finished_at) VALUES (?1, 'offline', 'offline-1', ?2, ?2, \
                         'ok', '2020-01-01T00:00:00.000Z', '2020-01-01T00:00:01.000Z')",
                        params![id, prompt],
                    )?;
                    for step in [1_i64, 2] {
                        tx.execute(
                            "INSERT INTO llm_calls (trace_id, step, provider, model, status, \
                             response_text, started_at, latency_ms) VALUES (?1, ?2, 'offline', \
                             'offline-1', 'ok', ?3, '2020-01-01T00:00:00.000Z', 5)",
                            params![id, step, prompt],
                        )?;
                    }
                }
                Ok::<_, service_runtime::error::Error>(())
            })
        })
        .unwrap();
    }
}

/// The database's size in MiB (pages in use and free), from a connection of the bench's.
fn size_mib(db: &Db) -> (f64, f64) {
    let pragma = |name: &str| -> i64 {
        db.blocking(|conn| conn.query_one(&format!("PRAGMA {name}"), params![], |r| r.get(0)))
            .unwrap()
    };
    let page = pragma("page_size") as f64 / (1 << 20) as f64;
    (
        pragma("page_count") as f64 * page,
        pragma("freelist_count") as f64 * page,
    )
}

async fn deleted(client: &reqwest::Client, url: &str) -> u64 {
    let text = client
        .get(format!("{url}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|line| {
            line.strip_prefix("service_runtime_retention_deleted_total{kind=\"traces\"} ")
        })
        .expect("the retention series")
        .parse()
        .unwrap()
}

/// Sends `count` chat turns one after the other; how long each took.
async fn chat_turns(client: &reqwest::Client, chat: &str, count: usize) -> Vec<Duration> {
    let mut times = Vec::with_capacity(count);
    for n in 0..count {
        let start = Instant::now();
        let answer = client
            .post(chat)
            .json(&serde_json::json!({"prompt": format!("question {n}")}))
            .send()
            .await
            .unwrap();
        assert!(answer.status().is_success(), "{}", answer.status());
        answer.bytes().await.unwrap();
        times.push(start.elapsed());
    }
    times
}

fn p99(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() * 99 / 100]
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let data_dir = tmp.path().join("data");
    std::fs::create_dir_all(&data_dir).unwrap();
    // Rounds every minute: the first (at start) finds nothing; the second meets the old traces.
    std::fs::write(
        data_dir.join("config.toml"),
        "[retention]\nevery_minutes = 1\n",
    )
    .unwrap();
    let mut command = serve::clean_command(BIN, tmp.path(), "warn");
    command.stderr(Stdio::null());
    let (child, url) = serve::spawn_serving(command, &data_dir);
    let server = Server(child);
    let url = url.expect("the server did not start");
    serve::wait_until_ready(&url, &data_dir, Duration::from_secs(120));
    serve::wait_until_optimized(&url, &data_dir, Duration::from_secs(180));

    let db = Db::open_sqlite(&data_dir.join(db::FILE_NAME)).unwrap();
    let (fresh, _) = size_mib(&db);
    write_old_traces(&db);
    let (with_old, _) = size_mib(&db);

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (idle, pruning, took) = runtime.block_on(async {
        let client = reqwest::Client::new();
        let chat = format!("{url}/api/chat");
        let (mut idle, mut pruning) = (Vec::new(), Vec::new());
        let mut started: Option<Instant> = None;
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            let before = deleted(&client, &url).await;
            if before == OLD_TRACES || Instant::now() > deadline {
                break;
            }
            let times = chat_turns(&client, &chat, BATCH).await;
            let after = deleted(&client, &url).await;
            // A batch counts only when the pruner was idle, or busy, all through it.
            if after == 0 {
                idle.extend(times);
            } else if before > 0 && after < OLD_TRACES {
                pruning.extend(times);
            }
            if after > 0 && started.is_none() {
                started = Some(Instant::now());
            }
        }
        let gone = deleted(&client, &url).await;
        assert_eq!(gone, OLD_TRACES, "the round did not end in 10 minutes");
        let took = started.map(|s| s.elapsed()).unwrap_or_default();
        (idle, pruning, took)
    });
    // The round ends by giving the pages back; wait for it.
    let given_back = Instant::now();
    while size_mib(&db).1 > 0.0 && given_back.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(200));
    }
    let (after, free) = size_mib(&db);
    // Idle again, as many turns as before the round: the baseline spans the round, so neither
    // a warming machine nor the turns written meanwhile count as the pruner's cost.
    let idle_after = runtime.block_on(chat_turns(
        &reqwest::Client::new(),
        &format!("{url}/api/chat"),
        idle.len(),
    ));
    drop(server);

    let (each, turns) = (idle.len(), idle.len() + pruning.len());
    let (before_p99, after_p99) = (p99(idle.clone()), p99(idle_after.clone()));
    let pruning_p99 = p99(pruning.clone());
    let idle_p99 = p99([idle, idle_after].concat());
    let ratio = pruning_p99.as_secs_f64() / idle_p99.as_secs_f64();
    println!(
        "POST /api/chat p99 on SQLite, one client, while retention deletes {OLD_TRACES} traces:"
    );
    println!(
        "  idle                 {:.3} ms (before the round {:.3} ms, after it {:.3} ms; {} \
         requests each)",
        ms(idle_p99),
        ms(before_p99),
        ms(after_p99),
        each
    );
    println!(
        "  during the round     {:.3} ms ({} requests), ratio {ratio:.2}x (target at most 1.2x: {})",
        ms(pruning_p99),
        pruning.len(),
        verdict(ratio <= 1.2)
    );
    println!("  the round took about {:.1} s", took.as_secs_f64());
    println!(
        "  database: {fresh:.1} MiB at start, {with_old:.1} MiB with the old traces, {after:.1} MiB \
         after the round and {turns} chat turns ({free:.1} MiB of free pages left)"
    );
}
