//! Built-in tools driven by a scripted model: files, skills, the shell gate, GitHub and web
//! search against fakes, and the URL guard.

use axum::Router;
use axum::extract::Query;
use axum::http::HeaderMap;
use axum::response::Redirect;
use axum::routing::get;
use base64::Engine as _;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fakes::llm::{self, Reply};
use crate::support::{Server, openai_env, spawn_fake};

/// Runs one prompt whose scripted model calls `tool` with `input` and then answers; returns
/// the tool call record.
async fn call_tool(server: &Server, agent: &str, tool: &'static str, input: Value) -> Value {
    let (status, answer) = server
        .post(
            "/api/chat",
            json!({"prompt": "use the tool", "agent": agent}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let call = answer["tool_calls"][0].clone();
    assert_eq!(
        (call["name"].as_str(), &call["input"]),
        (Some(tool), &input)
    );
    call
}

fn script(tool: &'static str, input: &Value) -> Vec<Reply> {
    vec![
        Reply::Tools(vec![("t1", tool, input.clone())]),
        Reply::Text("ok"),
    ]
}

fn output(call: &Value) -> Value {
    serde_json::from_str(
        call["output"]
            .as_str()
            .unwrap_or_else(|| panic!("tool failed: {call}")),
    )
    .unwrap()
}

#[tokio::test]
async fn lists_the_registry() {
    let server = Server::start();
    let (_, body) = server.get("/api/tools").await;
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for name in [
        "analyze_file",
        "append_note",
        "create_note",
        "delegate_to_agent",
        "github_read",
        "search_notes",
        "shell_exec",
        "use_skill",
    ] {
        assert!(names.contains(&name), "{name}");
    }
    assert!(
        !names.contains(&"web_search"),
        "not offered without [tools.web_search]"
    );
    let shell = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "shell_exec")
        .unwrap();
    assert_eq!(shell["gated"], true);
}

#[tokio::test]
async fn analyze_file_reads_uploads_and_refuses_escapes() {
    let input = json!({"path": "people.csv"});
    let escape = json!({"path": "../service.sqlite"});
    let mut replies = script("analyze_file", &input);
    replies.extend(script("analyze_file", &escape));
    let fake = llm::openai(replies).await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    std::fs::create_dir_all(server.data_dir.join("uploads")).unwrap();
    std::fs::write(
        server.data_dir.join("uploads/people.csv"),
        "name,city\nAda,London\nAlan,Wilmslow\n",
    )
    .unwrap();

    let summary = output(&call_tool(&server, "default", "analyze_file", input).await);
    assert_eq!(
        (summary["columns"].clone(), summary["rows"].clone()),
        (json!(["name", "city"]), json!(2))
    );
    let refused = call_tool(&server, "default", "analyze_file", escape).await;
    assert!(
        refused["error"].as_str().unwrap().contains("outside"),
        "{refused}"
    );
}

#[tokio::test]
async fn use_skill_loads_markdown_skills() {
    let input = json!({"name": "weekly-review"});
    let missing = json!({"name": "nope"});
    let mut replies = script("use_skill", &input);
    replies.extend(script("use_skill", &missing));
    let fake = llm::openai(replies).await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    std::fs::create_dir_all(server.data_dir.join("skills")).unwrap();
    std::fs::write(
        server.data_dir.join("skills/weekly-review.md"),
        "# Weekly review\n1. List wins",
    )
    .unwrap();

    let call = call_tool(&server, "default", "use_skill", input).await;
    assert!(call["output"].as_str().unwrap().contains("List wins"));
    let call = call_tool(&server, "default", "use_skill", missing).await;
    assert!(
        call["error"]
            .as_str()
            .unwrap()
            .contains("available: weekly-review"),
        "{call}"
    );
}

#[tokio::test]
async fn shell_exec_needs_the_switch_and_an_explicit_grant() {
    let input = json!({"argv": ["echo", "hello shell"]});
    let fake = llm::openai(vec![
        Reply::Text("no shell"),
        Reply::Tools(vec![("s", "shell_exec", input.clone())]),
        Reply::Text("ran"),
        Reply::Tools(vec![(
            "s2",
            "shell_exec",
            json!({"argv": ["touch", "pwned"]}),
        )]),
        Reply::Text("refused"),
    ])
    .await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    let admin = json!({"name": "Admin", "system_prompt": "x", "tools": ["shell_exec"]});
    assert_eq!(
        server.post("/api/agents", admin).await.0,
        StatusCode::CREATED
    );

    // Switch off: not offered even to a profile that names it, and the trace says why.
    let (_, answer) = server
        .post("/api/chat", json!({"prompt": "hi", "agent": "Admin"}))
        .await;
    assert!(fake.requests()[0].body.get("tools").is_none());
    let (_, trace) = server
        .get(&format!(
            "/api/traces/{}",
            answer["trace_id"].as_str().unwrap()
        ))
        .await;
    assert!(
        trace["warnings"][0]
            .as_str()
            .unwrap()
            .contains("SERVICE_SHELL_ENABLED=true")
    );

    let mut env = openai_env(&fake.url);
    env.push(("SERVICE_SHELL_ENABLED", "true".into()));
    let server = Server::start_with_owned(&env);
    let (_, default) = server.get("/api/tools").await;
    assert!(
        default["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "shell_exec")
    );
    assert_eq!(
        server
            .post(
                "/api/agents",
                json!({"name": "Admin", "system_prompt": "x", "tools": ["shell_exec"]})
            )
            .await
            .0,
        StatusCode::CREATED
    );
    let result = output(&call_tool(&server, "Admin", "shell_exec", input).await);
    assert_eq!(result["exit_code"], 0);
    assert_eq!(result["stdout"], "hello shell\n");
    // A profile that leaves its tools unset never inherits a gated tool: it is not offered,
    // and a model that calls it anyway gets an error instead of a shell.
    let (_, answer) = server.post("/api/chat", json!({"prompt": "hi"})).await;
    let offered_to_default = &fake.requests()[3].body["tools"];
    assert!(
        offered_to_default
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["function"]["name"] != "shell_exec")
    );
    assert_eq!(
        answer["tool_calls"][0]["error"], "tool \"shell_exec\" is not available to this agent",
        "{answer}"
    );
    assert!(!server.data_dir.join("shell/pwned").exists());
    let log = std::fs::read_to_string(server.data_dir.join("server.log")).unwrap();
    assert!(log.contains("shell_exec"), "every call is logged");
}

#[tokio::test]
async fn github_read_uses_the_contents_api_and_refuses_redirects_to_local_hosts() {
    let router = Router::new()
        .route(
            "/repos/acme/widgets/contents/README.md",
            get(|headers: HeaderMap, Query(q): Query<std::collections::HashMap<String, String>>| async move {
                assert_eq!(headers["authorization"], "Bearer ghp-test");
                assert_eq!(q.get("ref").map(String::as_str), Some("main"));
                let content = base64::engine::general_purpose::STANDARD.encode("# Widgets\nThey spin.");
                axum::Json(json!({"type": "file", "encoding": "base64", "path": "README.md", "size": 20, "content": content}))
            }),
        )
        .route(
            "/repos/acme/widgets/contents/src",
            get(|| async { axum::Json(json!([{"name": "lib.rs", "type": "file", "path": "src/lib.rs", "size": 10}])) }),
        )
        // 127.0.0.2 is loopback but not the configured host, so the guard must refuse it.
        .route("/repos/acme/moved/contents/", get(|| async { Redirect::temporary("http://127.0.0.2:9/secret") }));
    let github = spawn_fake(router).await;
    let file = json!({"repo": "acme/widgets", "path": "README.md", "ref": "main"});
    let dir = json!({"repo": "acme/widgets", "path": "src"});
    let moved = json!({"repo": "acme/moved"});
    let mut replies = script("github_read", &file);
    replies.extend(script("github_read", &dir));
    replies.extend(script("github_read", &moved));
    let fake = llm::openai(replies).await;
    let mut env = openai_env(&fake.url);
    env.push(("SERVICE_GITHUB_API_BASE", github));
    env.push(("GITHUB_TOKEN", "ghp-test".into()));
    let server = Server::start_with_owned(&env);

    let read = output(&call_tool(&server, "default", "github_read", file).await);
    assert_eq!(read["content"], "# Widgets\nThey spin.");
    let listing = output(&call_tool(&server, "default", "github_read", dir).await);
    assert_eq!(listing["entries"][0]["name"], "lib.rs");
    let refused = call_tool(&server, "default", "github_read", moved).await;
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("private or local"),
        "{refused}"
    );
}

