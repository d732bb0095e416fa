//! MCP both ways, against the reference Python SDK (`mcp` 2.x) at both ends: an agent calls
//! tools of a stdio and a Streamable HTTP server; servers that die, stall, hang at the
//! handshake or change their tools; MCP clients listing and calling agents over `/mcp` and
//! `service-runtime mcp`.
//!
//! Without the SDK (`pip install mcp==2.3.0`) the tests say so loudly and pass without
//! running; with `CI=true` that is a failure.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::fakes::llm::{self, Reply};
use crate::guests::guest;
use crate::support::{BIN, Server, assert_error, cli, eventually, openai_env, tool_available};
use crate::wasm::{ECHO_GRANT, drop_in, loaded};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../tests/fixtures/mcp/{name}"))
}

pub fn sdk_available() -> bool {
    let present = Command::new("python3")
        .args(["-c", "import mcp"])
        .output()
        .is_ok_and(|out| out.status.success());
    tool_available(
        present,
        "MCP TESTS SKIPPED: the MCP Python SDK is not installed (pip install mcp==2.3.0)",
    )
}

/// The fixture server over Streamable HTTP on a free port; killed when dropped.
struct HttpFixture {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl HttpFixture {
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port_file = dir.path().join("port");
        let child = Command::new("python3")
            .arg(fixture("tools_server.py"))
            .arg("http")
            .arg(&port_file)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("log")).unwrap())
            .spawn()
            .unwrap();
        let port = eventually(30, async || std::fs::read_to_string(&port_file).ok()).await;
        let url = format!("http://127.0.0.1:{port}/mcp");
        // Listening once it answers at all.
        eventually(30, async || reqwest::get(&url).await.ok()).await;
        Self {
            child,
            url,
            _dir: dir,
        }
    }
}

impl Drop for HttpFixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `[mcp.servers.<name>]` running the fixture over stdio with `env` (inline table entries).
pub fn stdio_entry(name: &str, env: &str) -> String {
    format!(
        "[mcp.servers.{name}]\ncommand = [\"python3\", {:?}, \"stdio\"]\nenv = {{ {env} }}\n",
        fixture("tools_server.py").to_str().unwrap()
    )
}

async fn server_status(server: &Server, name: &str) -> Value {
    let (status, body) = server.get("/api/mcp/servers").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no server {name}: {body}"))
}

async fn ready(server: &Server, name: &str) -> Value {
    eventually(60, async || {
        let status = server_status(server, name).await;
        (status["state"] == "ready").then_some(status)
    })
    .await
}

