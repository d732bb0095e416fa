//! Test doubles for the host side (agents, tasks, secrets), a harness that runs the adapter
//! with them, and the real servers it talks to.

// The one way tests and benches wait (these tests use a part of it).
#[allow(dead_code)]
#[path = "../../../../tests/shared/wait.rs"]
mod wait;

pub mod dovecot;
pub mod smtp_sink;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use service_contract::{
    Adapter, AdapterContext, AdapterEntry, AdapterKind, AdapterRegistry, AgentRunner,
    ContextConfig, Feedback, FeedbackStore, RunFailure, RunFailureKind, RunReply, RunRequest,
    Secrets, TaskState, TaskTracker,
};
use service_email::EmailAdapter;
use tokio_util::sync::CancellationToken;

use dovecot::Dovecot;
use smtp_sink::SmtpSink;

/// The adapter's own address (the Dovecot login is an address too).
pub const BOT: &str = dovecot::USER;

pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

// Shared with the server's end-to-end tests.
#[path = "../../../../tests/shared/tool_available.rs"]
mod tool_available;
pub use tool_available::tool_available;

/// Both servers, when they can run here.
pub fn servers() -> Option<(Dovecot, SmtpSink)> {
    (dovecot::available() && smtp_sink::available()).then(|| (Dovecot::start(), SmtpSink::start()))
}

/// Answers every prompt at once with `answer: <prompt>`; a prompt containing `FAIL` fails. A
/// prompt containing the `hold` word waits instead until its run is cancelled, as a slow model
/// would.
#[derive(Default)]
pub struct Agents {
    pub requests: Mutex<Vec<RunRequest>>,
    hold: Option<&'static str>,
}

impl Agents {
    pub fn holding(word: &'static str) -> Self {
        Self {
            hold: Some(word),
            ..Self::default()
        }
    }

    pub fn prompts(&self) -> Vec<String> {
        lock(&self.requests)
            .iter()
            .map(|r| r.prompt.clone())
            .collect()
    }
}

impl AgentRunner for Agents {
    fn run(
        &self,
        request: RunRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<RunReply, RunFailure>> {
        let mut requests = lock(&self.requests);
        let trace_id = format!("trace-{}", requests.len() + 1);
        let held = self.hold.is_some_and(|word| request.prompt.contains(word));
        let fails = request.prompt.contains("FAIL");
        let text = format!("answer: {}", request.prompt);
        requests.push(request);
        let failure = |kind, message: &str, trace_id| RunFailure {
            kind,
            message: message.to_owned(),
            trace_id: Some(trace_id),
            waiting: None,
        };
        async move {
            if held {
                cancel.cancelled().await;
                Err(failure(RunFailureKind::Cancelled, "cancelled", trace_id))
            } else if fails {
                let message = "provider said: key sk-123 is invalid";
                Err(failure(RunFailureKind::Failed, message, trace_id))
            } else {
                Ok(RunReply { trace_id, text })
            }
        }
        .boxed()
    }

    fn provider_name(&self) -> String {
        "fake-provider".to_owned()
    }
}

#[derive(Default)]
pub struct Tasks {
    /// (task id, title, agent) per created task.
    pub created: Mutex<Vec<(String, String, Option<String>)>>,
    pub updates: Mutex<Vec<(String, TaskState, Option<String>)>>,
}

impl Tasks {
    /// The states task `id` went through, with the trace id of each move.
    pub fn history(&self, id: &str) -> Vec<(TaskState, Option<String>)> {
        lock(&self.updates)
            .iter()
            .filter(|(task, _, _)| task == id)
            .map(|(_, state, trace)| (*state, trace.clone()))
            .collect()
    }
}

impl TaskTracker for Tasks {
    fn create(
        &self,
        title: &str,
        agent: Option<&str>,
    ) -> BoxFuture<'static, Result<String, String>> {
        let mut created = lock(&self.created);
        let id = format!("task-{}", created.len() + 1);
        created.push((id.clone(), title.to_owned(), agent.map(str::to_owned)));
        async move { Ok(id) }.boxed()
    }

    fn update(
        &self,
        task_id: &str,
        state: TaskState,
        trace_id: Option<&str>,
    ) -> BoxFuture<'static, Result<(), String>> {
        lock(&self.updates).push((task_id.to_owned(), state, trace_id.map(str::to_owned)));
        async { Ok(()) }.boxed()
    }
}

/// The email adapter records no feedback.
struct NoFeedback;

impl FeedbackStore for NoFeedback {
    fn record(&self, _feedback: Feedback) -> BoxFuture<'static, Result<(), String>> {
        unreachable!("the email adapter records no feedback")
    }
}

struct MapSecrets(HashMap<String, String>);

impl Secrets for MapSecrets {
    fn get(&self, name: &str) -> Option<String> {
        self.0.get(name).filter(|v| !v.is_empty()).cloned()
    }
}

