//! Who is calling: the two modes chosen by the bind, API tokens from the command line and the
//! API, the one permission check every route declares, and the specification's loopback rule
//! kept for its two endpoints.

use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use service_runtime::access::Role;
use service_runtime::app::{self, App};
use service_runtime::http::guards::Binding;
use service_runtime::http::{self, AppState};

use crate::netns::Peer;
use crate::support::{Server, cli};

pub(crate) const REQUIRED: &str = "[auth]\nrequired = true\n";

/// A token made by `tokens create` on the server's data directory: its last line.
pub(crate) fn token(server: &Server, name: &str, role: &str) -> String {
    let out = cli(
        &server.data_dir,
        &["tokens", "create", "--name", name, "--role", role],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    stdout.lines().last().unwrap().to_owned()
}

pub(crate) async fn call(
    server: &Server,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Value, HeaderMap) {
    let mut request = reqwest::Client::new().request(method, server.url(path));
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
        headers,
    )
}

/// `GET path` with `token`: the status and the JSON answer.
pub(crate) async fn get_as(server: &Server, path: &str, token: &str) -> (StatusCode, Value) {
    let (status, body, _) = call(server, Method::GET, path, Some(token), None).await;
    (status, body)
}

/// Every route the server has, with its permission, as the router declares them.
pub(crate) async fn declared() -> Vec<http::routes::Declared> {
    let tmp = tempfile::tempdir().unwrap();
    let app = App::open(tmp.path(), app::Role::Command).await.unwrap();
    let state = AppState::new(&app, Binding { loopback: true }).unwrap();
    http::routes(&state).into_parts().1
}

/// A path of the route with every parameter filled in.
fn concrete(path: &str) -> String {
    path.split('/')
        .map(|part| if part.starts_with('{') { "probe" } else { part })
        .collect::<Vec<_>>()
        .join("/")
}

#[tokio::test]
async fn every_route_declares_its_permission_and_each_role_reaches_what_it_holds() {
    let server = Server::start_with_config(REQUIRED, &[]);
    let roles = [Role::Viewer, Role::Member, Role::Operator, Role::Admin];
    let tokens: Vec<(Role, String)> = roles
        .iter()
        .map(|role| (*role, token(&server, role.as_str(), role.as_str())))
        .collect();
    let routes = declared().await;
    assert!(routes.len() > 40, "{routes:?}");
    for route in &routes {
        let method = match route.method {
            "ANY" => Method::GET,
            name => name.parse().unwrap(),
        };
        let path = concrete(&route.path);
        let what = format!("{} {}", route.method, route.path);
        let (status, body, headers) = call(&server, method.clone(), &path, None, None).await;
        match route.permission.least_role() {
            None => assert!(
                status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN,
                "{what}: {status} {body}"
            ),
            Some(_) => {
                assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}: {body}");
                assert_eq!(headers["www-authenticate"], "Bearer", "{what}");
                assert!(
                    body["error"].as_str().unwrap().contains("sign in"),
                    "{what}"
                );
            }
        }
        for (role, token) in &tokens {
            let (status, body, _) = call(&server, method.clone(), &path, Some(token), None).await;
            if role.may(route.permission) {
                assert!(
                    status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN,
                    "{what} as {role}: {status} {body}"
                );
            } else {
                assert_eq!(status, StatusCode::FORBIDDEN, "{what} as {role}: {body}");
                let error = body["error"].as_str().unwrap();
                assert!(
                    error.contains(route.permission.as_str())
                        && error.contains(&format!("token:{role} has the role {role}")),
                    "{what} as {role}: {error}"
                );
            }
        }
    }

    // The book's table of routes is this list, and says the same of each.
    let table = crate::support::book_page("reference/routes.md");
    let documented: std::collections::BTreeSet<String> = table
        .lines()
        .filter(|line| line.starts_with("| `") && line.contains("` | `"))
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let route = cells.get(1)?.trim_matches('`');
            let permission = cells.get(2)?.trim_matches('`');
            route
                .split_once(' ')
                .filter(|(method, _)| method.chars().all(|c| c.is_ascii_uppercase()))
                .map(|_| format!("| `{route}` | `{permission}` |"))
        })
        .collect();
    let declared: std::collections::BTreeSet<String> = routes
        .iter()
        .map(|r| {
            format!(
                "| `{} {}` | `{}` |",
                r.method,
                r.path,
                r.permission.as_str()
            )
        })
        .collect();
    assert_eq!(
        documented,
        declared,
        "the book's routes table (docs/src/reference/routes.md) should read:\n{}",
        declared.iter().cloned().collect::<Vec<_>>().join("\n")
    );
}

