//! Several replicas of the real binary on one real PostgreSQL database (Debian's postgresql,
//! started by the tests): what one replica writes every replica shows, keys written on one
//! apply on all, a schedule fires once per slot however many replicas tick, a replica killed
//! with -9 hands its scheduler and its jobs over, a platform's retry at another replica is a
//! duplicate, a cancellation reaches the replica running the task, a component installed once
//! serves everywhere, and the database going away costs nothing acked.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;

use crate::fakes::llm::{self, Reply};
use crate::fakes::webhook_receiver::Receiver;
use crate::guests::guest;
use crate::runs::{
    Follow, WEBHOOK_CONFIG, ends_in_error, settled_webhook, status_of, text_of, verified,
    webhook_env,
};
use crate::support::postgres::{
    Durability, PostgresServer, postgres_server, private_postgres_server,
};
use crate::support::{Server, cli, eventually, openai_env};
use crate::teamchat::{SIGNING_SECRET, callback, mention_at, platform, signed};
use crate::wasm::ECHO_GRANT;

/// Replicas sharing one fresh database; each has a data directory of its own.
struct Cluster {
    database: String,
    env: Vec<(&'static str, String)>,
    /// Each replica's `config.toml`.
    config: String,
    replicas: Vec<Option<Server>>,
    dirs: tempfile::TempDir,
}

impl Cluster {
    /// `None` when PostgreSQL is not installed (outside CI: said loudly, the test passes).
    fn start(count: usize, env: &[(&'static str, String)]) -> Option<Self> {
        Self::on(postgres_server()?, count, env)
    }

    /// [`Cluster::start`], every replica with this `config.toml`.
    fn start_configured(count: usize, config: &str) -> Option<Self> {
        let mut cluster = Self::on(postgres_server()?, 0, &[])?;
        cluster.config = config.to_owned();
        for _ in 0..count {
            cluster.add();
        }
        Some(cluster)
    }

    fn on(server: &PostgresServer, count: usize, env: &[(&'static str, String)]) -> Option<Self> {
        let database = server.fresh_database();
        let mut cluster = Self {
            database,
            env: env.to_vec(),
            config: String::new(),
            replicas: Vec::new(),
            dirs: tempfile::tempdir().unwrap(),
        };
        for _ in 0..count {
            cluster.add();
        }
        Some(cluster)
    }

    fn data_dir(&self, index: usize) -> PathBuf {
        self.dirs.path().join(format!("replica-{index}"))
    }

    /// Starts one more replica. The database's URL is in its data directory's `.env`, so
    /// the command line run on that directory uses it too.
    fn add(&mut self) -> usize {
        let index = self.replicas.len();
        let dir = self.data_dir(index);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join(".env"),
            format!("SERVICE_DATABASE_URL={}\n", self.database),
        )
        .unwrap();
        std::fs::write(dir.join("config.toml"), &self.config).unwrap();
        let server = Server::start_in(&dir, &self.env);
        self.replicas.push(Some(server));
        index
    }

    fn at(&self, index: usize) -> &Server {
        self.replicas[index]
            .as_ref()
            .expect("that replica was killed")
    }

    /// kill -9.
    fn kill(&mut self, index: usize) {
        if let Some(mut server) = self.replicas[index].take() {
            server.stop();
        }
    }

    fn alive(&self) -> impl Iterator<Item = &Server> {
        self.replicas.iter().flatten()
    }

    /// The replica whose native adapter `name` runs, once one does.
    async fn running(&self, name: &str, within: u64) -> usize {
        eventually(within, async || {
            for (index, server) in self.replicas.iter().enumerate() {
                let Some(server) = server else { continue };
                if server
                    .adapter(name)
                    .await
                    .is_some_and(|a| a["status"] == "running")
                {
                    return Some(index);
                }
            }
            None
        })
        .await
    }
}

/// Runs SQL in the cluster's database.
fn sql(cluster: &Cluster, statement: &str) -> String {
    postgres_server()
        .unwrap()
        .sql(&cluster.database, statement)
        .unwrap_or_else(|e| panic!("{statement}: {e}"))
}

#[tokio::test]
async fn replicas_show_what_any_of_them_wrote() {
    let Some(cluster) = Cluster::start(2, &[]) else {
        return;
    };
    let (a, b) = (cluster.at(0), cluster.at(1));
    let (_, health_a) = a.get("/api/health").await;
    let (_, health_b) = b.get("/api/health").await;
    assert_eq!(health_a["database"]["kind"], "postgres", "{health_a}");
    assert_eq!(health_a["database"]["state"], "connected");
    assert_ne!(health_a["replica"], health_b["replica"]);

    let created = a
        .post(
            "/api/agents",
            json!({"name": "Quill", "system_prompt": "Be brief."}),
        )
        .await;
    assert!(created.0.is_success(), "{created:?}");
    let (_, agents) = b.get("/api/agents").await;
    assert!(
        agents["agents"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "Quill"),
        "{agents}"
    );
    let (status, answer) = a.post("/api/chat", json!({"prompt": "hello"})).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let trace_id = answer["trace_id"].as_str().unwrap();
    let (status, trace) = b.get(&format!("/api/traces/{trace_id}")).await;
    assert_eq!((status, &trace["status"]), (StatusCode::OK, &json!("ok")));

    // An operator's choice made on one replica is followed by the other at once.
    disable_email_on(a, b, 5).await;
    let enabled = b.post("/api/adapters/email/enable", json!({})).await;
    assert!(enabled.0.is_success(), "{enabled:?}");
    eventually(5, async || {
        let entry = a.adapter("email").await?;
        (entry["note"] != "disabled from the dashboard").then_some(())
    })
    .await;
}

/// Disables the email adapter on `one`; `other` follows within `seconds`.
async fn disable_email_on(one: &Server, other: &Server, seconds: u64) {
    let disabled = one.post("/api/adapters/email/disable", json!({})).await;
    assert!(disabled.0.is_success(), "{disabled:?}");
    eventually(seconds, async || {
        let entry = other.adapter("email").await?;
        (entry["note"] == "disabled from the dashboard").then_some(())
    })
    .await;
}

#[tokio::test]
async fn keys_written_on_one_replica_apply_on_every_replica_sealed() {
    let key = (
        "SERVICE_SECRET_KEY",
        "q9b1mL0dV7sJ3kN2pR5tW8yA4cE6gH0jK2mP4rT6vXw=".to_owned(),
    );
    let Some(cluster) = Cluster::start(2, &[key]) else {
        return;
    };
    let (a, b) = (cluster.at(0), cluster.at(1));
    let secret = "whsec-shared-7f3a91";
    let (status, written) = a
        .post(
            "/api/integrations/webhook/keys",
            json!({"env_var": "SERVICE_WEBHOOK_SECRET", "value": secret}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{written}");
    assert_eq!(written["stored_in"], "database");
    // The other replica applies it: the webhook adapter's missing setting is found.
    eventually(10, async || {
        let entry = b.adapter("webhook").await?;
        (entry["status"] == "running").then_some(())
    })
    .await;
    let stored = sql(
        &cluster,
        "SELECT encode(sealed, 'escape') FROM sealed_settings WHERE name = 'SERVICE_WEBHOOK_SECRET'",
    );
    assert!(
        !stored.is_empty() && !stored.contains(secret),
        "sealed: {stored}"
    );
    for server in [a, b] {
        let log = std::fs::read_to_string(server.data_dir.join("server.log")).unwrap();
        assert!(!log.contains(secret), "the secret is never logged");
    }
}

#[tokio::test]
async fn without_a_sealing_key_the_keys_api_says_how_to_set_one() {
    let Some(cluster) = Cluster::start(1, &[]) else {
        return;
    };
    let answer = cluster
        .at(0)
        .post(
            "/api/integrations/webhook/keys",
            json!({"env_var": "SERVICE_WEBHOOK_SECRET", "value": "x"}),
        )
        .await;
    assert_eq!(answer.0, StatusCode::CONFLICT, "{answer:?}");
    assert!(
        answer.1["error"]
            .as_str()
            .unwrap()
            .contains("openssl rand -base64 32"),
        "{answer:?}"
    );
    assert_eq!(sql(&cluster, "SELECT count(*) FROM sealed_settings"), "0");
}

/// Makes the schedule due now.
fn backdate(cluster: &Cluster, name: &str) {
    sql(
        cluster,
        &format!(
            "UPDATE schedules SET next_run_at = '2020-01-01T00:00:00.000Z' WHERE name = '{name}'"
        ),
    );
}

fn scheduled_runs(cluster: &Cluster, name: &str) -> i64 {
    sql(
        cluster,
        &format!("SELECT count(*) FROM tasks WHERE schedule_name = '{name}'"),
    )
    .parse()
    .unwrap()
}

#[tokio::test]
async fn a_schedule_fires_once_per_slot_on_three_replicas_and_survives_its_leader() {
    let llm = llm::openai(vec![Reply::Text("report"); 4]).await;
    let mut env = openai_env(&llm.url);
    env.push(("SERVICE_SCHEDULER_TICK_SECS", "1".into()));
    let Some(mut cluster) = Cluster::start(3, &env) else {
        return;
    };
    let out = cli(
        &cluster.data_dir(0),
        &[
            "schedule",
            "create",
            "report",
            "--cron",
            crate::scheduler::DUE_ONLY_WHEN_BACKDATED,
            "--agent",
            "default",
            "--prompt",
            "status",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let leader = cluster.running("scheduler", 15).await;
    for slot in 1..=3 {
        backdate(&cluster, "report");
        eventually(20, async || {
            (scheduled_runs(&cluster, "report") >= slot).then_some(())
        })
        .await;
    }
    // Every replica ticks every second: a slot taken twice would have shown by now.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(scheduled_runs(&cluster, "report"), 3);
    assert_eq!(llm.requests().len(), 3);
    let standby = cluster.alive().filter(|s| s.url != cluster.at(leader).url);
    for server in standby {
        let entry = server.adapter("scheduler").await.unwrap();
        assert!(
            entry["note"].as_str().unwrap().starts_with("standby"),
            "{entry}"
        );
    }

    // kill -9 of the leader: another replica ticks within 15 s.
    let killed_at = Instant::now();
    cluster.kill(leader);
    let next = cluster.running("scheduler", 15).await;
    assert_ne!(next, leader);
    assert!(killed_at.elapsed() < Duration::from_secs(15));
    backdate(&cluster, "report");
    eventually(20, async || {
        (scheduled_runs(&cluster, "report") >= 4).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_component_installed_once_serves_on_every_replica() {
    let Some(cluster) = Cluster::start(2, &[]) else {
        return;
    };
    let grant = cluster.dirs.path().join("echo.toml");
    std::fs::write(&grant, ECHO_GRANT).unwrap();
    let wasm = guest("echo");
    let installed_at = Instant::now();
    let out = cli(
        &cluster.data_dir(0),
        &[
            "adapters",
            "install",
            wasm.to_str().unwrap(),
            "--grant",
            grant.to_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("every replica loads it"));
    for server in cluster.alive() {
        eventually(5, async || {
            let (status, text) = server
                .send_text(reqwest::Method::GET, "/api/adapters/echo/hello", "")
                .await;
            (status == StatusCode::OK && text.starts_with("hello from echo")).then_some(())
        })
        .await;
    }
    println!(
        "served by both {:?} after the install began",
        installed_at.elapsed()
    );

    let out = cli(&cluster.data_dir(1), &["adapters", "remove", "echo"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for server in cluster.alive() {
        eventually(5, async || {
            server.adapter("echo").await.is_none().then_some(())
        })
        .await;
    }
}

/// The teamchat events of a burst, each a mention in a channel of its own (where its reply
/// goes), with that channel.
fn burst(count: usize) -> Vec<(String, String)> {
    (0..count)
        .map(|i| {
            let channel = format!("C{i:03}");
            let event = callback(
                &format!("EvBurst{i}"),
                mention_at(&channel, "1700000100.000100", "<@UBOT> hi", None),
            );
            (channel, event)
        })
        .collect()
}

#[tokio::test]
async fn a_replica_killed_mid_burst_leaves_every_acked_event_answered_once() {
    const EVENTS: usize = 40;
    let llm = llm::openai(vec![
        Reply::Slow(Duration::from_millis(300), "on it");
        EVENTS * 2
    ])
    .await;
    let api = platform(json!({"ok": true})).await;
    let mut env = api.env(SIGNING_SECRET);
    env.extend(openai_env(&llm.url));
    // Jobs of a dead replica are taken over after their lease: short, so the test is too.
    let config = "[jobs]\nlease_secs = 4\n";
    let Some(mut cluster) = Cluster::start(0, &env) else {
        return;
    };
    for index in 0..2 {
        std::fs::create_dir_all(cluster.data_dir(index)).unwrap();
        std::fs::write(cluster.data_dir(index).join("config.toml"), config).unwrap();
        cluster.add();
    }
    let events = burst(EVENTS);
    let mut acked = Vec::new();
    let mut refused = Vec::new();
    for (i, (channel, event)) in events.iter().enumerate() {
        // Alternating replicas, as a load balancer would; one dies half way.
        if i == EVENTS / 2 {
            cluster.kill(0);
        }
        let server = if i % 2 == 0 && i < EVENTS / 2 {
            cluster.at(0)
        } else {
            cluster.at(1)
        };
        let (status, _) = signed(server, "events", event).await;
        if status == StatusCode::OK {
            acked.push(channel.clone());
        } else {
            refused.push((i, status));
        }
    }
    assert!(
        refused.len() <= EVENTS / 10,
        "live replicas acked nearly every event: refused {refused:?}"
    );
    // The platform retries each event at the survivor: a duplicate when it was acked; one that
    // was refused (a busy machine) is taken now, or was claimed before its answer failed.
    for (channel, event) in &events {
        let (status, body) = signed(cluster.at(1), "events", event).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        if acked.contains(channel) {
            assert_eq!(body["outcome"], json!("duplicate"));
        }
    }
    let replied = eventually(90, async || {
        let posted = api.posted();
        (posted.len() >= EVENTS).then_some(posted)
    })
    .await;
    // A reply that would come twice would come from a job still waiting or running.
    eventually(60, async || {
        let unfinished = sql(
            &cluster,
            "SELECT count(*) FROM adapter_jobs j JOIN tasks t ON t.task_id = j.task_id \
             WHERE t.status IN ('pending', 'running')",
        );
        (unfinished == "0").then_some(())
    })
    .await;
    let channels = posted_channels(&api);
    let mut all: Vec<String> = events.into_iter().map(|(channel, _)| channel).collect();
    all.sort();
    assert_eq!(
        channels,
        all,
        "each event answered exactly once ({} posts, {} acked at first)",
        replied.len(),
        acked.len()
    );
}

#[tokio::test]
async fn cancelling_a_task_on_one_replica_stops_it_on_the_replica_running_it() {
    let llm = llm::openai(vec![Reply::Slow(Duration::from_secs(60), "too late")]).await;
    let mut env = openai_env(&llm.url);
    env.push(("SERVICE_SCHEDULER_TICK_SECS", "1".into()));
    let Some(cluster) = Cluster::start(2, &env) else {
        return;
    };
    let out = cli(
        &cluster.data_dir(0),
        &[
            "schedule", "create", "long", "--cron", "@daily", "--agent", "default", "--prompt",
            "go",
        ],
    );
    assert!(out.status.success());
    let leader = cluster.running("scheduler", 15).await;
    backdate(&cluster, "long");
    let task_id = eventually(20, async || {
        let id = sql(
            &cluster,
            "SELECT task_id FROM tasks WHERE schedule_name = 'long' AND status = 'running'",
        );
        (!id.is_empty()).then_some(id)
    })
    .await;
    let other = cluster.at(1 - leader);
    let (status, body) = other.delete(&format!("/api/tasks/{task_id}")).await;
    assert_eq!(
        (status, &body["result"]),
        (StatusCode::OK, &json!("cancelled"))
    );
    // The run on the leader ends (its trace says so) long before the model would answer.
    let trace = eventually(10, async || {
        let trace = sql(
            &cluster,
            "SELECT status FROM traces WHERE id = (SELECT last_trace_id FROM schedules WHERE name = 'long')",
        );
        (!trace.is_empty()).then_some(trace)
    })
    .await;
    assert_eq!(trace, "error");
}

#[tokio::test]
async fn a_cancel_whose_notification_was_lost_stops_the_run_once_its_replica_listens_again() {
    let fake = llm::openai(vec![Reply::Slow(Duration::from_secs(300), "never")]).await;
    let Some(cluster) = Cluster::start(2, &openai_env(&fake.url)) else {
        return;
    };
    let (status, started) = cluster
        .at(0)
        .post("/api/runs", json!({"prompt": "take your time"}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let run_id = started["run_id"].as_str().unwrap().to_owned();
    eventually(10, async || (!fake.requests().is_empty()).then_some(())).await;
    let following = Follow::open(&cluster.at(0).url, &run_id, None).await;

    // Both replicas' listening connections are ended, and none can come back while the
    // database takes no new connections: the cancel's notification reaches no one. The
    // replicas' pooled connections stay, so the cancel itself is answered.
    let server = postgres_server().unwrap();
    let database = cluster.database.rsplit('/').next().unwrap().to_owned();
    let listeners = format!(
        "FROM pg_stat_activity WHERE datname = '{database}' AND query = 'LISTEN service_events'"
    );
    let admin = |statement: &str| {
        server
            .psql(statement)
            .unwrap_or_else(|e| panic!("{statement}: {e}"))
    };
    admin(&format!(
        "ALTER DATABASE {database} ALLOW_CONNECTIONS false"
    ));
    admin(&format!("SELECT pg_terminate_backend(pid) {listeners}"));
    eventually(10, async || {
        (admin(&format!("SELECT count(*) {listeners}")) == "0").then_some(())
    })
    .await;
    let (status, cancelled) = cluster
        .at(1)
        .post(&format!("/api/runs/{run_id}/cancel"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    assert_eq!(admin(&format!("SELECT count(*) {listeners}")), "0");
    admin(&format!("ALTER DATABASE {database} ALLOW_CONNECTIONS true"));

    // Listening again, the replica running it reads which of its tasks were cancelled, and
    // the run stops long before the model would answer.
    let events = tokio::time::timeout(Duration::from_secs(20), following.rest())
        .await
        .expect("the run was stopped once its replica listened again");
    ends_in_error(&events, "cancelled");
    assert_eq!(status_of(cluster.at(0), &run_id).await, "cancelled");
}

#[tokio::test]
async fn while_the_database_is_away_writes_answer_503_and_change_nothing_until_it_is_back() {
    let Some(database) = private_postgres_server("outage", Durability::None).map(Arc::new) else {
        return;
    };
    let Some(cluster) = Cluster::on(&database, 2, &[]) else {
        return;
    };
    let server = cluster.at(0);
    let restarting = std::thread::spawn({
        let database = Arc::clone(&database);
        move || database.restart_after(Duration::from_secs(10))
    });
    // While it is down: a clear 503 (the agents written before it went are kept).
    let mut attempt = 0;
    let (refused, answer) = eventually(10, async || {
        attempt += 1;
        let name = format!("Away{attempt}");
        let answer = server
            .post("/api/agents", json!({"name": name, "system_prompt": "x"}))
            .await;
        (answer.0 == StatusCode::SERVICE_UNAVAILABLE).then_some((name, answer))
    })
    .await;
    assert!(
        answer.1["error"].as_str().unwrap().contains("unreachable"),
        "{answer:?}"
    );
    let (status, health) = server.get("/api/health").await;
    assert_eq!(
        (status, &health["database"]["state"]),
        (StatusCode::SERVICE_UNAVAILABLE, &json!("unreachable")),
        "{health}"
    );
    // A run says the same.
    let (status, answer) = server.post("/api/chat", json!({"prompt": "hello"})).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{answer}");
    restarting.join().unwrap();
    // Back: the same write goes through, and the refused one left nothing behind.
    let created = eventually(20, async || {
        let answer = server
            .post("/api/agents", json!({"name": "Back", "system_prompt": "x"}))
            .await;
        answer.0.is_success().then_some(answer)
    })
    .await;
    assert_eq!(created.1["name"], "Back");
    let (_, agents) = server.get("/api/agents").await;
    let names: Vec<&str> = agents["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert!(!names.contains(&refused.as_str()), "{names:?}");
    let (status, health) = server.get("/api/health").await;
    assert_eq!(
        (status, &health["database"]["state"]),
        (StatusCode::OK, &json!("connected"))
    );
    // The replicas hear each other again: the connection that listens was lost with the
    // database, and is taken again (it once stayed deaf, its loss unnoticed).
    disable_email_on(server, cluster.at(1), 15).await;
    drop(cluster);
}

#[tokio::test]
async fn a_bad_database_url_is_a_clear_start_up_error_and_writes_nothing() {
    let Some(database) = postgres_server() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let data = home.path().join("data");
    let start = |url: &str| {
        crate::support::command(home.path())
            .env("SERVICE_DATABASE_URL", url)
            .args(["serve", "--port", "0", "--data-dir"])
            .arg(&data)
            .output()
            .unwrap()
    };
    let url = database.fresh_database();
    let cases = [
        (
            "mysql://root:hunter2@127.0.0.1/x".to_owned(),
            "postgres:// URL",
        ),
        (
            url.replace("postgres@", "postgres:hunter2@")
                .replace("127.0.0.1", "127.0.0.1:1"),
            "not a valid PostgreSQL URL",
        ),
        (
            database.url("no_such_database"),
            "cannot connect to the database",
        ),
    ];
    for (bad, expected) in cases {
        let out = start(&bad);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{bad}");
        assert!(stderr.contains(expected), "{bad}: {stderr}");
        assert!(
            !stderr.contains("hunter2"),
            "the password is never printed: {stderr}"
        );
    }
    assert!(
        !data.join("service.sqlite").exists(),
        "no SQLite file on the side"
    );
    // A database of a newer schema version is refused and left as it was.
    sql_in(
        database,
        &url,
        "CREATE TABLE service_schema (version BIGINT NOT NULL)",
    );
    sql_in(database, &url, "INSERT INTO service_schema VALUES (99)");
    let out = start(&url);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("schema version 99"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        sql_in(
            database,
            &url,
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ),
        "1"
    );
}

fn sql_in(database: &PostgresServer, url: &str, statement: &str) -> String {
    database.sql(url, statement).unwrap()
}

/// A token made on one replica works on the other; revoked there, it is refused here within a
/// second; and the run budget of a token is one budget, whichever replica the runs go to.
#[tokio::test]
async fn tokens_and_run_budgets_are_the_same_on_every_replica() {
    let Some(cluster) =
        Cluster::start_configured(2, "[auth]\nrequired = true\nruns_per_minute = 3\n")
    else {
        return;
    };
    let (a, b) = (cluster.at(0), cluster.at(1));
    let operator = crate::access::token(a, "ops", "operator");
    let admin = crate::access::token(b, "root", "admin");
    let client = reqwest::Client::new();
    let chat = async |server: &Server, token: &str| {
        client
            .post(server.url("/api/chat"))
            .bearer_auth(token)
            .json(&json!({"prompt": "hello"}))
            .send()
            .await
            .unwrap()
    };
    // Three runs this minute, wherever they go; the fourth waits for the next minute.
    let second = chrono::Utc::now().timestamp() % 60;
    if second > 50 {
        tokio::time::sleep(Duration::from_secs(61 - second as u64)).await;
    }
    for server in [a, b, a] {
        assert_eq!(chat(server, &operator).await.status(), StatusCode::OK);
    }
    let refused = chat(b, &operator).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    let body: serde_json::Value = refused.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("token:ops started 3 agent runs this minute"),
        "{body}"
    );
    // Another principal has a budget of its own.
    assert_eq!(chat(a, &admin).await.status(), StatusCode::OK);

    // Revoked on one replica: refused on the other once its half-second lookup is stale.
    let revoked = client
        .delete(b.url("/api/tokens/ops"))
        .bearer_auth(&admin)
        .send()
        .await
        .unwrap();
    assert_eq!(revoked.status(), StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(600)).await;
    let after = client
        .get(a.url("/api/agents"))
        .bearer_auth(&operator)
        .send()
        .await
        .unwrap();
    assert_eq!(after.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_session_made_on_one_replica_works_on_the_other_and_ends_on_both() {
    let Some(cluster) = Cluster::start_configured(2, "[auth]\nrequired = true\n") else {
        return;
    };
    let (a, b) = (cluster.at(0), cluster.at(1));
    // Either replica's first-admin link works on the other: links live in the database.
    let link = crate::people::first_admin_link(a).await;
    let mut ada = crate::people::Browser::default();
    let (status, body) = ada
        .use_link(b, &link, Some("ada"), "correct horse battery staple")
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    for server in [a, b] {
        let (status, me, _) = ada
            .send(server, reqwest::Method::GET, "/api/me", None)
            .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(me["principal"]["id"], "ada");
    }
    // Writes with the cookie and its token work on either replica.
    let (status, body, _) = ada
        .send(
            a,
            reqwest::Method::POST,
            "/api/users",
            Some(json!({"name": "bob", "role": "viewer"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    // Signed out on one replica: refused on the other within a second, though it has just
    // looked the session up.
    let stolen = ada.clone();
    let (status, _, _) = stolen
        .clone()
        .send(a, reqwest::Method::GET, "/api/tasks", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = ada
        .send(b, reqwest::Method::DELETE, "/api/session", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let (status, _, _) = stolen
        .clone()
        .send(a, reqwest::Method::GET, "/api/tasks", None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn old_records_are_pruned_once_by_one_of_two_replicas() {
    // The first replica only writes: with every kind kept forever its rounds delete nothing
    // (finished runs' stream frames aside, of which there are none).
    let forever = "[retention]\ntraces_days = 0\ntasks_days = 0\napprovals_days = 0\n";
    let Some(mut cluster) = Cluster::start_configured(1, forever) else {
        return;
    };
    for n in 0..12 {
        let (status, answer) = cluster
            .at(0)
            .post("/api/chat", json!({"prompt": format!("question {n}")}))
            .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
    }
    // A chat gives its conversation's turn back just after it answers. One still held when the
    // replica dies keeps its conversation out of a round until the others see the death, and
    // this test is not about that.
    eventually(10, async || {
        (sql(&cluster, "SELECT count(*) FROM conversation_turns").trim() == "0").then_some(())
    })
    .await;
    cluster.kill(0);
    // Its pruner's lease would hold for half an hour after kill -9; it is made to have run out.
    sql(
        &cluster,
        "UPDATE traces SET created_at = '2020-01-01T00:00:00.000Z'; \
         UPDATE conversations SET updated_at = '2020-01-01T00:00:00.000Z'; \
         UPDATE leases SET expires_at = 0 WHERE name = 'retention'",
    );

    cluster.config = "[retention]\nconversations_days = 7\n".to_owned();
    let (first, second) = (cluster.add(), cluster.add());
    eventually(30, async || {
        (sql(&cluster, "SELECT count(*) FROM traces").trim() == "0"
            && sql(&cluster, "SELECT count(*) FROM conversations").trim() == "0")
            .then_some(())
    })
    .await;
    for kind in ["traces", "conversations"] {
        let counts = [
            crate::retention::deleted(cluster.at(first), kind).await,
            crate::retention::deleted(cluster.at(second), kind).await,
        ];
        assert!(
            counts.contains(&0) && counts.contains(&12),
            "{kind}: {counts:?}"
        );
    }
}

#[tokio::test]
async fn a_run_is_rejoined_on_the_other_replica_and_ends_when_its_replica_dies() {
    let (reply, pieces) = llm::by_hand();
    let slow = Reply::Slow(Duration::from_secs(300), "never");
    let fake = llm::openai(vec![reply, slow]).await;
    let Some(mut cluster) = Cluster::start(0, &webhook_env(&fake.url)) else {
        return;
    };
    cluster.config = WEBHOOK_CONFIG.to_owned();
    cluster.add();
    cluster.add();
    let receiver = Receiver::start(&[], 204).await;
    let (status, started) = cluster
        .at(0)
        .post("/api/runs", json!({"prompt": "count to two"}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let run_id = started["run_id"].as_str().unwrap().to_owned();

    // Followed on the replica running it, then re-joined on the other after the frame seen.
    let mut on_first = Follow::open(&cluster.at(0).url, &run_id, None).await;
    pieces.send("one ").unwrap();
    let mut seen = vec![on_first.next().await.unwrap()];
    drop(on_first);
    let on_second = Follow::open(&cluster.at(1).url, &run_id, Some(seen[0].0)).await;
    pieces.send("two").unwrap();
    drop(pieces);
    seen.extend(on_second.rest().await);
    let whole = Follow::open(&cluster.at(1).url, &run_id, None)
        .await
        .rest()
        .await;
    assert_eq!(seen, whole);
    assert_eq!(text_of(&whole), "one two");
    assert_eq!(whole.last().unwrap().1["type"], "done");
    // The run is an A2A task the other replica reads too.
    if crate::a2a::sdk_available() {
        let url = format!("{}/a2a/default", cluster.at(1).url);
        let read = crate::a2a::sdk(&["get", &url, &run_id]).await;
        assert_eq!(
            read["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{read}"
        );
        assert_eq!(read["task"]["artifacts"][0]["parts"][0]["text"], "one two");
    }

    // kill -9 of the replica running a run: it ends `error`, its stream says so, and its
    // webhook is delivered once, by the other replica.
    let (status, started) = cluster
        .at(0)
        .post(
            "/api/runs",
            json!({"prompt": "take your time", "webhook": receiver.url}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let run_id = started["run_id"].as_str().unwrap().to_owned();
    eventually(10, async || (fake.requests().len() == 2).then_some(())).await;
    let following = Follow::open(&cluster.at(1).url, &run_id, None).await;
    cluster.kill(0);
    let events = following.rest().await;
    ends_in_error(&events, "interrupted");
    assert_eq!(status_of(cluster.at(1), &run_id).await, "error");
    let webhook = settled_webhook(cluster.at(1), &run_id).await;
    assert_eq!(webhook["state"], "delivered", "{webhook}");
    let accepted = receiver.accepted();
    assert_eq!(accepted.len(), 1, "delivered once");
    if let Some(payloads) = verified(&accepted) {
        assert_eq!(payloads[0]["type"], "run.error", "{}", payloads[0]);
        assert_eq!(payloads[0]["data"]["run_id"], run_id.as_str());
    }
}

#[tokio::test]
async fn an_a2a_task_started_on_one_replica_is_streamed_and_cancelled_through_the_other() {
    if !crate::a2a::sdk_available() {
        return;
    }
    let (reply, pieces) = llm::by_hand();
    let fake = llm::openai(vec![reply]).await;
    let Some(cluster) = Cluster::start(2, &openai_env(&fake.url)) else {
        return;
    };
    let [first, second] = [0, 1].map(|n| format!("{}/a2a/default", cluster.at(n).url));

    // Started on the first replica, its client gone after the first chunk.
    pieces.send("Once ").unwrap();
    let started = crate::a2a::sdk(&["start", &first, "tell a story", "2"]).await;
    let task_id = started["events"][0]["task"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_owned();

    // Streamed through the second from its first chunk, and cancelled through it: the run on
    // the first replica stops, and the stream ends with the cancel.
    let subscriber = crate::a2a::Subscriber::start(&second, &task_id).await;
    let cancelled = crate::a2a::sdk(&["cancel", &second, &task_id]).await;
    assert_eq!(
        cancelled["task"]["status"]["state"], "TASK_STATE_CANCELED",
        "{cancelled}"
    );
    let events = &subscriber.end().await["events"];
    assert_eq!(crate::a2a::streamed_text(events), "Once ", "{events}");
    assert_eq!(crate::a2a::last_state(events), "TASK_STATE_CANCELED");
    assert_eq!(status_of(cluster.at(0), &task_id).await, "cancelled");
}

/// Two replicas answering mentions with a model that takes `model_secs`; `count` mentions
/// acked by the first, once it runs their jobs. The cluster, the platform and the channels.
async fn jobs_running_on_the_first(
    count: usize,
    model_secs: u64,
) -> Option<(Cluster, crate::fakes::teamchat::FakePlatform, Vec<String>)> {
    let llm = llm::openai(vec![
        Reply::Slow(Duration::from_secs(model_secs), "on it");
        count * 2
    ])
    .await;
    let api = platform(json!({"ok": true})).await;
    let mut env = api.env(SIGNING_SECRET);
    env.extend(openai_env(&llm.url));
    let cluster = Cluster::start(2, &env)?;
    let mut channels = Vec::new();
    for (channel, event) in burst(count) {
        let (status, body) = signed(cluster.at(0), "events", &event).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        channels.push(channel);
    }
    eventually(30, async || {
        let running = sql(
            &cluster,
            "SELECT count(*) FROM adapter_jobs j JOIN tasks t ON t.task_id = j.task_id \
             WHERE t.status = 'running'",
        );
        (running == count.to_string()).then_some(())
    })
    .await;
    Some((cluster, api, channels))
}

/// The channels replied to, sorted, once `count` replies came.
async fn replied(
    api: &crate::fakes::teamchat::FakePlatform,
    count: usize,
    within: u64,
) -> Vec<String> {
    eventually(within, async || {
        let posted = api.posted();
        (posted.len() >= count).then_some(())
    })
    .await;
    posted_channels(api)
}

/// The channels of the replies posted so far, sorted.
fn posted_channels(api: &crate::fakes::teamchat::FakePlatform) -> Vec<String> {
    let mut channels: Vec<String> = api
        .posted()
        .iter()
        .map(|(_, body)| body["channel"].as_str().unwrap_or_default().to_owned())
        .collect();
    channels.sort();
    channels
}

#[tokio::test]
async fn a_killed_replicas_jobs_are_taken_over_within_seconds_not_its_lease() {
    let Some((mut cluster, api, channels)) = jobs_running_on_the_first(4, 2).await else {
        return;
    };
    let killed_at = Instant::now();
    cluster.kill(0);
    let answered = replied(&api, channels.len(), 60).await;
    let took = killed_at.elapsed();
    // Its jobs' lease is 20 s: they ran again once its lock was seen free.
    assert!(
        took < Duration::from_secs(12),
        "answered {took:?} after the kill"
    );
    assert_eq!(answered, channels, "each once");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(api.posted().len(), channels.len(), "and never again");
}

#[tokio::test]
async fn a_paused_replica_keeps_its_jobs_and_nothing_is_answered_twice() {
    let Some((cluster, api, channels)) = jobs_running_on_the_first(3, 2).await else {
        return;
    };
    // Stopped longer than a takeover takes: its session, and so its lock, lives on.
    cluster.at(0).signal("STOP");
    tokio::time::sleep(Duration::from_secs(8)).await;
    cluster.at(0).signal("CONT");
    let answered = replied(&api, channels.len(), 60).await;
    assert_eq!(answered, channels, "each once");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(api.posted().len(), channels.len(), "and never again");
    let taken_over = sql(
        &cluster,
        "SELECT count(*) FROM tasks WHERE description LIKE '%interrupted%'",
    );
    assert_eq!(taken_over, "0", "no job was taken from the paused replica");
}

#[tokio::test]
async fn jobs_ending_while_the_database_is_away_are_recorded_once_it_is_back() {
    const EVENTS: usize = 3;
    let Some(database) = private_postgres_server("mid-reply", Durability::None).map(Arc::new)
    else {
        return;
    };
    let (replies, answers): (Vec<Reply>, Vec<_>) = (0..EVENTS).map(|_| llm::by_hand()).unzip();
    let llm = llm::openai(replies).await;
    let api = platform(json!({"ok": true})).await;
    let mut env = api.env(SIGNING_SECRET);
    env.extend(openai_env(&llm.url));
    let cluster = Cluster::on(&database, 2, &env).expect("a database is given");
    let mut channels = Vec::new();
    for (channel, event) in burst(EVENTS) {
        let (status, body) = signed(cluster.at(0), "events", &event).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        channels.push(channel);
    }
    eventually(30, async || (llm.requests().len() == EVENTS).then_some(())).await;
    // Every run waits for its model; the database goes, and the runs end while it is away:
    // each is answered (an apology: its trace cannot be written) and its job's outcome waits
    // for the database. Once, such a job stayed `running` for good, its lease renewed by a
    // replica that no longer ran it, and a retry it asked for never came.
    let restarting = std::thread::spawn({
        let database = Arc::clone(&database);
        move || database.restart_after(Duration::from_secs(6))
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    for answer in answers {
        answer.send("on it").unwrap();
    }
    let answered = replied(&api, EVENTS, 30).await;
    restarting.join().unwrap();
    assert_eq!(answered, channels, "each once");
    eventually(30, async || {
        let open = sql_in(
            &database,
            &cluster.database,
            "SELECT count(*) FROM adapter_jobs j JOIN tasks t ON t.task_id = j.task_id \
             WHERE t.status IN ('pending', 'running') OR j.lease_holder IS NOT NULL",
        );
        (open == "0").then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(api.posted().len(), EVENTS, "and never again");
}

#[tokio::test]
async fn a_recording_made_on_one_replica_is_read_and_replayed_on_the_other() {
    let llm = llm::openai(vec![Reply::Text("after the outage")]).await;
    let api = platform(json!({"ok": true})).await;
    api.refuse_next(500, None, json!({"ok": false, "error": "internal_error"}));
    let mut env = api.env(SIGNING_SECRET);
    env.extend(openai_env(&llm.url));
    let Some(cluster) = Cluster::start(2, &env) else {
        return;
    };
    let event = callback(
        "EvReplicated",
        mention_at("C1", "1700000001.000300", "<@UBOT> still there?", None),
    );
    assert_eq!(
        signed(cluster.at(0), "events", &event).await.0,
        StatusCode::OK
    );
    // The failed attempt, kept by whichever replica ran it, is listed by both.
    let mut ids = Vec::new();
    for server in cluster.alive() {
        let listed = eventually(30, async || {
            let (_, body) = server.get("/api/adapters/teamchat/recordings").await;
            let list = body["recordings"].as_array()?.clone();
            (!list.is_empty()).then_some(list)
        })
        .await;
        assert_eq!(listed[0]["outcome"], "failed", "{listed:?}");
        ids.push(listed[0]["id"].as_str().unwrap().to_owned());
    }
    assert_eq!(ids[0], ids[1]);
    let replayed = cli(&cluster.data_dir(1), &["adapters", "replay", &ids[0]]);
    let printed = String::from_utf8_lossy(&replayed.stdout);
    assert!(
        replayed.status.success() && printed.contains("match"),
        "{printed}"
    );
}

#[tokio::test]
async fn a_shadow_build_installed_once_is_compared_on_both_replicas_and_promoted() {
    let Some(cluster) = Cluster::start(2, &[]) else {
        return;
    };
    let grant = cluster.dirs.path().join("echo.toml");
    std::fs::write(&grant, ECHO_GRANT).unwrap();
    let installed = cli(
        &cluster.data_dir(0),
        &[
            "adapters",
            "install",
            guest("echo").to_str().unwrap(),
            "--grant",
            grant.to_str().unwrap(),
        ],
    );
    assert!(installed.status.success(), "{installed:?}");
    let v2 = crate::guests::echo_v2();
    let shadowed = cli(
        &cluster.data_dir(1),
        &["adapters", "install", v2.to_str().unwrap(), "--shadow"],
    );
    assert!(shadowed.status.success(), "{shadowed:?}");
    for server in cluster.alive() {
        eventually(30, async || {
            let entry = server.adapter("echo").await?;
            entry["metadata"]["shadow"]
                .as_str()?
                .starts_with("2 (")
                .then_some(())
        })
        .await;
    }
    // One call on each replica, each compared there; the counts are one.
    for server in cluster.alive() {
        let (status, text) = server
            .send_text(reqwest::Method::GET, "/api/adapters/echo/hello", "")
            .await;
        assert_eq!(
            (status, text.as_str()),
            (StatusCode::OK, "hello from echo v1")
        );
    }
    let shadow = eventually(30, async || {
        let (_, body) = cluster.at(0).get("/api/adapters/echo/shadow").await;
        (body["compared"].as_i64()? >= 2).then_some(body)
    })
    .await;
    assert_eq!(
        (shadow["compared"].as_i64(), shadow["matched"].as_i64()),
        (Some(2), Some(0))
    );
    assert_eq!(
        shadow["differences"].as_array().unwrap().len(),
        2,
        "{shadow}"
    );
    let (_, seen) = cluster.at(1).get("/api/adapters/echo/shadow").await;
    assert_eq!(seen["compared"], 2, "{seen}");

    let promoted = cli(&cluster.data_dir(0), &["adapters", "promote", "echo"]);
    assert!(
        promoted.status.success()
            && String::from_utf8_lossy(&promoted.stdout).contains("every replica"),
        "{promoted:?}"
    );
    for server in cluster.alive() {
        eventually(30, async || {
            let (status, text) = server
                .send_text(reqwest::Method::GET, "/api/adapters/echo/hello", "")
                .await;
            (status == StatusCode::OK && text == "hello from echo v2").then_some(())
        })
        .await;
        let (status, _) = server.get("/api/adapters/echo/shadow").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
}
