//! Recordings of component calls through the binary: a teamchat mention recorded whole (the
//! signed event, its job with the model's answer and the post) and replayed offline, a failed
//! delivery kept under the default `record = "errors"` and replayed from a saved fixture, a
//! new build's replay showing where it differs, a hostile guest's recordings bounded,
//! counted and without the secrets it read, and recordings past what may wait for the
//! database dropped.

use std::path::Path;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fakes::llm::{self, Reply};
use crate::fakes::teamchat::BOT_TOKEN;
use crate::guests::{echo_v2, guest};
use crate::support::{Server, assert_error, cli, eventually, openai_env};
use crate::teamchat::{SIGNING_SECRET, callback, mention, platform, settled_jobs, signed};
use crate::wasm::{ECHO_GRANT, drop_in, loaded};

/// The bundled teamchat grant with `extra` lines first.
fn teamchat_grant(extra: &str) -> String {
    let bundled = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../adapters-wasm/teamchat/grant.toml"),
    )
    .unwrap();
    format!("{extra}\n{bundled}")
}

/// An adapter's recordings, newest first, once there are at least `count`.
async fn recordings(server: &Server, adapter: &str, count: usize) -> Vec<Value> {
    eventually(20, async || {
        let (status, body) = server
            .get(&format!("/api/adapters/{adapter}/recordings"))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let list = body["recordings"].as_array().unwrap().clone();
        (list.len() >= count).then_some(list)
    })
    .await
}

async fn whole(server: &Server, adapter: &str, summary: &Value) -> Value {
    let id = summary["id"].as_str().unwrap();
    let (status, body) = server
        .get(&format!("/api/adapters/{adapter}/recordings/{id}"))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// The names of the imports a recording holds, in order (runs of clock readings and random
/// bytes left out: how many a guest makes is its allocator's business).
fn imports(recording: &Value) -> Vec<String> {
    recording["imports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["import"].as_str().unwrap().to_owned())
        .filter(|name| !name.contains("clock") && !name.contains("random"))
        .collect()
}

/// `adapters replay ARGS...`: whether it matched, and what it printed.
fn replay(data_dir: &Path, args: &[&str]) -> (bool, String) {
    let mut all = vec!["adapters", "replay"];
    all.extend_from_slice(args);
    let done = cli(data_dir, &all);
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&done.stdout),
        String::from_utf8_lossy(&done.stderr)
    );
    (done.status.success(), printed)
}