#[tokio::test]
async fn tokens_made_on_the_command_line_hold_their_role_are_stored_hashed_and_revoked() {
    let server = Server::start_with_config(REQUIRED, &[]);
    let viewer = token(&server, "ci", "viewer");
    assert!(viewer.starts_with("srt_") && viewer.len() > 40, "{viewer}");

    let (status, _) = get_as(&server, "/api/tasks", &viewer).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body, _) = call(
        &server,
        Method::POST,
        "/api/agents",
        Some(&viewer),
        Some(json!({"name": "x", "system_prompt": "x"})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("needs the permission manage_agents (role operator or above)"),
        "{body}"
    );

    // Listed with its use, never with its secret; the database holds its digest only.
    let out = cli(&server.data_dir, &["tokens", "list", "--json"]);
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed[0]["name"], "ci");
    assert_eq!(listed[0]["role"], "viewer");
    assert!(listed[0]["last_used_at"].is_string(), "{listed}");
    let table = cli(&server.data_dir, &["tokens", "list"]);
    for shown in [&out.stdout, &table.stdout] {
        assert!(!String::from_utf8_lossy(shown).contains(&viewer));
    }
    let stored = server
        .db()
        .blocking(|conn| {
            conn.query(
                "SELECT name, role, hint, hash FROM access_tokens",
                &[],
                |row| {
                    Ok(format!(
                        "{:?}",
                        (row.get::<String>(0)?, row.get::<String>(3)?)
                    ))
                },
            )
        })
        .unwrap()
        .join(" ");
    assert!(!stored.contains(&viewer[4..]), "{stored}");

    // Bad input: a clear error, a non-zero exit, nothing written.
    for (args, said) in [
        (vec!["--name", "x", "--role", "root"], "role must be one of"),
        (vec!["--name", "ci", "--role", "viewer"], "already exists"),
        (
            vec!["--name", "y", "--role", "admin", "--expires", "5y"],
            "30d, 12h or 45m",
        ),
        (
            vec!["--name", "bad name", "--role", "admin"],
            "name must be",
        ),
    ] {
        let mut all = vec!["tokens", "create"];
        all.extend(args);
        let out = cli(&server.data_dir, &all);
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(said), "{all:?}: {stderr}");
    }
    let out = cli(&server.data_dir, &["tokens", "revoke", "nobody"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no token named \"nobody\""));
    let out = cli(&server.data_dir, &["tokens", "list", "--json"]);
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");

    // Revoked: a request made half a second later (what a lookup is trusted for) is refused.
    let out = cli(&server.data_dir, &["tokens", "revoke", "ci"]);
    assert!(out.status.success());
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (status, body) = get_as(&server, "/api/tasks", &viewer).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert!(body["error"].as_str().unwrap().contains("not valid"));

    let log = std::fs::read_to_string(server.data_dir.join("server.log")).unwrap();
    assert!(!log.contains(&viewer[4..]), "the secret reached the log");
}