#[tokio::test]
async fn web_search_queries_searxng_when_configured() {
    let searx = spawn_fake(Router::new().route(
        "/search",
        get(|Query(q): Query<std::collections::HashMap<String, String>>| async move {
            assert_eq!(q["format"], "json");
            axum::Json(json!({"results": [
                {"title": format!("About {}", q["q"]), "url": "https://example.org/a", "content": "first"},
                {"title": "Second", "url": "https://example.org/b", "content": "second"}
            ]}))
        }),
    ))
    .await;
    let input = json!({"query": "rust wasm", "count": 1});
    let fake = llm::openai(script("web_search", &input)).await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    std::fs::write(
        server.data_dir.join("config.toml"),
        format!("[tools.web_search]\nprovider = \"searxng\"\nurl = \"{searx}\"\n"),
    )
    .unwrap();
    let server = server.restart();
    let results = output(&call_tool(&server, "default", "web_search", input).await);
    assert_eq!(
        results["results"],
        json!([{"title": "About rust wasm", "url": "https://example.org/a", "snippet": "first"}])
    );
}

#[tokio::test]
async fn notes_tools_search_and_append() {
    let fake = llm::openai(vec![
        Reply::Tools(vec![(
            "c",
            "create_note",
            json!({"title": "Trip", "body": "flights booked"}),
        )]),
        Reply::Tools(vec![(
            "a",
            "append_note",
            json!({"id": 1, "text": "hotel near the river"}),
        )]),
        Reply::Tools(vec![("s", "search_notes", json!({"query": "river"}))]),
        Reply::Text("found it"),
    ])
    .await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    let (_, answer) = server
        .post("/api/chat", json!({"prompt": "organise my trip"}))
        .await;
    let search = output(&answer["tool_calls"][2]);
    assert_eq!(search["results"][0]["title"], "Trip");
    assert!(
        search["results"][0]["snippet"]
            .as_str()
            .unwrap()
            .contains("[river]")
    );
}
