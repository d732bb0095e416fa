//! Starting the binary, and small HTTP helpers.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use reqwest::{Method, StatusCode};
use serde_json::Value;
use service_runtime::db::{self, Db};
use service_runtime::tasks::{self, NewTask, TaskStatus};

// Shared with the email adapter's own tests.
#[path = "../shared/tool_available.rs"]
mod tool_available;
pub use tool_available::tool_available;
// Shared with the benches that drive the binary.
#[path = "../shared/serve.rs"]
mod serve;
// The one way tests and benches wait (the tests use a part of it).
#[allow(dead_code)]
#[path = "../shared/wait.rs"]
pub mod wait;
// Shared with the storage layer's tests and the benches (which alone ask for durable commits).
#[allow(dead_code)]
#[path = "../shared/postgres.rs"]
pub mod postgres;

pub const BIN: &str = env!("CARGO_BIN_EXE_service-runtime");

/// A running server with its own data directory; killed when dropped.
pub struct Server {
    child: Child,
    pub url: String,
    pub data_dir: PathBuf,
    env: Vec<(String, String)>,
    // Keeps the directory alive; `None` when it belongs to someone else.
    _tmp: Option<tempfile::TempDir>,
}

/// A command for the binary with a clean environment: nothing leaks in from the developer's
/// shell (real keys, a real data directory).
pub fn command(home: &Path) -> Command {
    serve::clean_command(BIN, home, "info")
}

/// What `serve` said on a data directory whose `config.toml` it refused.
pub struct Refused {
    pub stderr: String,
    /// Whether the database was created before the refusal.
    pub created_database: bool,
}

/// Runs `serve` on a fresh data directory whose `config.toml` is `config`, which must stop the
/// start.
pub fn refused_start(config: &str) -> Refused {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("config.toml"), config).unwrap();
    let out = command(tmp.path())
        .args(["serve", "--port", "0", "--data-dir"])
        .arg(tmp.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{config:?} was accepted: {stderr}");
    Refused {
        stderr,
        created_database: tmp.path().join(db::FILE_NAME).exists(),
    }
}

impl Server {
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    pub fn start_with(env: &[(&str, &str)]) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let data_dir = tmp.path().join("data");
        let mut server = Self::spawn(data_dir, env);
        server._tmp = Some(tmp);
        server
    }

    fn spawn(data_dir: PathBuf, env: Vec<(String, String)>) -> Self {
        let server = Self::spawn_starting(data_dir, env);
        serve::wait_until_ready(
            &server.url,
            &server.data_dir,
            std::time::Duration::from_secs(60),
        );
        server
    }

    /// A server whose adapters may still be starting (it answers as soon as it listens).
    fn spawn_starting(data_dir: PathBuf, env: Vec<(String, String)>) -> Self {
        std::fs::create_dir_all(&data_dir).unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(data_dir.join("server.log"))
            .unwrap();
        let mut serve = command(data_dir.parent().unwrap());
        serve.envs(env.iter().map(|(k, v)| (k, v))).stderr(log);
        let (child, url) = serve::spawn_serving(serve, &data_dir);
        let url = url.unwrap_or_else(|line| {
            let log = std::fs::read_to_string(data_dir.join("server.log")).unwrap_or_default();
            panic!("server did not start: {line:?}\n{log}")
        });
        Self {
            child,
            url,
            data_dir,
            env,
            _tmp: None,
        }
    }

    /// Stops the server and starts it again on the same data directory.
    pub fn restart(mut self) -> Self {
        self.stop();
        let tmp = self._tmp.take();
        let mut server = Self::spawn(self.data_dir.clone(), std::mem::take(&mut self.env));
        server._tmp = tmp;
        server
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends `signal` (`STOP`, `CONT`, ...) to the server's process.
    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status();
        assert!(sent.unwrap().success(), "kill -{signal} {pid}");
    }

    /// SIGTERM, then the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        self.child.wait().unwrap()
    }

    /// The server's database, opened by a second connection as the CLI or a test would.
    pub fn db(&self) -> Db {
        Db::open_sqlite(&self.data_dir.join(db::FILE_NAME)).unwrap()
    }

    /// A task written straight into the server's database, as adapters and the scheduler do.
    pub fn create_task(&self, title: &str, agent: &str, status: TaskStatus) -> String {
        self.db()
            .blocking(|conn| {
                let task = tasks::create(
                    conn,
                    &NewTask {
                        title,
                        agent_profile_name: Some(agent),
                        ..NewTask::default()
                    },
                )?;
                tasks::set_status(conn, &task.task_id, status)?;
                Ok(task.task_id)
            })
            .unwrap()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.send(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.send(Method::POST, path, Some(body)).await
    }

    /// Writes one key of `integration` through the API (it must be taken); the answer.
    pub async fn write_key(&self, integration: &str, name: &str, value: &str) -> Value {
        let (status, body) = self
            .post(
                &format!("/api/integrations/{integration}/keys"),
                serde_json::json!({"env_var": name, "value": value}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body
    }

    /// Waits until every component runs its optimized code (the baseline compiler's served
    /// until then).
    pub fn wait_until_optimized(&self) {
        serve::wait_until_optimized(
            &self.url,
            &self.data_dir,
            std::time::Duration::from_secs(180),
        );
    }

    /// This adapter's registry entry, if it has one.
    pub async fn adapter(&self, name: &str) -> Option<Value> {
        let (_, body) = self.get("/api/adapters").await;
        body["adapters"]
            .as_array()?
            .iter()
            .find(|a| a["name"] == name)
            .cloned()
    }

    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        self.send(Method::DELETE, path, None).await
    }

    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut request = reqwest::Client::new().request(method, self.url(path));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        json_of(response).await
    }
}

