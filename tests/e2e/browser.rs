//! The dashboard in a real browser (headless Chromium through WebDriver).
//!
//! Each test starts the real binary, Debian's `chromedriver` on a free loopback port and, through
//! it, `/usr/bin/chromium` with a fresh profile, then drives the page with fantoccini like a user
//! would. The tests take a global lock so only one browser runs at a time (two cores).
//!
//! - Missing Chromium or chromedriver: the tests say so loudly and pass without running; with
//!   `CI=true` that is a failure (CI installs `chromium` and `chromium-driver`).
//! - Screenshots of every tab go to `<workspace root>/target/screenshots/`, the CI artifact,
//!   even when `CARGO_TARGET_DIR` puts the build elsewhere (CI keeps it in a cache).
//! - Every test ends by reading the browser's console log (chromedriver's `browser` log) and
//!   fails on any error there, except the HTTP 4xx answers a test provokes on purpose.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::elements::Element;
use fantoccini::key::Key;
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use service_runtime::tasks::{self, TaskStatus};
use tokio::sync::{Mutex, MutexGuard};

use crate::fakes::llm::{self, Reply};
use crate::support::{Server, cli, eventually, openai_env, tool_available, wait};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const XSS_NAME: &str = "<img src=x onerror=alert(1)>";

/// One browser at a time: parallel Chromium instances are slow and flaky on a small machine.
static BROWSER_LOCK: Mutex<()> = Mutex::const_new(());

/// Where screenshots go: `<workspace root>/target/screenshots`, the CI artifact, wherever
/// `CARGO_TARGET_DIR` puts the build (CI moves it to a cache outside the workspace).
fn screenshot_dir() -> PathBuf {
    // The e2e test belongs to `runtime/server`; the workspace root is two levels up.
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest
        .ancestors()
        .nth(2)
        .expect("the workspace root above runtime/server");
    assert!(
        root.join("Cargo.lock").is_file(),
        "{} is not the workspace root",
        root.display()
    );
    root.join("target").join("screenshots")
}

/// Whether the browser tests can run here; panics on CI when they cannot.
fn browser_available() -> bool {
    let missing: Vec<&str> = [CHROMIUM, CHROMEDRIVER]
        .into_iter()
        .filter(|path| !std::path::Path::new(path).exists())
        .collect();
    let message = format!(
        "BROWSER TESTS SKIPPED: {} not installed (apt-get install chromium chromium-driver)",
        missing.join(" and ")
    );
    tool_available(missing.is_empty(), &message)
}

/// chromedriver's `browser` log (what the DevTools console showed), drained on every read.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/se/log",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (
            http::Method::POST,
            Some(json!({"type": "browser"}).to_string()),
        )
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A headless Chromium session against one server, with chromedriver in its own process group
/// (killed with everything it started when this is dropped).
struct Browser {
    client: Client,
    driver: Child,
    base: String,
    _profile: tempfile::TempDir,
    _lock: MutexGuard<'static, ()>,
}

impl Browser {
    /// `None` when Chromium is not installed (and this is not CI).
    async fn start(server: &Server) -> Option<Self> {
        let lock = BROWSER_LOCK.lock().await;
        if !browser_available() {
            return None;
        }
        let profile = tempfile::tempdir().unwrap();
        let port = free_port();
        let driver_log = std::fs::File::create(profile.path().join("chromedriver.log")).unwrap();
        let driver = std::os::unix::process::CommandExt::process_group(
            Command::new(CHROMEDRIVER)
                .arg(format!("--port={port}"))
                .stdin(Stdio::null())
                .stdout(driver_log.try_clone().unwrap())
                .stderr(driver_log),
            0,
        )
        .spawn()
        .expect("start chromedriver");
        let driver_url = format!("http://127.0.0.1:{port}");
        let status = format!("{driver_url}/status");
        wait::eventually(
            "chromedriver to start",
            Duration::from_secs(20),
            async || reqwest::get(&status).await.ok(),
        )
        .await;
        let user_data = profile.path().join("chromium");
        let capabilities = json!({
            "browserName": "chrome",
            "unhandledPromptBehavior": "ignore",
            "goog:loggingPrefs": {"browser": "ALL"},
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--no-first-run",
                    "--disable-quic",
                    "--disable-dev-shm-usage",
                    "--window-size=1280,900",
                    format!("--user-data-dir={}", user_data.display()),
                ],
            },
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!()
        };
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&driver_url)
            .await
            .expect("start a Chromium session");
        Some(Self {
            client,
            driver,
            base: server.url.clone(),
            _profile: profile,
            _lock: lock,
        })
    }

    /// Loads the dashboard at `#/{route}` and waits until that tab has rendered.
    async fn open(&self, route: &str) {
        self.client
            .goto(&format!("{}/#/{route}", self.base))
            .await
            .unwrap();
        self.ready(route.split(['/', '?']).next().unwrap()).await;
    }

    /// Waits until the tab `tab` has finished rendering.
    async fn ready(&self, tab: &str) {
        self.wait_for(
            &format!("the {tab} tab to render"),
            &format!("return document.querySelector('main[data-ready=\"{tab}\"]') !== null"),
        )
        .await;
    }

    /// Clicks a sidebar link, as a user switching tabs.
    async fn tab(&self, tab: &str) {
        self.click(&format!(".sidebar a[data-tab=\"{tab}\"]")).await;
        self.ready(tab).await;
    }

    async fn find(&self, css: &str) -> Element {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no element {css}: {e}"))
    }

    async fn type_into(&self, css: &str, text: &str) {
        self.find(css).await.send_keys(text).await.unwrap();
    }

    async fn click(&self, css: &str) {
        self.find(css).await.click().await.unwrap();
    }

    async fn js(&self, script: &str, args: Vec<Value>) -> Value {
        self.client
            .execute(script, args)
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"))
    }

    /// Runs `script` (a function body) until it returns something truthy, for up to 15 s.
    async fn wait_for_with(&self, what: &str, script: &str, args: Vec<Value>) -> Value {
        let every = Duration::from_millis(100);
        let found = wait::until(Duration::from_secs(15), every, async || {
            let value = self.js(script, args.clone()).await;
            let truthy = !matches!(&value, Value::Null | Value::Bool(false))
                && value != json!("")
                && value != json!(0);
            truthy.then_some(value)
        })
        .await;
        if found.is_none() {
            self.failure_screenshot().await;
        }
        found.unwrap_or_else(|| panic!("timed out waiting for {what}"))
    }

    async fn wait_for(&self, what: &str, script: &str) -> Value {
        self.wait_for_with(what, script, vec![]).await
    }

    /// The visible text of the first element matching `css`.
    async fn text(&self, css: &str) -> String {
        self.find(css).await.text().await.unwrap()
    }

    /// Saves `<name>.png` under [`screenshot_dir`] and returns its path.
    async fn screenshot(&self, name: &str) -> PathBuf {
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        let png = self
            .client
            .screenshot()
            .await
            .unwrap_or_else(|e| panic!("screenshot {name}: {e}"));
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        path
    }

    /// The screenshot taken when a wait times out; best effort, the timeout is the news.
    async fn failure_screenshot(&self) {
        if let Ok(png) = self.client.screenshot().await {
            let dir = screenshot_dir();
            let _ = std::fs::create_dir_all(&dir);
            let _ = std::fs::write(dir.join("failure.png"), png);
        }
    }

    /// Console errors so far, except 4xx answers the test provoked (`allowed` statuses).
    async fn console_errors(&self, allowed: &[u16]) -> Vec<String> {
        let log = self.client.issue_cmd(BrowserLog).await.unwrap();
        log.as_array()
            .into_iter()
            .flatten()
            .filter(|entry| entry["level"] == "SEVERE")
            .map(|entry| entry["message"].as_str().unwrap_or_default().to_owned())
            .filter(|message| {
                !allowed.iter().any(|status| {
                    message.contains(&format!("the server responded with a status of {status}"))
                })
            })
            .collect()
    }

    /// Fails on console errors, then closes the browser.
    async fn finish(self, allowed: &[u16]) {
        let errors = self.console_errors(allowed).await;
        let alert = self.client.get_alert_text().await.ok();
        self.client.clone().close().await.unwrap();
        assert_eq!(alert, None, "an alert opened");
        assert!(errors.is_empty(), "browser console errors: {errors:#?}");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // chromedriver leads its own process group, which holds Chromium too.
        let group = format!("-{}", self.driver.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.driver.wait();
    }
}

fn set_task_status(server: &Server, task_id: &str, status: TaskStatus) {
    server
        .db()
        .blocking(|conn| tasks::set_status(conn, task_id, status))
        .unwrap();
}

/// Text of every element matching `css`.
const TEXTS: &str =
    "return [...document.querySelectorAll(arguments[0])].map(e => e.textContent.trim())";

async fn texts(browser: &Browser, css: &str) -> Vec<String> {
    serde_json::from_value(browser.js(TEXTS, vec![json!(css)]).await).unwrap()
}

/// Not a browser test: the page and every asset it loads are served with their types, and
/// every module a module imports exists.
#[tokio::test]
async fn dashboard_assets_are_served_with_their_types() {
    let server = Server::start();
    let get = |path: &str| reqwest::get(server.url(path));
    let index = get("/").await.unwrap();
    assert_eq!(index.status(), StatusCode::OK);
    assert_eq!(index.headers()["content-type"], "text/html; charset=utf-8");
    let html = index.text().await.unwrap();
    let mut pending: Vec<String> = html
        .split("\"/assets/")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap().to_owned())
        .collect();
    assert!(pending.contains(&"app.js".to_owned()), "{pending:?}");
    let mut seen = Vec::new();
    while let Some(file) = pending.pop() {
        if seen.contains(&file) {
            continue;
        }
        let response = get(&format!("/assets/{file}")).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{file}");
        let expected = match file.rsplit('.').next().unwrap() {
            "js" => "text/javascript; charset=utf-8",
            "css" => "text/css; charset=utf-8",
            "svg" => "image/svg+xml",
            other => panic!("unexpected asset type {other}"),
        };
        assert_eq!(response.headers()["content-type"], expected, "{file}");
        let body = response.text().await.unwrap();
        if file.ends_with(".js") {
            assert!(!body.contains("innerHTML"), "{file} must build DOM as text");
            pending.extend(
                body.split("from './")
                    .skip(1)
                    .map(|rest| rest.split('\'').next().unwrap().to_owned()),
            );
        }
        seen.push(file);
    }
    assert!(seen.len() >= 10, "{seen:?}");
    let missing = get("/assets/nope.js").await.unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn store_install_shows_up_on_the_agents_tab() {
    let server = Server::start();
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser.open("store").await;
    // The offline default is flagged in the header.
    browser
        .wait_for(
            "the offline warning",
            "const b = document.getElementById('provider-warning'); return !b.hidden && b.textContent.includes('Offline provider')",
        )
        .await;
    assert_eq!(browser.text("#provider-text").await, "offline");
    assert_eq!(
        texts(&browser, ".bundle .agent-name").await,
        ["Atlas", "Vitriol", "Sol"]
    );
    browser.screenshot("store").await;

    browser
        .click("li[data-slug=\"atlas\"] button.install")
        .await;
    browser
        .wait_for(
            "Atlas to show as installed",
            "return document.querySelector('li[data-slug=\"atlas\"] .installed')?.textContent === 'Installed'",
        )
        .await;

    // Installed behind the page's back: the button is still there and the 409 is explained.
    let (status, _) = server.post("/api/store/vitriol/install", Value::Null).await;
    assert_eq!(status, StatusCode::CREATED);
    browser
        .click("li[data-slug=\"vitriol\"] button.install")
        .await;
    let message = browser
        .wait_for(
            "the already-installed message",
            "const m = document.querySelector('li[data-slug=\"vitriol\"] .card-msg')?.textContent; return m !== 'Installing…' && m",
        )
        .await;
    assert!(
        message.as_str().unwrap().starts_with("Already installed"),
        "{message}"
    );
    assert_eq!(
        browser.text("li[data-slug=\"vitriol\"] .installed").await,
        "Installed"
    );
    browser.screenshot("store-installed").await;

    browser.tab("agents").await;
    assert_eq!(
        texts(&browser, ".agent .agent-name").await,
        ["default", "Atlas", "Vitriol"]
    );
    let atlas_tools = texts(&browser, "li[data-agent=\"Atlas\"] .chip").await;
    assert!(
        atlas_tools.contains(&"web_search".to_owned()),
        "{atlas_tools:?}"
    );

    // Keyboard: from the nav, Enter opens a tab and Tab reaches its buttons.
    browser
        .js(
            "document.querySelector('.sidebar a[data-tab=\"store\"]').focus()",
            vec![],
        )
        .await;
    let active = browser.client.active_element().await.unwrap();
    active
        .send_keys(&char::from(Key::Enter).to_string())
        .await
        .unwrap();
    browser.ready("store").await;
    let mut reached = false;
    for _ in 0..12 {
        let active = browser.client.active_element().await.unwrap();
        if active.attr("aria-label").await.unwrap().as_deref() == Some("Install Sol") {
            reached = true;
            break;
        }
        active
            .send_keys(&char::from(Key::Tab).to_string())
            .await
            .unwrap();
    }
    assert!(reached, "Tab never reached the Install button");
    browser.finish(&[409]).await;
}

