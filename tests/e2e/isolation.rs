//! Resource isolation of components through the real binary: a hostile adapter may burn its
//! own deadline, quota and share, never the server's or a neighbour's.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fakes::llm::{self, Reply};
use crate::guests::{guest, variant};
use crate::support::{Server, assert_error, cli, eventually, openai_env, spawn_fake};
use crate::wasm::{ECHO_GRANT, drop_in, loaded};

/// Hostile's usual grant, with these `[limits]`.
fn hostile_grant(limits: &str) -> String {
    format!(
        "outbound_hosts = [\"http://127.0.0.1:9\"]\njobs = true\nkv = true\ntools = [\"*\"]\n\
         [limits]\n{limits}\n"
    )
}

async fn get(server: &Server, path: &str) -> (StatusCode, String) {
    let response = reqwest::get(server.url(path)).await.unwrap();
    (response.status(), response.text().await.unwrap())
}

async fn entry(server: &Server, name: &str) -> Value {
    server.adapter(name).await.unwrap()
}

/// Twice as many spinning guests as the machine has cores, as jobs and as requests at once.
#[tokio::test]
async fn spinning_guests_never_hold_the_api_or_a_neighbour() {
    let _heavy = crate::support::heavy().await;
    let server = Server::start();
    drop_in(&server, "echo", &guest("echo"), ECHO_GRANT);
    let grant = hostile_grant("handle_http_ms = 30000\nrun_job_ms = 30000");
    drop_in(&server, "hostile", &guest("hostile"), &grant);
    loaded(&server, "echo").await;
    loaded(&server, "hostile").await;

    let cores = std::thread::available_parallelism().map_or(2, usize::from);
    let client = reqwest::Client::new();
    let mut jobs = Vec::new();
    for _ in 0..cores {
        let (status, task_id) = get(&server, "/api/adapters/hostile/spin-job").await;
        assert_eq!(status, StatusCode::ACCEPTED);
        jobs.push(task_id);
    }
    let spinning: Vec<_> = (0..cores)
        .map(|_| tokio::spawn(client.get(server.url("/api/adapters/hostile/loop")).send()))
        .collect();
    eventually(20, async || {
        let (_, tasks) = server.get("/api/tasks?status=running").await;
        let running = tasks["tasks"]
            .as_array()?
            .iter()
            .filter(|t| jobs.iter().any(|j| t["task_id"] == j.as_str()))
            .count();
        (running == cores).then_some(())
    })
    .await;

    // Every answer comes while all of them spin. The bound is loose on purpose: the latency
    // figures are the benchmark's (benches/isolation.rs); without isolation these waited for
    // the spinners' deadlines.
    for path in ["/api/health", "/api/adapters/echo/hello", "/api/adapters"] {
        for _ in 0..10 {
            let started = Instant::now();
            let response = client.get(server.url(path)).send().await.unwrap();
            assert_eq!(response.status(), StatusCode::OK, "{path}");
            assert!(
                started.elapsed() < Duration::from_secs(1),
                "{path} took {:?} while guests spin",
                started.elapsed()
            );
        }
    }
    assert!(
        spinning.iter().all(|request| !request.is_finished()),
        "the spinning requests are still running (their deadline is 30 s)"
    );
}

