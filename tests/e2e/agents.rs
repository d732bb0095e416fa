//! `/api/agents`: create, list, show, update, delete, export, and the bundle round trip.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::support::{Server, assert_error, cli};

#[tokio::test]
async fn create_list_show() {
    let server = Server::start();
    let (status, created) = server
        .post(
            "/api/agents",
            json!({
                "name": "Night Owl",
                "system_prompt": "You answer at night.",
                "description": "late helper",
                "color": "#AABBCC",
                "default_model": "",
                "tools": "search_notes, create_note",
                "unknown_key": "ignored"
            }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["name"], "Night Owl");
    assert_eq!(created["color"], "#aabbcc");
    assert_eq!(created["default_model"], json!(null));
    assert_eq!(created["tools"], json!(["search_notes", "create_note"]));
    assert!(created.get("unknown_key").is_none());

    let (status, list) = server.get("/api/agents").await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = list["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "Night Owl"]);

    let (status, shown) = server.get("/api/agents/Night%20Owl").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(shown, created);
    assert_error(
        &server.get("/api/agents/night%20owl").await,
        StatusCode::NOT_FOUND,
        "no agent",
    );

    let (_, default) = server.get("/api/agents/default").await;
    assert_eq!(
        default["tools"],
        json!(null),
        "the default profile leaves tools unset"
    );
}

#[tokio::test]
async fn create_rejects_bad_input_without_writing() {
    let server = Server::start();
    let cases = [
        (json!({"system_prompt": "x"}), "name is required", "name"),
        (
            json!({"name": "  ", "system_prompt": "x"}),
            "name is required",
            "name",
        ),
        (
            json!({"name": "a"}),
            "system_prompt is required",
            "system_prompt",
        ),
        (
            json!({"name": "a", "system_prompt": " "}),
            "system_prompt is required",
            "system_prompt",
        ),
        (
            json!({"name": "a", "system_prompt": "x", "color": "blue"}),
            "hex color",
            "color",
        ),
        (
            json!({"name": "a", "system_prompt": "x", "tools": ["ok", "not ok"]}),
            "not valid",
            "tools",
        ),
        (
            json!({"name": ".", "system_prompt": "x"}),
            "usable in a web address",
            "name",
        ),
        (
            json!({"name": "..", "system_prompt": "x"}),
            "usable in a web address",
            "name",
        ),
        (
            json!({"name": "a/b", "system_prompt": "x"}),
            "usable in a web address",
            "name",
        ),
        (
            json!({"name": "50%", "system_prompt": "x"}),
            "usable in a web address",
            "name",
        ),
    ];
    for (body, message, field) in cases {
        let answer = server.post("/api/agents", body.clone()).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, message);
        assert_eq!(answer.1["field"], field, "{body}");
    }
    let wrong_type = server
        .post("/api/agents", json!({"name": 5, "system_prompt": "x"}))
        .await;
    assert_error(
        &wrong_type,
        StatusCode::BAD_REQUEST,
        "name must be a string, not a number",
    );
    assert_eq!(wrong_type.1["field"], "name");
    let raw = reqwest::Client::new()
        .post(server.url("/api/agents"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_error(
        &crate::support::json_of(raw).await,
        StatusCode::BAD_REQUEST,
        "",
    );

    let (_, list) = server.get("/api/agents").await;
    assert_eq!(
        list["agents"].as_array().unwrap().len(),
        1,
        "nothing was written"
    );
}

#[tokio::test]
async fn duplicate_name_is_a_conflict_and_keeps_the_original() {
    let server = Server::start();
    let body = json!({"name": "Echo", "system_prompt": "first"});
    assert_eq!(
        server.post("/api/agents", body).await.0,
        StatusCode::CREATED
    );
    assert_error(
        &server
            .post(
                "/api/agents",
                json!({"name": "Echo", "system_prompt": "second"}),
            )
            .await,
        StatusCode::CONFLICT,
        "already exists",
    );
    let (_, echo) = server.get("/api/agents/Echo").await;
    assert_eq!(echo["system_prompt"], "first");
    // Exact, case-sensitive names: a different case is a different agent.
    let lower = json!({"name": "echo", "system_prompt": "third"});
    assert_eq!(
        server.post("/api/agents", lower).await.0,
        StatusCode::CREATED
    );
}

#[tokio::test]
async fn an_installed_featured_bundle_exports_as_itself_and_installs_back_equal() {
    let server = Server::start();
    let (status, installed) = server.post("/api/store/atlas/install", json!({})).await;
    assert_eq!(status, StatusCode::CREATED, "{installed}");
    let (_, exported) = server.get("/api/agents/Atlas/export").await;
    let (_, mut featured) = server.get("/api/store/atlas").await;
    featured.as_object_mut().unwrap().remove("installed");
    assert_eq!(
        exported, featured,
        "role, persona, tools and paired adapters survive"
    );

    imports_as(&Server::start(), &exported, &installed).await;
}

/// Imports `bundle` into `server` and checks the profile equals `profile` field by field.
pub(crate) async fn imports_as(server: &Server, bundle: &Value, profile: &Value) {
    let (status, imported) = server.post("/api/store/import", bundle.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{imported}");
    for field in [
        "name",
        "system_prompt",
        "description",
        "color",
        "default_model",
        "tools",
    ] {
        assert_eq!(imported[field], profile[field], "{field}");
    }
}

async fn patch(server: &Server, name: &str, body: Value) -> (StatusCode, Value) {
    server
        .send(Method::PATCH, &format!("/api/agents/{name}"), Some(body))
        .await
}

#[tokio::test]
async fn update_changes_the_named_fields_validated_as_on_create() {
    let server = Server::start();
    let (_, created) = server
        .post(
            "/api/agents",
            json!({"name": "Quill", "system_prompt": "You edit prose.", "description": "editor",
                   "color": "#123456", "tools": ["search_notes"]}),
        )
        .await;

    let (status, updated) = patch(
        &server,
        "Quill",
        json!({"description": "copy editor", "tools": "search_notes, create_note", "name": "Quill"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{updated}");
    assert_eq!(updated["description"], "copy editor");
    assert_eq!(updated["tools"], json!(["search_notes", "create_note"]));
    assert_eq!(updated["system_prompt"], "You edit prose.", "absent: kept");
    assert_eq!(updated["color"], "#123456");
    assert_eq!(updated["created_at"], created["created_at"]);
    assert_eq!(server.get("/api/agents/Quill").await.1, updated);

    // null clears: the tool list becomes unset (every ungated tool), the color none.
    let (_, cleared) = patch(&server, "Quill", json!({"tools": null, "color": null})).await;
    assert_eq!(
        (&cleared["tools"], &cleared["color"]),
        (&json!(null), &json!(null))
    );

    for (body, field, message) in [
        (json!({"color": "blue"}), "color", "hex color"),
        (
            json!({"system_prompt": " "}),
            "system_prompt",
            "system_prompt is required",
        ),
        (json!({"name": "Ink"}), "name", "cannot be renamed"),
        (json!({"tools": ["nope"]}), "tools", "unknown tool \"nope\""),
        (
            json!({"tools": 7}),
            "tools",
            "tools must be a list of tool names or a comma-separated string, not a number",
        ),
    ] {
        let answer = patch(&server, "Quill", body.clone()).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, message);
        assert_eq!(answer.1["field"], field, "{body}");
    }
    assert_eq!(
        server.get("/api/agents/Quill").await.1,
        cleared,
        "nothing was written"
    );
    assert_error(
        &patch(&server, "Nobody", json!({"description": "x"})).await,
        StatusCode::NOT_FOUND,
        "no agent named \"Nobody\"",
    );
    let (status, default) = patch(&server, "default", json!({"system_prompt": "Be terse."})).await;
    assert_eq!(
        (status, default["system_prompt"].as_str()),
        (StatusCode::OK, Some("Be terse."))
    );
}

#[tokio::test]
async fn delete_keeps_the_default_and_says_who_still_names_the_agent() {
    let server = Server::start_with(&[("SERVICE_TEAMCHAT_AGENT_PROFILE", "Night Owl")]);
    let night = json!({"name": "Night Owl", "system_prompt": "You answer at night."});
    assert_eq!(
        server.post("/api/agents", night).await.0,
        StatusCode::CREATED
    );
    let created = cli(
        &server.data_dir,
        &[
            "schedule",
            "create",
            "nightly",
            "--cron",
            "@daily",
            "--agent",
            "Night Owl",
            "--prompt",
            "summarise the day",
        ],
    );
    assert!(created.status.success(), "{created:?}");

    let references = json!({
        "schedules": ["nightly"],
        "adapters": [{"adapter": "teamchat", "variable": "SERVICE_TEAMCHAT_AGENT_PROFILE"}],
    });
    let (status, found) = server.get("/api/agents/Night%20Owl/references").await;
    assert_eq!((status, &found), (StatusCode::OK, &references));

    let (status, deleted) = server.delete("/api/agents/Night%20Owl").await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    assert_eq!(deleted["result"], "deleted");
    assert_eq!(deleted["referenced_by"], references);
    assert!(deleted["note"].as_str().unwrap().contains("error trace"));
    assert_error(
        &server.get("/api/agents/Night%20Owl").await,
        StatusCode::NOT_FOUND,
        "no agent",
    );
    assert_error(
        &server.delete("/api/agents/Night%20Owl").await,
        StatusCode::NOT_FOUND,
        "no agent",
    );
    assert_error(
        &server.delete("/api/agents/default").await,
        StatusCode::CONFLICT,
        "default agent cannot be deleted",
    );
    let (_, list) = server.get("/api/agents").await;
    assert_eq!(list["agents"].as_array().unwrap().len(), 1);

    // The schedule is left as it was; its run now fails and says why.
    let (_, schedules) = server.get("/api/schedules").await;
    assert_eq!(schedules["schedules"][0]["agent_profile_name"], "Night Owl");
    let run = cli(&server.data_dir, &["schedule", "run", "nightly"]);
    assert!(!run.status.success());
    let said = String::from_utf8_lossy(&run.stderr);
    assert!(
        said.contains("no agent named \"Night Owl\"") && said.contains("schedule edit nightly"),
        "{said}"
    );
    let trace_id = said
        .trim()
        .rsplit("trace_id: ")
        .next()
        .unwrap()
        .trim_end_matches(')');
    let (_, trace) = server.get(&format!("/api/traces/{trace_id}")).await;
    assert_eq!(trace["status"], "error", "{trace}");
}

#[tokio::test]
async fn unknown_tools_are_refused_and_bundle_tools_from_elsewhere_are_kept_as_unavailable() {
    let server = Server::start();
    let answer = server
        .post(
            "/api/agents",
            json!({"name": "Typo", "system_prompt": "x", "tools": "search_notes, serch_notes, nope"}),
        )
        .await;
    assert_error(
        &answer,
        StatusCode::BAD_REQUEST,
        "unknown tools [\"serch_notes\", \"nope\"]",
    );
    assert_eq!(answer.1["field"], "tools");

    // Atlas recommends the calendar adapter's tools and web_search, none of them here.
    let (status, atlas) = server.post("/api/store/atlas/install", json!({})).await;
    assert_eq!(status, StatusCode::CREATED, "{atlas}");
    let unavailable: Vec<(&str, &str)> = atlas["unavailable_tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| (u["name"].as_str().unwrap(), u["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(
        unavailable,
        [
            (
                "web_search",
                "offered once [tools.web_search] is set in config.toml"
            ),
            (
                "list_calendar_events_today",
                "comes from the calendar adapter, which is not loaded"
            ),
            (
                "create_calendar_event",
                "comes from the calendar adapter, which is not loaded"
            ),
        ]
    );
    let (_, listed) = server.get("/api/agents").await;
    assert_eq!(
        listed["agents"][1]["unavailable_tools"],
        atlas["unavailable_tools"]
    );
    let (_, store) = server.get("/api/store").await;
    assert_eq!(
        store["bundles"][0]["unavailable_tools"],
        atlas["unavailable_tools"]
    );
    assert_eq!(
        store["bundles"][2]["unavailable_tools"],
        json!([]),
        "Sol's are all here"
    );

    // Those names are accepted on other agents too; a gated tool is listed as switched off.
    let (status, planner) = server
        .post(
            "/api/agents",
            json!({"name": "Planner", "system_prompt": "x", "tools": ["create_calendar_event", "shell_exec"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{planner}");
    assert_eq!(
        planner["unavailable_tools"][1],
        json!({"name": "shell_exec", "reason": "switched off until SERVICE_SHELL_ENABLED=true"})
    );
    // A bundle file naming an unknown tool is refused like a create.
    let mut bundle = server.get("/api/agents/Planner/export").await.1;
    bundle["name"] = json!("Planner 2");
    bundle["recommended_tools"] = json!(["teleport"]);
    assert_error(
        &server.post("/api/store/import", bundle).await,
        StatusCode::BAD_REQUEST,
        "unknown tool \"teleport\"",
    );
}