#[tokio::test]
async fn create_agent_shows_field_errors_then_succeeds() {
    let server = Server::start();
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser.open("agents").await;
    browser.screenshot("agents").await;

    browser.type_into("#agent-name", "Researcher").await;
    browser
        .type_into("#agent-tools", "search_notes, bad tool!")
        .await;
    browser.click("#agent-submit").await;
    // No system prompt: the API names the field and the form shows it there.
    let error = browser
        .wait_for(
            "the system prompt error",
            "return document.querySelector('[data-error-for=\"system_prompt\"]').textContent",
        )
        .await;
    assert_eq!(error, "system_prompt is required");
    assert_eq!(
        browser
            .find("#agent-system_prompt")
            .await
            .attr("aria-invalid")
            .await
            .unwrap()
            .as_deref(),
        Some("true")
    );
    browser.screenshot("agents-validation").await;

    browser
        .type_into("#agent-system_prompt", "You research things.")
        .await;
    browser.click("#agent-submit").await;
    let error = browser
        .wait_for(
            "the tools error",
            "return document.querySelector('[data-error-for=\"tools\"]').textContent",
        )
        .await;
    assert!(error.as_str().unwrap().contains("bad tool!"), "{error}");
    assert_eq!(
        browser
            .text("[data-error-for=\"system_prompt\"]")
            .await
            .as_str(),
        "",
        "the fixed field's error is gone"
    );

    let tools = browser.find("#agent-tools").await;
    tools.clear().await.unwrap();
    tools.send_keys("search_notes").await.unwrap();
    browser
        .type_into("#agent-description", "Digs through notes")
        .await;
    browser.click("#agent-submit").await;
    browser
        .wait_for(
            "the new agent in the list",
            "return document.querySelector('li[data-agent=\"Researcher\"]') !== null",
        )
        .await;
    assert_eq!(
        texts(&browser, "li[data-agent=\"Researcher\"] .chip").await,
        ["search_notes"]
    );
    assert_eq!(
        browser
            .text("li[data-agent=\"Researcher\"] .agent-desc")
            .await,
        "Digs through notes"
    );
    let export = browser
        .find("li[data-agent=\"Researcher\"] a.export")
        .await
        .attr("href")
        .await
        .unwrap();
    assert_eq!(export.as_deref(), Some("/api/agents/Researcher/export"));
    let (status, profile) = server.get("/api/agents/Researcher").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(profile["tools"], json!(["search_notes"]));
    assert_eq!(profile["color"], "#4f8cff");

    // A duplicate name: the 409 shows beside the name.
    browser.type_into("#agent-name", "Researcher").await;
    browser.type_into("#agent-system_prompt", "again").await;
    browser.click("#agent-submit").await;
    browser
        .wait_for(
            "the duplicate-name error",
            "return document.querySelector('[data-error-for=\"name\"]').textContent.includes('Researcher')",
        )
        .await;
    browser.finish(&[400, 409]).await;
}

#[tokio::test]
async fn chat_streams_the_answer_with_tool_calls_and_links_the_trace() {
    let fake = llm::openai(vec![
        Reply::Tools(vec![(
            "call_1",
            "create_note",
            json!({"title": "Groceries", "body": "oat milk"}),
        )]),
        Reply::Text("Saved a note called Groceries with oat milk in it."),
    ])
    .await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser.open("chat").await;
    browser
        .wait_for(
            "the provider in the header",
            "return document.getElementById('provider-text').textContent.startsWith('openai')",
        )
        .await;
    assert_eq!(
        browser
            .js(
                "return document.getElementById('provider-warning').hidden",
                vec![]
            )
            .await,
        true,
        "no warning for a configured provider"
    );
    assert_eq!(
        browser
            .find("#chat-agent")
            .await
            .prop("value")
            .await
            .unwrap()
            .as_deref(),
        Some("default")
    );

    browser
        .type_into("#chat-prompt", "Remember to buy oat milk")
        .await;
    browser.click("#chat-send").await;
    browser
        .wait_for(
            "the tool call card",
            "return document.querySelector('.tool-card[data-tool=\"create_note\"] .tool-result') !== null",
        )
        .await;
    let footer = browser
        .wait_for(
            "the run to finish",
            "return document.querySelector('.msg-agent:not(.streaming) .msg-foot')?.textContent",
        )
        .await;
    assert!(footer.as_str().unwrap().contains("trace"), "{footer}");
    let answer = texts(&browser, ".msg-agent .msg-text").await;
    assert_eq!(
        answer,
        ["Saved a note called Groceries with oat milk in it."]
    );
    assert_eq!(texts(&browser, ".tool-card .tool-status").await, ["ok"]);
    let input = browser
        .js(
            "return document.querySelector('.tool-card .tool-input pre').textContent",
            vec![],
        )
        .await;
    assert!(input.as_str().unwrap().contains("Groceries"), "{input}");
    // The order on screen is the order of the run: tool card first, then the answer.
    let order = browser
        .js(
            "return [...document.querySelector('.msg-agent .msg-body').children].map(e => e.className)",
            vec![],
        )
        .await;
    assert_eq!(order, json!(["tool-card", "msg-text"]));
    browser.screenshot("chat").await;

    // The trace link opens the detail with each step and its timing.
    browser.click(".msg-foot a").await;
    browser.ready("traces").await;
    let kinds = texts(&browser, "#trace-steps .step-kind").await;
    assert_eq!(kinds, ["LLM call", "Tool", "LLM call"]);
    let times = texts(&browser, "#trace-steps .step-time").await;
    assert!(
        times
            .iter()
            .all(|t| t.ends_with(" ms") || t.ends_with(" s")),
        "{times:?}"
    );
    let tool = browser
        .text("#trace-steps li[data-kind=\"tool_invocation\"]")
        .await;
    assert!(tool.contains("create_note"), "{tool}");
    browser.screenshot("trace-detail").await;

    // Back returns to the chat, with the conversation still there.
    browser.client.back().await.unwrap();
    browser.ready("chat").await;
    assert_eq!(
        texts(&browser, ".msg-user .msg-text").await,
        ["Remember to buy oat milk"]
    );

    browser.tab("traces").await;
    assert_eq!(
        texts(&browser, "tr[data-trace] .trace-open").await,
        ["Remember to buy oat milk"]
    );
    browser.screenshot("traces").await;

    // A run that fails shows its error plainly (the fake has no replies left).
    browser.tab("chat").await;
    browser.type_into("#chat-prompt", "one more").await;
    browser.click("#chat-send").await;
    let error = browser
        .wait_for(
            "the error of the failed run",
            "return document.querySelector('.msg-agent:last-child .msg-error')?.textContent",
        )
        .await;
    assert!(error.as_str().unwrap().starts_with("Error:"), "{error}");
    browser.finish(&[]).await;
}

/// An adapter row in error, never active, with one error whose full text shows on hover.
async fn assert_error_row(browser: &Browser, row: &str, message: &str) {
    let cells = texts(browser, &format!("{row} [data-cell]")).await;
    assert_eq!(cells[2..5], ["error", "never", "1"], "{cells:?}");
    let shown = browser
        .find(&format!("{row} .error-text"))
        .await
        .attr("title")
        .await
        .unwrap();
    assert_eq!(shown.as_deref(), Some(message), "full text on hover");
}

#[tokio::test]
async fn chat_is_a_conversation_that_can_be_reopened_and_started_anew() {
    let fake = llm::openai(vec![
        Reply::Text("Hello Ada."),
        Reply::Text("You are Ada."),
        Reply::Text("Nice to meet you."),
    ])
    .await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser.open("chat").await;
    let answers =
        "return [...document.querySelectorAll('.msg-agent .msg-text')].map(t => t.textContent)";
    let say = async |prompt: &str, count: usize| {
        browser.type_into("#chat-prompt", prompt).await;
        browser.click("#chat-send").await;
        browser
            .wait_for_with(
                "the answer",
                "return document.querySelectorAll('.msg-agent .msg-foot').length === arguments[0]",
                vec![json!(count)],
            )
            .await;
    };
    say("My name is Ada.", 1).await;
    say("What is my name?", 2).await;
    assert_eq!(
        browser.js(answers, vec![]).await,
        json!(["Hello Ada.", "You are Ada."])
    );
    // The second turn reached the model with the first.
    let second = &fake.requests()[1].body;
    assert!(
        second["messages"].to_string().contains("Hello Ada."),
        "{second}"
    );
    let hash = browser.js("return location.hash", vec![]).await;
    let id = hash
        .as_str()
        .unwrap()
        .strip_prefix("#/chat?c=")
        .unwrap()
        .to_owned();
    assert_eq!(
        browser
            .js(
                "return document.getElementById('chat-agent').disabled",
                vec![]
            )
            .await,
        true,
        "a conversation keeps its agent"
    );

    // A new chat forgets it; the recent list reopens it, messages and all.
    browser.click("#chat-new").await;
    assert_eq!(browser.js(answers, vec![]).await, json!([]));
    say("Hi, I am Bo.", 1).await;
    assert!(
        !fake.requests()[2].body["messages"]
            .to_string()
            .contains("Ada"),
        "a new conversation starts empty"
    );
    browser
        .js(
            "const s = document.getElementById('chat-recent'); s.value = arguments[0]; s.dispatchEvent(new Event('change'))",
            vec![json!(id)],
        )
        .await;
    browser
        .wait_for(
            "the conversation reopened",
            "return document.querySelectorAll('.msg-agent .msg-text').length === 2",
        )
        .await;
    assert_eq!(
        browser.js(answers, vec![]).await,
        json!(["Hello Ada.", "You are Ada."])
    );
    assert_eq!(
        browser
            .js(
                "return document.querySelectorAll('.msg-user').length",
                vec![]
            )
            .await,
        2
    );
    browser.screenshot("chat-conversation").await;
    browser.finish(&[]).await;
}

#[tokio::test]
async fn chat_asks_for_approval_inline_and_shows_the_answer_after_it() {
    let fake = llm::openai(vec![
        Reply::Tools(vec![("c1", "create_note", json!({"title": "Plan"}))]),
        Reply::Text("Saved."),
    ])
    .await;
    let server = Server::start_with_config(
        "[tools.create_note]\napproval = true\n",
        &openai_env(&fake.url),
    );
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser.open("chat").await;
    browser.type_into("#chat-prompt", "Save a plan").await;
    browser.click("#chat-send").await;
    browser
        .wait_for(
            "the approval card",
            "return document.querySelector('.approval-card .approval-approve') !== null",
        )
        .await;
    assert_eq!(
        browser
            .js(
                "return document.querySelector('.approval-card .tool-name').textContent",
                vec![]
            )
            .await,
        "create_note"
    );
    // The sidebar's badge counts what waits.
    browser
        .wait_for(
            "the pending badge",
            "return document.querySelector('[data-count=pending_approvals]').textContent === '1'",
        )
        .await;
    browser.screenshot("chat-approval").await;
    browser.click(".approval-card .approval-approve").await;
    browser
        .wait_for(
            "the answer after the decision",
            "return [...document.querySelectorAll('.msg-agent .msg-text')].some(t => t.textContent === 'Saved.')",
        )
        .await;
    let (_, all) = server.get("/api/approvals").await;
    assert_eq!(all["approvals"][0]["status"], "approved");
    browser.finish(&[]).await;
}

#[tokio::test]
async fn tasks_tab_approves_the_call_a_scheduled_run_waits_for() {
    let fake = llm::openai(vec![
        Reply::Tools(vec![("c1", "create_note", json!({"title": "Plan"}))]),
        Reply::Text("Saved."),
    ])
    .await;
    let mut env = openai_env(&fake.url);
    env.push(("SERVICE_SCHEDULER_TICK_SECS", "1".into()));
    let server = Server::start_with_config("[tools.create_note]\napproval = true\n", &env);
    crate::scheduler::create(
        &server,
        "notes",
        crate::scheduler::DUE_ONLY_WHEN_BACKDATED,
        "coalesce",
    );
    crate::scheduler::backdate(&server, "notes", 0);
    eventually(20, async || {
        let (_, pending) = server.get("/api/approvals?status=pending").await;
        (pending["approvals"].as_array()?.len() == 1).then_some(())
    })
    .await;
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser.open("tasks").await;
    browser
        .wait_for(
            "the approve button",
            "return document.querySelector('.approval-approve') !== null",
        )
        .await;
    assert_eq!(
        browser.text(".waiting-for").await,
        "waiting for approval of create_note"
    );
    browser.screenshot("tasks-approval").await;
    browser.click(".approval-approve").await;
    browser
        .wait_for(
            "the task completed",
            "return document.querySelector('[data-status=\"completed\"]') !== null",
        )
        .await;
    assert_eq!(
        crate::scheduler::runs_of(&server, "notes").await[0]["status"],
        "completed"
    );
    browser.finish(&[]).await;
}