#[tokio::test]
async fn an_adapter_gets_its_own_share_of_instances_and_job_workers() {
    let _heavy = crate::support::heavy().await;
    let server = Server::start_with_config("[jobs]\nworkers = 2\n", &[]);
    drop_in(&server, "echo", &guest("echo"), ECHO_GRANT);
    let grant = hostile_grant("handle_http_ms = 3000\nmax_instances = 1\njobs_pending = 20");
    drop_in(&server, "hostile", &guest("hostile"), &grant);
    loaded(&server, "echo").await;
    loaded(&server, "hostile").await;

    // Its one instance is busy: its next request is turned away; its neighbour answers. (A
    // spinner that found the instance taken by one of these requests is sent again.)
    let client = reqwest::Client::new();
    let spin = || tokio::spawn(client.get(server.url("/api/adapters/hostile/loop")).send());
    let mut spinning = spin();
    let busy = eventually(10, async || {
        if spinning.is_finished() {
            spinning = spin();
        }
        let answer = get(&server, "/api/adapters/hostile/ok").await;
        (answer.0 == StatusCode::SERVICE_UNAVAILABLE).then_some(answer.1)
    })
    .await;
    assert!(busy.contains("max_instances"), "{busy}");
    assert_eq!(
        get(&server, "/api/adapters/echo/hello").await.0,
        StatusCode::OK
    );

    // Twenty of its jobs wait for its one instance (free again once the spinner's deadline
    // passed); a neighbour's job runs at once beside them.
    let flooded = eventually(10, async || {
        let (status, said) = get(&server, "/api/adapters/hostile/jobs-flood").await;
        (status == StatusCode::OK).then_some(said)
    })
    .await;
    assert!(flooded.starts_with("queued 20;"), "{flooded}");
    let response = client
        .post(server.url("/api/adapters/echo/job"))
        .body("neighbour")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::ACCEPTED);
    let done = eventually(15, async || {
        let (status, attempt) = get(&server, "/api/adapters/echo/kv?key=job-done:neighbour").await;
        (status == StatusCode::OK).then_some(attempt)
    })
    .await;
    assert_eq!(done, "1");
    let hostile = entry(&server, "hostile").await;
    assert!(hostile["pending_jobs"].as_u64().unwrap() >= 18, "{hostile}");
}

