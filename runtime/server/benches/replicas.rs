//! `cargo bench -p service-runtime --bench replicas`
//!
//! Signed teamchat mentions through the real binary, against a fake of the platform's Web API
//! (it counts the replies per mention) and a fake model (64 calls at once), each server with
//! `[jobs] workers = 64`, in three configurations on fresh state:
//!
//! 1. one replica on SQLite (the baseline);
//! 2. one replica on PostgreSQL;
//! 3. two replicas on one PostgreSQL, mentions sent to each in turn (a load balancer).
//!
//! For each, two runs: the ack latency (signed request to 200) of 500 mentions at 100 per
//! second while the model takes 5 s (target p99 < 5 ms on PostgreSQL too), and the
//! event-to-reply throughput of 500 mentions sent at 500 per second with a 20 ms model
//! (mentions replied per second, from the first sent to the last reply; 500, as the bundled
//! teamchat grant allows 600 agent runs a minute); both also as a ratio to the baseline. Then:
//!
//! 4. kill -9 of one of two PostgreSQL replicas 3 s into 300 mentions at 50 per second (100 ms
//!    model, the default job lease of 20 s): mentions it did not acknowledge are sent again to
//!    the other, as the platform retries them. Lost (acknowledged, never replied), duplicated,
//!    and the time from the kill until every mention had its reply.
//!
//! Everything (the servers, PostgreSQL, the fakes, the client) shares the machine's cores.
//! What a reply costs PostgreSQL is counted from its statement log (`shared/statements.py`
//! says how).
//! An argument (`sqlite`, `postgres`, `two`, `kill`) runs only the runs whose name contains it.

use std::time::{Duration, Instant};

// Shared with the teamchat delivery bench, which uses other parts of it.
// Each bench uses some of the figures.
#[allow(dead_code)]
#[path = "../../../tests/shared/stats.rs"]
mod stats;
#[allow(dead_code)]
#[path = "shared/teamchat_load.rs"]
mod teamchat_load;
// The tests' PostgreSQL server.
#[allow(dead_code)]
#[path = "../../../tests/shared/postgres.rs"]
mod postgres;

use stats::{ms, verdict};
use teamchat_load::{
    ACK_TARGET, Acks, Fakes, Server, burst, data_dir, quantile, resend_unacknowledged, targets,
    wait,
};

const MODEL_CALLS_AT_ONCE: usize = 64;
/// Mentions of the throughput run.
const MENTIONS: usize = 500;
const CONFIG: &str = "[jobs]\nworkers = 64\n";

/// Starts `count` replicas with `env` (plus the database URL, when there is one) in `root`.
fn replicas(
    root: &std::path::Path,
    count: usize,
    env: &[(String, String)],
    database: Option<&str>,
) -> Vec<Server> {
    (0..count)
        .map(|i| {
            let dir = data_dir(root, &format!("replica-{i}"), CONFIG);
            let mut env = env.to_vec();
            if let Some(url) = database {
                env.push(("SERVICE_DATABASE_URL".into(), url.into()));
            }
            Server::start(&dir, &env)
        })
        .collect()
}

fn duplicates(fakes: &Fakes) -> usize {
    fakes
        .replies
        .counts()
        .values()
        .map(|c| c.saturating_sub(1))
        .sum()
}

/// Waits until `count` mentions have a reply (or `limit` passes); how many do.
async fn replied(fakes: &Fakes, count: usize, limit: Duration) -> usize {
    let all = async || (fakes.replies.counts().len() >= count).then_some(());
    wait::until(limit, wait::EVERY, all).await;
    fakes.replies.counts().len()
}

/// Mentions of the ack run: none under `REPLICAS_BENCH_THROUGHPUT_ONLY` (counting what a
/// reply costs, with `TEST_POSTGRES_STATEMENT_LOG`: see `shared/statements.py`), but for a
/// few the figures need.
fn ack_mentions() -> usize {
    if std::env::var_os("REPLICAS_BENCH_THROUGHPUT_ONLY").is_some() {
        5
    } else {
        500
    }
}

/// One configuration's figures.
struct Figures {
    ack_p50: Duration,
    ack_p99: Duration,
    replies_per_sec: f64,
    replied: usize,
    duplicates: usize,
}

/// A fresh database for each run of a configuration (`None`: SQLite).
type Database<'a> = Option<&'a postgres::PostgresServer>;