#[tokio::test]
async fn api_tokens_are_shown_once_and_forged_expired_or_revoked_ones_are_refused() {
    let server = Server::start_with_config(REQUIRED, &[]);
    let admin = token(&server, "ops", "admin");

    let (status, made, _) = call(
        &server,
        Method::POST,
        "/api/tokens",
        Some(&admin),
        Some(json!({"name": "bot", "role": "member", "expires": "30d"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let member = made["token"].as_str().unwrap().to_owned();
    assert_eq!(made["created_by"], "token:ops");
    assert!(made["expires_at"].is_string());
    let (_, listed) = get_as(&server, "/api/tokens", &admin).await;
    assert_eq!(listed["tokens"].as_array().unwrap().len(), 2);
    assert!(!listed.to_string().contains(&member[8..]), "{listed}");

    // The member chats, and reaches nothing an operator or admin holds.
    let (status, chat, _) = call(
        &server,
        Method::POST,
        "/api/chat",
        Some(&member),
        Some(json!({"prompt": "hello"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{chat}");
    for (method, path) in [
        (Method::POST, "/api/agents"),
        (Method::GET, "/api/tokens"),
        (Method::POST, "/api/adapters/scheduler/disable"),
    ] {
        let (status, body, _) = call(&server, method, path, Some(&member), None).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {body}");
    }

    // Bad input: the field named, nothing written.
    for (body, status, field) in [
        (json!({"name": "a b", "role": "member"}), 400, "name"),
        (json!({"name": "a", "role": "root"}), 400, "role"),
        (
            json!({"name": "a", "role": "member", "expires": "forever"}),
            400,
            "expires",
        ),
        (
            json!({"name": "a", "role": "member", "scope": "all"}),
            400,
            "",
        ),
        (json!({"name": "bot", "role": "viewer"}), 409, ""),
    ] {
        let (got, answer, _) = call(
            &server,
            Method::POST,
            "/api/tokens",
            Some(&admin),
            Some(body.clone()),
        )
        .await;
        assert_eq!(got.as_u16(), status, "{body}: {answer}");
        if !field.is_empty() {
            assert_eq!(answer["field"], field, "{answer}");
        }
    }
    let (_, listed) = get_as(&server, "/api/tokens", &admin).await;
    assert_eq!(listed["tokens"].as_array().unwrap().len(), 2);

    // Forged, malformed, expired, revoked: 401 for each.
    let mut forged = member.clone();
    let last = if forged.ends_with('A') { "B" } else { "A" };
    forged.replace_range(forged.len() - 1.., last);
    let (status, _, headers) = call(&server, Method::GET, "/api/me", Some(&forged), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(headers["www-authenticate"], "Bearer");
    let basic = reqwest::Client::new()
        .get(server.url("/api/me"))
        .basic_auth("ops", Some(&admin))
        .send()
        .await
        .unwrap();
    assert_eq!(basic.status(), StatusCode::UNAUTHORIZED);
    server
        .db()
        .blocking(|conn| {
            conn.execute(
                "UPDATE access_tokens SET expires_at = '2001-01-01T00:00:00.000Z' \
                 WHERE name = 'bot'",
                &[],
            )
        })
        .unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (status, _) = get_as(&server, "/api/agents", &member).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "expired");
    let (status, _, _) = call(
        &server,
        Method::DELETE,
        "/api/tokens/bot",
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = call(
        &server,
        Method::DELETE,
        "/api/tokens/bot",
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let log = std::fs::read_to_string(server.data_dir.join("server.log")).unwrap();
    for secret in [&admin, &member] {
        assert!(!log.contains(&secret[4..]), "a secret reached the log");
    }
}

#[tokio::test]
async fn strangers_learn_the_status_only_and_metrics_and_mcp_take_tokens() {
    let server = Server::start_with_config(REQUIRED, &[]);
    let (status, health, _) = call(&server, Method::GET, "/api/health", None, None).await;
    assert_eq!((status, health), (StatusCode::OK, json!({"status": "ok"})));
    let (_, me, _) = call(&server, Method::GET, "/api/me", None, None).await;
    assert_eq!(
        me,
        json!({"principal": null, "permissions": [], "sign_in_required": true})
    );
    let (status, page, _) = call(&server, Method::GET, "/", None, None).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the dashboard's page itself is open: {page}"
    );

    let viewer = token(&server, "scraper", "viewer");
    let (_, health) = get_as(&server, "/api/health", &viewer).await;
    assert!(
        health["replica"].is_string() && health["counts"].is_object(),
        "{health}"
    );
    let (_, me) = get_as(&server, "/api/me", &viewer).await;
    assert_eq!(me["principal"]["role"], "viewer");
    assert_eq!(me["principal"]["kind"], "token");
    assert_eq!(me["permissions"], json!(["read_status"]));

    let (status, _, _) = call(&server, Method::GET, "/metrics", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, metrics) = get_as(&server, "/metrics", &viewer).await;
    assert_eq!(status, StatusCode::OK);
    assert!(metrics.as_str().unwrap().contains("# TYPE"));

    let list_tools = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let (status, body, _) = call(
        &server,
        Method::POST,
        "/mcp",
        Some(&viewer),
        Some(list_tools.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let member = token(&server, "desktop", "member");
    let response = reqwest::Client::new()
        .post(server.url("/mcp"))
        .bearer_auth(&member)
        .header("accept", "application/json, text/event-stream")
        .json(&list_tools)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.text().await.unwrap().contains("default"));

    // A local server asks nobody on this machine.
    let local = Server::start();
    let (_, me, _) = call(&local, Method::GET, "/api/me", None, None).await;
    assert_eq!(me["principal"]["kind"], "owner");
    assert_eq!(me["sign_in_required"], false);
    let (_, health, _) = call(&local, Method::GET, "/api/health", None, None).await;
    assert!(health["counts"].is_object());
}

#[tokio::test]
async fn commands_on_the_servers_machine_act_as_its_owner() {
    let server = Server::start_with_config(REQUIRED, &[]);
    use std::os::unix::fs::PermissionsExt;
    let key = server.data_dir.join("server.key");
    let mode = std::fs::metadata(&key).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let out = cli(&server.data_dir, &["run", "hello there"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("[through the server at"), "{stderr}");
    let (status, _, _) = call(&server, Method::GET, "/api/traces", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

/// The issue's own tour: a server bound to a network address, called from another machine.
#[tokio::test]
async fn a_server_on_the_network_asks_every_stranger_and_keeps_the_specs_loopback_rule() {
    let peer = Peer::new();
    let server = Server::start_with(&[("SERVICE_HOST", &peer.host_ip)]);
    let url = |path: &str| server.url(path);
    let json_body = ["-H", "content-type: application/json", "-d"];

    for (method, path, body) in [
        ("GET", "/api/conversations", None),
        ("GET", "/api/traces", None),
        ("GET", "/api/approvals", None),
        ("GET", "/api/integrations", None),
        ("POST", "/api/chat", Some(r#"{"prompt":"hi"}"#)),
        (
            "POST",
            "/api/agents",
            Some(r#"{"name":"x","system_prompt":"x"}"#),
        ),
        (
            "PATCH",
            "/api/agents/default",
            Some(r#"{"tools":["shell_exec"]}"#),
        ),
        ("POST", "/api/store/atlas/install", Some("{}")),
    ] {
        let mut args = Vec::new();
        if let Some(body) = body {
            args.extend_from_slice(&json_body);
            args.push(body);
        }
        let (status, answer) = peer.curl(method, &url(path), &args);
        assert_eq!(status, 401, "{method} {path}: {answer}");
    }
    assert_eq!(
        peer.curl("GET", &url("/api/health"), &[]),
        (200, r#"{"status":"ok"}"#.to_owned())
    );
    let (_, agent) = peer.curl("GET", &url("/api/agents/default"), &[]);
    assert!(agent.contains("error"), "{agent}");

    // The operator elsewhere, with an admin token: the dashboard's writes work...
    let admin = token(&server, "ops", "admin");
    let bearer = format!("authorization: Bearer {admin}");
    let auth = ["-H", bearer.as_str()];
    let with = |body: &'static str| -> Vec<&str> {
        let mut args = auth.to_vec();
        args.extend_from_slice(&json_body);
        args.push(body);
        args
    };
    let (status, answer) = peer.curl(
        "PATCH",
        &url("/api/agents/default"),
        &with(r#"{"system_prompt":"Be brief."}"#),
    );
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = peer.curl(
        "POST",
        &url("/api/schedules"),
        &with(r#"{"name":"nightly","cron_expression":"@daily","agent_profile_name":"default","prompt":"x"}"#),
    );
    assert_eq!(status, 201, "{answer}");
    assert_eq!(
        peer.curl("DELETE", &url("/api/schedules/nightly"), &auth).0,
        200
    );
    assert_eq!(
        peer.curl("POST", &url("/api/adapters/scheduler/disable"), &auth)
            .0,
        200
    );
    // ...but the specification's two loopback-only endpoints stay so.
    let task = server.create_task(
        "keep",
        "default",
        service_runtime::tasks::TaskStatus::Completed,
    );
    let (status, answer) = peer.curl("DELETE", &url(&format!("/api/tasks/{task}")), &auth);
    assert_eq!(status, 403, "{answer}");
    assert!(answer.contains("local machine"), "{answer}");
    let (status, answer) = peer.curl(
        "POST",
        &url("/api/integrations/anthropic/keys"),
        &with(r#"{"env_var":"ANTHROPIC_API_KEY","value":"sk-x"}"#),
    );
    assert_eq!(status, 403, "{answer}");
    assert!(!server.data_dir.join(".env").exists());
    let (status, _) = peer.curl("GET", &url("/api/traces"), &auth);
    assert_eq!(status, 200);
    drop(server);

    // `[auth] remote_admin` opens them to admins elsewhere: a documented departure.
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("config.toml"), "[auth]\nremote_admin = true\n").unwrap();
    let server = Server::start_in(&data, &[("SERVICE_HOST", peer.host_ip.clone())]);
    let admin = token(&server, "ops", "admin");
    let bearer = format!("authorization: Bearer {admin}");
    let (status, answer) = peer.curl(
        "POST",
        &server.url("/api/integrations/anthropic/keys"),
        &[
            "-H",
            bearer.as_str(),
            "-H",
            "content-type: application/json",
            "-d",
            r#"{"env_var":"ANTHROPIC_API_KEY","value":"sk-x"}"#,
        ],
    );
    assert_eq!(status, 200, "{answer}");
}

#[tokio::test]
async fn every_change_and_every_refused_credential_is_audited_without_secrets() {
    let server = Server::start_with_config(REQUIRED, &[]);
    let admin = token(&server, "ops", "admin");
    let viewer = token(&server, "reader", "viewer");
    let agent = json!({"name": "Scout", "system_prompt": "x"});
    let (status, _, _) = call(
        &server,
        Method::POST,
        "/api/agents",
        Some(&admin),
        Some(agent.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _, _) = call(
        &server,
        Method::POST,
        "/api/agents",
        Some(&viewer),
        Some(agent),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let forged = "srt_forged-and-never-to-be-written-anywhere";
    let (status, _, _) = call(&server, Method::GET, "/api/tasks", Some(forged), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = get_as(&server, "/api/agents", &admin).await;
    assert_eq!(status, StatusCode::OK);

    let entries = crate::support::eventually(10, async || {
        let (_, audit) = get_as(&server, "/api/audit", &admin).await;
        (audit["total"] == 3).then_some(audit)
    })
    .await;
    let (_, health) = get_as(&server, "/api/health", &admin).await;
    // By status: answers of the same millisecond may be listed in either order.
    let mut summary: Vec<(Value, Value, Value, Value, Value)> = entries["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            assert_eq!(e["peer"], "127.0.0.1");
            assert_eq!(e["replica"], health["replica"]);
            (
                e["principal"].clone(),
                e["role"].clone(),
                e["action"].clone(),
                e["target"].clone(),
                e["status"].clone(),
            )
        })
        .collect();
    summary.sort_by_key(|entry| entry.4.as_u64());
    assert_eq!(
        summary,
        [
            (
                json!("token:ops"),
                json!("admin"),
                json!("POST /api/agents"),
                json!("/api/agents"),
                json!(201)
            ),
            (
                json!(null),
                json!(null),
                json!("credential refused"),
                json!("/api/tasks"),
                json!(401)
            ),
            (
                json!("token:reader"),
                json!("viewer"),
                json!("POST /api/agents"),
                json!("/api/agents"),
                json!(403)
            ),
        ]
    );
    assert!(!entries.to_string().contains(&forged[4..]));

    let (_, mine) = get_as(&server, "/api/audit?principal=token:ops", &admin).await;
    assert_eq!(mine["total"], 1);
    let (_, refused) = get_as(&server, "/api/audit?action=credential", &admin).await;
    assert_eq!(refused["total"], 1);
    let (status, _) = get_as(&server, "/api/audit?limit=0", &admin).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = get_as(&server, "/api/audit", &viewer).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let log = std::fs::read_to_string(server.data_dir.join("server.log")).unwrap();
    assert!(!log.contains(&forged[4..]));
}