#[tokio::test]
async fn a_guest_stays_within_its_quotas_and_says_so() {
    let _heavy = crate::support::heavy().await;
    let server = Server::start();
    drop_in(&server, "echo", &guest("echo"), ECHO_GRANT);
    // The deadline is not what is tested: a 30 MB key is slow to build in a debug build on a
    // loaded machine (a CI run passed the default 2.5 s).
    let grant = hostile_grant(
        "kv_total_bytes = 1048576\nkv_value_bytes = 65536\njobs_pending = 20\n\
         job_payload_bytes = 1024\nlog_lines_per_minute = 100\nmax_instances = 32\n\
         handle_http_ms = 30000",
    );
    drop_in(&server, "hostile", &guest("hostile"), &grant);
    loaded(&server, "echo").await;
    loaded(&server, "hostile").await;
    let quota = async |path: &str| {
        let (status, said) = get(&server, &format!("/api/adapters/hostile{path}")).await;
        assert_eq!(status, StatusCode::OK, "{path}: {said}");
        let hostile = entry(&server, "hostile").await;
        let recorded = hostile["error_message"].as_str().unwrap().to_owned();
        assert!(
            recorded.starts_with("QuotaExceeded: "),
            "{path}: {recorded}"
        );
        said
    };

    // kv: the adapter's total, a value's size, a key's size.
    let said = quota("/kv-flood?bytes=65536").await;
    let stored: usize = said["stored ".len()..]
        .split(';')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!((14..=16).contains(&stored), "{said}");
    assert!(said.contains("kv_total_bytes"), "{said}");
    assert!(
        quota("/kv-flood?bytes=100000")
            .await
            .contains("kv_value_bytes")
    );
    assert!(
        quota("/kv-key?bytes=30000000")
            .await
            .contains("kv_key_bytes")
    );
    // Jobs: how many may wait, and a payload's size.
    let said = quota("/jobs-flood").await;
    assert!(
        said.starts_with("queued 20;") && said.contains("jobs_pending"),
        "{said}"
    );
    assert!(
        quota("/job-big?bytes=100000")
            .await
            .contains("job_payload_bytes")
    );
    // The neighbour's store is its own.
    let response = reqwest::Client::new()
        .post(server.url("/api/adapters/echo/kv?key=mine"))
        .body(vec![1u8; 60_000])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);

    // Log: lines are cut and escaped, and past the rate they are dropped and counted.
    let (status, _) = get(
        &server,
        "/api/adapters/hostile/log-flood?n=1000&bytes=50000",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let hostile = entry(&server, "hostile").await;
    let dropped: u64 = hostile["metadata"]["log_lines_dropped"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    // At most 100 of the 1,000 pass at once, plus the refill (100 a minute) while the
    // request runs, which takes seconds at most even on a loaded machine.
    assert!(dropped >= 850, "{hostile}");
    let log = std::fs::read_to_string(server.data_dir.join("server.log")).unwrap();
    assert!(
        !log.lines().any(|line| line.starts_with("FORGED")),
        "a newline forged a log line"
    );
    assert!(log.len() < 1 << 20, "the log holds {} bytes", log.len());

    // Registry: an error message is cut, so the list stays small.
    let (status, _) = get(&server, "/api/adapters/hostile/mark-error?bytes=30000000").await;
    assert_eq!(status, StatusCode::OK);
    let listing = reqwest::get(server.url("/api/adapters")).await.unwrap();
    assert!(listing.bytes().await.unwrap().len() < 64 << 10);
}

/// How many tasks have each status.
async fn task_counts(server: &Server) -> Value {
    server.get("/api/tasks").await.1["counts"].clone()
}

#[tokio::test]
async fn what_a_guest_makes_the_host_store_is_bounded() {
    let _heavy = crate::support::heavy().await;
    let server = Server::start_with_config("[jobs]\nkeep_finished = 5\n", &[]);
    let grant = "agent = true\njobs = true\n[limits]\njobs_pending = 100\n";
    drop_in(&server, "hostile", &guest("hostile"), grant);
    loaded(&server, "hostile").await;
    let said = |path: &'static str| {
        let server = &server;
        async move {
            let (status, said) = get(server, &format!("/api/adapters/hostile{path}")).await;
            assert!(status.is_success(), "{path}: {status} {said}");
            said
        }
    };

    // A prompt past limits.agent_prompt_bytes is refused before anything is stored.
    let refused = said("/agent-big?bytes=3000000").await;
    assert_eq!(
        refused,
        "refused: agent.run: a prompt of 3000000 bytes is larger than 65536 \
         (limits.agent_prompt_bytes)"
    );
    assert!(
        entry(&server, "hostile").await["error_message"]
            .as_str()
            .unwrap()
            .starts_with("QuotaExceeded: agent.run: a prompt of 3000000 bytes")
    );
    // A conversation key past 256 bytes is refused before anything is stored.
    assert_eq!(
        said("/conversation-key?bytes=100000").await,
        "refused: agent.run-in-conversation: a key of 100000 bytes; a key is 1 to 256 bytes"
    );
    let (_, traces) = server.get("/api/traces").await;
    assert_eq!(traces["total"], 0, "{traces}");
    let (_, conversations) = server.get("/api/conversations").await;
    assert_eq!(conversations["total"], 0, "{conversations}");

    // Notes on a trace: at most 32.
    let annotated = said("/annotate-flood?n=100").await;
    assert_eq!(
        annotated,
        "annotated 32; then: agent.annotate: the trace has 32 warnings already, the most it keeps"
    );
    let (_, traces) = server.get("/api/traces").await;
    let trace_id = traces["traces"][0]["id"].as_str().unwrap().to_owned();
    let (_, trace) = server.get(&format!("/api/traces/{trace_id}")).await;
    assert_eq!(trace["warnings"].as_array().unwrap().len(), 32);

    // A job failing with 8 MB messages, every attempt: its task keeps the newest few KB.
    let task_id = said("/fail-job?bytes=8000000").await;
    // Three attempts with backoff, each copying 8 MB on the guest lane: on a machine busy with
    // other tests that takes a while.
    let failed = eventually(90, async || {
        let (_, tasks) = server.get("/api/tasks?status=error").await;
        tasks["tasks"]
            .as_array()?
            .iter()
            .find(|t| t["task_id"] == task_id.as_str())
            .cloned()
    })
    .await;
    let description = failed["description"].as_str().unwrap();
    assert!(
        description.chars().count() <= 4_000,
        "{}",
        description.len()
    );
    let listing = reqwest::get(server.url("/api/tasks?status=error&limit=10"))
        .await
        .unwrap();
    assert!(listing.bytes().await.unwrap().len() < 16 << 10);

    // Thirty finished jobs of 60 KB: their payloads go as they finish, and past
    // [jobs] keep_finished only the newest five stay.
    assert_eq!(said("/quick-jobs?n=30&bytes=60000").await, "queued");
    eventually(60, async || {
        let counts = task_counts(&server).await;
        let open = counts["pending"].as_u64()? + counts["running"].as_u64()?;
        let finished = counts["completed"].as_u64()? + counts["error"].as_u64()?;
        // The annotated run's task is no job: it stays.
        (open == 0 && finished <= 6).then_some(())
    })
    .await;
}