async fn create_agent(server: &Server, name: &str, tools: Value) -> Value {
    let (status, agent) = server
        .post(
            "/api/agents",
            json!({"name": name, "system_prompt": "Use your tools.", "tools": tools}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{agent}");
    agent
}

async fn chat(server: &Server, agent: &str) -> Value {
    let (status, answer) = server
        .post("/api/chat", json!({"prompt": "go", "agent": agent}))
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer
}

fn offered(request: &llm::Recorded) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn agents_call_the_tools_they_name_of_stdio_and_http_servers() {
    if !sdk_available() {
        return;
    }
    let remote = HttpFixture::start().await;
    let fake = llm::openai(vec![
        Reply::Tools(vec![
            ("c1", "mcp__files__add", json!({"a": 2, "b": 3})),
            ("c2", "mcp__files__echo", json!({"text": "near"})),
            ("c3", "mcp__remote__echo", json!({"text": "far"})),
            ("c4", "mcp__files__broken", json!({})),
        ]),
        Reply::Text("done"),
        Reply::Text("plain"),
    ])
    .await;
    let config = format!(
        "{}[mcp.servers.remote]\nurl = {:?}\nheaders = {{ Authorization = \"Bearer {{{{secret:REMOTE_TOKEN}}}}\" }}\n",
        stdio_entry("files", "FIXTURE_SETTING = \"on\""),
        remote.url
    );
    let mut env = openai_env(&fake.url);
    env.push(("REMOTE_TOKEN", "s3cret-token".into()));
    let server = Server::start_with_config(&config, &env);
    let files = ready(&server, "files").await;
    assert_eq!(
        (
            files["transport"].as_str(),
            files["tools"].as_u64(),
            files["server"].as_str()
        ),
        (Some("stdio"), Some(8), Some("test-tools 1.0"))
    );
    assert_eq!(
        files["protocol_version"], "2026-07-28",
        "the newest revision both speak"
    );
    let remote_status = ready(&server, "remote").await;
    assert_eq!(remote_status["transport"], "http");

    // Named tools only: a wildcard for one server, one tool of the other.
    let agent = create_agent(
        &server,
        "operator",
        json!(["mcp__files__*", "mcp__remote__echo"]),
    )
    .await;
    assert_eq!(agent["unavailable_tools"], json!([]));
    let answer = chat(&server, "operator").await;
    let calls = answer["tool_calls"].as_array().unwrap();
    assert_eq!(calls[0]["output"], "5");
    assert_eq!(
        calls[1]["output"], "near | authorization=None | env=on",
        "the entry's env reaches the program"
    );
    assert_eq!(
        calls[2]["output"], "far | authorization=Bearer s3cret-token | env=None",
        "the header's secret is filled from the environment"
    );
    assert!(
        calls[3]["error"]
            .as_str()
            .is_some_and(|e| e.contains("Error executing tool broken")),
        "a tool's failure is a tool error: {}",
        calls[3]
    );
    let requests = fake.requests();
    let tools = offered(&requests[0]);
    for name in ["mcp__files__add", "mcp__files__slow", "mcp__remote__echo"] {
        assert!(tools.contains(&name.to_owned()), "{name} in {tools:?}");
    }
    assert!(
        !tools.contains(&"mcp__remote__add".to_owned()),
        "not named: {tools:?}"
    );
    let schema = &requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "mcp__files__add")
        .unwrap()["function"];
    assert_eq!(schema["description"], "Adds two integers.");
    assert_eq!(schema["parameters"]["required"], json!(["a", "b"]));

    // A profile whose list is unset is offered no MCP tool.
    chat(&server, "default").await;
    let tools = offered(&fake.requests()[2]);
    assert!(
        !tools.is_empty() && !tools.iter().any(|t| t.starts_with("mcp__")),
        "{tools:?}"
    );

    // The calls are in the trace like any tool's.
    let (_, trace) = server
        .get(&format!(
            "/api/traces/{}",
            answer["trace_id"].as_str().unwrap()
        ))
        .await;
    let invoked: Vec<&str> = trace["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "tool_invocation")
        .map(|s| s["tool_name"].as_str().unwrap())
        .collect();
    assert_eq!(
        invoked,
        [
            "mcp__files__add",
            "mcp__files__echo",
            "mcp__remote__echo",
            "mcp__files__broken"
        ]
    );
    let (_, listing) = server.get("/api/tools").await;
    let add = listing["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__files__add")
        .unwrap();
    assert_eq!(add["named_only"], true);
    let (_, statuses) = server.get("/api/mcp/servers").await;
    assert!(!statuses.to_string().contains("s3cret"), "{statuses}");
    // A name under a configured server is accepted before the server offers it.
    create_agent(&server, "later", json!(["mcp__files__not_yet"])).await;
    let (_, later) = server.get("/api/agents/later").await;
    assert!(
        later["unavailable_tools"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("the MCP server \"files\""),
        "{later}"
    );
    let (status, refused) = server
        .post(
            "/api/agents",
            json!({"name": "x", "system_prompt": "x", "tools": ["mcp__nowhere__*"]}),
        )
        .await;
    assert_error(
        &(status, refused),
        StatusCode::BAD_REQUEST,
        "mcp__nowhere__*",
    );

    // A component gets an MCP tool only when its grant names it: `*` does not cover it.
    drop_in(&server, "echo", &guest("echo"), ECHO_GRANT);
    loaded(&server, "echo").await;
    let call = async || {
        server
            .send_text(
                Method::POST,
                "/api/adapters/echo/tool?name=mcp__files__add",
                r#"{"a": 20, "b": 22}"#,
            )
            .await
    };
    let (status, refused) = call().await;
    assert!(
        status == StatusCode::BAD_GATEWAY && refused.contains("not granted"),
        "{status} {refused}"
    );
    let naming = ECHO_GRANT.replace("tools = [\"*\"]", "tools = [\"*\", \"mcp__files__add\"]");
    std::fs::write(server.data_dir.join("adapters/echo.toml"), naming).unwrap();
    let answer = eventually(20, async || {
        let (status, answer) = call().await;
        (status == StatusCode::OK).then_some(answer)
    })
    .await;
    assert_eq!(answer, "42");
}

/// Whether a process is gone (a zombie waiting for its reaper counts as gone).
fn gone(pid: &str) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    // The state follows the command name, which is in parentheses.
    stat.rsplit(')')
        .next()
        .is_some_and(|rest| rest.trim_start().starts_with('Z'))
}

#[tokio::test]
async fn servers_that_stall_die_or_change_are_handled_and_none_outlives_the_runtime() {
    let _heavy = crate::support::heavy().await;
    if !sdk_available() {
        return;
    }
    let fake = llm::openai(vec![
        Reply::Tools(vec![("c1", "mcp__files__slow", json!({"seconds": 30}))]),
        Reply::Text("ok"),
        // Long: only a cancel ends it before the test gives up waiting for one.
        Reply::Tools(vec![("c1b", "mcp__patient__slow", json!({"seconds": 600}))]),
        Reply::Tools(vec![("c2", "mcp__files__die", json!({}))]),
        Reply::Text("ok"),
        Reply::Tools(vec![("c3", "mcp__files__grow", json!({}))]),
        Reply::Text("ok"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (pids, cancels) = (dir.path().join("pids"), dir.path().join("cancels"));
    let patient_cancels = dir.path().join("patient-cancels");
    let config = format!(
        "{}timeout_secs = 1\n{}",
        stdio_entry(
            "files",
            &format!("PID_FILE = {:?}, CANCEL_FILE = {:?}", pids, cancels)
        ),
        stdio_entry("patient", &format!("CANCEL_FILE = {patient_cancels:?}"))
    );
    let mut server = Server::start_with_config(&config, &openai_env(&fake.url));
    ready(&server, "files").await;
    ready(&server, "patient").await;
    create_agent(
        &server,
        "operator",
        json!(["mcp__files__*", "mcp__patient__slow"]),
    )
    .await;

    // A call past its timeout is a tool error, and the server is told to stop working on it.
    let answer = chat(&server, "operator").await;
    let error = answer["tool_calls"][0]["error"].as_str().unwrap();
    assert!(error.contains("did not answer within 1 s"), "{error}");
    eventually(10, async || {
        std::fs::read_to_string(&cancels)
            .ok()
            .filter(|text| text.contains("slow cancelled"))
    })
    .await;

    // A run cancelled while its tool works (the client went away) abandons the call, and the
    // server is told. The client is a plain socket, closed once the tool call shows: a
    // dropped reqwest body leaves its connection open until the server writes again.
    let body = json!({"prompt": "go", "agent": "operator"}).to_string();
    let address = server.url("").trim_start_matches("http://").to_owned();
    let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
    let request = format!(
        "POST /api/chat/stream HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    );
    tokio::io::AsyncWriteExt::write_all(&mut socket, request.as_bytes())
        .await
        .unwrap();
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains("tool_call") {
        let mut chunk = [0u8; 4096];
        let read = tokio::io::AsyncReadExt::read(&mut socket, &mut chunk)
            .await
            .unwrap();
        assert!(
            read > 0,
            "the stream ended early: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&chunk[..read]);
    }
    // The tool must be running: a cancel the MCP server reads before its handler starts ends
    // the call before the tool could note it (the SDK's own race, seen under load).
    eventually(30, async || {
        std::fs::read_to_string(&patient_cancels)
            .ok()
            .filter(|text| text.contains("slow started"))
    })
    .await;
    drop(socket);
    // The server notices at once that the socket closed, and tells the MCP server. Less than
    // the call timeout (60 s), so that only the client's leaving can have ended the call.
    eventually(45, async || {
        std::fs::read_to_string(&patient_cancels)
            .ok()
            .filter(|text| text.contains("slow cancelled"))
    })
    .await;

    // A server that dies is started again, and a call made at once, while it is down, waits
    // for the restart instead of failing.
    let answer = chat(&server, "operator").await;
    assert!(answer["tool_calls"][0]["error"].is_string(), "{answer}");
    let answer = chat(&server, "operator").await;
    assert_eq!(answer["tool_calls"][0]["output"], "grown", "{answer}");
    let restarted = server_status(&server, "files").await;
    assert!(restarted["restarts"].as_u64() >= Some(1), "{restarted}");
    assert_eq!(
        std::fs::read_to_string(&pids).unwrap().lines().count(),
        2,
        "a second process"
    );

    // New tools are registered when the server says its list changed (the call above grew it).
    eventually(15, async || {
        let (_, tools) = server.get("/api/tools").await;
        tools.to_string().contains("mcp__files__late").then_some(())
    })
    .await;
    assert_eq!(server_status(&server, "files").await["tools"], 9);

    // kill -9 of the runtime takes its servers' processes with it.
    let text = std::fs::read_to_string(&pids).unwrap();
    let live = text.lines().last().unwrap().to_owned();
    assert!(!gone(&live));
    server.stop();
    // Generous for a machine busy with other tests; the guard wakes as the runtime exits.
    eventually(20, async || gone(&live).then_some(())).await;
}

#[tokio::test]
async fn what_a_server_may_make_the_runtime_hold_is_bounded() {
    if !sdk_available() {
        return;
    }
    let fake = llm::openai(vec![
        Reply::Tools(vec![("c1", "mcp__flood__big", json!({"kib": 100}))]),
        Reply::Text("ok"),
        Reply::Tools(vec![("c2", "mcp__flood__big", json!({"kib": 5000}))]),
        Reply::Text("ok"),
        Reply::Tools(vec![("c3", "mcp__flood__big", json!({"kib": 1}))]),
        Reply::Text("ok"),
    ])
    .await;
    let server = Server::start_with_config(
        &format!(
            "{}timeout_secs = 3\n",
            stdio_entry("flood", "EXTRA_TOOLS = \"80\"")
        ),
        &openai_env(&fake.url),
    );
    // 88 offered, 64 registered, the rest named as skipped.
    let flood = ready(&server, "flood").await;
    assert_eq!(flood["tools"], 64);
    let skipped = flood["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 24);
    assert!(
        skipped[0]
            .as_str()
            .unwrap()
            .contains("past the first 64 tools"),
        "{flood}"
    );
    let (_, tools) = server.get("/api/tools").await;
    let wordy = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__flood__wordy")
        .unwrap()["description"]
        .as_str()
        .unwrap()
        .chars()
        .count();
    assert_eq!(wordy, 2_048, "the description is cut");
    create_agent(&server, "operator", json!(["mcp__flood__big"])).await;

    // An answer past what a tool may hand on is cut, and says so.
    let answer = chat(&server, "operator").await;
    let output = answer["tool_calls"][0]["output"].as_str().unwrap();
    assert!(output.len() < 66_000, "{}", output.len());
    assert!(output.ends_with("[cut: the tool answered 102400 bytes; these are the first 65536]"));

    // A message past 4 MiB is discarded as it arrives (never held whole): the call it answers
    // fails at its timeout, and the connection serves on.
    let answer = chat(&server, "operator").await;
    let error = answer["tool_calls"][0]["error"].as_str().unwrap();
    assert!(error.contains("did not answer within 3 s"), "{error}");
    let answer = chat(&server, "operator").await;
    assert_eq!(
        answer["tool_calls"][0]["output"].as_str().unwrap().len(),
        1024
    );
    assert_eq!(server_status(&server, "flood").await["restarts"], 0);
}

#[tokio::test]
async fn bad_entries_stop_the_start_and_a_silent_server_is_an_error_not_a_hang() {
    for (config, needle) in [
        (
            "[mcp.servers.both]\ncommand = [\"x\"]\nurl = \"http://127.0.0.1:1/mcp\"\n",
            "[mcp.servers.both] needs exactly one of command",
        ),
        (
            "[mcp.servers.typo]\ncomand = [\"x\"]\n",
            "unknown field `comand`",
        ),
        (
            "[mcp.servers.leak]\nurl = \"http://127.0.0.1:1/mcp\"\nheaders = { Authorization = \"Bearer sk-1\" }\n",
            "config.toml never holds one",
        ),
        (
            "[mcp_server]\ntools = [\"shell_exec\"]\n",
            "gated tools are never served over MCP",
        ),
    ] {
        let stderr = crate::support::refused_start(config).stderr;
        assert!(stderr.contains(needle), "{stderr}");
    }

    let server = Server::start_with_config(
        "[mcp]\nconnect_timeout_secs = 1\n[mcp.servers.silent]\ncommand = [\"sleep\", \"30\"]\n",
        &[],
    );
    let failed = eventually(15, async || {
        let status = server_status(&server, "silent").await;
        (status["state"] == "error").then_some(status)
    })
    .await;
    assert_eq!(failed["error"], "no answer to the handshake within 1 s");
    assert!(failed["error_at"].is_string());
    let (status, _) = server.get("/api/health").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_server_slow_to_answer_or_older_than_discovery_is_connected_at_the_first_try() {
    if !sdk_available() {
        return;
    }
    let fake = llm::openai(vec![
        Reply::Tools(vec![("c1", "mcp__old__shout", json!({"text": "hello"}))]),
        Reply::Text("ok"),
    ])
    .await;
    // Slower than the 10 s the MCP library gives discovery on its own, within the handshake's
    // configured 30 s.
    let dir = tempfile::tempdir().unwrap();
    let asked = dir.path().join("asked");
    let config = format!(
        "{}[mcp.servers.old]\ncommand = [\"python3\", {:?}]\nenv = {{ ASKED_FILE = {:?} }}\n",
        stdio_entry("slow", "START_DELAY = \"11\""),
        fixture("legacy_server.py").to_str().unwrap(),
        asked
    );
    let server = Server::start_with_config(&config, &openai_env(&fake.url));
    let old = ready(&server, "old").await;
    assert_eq!(old["protocol_version"], "2025-11-25", "{old}");
    assert_eq!(old["server"], "legacy-tools 0.9", "{old}");
    assert_eq!(old["restarts"], 0, "{old}");
    assert_eq!(
        std::fs::read_to_string(&asked).unwrap(),
        "2025-11-25\n",
        "initialize asks for the newest revision that has it"
    );
    let slow = ready(&server, "slow").await;
    assert_eq!(slow["protocol_version"], "2026-07-28", "{slow}");
    assert_eq!(slow["restarts"], 0, "{slow}");

    create_agent(&server, "caller", json!(["mcp__old__shout"])).await;
    let answer = chat(&server, "caller").await;
    assert_eq!(answer["tool_calls"][0]["output"], "HELLO", "{answer}");
}

/// Runs the fixture client; its JSON answer. (Awaited, so the fake model keeps answering.)
pub(crate) async fn mcp_client(args: &[&str]) -> Value {
    let out = tokio::process::Command::new("python3")
        .arg(fixture("client.py"))
        .args(args)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "the MCP client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test]
async fn mcp_clients_list_and_call_agents_over_http_and_stdio() {
    if !sdk_available() {
        return;
    }
    let fake = llm::openai(vec![
        Reply::Text("hello from the agent"),
        Reply::Text("hello from the agent"),
        Reply::Text("more from the agent"),
    ])
    .await;
    let server = Server::start_with_config(
        "[mcp_server]\ntools = [\"search_notes\"]\n",
        &openai_env(&fake.url),
    );
    create_agent(&server, "Research desk", json!([])).await;
    let url = server.url("/mcp");
    let mut conversation = String::new();
    for (mode, version) in [("legacy", "2025-11-25"), ("auto", "2026-07-28")] {
        let answer = mcp_client(&[
            mode,
            "http",
            &url,
            "--",
            "ask_Research_desk",
            r#"{"prompt": "what is new?"}"#,
        ])
        .await;
        assert_eq!(answer["protocol_version"], version);
        let names: Vec<&str> = answer["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["ask_default", "ask_Research_desk", "search_notes"]);
        assert_eq!(answer["tools"][1]["title"], "Research desk");
        assert_eq!(
            (answer["is_error"].as_bool(), answer["text"].as_str()),
            (Some(false), Some("hello from the agent"))
        );
        let trace_id = answer["structured"]["trace_id"].as_str().unwrap();
        let (status, trace) = server.get(&format!("/api/traces/{trace_id}")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            (
                trace["source"].as_str(),
                trace["agent_profile_name"].as_str()
            ),
            (Some("mcp"), Some("Research desk"))
        );
        assert_eq!(trace["started_by"], "owner", "the machine's user asked");
        let task_id = answer["structured"]["task_id"].as_str().unwrap();
        let (_, tasks) = server.get("/api/tasks").await;
        let task = tasks["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["task_id"] == task_id)
            .unwrap()
            .clone();
        assert_eq!(
            (
                task["status"].as_str(),
                task["title"].as_str(),
                task["started_by"].as_str()
            ),
            (Some("completed"), Some("what is new?"), Some("owner"))
        );
        conversation = answer["structured"]["conversation_id"]
            .as_str()
            .unwrap()
            .to_owned();
    }

    // A client continues a conversation by its id: the agent sees the earlier exchange.
    let arguments = json!({"prompt": "and then?", "conversation_id": conversation}).to_string();
    let answer = mcp_client(&["auto", "http", &url, "--", "ask_Research_desk", &arguments]).await;
    assert_eq!(answer["text"], "more from the agent");
    assert_eq!(
        answer["structured"]["conversation_id"],
        conversation.as_str()
    );
    let earlier = fake.requests()[2].body["messages"].to_string();
    assert!(
        earlier.contains("what is new?") && earlier.contains("hello from the agent"),
        "{earlier}"
    );
    let (_, kept) = server
        .get(&format!("/api/conversations/{conversation}"))
        .await;
    assert_eq!(
        (kept["source"].as_str(), kept["turns"].as_i64()),
        (Some("mcp"), Some(2))
    );
    let unknown = json!({"prompt": "hi", "conversation_id": "nope"}).to_string();
    let refused = mcp_client(&["auto", "http", &url, "--", "ask_Research_desk", &unknown]).await;
    assert_eq!(refused["is_error"], true);
    assert!(
        refused["text"]
            .as_str()
            .unwrap()
            .contains("no conversation"),
        "{refused}"
    );

    // The same over stdio, from a second process on the same data directory (no model is
    // configured there: the offline responder answers).
    let answer = mcp_client(&[
        "auto",
        "stdio",
        BIN,
        "--data-dir",
        server.data_dir.to_str().unwrap(),
        "mcp",
        "--",
        "ask_default",
        r#"{"prompt": "over stdio"}"#,
    ])
    .await;
    assert!(
        answer["text"]
            .as_str()
            .unwrap()
            .contains("You said: \"over stdio\""),
        "{answer}"
    );
    let trace_id = answer["structured"]["trace_id"].as_str().unwrap();
    let (status, _) = server.get(&format!("/api/traces/{trace_id}")).await;
    assert_eq!(status, StatusCode::OK, "one data directory");

    // A web page's request is refused, whatever its method.
    let client = reqwest::Client::new();
    for request in [client.post(&url).json(&json!({})), client.get(&url)] {
        let response = request
            .header("origin", "http://evil.example")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
    }
}

#[tokio::test]
async fn with_a_token_every_mcp_client_must_send_it() {
    if !sdk_available() {
        return;
    }
    let server = Server::start_with(&[("SERVICE_MCP_TOKEN", "m-secret")]);
    let url = server.url("/mcp");
    let response = reqwest::Client::new()
        .post(&url)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(response.headers()["www-authenticate"], "Bearer");
    let wrong = reqwest::Client::new()
        .post(&url)
        .bearer_auth("m-secreT")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    let answer = mcp_client(&[
        "legacy",
        "http",
        &url,
        "m-secret",
        "--",
        "ask_default",
        r#"{"prompt": "hi"}"#,
    ])
    .await;
    assert!(
        answer["text"]
            .as_str()
            .unwrap()
            .contains("You said: \"hi\"")
    );
}

/// `mcp import` reads the `mcpServers` JSON desktop and editor clients keep into config.toml,
/// `command` and `args` as they write them; a credential goes to `.env`, its place in config.toml
/// a placeholder; the server then offers the server's tools. A second import of the same name
/// changes nothing.
#[tokio::test]
async fn mcp_import_reads_a_clients_servers_into_config_with_credentials_kept_out() {
    if !sdk_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data_dir = tmp.path().join("data");
    std::fs::create_dir_all(&data_dir).unwrap();
    let clients = tmp.path().join("claude_desktop_config.json");
    let json = json!({"mcpServers": {"files": {
        "command": "python3",
        "args": [fixture("tools_server.py"), "stdio"],
        "env": {"FIXTURE_SETTING": "plain", "FIXTURE_TOKEN": "tok-secret-9f3"},
    }}});
    std::fs::write(&clients, json.to_string()).unwrap();
    let out = cli(&data_dir, &["mcp", "import", clients.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("imported 1 MCP server(s)") && said.contains("FIXTURE_TOKEN"),
        "{said}"
    );

    let config = std::fs::read_to_string(data_dir.join("config.toml")).unwrap();
    assert!(!config.contains("tok-secret-9f3"), "{config}");
    assert!(
        config.contains("FIXTURE_TOKEN = \"{{secret:FIXTURE_TOKEN}}\""),
        "{config}"
    );
    assert!(config.contains("command = \"python3\""), "{config}");
    let dotenv = data_dir.join(".env");
    assert!(
        std::fs::read_to_string(&dotenv)
            .unwrap()
            .contains("FIXTURE_TOKEN=\"tok-secret-9f3\"")
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&dotenv).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let again = cli(&data_dir, &["mcp", "import", clients.to_str().unwrap()]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr)
            .contains("already has an MCP server named \"files\"")
    );
    assert_eq!(
        std::fs::read_to_string(data_dir.join("config.toml")).unwrap(),
        config
    );

    let server = Server::start_in(&data_dir, &[]);
    let status = ready(&server, "files").await;
    assert_eq!(status["transport"], "stdio", "{status}");
    assert!(status["tools"].as_u64().is_some_and(|n| n > 0), "{status}");
}