/// Whether any file of the data directory holds `value`.
fn stored_anywhere(data_dir: &Path, value: &str) -> bool {
    walk(data_dir).iter().any(|file| {
        std::fs::read(file)
            .is_ok_and(|bytes| bytes.windows(value.len()).any(|w| w == value.as_bytes()))
    })
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[tokio::test]
async fn a_mention_is_recorded_whole_with_names_for_its_secrets() {
    let llm = llm::openai(vec![Reply::Text("recorded answer")]).await;
    let api = platform(json!({"ok": true})).await;
    let mut env = api.env(SIGNING_SECRET);
    env.extend(openai_env(&llm.url));
    let tmp = tempfile::tempdir().unwrap();
    let data_dir = tmp.path().join("data");
    std::fs::create_dir_all(data_dir.join("adapters")).unwrap();
    std::fs::write(
        data_dir.join("adapters/teamchat.toml"),
        teamchat_grant("record = \"all\""),
    )
    .unwrap();
    let server = Server::start_in(&data_dir, &env);
    let event = callback("EvRecorded", mention("<@UBOT> what is recorded?", None));
    assert_eq!(signed(&server, "events", &event).await.0, StatusCode::OK);
    settled_jobs(&server).await;

    // The event's request, then its job: newest first.
    let list = recordings(&server, "teamchat", 2).await;
    let exports: Vec<&str> = list.iter().map(|r| r["export"].as_str().unwrap()).collect();
    assert_eq!(exports, ["run-job", "handle-http"], "{list:?}");
    assert!(list.iter().all(|r| r["outcome"] == "ok" && r["cut"] == 0));

    let event = whole(&server, "teamchat", &list[1]).await;
    assert_eq!(event["input"]["method"], "POST");
    assert_eq!(event["input"]["path"], "/events");
    assert!(
        event["input"]["body"]["utf8"]
            .as_str()
            .unwrap()
            .contains("what is recorded?"),
        "{event}"
    );
    assert_eq!(event["output"]["status"], 200);
    let event_imports = imports(&event);
    assert!(
        event_imports.contains(&"secrets.verify-hmac".to_owned())
            && event_imports.iter().any(|i| i.starts_with("jobs.enqueue")),
        "{event_imports:?}"
    );

    let job = whole(&server, "teamchat", &list[0]).await;
    let job_imports = imports(&job);
    let ran = job["imports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["import"].as_str().unwrap().starts_with("agent.run"))
        .unwrap_or_else(|| panic!("no agent run in {job_imports:?}"));
    assert!(
        ran["result"].to_string().contains("recorded answer"),
        "{ran}"
    );
    let post = job["imports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["import"] == "outbound-http.send")
        .unwrap_or_else(|| panic!("no post in {job_imports:?}"));
    assert!(
        post["args"]["url"]
            .as_str()
            .unwrap()
            .ends_with("/chat.postMessage"),
        "{post}"
    );
    // The guest names its token by placeholder: the recording keeps the placeholder.
    assert!(
        post["args"]["headers"].to_string().contains("{{secret:"),
        "{post}"
    );
    assert_eq!(post["result"]["Ok"]["status"], 200, "{post}");
    assert!(
        job["imports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["import"] == "wall-clock.now" || i["import"] == "monotonic-clock.now"),
        "the clock readings are kept: {job_imports:?}"
    );
    assert_eq!(job["output"], json!({"ok": null}));

    // Offline, the job replays to the same end: the model is not asked again and nothing is
    // posted again.
    let (matched, printed) = replay(&data_dir, &[list[0]["id"].as_str().unwrap()]);
    assert!(matched && printed.contains("match"), "{printed}");
    let (matched, printed) = replay(&data_dir, &[list[1]["id"].as_str().unwrap()]);
    assert!(matched, "{printed}");
    assert_eq!((llm.requests().len(), api.posted().len()), (1, 1));

    for secret in [SIGNING_SECRET, BOT_TOKEN] {
        assert!(!stored_anywhere(&data_dir, secret), "{secret} was stored");
    }
}

#[tokio::test]
async fn a_failed_delivery_is_kept_by_default_and_a_good_call_is_not() {
    let llm = llm::openai(vec![Reply::Text("after the outage")]).await;
    let api = platform(json!({"ok": true})).await;
    api.refuse_next(500, None, json!({"ok": false, "error": "internal_error"}));
    let mut env = api.env(SIGNING_SECRET);
    env.extend(openai_env(&llm.url));
    let server = Server::start_with_owned(&env);
    let event = callback("EvOutage", mention("<@UBOT> are you there?", None));
    assert_eq!(signed(&server, "events", &event).await.0, StatusCode::OK);
    let jobs = settled_jobs(&server).await;
    assert_eq!(jobs[0]["status"], "completed", "{jobs:?}");

    // Only the attempt that failed: the event's answer and the second attempt went well.
    let list = recordings(&server, "teamchat", 1).await;
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(
        (list[0]["export"].as_str(), list[0]["outcome"].as_str()),
        (Some("run-job"), Some("failed"))
    );
    let failed = whole(&server, "teamchat", &list[0]).await;
    let post = failed["imports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["import"] == "outbound-http.send")
        .unwrap();
    assert_eq!(post["result"]["Ok"]["status"], 500, "{post}");
    assert!(failed["output"]["error"]["message"].is_string(), "{failed}");

    // Saved as a fixture, it replays from the file, as an adapter's own tests would.
    let fixtures = tempfile::tempdir().unwrap();
    let id = list[0]["id"].as_str().unwrap();
    let saved = fixtures.path().join(format!("teamchat-{id}.json"));
    let (matched, printed) = replay(
        &server.data_dir,
        &[id, "--save", fixtures.path().to_str().unwrap()],
    );
    assert!(matched && saved.is_file(), "{printed}");
    let (matched, printed) = replay(&server.data_dir, &[saved.to_str().unwrap()]);
    assert!(matched, "{printed}");
    assert_eq!(api.calls().len(), 2, "the replays sent nothing");

    let (_, filtered) = server
        .get("/api/adapters/teamchat/recordings?outcome=ok")
        .await;
    assert_eq!(filtered["recordings"], json!([]));
    let answer = server
        .get("/api/adapters/teamchat/recordings?outcome=broken")
        .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "unknown outcome");
    let answer = server.get("/api/adapters/nobody/recordings").await;
    assert_error(&answer, StatusCode::NOT_FOUND, "no adapter named");
    let answer = server
        .get("/api/adapters/teamchat/recordings/not-an-id")
        .await;
    assert_error(&answer, StatusCode::NOT_FOUND, "no such recording");
}

#[tokio::test]
async fn a_hostile_guests_recordings_are_bounded_and_hold_no_secret() {
    const TOKEN: &str = "hostile-token-value-1234";
    let server = Server::start_with(&[("HOSTILE_TOKEN", TOKEN)]);
    let grant = "record = \"all\"\nsecrets = [\"HOSTILE_TOKEN\"]\n\
                 [limits]\nrecording_kib = 16\nrecordings_kept = 3\n";
    drop_in(&server, "hostile", &guest("hostile"), grant);
    loaded(&server, "hostile").await;
    let get = async |path: &str| {
        let response = reqwest::get(server.url(&format!("/api/adapters/hostile{path}")))
            .await
            .unwrap();
        (response.status(), response.text().await.unwrap())
    };

    // It echoes the secret it read: the live answer has it, the recording has its name.
    assert_eq!(
        get("/secret?name=HOSTILE_TOKEN").await,
        (StatusCode::OK, TOKEN.to_owned())
    );
    let echoed = whole(
        &server,
        "hostile",
        &recordings(&server, "hostile", 1).await[0],
    )
    .await;
    assert_eq!(echoed["output"]["body"]["utf8"], "{{secret:HOSTILE_TOKEN}}");
    let read = echoed["imports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["import"] == "secrets.get")
        .unwrap();
    assert_eq!(read["result"], "{{secret:HOSTILE_TOKEN}}");

    // 2,000 log lines of 1 KB would be 2 MB: the recording keeps 16 KiB and counts the rest.
    assert_eq!(get("/log-flood?n=2000&bytes=1000").await.0, StatusCode::OK);
    let flooded = &recordings(&server, "hostile", 2).await[0];
    let cut = flooded["cut"].as_i64().unwrap();
    assert!(cut > 1_900, "{flooded}");
    assert!(flooded["bytes"].as_i64().unwrap() < 20 << 10, "{flooded}");
    // What is kept is the first lines, in order: a recording stops, it has no holes.
    let kept = whole(&server, "hostile", flooded).await;
    let lines: Vec<String> = kept["imports"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["import"] == "log.log")
        .map(|i| i["args"]["message"].as_str().unwrap().to_owned())
        .collect();
    assert!(!lines.is_empty());
    for (i, line) in lines.iter().enumerate() {
        assert!(line.starts_with(&format!("line {i}\n")), "{i}: {line:.40}");
    }
    assert_eq!(
        lines.len() as i64 + cut,
        2_000,
        "every line kept or counted"
    );

    // A call that did not finish is recorded as such.
    assert!(get("/panic").await.0.is_server_error());
    // Kept after the answer, by the recordings' writer.
    let errors = eventually(10, async || {
        let (_, errors) = server
            .get("/api/adapters/hostile/recordings?outcome=error")
            .await;
        (!errors["recordings"][0].is_null()).then_some(errors)
    })
    .await;
    let panicked = &errors["recordings"][0];
    assert_eq!(panicked["error_kind"], "Panic", "{errors}");

    // Three kept: the oldest (the echo) went when the fourth came.
    assert_eq!(get("/ok").await.0, StatusCode::OK);
    let list = eventually(20, async || {
        let (_, body) = server.get("/api/adapters/hostile/recordings").await;
        let list = body["recordings"].as_array().unwrap().clone();
        (list.len() == 3 && list[0]["outcome"] == "ok").then_some(list)
    })
    .await;
    assert!(list.iter().all(|r| r["id"] != echoed["id"]), "{list:?}");

    assert!(
        !stored_anywhere(&server.data_dir, TOKEN),
        "the token was stored"
    );
}

#[tokio::test]
async fn a_new_build_replayed_shows_where_it_differs() {
    let server = Server::start();
    drop_in(
        &server,
        "echo",
        &guest("echo"),
        &format!("record = \"all\"\n{ECHO_GRANT}"),
    );
    loaded(&server, "echo").await;
    let hello = reqwest::get(server.url("/api/adapters/echo/hello"))
        .await
        .unwrap();
    assert_eq!(hello.text().await.unwrap(), "hello from echo v1");
    let list = eventually(20, async || {
        let (_, body) = server.get("/api/adapters/echo/recordings").await;
        let list = body["recordings"].as_array().unwrap().clone();
        list.iter().find(|r| r["export"] == "handle-http").cloned()
    })
    .await;
    let id = list["id"].as_str().unwrap();

    let (matched, printed) = replay(&server.data_dir, &[id]);
    assert!(
        matched && printed.contains("hello from echo v1"),
        "{printed}"
    );
    // Version 2 logs before it answers, and answers otherwise.
    let v2 = echo_v2();
    let (matched, printed) = replay(&server.data_dir, &[id, "--wasm", v2.to_str().unwrap()]);
    assert!(!matched, "{printed}");
    assert!(
        printed.contains("differs")
            && printed.contains("the first that differs is #1")
            && printed.contains("log.log"),
        "{printed}"
    );
    let (matched, printed) = replay(&server.data_dir, &["no-such-recording"]);
    assert!(!matched && printed.contains("no recording"), "{printed}");
}

#[tokio::test]
async fn recordings_past_what_may_wait_for_a_locked_database_are_dropped_and_said() {
    let server = Server::start();
    let grant = format!("record = \"all\"\n{ECHO_GRANT}[limits]\nrecordings_kept = 1000\n");
    drop_in(&server, "echo", &guest("echo"), &grant);
    loaded(&server, "echo").await;
    // Another writer holds the database (as a slow one would, within the server's 5 s wait
    // for it) while 340 calls are recorded.
    let database = rusqlite::Connection::open(server.data_dir.join("service.sqlite")).unwrap();
    let count = || -> i64 {
        database
            .query_row(
                "SELECT count(*) FROM adapter_recordings WHERE adapter = 'echo'",
                [],
                |r| r.get(0),
            )
            .unwrap()
    };
    // Those of the calls made while it loaded, once written.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let before = count();
    database.execute_batch("BEGIN IMMEDIATE").unwrap();
    let client = reqwest::Client::new();
    for _ in 0..340 {
        let hello = client
            .get(server.url("/api/adapters/echo/hello"))
            .send()
            .await
            .unwrap();
        assert_eq!(hello.status(), StatusCode::OK, "the live calls never wait");
    }
    database.execute_batch("COMMIT").unwrap();
    // 256 wait, and the first batch (those that came before the writer woke, waiting for the
    // database): the rest were dropped.
    eventually(30, async || (count() - before >= 256).then_some(())).await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let stored = count() - before;
    assert!((256..=256 + 64).contains(&stored), "{stored} stored");
    let log = std::fs::read_to_string(server.data_dir.join("server.log")).unwrap();
    assert!(
        log.contains("a recording was dropped: 256 wait to be written already"),
        "{log}"
    );
}