#[tokio::test]
async fn what_describe_and_list_tools_may_say_is_bounded() {
    let _heavy = crate::support::heavy().await;
    let server = Server::start();
    let many_routes = variant("hostile", "many-routes", &[("HOSTILE_ROUTES", "many")]);
    let bad_route = variant("hostile", "bad-route", &[("HOSTILE_ROUTES", "bad")]);
    let many_tools = variant("hostile", "many-tools", &[("HOSTILE_TOOLS", "5000")]);
    let grant = hostile_grant("");
    drop_in(&server, "hostile", &many_routes, &grant);
    let refused = eventually(20, async || {
        let hostile = server.adapter("hostile").await?;
        hostile["error_message"].as_str().map(str::to_owned)
    })
    .await;
    assert!(refused.contains("at most 64 routes"), "{refused}");

    drop_in(&server, "hostile", &bad_route, &grant);
    eventually(20, async || {
        let hostile = server.adapter("hostile").await?;
        let message = hostile["error_message"].as_str()?;
        message.contains("../../health").then_some(())
    })
    .await;

    drop_in(&server, "hostile", &many_tools, &grant);
    let loaded = loaded(&server, "hostile").await;
    let message = loaded["error_message"].as_str().unwrap();
    // 50 MB of descriptions: refused by their bounds, or, on a machine busy enough that lifting
    // them takes longer, by list-tools' time limit first. Either way nothing is offered.
    assert!(
        message.starts_with("ToolError:") || message.starts_with("Timeout: list-tools"),
        "{loaded}"
    );
    let (_, tools) = server.get("/api/tools").await;
    let offered = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"].as_str().unwrap().starts_with("hostile_tool"))
        .count();
    assert_eq!(offered, 0, "descriptions of 10 KB are refused");
    // Routes it did not declare never reach it.
    let (status, body) = get(&server, "/api/adapters/hostile/nowhere").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"],
        "no route GET /nowhere"
    );
}

#[tokio::test]
async fn an_adapter_answer_cannot_act_as_the_dashboard() {
    let _heavy = crate::support::heavy().await;
    let server = Server::start();
    drop_in(&server, "hostile", &guest("hostile"), &hostile_grant(""));
    loaded(&server, "hostile").await;

    let page = reqwest::get(server.url("/api/adapters/hostile/html"))
        .await
        .unwrap();
    let headers = page.headers();
    assert_eq!(headers["content-security-policy"], "sandbox");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    for dropped in [
        "set-cookie",
        "access-control-allow-origin",
        "access-control-allow-credentials",
    ] {
        assert!(!headers.contains_key(dropped), "{dropped} passed through");
    }

    // Answers HTTP cannot carry are the adapter's failure, not the server's.
    for (path, problem) in [
        ("/headers?n=40000", "more than 64"),
        ("/status?code=101", "not a final HTTP status"),
        ("/status?code=600", "not a final HTTP status"),
    ] {
        let (status, body) = get(&server, &format!("/api/adapters/hostile{path}")).await;
        assert_eq!(status, StatusCode::BAD_GATEWAY, "{path}: {body}");
        let recorded = entry(&server, "hostile").await["error_message"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            recorded.starts_with("BadResponse:") && recorded.contains(problem),
            "{path}: {recorded}"
        );
    }
    assert_eq!(
        get(&server, "/api/adapters/hostile/ok").await.0,
        StatusCode::OK
    );
    assert_eq!(get(&server, "/api/health").await.0, StatusCode::OK);
}

