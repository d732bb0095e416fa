//! `/api/store`: featured bundles and installing them.

use reqwest::StatusCode;
use serde_json::json;

use crate::support::{Server, assert_error};

#[tokio::test]
async fn lists_featured_bundles_with_installed_flags() {
    let server = Server::start();
    let (status, body) = server.get("/api/store").await;
    assert_eq!(status, StatusCode::OK);
    let bundles = body["bundles"].as_array().unwrap();
    let slugs: Vec<&str> = bundles
        .iter()
        .map(|b| b["slug"].as_str().unwrap())
        .collect();
    assert_eq!(slugs, ["atlas", "vitriol", "sol"]);
    for bundle in bundles {
        assert_eq!(bundle["installed"], false);
        assert!(
            bundle.get("system_prompt").is_none(),
            "the list omits the persona"
        );
    }
    assert_eq!(bundles[0]["role"], "travel planner");
    assert_eq!(bundles[1]["paired_adapters"], json!(["web"]));
    assert_eq!(
        bundles[2]["recommended_tools"],
        json!(["search_notes", "create_note", "append_note"])
    );
}

#[tokio::test]
async fn shows_one_bundle_in_full_by_case_insensitive_slug() {
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
async fn install_creates_the_profile_once() {
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
async fn install_never_overwrites_a_custom_profile_of_the_same_name() {
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
