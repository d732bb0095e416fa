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
//!
//! `-- machines` (root) runs each replica and the database on a machine of its own
//! (`shared/machines.rs`): PostgreSQL in a network namespace on core 0, beside this process
//! (the client, the fakes, the links: about a third of that core in the throughput run); each
//! replica in a namespace of its own on core 1 with a budget of a quarter of a core
//! (`REPLICAS_BENCH_REPLICA_CORES`, at most half: two budgets share core 1), so that the
//! replicas, not core 0, are the limit, and a second replica brings CPU of its own. The same two runs for one replica on SQLite (the
//! baseline), then one and two replicas on PostgreSQL behind a link adding 0, 0.5 and 2 ms to
//! each round trip. A replica held to its budget stalls when it spends it (CFS throttling), so
//! the ack latencies of this mode show the budget more than the database.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
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
#[path = "shared/machines.rs"]
mod machines;
#[allow(dead_code)]
#[path = "../../../tests/shared/postgres.rs"]
mod postgres;

use machines::{Lan, Machine};

use stats::{ms, verdict};
use teamchat_load::{
    ACK_TARGET, Acks, Fakes, Server, burst, data_dir, quantile, resend_unacknowledged, targets,
    wait,
};

const MODEL_CALLS_AT_ONCE: usize = 64;
/// Mentions of the throughput run.
const MENTIONS: usize = 500;
const CONFIG: &str = "[jobs]\nworkers = 64\n";

/// Where a configuration's processes run: all on this machine's loopback, or each replica on a
/// simulated machine of its own (`machines`), reaching this process's fakes at `gateway`.
#[derive(Clone, Copy)]
struct Place<'a> {
    machines: Option<&'a [Machine]>,
    gateway: IpAddr,
}

const HERE: Place = Place {
    machines: None,
    gateway: IpAddr::V4(Ipv4Addr::LOCALHOST),
};