#[tokio::test]
async fn agent_runs_of_an_adapter_are_bounded_and_need_the_agent_grant() {
    let _heavy = crate::support::heavy().await;
    let server = Server::start();
    let grant = format!("{ECHO_GRANT}[limits]\nagent_runs_per_minute = 2\n");
    drop_in(&server, "echo", &guest("echo"), &grant);
    drop_in(&server, "hostile", &guest("hostile"), &hostile_grant(""));
    loaded(&server, "echo").await;
    loaded(&server, "hostile").await;
    let client = reqwest::Client::new();
    let mut answers = Vec::new();
    for _ in 0..3 {
        let response = client
            .post(server.url("/api/adapters/echo/agent"))
            .body("hello")
            .send()
            .await
            .unwrap();
        answers.push((response.status(), response.text().await.unwrap()));
    }
    assert_eq!(answers[0].0, StatusCode::OK);
    assert_eq!(answers[1].0, StatusCode::OK);
    assert_eq!(answers[2].0, StatusCode::BAD_GATEWAY);
    assert!(
        answers[2].1.contains("Limited") && answers[2].1.contains("agent_runs_per_minute"),
        "{}",
        answers[2].1
    );
    let echo = entry(&server, "echo").await;
    assert!(
        echo["error_message"]
            .as_str()
            .unwrap()
            .starts_with("QuotaExceeded:"),
        "{echo}"
    );

    // Every tool, but not `agent`: a tool that runs agents is refused.
    let (status, said) = get(&server, "/api/adapters/hostile/delegate").await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert!(said.contains("without the agent grant"), "{said}");
    let hostile = entry(&server, "hostile").await;
    assert!(
        hostile["error_message"]
            .as_str()
            .unwrap()
            .starts_with("CapabilityDenied:"),
        "{hostile}"
    );
}

/// A model that always calls `echo_agent`, whose component runs an agent, which calls it again.
#[tokio::test]
async fn a_delegation_chain_through_a_component_keeps_its_depth_and_budget() {
    let _heavy = crate::support::heavy().await;
    let script = (0..200)
        .map(|_| Reply::Tools(vec![("t1", "echo_agent", json!({"prompt": "go deeper"}))]))
        .collect();
    let fake = llm::openai(script).await;
    let server =
        Server::start_with_config("[engine]\nllm_call_budget = 30\n", &openai_env(&fake.url));
    drop_in(&server, "echo", &guest("echo"), ECHO_GRANT);
    loaded(&server, "echo").await;
    let (status, answer) = server
        .post("/api/chat", json!({"prompt": "start the chain"}))
        .await;
    assert_ne!(status, StatusCode::OK, "{answer}");
    let calls = fake.requests().len();
    assert!(calls <= 30, "{calls} LLM calls for one chat (budget 30)");
    // The chain went no deeper than the delegation limit.
    let (_, traces) = server.get("/api/traces?limit=500").await;
    let refused = traces["traces"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| {
            t["error_message"]
                .as_str()
                .is_some_and(|e| e.contains("past the limit") || e.contains("budget"))
        })
        .count();
    assert!(refused > 0, "{traces}");
}

/// Whether `adapter` would be refused an instance now, from the host's own counts
/// (`/metrics`): it holds its cap, or the server's 64 are in use or owed to the other loaded
/// adapters (2 each).
async fn instances_exhausted(server: &Server, adapter: &str, cap: usize) -> bool {
    let text = reqwest::get(server.url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let held: Vec<(String, usize)> = text
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("service_runtime_adapter_instances_in_use{adapter=\"")?;
            let (name, value) = rest.split_once("\"} ")?;
            Some((name.to_owned(), value.trim().parse().ok()?))
        })
        .collect();
    let mine = held
        .iter()
        .find(|(n, _)| n == adapter)
        .map_or(0, |(_, v)| *v);
    let used: usize = held.iter().map(|(_, v)| v).sum();
    let owed: usize = held
        .iter()
        .filter(|(n, _)| n != adapter)
        .map(|(_, v)| 2usize.saturating_sub(*v))
        .sum();
    mine == cap || used + owed >= 64
}

