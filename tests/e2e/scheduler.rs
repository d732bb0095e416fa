//! The cron scheduler through the real binary, beyond the specification's rows (those are in
//! `spec::scheduler`, with the helpers here): cancelling a run, time zones, runs started by
//! hand, cron ranges, the API, and the registry entry's activity across a restart.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use rusqlite::Connection;
use serde_json::{Value, json};

use crate::fakes::llm::{self, Reply};
use crate::support::{Server, assert_error, cli, eventually, openai_env};

pub(crate) fn ok(output: &std::process::Output) -> String {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

pub(crate) fn failed(output: &std::process::Output) -> String {
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

/// A cron that comes due only when a test backdates it: once a year (an hourly one came due
/// again whenever a test crossed the hour, running more than the test expected).
pub(crate) const DUE_ONLY_WHEN_BACKDATED: &str = "0 0 1 1 *";

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

pub(crate) async fn schedule(server: &Server, name: &str) -> Value {
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
pub(crate) async fn ticks_pass(server: &Server) {
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

pub(crate) fn now_plus(seconds: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::seconds(seconds))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
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
    // A run started by hand is the schedule's last run too.
    let ran = schedule(&server, "digest").await;
    assert_eq!(
        (ran["last_run_at"].is_string(), &ran["last_trace_id"]),
        (true, &task["trace_id"]),
        "{ran}"
    );
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

/// A reader that goes away (`| head -c 20`) ends every printing command quietly, as it ends
/// Unix tools: by SIGPIPE, no panic, nothing on stderr. The listings are made longer than a
/// pipe holds, so the command is still printing when its reader leaves.
#[tokio::test]
async fn a_command_whose_reader_goes_away_ends_quietly() {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;

    let server = Server::start();
    for i in 0..1000 {
        let schedule = json!({
            "name": format!("schedule-{i:04}"),
            "cron": "@daily",
            "agent": "default",
            "prompt": "a prompt long enough to fill the pipe buffer sooner rather than later",
        });
        let (status, body) = server.post("/api/schedules", schedule).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    for args in [&["schedule", "list", "--json"][..], &["schedule", "list"]] {
        let mut child = crate::support::command(server.data_dir.parent().unwrap())
            .arg("--data-dir")
            .arg(&server.data_dir)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut head = [0u8; 20];
        child.stdout.take().unwrap().read_exact(&mut head).unwrap();
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            (
                out.status.signal(),
                String::from_utf8_lossy(&out.stderr).as_ref()
            ),
            (Some(libc::SIGPIPE), ""),
            "{args:?}: {:?}",
            out.status
        );
    }
}

/// The API takes back the names it gives (spec 2.4): a schedule read with `GET
/// /api/schedules/{name}` is created again from its own fields, and changed by them.
#[tokio::test]
async fn a_schedule_read_back_is_accepted_by_its_own_names() {
    let server = Server::start();
    let (status, _) = server
        .post(
            "/api/schedules",
            json!({"name": "nightly", "cron": "@daily", "agent": "default", "prompt": "Tidy.", "catch_up": "skip"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, read) = server.get("/api/schedules/nightly").await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!(
        read,
        schedule(&server, "nightly").await,
        "as the list shows it"
    );

    let mut twin = json!({});
    for field in [
        "cron_expression",
        "agent_profile_name",
        "prompt",
        "catch_up_policy",
        "enabled",
    ] {
        twin[field] = read[field].clone();
    }
    twin["name"] = json!("nightly-twin");
    let (status, created) = server.post("/api/schedules", twin.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    for (field, value) in twin.as_object().unwrap() {
        assert_eq!(&created[field], value, "{field}");
    }
    let (status, changed) = server
        .send(
            Method::PATCH,
            "/api/schedules/nightly-twin",
            Some(json!({"cron_expression": "every 30m", "catch_up_policy": "all"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    assert_eq!(
        (&changed["cron_expression"], &changed["catch_up_policy"]),
        (&json!("*/30 * * * *"), &json!("all"))
    );
    assert_error(
        &server.get("/api/schedules/nobody").await,
        StatusCode::NOT_FOUND,
        "nobody",
    );
}