async fn configuration(replica_count: usize, database: Database<'_>) -> Figures {
    let fresh = || database.map(postgres::PostgresServer::fresh_database);
    let client = reqwest::Client::new();

    let fakes = Fakes::start(Duration::from_secs(5), MODEL_CALLS_AT_ONCE).await;
    let root = tempfile::tempdir().unwrap();
    let servers = replicas(root.path(), replica_count, &fakes.env, fresh().as_deref());
    let urls: Vec<&str> = servers.iter().map(|s| s.url.as_str()).collect();
    let acks = burst(&client, &targets(&urls), ack_mentions(), 100).await;
    drop(servers);

    let fakes = Fakes::start(Duration::from_millis(20), MODEL_CALLS_AT_ONCE).await;
    let root = tempfile::tempdir().unwrap();
    let servers = replicas(root.path(), replica_count, &fakes.env, fresh().as_deref());
    let urls: Vec<&str> = servers.iter().map(|s| s.url.as_str()).collect();
    let started = Instant::now();
    let mut sent = burst(&client, &targets(&urls), MENTIONS, 500).await;
    resend_unacknowledged(&client, urls[0], &mut sent).await;
    let replied = replied(&fakes, MENTIONS, Duration::from_secs(180)).await;
    let last = fakes.replies.last_at().unwrap_or(started) - started;
    Figures {
        ack_p50: quantile(&acks.all(), 0.5),
        ack_p99: acks.p99(),
        replies_per_sec: replied as f64 / last.as_secs_f64(),
        replied,
        duplicates: duplicates(&fakes),
    }
}

fn report(label: &str, figures: &Figures, baseline: Option<&Figures>) {
    let ratios = baseline.map_or_else(String::new, |base| {
        format!(
            "; against SQLite: ack p99 {:.2}x, throughput {:.2}x",
            figures.ack_p99.as_secs_f64() / base.ack_p99.as_secs_f64(),
            figures.replies_per_sec / base.replies_per_sec
        )
    });
    println!(
        "{label}: ack p50 {:.2} ms, p99 {:.2} ms (target < 5 ms: {}); throughput {:.1} replies/s ({} of {MENTIONS} replied, {} duplicates){ratios}",
        ms(figures.ack_p50),
        ms(figures.ack_p99),
        verdict(figures.ack_p99 < ACK_TARGET),
        figures.replies_per_sec,
        figures.replied,
        figures.duplicates,
    );
}

async fn kill_one_of_two(database: &str) {
    const KILL_MENTIONS: usize = 300;
    let fakes = Fakes::start(Duration::from_millis(100), MODEL_CALLS_AT_ONCE).await;
    let root = tempfile::tempdir().unwrap();
    let mut servers = replicas(root.path(), 2, &fakes.env, Some(database));
    let survivor = servers.pop().unwrap();
    let victim = servers.pop().unwrap();
    let to = targets(&[&victim.url, &survivor.url]);
    let client = reqwest::Client::new();
    let killer = {
        let (to, survivor_url) = (std::sync::Arc::clone(&to), survivor.url.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            *to.write().unwrap() = vec![survivor_url];
            tokio::task::spawn_blocking(move || victim.kill())
                .await
                .unwrap();
            Instant::now()
        })
    };
    let mut acks: Acks = burst(&client, &to, KILL_MENTIONS, 50).await;
    let killed_at = killer.await.unwrap();
    resend_unacknowledged(&client, &survivor.url, &mut acks).await;
    let acknowledged = acks.acked.iter().filter(|a| **a).count();
    let replied = replied(&fakes, KILL_MENTIONS, Duration::from_secs(180)).await;
    let takeover = fakes.replies.last_at().unwrap_or(killed_at) - killed_at;
    // A moment more for a reply that would come twice.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let lost = acknowledged.saturating_sub(replied);
    let duplicates = duplicates(&fakes);
    println!(
        "kill -9 of one of two PostgreSQL replicas 3 s into 300 mentions at 50/s: {acknowledged} of {KILL_MENTIONS} acknowledged (after the platform's retries), {lost} lost, {duplicates} duplicated (target 0 and 0: {}); every mention replied {:.1} s after the kill (the job lease is 20 s); ack p99 {:.2} ms",
        verdict(lost == 0 && duplicates == 0 && replied == KILL_MENTIONS),
        takeover.as_secs_f64(),
        ms(acks.p99()),
    );
}

fn main() {
    let only = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let wanted = |name: &str| only.as_deref().is_none_or(|only| name.contains(only));
    // Commits as durable as the SQLite baseline's (see `Durability::LikeSqlite`).
    let server = postgres::private_postgres_server("bench", postgres::Durability::LikeSqlite)
        .expect("the bench needs PostgreSQL's binaries");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let baseline = if wanted("sqlite") {
            let figures = configuration(1, None).await;
            report("1 replica on SQLite (baseline)", &figures, None);
            Some(figures)
        } else {
            None
        };
        if wanted("postgres") {
            let figures = configuration(1, Some(&server)).await;
            report("1 replica on PostgreSQL", &figures, baseline.as_ref());
        }
        if wanted("two") {
            let figures = configuration(2, Some(&server)).await;
            report("2 replicas on one PostgreSQL", &figures, baseline.as_ref());
        }
        if wanted("kill") {
            kill_one_of_two(&server.fresh_database()).await;
        }
    });
}