#[tokio::test]
async fn adapters_at_their_largest_share_leave_a_neighbour_its_instances() {
    let _heavy = crate::support::heavy().await;
    // All from one client address, which may hold them all here.
    let server = Server::start_with_config("[server]\nmax_connections_per_peer = 256\n", &[]);
    drop_in(&server, "echo", &guest("echo"), ECHO_GRANT);
    let other = variant("hostile", "hostile2", &[("HOSTILE_NAME", "hostile2")]);
    // Spinning longer than a loaded machine takes to start them all (64 spinners on two cores
    // while the rest of the suite runs took over 25 s once).
    let grant = hostile_grant("handle_http_ms = 60000\nmax_instances = 32");
    drop_in(&server, "hostile", &guest("hostile"), &grant);
    drop_in(&server, "hostile2", &other, &grant);
    for name in ["echo", "hostile", "hostile2"] {
        loaded(&server, name).await;
    }
    // Both take all they may, 32 each on paper: the 64 of the server, were it not for the
    // other adapters' reservations.
    let client = reqwest::Client::new();
    let spinners: Vec<_> = ["hostile", "hostile2"]
        .iter()
        .flat_map(|name| {
            let url = server.url(&format!("/api/adapters/{name}/loop"));
            (0..32).map(move |_| url.clone())
        })
        .map(|url| tokio::spawn(client.get(url).send()))
        .collect();
    // Counted by the host, not asked of the guest: a call of a spinning adapter may wait
    // behind its spinners on the guest lane, which a busy machine leaves little time.
    eventually(55, async || {
        instances_exhausted(&server, "hostile", 32)
            .await
            .then_some(())
    })
    .await;
    let (status, refused) = get(&server, "/api/adapters/hostile/ok").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{refused}");
    assert!(refused.contains("busy"), "{refused}");
    // The neighbour answers every time meanwhile.
    for _ in 0..30 {
        let (status, said) = get(&server, "/api/adapters/echo/hello").await;
        assert_eq!(status, StatusCode::OK, "{said}");
    }
    assert!(
        spinners.iter().any(|s| !s.is_finished()),
        "measured while they spun"
    );
    for spinner in spinners {
        spinner.abort();
    }
}

#[tokio::test]
async fn a_limit_past_its_range_is_a_grant_error_naming_the_range() {
    let _heavy = crate::support::heavy().await;
    let server = Server::start();
    drop_in(
        &server,
        "hostile",
        &guest("hostile"),
        &hostile_grant("memory_mib = 100000"),
    );
    let refused = eventually(20, async || {
        let entry = server.adapter("hostile").await?;
        (entry["status"] == "error").then_some(entry)
    })
    .await;
    assert!(
        refused["error_message"]
            .as_str()
            .unwrap()
            .contains("limits.memory_mib = 100000 is out of range: it takes 1 to 256"),
        "{refused}"
    );
}

#[tokio::test]
async fn a_component_cannot_take_a_native_adapters_name() {
    let _heavy = crate::support::heavy().await;
    let server = Server::start();
    let impostor = variant("hostile", "scheduler", &[("HOSTILE_NAME", "scheduler")]);
    drop_in(&server, "scheduler", &impostor, &hostile_grant(""));
    let scheduler = eventually(20, async || {
        let entry = server.adapter("scheduler").await?;
        (entry["error_count"] == 1).then_some(entry)
    })
    .await;
    assert_eq!(
        (scheduler["kind"].as_str(), scheduler["status"].as_str()),
        (Some("native"), Some("running")),
        "{scheduler}"
    );
    assert!(
        scheduler["error_message"]
            .as_str()
            .unwrap()
            .contains("the name of a native adapter"),
        "{scheduler}"
    );
    // Removing the file leaves the native adapter alone.
    std::fs::remove_file(server.data_dir.join("adapters/scheduler.wasm")).unwrap();
    let server = server.restart();
    let scheduler = entry(&server, "scheduler").await;
    assert_eq!(scheduler["status"], "running", "{scheduler}");
}