/// Starts `count` replicas with `env` (plus the database URL, when there is one) in `root`.
fn replicas(
    root: &std::path::Path,
    count: usize,
    env: &[(String, String)],
    database: Option<&str>,
    place: Place,
) -> Vec<Server> {
    (0..count)
        .map(|i| {
            let dir = data_dir(root, &format!("replica-{i}"), CONFIG);
            let mut env = env.to_vec();
            if let Some(url) = database {
                env.push(("SERVICE_DATABASE_URL".into(), url.into()));
            }
            let Some(machine) = place.machines.map(|machines| &machines[i]) else {
                return Server::start(&dir, &env);
            };
            env.push(("SERVICE_HOST".into(), machine.address.to_string()));
            let server = machine.run(|| Server::start(&dir, &env));
            // Started at full speed (its components compile), then held to its budget.
            machine.limit(server.pid());
            server
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

/// The replicas' database, a fresh one for each run of a configuration: on this PostgreSQL
/// server, reached through `link` when there is one.
#[derive(Clone, Copy)]
struct Postgres<'a> {
    server: &'a postgres::PostgresServer,
    link: Option<SocketAddr>,
}

impl Postgres<'_> {
    fn fresh(&self) -> String {
        let url = self.server.fresh_database();
        match self.link {
            Some(link) => url.replacen(&self.server.address().to_string(), &link.to_string(), 1),
            None => url,
        }
    }
}

/// `None`: SQLite.
type Database<'a> = Option<Postgres<'a>>;

async fn configuration(replica_count: usize, database: Database<'_>, place: Place<'_>) -> Figures {
    let fresh = || database.map(|postgres| postgres.fresh());
    let client = reqwest::Client::new();
    let start = |fakes: &Fakes, root: &tempfile::TempDir| {
        let url = fresh();
        replicas(
            root.path(),
            replica_count,
            &fakes.env,
            url.as_deref(),
            place,
        )
    };

    let fakes = Fakes::start_on(place.gateway, Duration::from_secs(5), MODEL_CALLS_AT_ONCE).await;
    let root = tempfile::tempdir().unwrap();
    let servers = start(&fakes, &root);
    let urls: Vec<&str> = servers.iter().map(|s| s.url.as_str()).collect();
    let acks = burst(&client, &targets(&urls), ack_mentions(), 100).await;
    drop(servers);

    let model = Duration::from_millis(20);
    let fakes = Fakes::start_on(place.gateway, model, MODEL_CALLS_AT_ONCE).await;
    let root = tempfile::tempdir().unwrap();
    let servers = start(&fakes, &root);
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
    let mut servers = replicas(root.path(), 2, &fakes.env, Some(database), HERE);
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

/// `-- machines`: see the top of this file.
fn on_machines() {
    let budget: f64 = std::env::var("REPLICAS_BENCH_REPLICA_CORES").map_or(0.25, |cores| {
        cores.parse().expect("REPLICAS_BENCH_REPLICA_CORES: cores")
    });
    // Declared first, dropped last: after the servers on its machines.
    let mut lan = Lan::new();
    let db_machine = lan.machine("db", &[0], None);
    let machines: Vec<Machine> = (0..2)
        .map(|i| lan.machine(&format!("r{i}"), &[1], Some(budget)))
        .collect();
    // This process (the client, the fakes, the links) shares the database's core.
    machines::pin_current_thread(&[0]);
    let host = postgres::Host {
        address: db_machine.address,
        enter: Some(db_machine.entrance()),
    };
    let server =
        postgres::private_postgres_server_on("bench", postgres::Durability::LikeSqlite, host)
            .expect("the bench needs PostgreSQL's binaries");
    let place = Place {
        machines: Some(&machines),
        gateway: lan.gateway(),
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let baseline = configuration(1, None, place).await;
        let cores = format!("{budget} core each");
        report(&format!("1 replica on SQLite ({cores})"), &baseline, None);
        for added in [0, 500, 2000] {
            let one_way = Duration::from_micros(added / 2);
            let link = machines::slow_link(lan.gateway(), server.address(), one_way);
            let database = Some(Postgres {
                server: &server,
                link: Some(link),
            });
            let rtt = format!("+{:.1} ms a round trip", added as f64 / 1000.0);
            let one = configuration(1, database, place).await;
            report(
                &format!("1 replica on PostgreSQL, {rtt}"),
                &one,
                Some(&baseline),
            );
            let two = configuration(2, database, place).await;
            report(
                &format!("2 replicas on PostgreSQL, {rtt}"),
                &two,
                Some(&baseline),
            );
            println!(
                "  a second replica's machine: {:.2}x the replies a second",
                two.replies_per_sec / one.replies_per_sec
            );
        }
    });
}

fn main() {
    let only = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    if only.as_deref() == Some("machines") {
        return on_machines();
    }
    let wanted = |name: &str| only.as_deref().is_none_or(|only| name.contains(only));
    // Commits as durable as the SQLite baseline's (see `Durability::LikeSqlite`).
    let server = postgres::private_postgres_server("bench", postgres::Durability::LikeSqlite)
        .expect("the bench needs PostgreSQL's binaries");
    let direct = Some(Postgres {
        server: &server,
        link: None,
    });
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let baseline = if wanted("sqlite") {
            let figures = configuration(1, None, HERE).await;
            report("1 replica on SQLite (baseline)", &figures, None);
            Some(figures)
        } else {
            None
        };
        if wanted("postgres") {
            let figures = configuration(1, direct, HERE).await;
            report("1 replica on PostgreSQL", &figures, baseline.as_ref());
        }
        if wanted("two") {
            let figures = configuration(2, direct, HERE).await;
            report("2 replicas on one PostgreSQL", &figures, baseline.as_ref());
        }
        if wanted("kill") {
            kill_one_of_two(&server.fresh_database()).await;
        }
    });
}
