//! `cargo bench -p service-runtime --bench soak` (`SOAK_MINUTES`, default 4)
//!
//! Three replicas of the real binary on one PostgreSQL (commits as durable as the SQLite
//! backend's) for a few minutes of mixed traffic, each request sent to the live replicas in
//! turn (a load balancer), with the fakes of the replicas bench (the platform, a 50 ms model):
//! - signed teamchat mentions, 5 a second, the platform sending again what was not acknowledged;
//! - a run a second through `POST /api/runs`, and a streamed chat every 5 s;
//! - every 10 s a tool call a person approves (`POST /api/chat`, approved through another
//!   replica a second later);
//! - a schedule firing every minute (`* * * * *`, the scheduler ticking every second);
//! - a component installed with `adapters install` 30 s in, and a new build of it at the half.
//!
//! Every minute one of two replicas, in turn, is killed (kill -9) and started again 5 s later on
//! its data directory; the third lives throughout, so its memory shows a leak. PostgreSQL is
//! restarted once, at the half (3 s down). Once the traffic has drained:
//! - every mention acknowledged (after the platform's retries) and replied to once; every run
//!   ended (a run whose replica was killed ends `error`: runs are not retried); every approved
//!   note written once; the schedule fired in each minute, never twice in one; each install
//!   answered on every live replica within 5 s; no task is left `running`; how the streamed
//!   chats ended is shown, not checked (a stream whose replica is killed is cut);
//! - the witness's memory (VmRSS) and PostgreSQL's connections, sampled every 30 s, are flat:
//!   in the second half, memory grows less than 10 %, and connections end no higher than the
//!   most of the first half.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[allow(dead_code)]
#[path = "../../../tests/shared/postgres.rs"]
mod postgres;
#[allow(dead_code)]
#[path = "../../../tests/shared/stats.rs"]
mod stats;
#[allow(dead_code)]
#[path = "shared/teamchat_load.rs"]
mod teamchat_load;
// The tests' guest builders: the component installed while the replicas serve.
#[allow(dead_code)]
#[path = "../../../tests/e2e/guests.rs"]
mod guests;

use stats::verdict;
use teamchat_load::{
    ASK_FOR_A_NOTE, BIN, Fakes, Server, Targets, burst, data_dir, resend_unacknowledged, serve,
    targets, wait,
};

const REPLICAS: usize = 3;
/// The replica that is never killed.
const WITNESS: usize = 0;
const CONFIG: &str = "[jobs]\nworkers = 16\n\n[tools.create_note]\napproval = true\n";
/// What the installed component (the tests' `echo`) needs.
const GRANT: &str = "secrets = [\"ECHO_TOKEN\"]\nagent = true\ntools = [\"*\"]\nkv = true\njobs = true\noutbound_hosts = [\"http://127.0.0.1:9\"]\n";
/// Mentions a second.
const MENTION_RATE: u64 = 5;
/// Numbers of runs, chats and notes, apart from the mentions'.
const RUNS: usize = 100_000;
const CHATS: usize = 200_000;
const NOTES: usize = 300_000;

/// The replicas, each on its data directory, and where requests go (the live ones).
struct Cluster {
    root: PathBuf,
    env: Vec<(String, String)>,
    servers: Mutex<Vec<Option<Server>>>,
    targets: Targets,
    database: String,
}

impl Cluster {
    fn dir(&self, replica: usize) -> PathBuf {
        self.root.join(format!("replica-{replica}"))
    }

    fn start(&self, replica: usize) -> Server {
        let mut env = self.env.clone();
        env.push(("SERVICE_REPLICA_ID".into(), format!("r{replica}")));
        Server::start(&self.dir(replica), &env)
    }

    /// The `n`th live replica in turn, if any is live.
    fn any(&self, n: usize) -> Option<String> {
        let live = self.targets.read().unwrap();
        (!live.is_empty()).then(|| live[n % live.len()].clone())
    }

    fn live(&self) -> Vec<String> {
        self.targets.read().unwrap().clone()
    }

    fn pid(&self, replica: usize) -> Option<u32> {
        self.servers.lock().unwrap()[replica]
            .as_ref()
            .map(Server::pid)
    }