#[tokio::test]
async fn a_file_taking_a_bundled_name_gets_none_of_its_grant() {
    let _heavy = crate::support::heavy().await;
    let server = Server::start_with(&[("SERVICE_TEAMCHAT_BOT_TOKEN", "xoxb-not-for-strangers")]);
    let stranger = variant("hostile", "teamchat", &[("HOSTILE_NAME", "teamchat")]);
    let installed = cli(
        &server.data_dir,
        &["adapters", "install", stranger.to_str().unwrap()],
    );
    assert!(installed.status.success(), "{installed:?}");
    let warned = String::from_utf8_lossy(&installed.stderr);
    assert!(
        warned.contains("takes the place of the bundled teamchat, but not its grant"),
        "{warned}"
    );
    let read = eventually(20, async || {
        let (status, said) = get(
            &server,
            "/api/adapters/teamchat/secret?name=SERVICE_TEAMCHAT_BOT_TOKEN",
        )
        .await;
        (status == StatusCode::OK).then_some(said)
    })
    .await;
    assert_eq!(read, "none");
    let teamchat = entry(&server, "teamchat").await;
    assert_eq!(teamchat["capabilities"], json!([]), "{teamchat}");
    assert!(
        teamchat["error_message"]
            .as_str()
            .unwrap()
            .starts_with("CapabilityDenied: secret SERVICE_TEAMCHAT_BOT_TOKEN"),
        "{teamchat}"
    );
    // A grant of its own beside it is the operator's word: it gets what that grants.
    std::fs::write(
        server.data_dir.join("adapters/teamchat.toml"),
        "secrets = [\"SERVICE_TEAMCHAT_BOT_TOKEN\"]\n",
    )
    .unwrap();
    let read = eventually(20, async || {
        let (_, said) = get(
            &server,
            "/api/adapters/teamchat/secret?name=SERVICE_TEAMCHAT_BOT_TOKEN",
        )
        .await;
        (said != "none").then_some(said)
    })
    .await;
    assert_eq!(read, "xoxb-not-for-strangers");
}

