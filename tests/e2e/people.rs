//! People: the first admin made through the link a server prints when nobody can sign in,
//! local accounts with passwords set through one-time links, sessions in cookies with their
//! anti-forgery token, and what an attacker tries against them.

use reqwest::header::{self, HeaderMap};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::access::REQUIRED;
use crate::support::{Server, cli, eventually};

/// A browser of one person: the session cookie it was given, and the anti-forgery token.
#[derive(Default, Clone)]
pub(crate) struct Browser {
    pub cookie: Option<String>,
    pub csrf: Option<String>,
}

impl Browser {
    pub async fn send(
        &mut self,
        server: &Server,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value, HeaderMap) {
        let mut request = reqwest::Client::new().request(method, server.url(path));
        if let Some(cookie) = &self.cookie {
            request = request.header(header::COOKIE, format!("service_session={cookie}"));
        }
        if let Some(csrf) = &self.csrf {
            request = request.header("x-csrf-token", csrf);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let (status, headers) = (response.status(), response.headers().clone());
        if let Some(set) = headers.get(header::SET_COOKIE) {
            let value = set.to_str().unwrap();
            let cookie = value
                .strip_prefix("service_session=")
                .and_then(|rest| rest.split(';').next())
                .unwrap();
            self.cookie = (!cookie.is_empty()).then(|| cookie.to_owned());
        }
        let body: Value = response.json().await.unwrap();
        if let Some(csrf) = body["csrf_token"].as_str() {
            self.csrf = Some(csrf.to_owned());
        }
        (status, body, headers)
    }

    pub async fn sign_in(&mut self, server: &Server, name: &str, password: &str) -> StatusCode {
        let body = json!({ "name": name, "password": password });
        self.send(server, Method::POST, "/api/session", Some(body))
            .await
            .0
    }

    /// Opens a one-time link (its secret after `#link=`) and sets `password`.
    pub async fn use_link(
        &mut self,
        server: &Server,
        link: &str,
        name: Option<&str>,
        password: &str,
    ) -> (StatusCode, Value) {
        let secret = link.split_once("#link=").map_or(link, |(_, secret)| secret);
        let body = json!({ "link": secret, "name": name, "password": password });
        let (status, body, _) = self
            .send(server, Method::POST, "/api/session/link", Some(body))
            .await;
        (status, body)
    }
}

/// The first-admin link the server printed on stdout after the address.
pub(crate) async fn first_admin_link(server: &Server) -> String {
    eventually(10, async || {
        let printed = std::fs::read_to_string(server.data_dir.join("server.stdout")).ok()?;
        printed
            .lines()
            .find(|line| line.contains("#link="))
            .map(|line| line.trim().to_owned())
    })
    .await
}

const PASSWORD: &str = "correct horse battery staple";

#[tokio::test]
async fn the_first_admin_comes_from_the_printed_link_and_invites_people_who_sign_in() {
    let server = Server::start_with_config(REQUIRED, &[]);
    let link = first_admin_link(&server).await;
    assert!(
        link.starts_with(&format!("{}/#link=", server.url)),
        "{link}"
    );

    // A weak password or no name: refused, and the link still works.
    let mut ada = Browser::default();
    let (status, body) = ada.use_link(&server, &link, Some("ada"), "short").await;
    assert_eq!(
        (status, body["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("password"))
    );
    let (status, body) = ada.use_link(&server, &link, None, PASSWORD).await;
    assert_eq!(
        (status, body["field"].as_str()),
        (StatusCode::BAD_REQUEST, Some("name")),
        "{body}"
    );
    let (status, body) = ada.use_link(&server, &link, Some("ada"), PASSWORD).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (body["user"]["name"].as_str(), body["user"]["role"].as_str()),
        (Some("ada"), Some("admin"))
    );
    let (status, _) = Browser::default()
        .use_link(&server, &link, Some("eve"), PASSWORD)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "a link works once");

    // The cookie: for this site's pages only, never for scripts.
    let (_, me, _) = ada.send(&server, Method::GET, "/api/me", None).await;
    assert_eq!(me["principal"]["kind"], "user");
    assert_eq!(me["principal"]["name"], "ada");
    assert_eq!(me["csrf_token"].as_str(), ada.csrf.as_deref());
    let mut fresh = Browser::default();
    let status = fresh.sign_in(&server, "ada", PASSWORD).await;
    assert_eq!(status, StatusCode::OK);
    let (_, _, headers) = fresh
        .send(
            &server,
            Method::POST,
            "/api/session",
            Some(json!({"name": "ada", "password": PASSWORD})),
        )
        .await;
    let set = headers[header::SET_COOKIE].to_str().unwrap();
    for flag in ["HttpOnly", "SameSite=Lax", "Path=/", "Max-Age=1209600"] {
        assert!(set.contains(flag), "{set}");
    }
    assert!(!set.contains("Secure"), "served over plain http: {set}");

    // A write riding the cookie without the anti-forgery token (a cross-site form): refused.
    let mut forger = Browser {
        csrf: None,
        ..ada.clone()
    };
    let invite = json!({ "name": "bob", "role": "member" });
    let (status, body, _) = forger
        .send(&server, Method::POST, "/api/users", Some(invite.clone()))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        body["error"].as_str().unwrap().contains("X-CSRF-Token"),
        "{body}"
    );
    let (status, body, _) = ada
        .send(&server, Method::POST, "/api/users", Some(invite))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["user"]["has_password"], false);
    let bob_link = body["link"].as_str().unwrap().to_owned();

    // Bob sets his password through the link; the link knows his name.
    let mut bob = Browser::default();
    let (status, body) = bob.use_link(&server, &bob_link, None, PASSWORD).await;
    assert_eq!(
        (status, body["user"]["role"].as_str()),
        (StatusCode::OK, Some("member")),
        "{body}"
    );
    let (status, body, _) = bob.send(&server, Method::GET, "/api/users", None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        body["error"].as_str().unwrap().contains("manage_access"),
        "{body}"
    );
    // Raising his own role: refused.
    let (status, _, _) = bob
        .send(
            &server,
            Method::PATCH,
            "/api/users/bob",
            Some(json!({"role": "admin"})),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, _) = bob.send(&server, Method::GET, "/api/agents", None).await;
    assert_eq!(status, StatusCode::OK);

    // The last admin keeps the role.
    let (status, body, _) = ada
        .send(
            &server,
            Method::PATCH,
            "/api/users/ada",
            Some(json!({"role": "viewer"})),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (status, body, _) = ada
        .send(&server, Method::DELETE, "/api/users/ada", None)
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    // A role change applies to live sessions within a second.
    let (status, _, _) = ada
        .send(
            &server,
            Method::PATCH,
            "/api/users/bob",
            Some(json!({"role": "viewer"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = bob.send(&server, Method::GET, "/api/agents", None).await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "a viewer does not read agents"
    );

    // Signing out ends the session: the old cookie is nobody.
    let stolen = bob.clone();
    let (status, body, _) = bob
        .send(&server, Method::DELETE, "/api/session", None)
        .await;
    assert_eq!(
        (status, body["signed_out"].as_bool()),
        (StatusCode::OK, Some(true))
    );
    assert!(bob.cookie.is_none(), "the cookie is cleared");
    let (status, _, _) = stolen
        .clone()
        .send(&server, Method::GET, "/api/tasks", None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (_, me, _) = stolen
        .clone()
        .send(&server, Method::GET, "/api/me", None)
        .await;
    assert_eq!(
        me["principal"],
        Value::Null,
        "an ended session leaves the sign-in page open"
    );

    // Removing a user ends their sessions.
    assert_eq!(bob.sign_in(&server, "bob", PASSWORD).await, StatusCode::OK);
    let (status, _, _) = ada
        .send(&server, Method::DELETE, "/api/users/bob", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _, _) = bob.send(&server, Method::GET, "/api/tasks", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        bob.sign_in(&server, "bob", PASSWORD).await,
        StatusCode::UNAUTHORIZED
    );

    // A server restarted with someone able to sign in prints no link.
    let server = server.restart();
    let printed =
        std::fs::read_to_string(server.data_dir.join("server.stdout")).unwrap_or_default();
    assert!(!printed.contains("#link="), "{printed}");
}

#[tokio::test]
async fn session_fixation_guessing_and_brute_force_are_refused_and_audited() {
    let server = Server::start_with_config(REQUIRED, &[]);
    let out = cli(
        &server.data_dir,
        &["users", "add", "grace@example.org", "--role", "operator"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let link = stdout.lines().last().unwrap();
    assert!(link.contains("#link="), "{stdout}");
    let mut grace = Browser::default();
    let (status, _) = grace.use_link(&server, link, None, PASSWORD).await;
    assert_eq!(status, StatusCode::OK);
    let out = cli(&server.data_dir, &["users", "list"]);
    let listed = String::from_utf8(out.stdout).unwrap();
    assert!(
        listed.contains("grace@example.org")
            && listed.contains("operator")
            && listed.contains("set"),
        "{listed}"
    );

    // Fixation: a session id planted before sign-in is never the one signed in.
    let mut planted = Browser {
        cookie: Some("planted-by-an-attacker".into()),
        csrf: None,
    };
    assert_eq!(
        planted
            .sign_in(&server, "grace@example.org", PASSWORD)
            .await,
        StatusCode::OK
    );
    assert_ne!(planted.cookie.as_deref(), Some("planted-by-an-attacker"));
    // Signing in again from a browser ends the session it had.
    let before = grace.clone();
    assert_eq!(
        grace.sign_in(&server, "grace@example.org", PASSWORD).await,
        StatusCode::OK
    );
    assert_ne!(before.cookie, grace.cookie);
    let (status, _, _) = before
        .clone()
        .send(&server, Method::GET, "/api/tasks", None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // A forged cookie is nobody.
    let mut forged = Browser {
        cookie: Some("x".repeat(43)),
        csrf: None,
    };
    let (status, _, _) = forged.send(&server, Method::GET, "/api/tasks", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // Brute force: wrong passwords until the account's limit (ten a minute, the sign-ins above
    // counted), then refused even with the right one.
    let mut attacker = Browser::default();
    let mut statuses = Vec::new();
    let mut headers = HeaderMap::new();
    for attempt in 0..25 {
        let body =
            json!({"name": "grace@example.org", "password": format!("guess number {attempt}")});
        let answer = attacker
            .send(&server, Method::POST, "/api/session", Some(body))
            .await;
        statuses.push(answer.0);
        if answer.0 != StatusCode::UNAUTHORIZED {
            assert!(
                answer.1["error"]
                    .as_str()
                    .unwrap()
                    .contains("too many sign-in attempts"),
                "{}",
                answer.1
            );
            headers = answer.2;
            break;
        }
    }
    // Within ten attempts, or twenty when a minute of the clock turned meanwhile.
    assert_eq!(
        statuses.last(),
        Some(&StatusCode::TOO_MANY_REQUESTS),
        "{statuses:?}"
    );
    let wait: u64 = headers[header::RETRY_AFTER]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    let status = attacker
        .sign_in(&server, "grace@example.org", PASSWORD)
        .await;
    if status != StatusCode::TOO_MANY_REQUESTS {
        assert!(
            status == StatusCode::OK && wait <= 1,
            "{status} with {wait} s to wait"
        );
    }
    // An unknown name is as wrong as a wrong password.
    let (status, unknown, _) = Browser::default()
        .send(
            &server,
            Method::POST,
            "/api/session",
            Some(json!({"name": "nobody", "password": PASSWORD})),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(unknown["error"], "wrong name or password");

    // Audited by name, never with a password or a cookie.
    let admin = crate::access::token(&server, "auditor", "admin");
    let audit = eventually(10, async || {
        let (_, answer) = crate::access::get_as(&server, "/api/audit?limit=200", &admin).await;
        (answer["total"].as_u64() >= Some(12)).then_some(answer)
    })
    .await;
    let entries = audit["entries"].as_array().unwrap();
    let failed = entries
        .iter()
        .filter(|e| e["action"] == "POST /api/session" && e["status"] == 401)
        .filter(|e| e["target"] == "/api/session (grace@example.org)")
        .count();
    assert!(failed >= 8, "{audit}");
    assert!(entries.iter().any(|e| e["action"] == "POST /api/session"
        && e["status"] == 200
        && e["principal"] == "user:grace@example.org"));
    let text = audit.to_string();
    assert!(!text.contains(PASSWORD) && !text.contains("guess number"));
    for cookie in [&grace.cookie, &planted.cookie] {
        assert!(!text.contains(cookie.as_deref().unwrap()));
    }
    let log = std::fs::read_to_string(server.data_dir.join("server.log")).unwrap();
    assert!(!log.contains(PASSWORD) && !log.contains(grace.cookie.as_deref().unwrap()));
    assert!(!log.contains(link.split_once("#link=").unwrap().1));
}

#[tokio::test]
async fn members_see_and_act_on_their_own_conversations_and_approvals_only() {
    let fake = crate::approvals::note_script("Plan", "Done.").await;
    let config = format!("{REQUIRED}\n[tools.create_note]\napproval = true\n");
    let server = Server::start_with_config(&config, &crate::support::openai_env(&fake.url));
    let token = |name: &str, role: &str| crate::access::token(&server, name, role);
    let (ann, ben, ops) = (
        token("ann", "member"),
        token("ben", "member"),
        token("ops", "operator"),
    );
    let call = async |token: &str, method: Method, path: &str, body: Option<Value>| {
        let (status, body, _) = crate::access::call(&server, method, path, Some(token), body).await;
        (status, body)
    };

    let (status, paused) = call(
        &ann,
        Method::POST,
        "/api/chat",
        Some(json!({"prompt": "Save a plan"})),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{paused}");
    let conversation = paused["conversation_id"].as_str().unwrap().to_owned();
    let approval = paused["approval_id"].as_str().unwrap().to_owned();

    let (_, mine) = call(&ann, Method::GET, "/api/conversations", None).await;
    assert_eq!(mine["total"], 1);
    assert_eq!(mine["conversations"][0]["started_by"], "token:ann");
    let (_, theirs) = call(&ben, Method::GET, "/api/conversations", None).await;
    assert_eq!(theirs["total"], 0, "{theirs}");
    let (_, waiting) = call(&ben, Method::GET, "/api/approvals", None).await;
    assert_eq!(waiting["approvals"], json!([]));

    // Another member's conversation and approval: refused, naming the permission.
    let path = format!("/api/conversations/{conversation}");
    let decision = format!("/api/approvals/{approval}");
    let tries = [
        (Method::GET, path.clone(), None),
        (Method::DELETE, path.clone(), None),
        (
            Method::POST,
            "/api/chat".to_owned(),
            Some(json!({"prompt": "what did ann say?", "conversation_id": conversation})),
        ),
        (
            Method::POST,
            decision.clone(),
            Some(json!({"decision": "approve"})),
        ),
    ];
    for (method, path, body) in tries {
        let (status, body) = call(&ben, method.clone(), &path, body).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("manage_conversations"),
            "{body}"
        );
    }
    let (_, shown) = call(&ann, Method::GET, &path, None).await;
    assert_eq!(
        shown["messages"].as_array().unwrap().len(),
        1,
        "nothing was added: {shown}"
    );

    // An operator sees everyone's; the member decides her own.
    let (_, all) = call(&ops, Method::GET, "/api/conversations", None).await;
    assert_eq!(all["total"], 1);
    let (_, pending) = call(&ops, Method::GET, "/api/approvals?status=pending", None).await;
    assert_eq!(pending["approvals"][0]["id"], approval.as_str());
    let (status, decided) = call(
        &ann,
        Method::POST,
        &decision,
        Some(json!({"decision": "approve"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{decided}");
    assert_eq!(decided["decided_by"], "token:ann");

    // Traces: a viewer sees the run's shape, not what was written in it.
    let trace = format!("/api/traces/{}", paused["trace_id"].as_str().unwrap());
    let viewer = token("watcher", "viewer");
    let (status, hidden) = call(&viewer, Method::GET, &trace, None).await;
    assert_eq!(status, StatusCode::OK, "{hidden}");
    assert_eq!(
        (&hidden["content_hidden"], &hidden["prompt"]),
        (&json!(true), &json!(""))
    );
    let steps = hidden["steps"].as_array().unwrap();
    assert!(!steps.is_empty());
    assert!(
        steps
            .iter()
            .all(|step| step["response_text"].is_null() && step["input"].is_null()),
        "{hidden}"
    );
    assert!(!hidden.to_string().contains("Plan"), "{hidden}");
    let (_, listed) = call(&viewer, Method::GET, "/api/traces", None).await;
    assert_eq!(listed["traces"][0]["content_hidden"], true);
    let (_, whole) = call(&ops, Method::GET, &trace, None).await;
    assert_eq!(
        (&whole["prompt"], &whole["started_by"]),
        (&json!("Save a plan"), &json!("token:ann"))
    );
    assert!(whole.get("content_hidden").is_none());
    // The member who asked reads her own run; another member reads its shape only.
    let (_, own) = call(&ann, Method::GET, &trace, None).await;
    assert_eq!(own["prompt"], "Save a plan", "{own}");
    let (_, other) = call(&ben, Method::GET, &trace, None).await;
    assert_eq!(other["content_hidden"], true, "{other}");
    // A run asked for over MCP is a task titled with its prompt: hers to read, not others'.
    if crate::mcp::sdk_available() {
        let url = server.url("/mcp");
        let arguments = json!({"prompt": "Ann's private question"}).to_string();
        crate::mcp::mcp_client(&["auto", "http", &url, &ann, "--", "ask_default", &arguments])
            .await;
        let titles = async |token: &str| {
            let (_, tasks) = call(token, Method::GET, "/api/tasks", None).await;
            let task = tasks["tasks"][0].clone();
            (
                task["title"].clone(),
                task["started_by"].clone(),
                task["content_hidden"].clone(),
            )
        };
        assert_eq!(
            titles(&ann).await,
            (
                json!("Ann's private question"),
                json!("token:ann"),
                Value::Null
            )
        );
        assert_eq!(
            titles(&viewer).await,
            (json!(""), json!("token:ann"), json!(true))
        );
    }

    // Refusals are audited with who tried.
    let auditor = token("auditor", "admin");
    let audit = eventually(10, async || {
        let (_, audit) = call(
            &auditor,
            Method::GET,
            "/api/audit?principal=token:ben",
            None,
        )
        .await;
        (audit["total"] == 3).then_some(audit)
    })
    .await;
    assert!(
        audit["entries"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["status"] == 403),
        "{audit}"
    );
}

/// An agent closed to roles: others cannot chat with it, schedule it, change it, or see it
/// over MCP; admins always may.
#[tokio::test]
async fn an_agent_open_to_some_roles_is_refused_to_the_others_everywhere() {
    let server = Server::start_with_config(REQUIRED, &[]);
    let token = |name: &str, role: &str| crate::access::token(&server, name, role);
    let (admin, operator, member) = (
        token("root", "admin"),
        token("ops", "operator"),
        token("ann", "member"),
    );
    let call = async |token: &str, method: Method, path: &str, body: Option<Value>| {
        let (status, body, _) = crate::access::call(&server, method, path, Some(token), body).await;
        (status, body)
    };
    let agent = json!({
        "name": "shell",
        "system_prompt": "You run programs.",
        "access": {"roles": ["operator"], "groups": ["sre"]},
    });
    let (status, created) = call(&admin, Method::POST, "/api/agents", Some(agent)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(
        created["access"],
        json!({"roles": ["operator"], "groups": ["sre"]})
    );

    let ask = json!({"agent": "shell", "prompt": "hi"});
    let (status, refused) = call(&member, Method::POST, "/api/chat", Some(ask.clone())).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        refused["error"],
        "agent \"shell\" is open to admins and role operator, group \"sre\"; token:ann is not among them"
    );
    for token in [&operator, &admin] {
        let (status, body) = call(token, Method::POST, "/api/chat", Some(ask.clone())).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    // Closed to operators too: they may neither change it back nor schedule it.
    let (status, _) = call(
        &admin,
        Method::PATCH,
        "/api/agents/shell",
        Some(json!({"access": {"roles": ["admin"]}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = call(
        &operator,
        Method::PATCH,
        "/api/agents/shell",
        Some(json!({"access": null})),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let schedule = json!({"name": "nightly", "cron_expression": "0 3 * * *", "agent_profile_name": "shell", "prompt": "x"});
    let (status, body) = call(
        &operator,
        Method::POST,
        "/api/schedules",
        Some(schedule.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, body) = call(&operator, Method::DELETE, "/api/agents/shell", None).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, body) = call(&admin, Method::POST, "/api/schedules", Some(schedule)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (status, _) = call(&operator, Method::POST, "/api/schedules/nightly/run", None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // Bad access: the field named, nothing changed.
    for bad in [
        json!({}),
        json!({"roles": ["root"]}),
        json!({"groups": [" padded"]}),
        json!("admin"),
    ] {
        let (status, body) = call(
            &admin,
            Method::PATCH,
            "/api/agents/shell",
            Some(json!({"access": bad})),
        )
        .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {body}");
    }
    let (_, shown) = call(&admin, Method::GET, "/api/agents/shell", None).await;
    assert_eq!(shown["access"], json!({"roles": ["admin"], "groups": []}));

    // Over MCP, a member is not offered it; an admin is.
    if crate::mcp::sdk_available() {
        let url = server.url("/mcp");
        let tools = async |token: &str| {
            let answer = crate::mcp::mcp_client(&[
                "legacy",
                "http",
                &url,
                token,
                "--",
                "ask_default",
                r#"{"prompt": "hi"}"#,
            ])
            .await;
            answer["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        };
        assert!(!tools(&member).await.contains(&"ask_shell".to_owned()));
        assert!(tools(&admin).await.contains(&"ask_shell".to_owned()));
    }
}

/// `users forget NAME`: what a person wrote goes (their conversations, their runs' content), the
/// runs stay as counts, their account ends, and the audit log keeps a tombstone.
#[tokio::test]
async fn a_forgotten_person_leaves_counts_and_a_tombstone_only() {
    let server = Server::start_with_config(REQUIRED, &[]);
    let out = cli(
        &server.data_dir,
        &["users", "add", "grace", "--role", "member"],
    );
    assert!(out.status.success());
    let link = String::from_utf8(out.stdout).unwrap();
    let mut grace = Browser::default();
    let (status, body) = grace
        .use_link(&server, link.lines().last().unwrap(), None, PASSWORD)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, asked, _) = grace
        .send(
            &server,
            Method::POST,
            "/api/chat",
            Some(json!({"prompt": "Grace's secret plan"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{asked}");
    let ops = crate::access::token(&server, "ops", "admin");
    let read = async |path: &str| {
        let (status, body, _) =
            crate::access::call(&server, Method::GET, path, Some(&ops), None).await;
        (status, body)
    };
    let trace = format!("/api/traces/{}", asked["trace_id"].as_str().unwrap());
    let (_, before) = read(&trace).await;
    assert_eq!(before["started_by"], "user:grace");
    assert!(before.to_string().contains("secret plan"));
    let (_, traces_before) = read("/api/traces").await;

    let out = cli(&server.data_dir, &["users", "forget", "grace"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("1 conversations deleted"), "{said}");

    let conversation = format!(
        "/api/conversations/{}",
        asked["conversation_id"].as_str().unwrap()
    );
    assert_eq!(read(&conversation).await.0, StatusCode::NOT_FOUND);
    let (_, after) = read(&trace).await;
    assert!(!after.to_string().contains("secret plan"), "{after}");
    assert_eq!(
        (&after["prompt"], &after["status"]),
        (&json!(""), &before["status"])
    );
    assert_eq!(read("/api/traces").await.1["total"], traces_before["total"]);
    // Her session ends as a revoked one does, within a second.
    eventually(5, async || {
        let (_, me, _) = grace
            .clone()
            .send(&server, Method::GET, "/api/me", None)
            .await;
        me["principal"].is_null().then_some(())
    })
    .await;
    let (_, audit) = read("/api/audit?principal=owner").await;
    assert!(
        audit["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["action"] == "forget user" && e["target"] == "user:grace"),
        "{audit}"
    );

    let out = cli(&server.data_dir, &["users", "forget", "grace"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no user named \"grace\""));
}