    /// kill -9, then the same replica started again after `down`.
    async fn kill_and_restart(self: &Arc<Self>, replica: usize, down: Duration) {
        let server = self.servers.lock().unwrap()[replica].take().unwrap();
        let url = server.url.clone();
        tokio::task::spawn_blocking(move || server.kill())
            .await
            .unwrap();
        self.targets.write().unwrap().retain(|live| *live != url);
        tokio::time::sleep(down).await;
        let cluster = Arc::clone(self);
        let server = tokio::task::spawn_blocking(move || cluster.start(replica))
            .await
            .unwrap();
        self.targets.write().unwrap().push(server.url.clone());
        self.servers.lock().unwrap()[replica] = Some(server);
    }
}

/// How a kind of request ended, counted by outcome.
#[derive(Default)]
struct Tally(BTreeMap<String, usize>);

impl Tally {
    fn add(&mut self, outcome: impl Into<String>) {
        *self.0.entry(outcome.into()).or_default() += 1;
    }

    fn count(&self, outcome: &str) -> usize {
        self.0.get(outcome).copied().unwrap_or_default()
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(k, v)| format!("{v} {k}")).collect();
        write!(f, "{}", parts.join(", "))
    }
}

/// What a request that got no answer of the expected status got instead.
async fn refusal(sent: reqwest::Result<reqwest::Response>) -> String {
    match sent {
        Err(_) => "no answer".into(),
        Ok(response) => format!("refused ({})", response.status().as_u16()),
    }
}

/// Prompts numbered from `first` (`<text> #<n>`), one every `every`, each posted to `path` on
/// the next live replica.
struct Prompts {
    path: &'static str,
    text: &'static str,
    first: usize,
    every: Duration,
}

/// Sends `prompts` until `until`; `answered` takes each number and what came back.
async fn paced(
    client: &reqwest::Client,
    cluster: &Cluster,
    until: Instant,
    prompts: Prompts,
    mut answered: impl AsyncFnMut(usize, reqwest::Result<reqwest::Response>),
) {
    let mut tick = tokio::time::interval(prompts.every);
    for n in prompts.first.. {
        tick.tick().await;
        if Instant::now() >= until {
            break;
        }
        let Some(base) = cluster.any(n) else { continue };
        let sent = client
            .post(format!("{base}{}", prompts.path))
            .json(&json!({"prompt": format!("{} #{n}", prompts.text)}))
            .send()
            .await;
        answered(n, sent).await;
    }
}

/// A run a second through `POST /api/runs`; their ids.
async fn runs(client: &reqwest::Client, cluster: &Cluster, until: Instant) -> (Vec<String>, Tally) {
    let (mut ids, mut refused) = (Vec::new(), Tally::default());
    let prompts = Prompts {
        path: "/api/runs",
        text: "question",
        first: RUNS,
        every: Duration::from_secs(1),
    };
    paced(
        client,
        cluster,
        until,
        prompts,
        async |_, sent| match sent {
            Ok(answer) if answer.status() == 202 => {
                let run: Value = answer.json().await.unwrap();
                ids.push(run["run_id"].as_str().unwrap().to_owned());
            }
            other => refused.add(refusal(other).await),
        },
    )
    .await;
    (ids, refused)
}

/// A streamed chat every 5 s: how each ended (its last frame's type, or `cut`).
async fn chats(client: &reqwest::Client, cluster: &Cluster, until: Instant) -> Tally {
    let mut ended = Tally::default();
    let prompts = Prompts {
        path: "/api/chat/stream",
        text: "question",
        first: CHATS,
        every: Duration::from_secs(5),
    };
    paced(client, cluster, until, prompts, async |_, sent| {
        let body = match sent {
            Ok(answer) if answer.status() == 200 => answer.text().await.unwrap_or_default(),
            other => return ended.add(refusal(other).await),
        };
        let last = body
            .lines()
            .filter_map(|line| line.strip_prefix("data: "))
            .filter_map(|frame| serde_json::from_str::<Value>(frame).ok())
            .next_back();
        match last.as_ref().and_then(|frame| frame["type"].as_str()) {
            Some(kind @ ("done" | "error" | "approval_required")) => ended.add(kind),
            _ => ended.add("cut"),
        }
    })
    .await;
    ended
}

