//! The cron scheduler through the real binary: the `schedule` CLI, ticks with a short
//! `SERVICE_SCHEDULER_TICK_SECS`, catch-up after downtime, no overlap, crash safety, the
//! registry entry and its toggle.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use rusqlite::Connection;
use serde_json::{Value, json};

use crate::fakes::llm::{self, Reply};
use crate::support::{Server, assert_error, cli, eventually, openai_env};

fn ok(output: &std::process::Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn failed(output: &std::process::Output) -> String {
    assert!(
        !output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    String::from_utf8(output.stderr.clone()).unwrap()
}

pub(crate) fn create(server: &Server, name: &str, cron: &str, policy: &str) {
    ok(&cli(
        &server.data_dir,
        &[
            "schedule",
            "create",
            name,
            "--cron",
            cron,
            "--agent",
            "default",
            "--prompt",
            "status report",
            "--catch-up",
            policy,
        ],
    ));
}

/// Simulates downtime: the schedule's next run was `hours` ago.
pub(crate) fn backdate(server: &Server, name: &str, hours: i64) {
    let at = (chrono::Utc::now() - chrono::Duration::hours(hours))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let conn = Connection::open(server.data_dir.join("service.sqlite")).unwrap();
    conn.execute(
        "UPDATE schedules SET next_run_at = ?2 WHERE name = ?1",
        [name, &at],
    )
    .unwrap();
}

async fn schedule(server: &Server, name: &str) -> Value {
    let (_, body) = server.get("/api/schedules").await;
    body["schedules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
        .unwrap()
}

pub(crate) async fn runs_of(server: &Server, name: &str) -> Vec<Value> {
    let (_, body) = server.get("/api/tasks").await;
    let title = format!("Scheduled run: {name}");
    body["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["title"] == title)
        .cloned()
        .collect()
}

/// Waits until the scheduler has started two more ticks (each tick first stamps its entry's
/// `last_activity_at`), so the tick in between has planned and dispatched all it would.
async fn ticks_pass(server: &Server) {
    let stamp = async || server.adapter("scheduler").await.unwrap()["last_activity_at"].clone();
    let mut seen = stamp().await;
    for _ in 0..2 {
        let before = seen;
        seen = eventually(10, async || {
            let now = stamp().await;
            (now != before).then_some(now)
        })
        .await;
    }
}

fn now_plus(seconds: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::seconds(seconds))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[test]
fn cli_validates_before_writing() {
    let server = Server::start();
    let dir = &server.data_dir;
    let bad = failed(&cli(
        dir,
        &[
            "schedule", "create", "x", "--cron", "every 2m", "--agent", "default", "--prompt", "p",
        ],
    ));
    assert!(
        bad.contains("every 1m / every 5m / every 30m / every 1h") && bad.contains("@hourly"),
        "{bad}"
    );
    failed(&cli(
        dir,
        &[
            "schedule",
            "create",
            "x",
            "--cron",
            "0 0 * * * *",
            "--agent",
            "default",
            "--prompt",
            "p",
        ],
    ));
    let policy = failed(&cli(
        dir,
        &[
            "schedule",
            "create",
            "x",
            "--cron",
            "@daily",
            "--agent",
            "default",
            "--prompt",
            "p",
            "--catch-up",
            "sometimes",
        ],
    ));
    assert!(policy.contains("coalesce, all or skip"), "{policy}");
    failed(&cli(
        dir,
        &[
            "schedule", "create", "x", "--cron", "@daily", "--agent", "default", "--prompt", " ",
        ],
    ));
    assert_eq!(
        ok(&cli(dir, &["schedule", "list", "--json"])).trim(),
        "[]",
        "nothing was written"
    );

    let created = cli(
        dir,
        &[
            "schedule",
            "create",
            "digest",
            "--cron",
            "every 30m",
            "--agent",
            "Ghost",
            "--prompt",
            "p",
        ],
    );
    assert!(
        ok(&created).contains("*/30 * * * *"),
        "sugar is stored as cron"
    );
    assert!(
        String::from_utf8_lossy(&created.stderr)
            .contains("warning: there is no agent profile named \"Ghost\"")
    );
    let duplicate = failed(&cli(
        dir,
        &[
            "schedule", "create", "digest", "--cron", "@daily", "--agent", "default", "--prompt",
            "p",
        ],
    ));
    assert!(duplicate.contains("already exists"));

    let listed: Value =
        serde_json::from_str(&ok(&cli(dir, &["schedule", "list", "--json"]))).unwrap();
    assert_eq!(listed[0]["cron_expression"], "*/30 * * * *");
    assert_eq!(
        listed[0]["catch_up_policy"], "coalesce",
        "the default policy"
    );
    let before = listed[0]["next_run_at"].as_str().unwrap().to_owned();

    let shown = ok(&cli(
        dir,
        &[
            "schedule",
            "edit",
            "digest",
            "--cron",
            "0 3 * * *",
            "--catch-up",
            "skip",
            "--agent",
            "default",
        ],
    ));
    assert!(
        shown.contains("cron:            0 3 * * *") && shown.contains("catch-up:        skip"),
        "{shown}"
    );
    let listed: Value =
        serde_json::from_str(&ok(&cli(dir, &["schedule", "list", "--json"]))).unwrap();
    assert_ne!(
        listed[0]["next_run_at"].as_str().unwrap(),
        before,
        "a new cron recomputes the next run"
    );
    failed(&cli(
        dir,
        &["schedule", "edit", "digest", "--cron", "nonsense"],
    ));
    failed(&cli(dir, &["schedule", "edit", "digest"]));
    let unchanged: Value =
        serde_json::from_str(&ok(&cli(dir, &["schedule", "list", "--json"]))).unwrap();
    assert_eq!(unchanged, listed, "a refused edit changes nothing");
    let unknown_agent = cli(dir, &["schedule", "edit", "digest", "--agent", "Nobody"]);
    assert!(
        String::from_utf8_lossy(&unknown_agent.stderr)
            .contains("no agent profile named \"Nobody\""),
        "a warning, not an error"
    );
    assert!(ok(&unknown_agent).contains("agent:           Nobody"));

    ok(&cli(dir, &["schedule", "disable", "digest"]));
    assert!(ok(&cli(dir, &["schedule", "show", "digest"])).contains("enabled:         false"));
    ok(&cli(dir, &["schedule", "enable", "digest"]));
    for missing in [
        &["show", "nope"][..],
        &["enable", "nope"],
        &["disable", "nope"],
        &["delete", "nope"],
        &["run", "nope"],
        &["edit", "nope", "--prompt", "p"],
    ] {
        let args: Vec<&str> = ["schedule"].iter().chain(missing).copied().collect();
        let message = failed(&cli(dir, &args));
        assert!(message.contains("no schedule named \"nope\""), "{message}");
    }
    let paused = ok(&cli(
        dir,
        &[
            "schedule",
            "create",
            "paused",
            "--cron",
            "@daily",
            "--agent",
            "default",
            "--prompt",
            "p",
            "--disabled",
        ],
    ));
    assert!(paused.contains("next run: disabled"), "{paused}");
    ok(&cli(dir, &["schedule", "delete", "paused"]));
    ok(&cli(dir, &["schedule", "delete", "digest"]));
    assert_eq!(ok(&cli(dir, &["schedule", "list", "--json"])).trim(), "[]");
}

#[tokio::test]
async fn a_due_schedule_fires_and_records_its_trace() {
    let fake = llm::openai(vec![Reply::Text("All systems nominal.")]).await;
    let mut env = openai_env(&fake.url);
    env.push(("SERVICE_SCHEDULER_TICK_SECS", "1".into()));
    let server = Server::start_with_owned(&env);
    create(&server, "report", "@hourly", "coalesce");
    backdate(&server, "report", 0);

    let trace_id = eventually(10, async || {
        schedule(&server, "report").await["last_trace_id"]
            .as_str()
            .map(str::to_owned)
    })
    .await;
    let (_, trace) = server.get(&format!("/api/traces/{trace_id}")).await;
    assert_eq!(
        (trace["status"].as_str(), trace["source"].as_str()),
        (Some("ok"), Some("scheduler"))
    );
    assert_eq!(trace["response"], "All systems nominal.");
    assert_eq!(
        fake.requests()[0].body["messages"][1]["content"],
        "status report"
    );

    let runs = runs_of(&server, "report").await;
    assert_eq!(runs.len(), 1);
    assert_eq!(
        (runs[0]["status"].as_str(), runs[0]["trace_id"].as_str()),
        (Some("completed"), Some(trace_id.as_str()))
    );
    let listed = schedule(&server, "report").await;
    assert!(listed["last_run_at"].is_string());
    assert!(
        listed["next_run_at"].as_str().unwrap() > now_plus(0).as_str(),
        "re-armed in the future"
    );
    assert!(
        listed["next_run_human"]
            .as_str()
            .unwrap()
            .starts_with("in "),
        "{listed}"
    );

    let scheduler = server.adapter("scheduler").await.unwrap();
    assert_eq!(
        (scheduler["status"].as_str(), scheduler["kind"].as_str()),
        (Some("running"), Some("native"))
    );
    assert_eq!(scheduler["supports_toggle"], true);
    assert!(
        scheduler["last_activity_at"].is_string(),
        "every tick touches the entry"
    );
}

#[tokio::test]
async fn catch_up_policies_after_three_days_of_downtime() {
    let server = Server::start_with(&[("SERVICE_SCHEDULER_TICK_SECS", "1")]);
    for policy in ["coalesce", "all", "skip"] {
        create(&server, policy, "every 1h", policy);
        backdate(&server, policy, 72);
    }
    // `all` backfills one slot per tick: a few ticks give a few runs, still behind.
    eventually(15, async || {
        (runs_of(&server, "all").await.len() >= 3).then_some(())
    })
    .await;
    assert_eq!(
        runs_of(&server, "coalesce").await.len(),
        1,
        "coalesce fires once"
    );
    assert_eq!(
        runs_of(&server, "skip").await.len(),
        0,
        "skip never fires a late slot"
    );
    let now = now_plus(0);
    assert!(
        schedule(&server, "coalesce").await["next_run_at"]
            .as_str()
            .unwrap()
            > now.as_str()
    );
    assert!(
        schedule(&server, "skip").await["next_run_at"]
            .as_str()
            .unwrap()
            > now.as_str()
    );
    assert!(
        schedule(&server, "all").await["next_run_at"]
            .as_str()
            .unwrap()
            < now.as_str(),
        "still catching up"
    );
}

#[tokio::test]
async fn a_schedule_never_overlaps_itself() {
    let fake = llm::openai(vec![
        Reply::Slow(Duration::from_secs(3), "slow one"),
        Reply::Text("second"),
    ])
    .await;
    let mut env = openai_env(&fake.url);
    env.push(("SERVICE_SCHEDULER_TICK_SECS", "1".into()));
    let server = Server::start_with_owned(&env);
    create(&server, "busy", "every 1h", "all");
    backdate(&server, "busy", 5);

    eventually(10, async || (!fake.requests().is_empty()).then_some(())).await;
    ticks_pass(&server).await;
    assert_eq!(
        fake.requests().len(),
        1,
        "ticks while the run is in flight do not start another"
    );
    eventually(10, async || (fake.requests().len() == 2).then_some(())).await;
}

#[tokio::test]
async fn a_crash_right_after_dispatch_does_not_fire_the_slot_again() {
    let fake = llm::openai(vec![
        Reply::Slow(Duration::from_secs(30), "never seen"),
        Reply::Text("a second fire"),
    ])
    .await;
    let mut env = openai_env(&fake.url);
    env.push(("SERVICE_SCHEDULER_TICK_SECS", "1".into()));
    let server = Server::start_with_owned(&env);
    create(&server, "once", "@hourly", "coalesce");
    backdate(&server, "once", 0);
    eventually(10, async || (!fake.requests().is_empty()).then_some(())).await;

    let server = server.restart(); // SIGKILL, then start again on the same data
    ticks_pass(&server).await;
    assert_eq!(
        fake.requests().len(),
        1,
        "the slot was persisted before dispatch"
    );
    let runs = runs_of(&server, "once").await;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["status"], "error");
    assert!(
        runs[0]["description"]
            .as_str()
            .unwrap()
            .contains("interrupted by restart")
    );
}

#[tokio::test]
async fn deleting_the_task_cancels_a_running_scheduled_run() {
    let fake = llm::openai(vec![Reply::Slow(Duration::from_secs(30), "too late")]).await;
    let mut env = openai_env(&fake.url);
    env.push(("SERVICE_SCHEDULER_TICK_SECS", "1".into()));
    let server = Server::start_with_owned(&env);
    create(&server, "long", "@daily", "coalesce");
    backdate(&server, "long", 0);
    let task = eventually(10, async || {
        runs_of(&server, "long")
            .await
            .into_iter()
            .find(|t| t["status"] == "running")
    })
    .await;
    let task_id = task["task_id"].as_str().unwrap();

    let (status, body) = server.delete(&format!("/api/tasks/{task_id}")).await;
    assert_eq!(
        (status, body["result"].as_str()),
        (StatusCode::OK, Some("cancelled"))
    );
    let trace_id = eventually(5, async || {
        schedule(&server, "long").await["last_trace_id"]
            .as_str()
            .map(str::to_owned)
    })
    .await;
    let (_, trace) = server.get(&format!("/api/traces/{trace_id}")).await;
    assert_eq!(trace["status"], "error");
    assert!(
        trace["error_message"]
            .as_str()
            .unwrap()
            .contains("cancelled")
    );
    assert_eq!(runs_of(&server, "long").await[0]["status"], "cancelled");
}

#[tokio::test]
async fn bad_schedules_are_recorded_and_the_others_still_run() {
    let server = Server::start_with(&[("SERVICE_SCHEDULER_TICK_SECS", "1")]);
    create(&server, "good", "@hourly", "coalesce");
    create(&server, "broken", "@hourly", "coalesce");
    create(&server, "orphan", "@hourly", "coalesce");
    ok(&cli(
        &server.data_dir,
        &["schedule", "edit", "orphan", "--agent", "Nobody"],
    ));
    {
        let conn = Connection::open(server.data_dir.join("service.sqlite")).unwrap();
        conn.execute(
            "UPDATE schedules SET cron_expression = 'not a cron' WHERE name = 'broken'",
            [],
        )
        .unwrap();
    }
    for name in ["good", "broken", "orphan"] {
        backdate(&server, name, 0);
    }
    eventually(10, async || {
        schedule(&server, "good").await["last_trace_id"]
            .as_str()
            .map(str::to_owned)
    })
    .await;
    let orphan_trace = eventually(10, async || {
        schedule(&server, "orphan").await["last_trace_id"]
            .as_str()
            .map(str::to_owned)
    })
    .await;
    let (_, trace) = server.get(&format!("/api/traces/{orphan_trace}")).await;
    assert_eq!(
        trace["status"], "error",
        "an unknown profile is an error trace"
    );
    assert_eq!(runs_of(&server, "orphan").await[0]["status"], "error");

    let entry = eventually(5, async || {
        let entry = server.adapter("scheduler").await.unwrap();
        (entry["error_count"].as_u64() >= Some(1)).then_some(entry)
    })
    .await;
    assert!(
        entry["error_message"]
            .as_str()
            .unwrap()
            .starts_with("ScheduleError: schedule \"broken\""),
        "{entry}"
    );
    assert_eq!(entry["status"], "error");

    // Reported once, not on every tick; fixed, the scheduler is running again.
    ticks_pass(&server).await;
    let errors = server.adapter("scheduler").await.unwrap()["error_count"].clone();
    assert_eq!(errors, entry["error_count"]);
    ok(&cli(
        &server.data_dir,
        &["schedule", "edit", "broken", "--cron", "@daily"],
    ));
    eventually(5, async || {
        let entry = server.adapter("scheduler").await.unwrap();
        (entry["status"] == "running").then_some(())
    })
    .await;
}

#[tokio::test]
async fn the_scheduler_switch_and_the_toggle() {
    let server = Server::start_with(&[
        ("SERVICE_DISABLE_SCHEDULER", "true"),
        ("SERVICE_SCHEDULER_TICK_SECS", "1"),
    ]);
    let (status, health) = server.get("/api/health").await;
    assert_eq!(
        (status, health["status"].as_str()),
        (StatusCode::OK, Some("ok"))
    );
    let entry = server.adapter("scheduler").await.unwrap();
    assert_eq!(entry["status"], "stopped");
    assert!(
        entry["note"]
            .as_str()
            .unwrap()
            .contains("SERVICE_DISABLE_SCHEDULER")
    );
    create(&server, "idle", "@hourly", "coalesce");
    backdate(&server, "idle", 0);
    // A stopped scheduler has no ticks to wait for: give it the time of one and a half.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        runs_of(&server, "idle").await.is_empty(),
        "a stopped scheduler fires nothing"
    );
    drop(server);

    let server = Server::start_with(&[("SERVICE_SCHEDULER_TICK_SECS", "1")]);
    let (status, entry) = server
        .post("/api/adapters/scheduler/disable", json!(null))
        .await;
    assert_eq!(
        (status, entry["status"].as_str()),
        (StatusCode::OK, Some("stopped"))
    );
    let server = server.restart();
    assert_eq!(
        server.adapter("scheduler").await.unwrap()["status"],
        "stopped",
        "the choice persists"
    );
    let (status, entry) = server
        .post("/api/adapters/scheduler/enable", json!(null))
        .await;
    assert_eq!(
        (status, entry["status"].as_str()),
        (StatusCode::OK, Some("running"))
    );
    assert_error(
        &server.post("/api/adapters/nope/enable", json!(null)).await,
        StatusCode::NOT_FOUND,
        "no adapter",
    );
}

#[tokio::test]
async fn an_invalid_time_zone_is_a_scheduler_error_not_a_crash() {
    let server = Server::start_with(&[("SERVICE_TZ", "Mars/Olympus_Mons")]);
    let entry = server.adapter("scheduler").await.unwrap();
    assert_eq!(entry["status"], "error");
    assert!(
        entry["error_message"]
            .as_str()
            .unwrap()
            .contains("Mars/Olympus_Mons"),
        "{entry}"
    );
    assert_eq!(server.get("/api/health").await.0, StatusCode::OK);
    let create = crate::support::command(&server.data_dir)
        .env("SERVICE_TZ", "Mars/Olympus_Mons")
        .arg("--data-dir")
        .arg(&server.data_dir)
        .args([
            "schedule", "create", "x", "--cron", "@daily", "--agent", "default", "--prompt", "p",
        ])
        .output()
        .unwrap();
    assert!(
        failed(&create).contains("Mars/Olympus_Mons"),
        "the CLI refuses to compute a next run in a zone it does not know"
    );
}

#[tokio::test]
async fn schedule_run_fires_once_outside_the_cron() {
    let server = Server::start();
    create(&server, "manual", "@yearly", "coalesce");
    let before = schedule(&server, "manual").await["next_run_at"].clone();
    let out = ok(&cli(&server.data_dir, &["schedule", "run", "manual"]));
    // The answer (the offline responder's), then the trace id, as `run` prints them.
    let (answer, trace_id) = out.trim().rsplit_once("\ntrace_id: ").unwrap();
    assert!(answer.contains("status report"), "{out}");
    let listed = schedule(&server, "manual").await;
    assert_eq!(listed["last_trace_id"], trace_id);
    assert_eq!(listed["next_run_at"], before, "the cron is untouched");
    assert_eq!(runs_of(&server, "manual").await[0]["status"], "completed");
}

#[tokio::test]
async fn a_cron_field_out_of_range_is_named_with_its_range() {
    let server = Server::start();
    for (cron, says) in [
        (
            "61 * * * *",
            "the minute field \"61\" is out of range; it takes 0-59",
        ),
        (
            "0 9 * 13 *",
            "the month field \"13\" is out of range; it takes 1-12 or JAN-DEC",
        ),
    ] {
        let refused = failed(&cli(
            &server.data_dir,
            &[
                "schedule", "create", "x", "--cron", cron, "--agent", "default", "--prompt", "p",
            ],
        ));
        assert!(refused.contains(says), "{refused}");
        assert!(!refused.contains("Component error"), "{refused}");
    }
    let (_, body) = server.get("/api/schedules").await;
    assert_eq!(body["schedules"], json!([]), "nothing was written");
}

#[tokio::test]
async fn a_manual_run_and_a_scheduled_one_never_overlap() {
    let fake = llm::openai(vec![Reply::Slow(Duration::from_secs(6), "slow one")]).await;
    let mut env = openai_env(&fake.url);
    env.push(("SERVICE_SCHEDULER_TICK_SECS", "1".into()));
    let server = Server::start_with_owned(&env);
    create(&server, "manual", "@yearly", "coalesce");
    // The CLI runs it through the server, with the server's provider.
    let first = crate::support::command(server.data_dir.parent().unwrap())
        .arg("--data-dir")
        .arg(&server.data_dir)
        .args(["schedule", "run", "manual"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let first = tokio::task::spawn_blocking(move || first.wait_with_output().unwrap());
    eventually(10, async || {
        let runs = runs_of(&server, "manual").await;
        runs.first().filter(|r| r["status"] == "running").cloned()
    })
    .await;
    let refused = failed(&cli(&server.data_dir, &["schedule", "run", "manual"]));
    assert!(refused.contains("still in progress"), "{refused}");
    // Due now, but its manual run is still going: the server's ticks hold back.
    backdate(&server, "manual", 0);
    ticks_pass(&server).await;
    assert_eq!(runs_of(&server, "manual").await.len(), 1);
    assert!(ok(&first.await.unwrap()).starts_with("slow one\ntrace_id: "));
    assert_eq!(fake.requests().len(), 1);
    // Once it ended, the slot fires.
    eventually(10, async || {
        (runs_of(&server, "manual").await.len() == 2).then_some(())
    })
    .await;
}

#[tokio::test]
async fn schedules_are_created_changed_run_and_deleted_through_the_api() {
    let (first, pieces) = llm::by_hand();
    let fake = llm::openai(vec![first, Reply::Text("second")]).await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    let create = |body: Value| server.post("/api/schedules", body);
    let patch = |path: &'static str, body: Value| server.send(Method::PATCH, path, Some(body));

    // Bad input names its field and writes nothing.
    let draft =
        json!({"name": "digest", "cron": "@weekly", "agent": "default", "prompt": "Sum up"});
    let with = |key: &str, value: Value| {
        let mut body = draft.clone();
        body[key] = value;
        body
    };
    let refused = create(with("cron", json!("every tuesday"))).await;
    assert_error(&refused, StatusCode::BAD_REQUEST, "every tuesday");
    assert_eq!(refused.1["field"], "cron");
    let refused = create(with("catch_up", json!("sometimes"))).await;
    assert_eq!(
        (refused.0, refused.1["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("catch_up"))
    );
    assert_eq!(
        create(with("extra", json!(1))).await.0,
        StatusCode::BAD_REQUEST
    );
    let (_, listed) = server.get("/api/schedules").await;
    assert_eq!(listed["schedules"], json!([]));

    let (status, created) = create(draft.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(
        (
            created["cron_expression"].as_str(),
            created["enabled"].as_bool()
        ),
        (Some("0 0 * * 0"), Some(true))
    );
    assert!(created["warning"].is_null(), "{created}");
    assert_error(
        &create(draft.clone()).await,
        StatusCode::CONFLICT,
        "already exists",
    );
    let (_, ghost) = create(json!({"name": "ghostly", "cron": "@daily", "agent": "Nobody", "prompt": "x", "enabled": false})).await;
    assert!(
        ghost["warning"]
            .as_str()
            .unwrap()
            .contains("no agent named \"Nobody\""),
        "{ghost}"
    );
    assert_eq!(ghost["enabled"], false);

    // Changes: a new cron moves the next run; enabling and disabling; nothing, or unknown.
    let (status, changed) = patch(
        "/api/schedules/digest",
        json!({"cron": "30 6 * * 1-5", "prompt": "Sum up the day"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    assert_eq!(changed["cron_expression"], "30 6 * * 1-5");
    assert_ne!(changed["next_run_at"], created["next_run_at"]);
    let (_, off) = patch("/api/schedules/digest", json!({"enabled": false})).await;
    assert_eq!(
        (off["enabled"].as_bool(), off["next_run_human"].as_str()),
        (Some(false), None)
    );
    let (_, on) = patch("/api/schedules/digest", json!({"enabled": true})).await;
    assert!(
        on["next_run_human"].as_str().unwrap().starts_with("in "),
        "{on}"
    );
    assert_error(
        &patch("/api/schedules/digest", json!({})).await,
        StatusCode::BAD_REQUEST,
        "nothing to change",
    );
    let refused = patch(
        "/api/schedules/digest",
        json!({"cron": "61 * * * *", "enabled": false}),
    )
    .await;
    assert_eq!(refused.1["field"], "cron");
    assert_eq!(
        schedule(&server, "digest").await["enabled"],
        true,
        "a refused change changes nothing"
    );
    assert_eq!(
        patch("/api/schedules/nope", json!({"enabled": true}))
            .await
            .0,
        StatusCode::NOT_FOUND
    );

    // Run now: a task of the schedule; a second while it runs is refused.
    let (status, started) = server.post("/api/schedules/digest/run", Value::Null).await;
    assert_eq!(
        (status, started["status"].as_str()),
        (StatusCode::ACCEPTED, Some("started"))
    );
    eventually(20, async || (!fake.requests().is_empty()).then_some(())).await;
    assert_error(
        &server.post("/api/schedules/digest/run", Value::Null).await,
        StatusCode::CONFLICT,
        "still in progress",
    );
    pieces.send("first").unwrap();
    drop(pieces);
    let task = eventually(20, async || {
        let (_, tasks) = server.get("/api/tasks").await;
        let task = tasks["tasks"]
            .as_array()?
            .iter()
            .find(|t| t["schedule_name"] == "digest")?
            .clone();
        (task["status"] == "completed").then_some(task)
    })
    .await;
    assert!(task["trace_id"].is_string(), "{task}");
    assert_eq!(
        server.post("/api/schedules/nope/run", Value::Null).await.0,
        StatusCode::NOT_FOUND
    );

    // Deleted once.
    let (status, deleted) = server.delete("/api/schedules/digest").await;
    assert_eq!(
        (status, deleted["deleted"].as_str()),
        (StatusCode::OK, Some("digest"))
    );
    assert_eq!(
        server.delete("/api/schedules/digest").await.0,
        StatusCode::NOT_FOUND
    );
    let (_, listed) = server.get("/api/schedules").await;
    assert_eq!(
        listed["schedules"].as_array().unwrap().len(),
        1,
        "ghostly stays"
    );
}

#[tokio::test]
async fn a_native_adapters_last_activity_survives_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let env = [("SERVICE_SCHEDULER_TICK_SECS", "1".to_owned())];
    let server = Server::start_in(tmp.path(), &env);
    ticks_pass(&server).await;
    // Disabled, it ticks no more: what its entry shows after the restart is what was kept.
    let (status, body) = server
        .post("/api/adapters/scheduler/disable", json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let last = server.adapter("scheduler").await.unwrap()["last_activity_at"].clone();
    assert!(last.is_string(), "{last}");
    assert!(server.terminate().success());

    let server = Server::start_in(tmp.path(), &env);
    let entry = server.adapter("scheduler").await.unwrap();
    assert_eq!(
        (&entry["status"], &entry["last_activity_at"]),
        (&json!("stopped"), &last),
        "{entry}"
    );
}