impl Server {
    /// A request with a raw body, answered as text (an adapter's route).
    pub async fn send_text(&self, method: Method, path: &str, body: &str) -> (StatusCode, String) {
        let response = reqwest::Client::new()
            .request(method, self.url(path))
            .body(body.to_owned())
            .send()
            .await
            .unwrap();
        (response.status(), response.text().await.unwrap())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Status and JSON body; every API answer, errors included, is JSON.
pub async fn json_of(response: reqwest::Response) -> (StatusCode, Value) {
    let status = response.status();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{status}: body is not JSON ({e}): {text:?}"));
    (status, body)
}

/// Asserts an error answer: the status and an `error` message containing `needle`.
#[track_caller]
pub fn assert_error(answer: &(StatusCode, Value), status: StatusCode, needle: &str) {
    assert_eq!(answer.0, status, "{}", answer.1);
    let message = answer.1["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error field: {}", answer.1));
    assert!(
        message.contains(needle),
        "{message:?} does not mention {needle:?}"
    );
}

/// Serves `router` on a free loopback port for the rest of the test; returns its base URL.
/// Fakes of outside platforms are built this way, speaking their real wire protocol.
pub async fn spawn_fake(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    format!("http://{addr}")
}

/// Posts to the streaming chat endpoint and collects every `data:` frame until the stream ends.
pub async fn stream_frames(server: &Server, body: Value) -> Vec<Value> {
    let response = reqwest::Client::new()
        .post(server.url("/api/chat/stream"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = response.text().await.unwrap();
    text.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

/// The settings that point the server at a fake OpenAI-compatible API.
pub fn openai_env(base: &str) -> Vec<(&'static str, String)> {
    vec![
        ("SERVICE_PROVIDER", "openai".into()),
        ("SERVICE_OPENAI_BASE_URL", base.into()),
        ("OPENAI_API_KEY", "sk-test-key".into()),
    ]
}

impl Server {
    /// A server on a data directory the test prepared (and owns).
    pub fn start_in(data_dir: &Path, env: &[(&'static str, String)]) -> Self {
        let env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        Self::spawn(data_dir.to_owned(), env)
    }

    /// A server whose data directory starts with this `config.toml`.
    pub fn start_with_config(config: &str, env: &[(&'static str, String)]) -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let data_dir = tmp.path().join("data");
        std::fs::create_dir_all(&data_dir).unwrap();
        std::fs::write(data_dir.join("config.toml"), config).unwrap();
        let mut server = Self::start_in(&data_dir, env);
        server._tmp = Some(tmp);
        server
    }

    /// [`Server::start_in`], answering as soon as it listens (adapters may still be starting).
    pub fn start_in_while_starting(data_dir: &Path, env: &[(&'static str, String)]) -> Self {
        let env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        Self::spawn_starting(data_dir.to_owned(), env)
    }

    pub fn start_with_owned(env: &[(&'static str, String)]) -> Self {
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        Self::start_with(&pairs)
    }
}

/// Runs a CLI command of the binary against a data directory.
pub fn cli(data_dir: &Path, args: &[&str]) -> std::process::Output {
    command(data_dir.parent().unwrap_or(data_dir))
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .output()
        .unwrap()
}

/// [`wait::eventually`] for the common case: `check` until it gives a value, for at most
/// `seconds`.
pub async fn eventually<T>(seconds: u64, check: impl AsyncFnMut() -> Option<T>) -> T {
    let within = std::time::Duration::from_secs(seconds);
    wait::eventually("the condition", within, check).await
}

/// Tests whose guests compute hard (big answers and jobs copied on the guest lane, spinning
/// guests, stalled servers) take this for their whole run, so no two of them share the
/// machine's two cores at once: each passes alone, and two together starved each other's
/// guest lane past their waits.
pub async fn heavy() -> tokio::sync::MutexGuard<'static, ()> {
    static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    HEAVY.lock().await
}

/// A page of the book (`docs/src/<page>`).
pub fn book_page(page: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/src")
        .join(page);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The whole book, its pages in the order of its table of contents.
pub fn book() -> String {
    let summary = book_page("SUMMARY.md");
    let mut pages: Vec<&str> = summary
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split_once(')').map(|(page, _)| page))
        .collect();
    pages.dedup();
    pages
        .into_iter()
        .map(book_page)
        .collect::<Vec<_>>()
        .join("\n")
}