/// Every 10 s a prompt whose tool call a person approves through another replica a second
/// later; the numbers of the notes approved.
async fn approvals(
    client: &reqwest::Client,
    cluster: &Cluster,
    until: Instant,
) -> (Vec<usize>, Tally) {
    let (mut approved, mut outcomes) = (Vec::new(), Tally::default());
    let prompts = Prompts {
        path: "/api/chat",
        text: ASK_FOR_A_NOTE,
        first: NOTES,
        every: Duration::from_secs(10),
    };
    paced(client, cluster, until, prompts, async |n, sent| {
        let id = match sent {
            Ok(answer) if answer.status() == 202 => {
                let paused: Value = answer.json().await.unwrap();
                paused["approval_id"].as_str().unwrap().to_owned()
            }
            other => return outcomes.add(format!("asked: {}", refusal(other).await)),
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        let Some(other) = cluster.any(n + 1) else {
            return;
        };
        let decided = client
            .post(format!("{other}/api/approvals/{id}"))
            .json(&json!({"decision": "approve"}))
            .send()
            .await;
        match decided {
            Ok(answer) if answer.status() == 200 => {
                approved.push(n);
                outcomes.add("approved");
            }
            other => outcomes.add(format!("approval: {}", refusal(other).await)),
        }
    })
    .await;
    (approved, outcomes)
}

/// Installs `wasm` through replica 0's data directory with the CLI; how long until every live
/// replica's `/api/adapters/echo/hello` answered `expected`.
async fn install(
    client: &reqwest::Client,
    cluster: &Cluster,
    wasm: &Path,
    expected: &str,
) -> Duration {
    let dir = cluster.dir(0);
    let grant = dir.join("echo-grant.toml");
    std::fs::write(&grant, GRANT).unwrap();
    let started = Instant::now();
    let mut command = serve::clean_command(BIN, &dir, "warn");
    command
        .env("SERVICE_DATABASE_URL", &cluster.database)
        .arg("--data-dir")
        .arg(&dir)
        .args(["adapters", "install"])
        .arg(wasm)
        .arg("--grant")
        .arg(&grant);
    // Off this task, which also paces the traffic.
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "adapters install: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let everywhere = async || {
        for base in cluster.live() {
            let answer = client
                .get(format!("{base}/api/adapters/echo/hello"))
                .send()
                .await
                .ok()?;
            answer.text().await.ok()?.contains(expected).then_some(())?;
        }
        Some(())
    };
    wait::until(Duration::from_secs(30), wait::EVERY, everywhere).await;
    started.elapsed()
}

/// What happens to the replicas while the traffic runs.
enum Event<'a> {
    Kill(usize),
    RestartPostgres,
    /// The component, and what its route answers then.
    Install(&'a Path, &'static str),
}

/// Memory of the witness (MiB) and PostgreSQL's connections to the database, and when.
#[derive(Clone, Copy)]
struct Sample {
    at: Duration,
    rss_mib: f64,
    connections: Option<usize>,
}

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .expect("VmRSS in /proc/<pid>/status");
    kib / 1024.0
}

/// `None` while PostgreSQL restarts.
fn connections(server: &postgres::PostgresServer, database: &str) -> Option<usize> {
    let name = database.rsplit('/').next().unwrap();
    let sql = format!("SELECT count(*) FROM pg_stat_activity WHERE datname = '{name}'");
    Some(server.psql(&sql).ok()?.parse().unwrap())
}

