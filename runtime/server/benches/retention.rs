//! `cargo bench -p service-runtime --bench retention`
//!
//! What pruning costs the writers beside it: p99 of `POST /api/chat` (each turn writes a trace,
//! its step and a conversation) through the release binary on SQLite while retention deletes
//! 100,000 traces past their age (each with two steps), against the same requests while it
//! rests, in the same run. The old traces come in ten rounds of 10,000, so idle and pruning
//! phases alternate and neither a warming machine nor the turns written meanwhile (the database
//! grows by ~150,000 of them) lands on one side only. Target: at most 1.2x. Also the database's
//! size with the old traces and after the last round gave their pages back.

#[allow(dead_code)]
#[path = "../../../tests/shared/stats.rs"]
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
/// Old traces written before each round.
const ROUND: u64 = 10_000;
/// Requests between two looks at how far the pruner got.
const BATCH: usize = 100;

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Writes `ROUND` finished traces from 2020, each with two model calls, in one transaction
/// (the server's writers wait for it, while nothing is timed).
fn write_old_traces(db: &Db, round: u64) {
    let prompt = "an old question, asked and answered long ago ".repeat(8);
    db.blocking(|conn| {
        conn.transaction(|tx| {
            for n in 0..ROUND {
                let id = format!("old-{round}-{n}");
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

fn p99(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() * 99 / 100]
}

fn main() {
    let tmp = tempfile::tempdir().unwrap();
    let data_dir = tmp.path().join("data");
    std::fs::create_dir_all(&data_dir).unwrap();
    // A round every minute: each meets the old traces written since the last one.
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
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = reqwest::Client::new();
    let chat = format!("{url}/api/chat");
    let (mut idle, mut pruning) = (Vec::new(), Vec::new());
    let (mut with_old, mut took) = (0.0_f64, Duration::ZERO);
    for round in 0..OLD_TRACES / ROUND {
        let (gone_before, goal) = (round * ROUND, (round + 1) * ROUND);
        write_old_traces(&db, round);
        with_old = with_old.max(size_mib(&db).0);
        let deadline = Instant::now() + Duration::from_secs(300);
        let mut started: Option<Instant> = None;
        runtime.block_on(async {
            loop {
                let before = deleted(&client, &url).await;
                if before == goal {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "round {round} did not end in 5 minutes"
                );
                let times = chat_turns(&client, &chat, BATCH).await;
                let after = deleted(&client, &url).await;
                // A batch counts only when the pruner rested, or worked, all through it.
                if after == gone_before {
                    idle.extend(times);
                } else if before > gone_before && after < goal {
                    pruning.extend(times);
                }
                if after > gone_before && started.is_none() {
                    started = Some(Instant::now());
                }
            }
        });
        took += started.map(|s| s.elapsed()).unwrap_or_default();
        // The round ends by giving the pages back; the next batch of old traces waits for it.
        let given_back = Instant::now();
        while size_mib(&db).1 > 0.0 && given_back.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let (after, free) = size_mib(&db);
    drop(server);

    let turns = idle.len() + pruning.len();
    let (idle_p99, pruning_p99) = (p99(&mut idle), p99(&mut pruning));
    let ratio = pruning_p99.as_secs_f64() / idle_p99.as_secs_f64();
    println!(
        "POST /api/chat p99 on SQLite, one client, while retention deletes {OLD_TRACES} traces \
         in {} rounds:",
        OLD_TRACES / ROUND
    );
    println!(
        "  pruner resting       {:.3} ms ({} requests)",
        ms(idle_p99),
        idle.len()
    );
    println!(
        "  pruner deleting      {:.3} ms ({} requests), ratio {ratio:.2}x (target at most 1.2x: {})",
        ms(pruning_p99),
        pruning.len(),
        verdict(ratio <= 1.2)
    );
    println!(
        "  the rounds deleted for about {:.1} s in all",
        took.as_secs_f64()
    );
    println!(
        "  database: {fresh:.1} MiB at start, {with_old:.1} MiB at most with old traces, \
         {after:.1} MiB after the last round and {turns} chat turns ({free:.1} MiB of free pages \
         left)"
    );
}
