//! Section 2: the resources and their fields (2.1 agent profile, 2.2 bundles, 2.3 task, 2.4
//! schedule, 2.9 trace; 2.5 is in `registry`).

use reqwest::StatusCode;
use serde_json::{Value, json};
use service_runtime::tasks::TaskStatus;

use crate::fakes::llm::{self, Reply};
use crate::support::{Server, assert_error, openai_env};

const STATUSES: [&str; 5] = ["pending", "running", "completed", "error", "cancelled"];

#[tokio::test]
async fn spec_2_1_a_profile_named_default_is_bootstrapped() {
    let server = Server::start();
    let (status, profile) = server.get("/api/agents/default").await;
    assert_eq!(status, StatusCode::OK, "{profile}");
    assert_eq!(profile["name"], "default");
    assert!(
        profile["system_prompt"]
            .as_str()
            .is_some_and(|p| !p.is_empty())
    );
}

#[tokio::test]
async fn spec_2_1_name_and_system_prompt_are_the_only_required_fields() {
    let server = Server::start();
    let (status, created) = server
        .post(
            "/api/agents",
            json!({"name": "Scout", "system_prompt": "You scout."}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    // "Available in chat at once" (4.1).
    let (status, _) = server
        .post("/api/chat", json!({"agent": "Scout", "prompt": "hello"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    for missing in [
        json!({"name": "NoPrompt"}),
        json!({"system_prompt": "Nameless"}),
    ] {
        let (status, body) = server.post("/api/agents", missing.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{missing}: {body}");
        assert!(body["error"].is_string(), "{body}");
    }
    assert_eq!(
        server.get("/api/agents/NoPrompt").await.0,
        StatusCode::NOT_FOUND,
        "nothing half-written"
    );
}

#[tokio::test]
async fn spec_2_1_every_field_round_trips() {
    let server = Server::start();
    let profile = json!({
        "name": "Ledger",
        "system_prompt": "You keep the books.",
        "description": "bookkeeper",
        "color": "#12ab34",
        "default_model": "gpt-4o",
        "tools": ["search_notes", "create_note"],
    });
    let (status, created) = server.post("/api/agents", profile.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let (_, shown) = server.get("/api/agents/Ledger").await;
    for field in [
        "name",
        "system_prompt",
        "description",
        "color",
        "default_model",
        "tools",
    ] {
        assert_eq!(shown[field], profile[field], "{field}: {shown}");
    }
}

#[tokio::test]
async fn spec_2_1_the_name_is_the_unique_key_matched_exactly() {
    let server = Server::start();
    let body = |name: &str| json!({"name": name, "system_prompt": "p"});
    assert_eq!(
        server.post("/api/agents", body("Echo")).await.0,
        StatusCode::CREATED
    );
    assert_eq!(
        server.post("/api/agents", body("Echo")).await.0,
        StatusCode::CONFLICT
    );
    // Case matters: another profile, and no match for a differently cased name.
    assert_eq!(
        server.post("/api/agents", body("echo")).await.0,
        StatusCode::CREATED
    );
    assert_eq!(
        server.get("/api/agents/ECHO").await.0,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn spec_2_2_the_featured_bundles_with_their_roles_tools_and_adapters() {
    let server = Server::start();
    let (_, store) = server.get("/api/store").await;
    let featured: Vec<Value> = store["bundles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            json!([
                b["name"],
                b["role"],
                b["recommended_tools"],
                b["paired_adapters"],
                b["installed"]
            ])
        })
        .collect();
    assert_eq!(
        featured,
        [
            json!([
                "Atlas",
                "travel planner",
                [
                    "web_search",
                    "list_calendar_events_today",
                    "create_calendar_event",
                    "search_notes",
                    "create_note"
                ],
                ["calendar", "voice"],
                false
            ]),
            json!([
                "Vitriol",
                "wellness researcher (education only, no medical advice)",
                ["web_search", "search_notes", "create_note"],
                ["web"],
                false
            ]),
            json!([
                "Sol",
                "reflective companion and journaling partner (no clinical claims)",
                ["search_notes", "create_note", "append_note"],
                [],
                false
            ]),
        ]
    );
    for bundle in store["bundles"].as_array().unwrap() {
        for field in ["slug", "description", "color", "recommended_model"] {
            assert!(bundle.get(field).is_some(), "{field}: {bundle}");
        }
        assert!(
            bundle.get("system_prompt").is_none(),
            "the list omits the persona"
        );
    }
}

#[tokio::test]
async fn spec_2_3_a_database_constraint_enforces_the_five_statuses() {
    let server = Server::start();
    let id = server.create_task("t", "default", TaskStatus::Pending);
    let db = server.db();
    for status in STATUSES {
        let (id, status) = (id.clone(), status.to_owned());
        db.blocking(move |conn| {
            conn.execute(
                "UPDATE tasks SET status = ?1 WHERE task_id = ?2",
                service_runtime::params![status, id],
            )
        })
        .unwrap_or_else(|e| panic!("{e}"));
    }
    let refused = db.blocking(move |conn| {
        conn.execute(
            "UPDATE tasks SET status = 'paused' WHERE task_id = ?1",
            service_runtime::params![id],
        )
    });
    assert!(refused.is_err(), "a sixth status was stored");
}

#[tokio::test]
async fn spec_2_4_a_schedule_has_the_fields_of_the_table() {
    let server = Server::start();
    let (status, created) = server
        .post(
            "/api/schedules",
            json!({"name": "digest", "cron": "every 5m", "agent": "default", "prompt": "Digest."}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let (_, listed) = server.get("/api/schedules").await;
    let schedule = &listed["schedules"][0];
    assert_eq!(
        (
            &schedule["name"],
            &schedule["cron_expression"],
            &schedule["agent_profile_name"],
            &schedule["prompt"],
            &schedule["enabled"],
            &schedule["catch_up_policy"],
            &schedule["last_run_at"],
            &schedule["last_trace_id"],
        ),
        (
            &json!("digest"),
            &json!("*/5 * * * *"),
            &json!("default"),
            &json!("Digest."),
            &json!(true),
            &json!("coalesce"),
            &Value::Null,
            &Value::Null,
        ),
        "{schedule}"
    );
    assert!(schedule["next_run_at"].is_string(), "{schedule}");
}

#[tokio::test]
async fn spec_2_9_every_run_records_a_trace_and_a_failed_one_an_error_status() {
    let fake = llm::openai(vec![
        Reply::Text("Fine."),
        Reply::Status(400, json!({"error": {"message": "bad request"}})),
    ])
    .await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    let (status, ok) = server.post("/api/chat", json!({"prompt": "hi"})).await;
    assert_eq!(status, StatusCode::OK, "{ok}");
    let (_, trace) = server
        .get(&format!("/api/traces/{}", ok["trace_id"].as_str().unwrap()))
        .await;
    assert_eq!(trace["status"], "ok", "{trace}");

    let (status, failed) = server.post("/api/chat", json!({"prompt": "again"})).await;
    assert!(
        status.is_server_error() || status.is_client_error(),
        "{failed}"
    );
    let (_, traces) = server.get("/api/traces").await;
    let statuses: Vec<&str> = traces["traces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["error", "ok"], "newest first: {traces}");
}

#[tokio::test]
async fn spec_4_1_one_bundle_in_full_with_its_persona_by_slug() {
    let server = Server::start();
    let (status, atlas) = server.get("/api/store/ATLAS").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(atlas["name"], "Atlas");
    assert!(
        atlas["system_prompt"]
            .as_str()
            .unwrap()
            .starts_with("You are Atlas")
    );
    assert_eq!(atlas["paired_adapters"], json!(["calendar", "voice"]));
    assert_error(
        &server.get("/api/store/zeus").await,
        StatusCode::NOT_FOUND,
        "no bundle",
    );
}

#[tokio::test]
async fn spec_2_2_rule_1_install_sets_the_recommended_tools_and_7_a_second_install_conflicts() {
    let server = Server::start();
    let (status, profile) = server.post("/api/store/vitriol/install", json!(null)).await;
    assert_eq!(status, StatusCode::CREATED, "{profile}");
    assert_eq!(profile["name"], "Vitriol");
    assert_eq!(
        profile["tools"],
        json!(["web_search", "search_notes", "create_note"])
    );
    assert_eq!(profile["color"], "#10b981");

    let (_, list) = server.get("/api/store").await;
    let installed: Vec<bool> = list["bundles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["installed"].as_bool().unwrap())
        .collect();
    assert_eq!(installed, [false, true, false]);

    assert_error(
        &server.post("/api/store/vitriol/install", json!(null)).await,
        StatusCode::CONFLICT,
        "already exists",
    );
    let (_, again) = server.get("/api/agents/Vitriol").await;
    assert_eq!(again, profile, "a conflicting install changes nothing");
    assert_error(
        &server.post("/api/store/zeus/install", json!(null)).await,
        StatusCode::NOT_FOUND,
        "no bundle",
    );
}

#[tokio::test]
async fn spec_2_2_rule_3_installs_never_overwrite_a_custom_profile() {
    let server = Server::start();
    let custom = json!({"name": "Sol", "system_prompt": "my own Sol"});
    assert_eq!(
        server.post("/api/agents", custom).await.0,
        StatusCode::CREATED
    );
    assert_error(
        &server.post("/api/store/sol/install", json!(null)).await,
        StatusCode::CONFLICT,
        "Sol",
    );
    let (_, sol) = server.get("/api/agents/Sol").await;
    assert_eq!(sol["system_prompt"], "my own Sol");
}