#[tokio::test]
async fn slow_hooks_never_hold_the_server_and_a_hanging_stop_still_disables() {
    let _heavy = crate::support::heavy().await;
    let tmp = tempfile::tempdir().unwrap();
    let data_dir = tmp.path().join("data");
    {
        let first = Server::start_in(&data_dir, &[]);
        drop_in(&first, "echo", &guest("echo"), ECHO_GRANT);
        drop_in(&first, "hostile", &guest("hostile"), &hostile_grant(""));
        loaded(&first, "hostile").await;
    }
    // Echo's `start` takes 3 s; hostile, after it in name order, is still loading meanwhile.
    service_runtime::db::Db::open_sqlite(&data_dir.join(service_runtime::db::FILE_NAME))
        .unwrap()
        .blocking(|conn| {
            service_runtime::kv_store::set(conn, "echo", "start-delay-ms", b"3000", None, 1 << 20)
                .unwrap();
            Ok(())
        })
        .unwrap();
    let server = Server::start_in_while_starting(&data_dir, &[]);
    let (_, health) = server.get("/api/health").await;
    assert_eq!(health["adapters"], "starting", "{health}");
    let (status, said) = get(&server, "/api/adapters/hostile/ok").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(said.contains("loading"), "{said}");
    eventually(20, async || {
        (get(&server, "/api/adapters/hostile/ok").await.0 == StatusCode::OK).then_some(())
    })
    .await;

    // A `stop` that hangs is cut off at 5 s; the adapter is disabled regardless.
    let reset = reqwest::Client::new()
        .post(server.url("/api/adapters/echo/kv?key=hang-hooks"))
        .body("yes")
        .send()
        .await
        .unwrap();
    assert_eq!(reset.status(), StatusCode::OK);
    let started = Instant::now();
    let (status, echo) = server.post("/api/adapters/echo/disable", json!(null)).await;
    assert_eq!(
        (status, echo["status"].as_str()),
        (StatusCode::OK, Some("stopped"))
    );
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    assert!(
        echo["error_message"]
            .as_str()
            .unwrap()
            .starts_with("Timeout:"),
        "{echo}"
    );
    assert_eq!(
        get(&server, "/api/adapters/echo/hello").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
}

#[tokio::test]
async fn a_secret_goes_only_to_the_origins_its_grant_binds_it_to() {
    let _heavy = crate::support::heavy().await;
    let seen = spawn_fake(axum::Router::new().route(
        "/x",
        axum::routing::get(|headers: axum::http::HeaderMap| async move {
            headers
                .get("authorization")
                .map_or("none".to_owned(), |v| v.to_str().unwrap().to_owned())
        }),
    ))
    .await;
    let to_other = format!("{seen}/x");
    let home = spawn_fake(axum::Router::new().route(
        "/away",
        axum::routing::get(move || async move { axum::response::Redirect::temporary(&to_other) }),
    ))
    .await;
    let server = Server::start_with(&[("ECHO_TOKEN", "s3cret")]);
    let grant = format!(
        "secrets = [\"ECHO_TOKEN\"]\nagent = true\ntools = [\"*\"]\nkv = true\njobs = true\n\
         outbound_hosts = [\"{home}\", \"{seen}\"]\n[secret_origins]\nECHO_TOKEN = [\"{home}\"]\n"
    );
    drop_in(&server, "echo", &guest("echo"), &grant);
    loaded(&server, "echo").await;

    let (status, said) = get(&server, &format!("/api/adapters/echo/fetch?url={seen}/x")).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert!(said.contains("may not be sent"), "{said}");
    // Through a redirect to another origin, the header that carried it is dropped.
    let (status, said) = get(
        &server,
        &format!("/api/adapters/echo/fetch?url={home}/away"),
    )
    .await;
    assert_eq!((status, said.as_str()), (StatusCode::OK, "200\nnone"));
}

#[tokio::test]
async fn tasks_come_in_pages() {
    let _heavy = crate::support::heavy().await;
    let server = Server::start();
    server
        .db()
        .blocking(|conn| {
            for i in 0..150 {
                service_runtime::tasks::create(
                    conn,
                    &service_runtime::tasks::NewTask {
                        title: &format!("task {i}"),
                        ..Default::default()
                    },
                )
                .unwrap();
            }
            Ok(())
        })
        .unwrap();
    let (_, page) = server.get("/api/tasks").await;
    assert_eq!(
        (page["tasks"].as_array().unwrap().len(), &page["total"]),
        (100, &json!(150))
    );
    let (_, last) = server.get("/api/tasks?limit=100&offset=100").await;
    assert_eq!(last["tasks"].as_array().unwrap().len(), 50);
    assert_error(
        &server.get("/api/tasks?limit=0").await,
        StatusCode::BAD_REQUEST,
        "limit must be a whole number between 1 and 500",
    );
}

/// A large component's freed slot is reset from the pages the kernel reports written (no swap
/// here): a request never finds what the one before wrote, in its image or beside it.
#[tokio::test]
async fn a_request_never_finds_what_the_one_before_left_in_memory() {
    // With the defaults, and with every way `[sandbox]` can change the reset: the large slot
    // reset whole (as where swap is on), nothing kept resident, batched unmappings, no dense
    // image.
    for config in [
        "",
        "[sandbox]\nwritten_pages_only = false\nmemory_keep_resident_kib = 0\n\
         table_keep_resident_kib = 1024\ndense_image_mib = 0\ndecommit_batch = 32\n",
    ] {
        finds_nothing_left(Server::start_with_config(config, &[])).await;
    }
    // A setting out of its range stops the start, naming it.
    let stderr = crate::support::refused_start("[sandbox]\ndecommit_batch = 0\n").stderr;
    assert!(
        stderr.contains("decommit_batch between 1 and 1024"),
        "{stderr}"
    );
}

async fn finds_nothing_left(server: Server) {
    drop_in(&server, "probe", &guest("memory_probe"), "");
    // A `wasi:http` component has no version to wait for.
    eventually(60, async || {
        let entry = server.adapter("probe").await?;
        (entry["status"] == "running").then_some(())
    })
    .await;
    server.wait_until_optimized();
    assert!(
        std::fs::metadata(guest("memory_probe")).unwrap().len() >= 4 << 20,
        "a large component"
    );
    for _ in 0..20 {
        assert_eq!(
            get(&server, "/api/adapters/probe/leftover").await,
            (StatusCode::OK, "image changed 0, left 0".to_owned())
        );
    }
}
