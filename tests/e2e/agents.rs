//! `/api/agents`: create, list, show, export, and the bundle round trip.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{Server, assert_error};

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
async fn export_is_a_bundle_that_imports_back_to_an_equal_profile() {
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
async fn imports_as(server: &Server, bundle: &Value, profile: &Value) {
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