#[tokio::test]
async fn chat_shows_tokens_as_they_arrive_before_the_run_ends() {
    // The test decides when each token arrives, and looks at the page in between.
    let (reply, pieces) = llm::by_hand();
    let fake = llm::openai(vec![reply]).await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser.open("chat").await;
    browser
        .type_into("#chat-prompt", "What is on the list?")
        .await;
    browser.click("#chat-send").await;

    // What the page shows of the answer while it streams: the text so far, whether the turn
    // still streams, and whether the end (footer with the trace link, or an error) is there.
    let partial = "const turn = document.querySelector('.msg-agent');
        return turn && {text: turn.querySelector('.msg-text')?.textContent ?? null,
            streaming: turn.classList.contains('streaming'),
            busy: turn.getAttribute('aria-busy'),
            ended: turn.querySelector('.msg-foot, .msg-error, a[href^=\"#/traces/\"]') !== null,
            stop: !document.getElementById('chat-stop').hidden,
            sendDisabled: document.getElementById('chat-send').disabled}";
    let wait_text = async |text: &str| {
        browser
            .wait_for_with(
                &format!("{text:?} on screen"),
                "const t = document.querySelector('.msg-agent .msg-text'); return t !== null && t.textContent === arguments[0]",
                vec![json!(text)],
            )
            .await;
        browser.js(partial, vec![]).await
    };
    let in_progress = |text: &str| json!({"text": text, "streaming": true, "busy": "true", "ended": false, "stop": true, "sendDisabled": true});

    pieces.send("Oat ").unwrap();
    assert_eq!(wait_text("Oat ").await, in_progress("Oat "));
    pieces.send("milk ").unwrap();
    assert_eq!(wait_text("Oat milk ").await, in_progress("Oat milk "));
    pieces.send("and ").unwrap();
    assert_eq!(
        wait_text("Oat milk and ").await,
        in_progress("Oat milk and ")
    );
    browser.screenshot("chat-streaming").await;
    // The stream is held open: nothing more arrives and the run does not end by itself.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        browser.js(partial, vec![]).await,
        in_progress("Oat milk and ")
    );

    pieces.send("bread.").unwrap();
    drop(pieces);
    let footer = browser
        .wait_for(
            "the run to finish",
            "return document.querySelector('.msg-agent:not(.streaming) .msg-foot')?.textContent",
        )
        .await;
    assert!(footer.as_str().unwrap().contains("trace"), "{footer}");
    let done = browser.js(partial, vec![]).await;
    assert_eq!(done["text"], "Oat milk and bread.");
    assert_eq!(done["streaming"], false);
    assert_eq!(done["busy"], Value::Null);
    assert_eq!(done["stop"], false);
    assert_eq!(done["sendDisabled"], false);
    // One text run, not a paragraph per token.
    assert_eq!(texts(&browser, ".msg-agent .msg-text").await.len(), 1);
    browser.finish(&[]).await;
}

