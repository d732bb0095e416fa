//! Section 4.1's routes not covered with their resource (2.x) or their adapter, with section
//! 5's loopback rule and 6's chat stream; 9's schema version.

use std::os::unix::fs::PermissionsExt;

use reqwest::StatusCode;
use serde_json::{Value, json};
use service_runtime::tasks::TaskStatus;

use crate::agents::imports_as;
use crate::chat::{assert_note_run, note_script};
use crate::fakes::llm;
use crate::integrations::{OPENAI_KEY, SIGNING_SECRET, entry};
use crate::support::{Server, assert_error, openai_env, stream_frames};

fn titles(body: &Value) -> Vec<&str> {
    body["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["title"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn spec_4_1_tasks_newest_first_with_the_fields_of_2_3_or_of_one_status_and_7_400_for_others()
{
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
async fn spec_4_1_task_delete_cancels_an_active_task_and_deletes_a_finished_one() {
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

#[tokio::test]
async fn spec_4_1_integrations_are_listed_and_never_echo_secrets() {
    let server = Server::start_with(&[
        ("OPENAI_API_KEY", OPENAI_KEY),
        ("SERVICE_TEAMCHAT_SIGNING_SECRET", SIGNING_SECRET),
    ]);
    let response = reqwest::get(server.url("/api/integrations")).await.unwrap();
    let text = response.text().await.unwrap();
    for fragment in ["zq9x", "sk-test", &SIGNING_SECRET[..8]] {
        assert!(!text.contains(fragment), "{fragment} leaked: {text}");
    }
    let body: Value = serde_json::from_str(&text).unwrap();
    let ids: Vec<&str> = body["integrations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    for id in [
        "openai",
        "anthropic",
        "ollama",
        "teamchat",
        "guildchat",
        "webhook",
        "github",
        "web_search",
    ] {
        assert!(ids.contains(&id), "missing {id}");
    }
    let openai = entry(&body, "openai");
    assert_eq!(
        (openai["configured"].as_bool(), openai["verified"].as_null()),
        (Some(true), Some(()))
    );
    assert_eq!(
        openai["env_vars"],
        json!(["OPENAI_API_KEY", "SERVICE_OPENAI_BASE_URL"])
    );
    assert_eq!(entry(&body, "anthropic")["configured"], false);
    assert_eq!(
        entry(&body, "teamchat")["configured"],
        false,
        "the bot token is still missing"
    );
    let log = std::fs::read_to_string(server.data_dir.join("server.log")).unwrap();
    assert!(!log.contains("zq9x") && !log.contains(&SIGNING_SECRET[..8]));
}

#[tokio::test]
async fn spec_4_1_the_key_write_stores_a_private_env_file_and_never_echoes_the_value() {
    let server = Server::start();
    let path = "/api/integrations/anthropic/keys";
    let (status, body) = server
        .post(
            path,
            json!({"env_var": "ANTHROPIC_API_KEY", "value": "sk-ant-zq9x-1"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        !body.to_string().contains("zq9x"),
        "the value is never echoed: {body}"
    );
    assert_eq!(body["configured"], true);

    let dotenv = server.data_dir.join(".env");
    let mode = std::fs::metadata(&dotenv).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(
        std::fs::read_to_string(&dotenv)
            .unwrap()
            .contains("ANTHROPIC_API_KEY=\"sk-ant-zq9x-1\"")
    );

    let (_, list) = server.get("/api/integrations").await;
    assert_eq!(entry(&list, "anthropic")["configured"], true);
    let server = server.restart();
    let (_, list) = server.get("/api/integrations").await;
    assert_eq!(
        entry(&list, "anthropic")["configured"],
        true,
        ".env is loaded at start"
    );
}

#[tokio::test]
async fn spec_6_the_chat_stream_sends_tool_call_frames_tokens_and_done() {
    let fake = llm::openai(note_script()).await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    let frames = stream_frames(&server, json!({"prompt": "remember oat milk"})).await;
    let trace = assert_note_run(&server, &frames).await;
    assert_eq!(
        (
            trace["input_tokens"].as_i64(),
            trace["output_tokens"].as_i64()
        ),
        (Some(22), Some(10))
    );

    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].headers["authorization"], "Bearer sk-test-key");
    let first = &requests[0].body;
    assert_eq!(first["stream"], true);
    assert_eq!(first["model"], "gpt-4o-mini");
    assert_eq!(
        first["messages"][0]["role"], "system",
        "the default profile's persona"
    );
    assert_eq!(
        first["messages"][1],
        json!({"role": "user", "content": "remember oat milk"})
    );
    let offered: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        offered.contains(&"create_note") && !offered.contains(&"shell_exec"),
        "{offered:?}"
    );
    let second = &requests[1].body["messages"];
    assert_eq!(
        second[2]["tool_calls"][0]["function"]["name"],
        "create_note"
    );
    assert_eq!(second[3]["role"], "tool");
    assert_eq!(second[3]["tool_call_id"], "call_1");
}

#[tokio::test]
async fn spec_4_1_export_is_a_bundle_that_imports_back_to_an_equal_profile() {
    let server = Server::start();
    let created = server
        .post(
            "/api/agents",
            json!({"name": "Quill", "system_prompt": "You edit prose.", "description": "editor",
                   "color": "#123456", "default_model": "gpt-4o-mini", "tools": []}),
        )
        .await
        .1;
    let response = reqwest::get(server.url("/api/agents/Quill/export"))
        .await
        .unwrap();
    assert_eq!(
        response.headers()["content-disposition"],
        "attachment; filename=\"quill.agent.json\""
    );
    let (status, bundle) = crate::support::json_of(response).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(bundle["slug"], "quill");
    assert_eq!(bundle["system_prompt"], "You edit prose.");
    assert_eq!(bundle["recommended_tools"], json!([]));
    assert_eq!(bundle["recommended_model"], "gpt-4o-mini");
    assert_eq!(
        (bundle["role"].as_str(), bundle["description"].as_str()),
        (Some("editor"), Some("editor"))
    );
    assert_error(
        &server.get("/api/agents/Nobody/export").await,
        StatusCode::NOT_FOUND,
        "no agent",
    );

    // Another installation imports the shared file.
    let other = Server::start();
    imports_as(&other, &bundle, &created).await;
    assert_error(
        &other.post("/api/store/import", bundle).await,
        StatusCode::CONFLICT,
        "already exists",
    );
    assert_error(
        &other
            .post("/api/store/import", json!({"name": "NoPersona"}))
            .await,
        StatusCode::BAD_REQUEST,
        "system_prompt is required",
    );
}

/// The book, with its lines joined (a sentence may wrap anywhere).
fn book() -> String {
    crate::support::book()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// The numbers that follow each `marker` in `text`.
fn numbers_after(text: &str, marker: &str) -> Vec<u64> {
    text.match_indices(marker)
        .filter_map(|(at, _)| {
            let digits: String = text[at + marker.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            digits.parse().ok()
        })
        .collect()
}

/// Spec 9 states schema version 13 with every change additive; the schema has grown additively
/// since, and every place the book states the version says the one the binary reports, which
/// is also the last step of its migration table.
#[tokio::test]
async fn spec_9_the_schema_version_the_book_states_is_the_one_the_binary_reports() {
    let server = Server::start();
    let (_, health) = server.get("/api/health").await;
    let version = health["schema_version"].as_u64().unwrap();
    assert!(version >= 13, "{health}");
    let book = book();
    let stated: Vec<u64> = [
        "schema version ",
        "\"schema_version\":",
        "The schema is version ",
    ]
    .iter()
    .flat_map(|marker| numbers_after(&book, marker))
    .collect();
    assert_eq!(stated.len(), 3, "{stated:?}");
    assert!(
        stated.iter().all(|&v| v == version),
        "{stated:?} against {version}"
    );
    // The table runs from its header to the paragraph after it.
    let table = book
        .split("| Step | Release | Adds |")
        .nth(1)
        .and_then(|rest| rest.split("Transactions that read").next())
        .expect("the migration table");
    let last_step = numbers_after(table, "| ").into_iter().max();
    assert_eq!(last_step, Some(version), "{table}");
}

/// Spec 2.5: the book names the specified statuses and no other.
#[tokio::test]
async fn spec_2_5_the_book_states_the_three_statuses_the_binary_answers() {
    let book = book();
    assert!(
        book.contains("is one of the specification's three, `running`, `stopped`, `error`"),
        "the Adapters section states the statuses"
    );
    for retired in ["`unconfigured`", "`loading` while"] {
        assert!(!book.contains(retired), "{retired} is no status");
    }
    let server = Server::start();
    let (_, adapters) = server.get("/api/adapters").await;
    for entry in adapters["adapters"].as_array().unwrap() {
        let status = entry["status"].as_str().unwrap();
        assert!(["running", "stopped", "error"].contains(&status), "{entry}");
    }
}

/// Spec 9.2: releases follow Semantic Versioning. The changelog's newest entry is the version
/// the binary reports, with the schema version it runs.
#[tokio::test]
async fn spec_9_the_changelog_names_this_release_and_its_schema() {
    let server = Server::start();
    let (_, health) = server.get("/api/health").await;
    let changelog = include_str!("../../../CHANGELOG.md");
    let newest = changelog.split("\n## ").nth(1).expect("a release entry");
    let version = newest.lines().next().unwrap().trim();
    assert_eq!(health["version"], version);
    assert_eq!(
        numbers_after(newest, "Schema: ").first().copied(),
        health["schema_version"].as_u64(),
        "{newest}"
    );
}