/// Settings for an adapter polling `dovecot` every second and replying through the SMTP
/// server on `smtp_port`.
pub fn settings(dovecot: &Dovecot, smtp_port: u16) -> Vec<(&'static str, String)> {
    vec![
        ("SERVICE_EMAIL_IMAP_HOST", "127.0.0.1".to_owned()),
        ("SERVICE_EMAIL_IMAP_PORT", dovecot.port.to_string()),
        ("SERVICE_EMAIL_IMAP_TLS", "none".to_owned()),
        ("SERVICE_EMAIL_SMTP_HOST", "127.0.0.1".to_owned()),
        ("SERVICE_EMAIL_SMTP_PORT", smtp_port.to_string()),
        ("SERVICE_EMAIL_SMTP_TLS", "none".to_owned()),
        ("SERVICE_EMAIL_USERNAME", dovecot::USER.to_owned()),
        ("SERVICE_EMAIL_PASSWORD", dovecot::PASSWORD.to_owned()),
        ("SERVICE_EMAIL_POLL_SECS", "1".to_owned()),
    ]
}

/// `settings` with some replaced or added.
pub fn with(
    mut settings: Vec<(&'static str, String)>,
    changes: &[(&'static str, &str)],
) -> Vec<(&'static str, String)> {
    for (name, value) in changes {
        settings.retain(|(key, _)| key != name);
        settings.push((name, (*value).to_owned()));
    }
    settings
}

/// The adapter with in-memory host services.
pub struct Harness {
    pub adapter: EmailAdapter,
    pub ctx: Arc<AdapterContext>,
    pub agents: Arc<Agents>,
    pub tasks: Arc<Tasks>,
}

impl Harness {
    pub fn new(settings: Vec<(&'static str, String)>) -> Self {
        Self::with_agents(settings, Agents::default())
    }

    pub fn with_agents(settings: Vec<(&'static str, String)>, agents: Agents) -> Self {
        let registry = Arc::new(AdapterRegistry::new());
        registry.insert(AdapterEntry::new(service_email::NAME, AdapterKind::Native));
        let (agents, tasks) = (Arc::new(agents), Arc::<Tasks>::default());
        let secrets = settings
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        let ctx = Arc::new(AdapterContext {
            config: ContextConfig {
                database_path: PathBuf::from("unused.db"),
                default_provider: "fake-provider".to_owned(),
                default_model: "fake-model".to_owned(),
            },
            data_dir: PathBuf::from("."),
            registry,
            tool_registry: None,
            agents: agents.clone(),
            approvals: Arc::new(service_contract::NoApprovals),
            secrets: Arc::new(MapSecrets(secrets)),
            tasks: tasks.clone(),
            feedback: Arc::new(NoFeedback),
        });
        Self {
            adapter: EmailAdapter::new(),
            ctx,
            agents,
            tasks,
        }
    }

    pub async fn start(&self) {
        self.adapter
            .start(&self.ctx)
            .expect("start is a hook")
            .await
            .expect("start never fails");
    }

    pub async fn stop(&self) {
        self.adapter
            .stop()
            .expect("stop is a hook")
            .await
            .expect("stop never fails");
    }

    pub fn entry(&self) -> AdapterEntry {
        self.ctx.registry.get(service_email::NAME).unwrap()
    }

    /// A count the adapter keeps in its entry's metadata (0 when not set yet).
    pub fn count(&self, key: &str) -> u64 {
        self.entry()
            .metadata
            .get(key)
            .map_or(0, |value| value.parse().unwrap())
    }

    /// Waits until the adapter has finished `more` polls after the current one, so whatever
    /// it was going to do with the mail there has been done.
    pub async fn polls_pass(&self, more: u64) {
        let target = self.count(service_email::metadata::POLLS) + more;
        wait_for(&format!("poll {target}"), || {
            (self.count(service_email::metadata::POLLS) >= target).then_some(())
        })
        .await;
    }
}

/// Polls `check` until it gives a value, for at most 20 seconds.
pub async fn wait_for<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    wait::eventually(what, Duration::from_secs(20), async || check()).await
}

/// A message as a mail client would write it, with CRLF line ends. `headers` go after the
/// standard ones, one per line.
pub fn mail(from: &str, subject: &str, message_id: &str, headers: &[&str], body: &str) -> String {
    let mut text = format!(
        "From: {from}\r\nTo: {BOT}\r\nSubject: {subject}\r\nMessage-ID: <{message_id}>\r\n\
         Date: Mon, 3 Nov 2025 10:00:00 +0000\r\nMIME-Version: 1.0\r\n"
    );
    for header in headers {
        text.push_str(header);
        text.push_str("\r\n");
    }
    if !headers.iter().any(|h| h.starts_with("Content-Type")) {
        text.push_str("Content-Type: text/plain; charset=utf-8\r\n");
    }
    text.push_str("\r\n");
    text.push_str(&body.replace('\n', "\r\n"));
    text
}