fn main() {
    let minutes: u64 =
        std::env::var("SOAK_MINUTES").map_or(4, |m| m.parse().expect("SOAK_MINUTES"));
    let soak = Duration::from_secs(minutes * 60);
    let (v1, v2) = (guests::guest("echo"), guests::echo_v2());
    let server = Arc::new(
        postgres::private_postgres_server("soak", postgres::Durability::LikeSqlite)
            .expect("the bench needs PostgreSQL's binaries"),
    );
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let fakes = Fakes::start(Duration::from_millis(50), 64).await;
        let database = server.fresh_database();
        let mut env = fakes.env.clone();
        env.push(("SERVICE_DATABASE_URL".into(), database.clone()));
        env.push(("SERVICE_SCHEDULER_TICK_SECS".into(), "1".into()));
        let root = tempfile::Builder::new().prefix("soak-").tempdir().unwrap();
        for replica in 0..REPLICAS {
            data_dir(root.path(), &format!("replica-{replica}"), CONFIG);
        }
        let cluster = Arc::new(Cluster {
            root: root.path().to_owned(),
            env,
            servers: Mutex::new(Vec::new()),
            targets: targets(&[]),
            database: database.clone(),
        });
        for replica in 0..REPLICAS {
            let server = cluster.start(replica);
            cluster.targets.write().unwrap().push(server.url.clone());
            cluster.servers.lock().unwrap().push(Some(server));
        }
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let schedule = json!({"name": "tick", "cron": "* * * * *", "agent": "default", "prompt": "status"});
        let created = client
            .post(format!("{}/api/schedules", cluster.any(0).unwrap()))
            .json(&schedule)
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());

        let started = Instant::now();
        let until = started + soak;
        let mentions = {
            let (client, targets) = (client.clone(), Arc::clone(&cluster.targets));
            let count = (soak.as_secs() * MENTION_RATE) as usize;
            tokio::spawn(async move { burst(&client, &targets, count, MENTION_RATE).await })
        };
        let samples = {
            let (cluster, server) = (Arc::clone(&cluster), Arc::clone(&server));
            tokio::spawn(async move {
                let mut samples = Vec::new();
                let mut tick = tokio::time::interval(Duration::from_secs(30));
                loop {
                    tick.tick().await;
                    // The last sample as the traffic ends, not after.
                    if Instant::now() > until + Duration::from_secs(1) {
                        break;
                    }
                    let pid = cluster.pid(WITNESS).unwrap();
                    samples.push(Sample {
                        at: started.elapsed(),
                        rss_mib: rss_mib(pid),
                        connections: connections(&server, &cluster.database),
                    });
                }
                samples
            })
        };

        // The component, the kills and PostgreSQL's restart, in the order they come.
        let half = soak / 2;
        let mut timeline: Vec<(Duration, Event)> = (1..minutes)
            .map(|minute| {
                let victim = 1 + (minute as usize - 1) % 2;
                (Duration::from_secs(minute * 60), Event::Kill(victim))
            })
            .collect();
        timeline.push((Duration::from_secs(30), Event::Install(&v1, "echo v1")));
        timeline.push((half + Duration::from_secs(20), Event::RestartPostgres));
        timeline.push((half + Duration::from_secs(40), Event::Install(&v2, "echo v2")));
        timeline.sort_by_key(|(at, _)| *at);
        let events = async {
            let mut installs = Vec::new();
            for (at, event) in timeline {
                tokio::time::sleep_until((started + at).into()).await;
                match event {
                    Event::Kill(victim) => {
                        cluster.kill_and_restart(victim, Duration::from_secs(5)).await;
                    }
                    Event::RestartPostgres => {
                        let server = Arc::clone(&server);
                        let down = Duration::from_secs(3);
                        tokio::task::spawn_blocking(move || server.restart_after(down))
                            .await
                            .unwrap();
                    }
                    Event::Install(wasm, answer) => {
                        installs.push((answer, install(&client, &cluster, wasm, answer).await));
                    }
                }
            }
            installs
        };
        let ((run_ids, runs_refused), chats, (approved, approvals), installs) = tokio::join!(
            runs(&client, &cluster, until),
            chats(&client, &cluster, until),
            approvals(&client, &cluster, until),
            events,
        );

        let mut acks = mentions.await.unwrap();
        let samples = samples.await.unwrap();
        let base = cluster.any(0).unwrap();
        resend_unacknowledged(&client, &base, &mut acks).await;
        let acknowledged = acks.acked.iter().filter(|a| **a).count();
        let replied = async || (fakes.replies.counts().len() >= acknowledged).then_some(());
        wait::until(Duration::from_secs(180), wait::EVERY, replied).await;
        // A moment more for a reply that would come twice.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let counts = fakes.replies.counts();
        let lost = acks
            .acked
            .iter()
            .enumerate()
            .filter(|(n, acked)| **acked && !counts.contains_key(n))
            .count();
        let twice: usize = counts.values().map(|c| c.saturating_sub(1)).sum();

        let drained = async || {
            let url = format!("{base}/api/tasks?status=running&limit=1");
            let answer: Value = client.get(&url).send().await.ok()?.json().await.ok()?;
            (answer["total"] == 0).then_some(())
        };
        let drained = wait::until(Duration::from_secs(60), wait::EVERY, drained).await.is_some();
        let mut run_outcomes = Tally::default();
        for id in &run_ids {
            let answer = client.get(format!("{base}/api/runs/{id}")).send().await.unwrap();
            if answer.status() != 200 {
                run_outcomes.add(format!("unanswered ({})", answer.status().as_u16()));
                continue;
            }
            let run: Value = answer.json().await.unwrap();
            run_outcomes.add(run["status"].as_str().unwrap_or("without a status"));
        }
        let notes = |n: usize| {
            let sql = format!("SELECT count(*) FROM notes WHERE title = 'note #{n}'");
            server.sql(&database, &sql).unwrap().parse::<usize>().unwrap()
        };
        let written: Vec<usize> = approved.iter().map(|n| notes(*n)).collect();
        let per_minute = server
            .sql(
                &database,
                "SELECT count(*) FROM tasks WHERE schedule_name = 'tick' GROUP BY substr(created_at, 1, 16)",
            )
            .unwrap();
        let slots: Vec<usize> = per_minute.lines().map(|c| c.parse().unwrap()).collect();

        let mut met = true;
        let mut check = |ok: bool| {
            met &= ok;
            verdict(ok)
        };
        println!(
            "soak: {minutes} min, 3 replicas on one PostgreSQL, one of two killed and restarted every minute, PostgreSQL restarted at {:.0} s",
            half.as_secs_f64()
        );
        println!(
            "mentions: {acknowledged} of {} acknowledged (with the platform's retries), {lost} lost, {twice} replied twice (target all, 0 and 0: {})",
            acks.acked.len(),
            check(acknowledged == acks.acked.len() && lost == 0 && twice == 0)
        );
        let ended: usize = ["completed", "error", "cancelled"]
            .iter()
            .map(|status| run_outcomes.count(status))
            .sum();
        println!(
            "runs: {} started ({runs_refused} not taken), ended: {run_outcomes} (target none unfinished: {})",
            run_ids.len(),
            check(ended == run_ids.len())
        );
        // Not a target: a stream whose replica is killed is cut.
        println!("streamed chats: {chats}");
        let once = written.iter().filter(|w| **w == 1).count();
        println!(
            "approvals: {approvals}; notes written once {once}, never {}, twice or more {} (target each once: {})",
            written.iter().filter(|w| **w == 0).count(),
            written.iter().filter(|w| **w > 1).count(),
            check(once == written.len())
        );
        let fired_twice = slots.iter().filter(|c| **c > 1).count();
        println!(
            "schedule: {} minutes fired, {fired_twice} fired twice (target one a minute, none twice: {})",
            slots.len(),
            check(slots.len() >= minutes as usize && fired_twice == 0)
        );
        for (answer, took) in &installs {
            println!(
                "component answering \"{answer}\" on every live replica {:.2} s after `adapters install` began (target 5 s: {})",
                took.as_secs_f64(),
                check(*took <= Duration::from_secs(5))
            );
        }
        println!("tasks left running after the drain: none within 60 s: {}", check(drained));
        let count = |c: Option<usize>| c.map_or("-".into(), |c| c.to_string());
        let series: Vec<String> = samples
            .iter()
            .map(|s| {
                let connections = count(s.connections);
                format!("{:.0}s {:.0} MiB {connections} conn", s.at.as_secs_f64(), s.rss_mib)
            })
            .collect();
        println!("witness memory and PostgreSQL connections: {}", series.join(", "));
        let first_half: Vec<Sample> = samples.iter().filter(|s| s.at <= half).copied().collect();
        let at_half = *first_half.last().unwrap_or(&samples[0]);
        let most = first_half.iter().filter_map(|s| s.connections).max();
        let last = *samples.last().unwrap();
        let growth = last.rss_mib / at_half.rss_mib - 1.0;
        println!(
            "flat: memory {:+.1} % in the second half (target < 10 %: {}), connections at most {} in the first half, {} at the end (target no more: {})",
            growth * 100.0,
            check(growth < 0.10),
            count(most),
            count(last.connections),
            check(last.connections.is_some() && last.connections <= most)
        );
        if !met {
            let kept = root.keep();
            println!("the replicas' data directories and logs are kept in {}", kept.display());
        }
    });
}
