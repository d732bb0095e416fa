//! `backup` and `restore` through the binary: an archive written while the server answers chat
//! turns, restored into a new data directory and served; what a restore refuses, leaving the
//! target as it was.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::fakes::llm::{self, Reply};
use crate::guests::guest;
use crate::support::{Server, cli, eventually, openai_env};
use crate::teamchat::{SIGNING_SECRET, callback, mention_at, platform, signed};
use crate::wasm::{ECHO_GRANT, drop_in, loaded};

fn run(data_dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = cli(data_dir, args);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The names a directory holds, sorted (none when it does not exist).
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[tokio::test]
async fn a_backup_taken_while_chat_turns_are_written_restores_every_answered_one() {
    let server = Server::start();
    drop_in(&server, "echo", &guest("echo"), ECHO_GRANT);
    loaded(&server, "echo").await;
    std::fs::write(server.data_dir.join(".env"), "ECHO_TOKEN=kept-out\n").unwrap();

    // Chat turns go on while the backup is written; each answered one is noted.
    let answered = Arc::new(Mutex::new(Vec::<String>::new()));
    let stop = tokio_util::sync::CancellationToken::new();
    let writer = tokio::spawn({
        let (client, url) = (reqwest::Client::new(), server.url("/api/chat"));
        let (answered, stop) = (Arc::clone(&answered), stop.clone());
        async move {
            let mut n = 0;
            while !stop.is_cancelled() {
                n += 1;
                let reply = client
                    .post(&url)
                    .json(&json!({"prompt": format!("turn {n}")}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(reply.status(), StatusCode::OK);
                let body: serde_json::Value = reply.json().await.unwrap();
                let id = body["conversation_id"].as_str().unwrap().to_owned();
                answered.lock().unwrap().push(id);
            }
        }
    });
    crate::support::eventually(20, async || {
        (answered.lock().unwrap().len() >= 5).then_some(())
    })
    .await;
    let before = answered.lock().unwrap().clone();
    // Beside the server's folder, which goes with it.
    let scratch = tempfile::tempdir().unwrap();
    let archive = scratch.path().join("backup.tar.gz");
    let (data_dir, path) = (
        server.data_dir.clone(),
        archive.to_str().unwrap().to_owned(),
    );
    let (ok, stdout, stderr) =
        tokio::task::spawn_blocking(move || run(&data_dir, &["backup", &path]))
            .await
            .unwrap();
    stop.cancel();
    writer.await.unwrap();
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("adapters") && stdout.contains("--with-secrets"),
        "{stdout}"
    );
    assert!(
        answered.lock().unwrap().len() > before.len(),
        "turns were answered while the backup was written"
    );

    let restored_dir = scratch.path().join("restored");
    let (ok, stdout, stderr) = run(&restored_dir, &["restore", archive.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("it held no secrets"), "{stdout}");
    assert!(
        !restored_dir.join(".env").exists(),
        "secrets only when asked for"
    );
    assert_eq!(
        names(restored_dir.parent().unwrap())
            .iter()
            .filter(|n| n.starts_with('.'))
            .count(),
        0,
        "nothing left beside it"
    );
    drop(server);

    let restored = Server::start_in(&restored_dir, &[]);
    let (_, listed) = restored.get("/api/conversations?limit=500").await;
    let kept: Vec<&str> = listed["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    for id in &before {
        assert!(
            kept.contains(&id.as_str()),
            "{id} answered before the backup"
        );
    }
    // Each answered conversation is whole: its question and its answer, once. (A turn still
    // running when the snapshot was taken left its conversation without messages: its
    // question and answer are written together when it ends.)
    for id in &kept {
        let (_, conversation) = restored.get(&format!("/api/conversations/{id}")).await;
        let roles: Vec<&str> = conversation["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        if roles.is_empty() {
            assert!(!before.iter().any(|b| b == id), "{conversation}");
        } else {
            assert_eq!(roles, ["user", "assistant"], "{conversation}");
        }
    }
    // The component came back with its grant.
    loaded(&restored, "echo").await;
    let (status, said) = restored
        .send_text(reqwest::Method::GET, "/api/adapters/echo/hello", "")
        .await;
    assert_eq!(
        (status, said.as_str()),
        (StatusCode::OK, "hello from echo v1")
    );
}

#[tokio::test]
async fn mentions_acked_before_a_backup_are_answered_once_by_the_restored_server() {
    const MENTIONS: usize = 6;
    // The first server's model holds every answer past the end of the test: each mention is
    // acked and its job running when the snapshot is taken.
    let stuck = llm::openai(vec![
        Reply::Slow(Duration::from_secs(600), "too late");
        MENTIONS
    ])
    .await;
    let api = platform(json!({"ok": true})).await;
    let mut env = api.env(SIGNING_SECRET);
    env.extend(openai_env(&stuck.url));
    let mut server = Server::start_with_owned(&env);
    let mut channels = Vec::new();
    for i in 0..MENTIONS {
        let channel = format!("C{i:03}");
        let event = callback(
            &format!("EvBackup{i}"),
            mention_at(&channel, "1700000100.000100", "<@UBOT> hi", None),
        );
        let (status, body) = signed(&server, "events", &event).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        channels.push(channel);
    }
    eventually(20, async || {
        (stuck.requests().len() == MENTIONS).then_some(())
    })
    .await;
    let scratch = tempfile::tempdir().unwrap();
    let archive = scratch.path().join("backup.tar.gz");
    let (ok, _, stderr) = run(&server.data_dir, &["backup", archive.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    server.stop();
    assert!(
        api.posted().is_empty(),
        "nothing was answered before the backup"
    );

    let restored_dir = scratch.path().join("restored");
    let (ok, _, stderr) = run(&restored_dir, &["restore", archive.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    let fast = llm::openai(vec![Reply::Text("answered"); MENTIONS * 2]).await;
    let mut env = api.env(SIGNING_SECRET);
    env.extend(openai_env(&fast.url));
    let restored = Server::start_in(&restored_dir, &env);
    eventually(60, async || (api.posted().len() >= MENTIONS).then_some(())).await;
    // Any second answer would come from a job still waiting or running.
    eventually(30, async || {
        let (_, tasks) = restored.get("/api/tasks?status=running").await;
        (tasks["tasks"].as_array()?.is_empty()).then_some(())
    })
    .await;
    let mut answered: Vec<String> = api
        .posted()
        .iter()
        .map(|(_, body)| body["channel"].as_str().unwrap_or_default().to_owned())
        .collect();
    answered.sort();
    assert_eq!(answered, channels, "each acked mention answered once");
}

#[tokio::test]
async fn a_restore_refuses_what_it_cannot_bring_back_and_writes_nothing() {
    let server = Server::start();
    std::fs::write(server.data_dir.join(".env"), "SOME_KEY=s3cret\n").unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().to_owned();
    let archive = root.join("with-secrets.tar.gz");
    let (ok, _, stderr) = run(
        &server.data_dir,
        &["backup", archive.to_str().unwrap(), "--with-secrets"],
    );
    assert!(ok, "{stderr}");

    // A directory in use is not replaced unless asked.
    let occupied = names(&server.data_dir);
    let (ok, _, stderr) = run(&server.data_dir, &["restore", archive.to_str().unwrap()]);
    assert!(
        !ok && stderr.contains("is not empty") && stderr.contains("--force"),
        "{stderr}"
    );
    assert_eq!(names(&server.data_dir), occupied);
    drop(server);

    // Not an archive, a damaged one, one of a newer schema: refused, nothing created.
    let target = root.join("target");
    let junk = root.join("junk.tar.gz");
    std::fs::write(&junk, b"not a backup at all").unwrap();
    let truncated = root.join("truncated.tar.gz");
    let whole = std::fs::read(&archive).unwrap();
    std::fs::write(&truncated, &whole[..whole.len() / 2]).unwrap();
    let newer = root.join("newer.tar.gz");
    write_archive(
        &newer,
        &json!({"format": 1, "service_version": "99.0.0", "schema_version": 999,
                "backend": "sqlite", "created_at": "2099-01-01T00:00:00Z",
                "with_secrets": false, "files": []}),
    );
    for (file, said) in [
        (&junk, "is not a backup archive, or is damaged"),
        (&truncated, "is not a backup archive, or is damaged"),
        (&newer, "schema version 999, newer than the"),
    ] {
        let (ok, _, stderr) = run(&target, &["restore", file.to_str().unwrap()]);
        assert!(!ok && stderr.contains(said), "{}: {stderr}", file.display());
        assert!(names(&target).is_empty(), "{}", file.display());
        assert_eq!(
            names(&root).iter().filter(|n| n.starts_with('.')).count(),
            0,
            "no work left behind"
        );
    }

    // With --force it replaces; asked for, the secrets come back.
    std::fs::create_dir_all(&target).unwrap();
    std::fs::write(target.join("config.toml"), "[server]\nport = 1\n").unwrap();
    let (ok, _, stderr) = run(&target, &["restore", archive.to_str().unwrap(), "--force"]);
    assert!(ok, "{stderr}");
    assert_eq!(
        std::fs::read_to_string(target.join(".env")).unwrap(),
        "SOME_KEY=s3cret\n"
    );
    assert!(
        !target.join("config.toml").exists(),
        "the archive had none, so the directory's is not the restored one's"
    );
}

/// A gzipped tar holding only `manifest`.
fn write_archive(path: &Path, manifest: &serde_json::Value) {
    let json = serde_json::to_vec(manifest).unwrap();
    let file = std::fs::File::create(path).unwrap();
    let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
        file,
        flate2::Compression::default(),
    ));
    let mut header = tar::Header::new_gnu();
    header.set_size(json.len() as u64);
    header.set_mode(0o644);
    tar.append_data(&mut header, "manifest.json", json.as_slice())
        .unwrap();
    tar.into_inner().unwrap().finish().unwrap().flush().unwrap();
}

/// With PostgreSQL the archive holds `pg_dump`'s snapshot; a restore loads it into an empty
/// database in one transaction, and refuses one that holds tables.
#[tokio::test]
async fn a_postgres_database_is_backed_up_and_restored_into_an_empty_one() {
    let Some(postgres) = crate::support::postgres::postgres_server() else {
        return;
    };
    let source = postgres.fresh_database();
    let server = Server::start_with_owned(&[("SERVICE_DATABASE_URL", source.clone())]);
    let mut asked = Vec::new();
    for n in 0..3 {
        let (status, body) = server
            .send(
                reqwest::Method::POST,
                "/api/chat",
                Some(json!({"prompt": format!("kept {n}")})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        asked.push(body["conversation_id"].as_str().unwrap().to_owned());
    }
    let scratch = tempfile::tempdir().unwrap();
    let with_url = |url: &str, data_dir: &Path, args: &[&str]| {
        let out = crate::support::command(scratch.path())
            .env("SERVICE_DATABASE_URL", url)
            .arg("--data-dir")
            .arg(data_dir)
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let archive = scratch.path().join("pg.tar.gz");
    let (ok, stdout, stderr) = with_url(
        &source,
        &server.data_dir,
        &["backup", archive.to_str().unwrap()],
    );
    assert!(ok, "{stderr}");
    assert!(stdout.contains("the postgres database"), "{stdout}");
    assert!(!stdout.contains(&source) && !stderr.contains(&source));
    drop(server);

    let target = postgres.fresh_database();
    let restored_dir = scratch.path().join("restored");
    let (ok, stdout, stderr) = with_url(
        &target,
        &restored_dir,
        &["restore", archive.to_str().unwrap()],
    );
    assert!(ok, "{stderr}");
    assert!(stdout.contains("SERVICE_DATABASE_URL"), "{stdout}");
    // Into a database that holds tables: refused, nothing changes.
    let (ok, _, stderr) = with_url(
        &target,
        &scratch.path().join("again"),
        &["restore", archive.to_str().unwrap()],
    );
    assert!(!ok && stderr.contains("holds tables already"), "{stderr}");
    assert!(!scratch.path().join("again").exists());

    let restored = Server::start_in(&restored_dir, &[("SERVICE_DATABASE_URL", target)]);
    let (_, listed) = restored.get("/api/conversations").await;
    let mut kept: Vec<&str> = listed["conversations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    kept.sort();
    asked.sort();
    assert_eq!(kept, asked);
}
