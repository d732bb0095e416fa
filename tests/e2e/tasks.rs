//! `/api/tasks`: listing and the loopback-only cancel/delete. Tasks are created through the
//! library's task API on the server's own database file, as adapters and the scheduler do.

use reqwest::StatusCode;
use serde_json::{Value, json};
use service_runtime::tasks::TaskStatus;

use crate::support::{Server, assert_error};

fn titles(body: &Value) -> Vec<&str> {
    body["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["title"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn lists_newest_first_and_filters_by_status() {
    let server = Server::start();
    server.create_task("first", "default", TaskStatus::Completed);
    server.create_task("second", "default", TaskStatus::Running);
    server.create_task("third", "default", TaskStatus::Running);

    let (status, all) = server.get("/api/tasks").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(titles(&all), ["third", "second", "first"]);
    let task = &all["tasks"][0];
    for field in [
        "task_id",
        "title",
        "description",
        "agent_profile_name",
        "trace_id",
        "status",
        "created_at",
        "updated_at",
    ] {
        assert!(task.get(field).is_some(), "missing {field}");
    }

    let (_, running) = server.get("/api/tasks?status=running").await;
    assert_eq!(titles(&running), ["third", "second"]);
    // Every status is counted, whatever the filter (the dashboard's filter tabs show them).
    let counts = json!({"pending": 0, "running": 2, "completed": 1, "error": 0, "cancelled": 0});
    assert_eq!((&all["counts"], &running["counts"]), (&counts, &counts));
    assert_eq!((&all["total"], &running["total"]), (&json!(3), &json!(2)));
    let (_, cancelled) = server.get("/api/tasks?status=cancelled").await;
    assert_eq!(titles(&cancelled), Vec::<&str>::new());

    for bad in ["Running", "done", ""] {
        assert_error(
            &server.get(&format!("/api/tasks?status={bad}")).await,
            StatusCode::BAD_REQUEST,
            "unknown task status",
        );
    }
}

#[tokio::test]
async fn delete_cancels_active_tasks_and_deletes_finished_ones() {
    let server = Server::start();
    let running = server.create_task("busy", "default", TaskStatus::Running);
    let done = server.create_task("done", "default", TaskStatus::Completed);

    let (status, body) = server.delete(&format!("/api/tasks/{running}")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        body,
        serde_json::json!({"task_id": running, "result": "cancelled"})
    );
    let (_, cancelled) = server.get("/api/tasks?status=cancelled").await;
    assert_eq!(titles(&cancelled), ["busy"]);

    let (_, body) = server.delete(&format!("/api/tasks/{done}")).await;
    assert_eq!(body["result"], "deleted");
    let (_, all) = server.get("/api/tasks").await;
    assert_eq!(titles(&all), ["busy"]);

    assert_error(
        &server.delete(&format!("/api/tasks/{done}")).await,
        StatusCode::NOT_FOUND,
        "no task",
    );
}