#[tokio::test]
async fn a_refresh_during_an_answer_rejoins_its_run_and_a_trace_shows_a_run_live() {
    let (reply, pieces) = llm::by_hand();
    let (watched, watched_pieces) = llm::by_hand();
    let fake = llm::openai(vec![reply, watched]).await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser.open("chat").await;
    browser.type_into("#chat-prompt", "Tell me a story").await;
    browser.click("#chat-send").await;
    pieces.send("Once ").unwrap();
    browser
        .wait_for(
            "the first token",
            "return document.querySelector('.msg-agent .msg-text')?.textContent === 'Once '",
        )
        .await;

    // The page goes away mid-answer; the run does not.
    browser.client.refresh().await.unwrap();
    browser.ready("chat").await;
    browser
        .wait_for(
            "the answer so far, streaming again",
            "const t = document.querySelector('.msg-agent.streaming .msg-text'); return t !== null && t.textContent === 'Once '",
        )
        .await;
    pieces.send("upon ").unwrap();
    pieces.send("a time.").unwrap();
    drop(pieces);
    let footer = browser
        .wait_for(
            "the run to finish",
            "return document.querySelector('.msg-agent:not(.streaming) .msg-foot')?.textContent",
        )
        .await;
    assert!(footer.as_str().unwrap().starts_with("Done in"), "{footer}");
    assert_eq!(
        texts(&browser, ".msg-agent .msg-text").await,
        ["Once upon a time."]
    );
    assert_eq!(
        texts(&browser, ".msg-user .msg-text").await,
        ["Tell me a story"]
    );
    browser.screenshot("chat-rejoined").await;
    let (_, runs) = server.get("/api/runs").await;
    assert_eq!(runs["total"], 1, "one run: {runs}");
    assert_eq!(runs["runs"][0]["status"], "completed");

    // Once it ended, a refresh shows the exchange once, from the conversation.
    browser.client.refresh().await.unwrap();
    browser.ready("chat").await;
    browser
        .wait_for(
            "the conversation",
            "return document.querySelector('.msg-agent .msg-text')?.textContent === 'Once upon a time.'",
        )
        .await;
    assert_eq!(texts(&browser, ".msg-agent").await.len(), 1);

    // A run started elsewhere is watched live from its trace.
    let (status, started) = server
        .post("/api/runs", json!({"prompt": "and another"}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let trace_id = started["trace_id"].as_str().unwrap().to_owned();
    watched_pieces.send("Twice ").unwrap();
    eventually(10, async || {
        let (status, _) = server.get(&format!("/api/traces/{trace_id}")).await;
        (status == StatusCode::OK).then_some(())
    })
    .await;
    browser.open(&format!("traces/{trace_id}")).await;
    browser
        .wait_for(
            "the answer so far, live",
            "return document.querySelector('#trace-live .live-text')?.textContent === 'Twice '",
        )
        .await;
    watched_pieces.send("told.").unwrap();
    drop(watched_pieces);
    browser
        .wait_for(
            "the finished trace",
            "return document.querySelector('#trace-live') === null && document.querySelector('.trace-detail .two-col')?.textContent.includes('Twice told.')",
        )
        .await;
    browser.finish(&[]).await;
}

#[tokio::test]
async fn user_supplied_strings_render_as_text() {
    let server = Server::start();
    let (status, _) = server
        .post(
            "/api/agents",
            json!({
                "name": XSS_NAME,
                "system_prompt": "<script>window.pwned = 1</script>",
                "description": "<b>bold</b><script>window.pwned = 2</script>",
                "color": "#e44",
            }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _) = server
        .post(
            "/api/chat",
            json!({"prompt": "<img src=y onerror=alert(2)>", "agent": XSS_NAME}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    server.create_task("<svg onload=alert(3)>", XSS_NAME, TaskStatus::Running);
    // Schedules are made with the CLI; this one's name, prompt and agent are all markup.
    let output = cli(
        &server.data_dir,
        &[
            "schedule", "create", XSS_NAME, "--cron", "@daily", "--agent", XSS_NAME, "--prompt",
            XSS_NAME,
        ],
    );
    assert!(output.status.success(), "{output:?}");
    let Some(browser) = Browser::start(&server).await else {
        return;
    };

    browser.open("agents").await;
    let names = texts(&browser, ".agent .agent-name").await;
    assert_eq!(names, ["default", XSS_NAME]);
    let description = browser.text(".agent:last-child .agent-desc").await;
    assert_eq!(description, "<b>bold</b><script>window.pwned = 2</script>");
    browser.screenshot("agents-xss").await;

    browser.tab("chat").await;
    let options = texts(&browser, "#chat-agent option").await;
    assert_eq!(options, ["default", XSS_NAME]);
    browser
        .find("#chat-agent")
        .await
        .select_by_value(XSS_NAME)
        .await
        .unwrap();

    browser.tab("tasks").await;
    assert_eq!(
        texts(&browser, ".task-title").await,
        ["<svg onload=alert(3)>"]
    );

    browser.tab("schedules").await;
    let row = browser
        .js(
            "const rows = [...document.querySelectorAll('#schedule-table tr[data-schedule]')];
             const cells = rows[0] ? [...rows[0].cells] : [];
             return {rows: rows.length, key: rows[0]?.dataset.schedule ?? null,
                     name: cells[0]?.textContent ?? null,
                     prompt: cells[0]?.querySelector('[title]')?.getAttribute('title') ?? null,
                     agent: cells[2]?.textContent ?? null,
                     markup: document.querySelectorAll('main img, main svg:not(.icon), main script, main [onerror]').length}",
            vec![],
        )
        .await;
    assert_eq!(
        row,
        json!({"rows": 1, "key": XSS_NAME, "name": XSS_NAME, "prompt": XSS_NAME, "agent": XSS_NAME, "markup": 0})
    );
    // An `<img src=x>` that became an element would have failed to load and fired by now.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        browser.client.get_alert_text().await.is_err(),
        "an alert opened on the Schedules tab"
    );
    browser.screenshot("schedules-xss").await;

    browser.tab("traces").await;
    browser.click("tr[data-trace] .trace-open").await;
    browser.ready("traces").await;
    let prompt = browser.text(".two-col .block pre").await;
    assert_eq!(prompt, "<img src=y onerror=alert(2)>");

    let injected = browser
        .js(
            "return {imgs: document.querySelectorAll('img, svg:not(.icon, .sprite), b, main script').length, pwned: window.pwned ?? null}",
            vec![],
        )
        .await;
    assert_eq!(injected, json!({"imgs": 0, "pwned": null}));
    browser.finish(&[]).await;
}

#[tokio::test]
async fn adapters_tab_disables_and_enables_the_scheduler() {
    let server = Server::start();
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser.open("adapters").await;
    let row = ".adapter-card[data-adapter=\"scheduler\"]";
    browser
        .wait_for(
            "the scheduler running",
            "return document.querySelector('.adapter-card[data-adapter=\"scheduler\"]')?.dataset.status === 'running'",
        )
        .await;
    let cells = texts(&browser, &format!("{row} [data-cell]")).await;
    assert_eq!(cells[1], "native", "{cells:?}");
    assert_eq!(cells[2], "running", "{cells:?}");
    assert!(
        cells[3] == "just now" || cells[3].ends_with("ago"),
        "relative last activity: {cells:?}"
    );
    assert_eq!(cells[4], "0", "{cells:?}");
    browser.screenshot("adapters").await;

    browser.click(&format!("{row} .toggle-button")).await;
    browser
        .wait_for(
            "the scheduler stopped",
            "return document.querySelector('.adapter-card[data-adapter=\"scheduler\"]')?.dataset.status === 'stopped'",
        )
        .await;
    assert_eq!(
        server.adapter("scheduler").await.unwrap()["status"],
        "stopped"
    );
    assert_eq!(
        browser.text(&format!("{row} .toggle-button")).await,
        "Enable"
    );
    // Keyboard focus stays on the toggle after the table refreshes.
    let focused = browser
        .js(
            "return document.activeElement.dataset.focusKey ?? null",
            vec![],
        )
        .await;
    assert_eq!(focused, "toggle:scheduler");
    browser.screenshot("adapters-disabled").await;

    browser.click(&format!("{row} .toggle-button")).await;
    browser
        .wait_for(
            "the scheduler running again",
            "return document.querySelector('.adapter-card[data-adapter=\"scheduler\"]')?.dataset.status === 'running'",
        )
        .await;
    assert_eq!(
        server.adapter("scheduler").await.unwrap()["status"],
        "running"
    );

    // The list refreshes on its own: a change made elsewhere appears without a reload.
    let (status, _) = server
        .post("/api/adapters/scheduler/disable", Value::Null)
        .await;
    assert_eq!(status, StatusCode::OK);
    browser
        .wait_for(
            "the poll to pick up the change",
            "return document.querySelector('.adapter-card[data-adapter=\"scheduler\"]')?.dataset.status === 'stopped'",
        )
        .await;
    browser.finish(&[]).await;
}

#[tokio::test]
async fn adapters_tab_shows_an_error_with_its_full_text_on_hover() {
    // An unknown zone is an error on the scheduler's entry, not a crash.
    let server = Server::start_with(&[("SERVICE_TZ", "Mars/Olympus_Mons")]);
    let message = server.adapter("scheduler").await.unwrap()["error_message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("Mars/Olympus_Mons"), "{message}");
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser.open("adapters").await;
    let row = ".adapter-card[data-adapter=\"scheduler\"]";
    assert_error_row(&browser, row, &message).await;
    let cut = browser
        .js(
            "const e = document.querySelector('.adapter-card[data-adapter=\"scheduler\"] .error-text'); return e.scrollWidth > e.clientWidth",
            vec![],
        )
        .await;
    assert_eq!(cut, true, "the long message is cut to one line");
    // Failing is not off: it can be turned off, not enabled.
    assert_eq!(
        browser.text(&format!("{row} .toggle-button")).await,
        "Disable"
    );
    browser.screenshot("adapters-error").await;
    browser.finish(&[]).await;
}

#[tokio::test]
async fn adapters_tab_shows_mcp_servers_and_the_agent_form_offers_their_tools() {
    if !crate::mcp::sdk_available() {
        return;
    }
    // A remote A2A agent nobody answers for shows beside them.
    let config = format!(
        "[mcp]\nconnect_timeout_secs = 5\n{}[mcp.servers.silent]\ncommand = [\"sleep\", \"60\"]\n\
         [a2a.agents.gone]\nurl = \"http://127.0.0.1:9/\"\n",
        crate::mcp::stdio_entry("files", "")
    );
    let server = Server::start_with_config(&config, &[]);
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser.open("adapters").await;
    let card = |name: &str| format!(".mcp-card[data-mcp-server=\"{name}\"]");
    browser
        .wait_for(
            "both servers to settle",
            "return document.querySelector('.mcp-card[data-mcp-server=\"files\"]')?.dataset.state === 'ready' \
             && document.querySelector('.mcp-card[data-mcp-server=\"silent\"]')?.dataset.state === 'error'",
        )
        .await;
    assert_eq!(
        browser
            .text(&format!("{} [data-cell=\"tools\"]", card("files")))
            .await,
        "8 tools"
    );
    assert!(
        browser
            .text(&format!("{} [data-cell=\"server\"]", card("files")))
            .await
            .starts_with("test-tools 1.0")
    );
    assert!(
        browser
            .text(&format!("{} [data-cell=\"error\"]", card("silent")))
            .await
            .contains("no answer to the handshake within 5 s")
    );
    let gone = ".a2a-card[data-a2a-agent=\"gone\"]";
    browser
        .wait_for(
            "the A2A agent's card to fail",
            &format!("return document.querySelector('{gone}')?.dataset.state === 'error'"),
        )
        .await;
    assert!(
        browser
            .text(&format!("{gone} [data-cell=\"error\"]"))
            .await
            .contains("cannot fetch its card")
    );
    browser
        .js(
            "document.getElementById('mcp-servers').scrollIntoView()",
            vec![],
        )
        .await;
    browser.screenshot("adapters-mcp").await;

    // The agent form offers the server's tools and a wildcard for all of them.
    browser.tab("agents").await;
    let picker = ".tool-picker .chip-button";
    let offered = texts(&browser, picker).await;
    for name in ["mcp__files__*", "mcp__files__add", "mcp__files__slow"] {
        assert!(offered.iter().any(|t| t == name), "{name} in {offered:?}");
    }
    browser
        .js(
            "[...document.querySelectorAll(arguments[0])].find(b => b.textContent === 'mcp__files__*').click()",
            vec![json!(picker)],
        )
        .await;
    let value = browser
        .js(
            "return document.querySelector('#agent-tools').value",
            vec![],
        )
        .await;
    assert_eq!(value, "mcp__files__*");
    browser.finish(&[]).await;
}

#[tokio::test]
async fn tasks_tab_follows_status_changes_and_guards_delete() {
    let server = Server::start();
    let task = server.create_task("Nightly digest", "default", TaskStatus::Running);
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser.open("tasks").await;
    let status = format!("document.querySelector('tr[data-task=\"{task}\"]')?.dataset.status");
    assert_eq!(
        browser
            .js(&format!("return {status} ?? null"), vec![])
            .await,
        "running"
    );
    assert_eq!(texts(&browser, ".task-title").await, ["Nightly digest"]);

    // Changed by the runtime: the table follows (it polls every few seconds).
    set_task_status(&server, &task, TaskStatus::Completed);
    browser
        .wait_for(
            "the task to show completed",
            &format!("return {status} === 'completed'"),
        )
        .await;
    browser.screenshot("tasks").await;

    // Filter tabs count every status; the filter lives in the URL, so reload and back keep it.
    let tabs = "return [...document.querySelectorAll('#task-filter .filter-tab')].map(t => [t.dataset.filter, t.querySelector('.filter-count').textContent, t.getAttribute('aria-current')])";
    assert_eq!(
        browser.js(tabs, vec![]).await,
        json!([
            ["", "1", "true"],
            ["pending", "0", null],
            ["running", "0", null],
            ["completed", "1", null],
            ["error", "0", null],
            ["cancelled", "0", null]
        ])
    );
    browser
        .click("#task-filter [data-filter=\"running\"]")
        .await;
    browser
        .wait_for(
            "the running filter",
            "return location.hash === '#/tasks?status=running' && document.querySelector('main[data-ready=\"tasks\"] .empty') !== null",
        )
        .await;
    browser
        .click("#task-filter [data-filter=\"completed\"]")
        .await;
    browser
        .wait_for(
            "the completed filter",
            "return location.hash === '#/tasks?status=completed' && document.querySelector('main[data-ready=\"tasks\"] tr[data-task]') !== null",
        )
        .await;
    browser.client.refresh().await.unwrap();
    browser.ready("tasks").await;
    assert_eq!(
        browser
            .text("#task-filter [aria-current=\"true\"]")
            .await
            .split_whitespace()
            .collect::<Vec<_>>(),
        ["completed", "1"]
    );
    browser.client.back().await.unwrap();
    browser
        .wait_for(
            "back to the running filter",
            "return location.hash === '#/tasks?status=running' && document.querySelector('main[data-ready=\"tasks\"]') !== null",
        )
        .await;
    browser.tab("tasks").await;
    // The tab was rendered already (the running filter): wait for the whole list's rows.
    browser
        .wait_for(
            "the whole list",
            "return document.querySelector('main[data-ready=\"tasks\"] .task-remove') !== null",
        )
        .await;

    // Delete asks first; keeping the task changes nothing.
    browser.click(".task-remove").await;
    browser
        .wait_for(
            "the confirm dialog",
            "return document.getElementById('confirm').open",
        )
        .await;
    assert!(
        browser
            .text("#confirm-message")
            .await
            .contains("Nightly digest")
    );
    browser.screenshot("tasks-confirm").await;
    browser.click("#confirm-cancel").await;
    assert_eq!(
        browser
            .js("return document.getElementById('confirm').open", vec![])
            .await,
        false
    );
    let (_, body) = server.get("/api/tasks").await;
    assert_eq!(body["tasks"].as_array().unwrap().len(), 1);

    browser.click(".task-remove").await;
    browser.click("#confirm-ok").await;
    browser
        .wait_for(
            "the task to disappear",
            "return document.querySelector('tr[data-task]') === null && document.querySelector('#task-table .empty') !== null",
        )
        .await;
    let (_, body) = server.get("/api/tasks").await;
    assert_eq!(body["tasks"], json!([]));
    browser.finish(&[]).await;
}

#[tokio::test]
async fn schedules_tab_creates_edits_toggles_runs_and_deletes_schedules() {
    let fake = llm::openai(vec![Reply::Text("Your day is planned.")]).await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    let output = cli(
        &server.data_dir,
        &[
            "schedule",
            "create",
            "morning",
            "--cron",
            "0 7 * * *",
            "--agent",
            "default",
            "--prompt",
            "plan my day",
        ],
    );
    assert!(output.status.success(), "{output:?}");
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser.open("schedules").await;
    let cells = texts(&browser, "tr[data-schedule=\"morning\"] td").await;
    assert_eq!(cells[..3], ["morning", "0 7 * * *", "default"], "{cells:?}");
    assert!(cells[3].starts_with("in "), "{cells:?}");
    assert_eq!(cells[4..7], ["coalesce", "enabled", "never"], "{cells:?}");

    // A bad cron is refused and marked on its field; nothing is created.
    browser.type_into("#schedule-name", "digest").await;
    browser.type_into("#schedule-cron", "every tuesday").await;
    browser
        .type_into("#schedule-prompt", "Summarise the week")
        .await;
    browser.click("#schedule-submit").await;
    let error = browser
        .wait_for(
            "the cron's error",
            "return document.querySelector('[data-error-for=\"cron\"]').textContent",
        )
        .await;
    assert!(error.as_str().unwrap().contains("every tuesday"), "{error}");
    let (_, listed) = server.get("/api/schedules").await;
    assert_eq!(listed["schedules"].as_array().unwrap().len(), 1);
    browser
        .js(
            "document.querySelector('#schedule-cron').value = '@weekly'",
            vec![],
        )
        .await;
    browser.click("#schedule-submit").await;
    browser
        .wait_for(
            "the new row",
            "return document.querySelector('tr[data-schedule=\"digest\"]')",
        )
        .await;
    assert_eq!(
        texts(&browser, "tr[data-schedule=\"digest\"] td").await[1],
        "0 0 * * 0"
    );

    // Edited: the form takes the row, the name stays.
    browser
        .click("tr[data-schedule=\"digest\"] [data-action=\"edit\"]")
        .await;
    assert_eq!(
        browser
            .js(
                "return document.querySelector('#schedule-name').readOnly",
                vec![]
            )
            .await,
        true
    );
    browser
        .js(
            "document.querySelector('#schedule-cron').value = '30 6 * * 1-5'",
            vec![],
        )
        .await;
    browser.click("#schedule-submit").await;
    browser
        .wait_for(
            "the edited cron",
            "return document.querySelector('tr[data-schedule=\"digest\"] td:nth-child(2)')?.textContent === '30 6 * * 1-5'",
        )
        .await;

    // Disabled and enabled again.
    browser
        .click("tr[data-schedule=\"digest\"] [data-action=\"disable\"]")
        .await;
    browser
        .wait_for("disabled", "return document.querySelector('tr[data-schedule=\"digest\"] [data-action=\"enable\"]')")
        .await;
    assert_eq!(
        texts(&browser, "tr[data-schedule=\"digest\"] td").await[5],
        "disabled"
    );
    browser
        .click("tr[data-schedule=\"digest\"] [data-action=\"enable\"]")
        .await;
    browser
        .wait_for("enabled", "return document.querySelector('tr[data-schedule=\"digest\"] [data-action=\"disable\"]')")
        .await;

    // Run now: a task of the schedule, answered by the model.
    browser
        .click("tr[data-schedule=\"morning\"] [data-action=\"run\"]")
        .await;
    let task = eventually(20, async || {
        let (_, tasks) = server.get("/api/tasks").await;
        let task = tasks["tasks"]
            .as_array()?
            .iter()
            .find(|t| t["schedule_name"] == "morning")?
            .clone();
        (task["status"] == "completed").then_some(task)
    })
    .await;
    assert_eq!(task["title"], "Scheduled run: morning");
    assert_eq!(fake.requests().len(), 1);
    browser.screenshot("schedules").await;

    // Deleted, after a confirmation.
    browser
        .click("tr[data-schedule=\"digest\"] [data-action=\"delete\"]")
        .await;
    browser.click("#confirm-ok").await;
    browser
        .wait_for(
            "the row gone",
            "return !document.querySelector('tr[data-schedule=\"digest\"]')",
        )
        .await;
    let (_, listed) = server.get("/api/schedules").await;
    let names: Vec<&str> = listed["schedules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["morning"]);
    browser.finish(&[400]).await;
}

#[tokio::test]
async fn narrow_window_keeps_every_tab_in_reach() {
    let server = Server::start();
    server.post("/api/store/atlas/install", Value::Null).await;
    server.create_task("Weekly report", "Atlas", TaskStatus::Pending);
    // Two runs, so the Traces tab draws its latency chart.
    for prompt in ["first", "second"] {
        let (status, _) = server.post("/api/chat", json!({ "prompt": prompt })).await;
        assert_eq!(status, StatusCode::OK);
    }
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser.client.set_window_size(390, 844).await.unwrap();
    browser.open("agents").await;
    let width = browser.js("return window.innerWidth", vec![]).await;
    assert!(width.as_u64().unwrap() <= 400, "viewport {width}");
    // The sidebar becomes rows of tabs across the top: every link in sight, the bar short,
    // and the page never scrolls sideways.
    let layout = browser
        .js(
            "const nav = document.querySelector('.sidebar').getBoundingClientRect();
             const links = [...document.querySelectorAll('.sidebar a')].filter(a => !a.hidden).map(a => a.getBoundingClientRect());
             return {navHeight: nav.height, pageOverflow: document.documentElement.scrollWidth - window.innerWidth,
                     links: links.length,
                     outside: links.filter(r => r.left < 0 || r.right > window.innerWidth || r.bottom > window.innerHeight).length}",
            vec![],
        )
        .await;
    assert!(layout["navHeight"].as_f64().unwrap() < 100.0, "{layout}");
    assert!(layout["pageOverflow"].as_f64().unwrap() <= 0.0, "{layout}");
    // The owner is an admin: People and Audit too.
    assert_eq!(layout["links"], 10, "{layout}");
    assert_eq!(layout["outside"], 0, "{layout}");
    browser.screenshot("narrow-agents").await;

    for tab in [
        "chat",
        "store",
        "tasks",
        "adapters",
        "schedules",
        "traces",
        "settings",
    ] {
        browser.tab(tab).await;
        let overflow = browser
            .js(
                "return document.documentElement.scrollWidth - window.innerWidth",
                vec![],
            )
            .await;
        assert!(
            overflow.as_f64().unwrap() <= 0.0,
            "{tab} scrolls sideways by {overflow}"
        );
        browser.screenshot(&format!("narrow-{tab}")).await;
    }
    // The latency chart's labels stay readable at this width.
    browser.tab("traces").await;
    let label = browser
        .wait_for(
            "the chart's axis labels",
            "const t = document.querySelector('#latency-chart .axis'); return t && t.getBoundingClientRect().height",
        )
        .await;
    assert!(
        label.as_f64().unwrap() >= 9.0,
        "axis labels {label} px high"
    );
    // Tables turn into labelled cards.
    browser.tab("tasks").await;
    let label = browser
        .js(
            "return getComputedStyle(document.querySelector('td[data-label=\"Status\"]'), '::before').content",
            vec![],
        )
        .await;
    assert_eq!(label, "\"Status\"");
    browser.finish(&[]).await;
}

#[tokio::test]
async fn adapters_tab_shows_a_dropped_in_component_without_reload() {
    let server = Server::start();
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser.open("adapters").await;
    let wasm = crate::guests::guest("echo");
    let dir = server.data_dir.join("adapters");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("echo.toml"), "kv = true\njobs = true\nagent = true\ntools = [\"*\"]\nsecrets = [\"ECHO_TOKEN\"]\noutbound_hosts = [\"http://127.0.0.1:9\"]\n").unwrap();
    std::fs::copy(&wasm, dir.join("echo.partial")).unwrap();
    std::fs::rename(dir.join("echo.partial"), dir.join("echo.wasm")).unwrap();
    browser
        .wait_for(
            "the component's row",
            "return document.querySelector('.adapter-card[data-adapter=\"echo\"]')?.dataset.status === 'running'",
        )
        .await;
    let cells = texts(&browser, ".adapter-card[data-adapter=\"echo\"] [data-cell]").await;
    assert_eq!(cells[1], "wasm", "{cells:?}");
    assert!(
        cells.iter().any(|c| c.contains("kv")),
        "granted capabilities are listed: {cells:?}"
    );
    browser.screenshot("adapters-wasm").await;

    std::fs::remove_file(dir.join("echo.wasm")).unwrap();
    browser
        .wait_for(
            "the row to go",
            "return document.querySelector('.adapter-card[data-adapter=\"echo\"]') === null",
        )
        .await;
    browser.finish(&[]).await;
}

#[tokio::test]
async fn adapters_tab_lists_a_components_failed_calls_and_shows_one_on_a_timeline() {
    let server = Server::start_with(&[("HOSTILE_TOKEN", "hostile-token-value-1234")]);
    let grant = "record = \"all\"\nsecrets = [\"HOSTILE_TOKEN\"]\n";
    crate::wasm::drop_in(&server, "hostile", &crate::guests::guest("hostile"), grant);
    crate::wasm::loaded(&server, "hostile").await;
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    let get = async |path: &str| {
        reqwest::get(server.url(&format!("/api/adapters/hostile{path}")))
            .await
            .unwrap()
            .status()
    };
    assert!(get("/panic").await.is_server_error());
    assert_eq!(get("/secret?name=HOSTILE_TOKEN").await, StatusCode::OK);
    let recorded = eventually(20, async || {
        let (_, body) = server.get("/api/adapters/hostile/recordings").await;
        let list = body["recordings"].as_array()?.clone();
        (list.len() >= 2).then_some(list)
    })
    .await;
    assert_eq!(recorded.len(), 2, "{recorded:?}");

    browser.open("adapters").await;
    browser
        .click(".adapter-card[data-adapter=\"hostile\"] [data-action=\"recordings\"]")
        .await;
    // The failures first: the panic, not the answered calls.
    browser
        .wait_for(
            "the failed call's row",
            "return document.querySelectorAll('tr[data-recording]').length === 1 \
             && document.querySelector('tr[data-recording]').dataset.outcome === 'error'",
        )
        .await;
    let row = browser.text("tr[data-recording]").await;
    // The pill's text is shown in lower case.
    assert!(
        row.contains("handle-http") && row.to_lowercase().contains("error: panic"),
        "{row}"
    );
    browser.click(".filter-tabs a[href$=\"outcome=all\"]").await;
    browser
        .wait_for(
            "every call",
            "return document.querySelectorAll('tr[data-recording]').length === 2",
        )
        .await;
    // The newest: the secret's read, its imports in order, the secret by name only.
    browser.click("tr[data-recording] a").await;
    browser
        .wait_for(
            "the call's imports",
            "return document.querySelector('#recording-imports [data-import=\"secrets.get\"]') !== null",
        )
        .await;
    let page = browser.text(".recording-detail").await;
    assert!(page.contains("{{secret:HOSTILE_TOKEN}}"), "{page}");
    assert!(!page.contains("hostile-token-value-1234"), "{page}");
    browser.screenshot("adapters-recording").await;

    // A shadow build of it (the same build, from another file): the card says so, and the
    // Recordings view shows its comparisons above the list.
    let build = server.data_dir.join("hostile-build.wasm");
    std::fs::copy(crate::guests::guest("hostile"), &build).unwrap();
    let shadowed = crate::support::cli(
        &server.data_dir,
        &["adapters", "install", build.to_str().unwrap(), "--shadow"],
    );
    assert!(shadowed.status.success(), "{shadowed:?}");
    eventually(30, async || {
        let entry = server.adapter("hostile").await?;
        entry["metadata"]["shadow"].is_string().then_some(())
    })
    .await;
    assert!(get("/panic").await.is_server_error());
    eventually(30, async || {
        let (_, body) = server.get("/api/adapters/hostile/shadow").await;
        (body["compared"].as_i64()? >= 1).then_some(())
    })
    .await;
    browser.open("adapters").await;
    browser
        .click(".adapter-card[data-adapter=\"hostile\"] [data-fact=\"shadow\"]")
        .await;
    browser
        .wait_for(
            "the shadow's comparisons",
            "return document.querySelector('section.shadow dl') !== null",
        )
        .await;
    let shadow = browser.text("section.shadow").await;
    assert!(
        shadow.contains("Compared") && shadow.contains("adapters promote hostile"),
        "{shadow}"
    );
    browser.screenshot("adapters-shadow").await;
    browser.finish(&[]).await;
}

#[tokio::test]
async fn adapters_tab_shows_a_broken_component_and_its_error_as_it_happens() {
    let server = Server::start();
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser.open("adapters").await;
    let row = ".adapter-card[data-adapter=\"broken\"]";
    assert_eq!(
        browser
            .js(
                &format!("return document.querySelector('{row}') === null"),
                vec![]
            )
            .await,
        true
    );
    // Marks this page load: a reload would lose it.
    browser.js("window.sameLoad = true", vec![]).await;

    let dir = server.data_dir.join("adapters");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("broken.partial"), b"\0asm junk").unwrap();
    std::fs::rename(dir.join("broken.partial"), dir.join("broken.wasm")).unwrap();
    browser
        .wait_for(
            "the broken component's row, in error",
            &format!("return document.querySelector('{row}')?.dataset.status === 'error'"),
        )
        .await;
    assert_eq!(
        browser.js("return window.sameLoad ?? false", vec![]).await,
        true,
        "the row appeared without a reload"
    );
    let cells = texts(&browser, &format!("{row} [data-cell]")).await;
    assert_eq!(cells[..2], ["broken", "wasm"], "{cells:?}");
    let pill = browser
        .find(&format!("{row} .pill"))
        .await
        .attr("class")
        .await
        .unwrap()
        .unwrap_or_default();
    assert!(pill.split(' ').any(|c| c == "pill-error"), "{pill}");
    let message = server.adapter("broken").await.unwrap()["error_message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.starts_with("LoadError"), "{message}");
    assert!(
        cells[5].ends_with(&format!(" ago: {message}"))
            || cells[5] == format!("just now: {message}"),
        "when, then what: {cells:?}"
    );
    assert_error_row(&browser, row, &message).await;
    browser.screenshot("adapters-broken").await;

    // Taking the file away takes the row away, again without a reload.
    std::fs::remove_file(dir.join("broken.wasm")).unwrap();
    browser
        .wait_for(
            "the broken row to go",
            &format!("return document.querySelector('{row}') === null && window.sameLoad === true"),
        )
        .await;
    browser.finish(&[]).await;
}

#[tokio::test]
async fn adapters_tab_explains_why_an_adapter_without_lifecycle_cannot_be_toggled() {
    let server = Server::start_with(&[("SERVICE_WEBHOOK_SECRET", "browser-test-secret")]);
    let entry = server
        .adapter("webhook")
        .await
        .expect("the bundled webhook component");
    assert_eq!(
        (&entry["status"], &entry["supports_toggle"]),
        (&json!("running"), &json!(false)),
        "{entry}"
    );
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser.open("adapters").await;
    let button = browser
        .js(
            "const row = document.querySelector('.adapter-card[data-adapter=\"webhook\"]');
             const b = row.querySelector('[data-cell=\"action\"] button');
             const described = document.getElementById(b.getAttribute('aria-describedby') ?? '');
             return {count: row.querySelectorAll('button').length, text: b.textContent,
                     disabled: b.disabled, toggle: b.classList.contains('toggle-button'),
                     title: b.title, described: described && row.contains(described) ? described.textContent : null,
                     visible: described ? described.getClientRects().length > 0 : false,
                     focusable: (b.focus(), document.activeElement === b)}",
            vec![],
        )
        .await;
    assert_eq!(button["count"], 1, "{button}");
    assert_eq!(button["text"], "Disable", "{button}");
    assert_eq!(button["disabled"], true, "{button}");
    assert_eq!(button["toggle"], false, "{button}");
    assert_eq!(button["focusable"], false, "{button}");
    assert_eq!(button["described"], "No start/stop hooks", "{button}");
    assert_eq!(
        button["visible"], true,
        "the explanation is on screen: {button}"
    );
    let title = button["title"].as_str().unwrap();
    assert!(
        title.contains("no start and stop hooks")
            && title.contains("cannot be enabled or disabled"),
        "{title}"
    );
    // A click does nothing: the adapter keeps running and nothing is posted.
    browser
        .js(
            "document.querySelector('.adapter-card[data-adapter=\"webhook\"] [data-cell=\"action\"] button').click()",
            vec![],
        )
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        browser
            .js(
                "return document.querySelector('.adapter-card[data-adapter=\"webhook\"]').dataset.status",
                vec![]
            )
            .await,
        "running"
    );
    assert_eq!(
        server.adapter("webhook").await.unwrap()["status"],
        "running"
    );
    // A toggleable adapter on the same page has a live button.
    assert_eq!(
        browser
            .js("return document.querySelector('.adapter-card[data-adapter=\"scheduler\"] .toggle-button').disabled", vec![])
            .await,
        false
    );
    browser
        .js(
            "document.querySelector('.adapter-card[data-adapter=\"webhook\"]').scrollIntoView({block: 'center'})",
            vec![],
        )
        .await;
    browser.screenshot("adapters-no-toggle").await;
    browser.finish(&[]).await;
}

#[tokio::test]
async fn settings_tab_sets_up_an_adapter_waiting_for_settings_without_showing_the_value() {
    const SECRET: &str = "typed-in-the-browser-4f1c9e";
    let server = Server::start();
    // A fresh server: the webhook adapter waits for its secret, an `error` to the API (spec
    // 3.2 rule 5) that the dashboard shows as needing setup, not as a failure.
    let entry = server
        .adapter("webhook")
        .await
        .expect("the bundled webhook");
    assert_eq!(entry["status"], "error", "{entry}");
    assert_eq!(entry["missing_settings"], json!(["SERVICE_WEBHOOK_SECRET"]));
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser.open("adapters").await;
    let row = ".adapter-card[data-adapter=\"webhook\"]";
    let card = browser
        .js(
            "const row = document.querySelector(arguments[0]);
             return {status: row.dataset.status, pill: row.querySelector('[data-cell=\"status\"] .pill').className,
                     needs: row.querySelector('.needs')?.textContent ?? null,
                     setup: row.querySelector('[data-action=\"setup\"]')?.getAttribute('href') ?? null}",
            vec![json!(row)],
        )
        .await;
    assert_eq!(
        card,
        json!({"status": "needs-setup", "pill": "pill pill-needs-setup",
               "needs": "Needs SERVICE_WEBHOOK_SECRET", "setup": "#/settings/webhook"})
    );
    // Waiting for settings has a filter of its own.
    let tab = browser
        .text("#adapter-filter [data-filter=\"needs-setup\"] .filter-count")
        .await;
    assert!(tab.parse::<usize>().unwrap() >= 1, "{tab}");
    browser.screenshot("adapters-needs-setup").await;

    // Set up opens the Settings tab at the webhook, its field ready for typing.
    browser
        .click(&format!("{row} [data-action=\"setup\"]"))
        .await;
    browser.ready("settings").await;
    let integration = "[data-integration=\"webhook\"]";
    let input = "#settings-webhook-SERVICE_WEBHOOK_SECRET";
    let arrived = browser
        .js(
            "const card = document.querySelector(arguments[0]); const r = card.getBoundingClientRect();
             return {hash: location.hash, focused: document.activeElement.id, selected: card.classList.contains('selected'),
                     inView: r.top >= 0 && r.top < window.innerHeight, configured: card.dataset.configured,
                     type: document.activeElement.type, placeholder: document.activeElement.placeholder,
                     verify: card.querySelector('[data-action=\"verify\"]') !== null}",
            vec![json!(integration)],
        )
        .await;
    assert_eq!(
        arrived,
        json!({"hash": "#/settings/webhook", "focused": &input[1..], "selected": true, "inView": true,
               "configured": "false", "type": "password", "placeholder": "not set", "verify": false})
    );
    browser.screenshot("settings").await;

    // A value the server refuses is marked on its field.
    browser.type_into(input, "   ").await;
    browser
        .click(&format!("{integration} [data-action=\"save\"]"))
        .await;
    let error = browser
        .wait_for(
            "the value's error",
            "return document.querySelector('[data-error-for=\"SERVICE_WEBHOOK_SECRET\"]').textContent",
        )
        .await;
    assert!(
        error.as_str().unwrap().contains("must not be empty"),
        "{error}"
    );
    assert_eq!(
        browser
            .find(input)
            .await
            .attr("aria-invalid")
            .await
            .unwrap(),
        Some("true".to_owned())
    );

    browser.find(input).await.clear().await.unwrap();
    browser.type_into(input, SECRET).await;
    browser
        .click(&format!("{integration} [data-action=\"save\"]"))
        .await;
    let toast = browser
        .wait_for(
            "the toast saying what the save did",
            "return [...document.querySelectorAll('.toast')].map(t => t.textContent).find(t => t.includes('saved')) ?? ''",
        )
        .await;
    let toast = toast.as_str().unwrap();
    assert!(
        toast.starts_with("Signed webhook: saved SERVICE_WEBHOOK_SECRET in .env; applied to "),
        "{toast}"
    );
    let applied = toast.split("applied to ").nth(1).unwrap();
    assert!(
        applied
            .trim_end_matches('.')
            .split(", ")
            .any(|a| a == "webhook"),
        "{toast}"
    );
    browser
        .wait_for(
            "the webhook configured",
            "const card = document.querySelector('[data-integration=\"webhook\"]');
             return card.dataset.configured === 'true' && card.querySelector('.pill-configured') !== null
                 && document.getElementById('settings-webhook-SERVICE_WEBHOOK_SECRET').placeholder === 'set'",
        )
        .await;
    browser.screenshot("settings-saved").await;
    // Stored, the value is nowhere on the page: not in the markup, not in a field.
    let shown = browser
        .js(
            "return document.documentElement.outerHTML.includes(arguments[0])
                 || [...document.querySelectorAll('input, textarea')].some(i => i.value.includes(arguments[0]))",
            vec![json!(SECRET)],
        )
        .await;
    assert_eq!(shown, false);
    let (_, integrations) = server.get("/api/integrations").await;
    assert!(!integrations.to_string().contains(SECRET));

    // A probe's outcome shows on its card: here, an API with no key.
    let openai = "[data-integration=\"openai\"]";
    browser
        .click(&format!("{openai} [data-action=\"verify\"]"))
        .await;
    let result = browser
        .wait_for(
            "the probe's outcome",
            "const card = document.querySelector('[data-integration=\"openai\"]');
             return card.dataset.verified === 'false' && card.querySelector('.verify-result[data-outcome=\"failed\"]')?.textContent",
        )
        .await;
    assert!(
        result.as_str().unwrap().starts_with("Failed: ")
            && result.as_str().unwrap().contains("not configured"),
        "{result}"
    );
    assert!(
        texts(&browser, &format!("{openai} .integration-states .pill"))
            .await
            .contains(&"verify failed".to_owned())
    );

    // The adapter read its secret: it runs, and needs nothing more.
    browser.tab("adapters").await;
    browser
        .wait_for(
            "the webhook running",
            "const row = document.querySelector('.adapter-card[data-adapter=\"webhook\"]');
             return row?.dataset.status === 'running' && row.querySelector('[data-action=\"setup\"], .needs') === null",
        )
        .await;
    assert_eq!(
        server.adapter("webhook").await.unwrap()["status"],
        "running"
    );
    browser.finish(&[400]).await;
}

#[tokio::test]
async fn screenshots_land_in_the_workspace_target_dir() {
    let server = Server::start();
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser.open("agents").await;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap();
    assert!(root.join("Cargo.lock").is_file() && root.join("tests/e2e").is_dir());
    let expected = root.join("target/screenshots/screenshot-check.png");
    let _ = std::fs::remove_file(&expected);
    let saved = browser.screenshot("screenshot-check").await;
    assert_eq!(saved.canonicalize().unwrap(), expected);
    let png = std::fs::read(&expected).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    // Not beside the build when CARGO_TARGET_DIR moves it out of the workspace (as CI does).
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        let target = std::path::PathBuf::from(target);
        if !target.starts_with(&root) {
            assert!(!saved.starts_with(&target), "{}", saved.display());
        }
    }
    std::fs::remove_file(&expected).unwrap();
    browser.finish(&[]).await;
}

/// A component's page is served on the dashboard's origin; in a real browser its script must
/// not run as the dashboard (it would write a key through the loopback-only API).
#[tokio::test]
async fn a_page_served_by_a_component_cannot_act_as_the_dashboard() {
    let server = Server::start();
    let grant = "outbound_hosts = [\"http://127.0.0.1:9\"]\njobs = true\n";
    crate::wasm::drop_in(&server, "hostile", &crate::guests::guest("hostile"), grant);
    crate::wasm::loaded(&server, "hostile").await;
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser
        .client
        .goto(&server.url("/api/adapters/hostile/html"))
        .await
        .unwrap();
    // The page's script sets the title as the page is parsed, before anything else.
    let title = browser
        .wait_for(
            "the page to load",
            "return document.readyState === 'complete' && document.title",
        )
        .await;
    assert_eq!(title, "hostile", "the component's script ran");
    // Sandboxed: the page has an origin of its own, not the dashboard's.
    let origin = browser.js("return window.origin", vec![]).await;
    assert_eq!(origin, "null");
    let env = std::fs::read_to_string(server.data_dir.join(".env")).unwrap_or_default();
    assert!(!env.contains("written-by-a-component"), "{env}");
    // Back on the dashboard, nothing was written either.
    browser.open("adapters").await;
    let (_, integrations) = server.get("/api/integrations").await;
    assert!(
        !integrations.to_string().contains("written-by-a-component"),
        "{integrations}"
    );
}

/// Whether the element `css` is entirely inside the window and is what a click at its centre
/// would hit (nothing covers it).
const IN_VIEW: &str = "const el = document.querySelector(arguments[0]); if (!el) return false;
    const r = el.getBoundingClientRect();
    const inside = r.top >= 0 && r.left >= 0 && r.bottom <= window.innerHeight && r.right <= window.innerWidth;
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return inside && (hit === el || el.contains(hit))";

#[tokio::test]
async fn agents_tab_edits_deletes_and_marks_unavailable_tools() {
    let server = Server::start();
    assert_eq!(
        server.post("/api/store/atlas/install", Value::Null).await.0,
        StatusCode::CREATED
    );
    let scratch =
        json!({"name": "Scratch", "system_prompt": "A test agent.", "tools": ["search_notes"]});
    assert_eq!(
        server.post("/api/agents", scratch).await.0,
        StatusCode::CREATED
    );
    let output = cli(
        &server.data_dir,
        &[
            "schedule", "create", "nightly", "--cron", "@daily", "--agent", "Scratch", "--prompt",
            "tidy up",
        ],
    );
    assert!(output.status.success(), "{output:?}");
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser.client.set_window_size(1280, 800).await.unwrap();
    browser.open("agents").await;
    // The form's button is in sight without scrolling, even with the offline banner shown.
    assert_eq!(
        browser.js(IN_VIEW, vec![json!("#agent-submit")]).await,
        true
    );
    assert_eq!(
        browser.text("li[data-agent=\"default\"] .card-chips").await,
        "default"
    );
    assert_eq!(
        texts(&browser, ".agent .delete").await,
        ["Delete", "Delete"],
        "every agent but default can be deleted"
    );

    // Atlas keeps the tools of adapters not loaded here, marked, with the reason.
    let atlas = "li[data-agent=\"Atlas\"]";
    assert_eq!(
        texts(&browser, &format!("{atlas} .chip-unavailable")).await,
        [
            "web_search",
            "list_calendar_events_today",
            "create_calendar_event"
        ]
    );
    assert_eq!(
        browser.text(&format!("{atlas} .unavailable-count")).await,
        "3 tools unavailable"
    );
    let reasons = texts(&browser, &format!("{atlas} .unavailable-reasons li")).await;
    assert_eq!(
        reasons,
        [
            "web_search unavailable: offered once [tools.web_search] is set in config.toml",
            "list_calendar_events_today, create_calendar_event unavailable: comes from the calendar adapter, which is not loaded",
        ]
    );
    let title = browser
        .find(&format!("{atlas} .chip-unavailable"))
        .await
        .attr("title")
        .await
        .unwrap();
    assert!(title.unwrap().contains("[tools.web_search]"));
    browser.screenshot("agents-unavailable-tools").await;

    // Edit: the form fills in, keeps the name, and saves only through PATCH.
    browser
        .click("li[data-agent=\"Scratch\"] button.edit")
        .await;
    assert_eq!(browser.text("#agent-form-title").await, "Edit Scratch");
    assert_eq!(
        browser
            .js(
                "const n = document.getElementById('agent-name'); return [n.value, n.readOnly]",
                vec![]
            )
            .await,
        json!(["Scratch", true])
    );
    assert_eq!(browser.text("#agent-submit").await, "Save changes");
    let tools = browser.find("#agent-tools").await;
    tools.clear().await.unwrap();
    tools.send_keys("search_notes, nope").await.unwrap();
    browser.click("#agent-submit").await;
    let error = browser
        .wait_for(
            "the unknown tool error",
            "return document.querySelector('[data-error-for=\"tools\"]').textContent",
        )
        .await;
    assert!(
        error.as_str().unwrap().contains("unknown tool \"nope\""),
        "{error}"
    );
    tools.clear().await.unwrap();
    tools.send_keys("search_notes, create_note").await.unwrap();
    browser.type_into("#agent-description", "Sweeps up").await;
    browser.screenshot("agents-edit").await;
    browser.click("#agent-submit").await;
    browser
        .wait_for(
            "the saved description on the card",
            "return document.querySelector('li[data-agent=\"Scratch\"] .agent-desc')?.textContent === 'Sweeps up'",
        )
        .await;
    assert_eq!(
        texts(&browser, "li[data-agent=\"Scratch\"] .chip").await,
        ["search_notes", "create_note"]
    );
    assert_eq!(browser.text("#agent-form-title").await, "New agent");
    let (_, saved) = server.get("/api/agents/Scratch").await;
    assert_eq!(
        (
            &saved["description"],
            &saved["tools"],
            &saved["system_prompt"]
        ),
        (
            &json!("Sweeps up"),
            &json!(["search_notes", "create_note"]),
            &json!("A test agent.")
        )
    );

    // Delete asks first and says which schedule still names the agent.
    browser
        .click("li[data-agent=\"Scratch\"] button.delete")
        .await;
    browser
        .wait_for(
            "the confirm dialog",
            "return document.getElementById('confirm').open",
        )
        .await;
    let message = browser.text("#confirm-message").await;
    assert!(
        message.contains("schedule “nightly”") && message.contains("error trace"),
        "{message}"
    );
    browser.screenshot("agents-delete-confirm").await;
    browser.click("#confirm-cancel").await;
    assert_eq!(server.get("/api/agents/Scratch").await.0, StatusCode::OK);
    browser
        .click("li[data-agent=\"Scratch\"] button.delete")
        .await;
    // The dialog opens once the references are in.
    browser
        .wait_for(
            "the confirm dialog again",
            "return document.getElementById('confirm').open",
        )
        .await;
    browser.click("#confirm-ok").await;
    browser
        .wait_for(
            "the card to go",
            "return document.querySelector('li[data-agent=\"Scratch\"]') === null",
        )
        .await;
    assert_eq!(
        server.get("/api/agents/Scratch").await.0,
        StatusCode::NOT_FOUND
    );

    // The store marks the same tools on the bundle before anyone installs it.
    browser.tab("store").await;
    assert_eq!(
        texts(&browser, "li[data-slug=\"vitriol\"] .chip-unavailable").await,
        ["web_search"]
    );
    assert!(
        browser
            .text("li[data-slug=\"vitriol\"] .unavailable-reasons")
            .await
            .contains("[tools.web_search]")
    );
    // A bundle file of the wrong shape is explained in the project's words.
    let file = tempfile::Builder::new()
        .suffix(".agent.json")
        .tempfile()
        .unwrap();
    std::fs::write(
        file.path(),
        r#"{"name": "Odd", "system_prompt": "x", "recommended_tools": "search_notes"}"#,
    )
    .unwrap();
    browser
        .find("#import-file")
        .await
        .send_keys(file.path().to_str().unwrap())
        .await
        .unwrap();
    let said = browser
        .wait_for(
            "the import error",
            "const m = document.querySelector('.import .card-msg.error'); return m && m.textContent",
        )
        .await;
    assert_eq!(said, "recommended_tools must be a list, not a string");
    browser.finish(&[400]).await;
}

/// Where the newest toast is against the agent form's action row: whether they overlap.
const TOAST_OVER_FORM_ACTIONS: &str =
    "const toasts = [...document.querySelectorAll('.toast')]; if (!toasts.length) return null;
    const t = toasts[toasts.length - 1].getBoundingClientRect();
    const overlaps = (r) => t.left < r.right && r.left < t.right && t.top < r.bottom && r.top < t.bottom;
    const row = document.querySelector('#agent-form .form-actions');
    const buttons = [...row.querySelectorAll('button')].filter(b => b.getClientRects().length);
    return {buttons: buttons.length, row: overlaps(row.getBoundingClientRect()),
            button: buttons.some(b => overlaps(b.getBoundingClientRect()))}";

/// Creates an agent through the form and returns where the toast saying so sits against the
/// form's buttons, those scrolled to the bottom of the window (on a phone the form ends the
/// page, so that is where they are; it is also where toasts used to be).
async fn create_agent_and_locate_the_toast(browser: &Browser, name: &str) -> Value {
    browser.type_into("#agent-name", name).await;
    browser
        .type_into("#agent-system_prompt", "Helps out.")
        .await;
    browser.click("#agent-submit").await;
    browser
        .wait_for_with(
            "the toast about the new agent",
            "return [...document.querySelectorAll('.toast')].some(t => t.textContent === `Created agent ${arguments[0]}`)",
            vec![json!(name)],
        )
        .await;
    browser
        .js(
            "document.getElementById('agent-submit').scrollIntoView({block: 'end'})",
            vec![],
        )
        .await;
    browser.js(TOAST_OVER_FORM_ACTIONS, vec![]).await
}

#[tokio::test]
async fn agents_tab_toasts_and_the_tool_picker_leave_the_form_usable() {
    let server = Server::start();
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    let clear = json!({"buttons": 1, "row": false, "button": false});
    for (width, height, name) in [(1280, 800, "Wide"), (390, 844, "Narrow")] {
        browser.client.set_window_size(width, height).await.unwrap();
        browser.open("agents").await;
        let toast = create_agent_and_locate_the_toast(&browser, name).await;
        assert_eq!(
            toast, clear,
            "{width} px: the toast covers the form's buttons"
        );
        browser.screenshot(&format!("agents-toast-{width}")).await;

        // Using the Tools field brings the whole picker into the window, nothing over it.
        browser.click("#agent-tools").await;
        let picker = browser
            .js(
                "const p = document.querySelector('.tool-picker').getBoundingClientRect();
                 const f = document.querySelector('.agent-form-fields').getBoundingClientRect();
                 return {inWindow: p.top >= 0 && p.bottom <= window.innerHeight && p.right <= window.innerWidth,
                         inPane: p.top >= f.top && p.bottom <= f.bottom}",
                vec![],
            )
            .await;
        assert_eq!(
            picker,
            json!({"inWindow": true, "inPane": true}),
            "{width} px"
        );
        assert_eq!(
            browser.js(IN_VIEW, vec![json!(".tool-picker")]).await,
            true,
            "{width} px: something covers the picker"
        );
        if width > 760 {
            // Wide, the form's fields scroll on their own and its buttons stay in sight.
            assert_eq!(
                browser.js(IN_VIEW, vec![json!("#agent-submit")]).await,
                true,
                "{width} px: the submit button is out of reach"
            );
        }
        browser.screenshot(&format!("agents-picker-{width}")).await;
    }
    browser.finish(&[]).await;
}

#[tokio::test]
async fn chat_stop_shows_only_while_a_run_streams_and_links_the_stopped_run() {
    let (reply, pieces) = llm::by_hand();
    let fake = llm::openai(vec![reply]).await;
    let server = Server::start_with_owned(&openai_env(&fake.url));
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser.open("chat").await;
    let stop_shown =
        "return getComputedStyle(document.getElementById('chat-stop')).display !== 'none'";
    assert_eq!(
        browser.js(stop_shown, vec![]).await,
        false,
        "no run, no Stop"
    );
    browser
        .type_into("#chat-prompt", "Tell me a long story")
        .await;
    browser.click("#chat-send").await;
    pieces.send("Once ").unwrap();
    browser
        .wait_for(
            "the first token",
            "return document.querySelector('.msg-agent .msg-text')?.textContent === 'Once '",
        )
        .await;
    assert_eq!(browser.js(stop_shown, vec![]).await, true);
    browser.click("#chat-stop").await;
    let footer = browser
        .wait_for(
            "the stopped run's footer",
            "const f = document.querySelector('.msg-agent:not(.streaming) .msg-foot'); return f && f.textContent",
        )
        .await;
    assert!(
        footer
            .as_str()
            .unwrap()
            .starts_with("Stopped. The run was cancelled · trace "),
        "{footer}"
    );
    assert_eq!(browser.js(stop_shown, vec![]).await, false);
    browser.screenshot("chat-stopped").await;
    // The link leads to the cancelled run's trace.
    browser.click(".msg-foot a[href^=\"#/traces/\"]").await;
    browser.ready("traces").await;
    let id = browser
        .js(
            "return document.querySelector('.trace-detail').dataset.trace",
            vec![],
        )
        .await;
    let trace = eventually(10, async || {
        let (_, trace) = server
            .get(&format!("/api/traces/{}", id.as_str().unwrap()))
            .await;
        (trace["status"] == "error").then_some(trace)
    })
    .await;
    assert!(
        trace["error_message"].as_str().unwrap().contains("cancel"),
        "{trace}"
    );
    drop(pieces);
    browser.finish(&[]).await;
}

#[tokio::test]
async fn traces_tab_charts_the_latency_of_recent_runs() {
    let server = Server::start();
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    // Nothing yet: the empty state says what to do, and leads there.
    browser.open("traces").await;
    assert_eq!(
        browser.text(".empty-state .empty-title").await,
        "No runs recorded yet"
    );
    assert_eq!(
        browser
            .find(".empty-state a.button")
            .await
            .attr("href")
            .await
            .unwrap()
            .as_deref(),
        Some("#/chat")
    );
    browser.screenshot("traces-empty").await;

    for prompt in ["one", "two", "three", "four"] {
        let (status, _) = server.post("/api/chat", json!({"prompt": prompt})).await;
        assert_eq!(status, StatusCode::OK);
    }
    browser.client.refresh().await.unwrap();
    browser.ready("traces").await;
    let chart = browser
        .js(
            "const svg = document.getElementById('latency-chart');
             return {points: svg.querySelectorAll('circle.point').length,
                     linked: [...svg.querySelectorAll('a')].every(a => a.getAttribute('href').startsWith('#/traces/')),
                     label: svg.getAttribute('aria-label'),
                     width: svg.getBoundingClientRect().width}",
            vec![],
        )
        .await;
    assert_eq!(chart["points"], 4, "{chart}");
    assert_eq!(chart["linked"], true, "{chart}");
    assert!(
        chart["label"]
            .as_str()
            .unwrap()
            .starts_with("Latency of the last 4 runs: median "),
        "{chart}"
    );
    assert!(chart["width"].as_f64().unwrap() > 400.0, "{chart}");
    // The "when" column stays on one line.
    let lines = browser
        .js(
            "return [...document.querySelectorAll('tr[data-trace] td:first-child time')].map(t => t.getClientRects().length)",
            vec![],
        )
        .await;
    assert_eq!(lines, json!([1, 1, 1, 1]));
    browser.screenshot("traces-chart").await;

    // A point opens its run.
    let newest = browser
        .js(
            "const points = [...document.querySelectorAll('#latency-chart circle.point')];
             return points[points.length - 1].dataset.trace",
            vec![],
        )
        .await;
    browser
        .js(
            "const points = [...document.querySelectorAll('#latency-chart a')];
             points[points.length - 1].dispatchEvent(new MouseEvent('click', {bubbles: true}))",
            vec![],
        )
        .await;
    browser.ready("traces").await;
    browser
        .wait_for_with(
            "the newest run's detail",
            "return document.querySelector('.trace-detail')?.dataset.trace === arguments[0]",
            vec![newest],
        )
        .await;
    assert_eq!(browser.text(".two-col .block pre").await, "four");
    browser.finish(&[]).await;
}

#[tokio::test]
async fn adapters_tab_filters_by_status_keeps_chips_whole_and_shows_what_adapters_report() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    // One job runs at a time, so a second one waits.
    std::fs::write(data.join("config.toml"), "[jobs]\nworkers = 1\n").unwrap();
    let server = Server::start_in(&data, &[]);
    // No origin granted: its outbound-http import is covered by nothing.
    let grant =
        "secrets = [\"ECHO_TOKEN\"]\nagent = true\ntools = [\"*\"]\nkv = true\njobs = true\n";
    crate::wasm::drop_in(&server, "echo", &crate::guests::guest("echo"), grant);
    let echo = crate::wasm::loaded(&server, "echo").await;
    let ungranted = echo["metadata"]["ungranted_imports"]
        .as_str()
        .unwrap()
        .to_owned();
    let client = reqwest::Client::new();
    for payload in ["slow:3000", "waits"] {
        let answer = client
            .post(server.url("/api/adapters/echo/job"))
            .body(payload)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::ACCEPTED, "{payload}");
    }
    // Disabled, echo runs no more jobs: what is left waits, and its entry says how many.
    assert_eq!(
        server
            .post("/api/adapters/echo/disable", Value::Null)
            .await
            .0,
        StatusCode::OK
    );
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser.open("adapters").await;
    let echo_row = ".adapter-card[data-adapter=\"echo\"]";
    // The card follows the entry's count (which moves while the disable settles).
    eventually(20, async || {
        let pending = server.adapter("echo").await?["pending_jobs"].as_u64()?;
        let expected = match pending {
            0 => return None,
            1 => "1 job waiting".to_owned(),
            n => format!("{n} jobs waiting"),
        };
        let shown = browser
            .js(
                "return document.querySelector(arguments[0])?.textContent ?? null",
                vec![json!(format!("{echo_row} [data-fact=\"pending_jobs\"]"))],
            )
            .await;
        (shown == json!(expected)).then_some(())
    })
    .await;
    assert_eq!(
        browser
            .text(&format!("{echo_row} [data-fact=\"ungranted_imports\"]"))
            .await,
        format!("ungranted: {ungranted}")
    );

    // Capabilities are behind their count, collapsed until opened.
    let teamchat = server.adapter("teamchat").await.unwrap();
    let granted = teamchat["capabilities"].as_array().unwrap().len();
    let caps = browser
        .js(
            "const d = document.querySelector('.adapter-card[data-adapter=\"teamchat\"] details.capabilities');
             return {open: d.open, count: d.querySelector('[data-count=\"capabilities\"]').textContent,
                     shown: d.querySelector('.chip').checkVisibility()}",
            vec![],
        )
        .await;
    assert_eq!(
        caps,
        json!({"open": false, "count": granted.to_string(), "shown": false})
    );
    browser
        .click(".adapter-card[data-adapter=\"teamchat\"] details.capabilities summary")
        .await;
    // Opened, a capability chip shows its whole name on one line.
    let chip = browser
        .js(
            "const chip = [...document.querySelectorAll('.adapter-card[data-adapter=\"teamchat\"] .chip')]
                 .find(c => c.textContent.startsWith('origin:'));
             const line = parseFloat(getComputedStyle(chip).lineHeight);
             return {text: chip.textContent, whole: chip.scrollWidth <= chip.clientWidth,
                     oneLine: chip.getClientRects().length === 1 && chip.getBoundingClientRect().height < 2 * line}",
            vec![],
        )
        .await;
    assert_eq!(
        chip,
        json!({"text": "origin:https://hooks.slack.com:443", "whole": true, "oneLine": true})
    );
    browser.screenshot("adapters-facts").await;

    // Filter tabs count each status; picking one shows only those rows.
    let (_, listed) = server.get("/api/adapters").await;
    // One waiting for settings is `error` to the API and "needs setup" to the dashboard.
    let needs_setup = |a: &Value| a["status"] == "error" && a["missing_settings"] != json!([]);
    let count = |status: &str| {
        listed["adapters"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| match status {
                "needs-setup" => needs_setup(a),
                "error" => a["status"] == "error" && !needs_setup(a),
                _ => a["status"] == status,
            })
            .count()
            .to_string()
    };
    let tabs = browser
        .js(
            "return [...document.querySelectorAll('#adapter-filter .filter-tab')].map(t => [t.dataset.filter, t.querySelector('.filter-count').textContent])",
            vec![],
        )
        .await;
    let total = listed["adapters"].as_array().unwrap().len().to_string();
    assert_eq!(
        tabs,
        json!([
            ["", total],
            ["running", count("running")],
            ["stopped", count("stopped")],
            ["needs-setup", count("needs-setup")],
            ["error", count("error")]
        ])
    );
    browser
        .click("#adapter-filter [data-filter=\"stopped\"]")
        .await;
    browser
        .wait_for(
            "only the stopped adapters",
            "return location.hash === '#/adapters?status=stopped' && document.querySelector('main[data-ready=\"adapters\"]') !== null",
        )
        .await;
    let statuses = browser
        .js(
            "return [...new Set([...document.querySelectorAll('.adapter-card[data-adapter]')].map(r => r.dataset.status))]",
            vec![],
        )
        .await;
    assert_eq!(statuses, json!(["stopped"]));
    assert!(
        texts(&browser, ".adapter-card[data-adapter] .adapter-name")
            .await
            .contains(&"echo".to_owned())
    );
    browser.finish(&[]).await;
}

#[tokio::test]
async fn empty_lists_say_what_to_do_next() {
    let server = Server::start();
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    for (tab, title, hint) in [
        ("tasks", "No tasks yet", "service-runtime schedule create"),
        (
            "schedules",
            "No schedules yet",
            "service-runtime schedule create",
        ),
    ] {
        browser.open(tab).await;
        assert_eq!(browser.text(".empty-state .empty-title").await, title);
        assert!(
            browser
                .text(".empty-state .empty-code")
                .await
                .starts_with(hint),
            "{tab}"
        );
        browser.screenshot(&format!("{tab}-empty")).await;
    }
    browser.finish(&[]).await;
}

/// A provider chosen on the Settings tab is the one the header shows and the next run uses,
/// without a restart.
#[tokio::test]
async fn settings_tab_chooses_the_model_provider() {
    let fake = llm::anthropic(vec![Reply::Text("from the chosen provider")]).await;
    let server = Server::start();
    server
        .write_key("anthropic", "SERVICE_ANTHROPIC_BASE_URL", &fake.url)
        .await;
    server
        .write_key("anthropic", "ANTHROPIC_API_KEY", "sk-ant-browser")
        .await;
    server
        .write_key("openai", "SERVICE_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .await;
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser.open("settings/provider").await;
    // Two providers have settings and none is chosen: the header says to choose.
    browser
        .wait_for(
            "the banner asking for a choice",
            "const b = document.getElementById('provider-warning');
             return !b.hidden && b.textContent.includes('several providers have settings (openai, anthropic)')",
        )
        .await;
    let select = "#settings-provider-SERVICE_PROVIDER";
    browser
        .js(
            "const s = document.querySelector(arguments[0]); s.value = 'anthropic';
             s.dispatchEvent(new Event('change', {bubbles: true}));",
            vec![json!(select)],
        )
        .await;
    browser
        .click("[data-integration=\"provider\"] [data-action=\"save\"]")
        .await;
    browser
        .wait_for(
            "the header to show the chosen provider",
            "return document.getElementById('provider-text').textContent.startsWith('anthropic')
                 && document.getElementById('provider-warning').hidden",
        )
        .await;
    browser.screenshot("settings-provider").await;
    let (status, answer) = server.post("/api/chat", json!({"prompt": "hello"})).await;
    assert_eq!(
        (status, answer["text"].as_str()),
        (StatusCode::OK, Some("from the chosen provider"))
    );
}

/// What a newcomer met: an agent's `#rgb` color kept through an edit, a long conversation
/// title that must not widen the Chat tab at 390 px, the schedules table at 1280 px (cron and
/// buttons on one line), the file picker in the dark theme, the Tasks empty state at 390 px,
/// and Run now showing as the schedule's last run.
#[tokio::test]
async fn a_newcomers_screens_fit_and_keep_what_they_show() {
    let server = Server::start();
    let (status, _) = server
        .post(
            "/api/agents",
            json!({"name": "Violet", "system_prompt": "p", "color": "#a0f"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let Some(browser) = Browser::start(&server).await else {
        return;
    };

    // The color picker cannot hold `#a0f`: it shows it spelled out, and an edit that leaves
    // it alone keeps it.
    browser.client.set_window_size(1280, 800).await.unwrap();
    browser.open("agents").await;
    browser.click("li[data-agent=\"Violet\"] button.edit").await;
    assert_eq!(
        browser
            .js(
                "return document.getElementById('agent-color').value",
                vec![]
            )
            .await,
        "#aa00ff"
    );
    browser.type_into("#agent-description", "purple").await;
    browser.click("#agent-submit").await;
    let saved = eventually(10, async || {
        let (_, agent) = server.get("/api/agents/Violet").await;
        (agent["description"] == "purple").then_some(agent)
    })
    .await;
    assert_eq!(saved["color"], "#a0f");

    // The file picker wears the theme.
    browser.open("store").await;
    let picker = browser
        .js(
            "return getComputedStyle(document.getElementById('import-file'), '::file-selector-button').backgroundColor",
            vec![],
        )
        .await;
    assert_eq!(picker, "rgb(27, 33, 43)");

    // At 390 px, the Tasks empty state (before any run) and a chat with a long title (below)
    // stay within the screen.
    browser.client.set_window_size(390, 844).await.unwrap();
    let overflow = "const main = document.querySelector('main');
         return Math.max(document.documentElement.scrollWidth - window.innerWidth,
                         main.scrollWidth - main.clientWidth)";
    browser.open("tasks").await;
    browser
        .wait_for(
            "the empty state",
            "return document.querySelector('.empty-state') !== null",
        )
        .await;
    let script = format!(
        "const box = document.querySelector('.empty-state').getBoundingClientRect();
         return {{right: box.right <= window.innerWidth, overflow: (() => {{ {overflow} }})()}}"
    );
    let empty = browser.js(&script, vec![]).await;
    assert_eq!(empty, json!({"right": true, "overflow": 0}), "tasks");
    browser.screenshot("narrow-tasks-empty").await;

    browser.client.set_window_size(1280, 800).await.unwrap();

    // Schedules at 1280: the cron on one line, the row's buttons on one line.
    server
        .post(
            "/api/schedules",
            json!({"name": "weekday-mornings", "cron": "30 6 * * 1-5", "agent": "default", "prompt": "Plan"}),
        )
        .await;
    browser.open("schedules").await;
    let row = browser
        .wait_for(
            "the schedule's row",
            "const row = document.querySelector('tr[data-schedule=\"weekday-mornings\"]');
             if (!row) return null;
             const code = row.querySelector('code');
             const tops = [...row.querySelectorAll('.row-actions button')].map(b => b.getBoundingClientRect().top);
             return {cronLines: code.getClientRects().length, buttonRows: new Set(tops).size}",
        )
        .await;
    assert_eq!(row, json!({"cronLines": 1, "buttonRows": 1}));
    // Run now: the row says when, not "never".
    browser
        .click("tr[data-schedule=\"weekday-mornings\"] [data-action=\"run\"]")
        .await;
    browser
        .wait_for(
            "the run to show as the last run",
            "const cells = document.querySelectorAll('tr[data-schedule=\"weekday-mornings\"] td');
             return cells.length > 6 && !cells[6].textContent.includes('never')",
        )
        .await;

    browser.client.set_window_size(390, 844).await.unwrap();
    let title = format!("{} and then some", "a very long first message ".repeat(12));
    let (status, _) = server.post("/api/chat", json!({"prompt": title})).await;
    assert_eq!(status, StatusCode::OK);
    browser.open("chat").await;
    browser
        .wait_for(
            "the recent conversations",
            "return document.querySelectorAll('#chat-recent option').length > 1",
        )
        .await;
    assert_eq!(browser.js(overflow, vec![]).await, 0, "chat");
    browser.screenshot("narrow-chat-long-title").await;
}

/// A server that asks everyone to sign in: the first admin sets a password through the link
/// the server printed and works through the session cookie; a wrong password is refused; a
/// token signs in too and is shown only what its role may do; a 403 (a role lowered while the
/// page was open) names the missing permission; each signs out.
#[tokio::test]
async fn the_dashboard_signs_in_people_and_tokens_and_names_a_missing_permission() {
    let server = Server::start_with_config(crate::access::REQUIRED, &[]);
    let link = crate::people::first_admin_link(&server).await;
    let member = crate::access::token(&server, "reader", "member");
    let viewer = crate::access::token(&server, "watcher", "viewer");
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    let fragment = link.split_once('#').unwrap().1;
    browser
        .client
        .goto(&format!("{}/#{fragment}", browser.base))
        .await
        .unwrap();
    browser.ready("link").await;
    let address: String =
        serde_json::from_value(browser.js("return location.hash", vec![]).await).unwrap();
    assert!(
        !address.contains("link"),
        "the secret leaves the address bar: {address}"
    );
    browser.screenshot("set-password").await;
    browser.type_into("#link-name", "ada").await;
    browser
        .type_into("#link-password", "correct horse battery staple")
        .await;
    browser.click("#link-form-submit").await;
    browser.ready("chat").await;
    assert_eq!(browser.text("#who-name").await, "ada · admin");

    // The session's writes carry the anti-forgery token.
    browser.open("agents").await;
    submit_researcher(&browser).await;
    browser
        .wait_for(
            "the new agent",
            "return document.body.innerText.includes('Researcher')",
        )
        .await;

    browser.click("#sign-out").await;
    browser.ready("signin").await;
    browser.screenshot("signin").await;
    browser.type_into("#signin-name", "ada").await;
    browser
        .type_into("#signin-password", "not the password at all")
        .await;
    browser.click("#signin-form-submit").await;
    let error = browser
        .wait_for(
            "the refusal",
            "return document.getElementById('signin-form-error').textContent",
        )
        .await;
    assert_eq!(error, "wrong name or password");

    // A token, kept for the tab only.
    browser.click(".signin-token summary").await;
    browser.type_into("#signin-token", &member).await;
    browser.click("#token-form-submit").await;
    browser.ready("agents").await;
    assert_eq!(browser.text("#who-name").await, "reader · member");
    let hidden = browser
        .js(
            "return document.querySelector('[data-tab=access]').hidden",
            vec![],
        )
        .await;
    assert_eq!(hidden, true, "a member is not shown the admins' tabs");
    // A member reads agents and chats with them; changing them is not offered.
    let offered = browser
        .js(
            "return [!!document.getElementById('agent-form'), \
             document.querySelectorAll('.agent .edit').length, \
             document.querySelectorAll('.agent a[href^=\"#/chat\"]').length]",
            vec![],
        )
        .await;
    assert_eq!(
        offered,
        json!([false, 0, 2]),
        "no form, no Edit, Chat on both"
    );
    browser.screenshot("agents-as-member").await;

    // A viewer reads how the service runs: the tabs of agents are left out, and an address
    // of one leads to the first tab it may read.
    browser.click("#sign-out").await;
    browser.ready("signin").await;
    browser.click(".signin-token summary").await;
    browser.type_into("#signin-token", &viewer).await;
    browser.click("#token-form-submit").await;
    browser.ready("tasks").await;
    let shown = browser
        .js(
            "return [...document.querySelectorAll('.sidebar a[data-tab]')] \
             .filter((a) => !a.hidden).map((a) => a.dataset.tab)",
            vec![],
        )
        .await;
    assert_eq!(
        shown,
        json!(["tasks", "adapters", "schedules", "traces", "settings"])
    );

    browser.click("#sign-out").await;
    browser.ready("signin").await;
    browser.type_into("#signin-name", "ada").await;
    browser
        .type_into("#signin-password", "correct horse battery staple")
        .await;
    browser.click("#signin-form-submit").await;
    browser.ready("tasks").await;
    assert_eq!(browser.text("#who-name").await, "ada · admin");
    browser.tab("agents").await;
    let (status, _) = server.get("/api/agents/Researcher").await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "the test's own call has no credential"
    );

    // Another admin lowers ada to member while her form is open: the refusal names what the
    // save needs.
    let root = crate::access::token(&server, "root", "admin");
    for (method, path, body) in [
        (
            Method::POST,
            "/api/users",
            json!({"name": "keeper", "role": "admin"}),
        ),
        (Method::PATCH, "/api/users/ada", json!({"role": "member"})),
    ] {
        let (status, body, _) =
            crate::access::call(&server, method, path, Some(&root), Some(body)).await;
        assert!(status.is_success(), "{path}: {body}");
    }
    browser.type_into("#agent-name", "Second").await;
    browser
        .type_into("#agent-system_prompt", "You research things.")
        .await;
    browser.click("#agent-submit").await;
    browser
        .wait_for(
            "the permission to be named",
            "return document.body.innerText.includes('manage_agents')",
        )
        .await;
    browser.screenshot("signin-forbidden").await;
    browser.finish(&[401, 403]).await;
}

/// An admin's People & tokens tab: a person added gets a link shown once, a token's secret is
/// shown once and revocable, and the Audit tab lists both changes.
#[tokio::test]
async fn admins_add_people_and_tokens_and_read_the_audit_log() {
    let server = Server::start();
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser.open("access").await;
    browser.type_into("#user-name", "bob@example.org").await;
    browser.click("#user-submit").await;
    let link = browser
        .wait_for(
            "the link, once",
            "const c = document.querySelector('#user-link code'); return c && c.textContent",
        )
        .await;
    assert!(link.as_str().unwrap().contains("/#link="), "{link}");
    assert_eq!(
        browser
            .text("[data-user='bob@example.org'] td:nth-child(3)")
            .await,
        "link not used yet"
    );

    browser.type_into("#token-name", "ci").await;
    browser.type_into("#token-expires", "30d").await;
    browser.click("#token-submit").await;
    let secret = browser
        .wait_for(
            "the secret, once",
            "const c = document.querySelector('#token-secret code'); return c && c.textContent",
        )
        .await;
    assert!(secret.as_str().unwrap().starts_with("srt_"), "{secret}");
    browser
        .wait_for(
            "the token's row",
            "return !!document.querySelector('[data-token=ci]')",
        )
        .await;
    browser.screenshot("access").await;
    // A bad expiry is shown beside its field.
    browser.type_into("#token-name", "other").await;
    browser.type_into("#token-expires", "forever").await;
    browser.click("#token-submit").await;
    let error = browser
        .wait_for(
            "the field's error",
            "return document.getElementById('token-expires-error').textContent",
        )
        .await;
    assert!(error.as_str().unwrap().contains("30d"), "{error}");
    browser.click("[data-token=ci] button").await;
    browser.click("#confirm-ok").await;
    browser
        .wait_for(
            "the revoked token gone",
            "return !document.querySelector('[data-token=ci]')",
        )
        .await;

    browser.open("audit").await;
    // Entries are written just after their answers: the tab refreshes every 5 s.
    browser
        .wait_for(
            "the revocation in the log",
            "return document.getElementById('audit-table').textContent.includes('DELETE /api/tokens/')",
        )
        .await;
    let listed = browser.text("#audit-table").await;
    for action in [
        "POST /api/users",
        "POST /api/tokens",
        "DELETE /api/tokens/{name}",
    ] {
        assert!(listed.contains(action), "{action}: {listed}");
    }
    assert!(!listed.contains(secret.as_str().unwrap()));
    browser.screenshot("audit").await;
    browser.finish(&[400]).await;
}

/// Single sign-on in Chromium through the certified OpenID provider: the sign-in page's button,
/// the provider's own login page, back to the tab the person left, signed in with the role
/// their group maps to; sign-out ends it.
#[tokio::test]
async fn people_sign_in_through_the_identity_provider_in_the_browser() {
    let Some(provider) = crate::single_sign_on::Provider::start() else {
        return;
    };
    let server =
        Server::start_with_config(&provider.config(), &crate::single_sign_on::secret_env());
    let Some(browser) = Browser::start(&server).await else {
        return;
    };
    browser
        .client
        .goto(&format!("{}/#/agents", browser.base))
        .await
        .unwrap();
    browser.ready("signin").await;
    assert_eq!(browser.text("#signin-sso").await, "Sign in with Test ID");
    browser.screenshot("signin-sso").await;
    browser.click("#signin-sso").await;
    browser
        .wait_for(
            "the provider's login page",
            "return !!document.querySelector('input[name=login]')",
        )
        .await;
    browser.type_into("input[name=login]", "ada").await;
    browser
        .type_into("input[name=password]", "any password")
        .await;
    browser.click(".login-submit").await;
    // Back on the tab it left, after the provider's consent page if it shows one.
    // (The consent page's button has the login page's class: wait for the login form to go.)
    let script = "if (document.querySelector('main[data-ready=\"agents\"]')) return 'back'; \
                  if (document.querySelector('.login-submit') && \
                      !document.querySelector('input[name=login]')) return 'consent'; \
                  return null";
    let way = wait::until(
        Duration::from_secs(15),
        Duration::from_millis(100),
        async || {
            let value = browser.js(script, vec![]).await;
            value.as_str().map(str::to_owned)
        },
    )
    .await
    .unwrap_or_else(|| {
        panic!(
            "no way back; the provider said: {}",
            std::fs::read_to_string(provider.log.path()).unwrap_or_default()
        )
    });
    if way == "consent" {
        browser.click(".login-submit").await;
    }
    browser.ready("agents").await;
    // The provider's development pages ask for web fonts and a favicon this machine cannot
    // serve; nothing of this server's failed.
    let elsewhere = browser.console_errors(&[]).await;
    assert!(
        elsewhere.iter().all(|e| !e.starts_with(&server.url)),
        "{elsewhere:#?}"
    );
    assert_eq!(browser.text("#who-name").await, "ada · operator");
    // An operator's write through the session (with its anti-forgery token).
    submit_researcher(&browser).await;
    browser
        .wait_for(
            "the new agent",
            "return document.body.innerText.includes('Researcher')",
        )
        .await;
    browser.click("#sign-out").await;
    browser.ready("signin").await;
    let key = std::fs::read_to_string(server.data_dir.join("server.key")).unwrap();
    let (_, users) = crate::access::get_as(&server, "/api/users", key.trim()).await;
    let ada = &users["users"][0];
    assert_eq!(
        (&ada["name"], &ada["source"], &ada["role"]),
        (&json!("ada"), &json!("oidc"), &json!("operator"))
    );
    assert_eq!(ada["groups"], json!(["sre", "staff"]));
    browser.finish(&[401]).await;
}

async fn submit_researcher(browser: &Browser) {
    browser.type_into("#agent-name", "Researcher").await;
    browser
        .type_into("#agent-system_prompt", "You research things.")
        .await;
    browser.click("#agent-submit").await;
}
