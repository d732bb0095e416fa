//! Retention through the binary: records aged past `[retention]` are deleted when the server
//! starts, newer ones stay, `/metrics` counts what went, and the SQLite file gives the space
//! back. (Two replicas on PostgreSQL pruning once: `replicas.rs`.)

use reqwest::StatusCode;
use serde_json::{Value, json};
use service_runtime::tasks::TaskStatus;

use crate::observability::{samples, scrape};
use crate::support::{Server, eventually};

const LONG_AGO: &str = "2020-01-01T00:00:00.000Z";

/// `service_runtime_retention_deleted_total` of `kind` on this server.
pub async fn deleted(server: &Server, kind: &str) -> u64 {
    let (_, _, text) = scrape(server, None).await;
    let series = format!("service_runtime_retention_deleted_total{{kind=\"{kind}\"}}");
    samples(&text)[&series] as u64
}

async fn chat(server: &Server, prompt: &str) -> Value {
    let (status, answer) = server.post("/api/chat", json!({"prompt": prompt})).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer
}

fn pages(server: &Server, pragma: &str) -> i64 {
    server
        .db()
        .blocking(move |conn| conn.query_one(&format!("PRAGMA {pragma}"), &[], |r| r.get(0)))
        .unwrap()
}

#[tokio::test]
async fn records_past_their_age_go_at_start_and_the_file_gives_the_space_back() {
    let mut server = Server::start_with_config("[retention]\nconversations_days = 7\n", &[]);
    let bulky = "a long question ".repeat(1_500);
    let mut old = Vec::new();
    for n in 0..30 {
        old.push(chat(&server, &format!("{bulky} {n}")).await);
    }
    let kept = chat(&server, "a question asked today").await;
    let old_task = server.create_task("finished long ago", "default", TaskStatus::Completed);
    let running_task = server.create_task("still running", "default", TaskStatus::Running);
    assert!(metrics_zero(&server).await);

    server.stop();
    let ids = |key: &str| {
        old.iter()
            .map(|answer| format!("'{}'", answer[key].as_str().unwrap()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (traces, conversations) = (ids("trace_id"), ids("conversation_id"));
    server
        .db()
        .blocking(move |conn| {
            conn.execute(
                &format!("UPDATE traces SET created_at = '{LONG_AGO}' WHERE id IN ({traces})"),
                &[],
            )?;
            conn.execute(
                &format!(
                    "UPDATE conversations SET updated_at = '{LONG_AGO}' WHERE id IN ({conversations})"
                ),
                &[],
            )?;
            conn.execute(
                &format!("UPDATE tasks SET created_at = '{LONG_AGO}', updated_at = '{LONG_AGO}'"),
                &[],
            )
        })
        .unwrap();
    let size_before = pages(&server, "page_count");
    assert_eq!(
        pages(&server, "auto_vacuum"),
        2,
        "a new file vacuums incrementally"
    );

    let server = server.restart();
    eventually(30, async || {
        (deleted(&server, "traces").await == 30).then_some(())
    })
    .await;
    eventually(30, async || {
        (deleted(&server, "tasks").await == 1).then_some(())
    })
    .await;
    assert_eq!(deleted(&server, "conversations").await, 30);
    assert_eq!(deleted(&server, "approvals").await, 0);
    for answer in &old {
        let trace = format!("/api/traces/{}", answer["trace_id"].as_str().unwrap());
        assert_eq!(server.get(&trace).await.0, StatusCode::NOT_FOUND);
        let conversation = format!(
            "/api/conversations/{}",
            answer["conversation_id"].as_str().unwrap()
        );
        assert_eq!(server.get(&conversation).await.0, StatusCode::NOT_FOUND);
    }
    let trace = format!("/api/traces/{}", kept["trace_id"].as_str().unwrap());
    assert_eq!(server.get(&trace).await.0, StatusCode::OK);
    let conversation = format!(
        "/api/conversations/{}",
        kept["conversation_id"].as_str().unwrap()
    );
    assert_eq!(server.get(&conversation).await.0, StatusCode::OK);
    let (_, tasks) = server.get("/api/tasks").await;
    let ids: Vec<&str> = tasks["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["task_id"].as_str().unwrap())
        .collect();
    assert!(!ids.contains(&old_task.as_str()), "{tasks}");
    assert!(
        ids.contains(&running_task.as_str()),
        "a task still running is kept whatever its age: {tasks}"
    );

    // The pages the old records held went back to the file system.
    let size_after = eventually(30, async || {
        (pages(&server, "freelist_count") == 0).then(|| pages(&server, "page_count"))
    })
    .await;
    assert!(
        size_after * 2 < size_before,
        "{size_before} pages before, {size_after} after"
    );
}

async fn metrics_zero(server: &Server) -> bool {
    for kind in ["traces", "tasks", "conversations", "approvals"] {
        if deleted(server, kind).await != 0 {
            return false;
        }
    }
    true
}

#[tokio::test]
async fn a_setting_out_of_range_stops_the_start_with_its_name() {
    let stderr = crate::support::refused_start("[retention]\ntraces_days = 40000\n").stderr;
    assert!(
        stderr.contains("[retention] traces_days must be between 0"),
        "{stderr}"
    );
}
